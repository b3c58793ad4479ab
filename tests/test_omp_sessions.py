"""oh-my-pi (omp) sessions in the index: which agent wrote each (its root, or
omp's title slot wherever the file lies), and the slot's title as its name."""

from __future__ import annotations

import pytest
from conftest import jsonl, msg, v3_header
from helpers.omp import title_slot

from piwatchd.ingest.ingestor import Ingestor
from piwatchd.store.schema import open_writer
from piwatchd.store.writer import IndexWriter


@pytest.fixture
def index(short_tmp):
    conn = open_writer(short_tmp / "db.sqlite3")
    yield conn
    conn.close()


def _session(conn, sid: str) -> tuple[str, str | None]:
    return conn.execute("SELECT agent, name FROM sessions WHERE session_id=?", (sid,)).fetchone()


@pytest.mark.parametrize(
    ("slot", "in_omp_root", "agent", "name"),
    [
        (b"", False, "pi", None),  # Pi's
        (b"", True, "omp", None),  # omp's before the title slot (legacy): its root says so
        (title_slot("Fix the   parser"), False, "omp", "Fix the parser"),  # the slot says so anywhere
        (title_slot("key sk-ant-api03-" + "a" * 93), True, "omp", "key [redacted: anthropic-key]"),
        (title_slot(""), True, "omp", None),  # no title yet
    ],
)
def test_agent_and_name_of_a_session(index, short_tmp, slot, in_omp_root, agent, name):
    omp_root = short_tmp / "omp"
    path = (omp_root if in_omp_root else short_tmp / "pi") / "--w--" / "s.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(slot + jsonl(v3_header(), msg("a", None, "user", "hello")))
    Ingestor(IndexWriter(index), omp_roots=[str(omp_root)]).ingest(str(path))
    index.commit()
    assert _session(index, "s-1") == (agent, name)


NOTICE = "[Session persistence truncated large content]"
BLOB = {"type": "image", "data": "blob:sha256:" + "0" * 64, "mimeType": "image/png"}
READ_OMITS = [
    (
        "an image as a blob reference is an omitted image",
        msg("a", None, "user", [{"type": "text", "text": "see"}, BLOB]),
        [("message.content[1]", "image", "image/png", None)],
    ),
    (
        "a text block omp truncated",
        msg("a", None, "assistant", [{"type": "text", "text": "x" * 10 + NOTICE}]),
        [("message.content[0].text", "truncated", None, None)],
    ),
    (
        "a tool output omp truncated",
        msg("a", None, "toolResult", "out" + NOTICE, toolCallId="c", toolName="bash"),
        [("message.content", "truncated", None, None)],
    ),
    (
        "session_init's prompt and task",
        {"type": "session_init", "id": "a", "systemPrompt": "P", "task": "T", "tools": []},
        [("systemPrompt", "prompt", None, None), ("task", "prompt", None, None)],
    ),
    ("an untruncated text", msg("a", None, "user", "plain [Session text]"), []),
]


@pytest.mark.parametrize("name, data, expected", READ_OMITS, ids=[c[0] for c in READ_OMITS])
def test_read_says_what_omp_left_out(name, data, expected):
    from piwatchd.serve.ops.read import omitted_fields

    got = [(o.field, o.kind, o.mime_type, o.base64_chars) for o in omitted_fields(data)]
    assert got == expected


def test_a_clear_boundary_appended_later_omits_what_precedes_it(index, short_tmp):
    """omp's `/clear` (`reset_boundary`) appended to an indexed session: the turns before it
    leave the model's context (omitted, still on the selected path), the next one is in it."""
    path = short_tmp / "omp" / "--w--" / "s.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(
        title_slot("t") + jsonl(v3_header(), msg("u1", None, "user", "one"), msg("a1", "u1", "assistant", "two"))
    )
    ingestor = Ingestor(IndexWriter(index), omp_roots=[str(short_tmp / "omp")])

    def states() -> dict[str, tuple[str, str]]:
        ingestor.ingest(str(path))
        index.commit()
        rows = index.execute("SELECT entry_id, branch_state, selection_state FROM events")
        return {eid: (branch, selection) for eid, branch, selection in rows}

    assert states() == {"u1": ("selected", "direct"), "a1": ("selected", "direct")}
    with open(path, "ab") as fh:
        fh.write(jsonl({"type": "reset_boundary", "id": "r", "parentId": "a1"}, msg("u2", "r", "user", "three")))
    assert states() == {
        "u1": ("selected", "omitted"),
        "a1": ("selected", "omitted"),
        "r": ("selected", "not-applicable"),
        "u2": ("selected", "direct"),
    }
