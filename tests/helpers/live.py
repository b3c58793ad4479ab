"""piwatchd as a real process on a temp sessions root and database (the `live`
fixture's parts): start, stop, SIGHUP, kill -9, read the index and its
service state, search through the CLI. Every wait is a poll with a deadline."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conftest import jsonl, msg, v3_header
from piwatch.wire import ServiceStatus

from piwatchd.serve.status import read_service_state
from piwatchd.store.schema import searchable_bytes

__all__ = [
    "BASE",
    "BIN",
    "FOLDER",
    "PIWATCH",
    "PIWATCHD",
    "Daemon",
    "LiveEnv",
    "entry_ids",
    "line",
    "live_env",
    "no_diagnostics",
    "observed",
    "poll",
    "q",
    "search_cli",
    "searchable",
    "stretched",
    "waiting_on",
]

BIN = Path(sys.executable).parent
PIWATCHD = str(BIN / "piwatchd")
PIWATCH = str(BIN / "piwatch")
FOLDER = "--work-proj--"


def poll(predicate, timeout=10.0, interval=0.02, message="condition", errors: tuple[type[Exception], ...] = ()):
    """The one wait of the tests: `predicate()` until it is truthy (returned),
    at most `timeout` seconds on a quiet machine (`stretched` by its load).
    `errors`: exceptions that mean "not yet" (a daemon still starting); the
    last one is reported at the deadline."""
    timeout = stretched(timeout)
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = predicate()
        except errors as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message} (last: {last!r})")
        time.sleep(interval)


def stretched(seconds: float) -> float:
    """A wall-clock bound met on a quiet machine, stretched by this machine's
    load now: with L runnable processes per core (the 1-minute load average per
    core) a process gets about 1/L of one, so its work takes about L times as
    long. A bound that tells a failure apart (a timeout) caps it below that."""
    return seconds * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def waiting_on(cond: threading.Condition) -> bool:
    """Whether a thread is blocked in `cond.wait()` (CPython's list of its
    waiters): a test then knows the waiter waits before it releases it."""
    return bool(cond._waiters)


class Daemon:
    def __init__(
        self,
        root: Path,
        db: Path,
        *,
        user: int | None = None,
        scan_interval: float = 60.0,
        socket: Path | None = None,
        args: tuple[str, ...] = (),
    ):
        self.root, self.db, self.user, self.scan_interval = root, db, user, scan_interval
        self.args = args
        self.socket = socket or db.parent / "d.sock"
        self.proc: subprocess.Popen | None = None
        self.log = db.parent / "daemon.log"

    def start(self, wait=True):
        self._log_fh = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [
                PIWATCHD,
                "--sessions",
                str(self.root),
                "--db",
                str(self.db),
                "--settle",
                "0.05",
                "--max-latency",
                "0.3",
                "--scan-interval",
                str(self.scan_interval),
                "--log-level",
                "debug",
                "--socket",
                str(self.socket),
                *self.args,
            ],
            stdout=self._log_fh,
            stderr=subprocess.STDOUT,
            user=self.user,
        )
        if wait:
            # 90 s: a cold start-up scan of the 1,500-session tests on 2 loaded cores took over 30 s.
            poll(self.started, 90, message="piwatchd start-up scan to finish")
        return self

    def state(self) -> ServiceStatus | None:
        return read_service_state(self.db)

    def started(self):
        assert self.proc.poll() is None, self.log.read_text()
        st = self.state()
        return st is not None and st.pid == self.proc.pid and st.startup_seconds is not None

    def sighup_and_wait_scan(self):
        before = self.state().scans
        self.proc.send_signal(signal.SIGHUP)
        poll(lambda: ((self.state() or ServiceStatus()).scans or 0) > before, 10, message="a reconciliation scan")

    def stop(self) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            rc = self.proc.wait(20)
        else:
            rc = self.proc.returncode if self.proc else 0
        self._log_fh.close()
        return rc

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(20)
        self._log_fh.close()


def q(db: Path, sql: str, *args):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def entry_ids(db: Path, session="s-1"):
    return [
        r[0]
        for r in q(
            db,
            "SELECT entry_id FROM events WHERE session_key=(SELECT session_key FROM sessions WHERE session_id=?) ORDER BY ordinal",
            session,
        )
    ]


def search_cli(db: Path, *words) -> list[tuple[str, str]]:
    out = subprocess.run(
        [PIWATCH, "search", "--db", str(db), "--json", *words], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return [(h["sessionId"], h["entryId"]) for h in json.loads(out.stdout)["hits"]]


BASE = jsonl(
    v3_header(),
    msg("a", None, "user", "alpha walrus"),
    msg("b", "a", "assistant", [{"type": "text", "text": "beta heron"}]),
)


def line(eid, parent, text):
    return jsonl(msg(eid, parent, "user", text))


def searchable(db: Path, path: Path) -> bool:
    """Whether all of `path` is searchable from the index file (`searchable_bytes`),
    as `piwatch search --db` searches it: its lines in SQLite and their text in
    the on-disk text index, which piwatchd commits a moment after SQLite (its
    own searches see the text at once, from memory)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return searchable_bytes(conn, str(path)) == path.stat().st_size
    finally:
        conn.close()


def observed(db: Path, path: Path) -> bool:
    """Whether piwatchd has checked `path` as it is now (its checkpoint's size
    is the file's), whatever it found there: a half-written line is observed
    and left unread."""
    return q(db, "SELECT size FROM sources WHERE path=?", str(path)) == [(path.stat().st_size,)]


def no_diagnostics(db):
    return q(db, "SELECT code, byte_offset FROM diagnostics") == []


class LiveEnv:
    """A temp sessions root (with one project folder) and index for daemons started by `daemon()`."""

    def __init__(self, base: Path) -> None:
        self.base, self.root, self.db = base, base / "sessions", base / "index.sqlite3"
        self.path = self.root / FOLDER / "s1.jsonl"
        self.daemons: list[Daemon] = []

    def daemon(self, root: Path | None = None, *, wait: bool = True, **kw: Any) -> Daemon:
        """A daemon on `root` (default: this env's) and this env's index, killed at
        teardown if a test's failure or timeout left it running."""
        d = Daemon(root or self.root, self.db, **kw)
        self.daemons.append(d)
        return d.start(wait=wait)


def live_env() -> Iterator[LiveEnv]:
    """The `live` fixture (conftest): daemons still running at the end are killed."""
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwl-"))
    env = LiveEnv(base)
    (env.root / FOLDER).mkdir(parents=True)
    yield env
    for d in env.daemons:
        if d.proc and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait(10)
    shutil.rmtree(base, ignore_errors=True)
