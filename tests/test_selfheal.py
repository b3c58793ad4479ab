"""Self-healing with truthful health, and one writer per index (issue 10
item 7, issue 11 "one reconciliation scan"), against piwatchd as a process.

Variants per class: the index deleted while running / corrupt at start
(garbage, zeroed header); a transient failure (the database locked by
another process) retried with backoff long before the next scan; the socket
file removed / its whole directory removed / SIGHUP; `index --once` refused
beside a running daemon and vetoing removals the way the daemon does.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import threading
import time

import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import FOLDER, PIWATCH, poll, q, search_cli, stretched
from piwatch.client import Client

pytestmark = pytest.mark.timeout(120)


def session(sid: str, word: str) -> bytes:
    return jsonl(v3_header(sid), msg(f"{sid}-a", None, "user", f"{word} opening"))


def status(live):
    with Client(live.db.parent / "d.sock", timeout=10) as c:
        return c.status()


def cli_status_rc(live) -> int:
    out = subprocess.run(
        [PIWATCH, "status", "--socket", str(live.db.parent / "d.sock")], capture_output=True, text=True, timeout=60
    )
    return out.returncode


def retry_number(live) -> int:
    """The highest retry status names ("...; retry N in Xs"), 0 when none is scheduled."""
    return max(
        (int(m[1]) for e in status(live).service.errors.values() if (m := re.search(r"retry (\d+) in", e))), default=0
    )


def many_sessions(live, n: int) -> None:
    folder = live.root / FOLDER
    for i in range(n):
        (folder / f"bulk{i:05d}.jsonl").write_bytes(
            session(f"bulk-{i}", "bulk")
            + jsonl(
                *(
                    msg(f"bulk-{i}-{k}", f"bulk-{i}-a", "assistant", [{"type": "text", "text": f"filler {k} " * 20}])
                    for k in range(5)
                )
            )
        )


def test_index_deleted_while_running_is_rebuilt_and_reported(live):
    many_sessions(live, 1500)
    live.path.write_bytes(session("s-1", "walrus"))
    d = live.daemon()
    assert cli_status_rc(live) == 0
    kept = Client(live.db.parent / "d.sock", timeout=10, caller={"all": True})  # one connection across the rebuild
    assert [h.entry_id for h in kept.search("walrus").hits] == ["s-1-a"]
    for suffix in ("", "-wal", "-shm"):
        p = live.db.with_name(live.db.name + suffix)
        if p.exists():
            p.unlink()
    seen_unhealthy = False

    def healed():
        nonlocal seen_unhealthy
        svc = status(live).service
        if svc.index_problem or svc.phase == "rebuilding":
            seen_unhealthy = seen_unhealthy or cli_status_rc(live) == 2
            return False
        return svc.index_rebuilds == 1 and svc.phase == "idle"

    poll(healed, 90, interval=0.05, message="index rebuilt")
    assert seen_unhealthy, "status never said unhealthy while the index was rebuilt"
    assert "removed or replaced" in d.log.read_text()
    assert search_cli(live.db, "walrus") == [("s-1", "s-1-a")]
    assert len(q(live.db, "SELECT 1 FROM sessions")) == 1501
    with open(live.path, "ab") as fh:
        fh.write(jsonl(msg("s-1-b", "s-1-a", "user", "narwhal after the rebuild")))
    poll(lambda: search_cli(live.db, "narwhal") == [("s-1", "s-1-b")])
    assert [h.entry_id for h in kept.search("narwhal", wait=5, filters={"sessionId": ["s-1"]}).hits] == ["s-1-b"]
    kept.close()
    assert cli_status_rc(live) == 0
    assert d.stop() == 0


def test_index_corrupted_in_place_while_running_is_found_by_a_reader_and_rebuilt(live):
    """Same file, damaged pages: the writer's cache may never notice, so a
    query's error makes the ingest thread verify the file and rebuild it."""
    many_sessions(live, 200)
    live.path.write_bytes(session("s-1", "walrus"))
    d = live.daemon()
    assert search_cli(live.db, "walrus") == [("s-1", "s-1-a")]
    size = live.db.stat().st_size
    with open(live.db, "r+b") as fh:
        fh.seek(8192)
        fh.write(os.urandom(size - 8192))

    def healed():
        try:
            with Client(live.db.parent / "d.sock", timeout=10, caller={"all": True}) as c:
                hits = [h.entry_id for h in c.search("walrus").hits]
        except Exception:  # unavailable while the index is damaged or rebuilt
            return False
        return hits == ["s-1-a"] and status(live).service.index_rebuilds == 1

    poll(healed, 60, interval=0.2, message="corruption found by a query, index rebuilt")
    assert "found by a reader" in d.log.read_text()
    # s-1 may be searchable again before the other 200 sessions are: status says
    # "rebuilding" (unhealthy) until they are, then healthy.
    poll(lambda: cli_status_rc(live) == 0, 60, message="status healthy once the rebuild finished")
    assert d.stop() == 0


