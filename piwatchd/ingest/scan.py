"""The reconciliation scan: the one comparison of the session files with the index.

`scan` lists every session root and compares each file's stat with its
checkpoint; it reads no file. What differs (and, to re-prove checkpoints by
their hashes, everything when `verify_all`) is returned newest first, with
known sources the listing no longer shows. `RemovalGuard` holds the vetoes on
removing a source whose file seems gone: a root that is missing, on another
device than before (an empty mount point), or suddenly empty proves nothing.

Both writers use exactly this: the daemon's ingest thread queues the scan as
its backlog (at start, periodically, after watcher trouble, on SIGHUP), and
`piwatch index --once` (`index_once`) ingests it in one pass, under the same
index lock, so it can never run as a second writer beside the daemon.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from piwatch import wire

from .. import workers as pool
from ..model.extractors import Registry
from ..model.subtree import is_under
from ..source.discovery import iter_session_files, root_is_listable
from ..source.tailer import Change
from ..store.extractors import adopt
from ..store.indexfile import lock_index, open_or_rebuild, prepare_index_path
from ..store.writer import IndexWriter
from .ingestor import Ingestor, IngestOutcome

__all__ = ["ReconcileSummary", "RemovalGuard", "ScanResult", "index_once", "reconcile", "scan"]


@dataclass(slots=True)
class ScanResult:
    queue: list[tuple[str, float, int]]  # (path, mtime, unread bytes), most recently modified first
    files: int  # session files listed
    missed: int  # changes to indexed files the watcher had not reported
    roots_unavailable: list[str]
    seconds: float

    def report(self, reason: str) -> wire.ScanInfo:
        return wire.ScanInfo(
            reason=reason,
            at_ms=int(time.time() * 1000),
            seconds=round(self.seconds, 3),
            files=self.files,
            queued=len(self.queue),
            missed_by_events=self.missed,
            roots_unavailable=list(self.roots_unavailable),
        )


def scan(conn: sqlite3.Connection, roots: Iterable[str], *, verify_all: bool = False) -> ScanResult:
    """Every session file whose stat differs from its checkpoint (every file
    when `verify_all`), plus known sources under a listable root that were not
    listed (the ingest decides whether they are gone)."""
    started = time.monotonic()
    roots = [os.path.normpath(r) for r in roots]
    known = {
        row[0]: row[1:] for row in conn.execute("SELECT path, dev, ino, size, mtime_ns, state, consumed FROM sources")
    }
    listable = [r for r in roots if root_is_listable(r)]
    seen: set[str] = set()
    queue: list[tuple[str, float, int]] = []
    missed = 0
    for root in listable:
        for path in iter_session_files(root):
            if path in seen:
                continue
            seen.add(path)
            try:
                st = os.stat(path)
            except (OSError, ValueError):
                st = None
            row = known.get(path)
            changed = (
                row is None
                or st is None
                or row[4] != "ok"
                or (row[0], row[1], row[2], row[3]) != (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            )
            if changed or verify_all:
                if changed and not verify_all and row is not None and row[4] == "ok":
                    missed += 1
                unread = max(0, st.st_size - (row[5] if row else 0)) if st else 0
                queue.append((path, st.st_mtime if st else 0.0, unread))
    for path in known:
        if path not in seen and any(is_under(path, r) for r in listable):
            queue.append((path, 0.0, 0))
    queue.sort(key=lambda item: item[1], reverse=True)
    return ScanResult(queue, len(seen), missed, [r for r in roots if r not in listable], time.monotonic() - started)


class RemovalGuard:
    """Vetoes on removing a source whose file is absent."""

    def __init__(self, roots: Iterable[str]) -> None:
        self.roots = [os.path.normpath(r) for r in roots]
        self.vetoed = 0
        self._root_dev: dict[str, int] = {}
        for root in self.roots:
            try:
                self._root_dev[root] = os.stat(root).st_dev
            except OSError:
                pass

    def may_remove(self, path: str) -> bool:
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
        self.vetoed += 1
        return False


# -- one pass, for `piwatch index --once` ------------------------------------------


@dataclass(slots=True)
class ReconcileSummary:
    files: int = 0
    changed: int = 0
    removed: int = 0
    events: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    problems: list[IngestOutcome] = field(default_factory=list)
    diagnostics: int = 0
    roots_unavailable: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "changed": self.changed,
            "removed": self.removed,
            "events": self.events,
            "bytesRead": self.bytes_read,
            "seconds": round(self.seconds, 3),
            "diagnostics": self.diagnostics,
            "rootsUnavailable": self.roots_unavailable,
            "problems": [{"path": p.path, "state": p.state, "error": p.error} for p in self.problems],
        }


def reconcile(
    writer: IndexWriter,
    roots: Iterable[str],
    *,
    progress: Callable[[IngestOutcome], None] | None = None,
    planned: Callable[[int, int], None] | None = None,
    omp_roots: Iterable[str] = (),
    extractors: Registry | None = None,
) -> ReconcileSummary:
    """Scan, then ingest everything the scan queued, newest first. `planned`
    hears the work the scan found (files, unread bytes) before it starts;
    `extractors`: the configured registry, adopted first (None: the index's)."""
    started = time.monotonic()
    roots = list(roots)
    if extractors is not None:
        adopt(writer, extractors)
    guard = RemovalGuard(roots)
    ingestor = Ingestor(writer, may_remove=guard.may_remove, omp_roots=list(omp_roots))
    result = scan(writer.conn, roots, verify_all=True)
    summary = ReconcileSummary(roots_unavailable=result.roots_unavailable)
    if planned:
        planned(len(result.queue), sum(unread for _, _, unread in result.queue))
    queue = [path for path, _mtime, _unread in result.queue]
    for i, path in enumerate(queue):
        ingestor.ahead(queue[i : i + 1 + pool.ahead()])
        try:
            outcome = ingestor.ingest(path)
        except OSError as exc:  # this file's read failed mid-way; the others go on
            outcome = IngestOutcome(path, Change.UNREADABLE, state="unreadable", error=f"cannot read {path}: {exc}")
        _account(summary, outcome, progress)
    summary.seconds = time.monotonic() - started
    return summary


def _account(
    summary: ReconcileSummary, outcome: IngestOutcome, progress: Callable[[IngestOutcome], None] | None
) -> None:
    if outcome.state != "removed" and outcome.change is not Change.GONE:
        summary.files += 1
    if outcome.change is not Change.UNCHANGED:
        summary.changed += 1
    if outcome.state == "removed":
        summary.removed += 1
    summary.events += outcome.events
    summary.bytes_read += outcome.bytes_read
    summary.diagnostics += len(outcome.diagnostics)
    if outcome.state not in ("ok", "removed", "pending"):
        summary.problems.append(outcome)
    if progress:
        progress(outcome)


def index_once(
    db: str | os.PathLike[str] | None = None,
    sessions: list[str] | None = None,
    progress: Callable[[IngestOutcome], None] | None = None,
    planned: Callable[[int, int], None] | None = None,
    workers: int | None = None,
    refed: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Reconcile the index with the session files once, as the only writer
    (raises IndexBusy while piwatchd or another pass holds the index lock).
    `workers`: ingest worker processes (None: as configured); `refed(done,
    total)`: the text index's re-feed of owed sessions, before the scan."""
    from ..config import load_settings, omp_roots, resolve_db, session_roots

    settings = load_settings()
    used = pool.configure(workers if workers is not None else settings.ingest_workers)
    roots = session_roots(sessions, settings)
    db_path = prepare_index_path(resolve_db(db, settings))
    lock = lock_index(db_path, f"pid {os.getpid()} (piwatch index --once)\n")
    try:
        conn, rebuilt = open_or_rebuild(db_path, settings.engine)  # a corrupt index is rebuilt, as by the daemon
        writer = IndexWriter(conn)
        try:
            writer.repay_text_debt(progress=refed)
            summary = reconcile(
                writer,
                roots,
                progress=progress,
                planned=planned,
                omp_roots=omp_roots(sessions),
                extractors=settings.extractors,
            )
            writer.refresh_statistics(force=True)
        finally:
            writer.close()  # commits the text index
    finally:
        pool.shutdown()
        lock.close()
    return {"db": str(db_path), "roots": roots, "rebuilt": rebuilt, "workers": used, **summary.as_dict()}
