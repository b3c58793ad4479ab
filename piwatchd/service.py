"""The ingest service: one thread, the only write connection, the whole schedule.

Work arrives three ways: watcher hints in the `DirtySet` (coalesced with a
settle delay and a max latency), new directories to list, and reconciliation
scans (at start, every `scan_interval`, after watcher trouble, on request).
A scan does not ingest: it compares each file's stat with its checkpoint and
queues the differences as *backlog*, newest first. Each loop turn commits the
due hinted paths first (the session being worked on now), then a time-boxed
slice of the backlog, so a first start on years of history never starves a
fresh append.

Progress (files known, bytes ingested, backlog, last scan, per-file errors)
goes to the `service_state` table, where `piwatch status` reads it.
"""

from __future__ import annotations

import heapq
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .auth import is_under
from .commits import CommitSignal
from .dirty import DirtySet
from .index.schema import open_writer
from .index.writer import IndexWriter
from .ingest import Ingestor, IngestOutcome
from .source.discovery import is_session_filename, iter_session_files, root_is_listable

__all__ = ["ServiceConfig", "Service", "STATE_KEY"]

log = logging.getLogger("piwatchd.service")

STATE_KEY = "service"
# Idle FTS merging starts after this much new data, in steps of this many pages.
MERGE_AFTER_BYTES = 16 * 1024 * 1024
MERGE_STEP_PAGES = 256
_MAX_FILE_ERRORS = 50


@dataclass(slots=True)
class ServiceConfig:
    db_path: str
    roots: list[str]
    settle: float = 0.1
    max_latency: float = 1.0
    scan_interval: float = 300.0
    batch_seconds: float = 0.25  # backlog work per commit, so hints wait at most this long
    gone_recheck_delay: float = 0.1
    state_interval: float = 1.0  # how often progress is written while busy
    heartbeat_interval: float = 5.0
    engine: str = "tantivy"  # text engine: tantivy | fts5


@dataclass(slots=True)
class _Progress:
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    phase: str = "starting"
    files_known: int = 0
    bytes_ingested: int = 0
    events_ingested: int = 0
    files_ingested: int = 0
    batches: int = 0
    scans: int = 0
    last_scan: dict[str, Any] | None = None
    startup_seconds: float | None = None  # first scan queued -> backlog drained
    missed_by_events: int = 0
    errors: dict[str, str] = field(default_factory=dict)
    removals_vetoed: int = 0


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


