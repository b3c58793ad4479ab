"""Every index of the read model is justified by a query plan that uses it.

A workload of real requests (indexing a session tree with tool calls, file
evidence, labels, edits and a fork; an append ingested incrementally; search
with every filter, sessions, read in both orders, trace, status) runs on both
text engines with every SQLite statement recorded as executed (parameters
bound). `EXPLAIN QUERY PLAN` of each must name every index of the schema at
least once (an index no plan uses costs disk and write time for nothing), and
no statement scans a per-event table whole.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from conftest import jsonl, msg, v3_header
from piwatch.client import Client, LocalTransport
from test_read_trace import SID, seed_session, ts

from piwatchd.ingest.scan import index_once
from piwatchd.store.catalog import descendants
from piwatchd.store.schema import open_reader, open_writer

FORK = "fork-1"


def _fork(parent: Path) -> bytes:
    """A fork of the seed session: Pi copies the entries up to the fork point with their ids."""
    seed = seed_session().splitlines()[1:4]  # A, B, C
    header = v3_header(FORK, cwd="/work/proj", parentSession=str(parent))
    tail = msg("G", "C", "user", [{"type": "text", "text": "golf fork question"}], ts(20))
    return jsonl(header) + b"\n".join(seed) + b"\n" + jsonl(tail)


def _appends() -> list[bytes]:
    """An assistant call, then its result, appended to the seed session one
    ingest apart: the incremental path (the call looked up in the index, the
    fast tree update)."""
    call = {"type": "toolCall", "id": "call-9", "name": "write", "arguments": {"path": "src/new.py", "content": "x"}}
    return [
        jsonl(msg("H", "X1", "assistant", [{"type": "text", "text": "hotel writes"}, call], ts(30))),
        jsonl(
            msg("I", "H", "toolResult", [{"type": "text", "text": "ok"}], ts(31), toolCallId="call-9", toolName="write")
        ),
    ]


def _requests(db: Path) -> None:
    caller = {"all": True}
    with Client(transport=LocalTransport(db), caller=caller) as c:
        for filters in (
            {},
            {"sessionId": [SID]},
            {"cwd": "/work/proj", "kind": ["assistant.text"], "role": ["assistant"]},
            {"cwdUnder": "/work", "sinceMs": 0, "untilMs": 2**62, "isError": False},
            {"files": ["/work/proj/src/app.py"], "fileMode": "read"},
            {"files": ["/work/proj/src"], "tool": ["edit"]},
            {"branchState": ["selected"], "selectionState": ["direct"], "eventType": ["message"]},
        ):
            c.search("branch", filters=filters)
        c.search("bravo answer", group="session")
        c.search('"golf fork"')
        c.sessions()
        c.sessions("alpha", cwd_under="/work")
        c.sessions(cwd="/work/proj")
        for entry in ("B", "E", "C", "I"):
            c.read(SID, entry, before=2, after=2, order="append")
            c.read(SID, entry, before=2, after=2, order="branch")
            c.trace(SID, entry)
        c.trace(FORK, "G")
        c.trace(FORK, "B")
        c.status()
    # A caller scoped to one workspace with a cutoff in its own session.
    scoped = {"workspaceRoot": "/work/proj", "sessionId": SID, "cutoffEntryId": "F"}
    with Client(transport=LocalTransport(db), caller=scoped) as c:
        c.search("branch")
        c.read(SID, "E", before=3, after=3)
        c.sessions()
        c.status()


def _workload(root: Path, engine: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    statements: list[str] = []
    real = sqlite3.connect

    def connect(*args, **kwargs):
        conn = real(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setenv("PIWATCH_ENGINE", engine)
    monkeypatch.setattr(sqlite3, "connect", connect)
    sessions = root / "sessions" / "--work-proj--"
    sessions.mkdir(parents=True)
    seed = sessions / "seed.jsonl"
    seed.write_bytes(seed_session())
    (sessions / "fork.jsonl").write_bytes(_fork(seed))
    db = root / "index.sqlite3"
    index_once(db, [str(root / "sessions")])
    for append in _appends():
        with seed.open("ab") as f:
            f.write(append)
        index_once(db, [str(root / "sessions")])
    _requests(db)
    monkeypatch.setattr(sqlite3, "connect", real)
    return db, statements


_PLANNED = re.compile(r"^\s*(WITH|SELECT|UPDATE|DELETE|INSERT\s.*\sSELECT\s)", re.IGNORECASE | re.DOTALL)


# The planner's statistics of a real history (ANALYZE of a 173 MB corpus
# written by the real Pi: 720 sessions, 80,586 events): a test index is tiny,
# and on a tiny table a scan is the right plan; these are the plans that
# matter, where the tables are large.
STATS = [
    ("events", "events_session_ordinal", "80586 112 1"),
    ("events", "events_session_parent", "80586 112 1"),
    ("events", "sqlite_autoindex_events_1", "80586 112 1"),
    ("file_evidence", "file_evidence_entry", "37230 52 2"),
    ("file_evidence", "file_evidence_path", "37230 2 2"),
    ("fragments", "fragments_call", "32410 1"),
    ("fragments", "sqlite_autoindex_fragments_1", "101102 2 1"),
    ("index_meta", "sqlite_autoindex_index_meta_1", "3 1"),
    ("relationships", "relationships_from", "33054 46 1"),
    ("relationships", "relationships_to", "33054 46 2"),
    ("sessions", "sessions_cwd", "720 24"),
    ("sessions", "sessions_cwd_real", "720 24"),
    ("sessions", "sessions_file", "720 1"),
    ("sessions", "sessions_fork", "24 1"),
    ("sessions", "sqlite_autoindex_sessions_1", "720 1"),
    ("sources", "sqlite_autoindex_sources_1", "720 1"),
    ("tree_facts", "tree_facts", "752 2 1"),
]


def _with_stats(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        conn.execute("ANALYZE")  # creates sqlite_stat1
        conn.execute("DELETE FROM sqlite_stat1")
        conn.executemany("INSERT INTO sqlite_stat1(tbl, idx, stat) VALUES (?,?,?)", STATS)
        conn.commit()
    finally:
        conn.close()


def _plans(db: Path, statements: list[str]) -> dict[str, list[str]]:
    """{statement: its plan's lines}, for the statements a plan can say something about."""
    _with_stats(db)
    conn = sqlite3.connect(db)
    try:
        out = {}
        for sql in dict.fromkeys(statements):
            if _PLANNED.match(sql) and "sqlite_" not in sql and "pragma_" not in sql.lower():
                out[sql] = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql)]
        return out
    finally:
        conn.close()


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    try:
        runs = {}
        for engine in ("tantivy", "fts5"):
            db, statements = _workload(tmp_path_factory.mktemp(engine), engine, mp)
            runs[engine] = (db, _plans(db, statements))
        yield runs
    finally:
        mp.undo()


