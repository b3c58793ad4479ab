"""The ingest thread's one inbox: every command from any other thread.

Producers (watchdog's observer threads, request threads, signal handlers)
only post here: O(1), no I/O. The ingest thread takes everything due in one
`take()` and sleeps in `wait()` until something arrives.

Commands: a path changed (`mark`, coalesced with a settle delay and a max
latency), a directory appeared (`mark_dir`), reconcile everything
(`request_reconcile`), re-read a file or everything from scratch
(`request_rebuild`), verify the index file a reader found damaged
(`request_index_check`). Paths are *due* when quiet for `settle` seconds, or first
marked at least `max_latency` ago; a path marked first after a quiet spell
is due at once (`due_paths`). The max-latency rule is why a debouncer that
restarts its timer on every event is not enough: a file Pi appends to
continuously would never settle, so it would never be ingested.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Inbox", "Work", "due_paths"]


def due_paths(
    marks: dict[str, tuple[float, float]],
    now: float,
    settle: float,
    max_latency: float,
    taken: dict[str, float] | None = None,
) -> tuple[list[str], float | None]:
    """Split `marks` (path -> (first, last) mark time): the paths due now, and
    the earliest time another one becomes due (None when nothing waits). Pure.

    `taken` (path -> when it was last taken): a path marked first after
    `settle` quiet seconds since it was last taken is due at once (an
    isolated append waits for nothing); marks that follow within `settle`
    coalesce as above, so a file is read at most about once per `settle`."""
    due: list[str] = []
    next_due: float | None = None
    for path, (first, last) in marks.items():
        before = taken.get(path) if taken else None
        leading = before is None or first - before >= settle
        when = first if leading else min(last + settle, first + max_latency)
        if when <= now:
            due.append(path)
        elif next_due is None or when < next_due:
            next_due = when
    return due, next_due


@dataclass(slots=True)
class Work:
    """Everything one `take()` drained, in the order the ingest thread acts on it."""

    rebuilds: list[str | None] = field(default_factory=list)  # None: every known source
    reconcile: list[str] = field(default_factory=list)  # reasons
    dirs: list[str] = field(default_factory=list)
    index_check: str | None = None  # why a reader suspects the index file is damaged
    due: list[str] = field(default_factory=list)
    next_due: float | None = None  # when the next marked path becomes due


class Inbox:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._marks: dict[str, tuple[float, float]] = {}
        self._taken: dict[str, float] = {}  # path -> when last taken, kept for `settle` seconds
        self._dirs: set[str] = set()
        self._reconcile: list[str] = []
        self._rebuilds: list[str | None] = []
        self._index_check: str | None = None
        # Posts counted, and the count the last `take()` saw: a post that lands
        # while the ingest thread works (after its take, before its wait) finds
        # nobody waiting, so `wait()` must notice it by the count, not the notify.
        self._posts = 0
        self._posts_taken = 0

    # -- producers (any thread) ----------------------------------------------

    def mark(self, path: str) -> None:
        now = self._clock()
        with self._cond:
            prev = self._marks.get(path)
            self._marks[path] = (prev[0] if prev else now, now)
            self._posted()

    def mark_dir(self, path: str) -> None:
        """A directory appeared: its files may predate its watch, list them."""
        with self._cond:
            self._dirs.add(path)
            self._posted()

    def request_reconcile(self, reason: str) -> None:
        with self._cond:
            if reason not in self._reconcile:
                self._reconcile.append(reason)
            self._posted()

    def request_rebuild(self, path: str | None) -> None:
        """Re-read `path` (every known source when None) from scratch."""
        with self._cond:
            self._rebuilds.append(path)
            self._posted()

    def request_index_check(self, reason: str) -> None:
        """A reader hit an error that says the index file is damaged: verify it."""
        with self._cond:
            self._index_check = self._index_check or reason
            self._posted()

    def wake(self) -> None:
        with self._cond:
            self._posts += 1
            self._cond.notify_all()

    def _posted(self) -> None:
        # Called with the lock held.
        self._posts += 1
        self._cond.notify()

    # -- the consumer (the ingest thread) -------------------------------------

    def take(self, settle: float, max_latency: float) -> Work:
        with self._cond:
            due, next_due = self._take_due(settle, max_latency)
            work = Work(self._rebuilds, self._reconcile, sorted(self._dirs), self._index_check, due, next_due)
            self._rebuilds, self._reconcile, self._dirs, self._index_check = [], [], set(), None
            self._posts_taken = self._posts
            return work

    def take_due(self, settle: float, max_latency: float) -> list[str]:
        """The paths due now, and nothing else (commands wait for the next `take`)."""
        with self._cond:
            return self._take_due(settle, max_latency)[0]

    def _take_due(self, settle: float, max_latency: float) -> tuple[list[str], float | None]:
        # Called with the lock held.
        now = self._clock()
        due, next_due = due_paths(self._marks, now, settle, max_latency, self._taken)
        self._taken = {p: t for p, t in self._taken.items() if now - t < settle}
        for path in due:
            del self._marks[path]
            self._taken[path] = now
        return due, next_due

    def pending(self) -> int:
        """Marked paths not yet taken."""
        with self._cond:
            return len(self._marks)

    def wait(self, timeout: float | None) -> None:
        """Sleep until a producer posts or `timeout` passes; return at once when
        something was posted since the last `take()` (its notify found nobody waiting)."""
        with self._cond:
            if self._posts != self._posts_taken:
                return
            self._cond.wait(timeout)