@pytest.mark.parametrize("damage", ["zeroed-header", "garbled-pages"])
def test_corrupt_index_at_start_is_rebuilt(live, damage):
    live.path.write_bytes(session("s-1", "walrus"))
    d = live.daemon()
    assert d.stop() == 0
    with open(live.db, "r+b") as fh:
        if damage == "zeroed-header":  # a crash that zeroed the first page's header
            fh.write(b"\0" * 100)
        else:  # the SQLite header survives, the pages after it do not
            fh.seek(100)
            fh.write(os.urandom(live.db.stat().st_size - 100))
    d = live.daemon()
    poll(lambda: status(live).service.phase == "idle")
    svc = status(live).service
    assert svc.index_rebuilds == 1 and svc.index_problem is None
    assert "the index was corrupt" in d.log.read_text()
    assert search_cli(live.db, "walrus") == [("s-1", "s-1-a")]
    assert d.stop() == 0


# Named ids: pytest 9.0 puts a test's id in PYTEST_CURRENT_TEST, and 64 KB of
# escaped random bytes there make every exec of the test fail with E2BIG.
@pytest.mark.parametrize("content", [b"not an index\n" * 100, os.urandom(64 * 1024)], ids=["text", "random-bytes"])
def test_a_file_that_never_was_an_index_is_never_replaced(live, content):
    """`--db` pointed at the wrong file: refused with one line, the file untouched."""
    live.path.write_bytes(session("s-1", "walrus"))
    live.db.write_bytes(content)
    d = live.daemon(wait=False)
    assert d.proc.wait(30) == 1
    d.stop()
    log = d.log.read_text()
    assert "is not a piwatch index" in log and str(live.db) in log and "Traceback" not in log
    assert live.db.read_bytes() == content


def test_transient_failure_is_retried_with_backoff_not_at_the_next_scan(live):
    live.path.write_bytes(session("s-1", "walrus"))
    d = live.daemon()  # scan interval 60 s: a retry must come much sooner
    blocker = sqlite3.connect(live.db, timeout=1, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the index past the 5 s busy timeout
    try:
        with open(live.path, "ab") as fh:
            fh.write(jsonl(msg("s-1-b", "s-1-a", "user", "heron while locked")))
        poll(lambda: retry_number(live) >= 1, 30, message="a scheduled retry in status")
        assert cli_status_rc(live) == 2
        poll(lambda: retry_number(live) >= 2, 30, message="a backoff round failing too")
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    released = time.monotonic()
    poll(lambda: search_cli(live.db, "heron") == [("s-1", "s-1-b")], 30, message="indexed after the lock went")
    assert time.monotonic() - released < min(stretched(30), 55)  # not the next scan, 60 s on
    poll(lambda: not status(live).service.errors, 10, message="the error cleared")
    assert status(live).service.retries >= 1
    assert d.stop() == 0


@pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="prlimit is Linux-only")
def test_disk_full_is_retried_and_heals_when_space_returns(live):
    """A full disk, simulated for the daemon alone: its file-size limit is
    lowered below the index's size (writes fail with EFBIG; Python ignores
    SIGXFSZ), then lifted again."""
    live.path.write_bytes(session("s-1", "walrus"))
    d = live.daemon()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE, (8192, hard))
    try:
        with open(live.path, "ab") as fh:
            fh.write(jsonl(msg("s-1-b", "s-1-a", "user", "heron on a full disk " + "filler " * 20000)))
        poll(
            lambda: any("retry" in e for e in status(live).service.errors.values()),
            30,
            message="a scheduled retry in status",
        )
        assert cli_status_rc(live) == 2
        assert search_cli(live.db, "heron") == []
    finally:
        resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE, (soft, hard))
    freed = time.monotonic()
    poll(lambda: search_cli(live.db, "heron") == [("s-1", "s-1-b")], 60, message="indexed once space returned")
    assert time.monotonic() - freed < min(stretched(30), 55)  # before the 60 s scan: the backoff retried it
    poll(lambda: not status(live).service.errors, 15, message="the error cleared")
    assert d.proc.poll() is None and d.stop() == 0


