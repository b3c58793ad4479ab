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
from piwatch.client import Client, RequestFailed

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


def test_a_fork_capped_by_the_cutoff_shows_its_name_redacted_and_bounded(live):
    """`sessions` shows a fork of the caller's session by what its visible events
    say (its name as set before the cutoff): that name goes through the same rules
    and the same bound as every other session's (it was shown raw and whole)."""
    folder = live.root / FOLDER
    name = f"deploy with {AWS} " + "x" * 3000
    visible = [
        {"type": "session_info", "id": "n0", "parentId": None, "name": name},
        msg("u1", "n0", "user", "yak before the cutoff"),
        msg("a1", "u1", "assistant", [{"type": "text", "text": "yak cutoff"}]),
    ]
    later = [{"type": "session_info", "id": "n9", "parentId": "a1", "name": "later name"}]
    main = folder / "main.jsonl"
    main.write_bytes(jsonl(v3_header("s-main", "/work/proj"), *visible, *later))
    fork = folder / "fork.jsonl"
    fork.write_bytes(jsonl(v3_header("s-fork", "/work/proj", parentSession=str(main)), *visible, *later))
    d = live.daemon()
    poll(lambda: len(search_cli(live.db, "yak")) == 4, 30, message="the sessions indexed")
    caller = {"cwd": "/work/proj", "sessionId": "s-main", "sessionFile": str(main), "cutoffEntryId": "a1"}
    with Client(d.socket, caller=caller) as client:
        (item,) = client.sessions().sessions
        hits = client.search("yak", limit=50).hits
    assert d.stop() == 0
    assert item.session_id == "s-fork" and not leaked(item), item.name
    assert item.name is not None and item.name.startswith("deploy with [redacted: aws-access-key]")
    assert len(item.name) < 1100, len(item.name)  # SHORT_VALUE_CHARS and what says how much was cut
    assert hits and all(h.session_name == item.name for h in hits if h.session_id == "s-fork"), hits


def test_the_live_service_shows_its_errors_redacted(short_tmp):
    """`status` for the local CLI shows the running service's per-file errors and
    watch warnings, which quote session paths: through the same rules as the rest
    (the snapshot replaced the redacted service after redaction, and was shown raw)."""
    from piwatchd.ingest.scan import index_once
    from piwatchd.serve.api import Api, Live
    from piwatchd.serve.server import Server

    root = short_tmp / "sessions" / "a"
    root.mkdir(parents=True)
    (root / "s.jsonl").write_bytes(jsonl(v3_header("s", "/work/proj"), msg("e", None, "user", "yak")))
    db = short_tmp / "db.sqlite3"
    index_once(db, [str(short_tmp / "sessions")])
    bad = str(root / f"s-{GH}.jsonl")
    snapshot = wire.ServiceStatus(
        phase="idle", errors={bad: f"cannot read {bad}: denied"}, warnings=[f"cannot watch {bad}"]
    )
    api = Api(db, live=Live(service_snapshot=lambda: snapshot))
    server = Server(short_tmp / "run" / "s.sock", api.handle, hello=api.hello, on_connection_end=api.readers.reset)
    server.start()
    try:
        with Client(str(server.path), caller={"all": True}) as client:
            service = client.status().service
            with pytest.raises(RequestFailed):
                client.search("yak", caller={"cwd": "relative/not/a/root"})  # refused before its visibility
            refused = client.last_warnings
    finally:
        server.stop()
    assert service is not None and service.errors and service.warnings, service
    assert not leaked(service), leaked(service)
    # The envelope's warnings (the same watch warning) of an answer given before the caller is known.
    assert refused and not leaked(refused), refused


def test_read_and_trace_say_nothing_of_a_hidden_neighbours_secrets(live):
    """`omitted` lists each redacted field a read or trace shows: never one of a
    neighbour or child past the cutoff, which the caller does not see (its kind of
    secret was listed, at the index the hidden node had, before nodes were dropped)."""
    folder = live.root / FOLDER
    later_call = {"type": "toolCall", "id": "t9", "name": GH, "arguments": {"command": "ls"}}  # a recorded name
    main = folder / "main.jsonl"
    main.write_bytes(
        jsonl(
            v3_header("s-main", "/work/proj"),
            msg("u1", None, "user", "yak before the cutoff"),
            msg("a1", "u1", "assistant", [{"type": "text", "text": "yak cutoff"}]),
            msg("u2", "a1", "assistant", [{"type": "text", "text": "yak later"}, later_call]),
        )
    )
    d = live.daemon()
    poll(lambda: len(search_cli(live.db, "yak")) == 3, 30, message="the session indexed")
    caller = {"cwd": "/work/proj", "sessionId": "s-main", "sessionFile": str(main), "cutoffEntryId": "u2"}
    with Client(d.socket, caller=caller) as client:
        read = client.read("s-main", "u1", after=5)
        trace = client.trace("s-main", "a1")
        hidden = {"cwd": "/work/proj", "sessionId": "s-main", "sessionFile": str(main), "cutoffEntryId": "a1"}
        early = client.read("s-main", "u1", after=5, caller=hidden)
        early_trace = client.trace("s-main", "u1", caller=hidden)
    assert d.stop() == 0
    # The secret's neighbour shown (cutoff u2: u2 hidden too, so nothing at all of it).
    assert [n.entry_id for n in read.neighbours.after] == ["a1"]
    for shown in (read, trace, early, early_trace):
        notes = [o for o in shown.omitted or [] if o.kind == "redacted"]
        assert not notes, notes
    assert early.neighbours.after == [] and early_trace.children == []
