"""Hostile sizes against piwatchd as a real process (issue 16, rows 1-2).

One entry with tens of thousands of file-reading tool calls, and lines of
hundreds of megabytes (sparse files: no disk is spent), must cost linear
work and bounded memory, must never hold back the appends of other
sessions, and must never be read again once passed. Variants: sizes, a
giant first line (no session at all) and a giant line inside a session, a
restart after kill -9 in the middle of the work.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import FOLDER, Daemon, poll, q, stretched
from piwatch.client import Client
from piwatch.transports import SocketTransport
from piwatch.wire import ServiceStatus

from piwatchd.model.project import MAX_FRAGMENTS_PER_EVENT
from piwatchd.model.relations import MAX_PATHS_PER_EVENT
from piwatchd.text.tantivy.feed import MAX_REPAY_ATTEMPTS
from piwatchd.text.tantivy.index import text_dir

pytestmark = pytest.mark.timeout(180)


def many_reads(sid: str, calls: int, word: str) -> bytes:
    """A session whose assistant entry reads `calls` files, then a user entry saying `word`."""
    blocks = [
        {"type": "toolCall", "id": f"c{i}", "name": "read", "arguments": {"path": f"src/p{i % 40}/f{i}.ts"}}
        for i in range(calls)
    ]
    return jsonl(
        v3_header(sid),
        msg("u1", None, "user", "read every file"),
        msg("a1", "u1", "assistant", blocks, stopReason="toolUse"),
        msg("u2", "a1", "user", f"{word} after the reads"),
    )


class PeakRss:
    """Samples a process's RSS every 20 ms until stopped."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.02)  # the sampling period of a measurement; decides nothing

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def client(d) -> Client:
    return Client(transport=SocketTransport(str(d.socket)), caller={"all": True})


@pytest.mark.parametrize("calls", [3_000, 20_000])
def test_one_entry_with_thousands_of_file_reads_costs_linear_work(live, calls):
    d = live.daemon()
    rss = PeakRss(d.proc.pid)
    started = time.monotonic()
    live.path.write_bytes(many_reads("s-many", calls, "osprey"))
    with client(d) as c:
        poll(lambda: c.search("osprey", exact=True).hits, 60, message="the entry after the reads")
        seconds = time.monotonic() - started
        peak = rss.stop()
        # Generous against a loaded CI machine; README's figure is the measured one.
        assert seconds < stretched(15), seconds
        assert peak < 300 * 2**20, peak >> 20
        # The first files read are filters; the ones past the cap are not (said by diagnostics and read).
        assert [
            h.entry_id for h in c.search("ts", filters={"files": ["/work/proj/src/p1/f1.ts"]}, exact=True).hits
        ] == ["a1"]
        late = f"/work/proj/src/p{(calls - 1) % 40}/f{calls - 1}.ts"
        assert c.search("ts", filters={"files": [late]}, exact=True).hits == []
        read = c.read("s-many", "a1")
        assert len(read.content) == calls  # read shows every call
        notes = [o for o in read.omitted or [] if o.kind == "not-indexed"]
        assert notes and str(MAX_FRAGMENTS_PER_EVENT) in notes[0].reason
    diagnostics = live_diagnostics(live.db)
    assert any("fragments are searchable" in m for m in diagnostics), diagnostics
    assert any(f"first {MAX_PATHS_PER_EVENT} paths" in m for m in diagnostics), diagnostics


def live_diagnostics(db) -> list[str]:
    return [r[0] for r in q(db, "SELECT message FROM diagnostics WHERE code = 'capped'")]


def test_restart_after_kill9_in_the_middle_of_huge_entries_is_ready_in_seconds(live):
    # Many files of huge entries: a kill lands while they are being indexed.
    for n in range(6):
        (live.root / FOLDER / f"m{n}.jsonl").write_bytes(many_reads(f"s-m{n}", 20_000, f"heron{n}"))
    d = live.daemon(wait=False)
    try:
        poll(lambda: ((d.state() or ServiceStatus()).files_ingested or 0) >= 1, 60, message="ingest under way")
    finally:
        d.kill9()
    started = time.monotonic()
    d2 = live.daemon()
    with client(d2) as c:
        for n in range(6):
            poll(lambda n=n: c.search(f"heron{n}", exact=True).hits, 60, message=f"session {n} after restart")
    assert time.monotonic() - started < stretched(30)


