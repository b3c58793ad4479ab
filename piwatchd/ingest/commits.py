"""A commit signal: the ingest thread announces each commit; waiting readers wake.

Readers that wait for freshness (`search` with `waitSeconds`) block on this
instead of polling the index, and hold no request slot while they wait. The
generation counter makes a wake-up that happened between a reader's check and
its wait impossible to miss: the reader waits for the generation to move past
the one it read before checking.
"""

from __future__ import annotations

import threading

__all__ = ["CommitSignal"]


class CommitSignal:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0

    @property
    def generation(self) -> int:
        with self._cond:
            return self._generation

    def notify(self) -> None:
        """Called by the writer after a commit (any thread)."""
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> int:
        """Block until a commit after generation `seen`, or `timeout` seconds;
        return the current generation."""
        with self._cond:
            self._cond.wait_for(lambda: self._generation != seen, timeout=max(0.0, timeout))
            return self._generation
