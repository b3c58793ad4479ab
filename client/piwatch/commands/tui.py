"""`piwatch tui`: the full-screen search. Textual is imported only here, when
the command runs (`piwatch.tui`), never by the rest of the package."""

from __future__ import annotations

import argparse

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tui", help="full-screen search as you type, with preview, trace and open-in-editor")
    p.add_argument("--socket", metavar="PATH", help="piwatchd socket (default: $PIWATCH_SOCKET or the runtime dir)")
    p.add_argument("--db", metavar="PATH", help="search this index file read-only instead of asking piwatchd")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--all", action="store_true", help="start on every project (ctrl+o switches)")
    scope.add_argument("--project", action="store_true", help="start on this project, whatever the default scope")
    p.set_defaults(run=run)


def run(ns: argparse.Namespace) -> int:
    from piwatch.tui import run as run_tui  # lazy: Textual loads only for the TUI

    from ._common import default_scope

    # The local user's default scope (PIWATCH_SCOPE, [cli] scope) applies here as on the command line.
    all_projects = ns.all or (not ns.project and default_scope() == "all")
    return run_tui(ns.socket, ns.db, all_projects=all_projects)
