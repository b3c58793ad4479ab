"""Restart with nothing changed: time until the socket answers, and until caught up.

    python -m bench.restart --bytes 1G --runs 3 TREE [TREE ...]

Each TREE is a checkout of piwatch (its `piwatchd` is imported from there via
PYTHONPATH, as in bench.append_stages). The index is bench.search's cached
one for the corpus (`search-index-tantivy.sqlite3` beside it) when present,
else built once by a daemon of the first TREE; every run starts a daemon on a
fresh copy of it, the session files unchanged. Reported per run:
- answering: launch -> the first search over the socket answered;
- caught up: launch -> the start-up scan done (`startup_seconds` in status,
  as the daemon measures it, and the wall time it was seen);
- bytes re-read (0 when every file was trusted by its stat alone).
Runs alternate between the trees, so a drifting load is shared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.ingest import Daemon, _wait_started, corpus, parse_bytes, pct


def answering(sock: str, t0: float, timeout: float = 600) -> float:
    """Seconds from `t0` until a search over the socket is answered."""
    from piwatch import Client
    from piwatch.protocol import ConnectionClosed
    from piwatch.transports import PiwatchError

    while time.monotonic() - t0 < timeout:
        try:
            with Client(sock, caller={"all": True}, timeout=30) as client:
                client.search("restart probe", limit=1)
            return time.monotonic() - t0
        except (OSError, PiwatchError, ConnectionClosed):  # not listening yet
            time.sleep(0.005)
    raise TimeoutError("piwatchd never answered")


def one_run(src: str, sessions: Path, index: Path, tmp: Path) -> dict:
    db = tmp / "index.sqlite3"
    for p in tmp.glob("index.sqlite3*"):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    shutil.copy2(index, db)
    shutil.copytree(Path(str(index) + ".tantivy"), Path(str(db) + ".tantivy"))
    env = {"PYTHONPATH": os.pathsep.join([src, src + "/client"])}
    d = Daemon(sessions, db, 0.05, 1.0, launcher=[sys.executable, "-m", "piwatchd.daemon"], env=env)
    t0 = d.launch()
    try:
        answered = answering(d.sock, t0)
        st = _wait_started(d, t0)
    finally:
        d.stop()
    return {
        "answering": round(answered, 3),
        "caughtUp": st["startup_seconds"],
        "caughtUpWall": st["wall_seconds"],
        "bytesReread": st["bytes_ingested"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.restart", description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--bytes", default="1G")
    ap.add_argument("--runs", type=int, default=3)
    ns = ap.parse_args(argv)
    cdir, m = corpus(parse_bytes(ns.bytes), 1, "many-small")
    # Resolved: the cached index records the files under the corpus's real path (bench/cache may link to it).
    sessions = cdir.resolve() / "sessions"
    index = cdir / "search-index-tantivy.sqlite3"
    tmp = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwrs-"))
    try:
        if not index.exists():
            index = tmp / "built.sqlite3"
            d = Daemon(sessions, index, 0.05, 1.0)
            d.start_and_wait()
            d.stop()
        runs: dict[str, list[dict]] = {t: [] for t in ns.trees}
        for r in range(ns.runs):
            for tree in ns.trees:
                run = one_run(os.path.abspath(tree), sessions, index, tmp)
                runs[tree].append(run)
                print(f"run {r} {tree}: {run}", file=sys.stderr)
        files = len(m["files"])
        size = sum(f["bytes"] for f in m["files"])
        print(f"restart, nothing changed: {files} files, {size / 1e9:.2f} GB, {ns.runs} runs (s, median / worst)")
        print("| tree | answering | caught up (daemon) | caught up (wall) | bytes re-read |")
        print("|---|---|---|---|---|")
        for tree, rs in runs.items():
            cells = [
                f"{pct([x[k] for x in rs], 50)} / {max(x[k] for x in rs)}"
                for k in ("answering", "caughtUp", "caughtUpWall")
            ]
            print(f"| {tree} | " + " | ".join(cells) + f" | {max(x['bytesReread'] for x in rs)} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
