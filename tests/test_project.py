"""Entry -> event + fragments: the seed's semantic-kind table (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from piwatchd.model.events import Entry
from piwatchd.model.project import HEAD_CHARS, MAX_FRAGMENT_CHARS, TAIL_CHARS, bound_text, project_entry

IMG = {"type": "image", "data": "U0VDUkVUSU1BR0U=", "mimeType": "image/png"}


def entry(data, etype=None, eid="e1"):
    return Entry(eid, None, etype or data["type"], 0, 0, 10, "f", data)


def frags(data):
    ev = project_entry("s", entry(data))
    return [(f.fragment_id, f.kind.value, f.text, f.meta) for f in ev.fragments]


def message(role, **fields):
    return {
        "type": "message",
        "id": "e1",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": role, **fields},
    }


CASES = [
    ("user string", message("user", content="hello"), [("text.0", "user.text", "hello", "")]),
    (
        "user blocks without image",
        message("user", content=[{"type": "text", "text": "a"}, IMG, {"type": "text", "text": "b"}]),
        [("text.0", "user.text", "a", ""), ("text.2", "user.text", "b", "")],
    ),
    (
        "assistant text, thinking excluded, calls normalized",
        message(
            "assistant",
            content=[
                {"type": "thinking", "thinking": "SECRET", "thinkingSignature": "sig"},
                {"type": "text", "text": "answer", "textSignature": "SIG"},
                {
                    "type": "toolCall",
                    "id": "c1",
                    "name": "read",
                    "arguments": {"path": "src/a.ts", "limit": 5},
                    "partialJson": '{"pa',
                },
            ],
        ),
        [("text.1", "assistant.text", "answer", ""), ("call.2", "tool.call", "path: src/a.ts\nlimit: 5", "read")],
    ),
    (
        "tool result with error, details ignored",
        message(
            "toolResult",
            toolCallId="c1",
            toolName="bash",
            isError=True,
            content=[{"type": "text", "text": "boom"}, IMG],
            details={"truncation": {"content": "SECRETTRUNC"}},
        ),
        [("result", "tool.result", "boom", "bash error")],
    ),
    (
        "tool result plain string content",
        message("toolResult", toolCallId="c", toolName="x", content="plain", isError=False),
        [("result", "tool.result", "plain", "x")],
    ),
    (
        "bash execution",
        message("bashExecution", command="ls -la", output="total 0", exitCode=0, cancelled=False, truncated=False),
        [("command", "bash.command", "ls -la", "bash"), ("output", "bash.output", "total 0", "bash")],
    ),
    (
        "legacy hookMessage",
        message("hookMessage", customType="hook", content="injected", display=True),
        [("custom", "custom.message", "injected", "hook")],
    ),
    ("system prompt excluded", message("system", content=[{"type": "text", "text": "SECRETSYSTEM"}]), []),
    ("developer excluded", message("developer", content="SECRETDEV"), []),
    (
        "custom_message",
        {
            "type": "custom_message",
            "id": "e1",
            "customType": "ext",
            "content": [{"type": "text", "text": "ctx"}, IMG],
            "display": False,
        },
        [("custom", "custom.message", "ctx", "ext")],
    ),
    (
        "custom entry never searchable",
        {"type": "custom", "id": "e1", "customType": "state", "data": {"x": "SECRETCUSTOM"}},
        [],
    ),
    (
        "compaction",
        {
            "type": "compaction",
            "id": "e1",
            "summary": "did things",
            "firstKeptEntryId": "a",
            "details": {"readFiles": ["SECRETPATH"]},
        },
        [("summary", "summary.compaction", "did things", "")],
    ),
    (
        "branch summary",
        {"type": "branch_summary", "id": "e1", "fromId": "x", "summary": "tried A"},
        [("summary", "summary.branch", "tried A", "")],
    ),
    (
        "session name normalized",
        {"type": "session_info", "id": "e1", "name": " Fix\r\n  auth "},
        [("name", "session.name", "Fix auth", "")],
    ),
    ("label has no fragment", {"type": "label", "id": "e1", "targetId": "a", "label": "checkpoint"}, []),
    ("model change", {"type": "model_change", "id": "e1", "provider": "p", "modelId": "m"}, []),
    ("thinking level", {"type": "thinking_level_change", "id": "e1", "thinkingLevel": "high"}, []),
    ("usage", {"type": "usage", "id": "e1", "kind": "turn", "provider": "p", "model": "m", "usage": {"input": 1}}, []),
    ("context edit", {"type": "context_edit", "id": "e1", "targetId": "a", "replacement": None}, []),
    ("unknown type", {"type": "future_thing", "id": "e1", "text": "SECRET"}, []),
    # oh-my-pi's entries
    (
        "omp session_init: its prompt and task never indexed",
        {"type": "session_init", "id": "e1", "systemPrompt": "SECRET", "task": "SECRET", "tools": ["read"]},
        [],
    ),
    ("omp mode change", {"type": "mode_change", "id": "e1", "mode": "plan", "data": {"planFile": "SECRET"}}, []),
    ("omp rule injection", {"type": "ttsr_injection", "id": "e1", "injectedRules": ["ruleA"]}, []),
    ("omp /clear boundary", {"type": "reset_boundary", "id": "e1"}, []),
    (
        "omp rename names the session",
        {"type": "title_change", "id": "e1", "title": " Fix\n auth ", "source": "user"},
        [("name", "session.name", "Fix auth", "")],
    ),
    (
        "omp image as a blob reference",
        message("user", content=[{"type": "text", "text": "see"}, {**IMG, "data": "blob:sha256:" + "0" * 64}]),
        [("text.0", "user.text", "see", "")],
    ),
]


OMP_CONTROLS = [
    ({"type": "mode_change", "mode": "plan", "data": {"planFile": "/p"}}, {"mode": "plan"}, "control"),
    ({"type": "ttsr_injection", "injectedRules": ["a", 3, "b"]}, {"injectedRules": ["a", "b"]}, "control"),
    ({"type": "reset_boundary"}, {"reset": True}, "control"),
    ({"type": "session_init", "systemPrompt": "P", "tools": ["read", "edit"]}, {"tools": ["read", "edit"]}, "metadata"),
    ({"type": "service_tier_change", "serviceTier": {"openai": "flex"}}, {}, "control"),
]


@pytest.mark.parametrize("data, meta, role", OMP_CONTROLS, ids=[c[0]["type"] for c in OMP_CONTROLS])
def test_omp_control_entries_are_typed_events(data, meta, role):
    ev = project_entry("s", entry({"id": "e1", **data}))
    assert (ev.meta, ev.context_role.value, ev.fragments) == (meta, role, ())


@pytest.mark.parametrize("name, data, expected", CASES, ids=[c[0] for c in CASES])
def test_projection_table(name, data, expected):
    assert frags(data) == expected


def test_typed_metadata_and_error_state():
    ev = project_entry("s", entry(message("toolResult", toolCallId="c9", toolName="edit", isError=True, content=[])))
    assert ev.is_error and ev.tool_names == ("edit",) and ev.meta["toolCallId"] == "c9"
    # No visible text, yet the result (and its error state) stays searchable by its meta words.
    assert [(f.fragment_id, f.text, f.meta) for f in ev.fragments] == [("result", "", "edit error")]
    call = project_entry(
        "s", entry(message("assistant", content=[{"type": "toolCall", "id": "c1", "name": "ls", "arguments": {}}]))
    )
    assert [(f.fragment_id, f.text, f.meta, f.call_id) for f in call.fragments] == [("call.0", "", "ls", "c1")]
    assert ev.context_role.value == "conversation"
    v1 = project_entry("s", entry({"type": "compaction", "summary": "s", "firstKeptEntryIndex": 293}))
    assert v1.meta["firstKeptEntryId"] == "v1-000293"
    ctx = project_entry("s", entry({"type": "context_edit", "targetId": "a", "replacement": None}))
    assert ctx.meta == {"targetId": "a", "omits": True} and ctx.context_role.value == "control"


def test_oversized_text_keeps_head_and_tail():
    text = "HEADWORD " + "x " * MAX_FRAGMENT_CHARS + " FINALERROR"
    head, tail, full = bound_text(text)
    assert len(head) == HEAD_CHARS and len(tail) == TAIL_CHARS and full == len(text)
    assert head.startswith("HEADWORD") and tail.endswith("FINALERROR")
    frag = project_entry("s", entry(message("user", content=text))).fragments[0]
    assert frag.truncated and "omitted by piwatch" in frag.display_text()


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20))
json_value = st.recursive(
    json_leaf,
    lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.text(max_size=8), c, max_size=4)),
    max_leaves=20,
)


@given(
    st.sampled_from(
        ["message", "custom_message", "compaction", "branch_summary", "session_info", "label", "custom", "x"]
    ),
    st.sampled_from(["user", "assistant", "toolResult", "bashExecution", "custom", "system", None]),
    json_value,
    json_value,
)
def test_projection_never_raises_and_is_deterministic(etype, role, content, extra):
    data = {
        "type": etype,
        "id": "e",
        "summary": content,
        "name": content,
        "content": content,
        "message": {"role": role, "content": content, "command": extra, "output": content, "arguments": extra},
    }
    a = project_entry("s", entry(data, etype))
    b = project_entry("s", entry(data, etype))
    assert a == b
    ids = [f.fragment_id for f in a.fragments]
    assert len(ids) == len(set(ids))
    for f in a.fragments:
        assert "\x02" not in f.text and "\x03" not in f.text
