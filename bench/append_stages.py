"""Append -> searchable, stage by stage, for one or more source trees side by side.

    python -m bench.append_stages --bytes 200M --appends 50 --rounds 3 TREE [TREE ...]

Each TREE is a checkout of piwatch (its `piwatchd` is imported from there via
PYTHONPATH). Every tree indexes its own copy of the cached many-small corpus
(bench.ingest's), then rounds alternate between the trees: a daemon starts on
its index, `--appends` entries are appended (Pi's own line shape) and each is
polled by a socket search until found, as `bench.ingest` does. The daemon runs
with timestamps at each stage (watcher hint, taken by the ingest thread, the
file's ingest, the overlay's publish), so the report splits each append's
latency: write -> hint -> taken -> ingested -> published -> found.
Interleaving keeps the comparison fair on a machine whose load drifts.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.ingest import Daemon, corpus, parse_bytes, pct, timed_appends

# Boots piwatchd with each stage's wall-clock time written to $TRACE_LOG.
_BOOT = """
import os, sys, time, threading
LOG = open(os.environ["TRACE_LOG"], "a", buffering=1)
lock = threading.Lock()
def note(stage, path=""):
    with lock:
        LOG.write(f"{time.time():.6f}\\t{stage}\\t{path}\\n")
from piwatchd.ingest import inbox, ingestor
from piwatchd.text.tantivy import overlay
def wrap(cls, name, before, after=None):
    inner = getattr(cls, name)
    def traced(self, *a, **k):
        if before: note(before, a[0] if a and isinstance(a[0], str) else "")
        r = inner(self, *a, **k)
        if name == "take":
            for p in r.due: note("taken", p)
        if after: note(after, a[0] if a and isinstance(a[0], str) else "")
        return r
    setattr(cls, name, traced)
wrap(inbox.Inbox, "mark", "hint")
wrap(inbox.Inbox, "take", None)
wrap(ingestor.Ingestor, "ingest", None, "ingested")
wrap(overlay.Overlay, "publish", None, "published")
from piwatchd.daemon import main
sys.exit(main())
"""

STAGES = ("hint", "taken", "ingested", "published")


class Tree:
    """One checkout under test: its daemon (bench.ingest's, booted through the
    tracing shim with that checkout first on PYTHONPATH), index and trace."""

    def __init__(self, n: int, src: str, tmp: Path, sessions: Path, files: list[dict]) -> None:
        self.src, self.files = src, files
        self.db = tmp / f"index-{n}.sqlite3"
        self.trace = tmp / f"trace-{n}.log"
        self.rows: list[tuple[float, ...]] = []
        env = {"TRACE_LOG": str(self.trace), "PYTHONPATH": os.pathsep.join([src, src + "/client"])}
        self.daemon = Daemon(sessions, self.db, 0.05, 1.0, launcher=[sys.executable, str(tmp / "boot.py")], env=env)


def stage_rows(trace: Path, done: list[tuple[float, float, str]]) -> list[tuple[float, ...]]:
    """Per append: ms from its write to each stage, then to found."""
    marks = [line.rstrip("\n").split("\t") for line in trace.read_text().splitlines()]
    events = [(float(t), s, p) for t, s, p in marks]
    rows = []
    for written, found, path in done:
        at, since = [], written - 0.002
        for stage in STAGES:
            t = next((t for t, s, p in events if t >= since and s == stage and (p == path or not p)), None)
            if t is None:
                break
            at.append(t)
            since = t
        if len(at) == len(STAGES):
            rows.append(tuple((t - written) * 1000 for t in (*at, found)))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.append_stages", description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", help="piwatch checkouts to compare")
    ap.add_argument("--bytes", default="200M")
    ap.add_argument("--appends", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ns = ap.parse_args(argv)
    cdir, m = corpus(parse_bytes(ns.bytes), 1, "many-small")
    tmp = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwas-"))
    (tmp / "boot.py").write_text(_BOOT)
    recorded = Path(m.get("sessionsDir") or (cdir / "sessions"))
    trees = []
    for n, src in enumerate(ns.trees):
        sessions = tmp / f"sessions-{n}"
        shutil.copytree(cdir / "sessions", sessions)
        files = [dict(f, path=str(sessions / Path(f["path"]).relative_to(recorded))) for f in m["files"]]
        trees.append(Tree(n, os.path.abspath(src), tmp, sessions, files))
    rng = random.Random(7)
    try:
        for r in range(ns.rounds):
            for tree in trees:
                tree.daemon.start_and_wait()
                time.sleep(2)
                done = timed_appends(tree.daemon.sock, tree.db, tree.files, ns.appends, rng)
                tree.daemon.stop()
                rows = stage_rows(tree.trace, done)
                tree.rows += rows
                total = [row[-1] for row in rows]
                print(f"round {r} {tree.src}: p50 {pct(total, 50):.1f} p99 {pct(total, 99):.1f} ms", file=sys.stderr)
        print(report(trees, ns))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def report(trees: list[Tree], ns: argparse.Namespace) -> str:
    names = ("write -> hint", "-> taken", "-> ingested", "-> published", "-> found", "total")
    lines = [
        f"append -> searchable by stage, {ns.rounds} rounds x {ns.appends} appends, {ns.bytes} corpus (ms, p50 / p99)"
    ]
    lines.append("| stage | " + " | ".join(t.src for t in trees) + " |")
    lines.append("|---|" + "---|" * len(trees))
    for j, name in enumerate(names):
        cells = []
        for t in trees:
            col = [row[-1] for row in t.rows] if j == 5 else [row[j] - (row[j - 1] if j else 0) for row in t.rows]
            cells.append(f"{statistics.median(col):.1f} / {pct(col, 99):.1f}" if col else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
