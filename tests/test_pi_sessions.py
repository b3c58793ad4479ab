"""Sessions written by the real Pi (1.6.0 and 0.73.1) index exactly as the
seed's projection table says: every searchable marker is found at its entry
with its kind, and no private or non-searchable marker is ever found."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import copy_fixture
from piwatch.client import Client, LocalTransport
from piwatch.wire import to_builtins

from piwatchd.ingest.scan import index_once

pitools = pytest.importorskip("pi.pitools")

pytestmark = [pytest.mark.pi, pytest.mark.timeout(900)]


@pytest.fixture(scope="module", params=pitools.PI_VERSIONS)
def scenario_index(request, tmp_path_factory):
    pitools.ensure_installed()
    out = tmp_path_factory.mktemp(f"scn-{request.param}")
    manifest = pitools.scenarios(out, request.param)
    db = out / "index.sqlite3"
    summary = index_once(db, [manifest["sessionsDir"]])
    return manifest, db, summary


def _client(db):
    """The daemon's api on this index, in-process (every session visible)."""
    return Client(transport=LocalTransport(db), caller={"all": True})


def _hits(db, query, **filters):
    with _client(db) as c:
        return to_builtins(c.search(query, filters=filters, limit=200).hits)


def test_every_entry_type_indexes_without_problems(scenario_index):
    manifest, db, summary = scenario_index
    assert summary["problems"] == []
    conn = sqlite3.connect(db)
    for f in manifest["files"]:
        ids = [
            r[0]
            for r in conn.execute(
                "SELECT entry_id FROM events WHERE session_key=(SELECT session_key FROM sessions WHERE session_id=?) ORDER BY ordinal",
                (f["sessionId"],),
            )
        ]
        # One event per entry id, in file order (Pi's duplicate-id rule keeps the first position).
        assert ids == list(dict.fromkeys(f["entryIds"])), f["scenario"]
        leaf = conn.execute("SELECT leaf_id FROM sessions WHERE session_id=?", (f["sessionId"],)).fetchone()[0]
        assert leaf == f["entryIds"][-1]


def test_searchable_markers_are_found_at_their_entry_and_kind(scenario_index):
    manifest, db, _ = scenario_index
    checked = 0
    for f in manifest["files"]:
        for m in f["markers"]:
            if not m["expectSearchable"]:
                continue
            hits = _hits(db, m["marker"], sessionId=[f["sessionId"]])
            found = {(h["entryId"], h["evidence"]["kind"]) for h in hits}
            assert (m["entryId"], m["expectedKind"]) in found, (f["scenario"], m, found)
            checked += 1
    assert checked >= 50


def test_private_and_non_searchable_markers_are_never_found(scenario_index):
    manifest, db, _ = scenario_index
    checked = 0
    for f in manifest["files"]:
        for m in f["markers"]:
            if m["expectSearchable"]:
                continue
            assert _hits(db, m["marker"]) == [], m
            if m.get("needle"):
                assert _hits(db, m["needle"]) == [], m
            checked += 1
    assert checked >= 10
    # Nothing non-searchable was stored either (not just unranked).
    conn = sqlite3.connect(db)
    for secret in ("SECRETTHINK", "SECRETSYSTEM", "SECRETCUSTOM", "SECRETTRUNC", "SECRETDETAILS", "SECRETSIGN"):
        n = conn.execute(
            "SELECT count(*) FROM fragments WHERE body LIKE ? OR tail LIKE ?", (f"%{secret}%",) * 2
        ).fetchone()[0]
        assert n == 0, secret


def test_forks_keep_lineage(scenario_index):
    manifest, db, _ = scenario_index
    conn = sqlite3.connect(db)
    forks = [f for f in manifest["files"] if f["scenario"] in ("fork-branched", "fork-from")]
    assert forks
    for f in forks:
        recorded = conn.execute("SELECT parent_session FROM sessions WHERE session_id=?", (f["sessionId"],)).fetchone()[
            0
        ]
        assert recorded and recorded == f["parentSession"]


def test_fork_anchor_is_the_end_of_the_shared_prefix(scenario_index):
    manifest, db, _ = scenario_index

    def trace_event(db, args):
        with _client(db) as c:
            return to_builtins(c.trace(args["sessionId"], args["entryId"]))

    by_id = {f["sessionId"]: f for f in manifest["files"]}
    fork = next(f for f in manifest["files"] if f["scenario"] == "fork-from")
    parent = next(f for f in manifest["files"] if f["path"] == fork["parentSession"])
    shared = []
    for eid in fork["entryIds"]:
        if eid not in parent["entryIds"]:
            break
        shared.append(eid)
    assert shared
    edges = trace_event(db, {"sessionId": fork["sessionId"], "entryId": fork["entryIds"][0]})["relationships"]
    anchors = [e["target"] for e in edges if e["kind"] == "fork-anchor"]
    assert anchors == [{"sessionId": parent["sessionId"], "entryId": shared[-1], "indexed": True}]
    back = trace_event(db, {"sessionId": parent["sessionId"], "entryId": shared[-1]})["relationships"]
    assert {"sessionId": fork["sessionId"], "entryId": shared[-1], "indexed": True} in [
        e["target"] for e in back if e["kind"] == "fork-child"
    ]
    assert by_id


@pytest.mark.parametrize("pi", pitools.PI_VERSIONS)
def test_v1_file_then_pi_migration(tmp_path, pi):
    """Index a v1 file (positional ids), let the real Pi migrate it in place,
    reindex: the session is rebuilt with Pi's new ids and nothing stale remains."""
    pitools.ensure_installed()
    folder = tmp_path / "sessions" / "--Users-badlogic-workspaces-pi-mono--"
    folder.mkdir(parents=True)
    path = folder / "large-session.jsonl"
    copy_fixture("pi-mono-v1/large-session.jsonl", path)
    db = tmp_path / "db.sqlite3"
    index_once(db, [str(tmp_path / "sessions")])
    conn = sqlite3.connect(db)
    before = conn.execute("SELECT count(*), min(entry_id) FROM events").fetchone()
    assert before[1] == "v1-000001"
    assert conn.execute("SELECT format FROM sessions").fetchone()[0] == "v1"
    migrated = pitools.migrate(path, pi)
    assert migrated["oldVersion"] == 1 and migrated["newVersion"] == 3
    index_once(db, [str(tmp_path / "sessions")])
    after_ids = [r[0] for r in conn.execute("SELECT entry_id FROM events ORDER BY ordinal")]
    assert conn.execute("SELECT format FROM sessions").fetchone()[0] == "v3"
    assert after_ids == migrated["entryIds"]
    assert len(after_ids) == before[0]
    assert not any(i.startswith("v1-") for i in after_ids)
    hits = _hits(db, '"theme.md in full"')
    assert [h["entryId"] for h in hits] == [migrated["entryIds"][3]]