@pytest.mark.parametrize("how", ["socket-removed", "directory-removed", "sighup"])
def test_removed_socket_is_bound_again(live, how):
    live.path.write_bytes(session("s-1", "walrus"))
    d = live.daemon()
    sock = live.db.parent / "d.sock"
    before = sock.stat().st_ino
    if how == "socket-removed":
        sock.unlink()
    elif how == "directory-removed":
        run_dir = live.base / "run"
        d.stop()
        sock = run_dir / "d.sock"
        d = live.daemon(socket=sock)
        before = sock.stat().st_ino
        shutil.rmtree(run_dir)
    else:
        d.proc.send_signal(signal.SIGHUP)
    poll(lambda: sock.exists() and sock.stat().st_ino != before, 10, message="socket bound again")
    with Client(sock, timeout=10) as c:
        assert c.status().service.pid == d.proc.pid
    assert d.stop() == 0


def test_a_client_never_finds_the_socket_missing_during_rebinds(live):
    """A rebind (SIGHUP) binds and listens under a staged name, then renames
    it over the path, and admits what was still queued on the old socket:
    a client connecting meanwhile is always answered (unlink, bind, listen in
    place refused it in between)."""
    live.path.write_bytes(session("s-1", "walrus"))
    d = live.daemon()
    sock = live.db.parent / "d.sock"
    failures: list[str] = []
    done = threading.Event()

    def connect_repeatedly() -> None:
        while not done.is_set():
            try:
                with Client(sock, timeout=10) as c:
                    c.hello()  # a whole exchange: a connection dropped from a closed backlog fails here
            except Exception as exc:  # any failure of a client counts
                failures.append(f"{type(exc).__name__}: {exc}")

    clients = [threading.Thread(target=connect_repeatedly) for _ in range(2)]
    for t in clients:
        t.start()
    try:
        for _ in range(8):  # each rebind waits for the daemon's one-second tick
            before = sock.stat().st_ino
            d.proc.send_signal(signal.SIGHUP)
            poll(lambda before=before: sock.stat().st_ino != before, 10, message="socket bound again")
    finally:
        done.set()
        for t in clients:
            t.join()
    assert failures == []
    assert not list(sock.parent.glob("d.sock~"))
    with Client(sock, timeout=10) as c:
        assert c.status().service.pid == d.proc.pid
    assert d.stop() == 0


def test_index_once_is_never_a_second_writer(live):
    live.path.write_bytes(session("s-1", "walrus"))
    d = live.daemon()
    out = subprocess.run(
        [PIWATCH, "index", "--once", "--sessions", str(live.root), "--db", str(live.db)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and "being indexed by another process" in out.stderr, out
    assert f"pid {d.proc.pid}" in out.stderr and "Traceback" not in out.stderr
    assert d.stop() == 0
    out = subprocess.run(
        [PIWATCH, "index", "--once", "--sessions", str(live.root), "--db", str(live.db), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("gone", ["root-missing", "root-empty"])
def test_index_once_vetoes_removals_like_the_daemon(live, gone):
    live.path.write_bytes(session("s-1", "walrus"))
    args = [PIWATCH, "index", "--once", "--sessions", str(live.root), "--db", str(live.db), "--json"]
    assert subprocess.run(args, capture_output=True, timeout=60).returncode == 0
    away = live.base / "away"
    if gone == "root-missing":
        live.root.rename(away)  # an unmounted or renamed sessions folder
    else:
        shutil.move(str(live.root / FOLDER), str(away))  # every file gone at once: looks unmounted
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if gone == "root-missing":  # named explicitly: refused, nothing touched
        assert out.returncode == 2 and "no sessions directory" in out.stderr
    else:
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["removed"] == 0
    assert search_cli(live.db, "walrus") == [("s-1", "s-1-a")]


def test_index_once_rebuilds_a_corrupt_index_like_the_daemon(live):
    live.path.write_bytes(session("s-1", "walrus"))
    args = [PIWATCH, "index", "--once", "--sessions", str(live.root), "--db", str(live.db)]
    assert subprocess.run(args, capture_output=True, timeout=60).returncode == 0
    with open(live.db, "r+b") as fh:
        fh.seek(100)
        fh.write(os.urandom(live.db.stat().st_size - 100))
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "the index was corrupt" in out.stderr, out.stderr
    assert search_cli(live.db, "walrus") == [("s-1", "s-1-a")]