def _indexes(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT name, tbl_name FROM sqlite_schema WHERE type = 'index'").fetchall()
    finally:
        conn.close()
    # FTS5's own shadow tables are the engine's business.
    return {name for name, table in rows if not table.startswith("fragments_fts")}


def _used(plans: dict[str, list[str]]) -> set[str]:
    found = set()
    for lines in plans.values():
        for line in lines:
            # A search, not a scan: an index is not justified by being the smallest thing to count.
            m = re.match(r"SEARCH .* USING (?:COVERING )?INDEX (\S+)", line)
            if m:
                found.add(m.group(1))
    return found


# UNIQUE constraints whose index exists to enforce them (ON CONFLICT targets),
# whether or not a lookup also uses it.
CONSTRAINTS = {
    "sqlite_autoindex_index_meta_1",
    "sqlite_autoindex_service_state_1",
}


def test_every_index_is_used_by_a_plan(planned):
    for _db, plans in planned.values():
        assert len(plans) > 50  # the workload ran
    used = set().union(*(_used(plans) for _, plans in planned.values()))
    unused = _indexes(planned["tantivy"][0]) - used - CONSTRAINTS
    assert not unused, f"indexes no query plan uses: {sorted(unused)}"


# What a plan may scan whole: the session catalog, a JSON id list, a recursive walk's queue.
_SCANNABLE = {"sessions", "s", "sources", "src", "json_each", "up", "lineage", "l", "text_debt", "d"}


def test_no_statement_scans_a_per_event_table(planned):
    """Every statement of the workload (ingest, feeds, requests) reaches events,
    fragments, relationships, file evidence and tree facts through an index:
    none costs a pass over the whole history."""
    for _, plans in planned.values():
        for sql, lines in plans.items():
            for line in lines:
                scan = re.match(r"(?:SCAN|MATERIALIZE) (?:main\.)?(\w+)", line)
                if scan is None or "INDEX" in line or scan.group(1).startswith("fragments_fts"):
                    continue  # FTS5's own tables are the engine's business
                if scan.group(1) not in _SCANNABLE:
                    raise AssertionError(f"{line} in {sql}")


@pytest.mark.parametrize(
    ("fragment", "index"),
    [
        ("FROM events WHERE session_key=(SELECT", "sqlite_autoindex_events_1"),
        ("AND e.parent_id=", "events_session_parent"),
        ("AND e.ordinal <", "events_session_ordinal"),
        ("FROM relationships r", "relationships_to"),
        ("FROM relationships WHERE session_key=", "relationships_from"),
        ("SELECT fe.path, fe.mode, fe.source", "file_evidence_entry"),
        ("SELECT e.event_rowid, fe.path, fe.mode", "file_evidence_entry"),
        ("(e.session_key, e.entry_id) IN (SELECT", "file_evidence_path"),
        ("f.call_id =", "fragments_call"),
        ("s.cwd_norm = ", "sessions_cwd"),
        ("c.parent_ref IN (SELECT value", "sessions_fork"),
        ("c.parent_ref IN (p.session_id", "sessions_fork"),
        ("p.file_ref = c.parent_ref", "sessions_file"),
    ],
)
def test_lookups_use_their_index(planned, fragment, index):
    """The lookups the tree, read, trace, the text feed and the filters make use the index meant for them."""
    seen = [(sql, lines) for _, plans in planned.values() for sql, lines in plans.items() if fragment in sql]
    assert seen, f"no statement with {fragment!r} ran"
    assert any(any(index in line for line in lines) for _, lines in seen), seen[:2]


def _fork_lookup_plan(conn: sqlite3.Connection) -> list[str]:
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    descendants(conn, "some-parent", ["/p/some-parent.jsonl"])
    conn.set_trace_callback(None)
    (sql,) = [s for s in statements if "WITH RECURSIVE lineage" in s]
    return [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql)]


