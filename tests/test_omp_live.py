"""oh-my-pi (omp) sessions under a real piwatchd: the title slot omp rewrites
in place while the session grows renames the session, never rebuilds it, and
loses no event. Files are written in omp's documented format."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import jsonl, v3_header
from helpers.live import FOLDER, PIWATCH, entry_ids, line, no_diagnostics, poll, q, search_cli, searchable
from helpers.omp import title_slot


def _name(db) -> str | None:
    rows = q(db, "SELECT name FROM sessions WHERE session_id='s-1'")
    return rows[0][0] if rows else None


def _rowids(db) -> list[int]:
    return [r[0] for r in q(db, "SELECT event_rowid FROM events ORDER BY ordinal")]


def _retitle(path, title: str) -> None:
    """omp's `updateSessionTitle`: the slot's 256 bytes written over the file's first ones.
    Rewritten until the file's mtime moves: a write within the clock tick of the
    last one leaves it where it was, and nothing could tell that write happened."""
    before = os.stat(path).st_mtime_ns
    while True:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, title_slot(title), 0)
        finally:
            os.close(fd)
        if os.stat(path).st_mtime_ns != before:
            return


@pytest.mark.timeout(90)
def test_title_slot_rewritten_during_appends_renames_without_rebuild(live):
    live.path.write_bytes(title_slot("first title") + jsonl(v3_header()) + line("e0", None, "alpha walrus"))
    d = live.daemon()
    poll(lambda: entry_ids(live.db) == ["e0"] and _name(live.db) == "first title", message="initial index")
    first = _rowids(live.db)
    ids, parent = ["e0"], "e0"
    for i in range(1, 25):
        eid = f"e{i}"
        with open(live.path, "ab") as fh:
            fh.write(line(eid, parent, f"word{i} heron"))
        ids.append(eid)
        parent = eid
        if i % 3 == 0:  # renamed as lines are appended, before the daemon settles
            _retitle(live.path, f"title {i}")
        if i % 8 == 0:  # renamed alone: the same size, a new mtime
            poll(lambda: len(entry_ids(live.db)) == len(ids), message=f"append {i}")
            _retitle(live.path, f"alone {i}")
            poll(lambda i=i: _name(live.db) == f"alone {i}", message=f"rename {i} alone")
    poll(
        lambda: entry_ids(live.db) == ids and _name(live.db) == "alone 24" and searchable(live.db, live.path),
        message="every append searchable, last title",
    )
    # Never rebuilt: the first event kept its row, and every byte was ingested once.
    assert _rowids(live.db)[:1] == first
    size = os.path.getsize(live.path)
    assert q(live.db, "SELECT consumed, bytes_ingested FROM sources") == [(size, size)]
    assert no_diagnostics(live.db)
    assert search_cli(live.db, "word17") == [("s-1", "e17")]
    # A Pi session beside it: each hit and session says which agent wrote it (Pi: no field, no mark).
    (live.root / FOLDER / "pi.jsonl").write_bytes(jsonl(v3_header("s-2")) + line("p0", None, "alpha piper"))
    poll(lambda: search_cli(live.db, "piper"), message="the Pi session")
    hits = json.loads(_cli(live.db, "search", "--json", "alpha"))["hits"]
    assert sorted((h["sessionId"], h.get("agent")) for h in hits) == [("s-1", "omp"), ("s-2", None)]
    shown = _cli(live.db, "search", "alpha")
    assert "/work/proj [omp]" in shown and shown.count("[omp]") == 1, shown
    listed = _cli(live.db, "sessions", "--all")
    assert listed.count("/work/proj [omp]  alone 24") == 1 and listed.count("[omp]") == 1, listed
    assert d.stop() == 0


def _cli(db, command: str, *args: str) -> str:
    out = subprocess.run([PIWATCH, command, "--db", str(db), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout
