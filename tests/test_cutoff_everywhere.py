"""Cutoff everywhere, against piwatchd as a real process (issue 16, row 5).

A caller with `sessionId` + `cutoffEntryId` (the Pi tool, called from inside
a session) may see its own session and every fork that copied it only up to
the cutoff. Everything about such a session is computed from its visible
events: its name (renamed after the cutoff), event count, time span
(`lastMs`), the `sessionName` on hits, the grouped session results, the
freshness (no later growth or ingest time) and the `status` counts. Variants:
the cutoff session itself, a fork recording its parent by path and one by id.
"""

from __future__ import annotations

import json

import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import FOLDER, poll, search_cli
from piwatch import wire
from piwatch.client import Client

pytestmark = pytest.mark.timeout(120)

PROJ = "/work/proj"
EARLY, LATER = "early-name", "secret-later-name"


def info(eid: str, parent: str, name: str, ts: str) -> dict:
    return {"type": "session_info", "id": eid, "parentId": parent, "timestamp": ts, "name": name}


def visible_part() -> list[dict]:
    """Entries up to the cutoff `a1` (the assistant entry holding the invoking
    tool call: it and everything after it are hidden)."""
    return [
        info("n0", None, EARLY, "2026-05-01T10:00:01.000Z"),
        msg("u1", "n0", "user", "gnu wildebeest question", ts="2026-05-01T10:00:02.000Z"),
        msg(
            "a1",
            "u1",
            "assistant",
            [{"type": "toolCall", "id": "t1", "name": "event_search", "arguments": {"query": "wildebeest"}}],
            ts="2026-05-01T10:00:03.000Z",
        ),
    ]


def hidden_part(prefix: str) -> list[dict]:
    """What happened after the cutoff: a rename and later events, days later."""
    return [
        info(f"{prefix}n9", "a1", LATER, "2026-05-09T10:00:00.000Z"),
        msg(f"{prefix}u2", f"{prefix}n9", "user", "gnu wildebeest after the cutoff", ts="2026-05-09T10:00:01.000Z"),
        msg(f"{prefix}u3", f"{prefix}u2", "user", "more later gnu talk", ts="2026-05-09T10:00:02.000Z"),
    ]


VISIBLE_LAST_MS = 1777629602000  # 2026-05-01T10:00:02Z, u1: the last entry before the cutoff


@pytest.fixture
def world(live):
    folder = live.root / FOLDER
    main = folder / "main.jsonl"
    main.write_bytes(jsonl(v3_header("s-main", PROJ), *visible_part(), *hidden_part("m")))
    by_path = folder / "fork-path.jsonl"
    by_path.write_bytes(jsonl(v3_header("s-fork-p", PROJ, parentSession=str(main)), *visible_part(), *hidden_part("p")))
    by_id = folder / "fork-id.jsonl"
    by_id.write_bytes(jsonl(v3_header("s-fork-i", PROJ, parentSession="s-main"), *visible_part(), *hidden_part("i")))
    other = folder / "other.jsonl"
    other_entry = msg("o1", None, "user", "gnu in an unrelated session", ts="2026-05-05T10:00:00.000Z")
    other.write_bytes(jsonl(v3_header("s-other", PROJ), other_entry))
    d = live.daemon()
    poll(lambda: len(search_cli(live.db, "gnu")) == 10, 30, message="all four sessions indexed")
    caller = {"cwd": PROJ, "sessionId": "s-main", "sessionFile": str(main), "cutoffEntryId": "a1"}
    with Client(d.socket, caller=caller) as client:
        yield client, {"s-main": main, "s-fork-p": by_path, "s-fork-i": by_id}
    assert d.stop() == 0


CAPPED = ("s-fork-p", "s-fork-i")


def no_later_facts(value) -> None:
    text = json.dumps(value)
    assert LATER not in text and "2026-05-09" not in text and "after the cutoff" not in text, text


