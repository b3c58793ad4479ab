"""Redaction for every field, against piwatchd as a real process (issue 16, row 9).

Indexed text is redacted when indexed, `read` and `trace` redact their whole
payload; but hits, `sessions`, `status` and warnings also show values copied
from session files: a cwd, a tool name, a session name, a source path, a
`duplicate` error quoting a session id. A token in any of them is shown as
the same `[redacted: kind]` marker, for a workspace caller and for `all`.
Session ids stay as recorded (they are keys a caller sends back), so the
duplicated id below only carries the token inside a longer id.
"""

from __future__ import annotations

import json

import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import FOLDER, poll, search_cli
from piwatch import wire
from piwatch.client import Client

pytestmark = pytest.mark.timeout(120)

GH = "ghp_pLaNtEd4x9Q2vL7mN3bK8tR5wY1cZ6dF0gH2J"
AWS = "AKIAQ3PLANTEDZX7WY4M"
CWD = f"/work/proj-{GH}"
DUP = f"dup-{AWS}"


def leaked(value) -> list[str]:
    """The secrets found in a result outside its id fields and its `scope`
    (the caller's own root, echoed back as the caller sent it)."""

    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k not in ("sessionId", "parentSession", "scope")}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    text = json.dumps(strip(wire.to_builtins(value)), ensure_ascii=False)
    return [s for s in (GH, AWS) if s in text]


@pytest.fixture
def world(live):
    folder = live.root / FOLDER
    call = {"type": "toolCall", "id": "t1", "name": GH, "arguments": {"command": "ls"}}
    (folder / "cwd.jsonl").write_bytes(
        jsonl(
            v3_header("s-cwd", CWD),
            {"type": "session_info", "id": "n0", "parentId": None, "name": f"deploy with {AWS}"},
            msg("u1", "n0", "user", "yak shaving starts"),
            msg("a1", "u1", "assistant", [{"type": "text", "text": "yak call"}, call]),
            msg("r1", "a1", "toolResult", [{"type": "text", "text": "yak result"}], toolCallId="t1", toolName=GH),
        )
    )
    for n, stamp in ((1, "2026-05-01T10:00:00.000Z"), (2, "2026-05-02T10:00:00.000Z")):
        header = {**v3_header(DUP, "/work/other"), "timestamp": stamp}
        (folder / f"dup{n}.jsonl").write_bytes(jsonl(header, msg(f"d{n}", None, "user", f"yak copy {n}")))
    d = live.daemon()
    poll(lambda: len(search_cli(live.db, "yak")) == 4, 30, message="the sessions indexed")
    yield d
    assert d.stop() == 0


@pytest.mark.parametrize("caller", [{"all": True}, {"cwd": CWD}], ids=["all", "workspace"])
def test_recorded_values_are_redacted_in_every_answer(world, caller):
    with Client(world.socket, caller=caller) as client:
        result = client.search("yak", limit=50)
        assert {h.session_id for h in result.hits} >= {"s-cwd"}
        assert not leaked(result), leaked(result)
        tool_hits = [h for h in result.hits if h.evidence.tool_name]
        assert tool_hits and all(h.evidence.tool_name == "[redacted: github-token]" for h in tool_hits)
        assert all(h.cwd == "/work/proj-[redacted: github-token]" for h in result.hits if h.session_id == "s-cwd")
        grouped = client.request("search", {"query": "yak", "group": "session"})
        assert grouped.sessions and not leaked(grouped), leaked(grouped)
        listing = client.sessions()
        assert "s-cwd" in {s.session_id for s in listing.sessions} and not leaked(listing), leaked(listing)
        (mine,) = [s for s in listing.sessions if s.session_id == "s-cwd"]
        assert mine.name == "deploy with [redacted: aws-access-key]"
        status = client.status()
        assert not leaked(status), leaked(status)
        read = client.read("s-cwd", "a1")
        assert not leaked(read), leaked(read)
        assert not leaked(client.trace("s-cwd", "r1"))


def test_a_duplicate_id_diagnostic_is_redacted(world):
    with Client(world.socket, caller={"all": True}) as client:

        def duplicate():
            problems = client.status().sources.problems
            return [p for p in problems if p.state == "duplicate"]

        (problem,) = poll(duplicate, 15, message="the duplicate reported")
        assert "[redacted: aws-access-key]" in (problem.error or ""), problem
        assert not leaked(client.status()), leaked(client.status())