def _append_latencies(live, d, rounds: int = 5) -> list[float]:
    """Seconds from an append to a session in use until a search finds it."""
    out = []
    with client(d) as c:
        for i in range(rounds):
            word = f"zebra{i}q"
            with open(live.path, "ab") as fh:
                fh.write(jsonl(msg(f"z{i}", "a", "user", word)))
            started = time.monotonic()
            poll(lambda w=word: c.search(w, exact=True).hits, 30, interval=0.005, message=word)
            out.append(time.monotonic() - started)
    return out


@pytest.mark.parametrize(
    ("header", "gib"),
    [(False, 0.25), (True, 0.25), (True, 1.0)],
    ids=["no-session-256M", "in-session-256M", "in-session-1G"],
)
def test_a_giant_line_never_holds_back_other_sessions(live, header, gib):
    live.path.write_bytes(jsonl(v3_header("s-1"), msg("a", None, "user", "alpha walrus")))
    d = live.daemon()
    big = live.root / FOLDER / "big.jsonl"
    with open(big, "wb") as fh:
        if header:
            fh.write(jsonl(v3_header("s-big"), msg("x", None, "user", "before the giant")))
        fh.truncate(int(gib * 2**30))  # a sparse file of NULs: one giant line, no disk used
        if header:
            fh.seek(0, 2)
            fh.write(b"\n" + jsonl(msg("y", "x", "user", "gannet after the giant")))
    rss = PeakRss(d.proc.pid)
    latencies = _append_latencies(live, d)
    # The goal is 1 s (README); a loaded CI machine gets slack, never the 64 s this once took.
    assert max(latencies) < stretched(3), latencies
    with client(d) as c:
        if header:
            poll(lambda: c.search("gannet", exact=True).hits, 60, message="the entry after the giant line")
            assert any("longer than 64 MiB" in m for (m,) in q(live.db, "SELECT message FROM diagnostics")), (
                "the skipped line is reported"
            )
        else:
            poll(lambda: _problem(live.db, big), 30, message="the giant file reported")
    assert rss.stop() < 300 * 2**20
    # Never read again: a restart re-proves the checkpoint by its hashes and reads no byte of it.
    d.stop()
    d2 = live.daemon()
    assert d2.state().bytes_ingested == 0


def _problem(db, path) -> str | None:
    rows = q(db, "SELECT state, error FROM sources WHERE path = ?", str(path))
    return rows[0][1] if rows and rows[0][0] == "unsupported" else None


def _owe(db, session_id: str, attempts: int) -> None:
    """Leave the index as a process that died `attempts` times re-feeding this session would."""
    conn = sqlite3.connect(db)
    conn.execute("INSERT OR REPLACE INTO text_debt(session_id, attempts) VALUES (?, ?)", (session_id, attempts))
    conn.commit()
    conn.close()


def test_a_session_whose_refeed_never_finished_is_deferred_then_quarantined(live):
    folder = live.root / FOLDER
    live.path.write_bytes(jsonl(v3_header("s-1"), msg("a", None, "user", "alpha walrus")))
    (folder / "s2.jsonl").write_bytes(jsonl(v3_header("s-2"), msg("a", None, "user", "bravo puffin")))
    (folder / "s3.jsonl").write_bytes(jsonl(v3_header("s-3"), msg("a", None, "user", "charlie marmot")))
    d = live.daemon()
    assert d.stop() == 0
    # The text index is lost (every session owed); s-2's re-feed began once and never finished,
    # s-3's three times.
    shutil.rmtree(text_dir(live.db))
    _owe(live.db, "s-2", 1)
    _owe(live.db, "s-3", MAX_REPAY_ATTEMPTS)
    d = live.daemon()
    with client(d) as c:
        assert c.search("walrus", exact=True).hits  # re-fed at start-up
        # The suspect is re-fed by the ingest loop while it catches up (after the socket answers).
        poll(lambda: c.search("puffin", exact=True).hits, 30, message="the suspect re-fed later")
        assert c.search("marmot", exact=True).hits == []  # quarantined: never re-fed again
        errors = c.status().service.errors
        assert any("quarantined" in e for e in errors.values()), errors
        # An append does not complete it; a rewrite of its file does.
        s3 = folder / "s3.jsonl"
        with open(s3, "ab") as fh:
            fh.write(jsonl(msg("b", "a", "user", "delta ibis")))
        poll(lambda: c.search("ibis", exact=True).hits, 30, message="the append")
        assert c.search("marmot", exact=True).hits == []
        s3.write_bytes(jsonl(v3_header("s-3"), msg("a", None, "user", "charlie marmot again")))
        poll(lambda: c.search("marmot", exact=True).hits, 30, message="the rebuilt session")
    poll(lambda: q(live.db, "SELECT count(*) FROM text_debt")[0][0] == 0, 10, message="the debt cleared")


