"""piwatchd entry point (the live daemon arrives with the live-ingestion issue)."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    print("piwatchd: the live daemon is not built yet; use `piwatch index --once`", file=sys.stderr)
    return 2