def test_sessions_lists_forks_as_of_the_cutoff(world):
    client, _ = world
    result = client.sessions()
    items = {s.session_id: s for s in result.sessions}
    assert set(items) == {*CAPPED, "s-other"}  # the caller's own session is never listed
    for sid in CAPPED:
        s = items[sid]
        assert (s.name, s.events, s.last_ms) == (EARLY, 2, VISIBLE_LAST_MS), s
        no_later_facts(s.first_ms)
    assert items["s-other"].events == 1
    # Ordered and filtered by what the caller may see: s-other (May 5) is newer than the forks as of
    # the cutoff (May 1), though the forks went on until May 9.
    assert [s.session_id for s in result.sessions] == ["s-other", *sorted(CAPPED)]
    since = client.request("sessions", {"sinceMs": 1777800000000})  # 2026-05-03
    assert [s.session_id for s in since.sessions] == ["s-other"]
    no_later_facts([{"name": s.name, "lastMs": s.last_ms} for s in result.sessions])


@pytest.mark.parametrize("targeted", [False, True])
def test_hits_and_freshness_carry_only_visible_facts(world, targeted):
    client, paths = world
    filters = {"sessionId": ["s-main", *CAPPED]} if targeted else None
    result = client.search("gnu", filters=filters, limit=50)
    got = {(h.session_id, h.entry_id) for h in result.hits}
    want = {(sid, "u1") for sid in CAPPED} | ({("s-main", "u1")} if targeted else {("s-other", "o1")})
    assert got == want  # nothing past the cutoff, in the session or its forks
    for hit in result.hits:
        if hit.session_id != "s-other":
            assert hit.session_name == EARLY, hit
    fresh = {f.session_id: f for f in client.last_freshness.sessions}
    for sid in got:
        if sid[0] == "s-other":
            continue
        f = fresh[sid[0]]
        data = paths[sid[0]].read_bytes()
        line_start = data.rindex(b"\n", 0, data.index(b'"id": "a1"')) + 1  # the cutoff entry's line
        assert (f.indexed_bytes, f.file_bytes, f.complete, f.ms_since_ingest) == (line_start, line_start, True, None)
    no_later_facts([h.session_name for h in result.hits])


def test_grouped_sessions_are_described_as_of_the_cutoff(world):
    client, _ = world
    result = client.request("search", {"query": "gnu", "group": "session", "filters": {"sessionId": list(CAPPED)}})
    assert {s.session_id for s in result.sessions} == set(CAPPED)
    for s in result.sessions:
        assert s.session_name == EARLY and s.last_timestamp.startswith("2026-05-01T10:00:02"), s
        assert s.evidence.session_name == EARLY
    no_later_facts([[s.session_name, s.last_timestamp, s.first_timestamp] for s in result.sessions])


def test_status_counts_only_visible_events_and_bytes(world):
    client, paths = world
    status = client.status()
    # s-main, two forks (2 visible events each) and s-other (1 event); what lies past the cutoff is not counted.
    assert (status.sessions, status.events) == (4, 3 * 2 + 1)
    # Bytes: the capped files up to their cutoff entry, the other file whole; never their later growth.
    visible = [p.read_bytes() for p in paths.values()]
    ends = [data.rindex(b"\n", 0, data.index(b'"id": "a1"')) + 1 for data in visible]
    other = (next(iter(paths.values())).parent / "other.jsonl").stat().st_size
    assert (status.bytes.files, status.bytes.ingested, status.bytes.backlog) == (
        sum(ends) + other,
        sum(ends) + other,
        0,
    )
    no_later_facts(wire.to_builtins(status))


@pytest.mark.parametrize(
    "values, rows, want",
    [
        ({}, [("a", 5), ("b", None)], [5, None]),
        ({"a": 1}, [("a", 5), ("b", 7)], [1, 7]),
        ({"a": None, "b": 2}, [("a", 5), ("b", 7), ("c", 9)], [None, 2, 9]),
    ],
)
def test_overridden_column(values, rows, want):
    import sqlite3

    from piwatchd.text.query import overridden

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE sessions (session_id TEXT, last_ms INTEGER)")
    conn.executemany("INSERT INTO sessions VALUES (?, ?)", rows)
    sql, params = overridden("s.last_ms", values)
    got = [r[0] for r in conn.execute(f"SELECT {sql} FROM sessions s ORDER BY s.session_id", params)]
    assert got == want
