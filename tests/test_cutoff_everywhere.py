"""Cutoff everywhere, against piwatchd as a real process (issue 16, row 5).

A caller with `sessionId` + `cutoffEntryId` (the Pi tool, called from inside
a session) may see its own session and every fork that copied it only up to
the cutoff. Everything about such a session is computed from its visible
events: its name (renamed after the cutoff), event count, time span
(`lastMs`), the `sessionName` on hits, the grouped session results, the
freshness (no later growth or ingest time) and the `status` counts. Variants:
the cutoff session itself, a fork recording its parent by path and one by id.

Every fork (issue 33, row 1): forks of forks to any depth, parents spelled
another way (`//dir/own.jsonl`, `/dir/./own.jsonl`, through a symlinked
directory), a fork branched through an entry written after the cutoff, forks
made before the cutoff (shown whole), 60 forks of one session, and forks
whose parent is not indexed: search, follow, read, trace, sessions and
status show nothing past the cutoff.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import FOLDER, poll, search_cli
from piwatch import wire
from piwatch.client import Client, RequestFailed
from piwatch.protocol import ErrorCode

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


# -- every fork (issue 33, row 1) -----------------------------------------------------

MARK = "postcutoff"  # in the text of every entry past the cutoff, in every session of the lineage
HIDDEN_MS = 1778320800000  # 2026-05-09T10:00:00Z: every entry past the cutoff is this late or later
MANY = 60


def later_ts(i: int) -> str:
    return f"2026-05-09T10:00:0{i}.000Z"


@dataclass
class Session:
    """A session file: its header, its entries and how many of them lead the
    caller's view (the rest lie past the cutoff)."""

    sid: str
    header: dict
    entries: list[dict]
    visible: int

    @property
    def hidden_ids(self) -> set[str]:
        return {e["id"] for e in self.entries[self.visible :]}

    def data(self) -> bytes:
        return jsonl(self.header, *self.entries)


def own_session() -> Session:
    """The caller's session: the cutoff `a1`, then later entries: a rename and,
    after a rewind to `u1`, a second branch (`mb1`) written after the cutoff."""
    later = [
        info("mn9", "a1", LATER, later_ts(0)),
        msg("mu2", "mn9", "user", f"gnu {MARK} in the caller's session", ts=later_ts(1)),
        msg("mb1", "u1", "user", f"gnu {MARK} on a branch rewound to u1", ts=later_ts(2)),
    ]
    return Session("s-main", v3_header("s-main", PROJ), [*visible_part(), *later], 2)


def branch_to(entries: list[dict], leaf: str) -> list[dict]:
    """The entries from the root to `leaf`: what a branched session copies."""
    by_id = {e["id"]: e for e in entries}
    path, at = [], leaf
    while at is not None:
        path.append(by_id[at])
        at = by_id[at]["parentId"]
    return path[::-1]


def fork(sid: str, parent: Session, parent_ref: str, upto: str | None = None) -> Session:
    """A fork as Pi writes one: the parent's entries copied with their ids (all
    of them as `pi --fork` does, or the branch from the root to `upto`), then
    entries of its own. From its first copy of an entry its parent hides on,
    nothing is visible; a fork that copied only visible entries is shown whole
    (what it wrote later is its own)."""
    copied = parent.entries if upto is None else branch_to(parent.entries, upto)
    hidden = parent.hidden_ids
    first_hidden = next((i for i, e in enumerate(copied) if e["id"] in hidden), None)
    header, last = v3_header(sid, PROJ, parentSession=parent_ref), copied[-1]["id"]
    if first_hidden is None:
        own = [msg(f"{sid}-o1", last, "user", f"gnu own words of {sid}", ts="2026-05-02T10:00:00.000Z")]
        return Session(sid, header, [*copied, *own], len(copied) + 1)
    own = [
        info(f"{sid}-n", last, LATER, later_ts(3)),
        msg(f"{sid}-o1", f"{sid}-n", "user", f"gnu {MARK} written in {sid}", ts=later_ts(4)),
    ]
    return Session(sid, header, [*copied, *own], first_hidden)


