"""Ingest rate and time left, one definition for `index --once`'s progress,
the daemon's catch-up figure and `piwatch status`. Pure: the caller passes
the clock readings."""

from __future__ import annotations

from collections import deque

__all__ = ["RateMeter", "time_left", "format_duration", "format_rate", "refeed_words"]


class RateMeter:
    """Bytes per second over the last `window` seconds (a recent rate follows a
    change of pace; the rate since start would not). Bounded: at most `samples`
    readings are kept, older ones merged away."""

    def __init__(self, window: float = 10.0, samples: int = 64) -> None:
        self.window = window
        self._spacing = window / samples  # readings closer than this update the last one
        self._samples: deque[tuple[float, int]] = deque(maxlen=samples + 2)

    def add(self, now: float, total_bytes: int) -> None:
        """Record the running total of bytes done at time `now` (seconds)."""
        if len(self._samples) > 1 and now - self._samples[-2][0] < self._spacing:
            self._samples[-1] = (now, total_bytes)  # too close to the one before: replace the newest
            return
        self._samples.append((now, total_bytes))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()

    def rate(self, now: float) -> float | None:
        """Bytes per second, or None before two readings a moment apart."""
        try:  # read by another thread than the writer's: each index is atomic, a pair is not needed exact
            (t0, b0), (t1, b1) = self._samples[0], self._samples[-1]
        except IndexError:
            return None
        span = max(now, t1) - t0
        if span <= 0.05:
            return None
        return max(0.0, (b1 - b0) / span)


def time_left(remaining_bytes: int, rate: float | None) -> float | None:
    """Seconds to do `remaining_bytes` at `rate`, or None when unknown."""
    if remaining_bytes <= 0:
        return 0.0
    if not rate or rate <= 0:
        return None
    return remaining_bytes / rate


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def format_rate(rate: float | None) -> str:
    return "-- MB/s" if rate is None else f"{rate / 1e6:.1f} MB/s"


def refeed_words(done: int, total: int, seconds: float | None) -> str:
    """The text index's re-feed (sessions done of total after `seconds`) in
    words: `2,000 of 11,281 sessions (17.7%), 5.0 sessions/s, 30m56s left`."""
    per_second = done / seconds if done and seconds else None
    pace = ""
    if per_second:
        pace = f", {per_second:.1f} sessions/s, {format_duration((total - done) / per_second)} left"
    return f"{done:,} of {total:,} sessions ({done / total * 100 if total else 100:.1f}%){pace}"
