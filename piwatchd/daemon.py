"""`piwatchd`: keep the index current while Pi writes, and answer on a Unix
socket. Runs in the foreground.

Start-up order: the per-user instance lock (pid, version, start time) and the
index lock (one writer per database) -> open/migrate the index -> bind the
socket (so `status` answers while the first index runs) -> register watches
-> start the ingest thread (whose first act is the reconciliation scan, so
nothing written during the scan is missed) -> READY=1 to systemd. The main
thread then only handles signals and upkeep: watches, the socket file (bound
again if it was removed), and the systemd watchdog. SIGTERM/SIGINT stop it
within STOP_TIMEOUT (observer stopped, current file committed, connection
closed); SIGHUP asks for a reconciliation scan and binds the socket again.
All commands reach the ingest thread through its one `Inbox`. Never forks:
launchd and systemd want it that way.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import IO

from piwatch import wire

from . import memory, workers
from .ingest.inbox import Inbox
from .notify import notify, watchdog_interval
from .serve.server import ServerLimits
from .store.indexfile import (
    IndexBusy,
    NotAnIndex,
    hold_lock,
    lock_index,
    open_or_rebuild,
    prepare_index_path,
)

__all__ = ["Daemon", "build_parser", "main", "run"]

log = logging.getLogger("piwatchd")

# SIGTERM never hangs: the ingest thread gets this long to commit its current
# file; after that the process exits anyway (an uncommitted transaction simply
# rolls back, and the next start re-reads from the last checkpoint).
STOP_TIMEOUT = 10.0
# How often the main thread returns freed heap pages to the system.
TRIM_SECONDS = 30.0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="piwatchd",
        description="Index Pi coding-agent sessions live into piwatch's SQLite database (foreground; stop with SIGTERM).",
    )
    p.add_argument(
        "--sessions",
        action="append",
        metavar="DIR",
        help="session directory to watch (repeatable; default: Pi's own session directories and configured extras)",
    )
    p.add_argument("--db", metavar="PATH", help="index database (default: piwatch's state directory)")
    _add_schedule_args(p)
    _add_server_args(p)
    p.add_argument("--version", action="version", version=f"piwatchd {__import__('piwatchd').__version__}")
    p.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="stderr log level (default info)",
    )
    return p


def _add_schedule_args(p: argparse.ArgumentParser) -> None:
    """When changed files are read, and how often the whole tree is reconciled."""
    p.add_argument(
        "--settle",
        type=float,
        default=0.05,
        metavar="SEC",
        help="quiet time before a changed file is read (default 0.05)",
    )
    p.add_argument(
        "--max-latency",
        type=float,
        default=1.0,
        metavar="SEC",
        help="a file written continuously is still read at least this often (default 1.0)",
    )
    p.add_argument(
        "--scan-interval",
        type=float,
        default=300.0,
        metavar="SEC",
        help="full reconciliation scan period; the safety net for lost events (default 300)",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="ingest worker processes (default: ingest_workers in config.toml, else one per core beside the writer's; 0: none)",
    )


def _add_server_args(p: argparse.ArgumentParser) -> None:
    """The socket and the limits of one request and one connection."""
    p.add_argument(
        "--socket", metavar="PATH", help="socket path (default: $PIWATCH_SOCKET or the per-user runtime directory)"
    )
    p.add_argument(
        "--query-timeout",
        type=float,
        default=5.0,
        metavar="SEC",
        help="time limit of one search/read/trace query (default 5)",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=ServerLimits.idle_timeout,
        metavar="SEC",
        help=f"close a connection idle this long between requests (default {ServerLimits.idle_timeout:g})",
    )
    p.add_argument(
        "--frame-timeout",
        type=float,
        default=ServerLimits.frame_timeout,
        metavar="SEC",
        help="a frame must arrive whole, and a reader must take one (a follow's update), within this long"
        f" (default {ServerLimits.frame_timeout:g})",
    )
    p.add_argument(
        "--max-requests-per-connection",
        type=int,
        default=ServerLimits.max_requests_per_connection,
        metavar="N",
        help="close a connection after this many requests; clients reconnect"
        f" (default {ServerLimits.max_requests_per_connection})",
    )


class Daemon:
    """One piwatchd: its locks, the index, the ingest service, the watcher and
    the socket server, and the main thread's upkeep of them."""

    def __init__(self, ns: argparse.Namespace, stop: threading.Event | None = None, inbox: Inbox | None = None):
        from piwatch.paths import lock_path, socket_path

        from .config import load_settings, omp_roots, resolve_db, session_roots

        self.ns = ns
        self.stop = stop or threading.Event()
        self.inbox = inbox or Inbox()
        self.settings = load_settings()
        self.roots = session_roots(ns.sessions, self.settings)
        self.omp_roots = omp_roots(ns.sessions)
        self.db_path = resolve_db(ns.db, self.settings)
        explicit = getattr(ns, "socket", None)
        self.sock_path = Path(explicit).expanduser() if explicit else socket_path()
        self.instance_path = self.sock_path.with_name(self.sock_path.name + ".lock") if explicit else lock_path()
        self.started = time.time()
        self._locks: list[IO[str]] = []
        self._hup = False  # set by the SIGHUP handler (no locks in a signal handler)
        self._last_ping = 0.0
        self._bind_error: str | None = None

    # -- the whole life ----------------------------------------------------------

    def run(self) -> int:
        positive = (self.ns.max_latency, self.ns.scan_interval, self.ns.idle_timeout, self.ns.frame_timeout)
        if self.ns.settle < 0 or min(positive) <= 0:
            log.error("--settle must be >= 0, --max-latency, --scan-interval, --idle-timeout and --frame-timeout > 0")
            return 2
        if self.ns.max_requests_per_connection < 1:
            log.error("--max-requests-per-connection must be at least 1")
            return 2
        if not self._acquire_locks():
            return 1
        try:
            try:
                problem = self._prepare_index()
            except (NotAnIndex, OSError, sqlite3.Error) as exc:
                print(f"piwatchd: cannot use the index {self.db_path}: {exc}", file=sys.stderr)
                return 1
            self._build(problem)
            return self._serve()
        finally:
            self._shutdown()

    def hangup(self) -> None:
        """SIGHUP: reconcile, and bind the socket again (acted on by the main loop)."""
        self._hup = True

    # -- start-up ------------------------------------------------------------------

    def _acquire_locks(self) -> bool:
        """One daemon per user (per socket), and one writer per index."""
        from . import __version__
        from .serve.server import ensure_private_dir

        ensure_private_dir(self.instance_path.parent)
        holder = f"pid {os.getpid()}\nversion {__version__}\nstarted {int(self.started)}\n"
        instance, other = hold_lock(self.instance_path, holder)
        if instance is None:
            print(
                f"piwatchd: another piwatchd is already running for this user ({other}); "
                f"talk to it with `piwatch status`",
                file=sys.stderr,
            )
            return False
        self._locks.append(instance)
        prepare_index_path(self.db_path)  # 0600 in a 0700 directory: it holds every session
        try:
            self._locks.append(lock_index(self.db_path, f"pid {os.getpid()} (piwatchd)\n"))
        except IndexBusy as exc:
            print(f"piwatchd: {exc}", file=sys.stderr)
            instance.close()
            self._locks.clear()
            return False
        return True

    def _prepare_index(self) -> str | None:
        """Create, migrate or rebuild the index before readers can connect."""
        conn, problem = open_or_rebuild(self.db_path, self.settings.engine)
        conn.close()
        if problem:
            log.warning("%s", problem)
        return problem

    def _build(self, index_problem: str | None) -> None:
        from .ingest.service import Service
        from .ingest.service_config import ServiceConfig
        from .serve.api import Api, Live
        from .serve.follow import FollowHub
        from .serve.server import Server
        from .source.watch import Watcher

        given = getattr(self.ns, "workers", None)
        workers.configure(given if given is not None else self.settings.ingest_workers)
        self.watcher = Watcher(self.roots, self.inbox)
        self.service = Service(
            ServiceConfig(
                db_path=str(self.db_path),
                roots=self.roots,
                omp_roots=tuple(self.omp_roots),
                settle=self.ns.settle,
                max_latency=max(self.ns.max_latency, self.ns.settle),
                scan_interval=self.ns.scan_interval,
                engine=self.settings.engine,
                extractors=self.settings.extractors,
            ),
            self.inbox,
            watch=self.watcher,
            index_problem=index_problem,
        )
        self.api = Api(
            self.db_path,
            configured_roots=self.settings.workspace_roots,
            session_roots=tuple(self.roots),
            live=Live(
                service_snapshot=self._snapshot,
                mark_dirty=self.inbox.mark,
                request_reindex=self.inbox.request_rebuild,
                hello_info=self._hello,
                commits=self.service.commits,
                index_trouble=self.inbox.request_index_check,
                streams=True,  # the server keeps follow subscriptions
            ),
            query_timeout=self.ns.query_timeout,
        )
        limits = ServerLimits()
        limits.idle_timeout = self.ns.idle_timeout
        limits.frame_timeout = self.ns.frame_timeout
        limits.max_requests_per_connection = self.ns.max_requests_per_connection
        self.follows = FollowHub(self.service.commits, self.api.newest_event, self.api.events_after)
        self.follows.evaluate = lambda asks, pace: self.api.follow_round(
            [(s.args, s.scope, ev) for s, ev in asks], pace
        )
        self.server = Server(
            self.sock_path,
            self.api.handle,
            hello=self.api.hello,
            limits=limits,
            on_connection_end=self.api.readers.reset,
            follows=self.follows,
        )
        self.follows.requests_idle = self.server.requests_idle

    # -- what the API asks of the daemon ---------------------------------------------

    def _hello(self) -> dict[str, object]:
        """What `hello` reports beyond the contract's own facts (protocol, ops, pid)."""
        from . import __version__

        return {"version": __version__, "started_at": int(self.started * 1000)}

    def _snapshot(self) -> wire.ServiceStatus:
        snap = self.service.snapshot()
        snap.uptime_seconds = round(time.time() - self.started, 1)
        snap.socket = str(self.sock_path)
        snap.requests_served = self.server.requests_served
        return snap

    # -- running -----------------------------------------------------------------------

    def _serve(self) -> int:
        log.info(
            "piwatchd %d: index %s; socket %s; roots %s",
            os.getpid(),
            self.db_path,
            self.sock_path,
            ", ".join(self.roots),
        )
        memory.tune_heap()  # before the server's threads exist
        memlog = memory.MemoryLog()
        self.server.start()
        self.watcher.start()
        self.service.start()
        # Opening the index may re-feed a lost text index first: SIGTERM meanwhile still stops.
        while not self.service.ready.wait(0.2):
            if self.stop.is_set():
                return 0
        notify(f"READY=1\nSTATUS=indexing; socket {self.sock_path}")
        ping_every = watchdog_interval()
        trimmed = time.monotonic()
        while not self.stop.wait(1.0 if ping_every is None else min(1.0, ping_every)):
            if not self.service.is_alive():
                log.error("ingest thread ended: %s", self.service.failed)
                return 1
            self.watcher.refresh()
            self._keep_socket()
            self._ping(ping_every)
            if time.monotonic() - trimmed >= TRIM_SECONDS:
                trimmed = time.monotonic()
                memory.trim()  # freed heap back to the system: RSS follows the live data
            memlog.tick()
        return 1 if self.service.failed is not None else 0

    def _keep_socket(self) -> None:
        """Bind again when the socket file was removed or replaced, or on SIGHUP."""
        reason = "SIGHUP" if self._hup else None if self.server.is_bound() else "the socket file was removed"
        if reason is None:
            return
        if self._hup:
            self._hup = False
            self.inbox.request_reconcile("SIGHUP")
        try:
            self.server.rebind()
        except (OSError, SystemExit) as exc:
            message = f"cannot bind {self.sock_path} again: {exc}"
            if message != self._bind_error:  # retried every second; said once
                log.error("%s", message)
                self._bind_error = message
            return
        log.warning("bound %s again (%s)", self.sock_path, reason)
        self._bind_error = None

    def _ping(self, ping_every: float | None) -> None:
        """systemd watchdog: ping only while the ingest loop moves, so a wedged loop gets restarted."""
        now = time.monotonic()
        if ping_every is None or now - self.service.last_loop >= max(30.0, 4 * ping_every):
            return
        if now - self._last_ping >= ping_every:
            snap = self.service.snapshot()
            notify(f"WATCHDOG=1\nSTATUS={snap.phase}; backlog {snap.backlog_files} files")
            self._last_ping = now

    def _shutdown(self) -> None:
        log.info("stopping")
        notify("STOPPING=1")
        for part in ("follows", "server", "watcher"):
            if hasattr(self, part):
                getattr(self, part).stop()
        if hasattr(self, "service"):
            self.service.stop(timeout=STOP_TIMEOUT)
        workers.shutdown()
        for lock in reversed(self._locks):
            lock.close()
        log.info("stopped")


def run(ns: argparse.Namespace, stop: threading.Event | None = None, inbox: Inbox | None = None) -> int:
    """The daemon body; `stop` lets tests run it in-process without signals."""
    return Daemon(ns, stop, inbox).run()


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    if argv is None:  # the process's own command line, not a caller's in-process run
        _run_with_heap_env()
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, ns.log_level.upper()),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    # watchdog's debug output is one line per inotify event.
    logging.getLogger("watchdog").setLevel(logging.WARNING)
    stop = threading.Event()

    def on_stop(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    daemon = Daemon(ns, stop)
    # SIGHUP only flips a flag: the main loop rebinds, the ingest thread scans.
    signal.signal(signal.SIGHUP, lambda signum, frame: daemon.hangup())
    return daemon.run()


def _run_with_heap_env() -> None:
    """Run this command again (same pid) in the environment glibc must read at
    start: its per-thread caches off (`memory.thread_cache_env`). Once at most:
    the second run finds it set. If the exec fails, the daemon runs as it is."""
    env = memory.thread_cache_env(os.environ, memory.on_glibc())
    if env is None:
        return
    with contextlib.suppress(OSError):
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


if __name__ == "__main__":
    sys.exit(main())
