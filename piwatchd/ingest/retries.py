"""Retries of transient failures (pure): a file whose commit failed for a
reason that is not its own (database busy, disk full, an I/O error) is tried
again after a growing delay, whatever the watcher or the scans do. The
caller passes the time, so the schedule is a table to test.
"""

from __future__ import annotations

__all__ = ["RETRY_MAX_SECONDS", "Retries", "retry_delay"]

# Transient failures are retried after 0.5 s, 1 s, 2 s, ... at most this long.
RETRY_MAX_SECONDS = 60.0


def retry_delay(attempt: int, cap: float = RETRY_MAX_SECONDS) -> float:
    """Seconds before retry number `attempt` (1-based) of a transient failure."""
    return float(min(cap, 0.5 * 2 ** min(max(attempt, 1) - 1, 16)))


class Retries:
    def __init__(self) -> None:
        self._due: dict[str, tuple[float, int]] = {}  # path -> (when to retry, attempts so far)

    def __len__(self) -> int:
        return len(self._due)

    def failed(self, path: str, now: float) -> tuple[int, float]:
        """Schedule `path` again; returns (attempts so far, delay in seconds)."""
        _, attempts = self._due.get(path, (0.0, 0))
        attempts += 1
        delay = retry_delay(attempts)
        self._due[path] = (now + delay, attempts)
        return attempts, delay

    def succeeded(self, path: str, now: float) -> None:
        """`path` committed. If it had been failing, the cause has passed (space
        freed, lock gone): the others need not wait out their backoff."""
        if self._due.pop(path, None) is not None:
            self._due = {p: (min(when, now), n) for p, (when, n) in self._due.items()}

    def due(self, now: float) -> list[str]:
        """Paths whose retry time has come (they stay scheduled until they succeed or fail again)."""
        return [path for path, (when, _) in self._due.items() if when <= now]

    def next_time(self) -> float | None:
        """When the next retry falls due; None when nothing waits."""
        return min((when for when, _ in self._due.values()), default=None)

    def clear(self) -> None:
        self._due.clear()