def lineage(folder: Path, linked: Path) -> list[tuple[Path, Session]]:
    """The caller's session and every kind of fork of it, each with its file."""
    own, main = own_session(), folder / "main.jsonl"
    out = [(main, own)]

    def add(name: str, session: Session) -> tuple[Path, Session]:
        out.append((folder / f"{name}.jsonl", session))
        return out[-1]

    p1, c1 = add("c1", fork("s-c1", own, str(main)))
    p2, c2 = add("c2", fork("s-c2", c1, str(p1)))  # a fork of a fork
    add("c3", fork("s-c3", c2, str(p2)))  # three deep
    add("dslash", fork("s-dslash", own, "/" + str(main)))  # //dir/own.jsonl
    add("dot", fork("s-dot", own, f"{folder}/./main.jsonl"))  # /dir/./own.jsonl
    add("link", fork("s-link", own, str(linked / "main.jsonl")))  # through a symlinked directory
    add("dotdot", fork("s-dotdot", c1, f"{folder}/../{FOLDER}/c1.jsonl"))  # a fork of a fork, spelled
    add("branch", fork("s-branch", own, str(main), upto="mb1"))  # through a later branch, not the cutoff
    add("early", fork("s-early", own, str(main), upto="u1"))  # made before the cutoff: shown whole
    add("c1early", fork("s-c1early", c1, str(p1), upto="u1"))
    for i in range(MANY):
        add(f"many{i:02}", fork(f"s-many{i:02}", own, str(main)))
    return out


def other_session() -> Session:
    entry = msg("o1", None, "user", "gnu in an unrelated session", ts="2026-05-05T10:00:00.000Z")
    return Session("s-other", v3_header("s-other", PROJ), [entry], 1)


def gnu_entries(sessions, *, visible_only: bool) -> set[tuple[str, str]]:
    """The (session, entry) pairs holding the word `gnu`, all or only those the caller may see."""
    return {
        (s.sid, e["id"])
        for s in sessions
        for e in (s.entries[: s.visible] if visible_only else s.entries)
        if "gnu" in json.dumps(e.get("message", {}))
    }


def all_hits(client: Client, query: str, filters: dict | None = None) -> list[wire.Hit]:
    hits: list[wire.Hit] = []
    while True:
        page = client.search(query, filters=filters, limit=wire.MAX_LIMIT, offset=len(hits))
        hits += page.hits
        if not page.has_more:
            return hits


def wait_indexed(client: Client, sessions) -> None:
    """Until a caller who sees everything finds every `gnu` entry (searchable, not just committed)."""
    want = gnu_entries(sessions, visible_only=False)
    poll(lambda: {(h.session_id, h.entry_id) for h in all_hits(client, "gnu")} == want, 60, message="all indexed")


def assert_nothing_later(value, hidden: set[str]) -> None:
    text = json.dumps(wire.to_builtins(value))
    for word in (LATER, MARK, "2026-05-09", *(f'"{eid}"' for eid in hidden)):
        assert word not in text, (word, text[:2000])


@dataclass
class Forks:
    client: Client
    sessions: dict[str, Session]
    hidden: set[str]  # every entry id past the cutoff (hidden wherever it is copied)

    @property
    def shown(self) -> list[Session]:
        return [s for s in self.sessions.values() if s.sid != "s-main"]


@pytest.fixture(params=["every file", "c1 not indexed"])
def forks(live, request):
    """The lineage; or without `c1`, so that its forks (`c2`, `dotdot`,
    `c1early`) name a session not indexed (a fork indexed before its parent,
    or whose parent was removed): no lineage walk reaches them or theirs."""
    folder = live.root / FOLDER
    linked = live.base / "linked"
    linked.symlink_to(folder)
    files = [*lineage(folder, linked), (folder / "other.jsonl", other_session())]
    if request.param == "c1 not indexed":
        files = [(path, session) for path, session in files if session.sid != "s-c1"]
    for path, session in files:
        path.write_bytes(session.data())
    d = live.daemon()
    sessions = {s.sid: s for _, s in files}
    with Client(d.socket, caller={"all": True}) as everyone:
        wait_indexed(everyone, sessions.values())
    caller = {"cwd": PROJ, "sessionId": "s-main", "sessionFile": str(folder / "main.jsonl"), "cutoffEntryId": "a1"}
    with Client(d.socket, caller=caller) as client:
        yield Forks(client, sessions, set().union(*(s.hidden_ids for s in sessions.values())))
    assert d.stop() == 0


