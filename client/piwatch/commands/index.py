"""`piwatch index --once`: reconcile an index file with the session files."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from ._progress import IndexProgress

if TYPE_CHECKING:  # the daemon package is imported lazily, only when indexing
    from piwatchd.ingest.ingestor import IngestOutcome

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p_index = sub.add_parser("index", help="index Pi session files into the database")
    p_index.set_defaults(run=run)
    p_index.add_argument("--once", action="store_true", required=True, help="one reconciliation pass, then exit")
    p_index.add_argument(
        "--sessions",
        action="append",
        metavar="DIR",
        help="session directory to index (repeatable; default: Pi's own session directories)",
    )
    p_index.add_argument("--db", metavar="PATH", help="index database (default: piwatch's state directory)")
    p_index.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="ingest worker processes (default: ingest_workers in config.toml, else one per core beside the writer's; 0: none)",
    )
    p_index.add_argument("--json", action="store_true", help="print the summary as JSON")
    p_index.add_argument("--quiet", action="store_true", help="no progress output")


def run(ns: argparse.Namespace) -> int:
    from piwatchd.ingest.scan import index_once  # lazy: the daemon package is optional for the client

    stderr = sys.stderr
    missing = [s for s in ns.sessions or () if not os.path.isdir(os.path.expanduser(s))]
    if missing:
        print(f"piwatch: no sessions directory at {missing[0]}", file=stderr)
        return 2
    mode = "off" if ns.quiet or ns.json else "bar" if stderr.isatty() else "lines"
    if ns.workers is not None and ns.workers < 0:
        print("piwatch: --workers must be 0 or more", file=stderr)
        return 2

    from piwatchd.store.indexfile import IndexBusy, NotAnIndex

    try:
        with IndexProgress(stderr, mode=mode) as view:

            def progress(outcome: IngestOutcome) -> None:
                view.done(outcome.bytes_read)
                if outcome.error and not ns.quiet and not ns.json:
                    view.note(f"{outcome.state}: {outcome.path}: {outcome.error}")

            summary = index_once(
                ns.db, ns.sessions, progress=progress, planned=view.planned, workers=ns.workers, refed=view.refed
            )
    except IndexBusy as exc:
        print(f"piwatch: {exc}: piwatchd keeps it current (`piwatch reindex` re-reads everything)", file=stderr)
        return 1
    except NotAnIndex as exc:
        print(f"piwatch: {exc}", file=stderr)
        return 1
    if summary.get("rebuilt") and not ns.quiet:
        print(f"piwatch: {summary['rebuilt']}", file=stderr)
    if ns.json:
        print(json.dumps(summary, indent=2))
    else:
        mb = summary["bytesRead"] / 1e6
        rate = mb / summary["seconds"] if summary["seconds"] else 0.0
        print(
            f"indexed {summary['files']} files ({summary['changed']} changed, {summary['removed']} removed): "
            f"{summary['events']} events, {mb:.1f} MB in {summary['seconds']:.2f} s ({rate:.1f} MB/s)"
        )
        if summary["diagnostics"]:
            print(f"{summary['diagnostics']} lines skipped or repaired (see `piwatch status`)")
        print(f"index: {summary['db']}")
        for root in summary.get("rootsUnavailable", []):
            print(f"piwatch: sessions directory {root} is not available; its indexed sessions were kept", file=stderr)
    return 0
