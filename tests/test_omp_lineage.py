"""omp names a session's parent in `parentSession` two ways: `fork()` by the
parent's session id, a branch into a new file (`createBranchedSession`) by the
parent's file path. Written by the real omp (tests/omp/lineage.ts) and indexed
by a real piwatchd, both resolve to the parent where it is indexed and the
caller may see it, and to nothing where the caller may not."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.live import poll, q, searchable
from piwatch.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent / "omp"))
import omptools


def _header(path: Path) -> dict:
    with open(path) as fh:
        fh.readline()  # omp's title slot
        return json.loads(fh.readline())


def _parents(client: Client, session_id: str, entry_id: str) -> list[tuple[str, str | None, bool | None]]:
    """The recorded session-parent edges of a trace: (as recorded, the session it names, indexed)."""
    rels = client.trace(session_id, entry_id).relationships
    return [
        (r.target.ref or "", r.target.session_id, r.target.indexed)
        for r in rels
        if r.kind == "session-parent" and r.provenance == "recorded"
    ]


@pytest.mark.timeout(600)
def test_omp_parent_by_id_and_by_path_resolve_to_the_indexed_authorized_parent(live):
    parent_cwd, child_cwd = live.base / "parentproj", live.base / "childproj"
    for cwd in (parent_cwd, child_cwd):
        (cwd / ".git").mkdir(parents=True)
    files = omptools.write_lineage(
        live.root / "--parentproj--", parent_cwd, live.root / "--childproj--", child_cwd, live.base / "home"
    )
    headers = {name: _header(path) for name, path in files.items()}
    parent = headers["parent"]["id"]
    assert headers["fork"]["parentSession"] == parent  # the id spelling
    assert headers["branch"]["parentSession"] == str(files["parent"])  # the path spelling
    d = live.daemon()
    poll(lambda: all(searchable(live.db, f) for f in files.values()), 60, message="omp's sessions searchable")
    with open(files["parent"]) as fh:
        first, last = (json.loads(line)["id"] for line in fh.readlines()[2:4])  # the question, the answer
    # The fork copies both entries, the branch the path to the first: each one's fork point.
    shared = {"fork": last, "branch": first}

    sock = live.base / "d.sock"
    both = Client(sock, caller={"workspaceRoot": str(live.base)})
    child_only = Client(sock, caller={"cwd": str(child_cwd)})
    for name in ("fork", "branch"):
        child = headers[name]["id"]
        recorded = headers[name]["parentSession"]
        assert _parents(both, child, first) == [(recorded, parent, True)], name
        # The fork point is found in the parent: the last entry they share.
        anchors = [r.target for r in both.trace(child, first).relationships if r.kind == "fork-anchor"]
        assert [(t.session_id, t.entry_id) for t in anchors] == [(parent, shared[name])], name
        # A caller not authorized for the parent's project never learns it.
        assert _parents(child_only, child, first) == [], name
    # The parent's trace knows both children as its forks, whichever way each named it.
    for name, entry in shared.items():
        kids = [r.target.session_id for r in both.trace(parent, entry).relationships if r.kind == "fork-child"]
        assert kids == [headers[name]["id"]], name
        kids = [r.target.session_id for r in child_only.trace(headers[name]["id"], entry).relationships]
        assert parent not in kids, name
    # Each one's tree state is omp's own context reconstruction (the fork holds the parent's turns).
    direct = q(
        live.db,
        "SELECT src.path, e.entry_id FROM events e JOIN sessions s USING(session_key)"
        " JOIN sources src ON src.source_id = s.source_id WHERE e.selection_state = 'direct'",
    )
    omp = omptools.context_ids(list(files.values()), live.base / "home")
    assert {f: (set(ids), n) for f, (ids, n) in omp.items()} == {
        str(f): ({eid for path, eid in direct if path == str(f)}, 0) for f in files.values()
    }
    assert d.stop() == 0