def test_search_finds_nothing_past_the_cutoff_in_any_fork(forks):
    client = forks.client
    assert client.search(MARK, limit=wire.MAX_LIMIT).hits == []
    hits = all_hits(client, "gnu")
    assert {(h.session_id, h.entry_id) for h in hits} == gnu_entries(forks.shown, visible_only=True)
    named = ["s-main", "s-c3", "s-dslash", "s-link", "s-branch", f"s-many{MANY - 1:02}"]
    targeted = all_hits(client, "gnu", {"sessionId": named})
    want = gnu_entries([forks.sessions[sid] for sid in named], visible_only=True)
    assert {(h.session_id, h.entry_id) for h in targeted} == want
    grouped = client.request("search", {"query": "gnu", "group": "session", "limit": wire.MAX_LIMIT})
    assert {s.session_id for s in grouped.sessions} == {s.sid for s in forks.shown}
    for item in grouped.sessions:
        assert item.session_name == (None if item.session_id == "s-other" else EARLY), item
    assert_nothing_later([hits, targeted, grouped], forks.hidden)


def test_read_and_trace_show_nothing_past_the_cutoff_in_any_fork(forks):
    client = forks.client
    for session in forks.sessions.values():
        if session.sid == "s-other":
            continue
        for eid in session.hidden_ids:
            for op in (client.read, client.trace):
                with pytest.raises(RequestFailed) as err:
                    op(session.sid, eid)
                assert err.value.code == ErrorCode.NOT_FOUND, (session.sid, eid)
        for order in ("append", "branch"):
            read = client.read(session.sid, "u1", before=10, after=10, order=order)
            assert_nothing_later(read, forks.hidden)
        assert_nothing_later(client.trace(session.sid, "u1"), forks.hidden)
        assert_nothing_later(client.trace(session.sid, "n0"), forks.hidden)


def test_sessions_and_status_count_nothing_past_the_cutoff_in_any_fork(forks):
    client = forks.client
    listed = client.sessions(limit=wire.MAX_SESSIONS_LIMIT)
    items = {s.session_id: s for s in listed.sessions}
    assert set(items) == {s.sid for s in forks.shown}
    for session in forks.shown:
        item = items[session.sid]
        assert item.events == session.visible and item.last_ms < HIDDEN_MS, item
        assert item.name == (None if session.sid == "s-other" else EARLY), item
    assert_nothing_later(listed, forks.hidden)
    status = client.status()
    assert status.sessions == len(forks.sessions)
    assert status.events == sum(s.visible for s in forks.sessions.values())
    assert_nothing_later(status, forks.hidden)


def test_follow_delivers_nothing_past_the_cutoff_from_any_fork(live):
    """Forks written after the follow began, a fork of a fork of a fork
    indexed before the sessions it descends through: only what the caller
    may see arrives, up to a later event of another session."""
    folder = live.root / FOLDER
    linked = live.base / "linked"
    linked.symlink_to(folder)
    (main, own), *rest = lineage(folder, linked)
    other = other_session()
    main.write_bytes(own.data())
    (folder / "other.jsonl").write_bytes(other.data())
    d = live.daemon()
    caller = {"cwd": PROJ, "sessionId": "s-main", "sessionFile": str(main), "cutoffEntryId": "a1"}
    with Client(d.socket, caller={"all": True}) as everyone, Client(d.socket, caller=caller) as client:
        wait_indexed(everyone, [own, other])
        with client.follow("gnu") as follow:
            forks = [s for _, s in rest]
            orphan = next(i for i, (_, s) in enumerate(rest) if s.sid == "s-c3")
            rest.insert(0, rest.pop(orphan))  # indexed before the sessions it descends through
            for i, (path, session) in enumerate(rest):
                path.write_bytes(session.data())
                if i == 0:
                    wait_indexed(everyone, [own, other, session])
            wait_indexed(everyone, [own, other, *forks])
            with (folder / "other.jsonl").open("ab") as f:
                f.write(jsonl(msg("o2", "o1", "user", "gnu sentinel", ts="2026-05-06T10:00:00.000Z")))
            got: set[tuple[str, str]] = set()
            for update in follow.updates(timeout=30):
                got |= {(h.session_id, h.entry_id) for h in update.hits}
                assert_nothing_later(update, set().union(*(s.hidden_ids for s in [own, *forks])))
                if ("s-other", "o2") in got:
                    break
    assert got == gnu_entries(forks, visible_only=True) | {("s-other", "o2")}
    assert d.stop() == 0


