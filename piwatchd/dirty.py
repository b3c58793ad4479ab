"""The dirty set: where watcher hints meet the ingest thread.

Observer threads only call `mark*` (O(1), no I/O). The ingest thread asks
which paths are *due*: quiet for `settle` seconds, or first marked at least
`max_latency` ago. The second rule is why a debouncer that restarts its
timer on every event is not enough: a file Pi appends to continuously would
never settle, so it would never be ingested.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["DirtySet", "due_paths"]


def due_paths(
    marks: dict[str, tuple[float, float]], now: float, settle: float, max_latency: float
) -> tuple[list[str], float | None]:
    """Split `marks` (path -> (first, last) mark time): the paths due now, and
    the earliest time another one becomes due (None when nothing waits). Pure."""
    due: list[str] = []
    next_due: float | None = None
    for path, (first, last) in marks.items():
        when = min(last + settle, first + max_latency)
        if when <= now:
            due.append(path)
        elif next_due is None or when < next_due:
            next_due = when
    return due, next_due


class DirtySet:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._marks: dict[str, tuple[float, float]] = {}
        self._dirs: set[str] = set()
        self._reconcile: list[str] = []
        self.events_seen = 0

    # -- producers (any thread) ----------------------------------------------

    def mark(self, path: str) -> None:
        now = self._clock()
        with self._cond:
            self.events_seen += 1
            prev = self._marks.get(path)
            self._marks[path] = (prev[0] if prev else now, now)
            self._cond.notify()

    def mark_dir(self, path: str) -> None:
        """A directory appeared: its files may predate its watch, list them."""
        with self._cond:
            self._dirs.add(path)
            self._cond.notify()

    def request_reconcile(self, reason: str) -> None:
        with self._cond:
            if reason not in self._reconcile:
                self._reconcile.append(reason)
            self._cond.notify()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    # -- consumer (the ingest thread) ----------------------------------------

    def take_due(self, settle: float, max_latency: float) -> tuple[list[str], float | None]:
        with self._cond:
            due, next_due = due_paths(self._marks, self._clock(), settle, max_latency)
            for path in due:
                del self._marks[path]
            return due, next_due

    def take_dirs(self) -> list[str]:
        with self._cond:
            dirs, self._dirs = sorted(self._dirs), set()
            return dirs

    def take_reconcile(self) -> list[str]:
        with self._cond:
            reasons, self._reconcile = self._reconcile, []
            return reasons

    def discard(self, path: str) -> None:
        with self._cond:
            self._marks.pop(path, None)

    def pending(self) -> int:
        with self._cond:
            return len(self._marks)

    def wait(self, timeout: float | None) -> None:
        """Sleep until a producer signals or `timeout` passes."""
        with self._cond:
            if self._dirs or self._reconcile:
                return
            self._cond.wait(timeout)
