"""One pass over every session root: ingest what changed, remove what is gone.

This is the reconciliation scan. `piwatch index --once` runs it; the daemon
runs it at start-up, periodically and after watcher trouble. On its own it is
enough to converge the index with the files.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .auth import is_under
from .index.writer import IndexWriter
from .ingest import Ingestor, IngestOutcome
from .source.discovery import iter_session_files, root_is_listable

__all__ = ["reconcile", "ReconcileSummary"]


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

    def as_dict(self) -> dict:
        return {
            "files": self.files,
            "changed": self.changed,
            "removed": self.removed,
            "events": self.events,
            "bytesRead": self.bytes_read,
            "seconds": round(self.seconds, 3),
            "diagnostics": self.diagnostics,
            "problems": [
                {"path": p.path, "state": p.state, "error": p.error} for p in self.problems
            ],
        }


def reconcile(
    writer: IndexWriter,
    roots: Iterable[str],
    *,
    ingestor: Ingestor | None = None,
    progress: Callable[[IngestOutcome], None] | None = None,
) -> ReconcileSummary:
    started = time.monotonic()
    ingestor = ingestor or Ingestor(writer)
    roots = [os.path.normpath(r) for r in roots]
    summary = ReconcileSummary()
    seen: set[str] = set()
    listable = [r for r in roots if root_is_listable(r)]
    found: list[str] = []
    for root in listable:
        found.extend(iter_session_files(root))
    # Most recently modified first, so the session being worked on now is
    # current before the long tail of history.
    def mtime(p: str) -> float:
        try:
            return os.stat(p).st_mtime
        except OSError:
            return 0.0

    found.sort(key=mtime, reverse=True)
    for path in found:
        if path in seen:
            continue
        seen.add(path)
        _account(summary, ingestor.ingest(path), progress)
    # Known sources that the scan did not list: removed only under a root that
    # could be listed, and only when the file itself is confirmed absent.
    for path in writer.known_paths():
        if path in seen or not any(is_under(path, r) for r in listable):
            continue
        _account(summary, ingestor.ingest(path), progress)
    summary.seconds = time.monotonic() - started
    return summary


def _account(summary: ReconcileSummary, outcome: IngestOutcome, progress) -> None:
    if outcome.state != "removed" and outcome.change.value != "gone":
        summary.files += 1
    if outcome.change.value not in ("unchanged",):
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
