"""`piwatch`: the command line for piwatchd and its index.

Each command lives in `piwatch.commands.<name>` with `add_parser(sub)` (which
sets `run`) so commands can be added without touching the others. Nothing
here imports `piwatchd` at import time: direct-database commands import it
lazily, so the client package stays usable where only the client is installed.

Bad input never ends in a traceback: usage and query errors exit 2 with one
line, a database that cannot be read exits 1 naming the file.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

__all__ = ["COMMANDS", "argument_problem", "build_parser", "main"]

# Order is the order of `piwatch --help`.
COMMANDS = [
    "setup",
    "doctor",
    "status",
    "search",
    "read",
    "trace",
    "sessions",
    "reindex",
    "index",
    "service",
    "pi",
    "tui",
    "completion",
]

# Options that name files may hold any bytes the file system allows; every
# other string goes into a query or onto the wire, which carry UTF-8 only.
_PATH_OPTIONS = frozenset({"db", "socket", "sessions", "workspace", "file"})
# Larger integers are typos, and would not fit the wire's integers anyway.
_MAX_INT = 2**53


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (argparse prints the whole usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="piwatch",
        description="Search, read and trace what the Pi coding agent did in earlier sessions.",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"piwatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"piwatch.commands.{name}").add_parser(sub)
    return parser


def _option(dest: str) -> str:
    return dest if dest in ("query", "session", "entry") else "--" + dest.replace("_", "-")


def argument_problem(values: dict[str, Any]) -> str | None:
    """The first parsed argument no command can use, as one line. Pure."""
    for dest, value in values.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and dest not in _PATH_OPTIONS:
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    shown = item.encode("utf-8", "surrogateescape")[:40]
                    return f"{_option(dest)}: {shown!r} is not valid UTF-8"
            elif isinstance(item, bool):
                continue
            elif isinstance(item, int) and abs(item) > _MAX_INT:
                return f"{_option(dest)}: {str(item)[:20]}… is out of range"
            elif isinstance(item, float) and not math.isfinite(item):
                return f"{_option(dest)}: {item} is not a finite number"
    return None


def _database_of(ns: argparse.Namespace) -> str:
    try:
        # lazy: only to name the file in an error
        from piwatchd.config import resolve_db

        return str(resolve_db(getattr(ns, "db", None)))
    except (ImportError, OSError, SystemExit):
        return "the index"


def _database_error(ns: argparse.Namespace, exc: sqlite3.Error) -> str:
    path = _database_of(ns)
    if os.path.isdir(path):
        return f"{path} is a directory, not a piwatch index file"
    return f"{path}: not a usable piwatch index ({exc})"


def _reader_gone() -> int:
    """stdout's reader exited (`piwatch ... | head`): stop quietly, as a
    SIGPIPE'd tool would, and point stdout at /dev/null so the interpreter's
    final flush does not complain either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # stdout is not a real file: nothing will flush to the pipe
    return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by the broken pipe


def main(argv: Sequence[str] | None = None) -> int:
    from .client import PiwatchError
    from .commands._common import CommandFailed, failed

    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (`piwatch completion`); exits
        import argcomplete

        argcomplete.autocomplete(parser)
    ns = parser.parse_args(argv)
    problem = argument_problem(vars(ns))
    if problem:
        print(f"piwatch: {problem}", file=sys.stderr)
        return 2
    try:
        code = int(ns.run(ns))
        sys.stdout.flush()  # here, so a reader gone away (`| head`) is seen below, not at exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except CommandFailed as exc:  # a command's own check (a bad default scope in config.toml)
        print(f"piwatch: {exc}", file=sys.stderr)
        return exc.exit_code
    except PiwatchError as exc:
        # Every client and api error carries its own advice; one line, in words (never the wire's code).
        said = failed(exc)
        print(f"piwatch: {said}", file=sys.stderr)
        return said.exit_code
    except FileNotFoundError as exc:
        print(f"piwatch: {exc.filename or exc}: {exc.strerror or 'not found'}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except sqlite3.Error as exc:
        print(f"piwatch: {_database_error(ns, exc)}", file=sys.stderr)
        return 1
    except OSError as exc:  # a path that cannot be created or read
        print(f"piwatch: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