def test_a_history_without_forks_still_finds_forks_through_their_index(tmp_path):
    """Most histories have no fork: every parent_ref is NULL. A full index
    of that column then has statistics saying one lookup returns every
    session (the 1 GB corpus: `4216 401`), and the planner walked every
    session in id order instead. The partial index has no such row: the
    lineage's seed and each of its steps search it."""
    conn = open_writer(tmp_path / "index.sqlite3", engine="fts5")
    n = 2000
    conn.executemany("INSERT INTO sources(source_id, path) VALUES (?, ?)", [(i, f"/p/{i}.jsonl") for i in range(n)])
    conn.executemany(
        "INSERT INTO sessions(session_id, source_id, cwd, cwd_norm, cwd_real, file_ref, format, version)"
        " VALUES (?,?,?,?,?,?,'v3',3)",
        [(f"s{i:05}", i, *[f"/work/proj{i % 30}"] * 3, f"/p/{i}.jsonl") for i in range(n)],
    )
    conn.execute("ANALYZE")  # the statistics of this history, as a real one has them
    conn.commit()
    conn.close()
    conn = open_reader(tmp_path / "index.sqlite3")
    try:
        plan = _fork_lookup_plan(conn)
    finally:
        conn.close()
    assert sum("USING INDEX sessions_fork" in line for line in plan) == 2, plan
    assert not any(re.match(r"SCAN (c|p|s)\b", line) for line in plan), plan
