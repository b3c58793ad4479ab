"""Time arguments for the CLI: relative (`7d`, `12h`, `30m`) or ISO dates."""

from __future__ import annotations

import argparse
import re
import time
from datetime import UTC, datetime

__all__ = ["parse_time"]

_RELATIVE = re.compile(r"^(\d+)([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# Beyond this a relative time is a typo; it would also overflow the wire's integers.
_MAX_AGO_SECONDS = 10_000 * 366 * 86400


def parse_time(value: str, now: float | None = None) -> int:
    """`7d`, `12h`, `30m` ago, or an ISO date/time (UTC if no zone) -> epoch ms."""
    value = value.strip()
    m = _RELATIVE.match(value)
    if m:
        now = time.time() if now is None else now
        ago = int(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        if ago > _MAX_AGO_SECONDS:
            raise argparse.ArgumentTypeError(f"{value!r} is too long ago (at most 10000 years)")
        return int((now - ago) * 1000)
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {value!r} (use 7d, 12h, 30m or an ISO date)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)
