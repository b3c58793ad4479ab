"""An omp history of 200 sessions written by the real omp writer (tests/omp/write.ts,
omp's own SessionManager under Bun), indexed by a real piwatchd with one custom
type registered (`[[extract]]`): every planted token is found at exactly its
identity, no unregistered custom entry (nor a registered one's other field)
leaks into search, no system prompt, task or mode state is indexed, and the
turn before omp's `/clear` is out of the model's context, the one after in it:
the tree states equal omp's own context reconstruction (tests/omp/context.ts)."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
from helpers.live import FOLDER, poll, q, searchable
from piwatch.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent / "omp"))
import omptools

N = 200
FOUND = ("usertoken", "assistanttoken", "latertoken", "firsttoken", "secondtoken", "registeredtoken")
COMPACTED = ("compacttoken", "aftercompacttoken")  # odd sessions: a compaction after the /clear
NEVER = ("customtoken", "hiddentoken", "sysprompttoken", "tasktoken", "plantoken")
REGISTER = '[[extract]]\ncustom_type = "acme.notes"\nfields = ["data.summary"]\n'
TOKEN = re.compile(r"\b([a-z]+token\d+)\b")


def _planted(db: Path) -> dict[str, set[tuple[str, str]]]:
    """token -> the (session, entry) of every event whose line holds it, outside a
    rename's `previousTitle` (which names nothing): one read of each line."""
    found: dict[str, set[tuple[str, str]]] = {}
    rows = q(
        db,
        "SELECT s.session_id, e.entry_id, src.path, e.byte_offset, e.byte_len FROM events e"
        " JOIN sessions s USING(session_key) JOIN sources src ON src.source_id = s.source_id",
    )
    for sid, eid, path, offset, length in rows:
        with open(path, "rb") as fh:
            fh.seek(offset)
            line = json.loads(fh.read(length))
        line.pop("previousTitle", None)
        for token in set(TOKEN.findall(json.dumps(line))):
            found.setdefault(token, set()).add((sid, eid))
    return found


@pytest.mark.timeout(1200)
def test_two_hundred_real_omp_sessions(live, monkeypatch):
    config = live.base / "config.toml"
    config.write_text(REGISTER)
    monkeypatch.setenv("PIWATCH_CONFIG", str(config))
    files = omptools.write_sessions(live.root / FOLDER, "/work/proj", N, live.base / "home")
    assert len(files) == N
    started = time.monotonic()
    d = live.daemon()
    poll(lambda: all(searchable(live.db, f) for f in files), 300, message="omp's sessions searchable")
    print(
        f"\n{N} omp sessions ({sum(f.stat().st_size for f in files):,} bytes) searchable in {time.monotonic() - started:.1f} s"
    )
    assert q(live.db, "SELECT count(*), min(agent), max(agent) FROM sessions") == [(N, "omp", "omp")]
    assert q(live.db, "SELECT code FROM diagnostics") == []
    planted = _planted(live.db)
    missed, leaked, states = [], [], set()
    with Client(live.base / "d.sock", caller={"all": True}) as c:
        for i in range(N):
            for t in FOUND + (COMPACTED if i % 2 else ()):
                found = c.search(f"{t}{i}", limit=50).hits
                hits = {(h.session_id, h.entry_id) for h in found}
                if hits != planted.get(f"{t}{i}", set()) or not hits:
                    missed.append((f"{t}{i}", sorted(hits), sorted(planted.get(f"{t}{i}", ()))))
                states.update((t, h.selection_state) for h in found)
            for token in (f"{t}{i}" for t in NEVER):
                assert planted.get(token), token  # it is in the files
                if c.search(token, limit=5).hits:
                    leaked.append(token)
    assert missed == [], missed[:5]
    # omp's /clear in each session: the turn before it left the model's context, the one after is in it.
    # A compaction after it wins: the turn before both is summarized, the kept turn stays in.
    assert states == {
        ("usertoken", "omitted"),
        ("assistanttoken", "omitted"),
        ("usertoken", "summarized"),
        ("assistanttoken", "summarized"),
        ("compacttoken", "direct"),
        ("aftercompacttoken", "direct"),
        ("latertoken", "direct"),
        ("firsttoken", "not-applicable"),
        ("secondtoken", "not-applicable"),
        ("registeredtoken", "not-applicable"),
    }
    assert leaked == [], leaked[:5]
    # Tree states equal omp's own context reconstruction: the entries in the model's
    # context now are exactly those piwatch calls direct, in every session.
    omp = omptools.context_ids(files, live.base / "home")
    ours: dict[str, set[str]] = {}
    for path, eid in q(
        live.db,
        "SELECT src.path, e.entry_id FROM events e JOIN sessions s USING(session_key)"
        " JOIN sources src ON src.source_id = s.source_id WHERE e.selection_state = 'direct'",
    ):
        ours.setdefault(path, set()).add(eid)
    assert {f: (set(ids), unmatched) for f, (ids, unmatched) in omp.items()} == {
        str(f): (ours.get(str(f), set()), 0) for f in files
    }
    found = N * len(FOUND) + N // 2 * len(COMPACTED)
    print(f"{found} planted tokens found at their identity; {N * len(NEVER)} never found")
    assert d.stop() == 0
