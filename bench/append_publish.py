"""Append -> searchable inside the ingest thread: read, SQLite commit, publish.

    python -m bench.append_publish --appends 150 --rounds 2 TREE [TREE ...]

Each TREE is a checkout of piwatch, run in a child process with it first on
PYTHONPATH (as bench.append_stages does), rounds alternating between the
trees. A child indexes 20 small sessions, then appends `--appends` entries to
random ones, each ingested and flushed as the ingest service does
(`Ingestor.ingest`, `IndexWriter.flush_text`), and between appends (5-50 ms)
runs the service's idle maintenance (`maintain_text`, which makes the
deferred disk commit). Reported: the ms from the append's write to its
flush's return, when the search sees it. No watcher, socket or client: what
is left is the writer's own cost, the disk commit's included when it falls
in the append's way.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _line(eid: str, parent: str | None, text: str) -> bytes:
    message = {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}
    entry = {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-05-01T10:00:00.000Z"}
    return (json.dumps({**entry, "message": message}) + "\n").encode()


def child(appends: int) -> list[float]:
    from piwatchd.ingest.ingestor import Ingestor
    from piwatchd.store.schema import open_writer
    from piwatchd.store.writer import IndexWriter

    tmp = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwap-"))
    files = []
    for i in range(20):
        p = tmp / f"s{i}.jsonl"
        header = {"type": "session", "version": 3, "id": f"s-{i}", "timestamp": "2026-05-01T10:00:00.000Z", "cwd": "/w"}
        p.write_bytes((json.dumps(header) + "\n").encode() + _line("e0", None, "hello world"))
        files.append([p, "e0", 0])
    writer = IndexWriter(open_writer(tmp / "index.sqlite3"))
    ingestor = Ingestor(writer)
    for f in files:
        ingestor.ingest(str(f[0]))
    writer.flush_text(idle=True)
    rng, spans = random.Random(1), []
    try:
        for n in range(appends):
            f = rng.choice(files)
            f[2] += 1
            eid = f"e{f[2]}"
            with open(f[0], "ab") as fh:
                fh.write(_line(eid, f[1], f"probe {n} walrus{n}"))
            f[1] = eid
            t0 = time.perf_counter()
            ingestor.ingest(str(f[0]))
            writer.flush_text(idle=True)
            spans.append((time.perf_counter() - t0) * 1000)
            until = time.monotonic() + rng.uniform(0.005, 0.05)
            while (left := until - time.monotonic()) > 0:  # the service's idle turns
                writer.maintain_text()
                due = writer.text_due()
                time.sleep(min(left, 0.005 if due is None else due) + 0.0001)
    finally:
        writer.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return spans


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.append_publish", description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="*")
    ap.add_argument("--appends", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    if ns.child:
        print(json.dumps(child(ns.appends)))
        return 0
    spans: dict[str, list[float]] = {t: [] for t in ns.trees}
    for _ in range(ns.rounds):
        for tree in ns.trees:
            src = os.path.abspath(tree)
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, src + "/client"])}
            # This file as a script: the tree's own bench/ may predate it.
            cmd = [sys.executable, __file__, "--child", "--appends", str(ns.appends)]
            out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
            spans[tree] += json.loads(out.stdout.splitlines()[-1])
    print(f"append -> searchable in the ingest thread, {ns.rounds} rounds x {ns.appends} appends (ms)")
    print("| tree | p50 | p90 | p99 | max |")
    print("|---|---|---|---|---|")
    for tree, s in spans.items():
        s.sort()
        at = [s[min(len(s) - 1, int(len(s) * q))] for q in (0.5, 0.9, 0.99)]
        print(f"| {tree} | " + " | ".join(f"{v:.1f}" for v in (*at, s[-1])) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
