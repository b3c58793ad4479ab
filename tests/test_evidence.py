"""An event's file evidence (`store/evidence.py`): its own rows, and a tool
result's share of its call's through its tool-result-for edge, on the real
schema. Table-driven: each case is rows written and the evidence each
holder must read."""

from __future__ import annotations

import pytest

from piwatchd.model.redact import Rules
from piwatchd.store.evidence import event_files_sql
from piwatchd.store.schema import open_writer

CALL = ("c1", "read", "tool-call", "recorded")


def _evidence(entry, path, mode="read", source="tool-call", provenance="recorded", call="c1"):
    return (1, entry, path, mode, source, provenance, path.rsplit("/", 1)[-1], "read", call)


def _edge(entry, target, call="c1", kind="tool-result-for"):
    return (1, entry, kind, target, None, "recorded", f'{{"toolCallId": "{call}"}}')


CASES = [
    # A result shares its call's tool-call rows for its own call id, as derived tool-result rows.
    (
        "result shares its call's",
        [_evidence("A", "/p/a.py"), _evidence("A", "/p/b.py", mode="changed")],
        [_edge("R", "A")],
        {
            "A": {("/p/a.py", "read", "tool-call", "recorded"), ("/p/b.py", "changed", "tool-call", "recorded")},
            "R": {("/p/a.py", "read", "tool-result", "derived"), ("/p/b.py", "changed", "tool-result", "derived")},
        },
    ),
    # Only the rows of the result's own call id: a message with two calls.
    (
        "one call of two",
        [_evidence("A", "/p/a.py", call="c1"), _evidence("A", "/p/z.py", call="c2")],
        [_edge("R", "A", call="c2")],
        {"R": {("/p/z.py", "read", "tool-result", "derived")}},
    ),
    # Only a tool-result-for edge shares: a label on the call (its detail naming the id) takes nothing.
    (
        "other edges share nothing",
        [_evidence("S", "/p/s.py")],
        [_edge("L", "S", kind="labels")],
        {"S": {("/p/s.py", "read", "tool-call", "recorded")}, "L": set()},
    ),
    # A result's own evidence stays beside what it shares.
    (
        "own and shared",
        [_evidence("A", "/p/a.py"), _evidence("R", "/p/own.py", source="tool-result", call=None)],
        [_edge("R", "A")],
        {"R": {("/p/a.py", "read", "tool-result", "derived"), ("/p/own.py", "read", "tool-result", "recorded")}},
    ),
]


@pytest.fixture
def conn(tmp_path):
    conn = open_writer(tmp_path / "db.sqlite3", Rules(), engine="fts5")
    conn.execute("INSERT INTO sources(source_id, path) VALUES (1, '/s.jsonl')")
    conn.execute(
        "INSERT INTO sessions(session_key, session_id, source_id, format, version) VALUES (1, 's', 1, 'v3', 3)"
    )
    for entry, ordinal in (("A", 1), ("R", 2), ("S", 3), ("L", 4)):
        conn.execute(
            "INSERT INTO events(session_key, entry_id, ordinal, type, byte_offset, byte_len, fingerprint,"
            " context_role) VALUES (1, ?, ?, 'message', 0, 1, 'f', 'conversation')",
            (entry, ordinal),
        )
    yield conn
    conn.close()


@pytest.mark.parametrize(("name", "evidence", "edges", "expected"), CASES, ids=[c[0] for c in CASES])
def test_event_files(conn, name, evidence, edges, expected):
    conn.executemany("INSERT INTO file_evidence VALUES (?,?,?,?,?,?,?,?,?)", evidence)
    conn.executemany(
        "INSERT INTO relationships(session_key, entry_id, kind, target_entry_id, target_ref, provenance, detail)"
        " VALUES (?,?,?,?,?,?,?)",
        edges,
    )
    columns = "fe.path, fe.mode, {source}, {provenance}"
    by_entry = event_files_sql(columns, "{h}.session_key = 1 AND {h}.entry_id = ?")
    by_rowid = event_files_sql("e.entry_id, " + columns, "e.event_rowid = ?", events=True)
    for entry, rows in expected.items():
        assert set(conn.execute(by_entry, (entry, entry)).fetchall()) == rows
        rowid = conn.execute("SELECT event_rowid FROM events WHERE entry_id = ?", (entry,)).fetchone()[0]
        assert {r[1:] for r in conn.execute(by_rowid, (rowid, rowid))} == rows
    # The files filter's holders: every event holding evidence on a path.
    holders = event_files_sql("{h}.entry_id", "fe.path = ?")
    for path in {row[0] for rows in expected.values() for row in rows}:
        want = {entry for entry, rows in expected.items() if any(r[0] == path for r in rows)}
        assert {r[0] for r in conn.execute(holders, (path, path))} >= want