class Service:
    def __init__(
        self,
        config: ServiceConfig,
        dirty: DirtySet | None = None,
        *,
        watch_status: Callable[[], list[dict[str, Any]]] | None = None,
        watch_warnings: Callable[[], list[str]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        commits: CommitSignal | None = None,
    ) -> None:
        self.config = config
        self.roots = [os.path.normpath(r) for r in config.roots]
        self.dirty = dirty or DirtySet(clock)
        self._watch_status = watch_status
        self._watch_warnings = watch_warnings
        # Readers waiting for freshness wake on this after each file's commit.
        self.commits = commits or CommitSignal()
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ready = threading.Event()  # the write connection is open
        self.failed: BaseException | None = None
        self.progress = _Progress()
        # Backlog from scans: path -> mtime; drained newest first.
        self._backlog: dict[str, float] = {}
        self._backlog_heap: list[tuple[float, str]] = []  # (-mtime, path); stale items skipped
        self._backlog_bytes = 0
        self._root_dev: dict[str, int] = {}
        self._startup_pending = True
        self._started_at = clock()
        self._last_state_write = 0.0
        self._rebuild_lock = threading.Lock()
        self._rebuild_requests: list[str | None] = []
        self.last_loop = clock()  # the watchdog ping is tied to this moving
        self._merged_at_bytes = 0

    # -- lifecycle (any thread) ------------------------------------------------

    def start(self) -> None:
        # A daemon thread, so a bounded stop() can end the process even mid-file.
        self._thread = threading.Thread(target=self._run, name="piwatchd-ingest", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Finish the current file, commit, close. Joins the thread for at
        most `timeout` seconds; False when it is still running then."""
        self._stop.set()
        self.dirty.wake()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.error("ingest thread did not stop within %.0fs; exiting without it", timeout)
                return False
        return True

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def threads(self) -> list[threading.Thread]:
        return [self._thread] if self._thread is not None else []

    def request_reconcile(self, reason: str = "requested") -> None:
        self.dirty.request_reconcile(reason)

    def request_rebuild(self, path: str | None) -> None:
        """Re-read `path` (or every known source when None) from scratch; the
        ingest thread forgets the checkpoint, so the next ingest is a rebuild."""
        with self._rebuild_lock:
            self._rebuild_requests.append(path)
        self.dirty.wake()

    def _apply_rebuild_requests(self) -> None:
        with self._rebuild_lock:
            requests, self._rebuild_requests = self._rebuild_requests, []
        if not requests:
            return
        paths = set()
        for path in requests:
            paths.update(self.writer.known_paths() if path is None else [path])
        with self.writer.transaction():
            for path in paths:
                record = self.writer.source(path)
                if record is not None:
                    self.writer.mark_source(record.source_id, "pending", "reindex requested", forget_checkpoint=True)
        for path in paths:
            self.dirty.mark(path)

    # -- the ingest thread -------------------------------------------------------

    def _run(self) -> None:
        try:
            conn = open_writer(self.config.db_path, engine=self.config.engine)
        except BaseException as exc:  # noqa: BLE001 - surfaced by the daemon's lifecycle loop
            self.failed = exc
            log.error("cannot open index %s: %s", self.config.db_path, exc)
            self.ready.set()
            return
        self.writer = IndexWriter(conn)
        self.ingestor = Ingestor(
            self.writer, gone_recheck_delay=self.config.gone_recheck_delay, may_remove=self._may_remove
        )
        self.ready.set()
        try:
            # Sessions whose text documents may lag their rows (a crash between
            # the two commits) are re-fed before anything else.
            self.writer.repay_text_debt()
            self._remember_root_devices()
            self._scan("start-up", verify_all=True)
            next_scan = self._clock() + self.config.scan_interval
            while not self._stop.is_set():
                now = self._clock()
                self.last_loop = now
                self._apply_rebuild_requests()
                reasons = self.dirty.take_reconcile()
                if reasons or now >= next_scan:
                    self._scan("; ".join(reasons) or "periodic")
                    next_scan = self._clock() + self.config.scan_interval
                for d in self.dirty.take_dirs():
                    self._list_new_dir(d)
                due, next_due = self.dirty.take_due(self.config.settle, self.config.max_latency)
                if due:
                    due.sort(key=_mtime, reverse=True)
                    self._batch(due, deadline=None)
                if self._backlog and not self._stop.is_set():
                    self._batch([], deadline=self._clock() + self.config.batch_seconds)
                    self._write_state()
                    continue
                if self._startup_pending:
                    self._startup_pending = False
                    self.progress.startup_seconds = round(self._clock() - self._started_at, 3)
                    self.progress.phase = "idle"
                    self._write_state(force=True)
                self._write_state()
                if self.dirty.pending() == 0 and self._merge_step():
                    continue  # more FTS merging to do; new hints are checked first
                wait_until = next_scan
                if next_due is not None:
                    wait_until = min(wait_until, next_due)
                wait_until = min(wait_until, self._clock() + self.config.heartbeat_interval)
                timeout = max(0.0, wait_until - self._clock())
                if timeout > 0 and not due:
                    self.dirty.wait(timeout)
        except BaseException as exc:
            self.failed = exc
            log.exception("ingest thread failed")
        finally:
            self.progress.phase = "stopped"
            try:
                self._write_state(force=True)
                conn.execute("PRAGMA optimize")
            except Exception:  # noqa: BLE001, S110 - best effort while stopping; the index stays valid without it
                pass
            self.writer.close()

    # -- FTS segment merging -------------------------------------------------------

    def _merge_step(self) -> bool:
        """One bounded step of FTS5 segment merging while otherwise idle.

        Ingest runs with a lazy automerge (fewer, larger merges: a faster cold
        index); once the backlog is gone, idle time merges the segments so
        queries touch few of them. Returns True while there is more to merge.
        """
        if self.writer.engine != "fts5" or self.progress.bytes_ingested - self._merged_at_bytes < MERGE_AFTER_BYTES:
            return False
        conn = self.writer.conn
        before = conn.total_changes
        with self.writer.transaction():
            conn.execute("INSERT INTO fragments_fts(fragments_fts, rank) VALUES ('merge', ?)", (MERGE_STEP_PAGES,))
        if conn.total_changes - before < 2:  # FTS5's own "nothing left to merge" signal
            self._merged_at_bytes = self.progress.bytes_ingested
            return False
        return True

    # -- batches -----------------------------------------------------------------

    def _batch(self, paths: list[str], deadline: float | None) -> None:
        """Ingest `paths`, then backlog until `deadline`.

        Each file commits on its own: wrapping several in one transaction made
        every file a savepoint, whose page journaling cost ~15% of a cold index.
        """
        self.progress.phase = "ingesting"
        done: list[str] = []
        path: str | None
        try:
            for path in paths:
                self._backlog_pop(path)
                self._ingest_one(path)
                done.append(path)
            while deadline is not None and self._backlog and self._clock() < deadline:
                path = self._backlog_next()
                if path is None:
                    break
                self._backlog_pop(path)
                self._ingest_one(path)
                done.append(path)
                if self._stop.is_set():
                    break
        except Exception as exc:  # noqa: BLE001 - logged; the files are marked dirty again
            # BEGIN/COMMIT failed (say another writer held the lock past the
            # busy timeout): that file is not committed; retry later.
            log.warning("ingest stopped after %d files: %s", len(done), exc)
            for path in paths:
                if path not in done:
                    self.dirty.mark(path)
            self._stop.wait(0.5)
            return
        # The text index commits when the backlog is done, or at most every COMMIT_INTERVAL.
        if self.writer.flush_text(idle=not self._backlog):
            self.commits.notify()  # what waiters wait for is searchable now
        self.progress.batches += 1
        self.progress.phase = "idle"

    def _backlog_add(self, path: str, mtime: float) -> None:
        self._backlog[path] = mtime
        heapq.heappush(self._backlog_heap, (-mtime, path))

    def _backlog_next(self) -> str | None:
        """The most recently modified queued path (the session in use first)."""
        while self._backlog_heap:
            neg, path = heapq.heappop(self._backlog_heap)
            if self._backlog.get(path) == -neg:
                return path
        self._backlog.clear()
        return None

    def _backlog_pop(self, path: str) -> None:
        self._backlog.pop(path, None)
        if not self._backlog:
            self._backlog_bytes = 0
            self._backlog_heap.clear()

    def _ingest_one(self, path: str) -> IngestOutcome | None:
        try:
            outcome = self.ingestor.ingest(path)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                log.exception("ingesting %s failed", path)
                self._file_error(path, f"{type(exc).__name__}: {exc}")
                return None
            # Another writer held the database past the busy timeout: nothing
            # of this file was committed; try it again shortly.
            log.warning("database busy while ingesting %s; will retry", path)
            self.dirty.mark(path)
            self._stop.wait(0.5)
            return None
        except Exception as exc:  # a bug or an I/O surprise must not stop the service
            log.exception("ingesting %s failed", path)
            self._file_error(path, f"{type(exc).__name__}: {exc}")
            return None
        self.commits.notify()
        self.progress.files_ingested += 1
        self.progress.bytes_ingested += outcome.bytes_read
        self.progress.events_ingested += outcome.events
        if outcome.error:
            self._file_error(path, outcome.error)
            log.info("%s: %s (%s)", outcome.state, path, outcome.error)
        else:
            self.progress.errors.pop(path, None)
        if outcome.change.value not in ("unchanged",):
            log.debug("%s %s: %d events, %d bytes", outcome.change.value, path, outcome.events, outcome.bytes_read)
        return outcome

    def _file_error(self, path: str, message: str) -> None:
        errors = self.progress.errors
        errors.pop(path, None)
        errors[path] = message
        while len(errors) > _MAX_FILE_ERRORS:
            errors.pop(next(iter(errors)))

    # -- scans -------------------------------------------------------------------

    def _scan(self, reason: str, verify_all: bool = False) -> None:
        """Queue every file whose stat differs from its checkpoint (all files
        when `verify_all`: a restart re-proves each checkpoint by its hashes,
        which reads a few KB per file, never the file)."""
        started = self._clock()
        self.progress.phase = "scanning"
        known = {
            row[0]: row[1:]
            for row in self.writer.conn.execute(
                "SELECT path, dev, ino, size, mtime_ns, state, consumed FROM sources"
            )
        }
        listable = [r for r in self.roots if root_is_listable(r)]
        seen: set[str] = set()
        queued = missed = 0
        for root in listable:
            for path in iter_session_files(root):
                if path in seen:
                    continue
                seen.add(path)
                try:
                    st = os.stat(path)
                except OSError:
                    st = None
                row = known.get(path)
                changed = (
                    row is None
                    or st is None
                    or row[4] != "ok"
                    or (row[0], row[1], row[2], row[3]) != (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
                )
                if changed or verify_all:
                    queued += 1
                    if changed and not verify_all and row is not None and row[4] == "ok":
                        missed += 1  # a change the watcher did not report (yet)
                    self._backlog_add(path, st.st_mtime if st else 0.0)
                    if st is not None:
                        self._backlog_bytes += max(0, st.st_size - (row[5] if row else 0))
        for path in known:
            if path not in seen and any(is_under(path, r) for r in listable):
                queued += 1
                self._backlog_add(path, 0.0)
        self.progress.files_known = len(seen)
        self.progress.scans += 1
        self.progress.missed_by_events += missed
        self.progress.last_scan = {
            "reason": reason,
            "at_ms": int(time.time() * 1000),
            "seconds": round(self._clock() - started, 3),
            "files": len(seen),
            "queued": queued,
            "missed_by_events": missed,
            "roots_unavailable": [r for r in self.roots if r not in listable],
        }
        log.info("scan (%s): %d files, %d queued in %.2fs", reason, len(seen), queued, self._clock() - started)
        self._write_state(force=True)

    def _list_new_dir(self, directory: str) -> None:
        # A new `--<cwd>--` folder, or a tree moved in: list what its watch may have missed.
        try:
            names = [e.path for e in os.scandir(directory) if e.is_file() and is_session_filename(e.name)]
        except OSError:
            return
        for path in names:
            self.dirty.mark(path)

    # -- removal guard -----------------------------------------------------------

    def _remember_root_devices(self) -> None:
        for root in self.roots:
            try:
                self._root_dev[root] = os.stat(root).st_dev
            except OSError:
                pass

    def _may_remove(self, path: str) -> bool:
        """An absent file proves it is gone only if its root is present, on the
        same device as before (not an empty mount point), and not empty."""
        for root in self.roots:
            if not is_under(path, root):
                continue
            if not root_is_listable(root):
                break
            try:
                dev = os.stat(root).st_dev
            except OSError:
                break
            if self._root_dev.setdefault(root, dev) != dev:
                break
            if next(iter_session_files(root), None) is None:
                # Every file of a root vanishing at once looks like an unmount.
                break
            return True
        self.progress.removals_vetoed += 1
        return False

    # -- progress ----------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        p = self.progress
        return {
            "pid": os.getpid(),
            "started_ms": p.started_ms,
            "heartbeat_ms": int(time.time() * 1000),
            "phase": p.phase,
            "db": str(Path(self.config.db_path)),
            "roots": self._watch_status() if self._watch_status else [{"path": r} for r in self.roots],
            "warnings": list(self._watch_warnings()) if self._watch_warnings else [],
            "settle": self.config.settle,
            "max_latency": self.config.max_latency,
            "scan_interval": self.config.scan_interval,
            "files_known": p.files_known,
            "files_ingested": p.files_ingested,
            "bytes_ingested": p.bytes_ingested,
            "events_ingested": p.events_ingested,
            "batches": p.batches,
            "backlog_files": len(self._backlog) + self.dirty.pending(),
            "backlog_bytes": self._backlog_bytes if self._backlog else 0,
            "scans": p.scans,
            "last_scan": p.last_scan,
            "startup_seconds": p.startup_seconds,
            "missed_by_events": p.missed_by_events,
            "removals_vetoed": p.removals_vetoed,
            "errors": dict(p.errors),
        }

    def _write_state(self, force: bool = False) -> None:
        now = self._clock()
        interval = self.config.state_interval if self._backlog or self.progress.phase != "idle" else self.config.heartbeat_interval
        if not force and now - self._last_state_write < interval:
            return
        self._last_state_write = now
        value = orjson.dumps(self.snapshot()).decode()
        try:
            with self.writer.transaction():
                self.writer.conn.execute(
                    "INSERT INTO service_state(key, value, updated_ms) VALUES (?,?,?)"
                    " ON CONFLICT(key) DO UPDATE SET value=excluded.value, updated_ms=excluded.updated_ms",
                    (STATE_KEY, value, int(time.time() * 1000)),
                )
        except Exception as exc:  # noqa: BLE001 - progress reporting must never stop ingestion
            log.warning("cannot record service state: %s", exc)
