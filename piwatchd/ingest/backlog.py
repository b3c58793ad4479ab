"""The ingest backlog (pure): files a scan found behind their checkpoints,
drained newest first, so the session in use is indexed before years of
history. A path queued again replaces its earlier place; the bytes still
unread are tracked for status's time left.
"""

from __future__ import annotations

import heapq

__all__ = ["Backlog"]


class Backlog:
    def __init__(self) -> None:
        self._mtime: dict[str, float] = {}  # path -> mtime it was queued with
        self._heap: list[tuple[float, str]] = []  # (-mtime, path); entries not in _mtime are stale
        self.unread_bytes = 0  # what the scans queued, less what was read since

    def __len__(self) -> int:
        return len(self._mtime)

    def __bool__(self) -> bool:
        return bool(self._mtime)

    def __contains__(self, path: object) -> bool:
        return path in self._mtime

    def add(self, path: str, mtime: float, unread: int = 0) -> None:
        """Queue `path` (again) at `mtime`, with `unread` bytes behind its checkpoint."""
        self._mtime[path] = mtime
        heapq.heappush(self._heap, (-mtime, path))
        self.unread_bytes += unread

    def next(self) -> str | None:
        """The most recently modified queued path, left queued (`remove` takes it)."""
        while self._heap:
            neg, path = self._heap[0]
            if self._mtime.get(path) == -neg:
                return path
            heapq.heappop(self._heap)  # superseded or removed
        return None

    def remove(self, path: str) -> None:
        """`path` is being ingested (or dropped); an empty backlog owes no bytes."""
        self._mtime.pop(path, None)
        if not self._mtime:
            self.clear()

    def read(self, nbytes: int) -> None:
        """`nbytes` of queued work were read."""
        self.unread_bytes = max(0, self.unread_bytes - nbytes)

    def clear(self) -> None:
        self._mtime.clear()
        self._heap.clear()
        self.unread_bytes = 0