@pytest.mark.parametrize("linked", [False, True], ids=["plain-root", "symlinked-root"])
def test_new_folders_under_a_symlinked_root_are_indexed_at_once(linked):
    """`~/.pi/agent/sessions` is often a symlink (dotfiles): new project folders under it must be
    indexed as fast as under a plain root, and re-pointing the link is noticed without a scan."""
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwy-"))
    real = base / "real"
    (real / FOLDER).mkdir(parents=True)
    (real / FOLDER / "s0.jsonl").write_bytes(jsonl(v3_header("s-0"), msg("a", None, "user", "alpha walrus")))
    root = base / "link" if linked else real
    if linked:
        os.symlink(real, root)
    d = Daemon(root, base / "index.sqlite3", scan_interval=3600).start()
    try:
        with client(d) as c:
            for i in range(3):
                folder = real / f"--new{i}--"
                folder.mkdir()
                (folder / "s.jsonl").write_bytes(jsonl(v3_header(f"s-n{i}"), msg("a", None, "user", f"newword{i}")))
                started = time.monotonic()
                hits = poll(
                    lambda i=i: c.search(f"newword{i}", exact=True).hits, 20, interval=0.01, message="the new folder"
                )
                assert time.monotonic() - started < stretched(3)  # the goal is 1 s; measured ~0.1-0.3 s
                assert hits[0].session_id == f"s-n{i}"
            if linked:
                other = base / "other"
                (other / FOLDER).mkdir(parents=True)
                (other / FOLDER / "o.jsonl").write_bytes(jsonl(v3_header("s-o"), msg("a", None, "user", "ocelot")))
                tmp = base / "link.new"
                os.symlink(other, tmp)
                os.replace(tmp, root)  # re-pointed atomically, as dotfile managers do
                poll(lambda: c.search("ocelot", exact=True).hits, 20, message="the re-pointed root")
                (other / "--late--").mkdir()
                (other / "--late--" / "l.jsonl").write_bytes(jsonl(v3_header("s-l"), msg("a", None, "user", "lynx")))
                poll(lambda: c.search("lynx", exact=True).hits, 5, message="a new folder under the new target")
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_status_counts_a_file_being_ingested_as_backlog(live):
    live.path.write_bytes(jsonl(v3_header("s-1"), msg("a", None, "user", "alpha walrus")))
    d = live.daemon()
    entries = [
        msg(f"e{i}", f"e{i - 1}" if i else None, "user", f"entry number {i} " + "filler " * 40) for i in range(60_000)
    ]
    entries.append(msg("last", "e29999", "user", "kittiwake is the last word"))
    (live.root / FOLDER / "large.jsonl").write_bytes(jsonl(v3_header("s-large"), *entries))
    seen = []

    def done(c) -> bool:
        seen.append(c.status().service.backlog_files)
        return bool(c.search("kittiwake", exact=True).hits)

    with client(d) as c:
        poll(lambda: done(c), 120, interval=0.05, message="the large file indexed")
    # While the large file was not done, status said so (it is sliced and re-queued between slices).
    assert max(seen) >= 1, seen
