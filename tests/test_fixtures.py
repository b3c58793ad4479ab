"""The real Pi sessions vendored in tests/fixtures index without loss."""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import copy_fixture, fixture_bytes, fixture_names

from piwatchd.ingest.scan import index_once

V1 = "pi-mono-v1"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    root = tmp_path_factory.mktemp("fx")
    sessions = root / "sessions" / "--Users-badlogic-workspaces-pi-mono--"
    sessions.mkdir(parents=True)
    names = fixture_names(V1) + fixture_names("third-party")
    assert len(names) == 4, names  # a missing fixture fails here, never silently shrinks the test
    for name in names:
        copy_fixture(name, sessions / name.split("/")[-1])
    # The FTS5 engine keeps the indexed text in SQLite, where these tests can
    # inspect exactly what the projection stored (Tantivy keeps none there).
    mp = pytest.MonkeyPatch()
    mp.setenv("PIWATCH_ENGINE", "fts5")
    summary = index_once(root / "db.sqlite3", [str(root / "sessions")])
    mp.undo()
    conn = sqlite3.connect(root / "db.sqlite3")
    yield summary, conn, sessions
    conn.close()


def source_lines(name):
    """The JSON lines of a fixture (by name) or of a file (by path)."""
    data = name.read_bytes() if hasattr(name, "read_bytes") else fixture_bytes(name)
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


@pytest.mark.parametrize("name, aborted_calls", [("before-compaction.jsonl", 6), ("large-session.jsonl", 18)])
def test_v1_fixture_indexes_without_loss(indexed, name, aborted_calls):
    _summary, conn, _ = indexed
    lines = source_lines(f"{V1}/{name}")
    sid = lines[0]["id"]
    entries = lines[1:]
    types = {}
    for e in entries:
        types[e["type"]] = types.get(e["type"], 0) + 1
    got = dict(
        conn.execute(
            "SELECT type, count(*) FROM events WHERE session_key=(SELECT session_key FROM sessions WHERE session_id=?) GROUP BY type",
            (sid,),
        ).fetchall()
    )
    assert got == types  # every entry, message or not, is one event
    roles = {}
    for e in entries:
        if e["type"] == "message":
            roles[e["message"]["role"]] = roles.get(e["message"]["role"], 0) + 1
    assert (
        dict(
            conn.execute(
                "SELECT role, count(*) FROM events WHERE session_key=(SELECT session_key FROM sessions WHERE session_id=?) AND type='message' GROUP BY role",
                (sid,),
            ).fetchall()
        )
        == roles
    )
    # Tool calls and results pair up by toolCallId; the leftovers are the aborted calls.
    calls = {
        r[0]
        for r in conn.execute(
            "SELECT f.call_id FROM fragments f JOIN events e USING(event_rowid) WHERE e.session_key=(SELECT session_key FROM sessions WHERE session_id=?) AND f.kind='tool.call'",
            (sid,),
        )
    }
    results = {
        r[0]
        for r in conn.execute(
            "SELECT json_extract(detail, '$.toolCallId') FROM relationships WHERE kind='tool-result-for'"
            " AND session_key=(SELECT session_key FROM sessions WHERE session_id=?)",
            (sid,),
        )
    }
    assert results <= calls
    assert len(calls - results) == aborted_calls


def test_v1_compaction_first_kept_index_resolves(indexed):
    _, conn, _ = indexed
    sid = source_lines(f"{V1}/before-compaction.jsonl")[0]["id"]
    metas = [
        json.loads(m)
        for (m,) in conn.execute(
            "SELECT meta FROM events WHERE session_key=(SELECT session_key FROM sessions WHERE session_id=?) AND type='compaction'",
            (sid,),
        )
    ]
    assert len(metas) == 2
    lines = source_lines(f"{V1}/before-compaction.jsonl")
    for meta in metas:
        kept = meta["firstKeptEntryId"]
        row = conn.execute(
            "SELECT type, ordinal FROM events WHERE session_key=(SELECT session_key FROM sessions WHERE session_id=?) AND entry_id=?",
            (sid, kept),
        ).fetchone()
        assert row is not None, kept
        # The id points at exactly the line Pi's index names (header = index 0).
        index = int(kept.split("-")[1])
        assert lines[index]["type"] == row[0] and row[1] == index - 1


def test_branched_from_and_thirdparty_files(indexed):
    summary, conn, _ = indexed
    assert summary["problems"] == []
    parent = conn.execute(
        "SELECT parent_session FROM sessions WHERE session_id='ffae836b-9420-4060-ac13-7745215f90ff'"
    ).fetchone()[0]
    assert parent.endswith("d97339c6-6c10-4827-846b-9ff1d9c3dc37.jsonl")
    # The irregular OpenClaw file indexes what it can: every line is an event.
    irregular = source_lines("third-party/openclaw-irregular.jsonl")
    n = conn.execute(
        "SELECT count(*) FROM events WHERE session_key=(SELECT session_key FROM sessions WHERE session_id=?)",
        (irregular[0]["id"],),
    ).fetchone()[0]
    assert n == len(irregular) - 1
    small = source_lines("third-party/pi-v3-small.jsonl")
    ids = {
        r[0]
        for r in conn.execute(
            "SELECT entry_id FROM events WHERE session_key=(SELECT session_key FROM sessions WHERE session_id=?)",
            (small[0]["id"],),
        )
    }
    assert ids == {e["id"] for e in small[1:]}


def test_fixture_events_record_source_locators(indexed):
    _, conn, sessions = indexed
    path = sessions / "large-session.jsonl"
    data = path.read_bytes()
    sid = source_lines(path)[0]["id"]
    for offset, length in conn.execute(
        "SELECT byte_offset, byte_len FROM events WHERE session_key=(SELECT session_key FROM sessions WHERE session_id=?) ORDER BY ordinal",
        (sid,),
    ):
        line = data[offset : offset + length]
        assert line.endswith(b"\n") and json.loads(line)["type"]


def test_no_image_bytes_or_details_in_index(indexed):
    _, conn, _ = indexed
    # `details.truncation.content` duplicates 102 KB of visible text in this fixture; it must not be stored twice.
    total = conn.execute("SELECT sum(length(body) + coalesce(length(tail), 0)) FROM fragments").fetchone()[0]
    assert total < 3_400_000
    assert conn.execute("SELECT count(*) FROM fragments WHERE body LIKE '%thinkingSignature%'").fetchone()[0] == 0
