"""`piwatch`: the command line for piwatchd and its index.

Each command lives in `piwatch.commands.<name>` with `add_parser(sub)` (which
sets `run`) so commands can be added without touching the others. Nothing
here imports `piwatchd` at import time: direct-database commands import it
lazily, so the client package stays usable where only the client is installed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

__all__ = ["main", "build_parser", "COMMANDS"]

# Order is the order of `piwatch --help`.
COMMANDS = ["status", "search", "read", "trace", "sessions", "reindex", "index", "service", "pi"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="piwatch",
        description="Search, read and trace what the Pi coding agent did in earlier sessions.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"piwatch.commands.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        return ns.run(ns)
    except FileNotFoundError as exc:
        print(f"piwatch: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # Errors that carry their own advice (schema mismatch, query timeout).
        if type(exc).__name__ in ("SchemaMismatch", "QueryTimeout"):
            print(f"piwatch: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
