"""The real oh-my-pi writer as an oracle: sessions written by omp's own
SessionManager (tests/omp/write.ts, Bun from npm) indexed by a real piwatchd.
Every planted token is found at its identity, the system prompt, the task and
the mode's state never are, each session is named by its last title and says
it is omp's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.live import FOLDER, PIWATCH, poll, q, search_cli, searchable

sys.path.insert(0, str(Path(__file__).resolve().parent / "omp"))
import omptools

N = 4


def _entry_of(db, token: str) -> set[tuple[str, str]]:
    """(session, entry) of every event whose line holds `token` (outside a rename's
    `previousTitle`, which names nothing), found by the index's own byte ranges."""
    rows = q(
        db,
        "SELECT s.session_id, e.entry_id, src.path, e.byte_offset, e.byte_len FROM events e"
        " JOIN sessions s USING(session_key) JOIN sources src ON src.source_id = s.source_id",
    )
    found = set()
    for sid, eid, path, offset, length in rows:
        with open(path, "rb") as fh:
            fh.seek(offset)
            line = json.loads(fh.read(length))
            line.pop("previousTitle", None)
            if token in json.dumps(line):
                found.add((sid, eid))
    return found


@pytest.mark.timeout(600)
def test_real_omp_sessions_are_indexed_as_written(live):
    files = omptools.write_sessions(live.root / FOLDER, "/work/proj", N, live.base / "home")
    assert len(files) == N
    d = live.daemon()
    poll(lambda: all(searchable(live.db, f) for f in files), 60, message="omp's sessions searchable")
    assert q(live.db, "SELECT count(*) FROM sessions") == [(N,)]
    for i in range(N):
        for token in (f"usertoken{i}", f"assistanttoken{i}", f"latertoken{i}", f"firsttoken{i}", f"secondtoken{i}"):
            hits = set(search_cli(live.db, token))
            assert hits == _entry_of(live.db, token) != set(), token
        for token in (f"sysprompttoken{i}", f"tasktoken{i}", f"plantoken{i}"):
            assert search_cli(live.db, token) == [], token
    assert sorted(r[0] for r in q(live.db, "SELECT name FROM sessions")) == [
        f"Renamed {i} secondtoken{i}" for i in range(N)
    ]
    assert {r[0] for r in q(live.db, "SELECT agent FROM sessions")} == {"omp"}
    types = {r[0] for r in q(live.db, "SELECT DISTINCT type FROM events")}
    assert {"session_init", "mode_change", "ttsr_injection", "title_change", "reset_boundary"} <= types
    assert q(live.db, "SELECT code FROM diagnostics") == []
    out = subprocess.run(
        [PIWATCH, "search", "--db", str(live.db), "--json", "usertoken0"], capture_output=True, text=True
    )
    assert [h.get("agent") for h in json.loads(out.stdout)["hits"]] == ["omp"]
    assert d.stop() == 0
