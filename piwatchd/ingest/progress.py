"""The ingest service's progress in its one shape, the wire's `ServiceStatus`:
what a fresh service starts from, the bounded per-file errors, and the
counts one ingested file adds. The service fills in the live fields
(pid, heartbeat, backlog, roots) when it takes a snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from piwatch import wire

from ..text.engine import Repaid
from .ingestor import IngestOutcome

__all__ = ["MAX_FILE_ERRORS", "FilesThisRun", "count_file", "note_error", "note_repaid", "plus", "starting"]

# The errors map keeps the most recent problems only: status stays small.
MAX_FILE_ERRORS = 50


def plus(count: int | None, more: int = 1) -> int:
    """A counter of the wire shape (None on the wire when absent) advanced by `more`."""
    return (count or 0) + more


def starting(index_problem: str | None) -> wire.ServiceStatus:
    """The progress of a service that has not turned yet (`index_problem`: found while opening)."""
    return wire.ServiceStatus(
        started_ms=int(time.time() * 1000),
        phase="starting",
        files_known=0,
        files_ingested=0,
        files_changed=0,
        bytes_ingested=0,
        events_ingested=0,
        batches=0,
        scans=0,
        missed_by_events=0,
        retries=0,
        errors={},
        index_problem=index_problem,
        index_rebuilds=int(index_problem is not None),
    )


def note_error(progress: wire.ServiceStatus, path: str, message: str) -> None:
    """Record `path`'s newest problem; the oldest fall off past MAX_FILE_ERRORS."""
    errors = progress.errors
    errors.pop(path, None)
    errors[path] = message
    while len(errors) > MAX_FILE_ERRORS:
        errors.pop(next(iter(errors)))


class FilesThisRun:
    """The distinct files ingested, and changed, since the service started: a file
    read in several slices, or appended to a hundred times, is one file, so the
    counts never exceed the files known. One entry per file, as the backlog's."""

    def __init__(self) -> None:
        self.ingested: set[str] = set()
        self.changed: set[str] = set()


def count_file(progress: wire.ServiceStatus, path: str, outcome: IngestOutcome, run: FilesThisRun) -> None:
    """What one ingest of `path` adds to the counts (errors are the caller's: it knows the key)."""
    run.ingested.add(path)
    if outcome.change.value != "unchanged":
        run.changed.add(path)
    progress.files_ingested, progress.files_changed = len(run.ingested), len(run.changed)
    progress.bytes_ingested = plus(progress.bytes_ingested, outcome.bytes_read)
    progress.events_ingested = plus(progress.events_ingested, outcome.events)


def note_repaid(progress: wire.ServiceStatus, repaid: Repaid, key: Callable[[str], str]) -> None:
    """What a text re-feed did, under each session's errors key (`key`: its file)."""
    for session_id in repaid.done:
        progress.errors.pop(key(session_id), None)
    for session_id in repaid.left:
        note_error(progress, key(session_id), "text index re-feed ran out of time; retried later")
    for session_id in repaid.quarantined:
        note_error(
            progress,
            key(session_id),
            "quarantined: its text index re-feed failed repeatedly, so it is only partly searchable"
            " until its file changes or `piwatch reindex` rebuilds it",
        )
