"""`piwatchd`: keep the index current while Pi writes, and answer on a Unix
socket. Runs in the foreground.

Start-up order: the per-user instance lock (pid, version, start time) and the
index lock (one writer per database) -> open/migrate the index -> bind the
socket (so `status` answers while the first index runs) -> register watches
-> start the ingest thread (whose first act is the reconciliation scan, so
nothing written during the scan is missed) -> READY=1 to systemd. The main
thread then only handles signals, watch upkeep and the systemd watchdog. SIGTERM/SIGINT stop it cleanly (observer stopped,
current batch committed, connection closed, every thread joined); SIGHUP asks
for a reconciliation scan. Never forks: launchd and systemd want it that way.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

__all__ = ["main", "build_parser", "run"]

log = logging.getLogger("piwatchd")

# SIGTERM never hangs: the ingest thread gets this long to commit its current
# file; after that the process exits anyway (an uncommitted transaction simply
# rolls back, and the next start re-reads from the last checkpoint).
STOP_TIMEOUT = 10.0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="piwatchd",
        description="Index Pi coding-agent sessions live into piwatch's SQLite database (foreground; stop with SIGTERM).",
    )
    p.add_argument(
        "--sessions", action="append", metavar="DIR",
        help="session directory to watch (repeatable; default: Pi's own session directories and configured extras)",
    )
    p.add_argument("--db", metavar="PATH", help="index database (default: piwatch's state directory)")
    p.add_argument("--settle", type=float, default=0.05, metavar="SEC",
                   help="quiet time before a changed file is read (default 0.05)")
    p.add_argument("--max-latency", type=float, default=1.0, metavar="SEC",
                   help="a file written continuously is still read at least this often (default 1.0)")
    p.add_argument("--scan-interval", type=float, default=300.0, metavar="SEC",
                   help="full reconciliation scan period; the safety net for lost events (default 300)")
    p.add_argument("--socket", metavar="PATH",
                   help="socket path (default: $PIWATCH_SOCKET or the per-user runtime directory)")
    p.add_argument("--query-timeout", type=float, default=5.0, metavar="SEC",
                   help="time limit of one search/read/trace query (default 5)")
    p.add_argument("--version", action="version", version=f"piwatchd {__import__('piwatchd').__version__}")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="stderr log level (default info)")
    return p


def _lock(path: Path, holder: str):
    """Hold an exclusive lock on `path` for the process lifetime, writing who
    holds it. Returns (file, None), or (None, what the current holder wrote)."""
    fh = open(path, "a+")  # noqa: SIM115 - held open for the process lifetime: the lock
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        other = fh.read().strip().replace("\n", ", ")
        fh.close()
        return None, other
    fh.seek(0)
    fh.truncate()
    fh.write(holder)
    fh.flush()
    return fh, None


def run(ns: argparse.Namespace, stop: threading.Event | None = None, dirty=None) -> int:
    """The daemon body; `stop` lets tests run it in-process without signals."""
    from .config import load_settings
    from .dirty import DirtySet
    from .service import Service, ServiceConfig
    from .source.discovery import discover_roots
    from .watch import Watcher

    settings = load_settings()
    if ns.sessions:
        roots = [os.path.abspath(os.path.expanduser(s)) for s in ns.sessions]
    else:
        roots = [r.path for r in discover_roots(extra=settings.extra_session_dirs)]
    db_path = Path(ns.db).expanduser().resolve() if ns.db else settings.db_path
    if ns.settle < 0 or ns.max_latency <= 0 or ns.scan_interval <= 0:
        log.error("--settle must be >= 0, --max-latency and --scan-interval > 0")
        return 2
    from piwatch.paths import lock_path, socket_path
    from piwatch.protocol import OPS, PROTOCOL_VERSION

    from . import __version__
    from .api import Api
    from .index.schema import open_writer
    from .indexfile import prepare_index_path
    from .notify import notify, watchdog_interval
    from .server import Server, ensure_private_dir

    sock_path = Path(ns.socket).expanduser() if getattr(ns, "socket", None) else socket_path()
    instance_path = sock_path.with_name(sock_path.name + ".lock") if getattr(ns, "socket", None) else lock_path()
    ensure_private_dir(instance_path.parent)
    # One daemon per user (per socket); the lock file says who holds it.
    instance_lock, holder = _lock(
        instance_path, f"pid {os.getpid()}\nversion {__version__}\nstarted {int(time.time())}\n"
    )
    if instance_lock is None:
        print(f"piwatchd: another piwatchd is already running for this user ({holder}); "
              f"talk to it with `piwatch status`", file=sys.stderr)
        return 1
    # One daemon per index: a second writer would fight the first for every commit.
    prepare_index_path(db_path)  # 0600 in a 0700 directory: it holds every session
    lock, holder = _lock(Path(str(db_path) + ".lock"), f"pid {os.getpid()}\n")
    if lock is None:
        print(f"piwatchd: another piwatchd already indexes {db_path} ({holder})", file=sys.stderr)
        instance_lock.close()
        return 1
    # Create or migrate the schema before readers can connect.
    open_writer(db_path, engine=settings.engine).close()
    stop = stop or threading.Event()
    dirty = dirty or DirtySet()
    watcher = Watcher(roots, dirty)
    service = Service(
        ServiceConfig(
            db_path=str(db_path),
            roots=roots,
            settle=ns.settle,
            max_latency=max(ns.max_latency, ns.settle),
            scan_interval=ns.scan_interval,
            engine=settings.engine,
        ),
        dirty,
        watch_status=watcher.status,
        watch_warnings=lambda: watcher.warnings,
    )
    started = time.time()

    def hello_info() -> dict:
        return {"proto": PROTOCOL_VERSION, "version": __version__, "pid": os.getpid(),
                "startedAt": int(started * 1000), "capabilities": list(OPS)}


    def service_snapshot() -> dict:
        snap = service.snapshot()
        snap["uptime_seconds"] = round(time.time() - started, 1)
        snap["socket"] = str(sock_path)
        snap["requests_served"] = server.requests_served
        return snap

    api = Api(
        db_path,
        configured_roots=settings.workspace_roots,
        session_roots=tuple(roots),
        service_snapshot=service_snapshot,
        mark_dirty=dirty.mark,
        request_reindex=service.request_rebuild,
        hello_info=hello_info,
        commits=service.commits,
        query_timeout=ns.query_timeout,
    )
    server = Server(sock_path, api.handle, hello=api.hello, on_connection_end=api.readers.reset)
    log.info("piwatchd %d: index %s; socket %s; roots %s", os.getpid(), db_path, sock_path, ", ".join(roots))
    rc = 0
    ping_every = watchdog_interval()
    try:
        server.start()
        watcher.start()
        service.start()
        service.ready.wait()
        notify(f"READY=1\nSTATUS=indexing; socket {sock_path}")
        last_ping = 0.0
        while not stop.wait(1.0 if ping_every is None else min(1.0, ping_every)):
            if not service.is_alive():
                log.error("ingest thread ended: %s", service.failed)
                rc = 1
                break
            watcher.refresh()
            now = time.monotonic()
            # Ping only while the ingest loop moves: a wedged loop gets restarted.
            if ping_every is not None and now - service.last_loop < max(30.0, 4 * ping_every) and now - last_ping >= ping_every:
                snap = service.snapshot()
                notify(f"WATCHDOG=1\nSTATUS={snap.get('phase')}; backlog {snap.get('backlog_files')} files")
                last_ping = now
    finally:
        log.info("stopping")
        notify("STOPPING=1")
        server.stop()
        watcher.stop()
        service.stop(timeout=STOP_TIMEOUT)
        lock.close()
        instance_lock.close()
    if service.failed is not None and rc == 0:
        rc = 1
    log.info("stopped")
    return rc


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, ns.log_level.upper()),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    # watchdog's debug output is one line per inotify event.
    logging.getLogger("watchdog").setLevel(logging.WARNING)
    stop = threading.Event()

    def on_stop(signum, frame) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    from .dirty import DirtySet

    dirty = DirtySet()
    # SIGHUP only flips a flag: the ingest thread does the scan.
    signal.signal(signal.SIGHUP, lambda signum, frame: dirty.request_reconcile("SIGHUP"))
    return run(ns, stop, dirty)


if __name__ == "__main__":
    sys.exit(main())
