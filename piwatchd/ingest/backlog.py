"""The ingest backlog (pure): files a scan found behind their checkpoints,
drained newest first, so the session in use is indexed before years of
history. A path queued again replaces its earlier place and its earlier
count of unread bytes (a scan that re-queues the whole backlog must not
count it twice); the bytes still owed are what status's time left divides.
"""

from __future__ import annotations

import heapq
import os

__all__ = ["Backlog", "file_mtime"]


class Backlog:
    def __init__(self) -> None:
        self._mtime: dict[str, float] = {}  # path -> mtime it was queued with
        self._heap: list[tuple[float, str]] = []  # (-mtime, path); entries not in _mtime are stale
        self._owed: dict[str, int] = {}  # path -> bytes a scan found unread, less what was read since
        self.unread_bytes = 0  # the sum of _owed, kept as it changes

    def __len__(self) -> int:
        return len(self._mtime)

    def __bool__(self) -> bool:
        return bool(self._mtime)

    def __contains__(self, path: object) -> bool:
        return path in self._mtime

    def add(self, path: str, mtime: float, unread: int | None = None) -> None:
        """Queue `path` (again) at `mtime`; `unread` is a scan's count of the
        bytes behind its checkpoint (None keeps what it still owes)."""
        self._mtime[path] = mtime
        heapq.heappush(self._heap, (-mtime, path))
        if len(self._heap) > 2 * len(self._mtime) + 1024:
            # Re-queued paths leave stale heap entries: periodic scans over a
            # long catch-up would otherwise grow the heap by the backlog each time.
            self._heap = [(-m, p) for p, m in self._mtime.items()]
            heapq.heapify(self._heap)
        if unread is not None:
            self._set_owed(path, unread)

    def next(self) -> str | None:
        """The most recently modified queued path, left queued (`remove` takes it)."""
        while self._heap:
            neg, path = self._heap[0]
            if self._mtime.get(path) == -neg:
                return path
            heapq.heappop(self._heap)  # superseded or removed
        return None

    def upcoming(self, n: int) -> list[str]:
        """The next `n` paths `next` would give, left queued (O(n log size))."""
        taken: list[tuple[float, str]] = []
        while self._heap and len(taken) < n:
            item = heapq.heappop(self._heap)
            if self._mtime.get(item[1]) == -item[0] and item not in taken:
                taken.append(item)
        for item in taken:
            heapq.heappush(self._heap, item)
        return [path for _, path in taken]

    def remove(self, path: str) -> None:
        """`path` is being ingested (its bytes stay owed until `read`); an
        empty backlog owes no bytes."""
        self._mtime.pop(path, None)
        if not self._mtime:
            self.clear()

    def read(self, path: str, nbytes: int) -> None:
        """`nbytes` of `path` were read; a path no longer queued owes nothing
        more (what it grew by since the scan was read with it)."""
        if path not in self._owed:
            return  # a hinted file the scans had not queued
        self._set_owed(path, self._owed[path] - nbytes if path in self._mtime else 0)

    def clear(self) -> None:
        self._mtime.clear()
        self._heap.clear()
        self._owed.clear()
        self.unread_bytes = 0

    def _set_owed(self, path: str, nbytes: int) -> None:
        self.unread_bytes -= self._owed.pop(path, 0)
        if nbytes > 0:
            self._owed[path] = nbytes
            self.unread_bytes += nbytes


def file_mtime(path: str) -> float:
    """A file's modification time, the backlog's order (0 when it cannot be read: last)."""
    try:
        return os.stat(path).st_mtime
    except (OSError, ValueError):
        return 0.0
