"""The ingest service: one thread, the only write connection, the whole schedule.

Everything arrives through one `Inbox`: watcher hints (coalesced with a
settle delay and a max latency), new directories to list, reconciliation
requests and rebuild requests. A reconciliation scan (`ingest.scan`: at
start, every `scan_interval`, after watcher trouble, on request) does not
ingest: it compares each file's stat with its checkpoint and queues the
differences as *backlog*, newest first. Each loop turn commits the due hinted
paths first (the session being worked on now), then a time-boxed slice of
the backlog, so a first start on years of history never starves a fresh
append. Each commit is announced on `commits` (freshness waits wake on it).

Self-healing: a file that failed on a transient error (database busy, disk
full, an I/O error) is retried with exponential backoff, not at the next
scan. An index file that disappears or is replaced while running, or that
SQLite reports corrupt, is discarded and rebuilt from the sources; until the
rebuild has caught up, `index_problem` says so and `status` is unhealthy.

Progress (files known, bytes ingested, backlog, last scan, per-file errors)
goes to the `service_state` table, where `piwatch status` reads it.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
from msgspec import structs
from piwatch import wire
from piwatch.rates import RateMeter

from .. import workers
from ..model.events import excerpt
from ..source.discovery import session_files_in
from ..store.extractors import adopt
from ..store.indexfile import discard_index, open_or_rebuild, prepare_index_path
from ..store.writer import IndexWriter
from .backlog import Backlog, file_mtime
from .commits import CommitSignal
from .health import IndexLost, IndexWatch, corrupt, lost, transient
from .inbox import Inbox, Work
from .ingestor import Ingestor, IngestOutcome
from .progress import FilesThisRun, count_file, note_error, note_repaid, plus, starting
from .retries import Retries, retry_delay
from .scan import RemovalGuard, scan
from .service_config import ServiceConfig, WatchReport

__all__ = ["STATE_KEY", "Service"]

log = logging.getLogger("piwatchd.service")

STATE_KEY = "service"
_LOOP_ERROR = "(ingest loop)"  # the errors key of a failure that is not one file's
# A suspect text re-feed is retried after 10 s, 20 s, 40 s ... at most this long.
SUSPECT_RETRY_MAX = 30.0
# Hinted files that become due while others are read are read too before the
# text is published, for at most this long: one RAM commit shows them all.
COALESCE_SECONDS = 0.01


class Service:
    def __init__(
        self,
        config: ServiceConfig,
        inbox: Inbox | None = None,
        *,
        watch: WatchReport | None = None,
        clock: Callable[[], float] = time.monotonic,
        commits: CommitSignal | None = None,
        index_problem: str | None = None,
    ) -> None:
        self.config = config
        self.roots = [os.path.normpath(r) for r in config.roots]
        self.inbox = inbox or Inbox(clock)
        self._watch = watch
        # Readers waiting for freshness wake on this after each file's commit.
        self.commits = commits or CommitSignal()
        self._clock = clock
        self._rate = RateMeter()  # recent ingest bytes/s, for status's time left while catching up
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ready = threading.Event()  # the write connection is open
        self.failed: BaseException | None = None
        self.progress = starting(index_problem)  # the wire's ServiceStatus, the one shape of progress
        self._files_this_run = FilesThisRun()
        self._backlog = Backlog()  # what scans found, drained newest first
        self._retries = Retries()  # transient failures, retried with backoff
        self._guard = RemovalGuard(self.roots)
        self._catching_up = True  # until the backlog of a full scan is drained
        self._started_at = clock()
        self._next_scan = 0.0
        self._last_state_write = 0.0
        self._index = IndexWatch(config.db_path, clock)
        self.last_loop = clock()  # the watchdog ping is tied to this moving
        self._next_suspect_repay = 0.0
        self._suspect_attempts = 0

    # -- lifecycle (any thread) ------------------------------------------------

    def start(self) -> None:
        # A daemon thread, so a bounded stop() can end the process even mid-file.
        self._thread = threading.Thread(target=self._run, name="piwatchd-ingest", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Finish the current file, commit, close. Joins the thread for at
        most `timeout` seconds; False when it is still running then."""
        self._stop.set()
        self.inbox.wake()
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
        self.inbox.request_reconcile(reason)

    def request_rebuild(self, path: str | None) -> None:
        """Re-read `path` (or every known source when None) from scratch."""
        self.inbox.request_rebuild(path)

    # -- the ingest thread -------------------------------------------------------

    def _run(self) -> None:
        try:
            self._open_index()
        except BaseException as exc:  # noqa: BLE001 - surfaced by the daemon's lifecycle loop
            self.failed = exc
            log.error("cannot open index %s: %s", self.config.db_path, exc)
            self.ready.set()
            return
        self.ready.set()
        try:
            self._loop()
        except BaseException as exc:
            self.failed = exc
            log.exception("ingest thread failed")
        finally:
            self._close_index()

    def _loop(self) -> None:
        """Turns until stopped; the index's own failures are healed here."""
        start_up = True
        while not self._stop.is_set():
            try:
                if start_up:
                    start_up = False
                    self._full_scan("start-up")
                self._turn()
                self.progress.errors.pop(_LOOP_ERROR, None)
            except IndexLost as why:
                self._rebuild_index(str(why))
            except sqlite3.OperationalError as exc:
                # Busy past the timeout, disk full, I/O: nothing was committed; go on shortly.
                log.warning("index temporarily unusable: %s", exc)
                self._stop.wait(0.5)
            except sqlite3.DatabaseError as exc:
                if not corrupt(exc):
                    raise
                self._rebuild_index(str(lost(exc)))
            except Exception as exc:  # reported in status; the loop goes on
                # Per-file errors never get here (Ingestor contains them): this is
                # the machine (a text-index write on a full disk, say). Keep serving
                # what is indexed, say so, and try again after a pause.
                log.exception("ingest turn failed")
                self._file_error(_LOOP_ERROR, f"{type(exc).__name__}: {excerpt(str(exc), 120)}")
                self._stop.wait(1.0)

    def _open_index(self) -> None:
        conn, problem = open_or_rebuild(self.config.db_path, self.config.engine)
        if problem:
            self.progress.index_problem = problem
            self.progress.index_rebuilds = plus(self.progress.index_rebuilds)
            log.warning("%s", problem)
        self.writer = IndexWriter(conn)
        adopt(self.writer, self.config.extractors)  # the sessions it changes: re-read by the start-up scan
        self.ingestor = Ingestor(
            self.writer,
            gone_recheck_delay=self.config.gone_recheck_delay,
            may_remove=self._guard.may_remove,
            slice_seconds=self.config.batch_seconds,
            omp_roots=self.config.omp_roots,
        )
        self._index.remember()
        # Sessions whose text documents may lag their rows (a crash between
        # the two commits, a lost text index) are re-fed before anything else; suspects
        # later (`_repay_suspect`). `status` shows how far (an upgrade re-feeds every session).
        started = self._clock()

        def refed(done: int, total: int) -> None:
            self.progress.refeed_done, self.progress.refeed_total = done, total
            self.progress.refeed_seconds = round(self._clock() - started, 1)

        try:
            note_repaid(self.progress, self.writer.repay_text_debt(progress=refed), self._session_key)
        finally:
            self.progress.refeed_done = self.progress.refeed_total = self.progress.refeed_seconds = None

    def _close_index(self) -> None:
        self.progress.phase = "stopped"
        try:
            self._write_state(force=True)
            self.writer.refresh_statistics()
        except Exception:  # noqa: BLE001, S110 - best effort while stopping: a lost index cannot take its state
            pass
        self.writer.close()  # commits the text index

    def _turn(self) -> None:
        """One loop turn: commands first, then hinted paths, then a backlog slice."""
        self.last_loop = self._clock()
        self._index.check()
        work = self.inbox.take(self.config.settle, self.config.max_latency)
        if work.index_check:
            self._index.verify(work.index_check)
        self._apply_rebuilds(work.rebuilds)
        if work.reconcile or self._clock() >= self._next_scan:
            self._scan("; ".join(work.reconcile) or "periodic")
        for directory in work.dirs:
            self._list_new_dir(directory)
        due = work.due + self._retries_due()
        if due:
            due.sort(key=file_mtime, reverse=True)
            self._batch(due, deadline=None)
        if self._backlog and not self._stop.is_set():
            self._batch([], deadline=self._clock() + self.config.batch_seconds)
            self._write_state()
            return
        if self._catching_up and self._repay_suspect():
            return  # a suspect re-feed is part of catching up: start-up ends with the text index whole
        self._caught_up()
        self._write_state()
        if self.inbox.pending() == 0 and self.writer.maintain_text():
            return  # more engine maintenance to do; new hints are checked first
        if self.inbox.pending() == 0:
            self._repay_suspect()
        self._idle(work, bool(due))

    def _idle(self, work: Work, worked: bool) -> None:
        """Sleep until a command, the next due path, retry or scan, or the heartbeat."""
        wait_until = min(self._next_scan, self._clock() + self.config.heartbeat_interval)
        for when in (work.next_due, self._retries.next_time()):
            if when is not None:
                wait_until = min(wait_until, when)
        text_due = self.writer.text_due() if self.inbox.pending() == 0 else None
        if text_due is not None:  # a deferred text commit (`maintain_text` makes it)
            wait_until = min(wait_until, self._clock() + text_due)
        timeout = max(0.0, wait_until - self._clock())
        if timeout > 0 and not worked:
            self.inbox.wait(timeout)

    def _caught_up(self) -> None:
        """The backlog of a full scan is drained: start-up or a rebuild is done."""
        if not self._catching_up:
            return
        self._catching_up = False
        if self.progress.startup_seconds is None:
            self.progress.startup_seconds = round(self._clock() - self._started_at, 3)
        if self.progress.index_problem:
            log.info("index rebuilt: %s", self.progress.index_problem)
            self.progress.index_problem = None
        self.progress.phase = "idle"
        self.writer.refresh_statistics(force=True)  # the planner sees the index it now has
        self._write_state(force=True)

    def _apply_rebuilds(self, requests: list[str | None]) -> None:
        """Forget the checkpoints of the named sources, so their next ingest re-reads them."""
        if not requests:
            return
        paths: set[str] = set()
        for path in requests:
            paths.update(self.writer.known_paths() if path is None else [path])
        with self.writer.transaction():
            for path in paths:
                record = self.writer.source(path)
                if record is not None:
                    self.writer.mark_source(record.source_id, "pending", "reindex requested", forget_checkpoint=True)
        self.commits.notify()
        for path in paths:
            self.inbox.mark(path)

    # -- the index file ------------------------------------------------------------

    def _rebuild_index(self, reason: str) -> None:
        log.error("%s", reason)
        self.progress.index_problem = reason
        self.progress.index_rebuilds = plus(self.progress.index_rebuilds)
        self.progress.phase = "rebuilding"
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001 - the old index is being thrown away
            self.writer.conn.close()
        discard_index(self.config.db_path)
        prepare_index_path(self.config.db_path)
        self._open_index()
        self._backlog.clear()
        self._retries.clear()
        self.progress.errors.clear()
        self._full_scan("index rebuild")
        self.commits.notify()

    def _full_scan(self, reason: str) -> None:
        """Queue every file; the phase says so until the backlog is drained."""
        self._catching_up = True
        self._scan(reason, verify_all=True)

    # -- text re-feeds that did not finish -----------------------------------------

    def _repay_suspect(self) -> bool:
        """Re-feed one session whose earlier re-feed never finished; True when one was tried.

        Each attempt is recorded before it starts, so a session that kills the
        process in its re-feed is retried at most MAX_REPAY_ATTEMPTS times across
        restarts, then quarantined: never a crash loop. One that runs out of
        time is retried with backoff.
        """
        if self._clock() < self._next_suspect_repay:
            return False
        repaid = self.writer.repay_text_debt(suspect=True)
        note_repaid(self.progress, repaid, self._session_key)
        if repaid.left:
            self._suspect_attempts += 1
            self._next_suspect_repay = self._clock() + retry_delay(self._suspect_attempts, SUSPECT_RETRY_MAX) * 20
        return bool(repaid.done or repaid.left)

    def _session_key(self, session_id: str) -> str:
        """The errors key of a session: its file, as for every other per-file problem."""
        owner = self.writer.session_owner(session_id)
        return owner[1] if owner else f"session {excerpt(session_id)}"

    # -- batches -----------------------------------------------------------------

    def _batch(self, paths: list[str], deadline: float | None) -> None:
        """Ingest `paths`, then backlog until `deadline`.

        Each file commits on its own: wrapping several in one transaction made
        every file a savepoint, whose page journaling cost ~15% of a cold index.
        """
        self.progress.phase = "rebuilding" if self.progress.index_problem else "ingesting"
        for path in paths:
            self._backlog.remove(path)
            self._ingest_one(path)
        if paths:
            self._ingest_arrivals()
        while deadline is not None and self._backlog and self._clock() < deadline and not self._stop.is_set():
            queued = self._backlog.next()
            if queued is None:
                break
            self._backlog.remove(queued)
            self.ingestor.ahead([queued, *self._backlog.upcoming(workers.ahead())])
            self._ingest_one(queued)
        # The text index commits when the backlog is done, or at most every COMMIT_INTERVAL; hinted
        # files (sessions in use now) at once, so a catch-up never delays a live append's search.
        if self.writer.flush_text(idle=bool(paths) or not self._backlog):
            self.commits.notify()  # what waiters wait for is searchable now
        self.progress.batches = plus(self.progress.batches)
        if not self.progress.index_problem:
            self.progress.phase = "idle"
            self.writer.refresh_statistics()  # only once the index has doubled

    def _ingest_arrivals(self) -> None:
        """Hinted files that became due while others were read (appends arriving
        together), read before the text is published, for COALESCE_SECONDS at
        most: a stream of appends never holds back the first one's publish."""
        until = self._clock() + COALESCE_SECONDS
        while not self._stop.is_set():
            more = self.inbox.take_due(self.config.settle, self.config.max_latency)
            for path in more:
                self._backlog.remove(path)
                self._ingest_one(path)
            if not more or self._clock() >= until:
                return

    def _ingest_one(self, path: str) -> IngestOutcome | None:
        try:
            outcome = self.ingestor.ingest(path)
        except Exception as exc:
            if corrupt(exc):
                raise lost(exc) from exc
            if not transient(exc):
                raise  # Ingestor contains every error of a file; anything else is a bug to surface
            self._retry_later(path, exc)
            return None
        self.commits.notify()
        if outcome.more:
            # The rest of a large file waits its turn in the backlog: hints for other files come first.
            self._backlog.add(path, file_mtime(path))
        self._retries.succeeded(path, self._clock())
        count_file(self.progress, path, outcome, self._files_this_run)
        self._rate.add(self._clock(), self.progress.bytes_ingested or 0)
        # What the scan queued, less what is done: the time left of a catch-up is this over the rate.
        self._backlog.read(path, outcome.bytes_read)
        if outcome.error:
            self._file_error(path, outcome.error)
            log.info("%s: %s (%s)", outcome.state, path, outcome.error)
        else:
            self.progress.errors.pop(path, None)
        if outcome.change.value != "unchanged":
            log.debug("%s %s: %d events, %d bytes", outcome.change.value, path, outcome.events, outcome.bytes_read)
        return outcome

    def _retry_later(self, path: str, exc: BaseException) -> None:
        """Nothing of this file was committed (busy, disk full, I/O): try it
        again after a growing delay, whatever the watcher or the scans do."""
        attempts, delay = self._retries.failed(path, self._clock())
        self.progress.retries = plus(self.progress.retries)
        message = f"{type(exc).__name__}: {excerpt(str(exc), 120)}; retry {attempts} in {delay:g}s"
        self._file_error(path, message)
        log.warning("ingesting %s failed: %s", path, message)

    def _retries_due(self) -> list[str]:
        due = self._retries.due(self._clock())
        for path in due:
            self._backlog.remove(path)
        return due

    def _file_error(self, path: str, message: str) -> None:
        note_error(self.progress, path, message)

    # -- scans -------------------------------------------------------------------

    def _scan(self, reason: str, verify_all: bool = False) -> None:
        """Queue what the reconciliation scan found (all files when `verify_all`:
        a restart re-proves each checkpoint by its hashes, a few KB per file)."""
        if not self._catching_up:
            self.progress.phase = "scanning"
        result = scan(self.writer.conn, self.roots, verify_all=verify_all)
        for path, mtime, unread in result.queue:
            self._backlog.add(path, mtime, unread)
        self.progress.files_known = result.files
        self.progress.scans = plus(self.progress.scans)
        self.progress.missed_by_events = plus(self.progress.missed_by_events, result.missed)
        self.progress.last_scan = result.report(reason)
        self._next_scan = self._clock() + self.config.scan_interval
        log.info("scan (%s): %d files, %d queued in %.2fs", reason, result.files, len(result.queue), result.seconds)
        self._write_state(force=True)

    def _list_new_dir(self, directory: str) -> None:
        # A new `--<cwd>--` folder, or a tree moved in: list what its watch may have missed.
        for path in session_files_in(directory):
            self.inbox.mark(path)

    # -- progress ----------------------------------------------------------------

    def snapshot(self) -> wire.ServiceStatus:
        """The service's progress in its one shape, the wire's (also the `service_state` row)."""
        return structs.replace(
            self.progress,
            pid=os.getpid(),
            heartbeat_ms=int(time.time() * 1000),
            db=str(Path(self.config.db_path)),
            roots=self._watch.status() if self._watch else [{"path": r} for r in self.roots],
            warnings=[wire.clip(str(w)) for w in self._watch.warnings] if self._watch else [],
            settle=self.config.settle,
            max_latency=self.config.max_latency,
            scan_interval=self.config.scan_interval,
            backlog_files=len(self._backlog) + self.inbox.pending(),
            backlog_bytes=self._backlog.unread_bytes if self._backlog else 0,
            rate_bytes_per_s=self._rate.rate(self._clock()) if self._backlog else None,
            removals_vetoed=self._guard.vetoed,
            retrying=len(self._retries),
            errors={path: wire.clip(message) for path, message in self.progress.errors.items()},
        )

    def _write_state(self, force: bool = False) -> None:
        now = self._clock()
        busy = self._backlog or self.progress.phase != "idle"
        interval = self.config.state_interval if busy else self.config.heartbeat_interval
        if not force and now - self._last_state_write < interval:
            return
        self._last_state_write = now
        value = msgspec.json.encode(self.snapshot()).decode()
        try:
            with self.writer.transaction():
                self.writer.save_service_state(STATE_KEY, value)
        except sqlite3.Error as exc:
            if corrupt(exc):
                raise lost(exc) from exc
            log.warning("cannot record service state: %s", exc)