def long_session() -> Session:
    """A caller's session with a cutoff far back: 100 entries before it, 300
    after it, and a branch rewound to `v50` written after it."""
    entries, parent = [], None
    for name, count in (("v", 100), ("cut", 1), ("h", 300)):
        for i in range(count):
            eid = name if count == 1 else f"{name}{i}"
            entries.append(msg(eid, parent, "user", f"gnu {name} {i}"))
            parent = eid
    entries += [msg(f"r{i}", "v50" if i == 0 else f"r{i - 1}", "user", f"gnu r {i}") for i in range(10)]
    return Session("s-long", v3_header("s-long", PROJ), entries, 100)


@pytest.mark.parametrize("walk_max", [0, 10**9])
def test_the_walk_and_the_bisection_find_the_same_caps(tmp_path, monkeypatch, walk_max):
    """A parent hiding many entries (a cutoff far back) is not walked entry
    by entry: each fork it does not hold the first hidden entry of is
    bisected. Both ways find each fork's first copy of a hidden entry."""
    from piwatchd.ingest.scan import index_once
    from piwatchd.serve import visibility
    from piwatchd.serve.auth import CallerScope
    from piwatchd.store.schema import open_reader

    monkeypatch.setattr(visibility, "WALK_MAX", walk_max)
    folder = tmp_path / "sessions" / FOLDER
    folder.mkdir(parents=True)
    own, main = long_session(), folder / "main.jsonl"
    branch = fork("s-branch", own, str(main), upto="r9")  # v0..v50, then r0 (after the cutoff)
    early = fork("s-early", own, str(main), upto="v70")
    sessions = [
        own,
        fork("s-full", own, str(main)),
        early,
        branch,
        fork("s-before", own, str(main), upto="v99"),
        Session("s-new", v3_header("s-new", PROJ, parentSession=str(main)), [msg("x", None, "user", "gnu")], 1),
        fork("s-branch-fork", branch, str(folder / "s-branch.jsonl")),
        fork("s-early-fork", early, str(folder / "s-early.jsonl")),
    ]
    for session in sessions:
        (folder / ("main.jsonl" if session is own else f"{session.sid}.jsonl")).write_bytes(session.data())
    db = tmp_path / "index.sqlite3"
    index_once(db, [str(tmp_path / "sessions")])
    conn = open_reader(db)
    try:
        scope = CallerScope(roots=None, current_session="s-long", current_file=str(main), cutoff_entry="cut")
        caps = dict(visibility.Visibility(conn, scope).search_caps())
    finally:
        conn.close()
    assert caps == {s.sid: s.visible for s in sessions if s.visible < len(s.entries)}
    assert (caps["s-full"], caps["s-branch"], caps["s-branch-fork"]) == (100, 51, 51)


@pytest.mark.parametrize(
    "recorded, cwd, want",
    [
        ("/a/sessions/own.jsonl", "/work/proj", "/a/sessions/own.jsonl"),
        ("//a/sessions/own.jsonl", "/work/proj", "/a/sessions/own.jsonl"),
        ("///a//sessions///own.jsonl", None, "/a/sessions/own.jsonl"),
        ("/a/sessions/./own.jsonl", None, "/a/sessions/own.jsonl"),
        ("/a/x/../sessions/own.jsonl", None, "/a/sessions/own.jsonl"),
        ("/a/sessions/own.jsonl/", None, "/a/sessions/own.jsonl"),
        ("own.jsonl", "/work/proj", "/work/proj/own.jsonl"),
        ("./s/own.jsonl", "//work/proj/", "/work/proj/s/own.jsonl"),
        ("../s/own.jsonl", "/work/proj", "/work/s/own.jsonl"),
        ("s/own.jsonl", None, "s/own.jsonl"),
        ("s/../own.jsonl", "relative/cwd", "relative/cwd/own.jsonl"),
        ("0198c4c6-8e1f-7000-9c3e-6b0f8a6d2e11", "/work/proj", "0198c4c6-8e1f-7000-9c3e-6b0f8a6d2e11"),
        ("s-main", None, "s-main"),
        ("", "/work/proj", None),
    ],
)
def test_a_parent_reference_as_pi_means_it(recorded, cwd, want):
    from piwatchd.model.lineage import normal_ref

    assert normal_ref(recorded, cwd) == want


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
