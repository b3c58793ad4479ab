"""Standing queries (`follow`) on a real piwatchd: append → follow update vs
append → found by a polled search, 1,000 idle follows' memory, and search
latency beside them.

    python -m bench.follow [--appends 30]
    python -m bench.follow --bytes 1G [--shape many-small] [--appends 200] [--active 100]

Without `--bytes`: the test suite's small sessions and daemon harness
(tests/helpers/world.py) with `--settle 0.02 --max-latency 0.2`; prints one
line per figure. With `--bytes`: piwatchd (default settings) on
bench/search.py's cached corpus and index, plus a scratch session root the
appends go to (the cached corpus is never written); measures each append's
time to a follow update and to a search that finds it (the same append), and
search latency (bench/search.py's query classes) beside `--active` follows
that each get a hit with every append, against the same load without them.
Report: bench/out/follow-<bytes>-<shape>.json and .md.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.world import Appender, World, write
from piwatch import wire
from piwatch.protocol import PROTOCOL_VERSION, recv_frame, send_frame
from test_follow import _raw_follow


def _q(xs: list[float]) -> str:
    return f"p50 {statistics.median(xs) * 1000:.0f} ms, max {max(xs) * 1000:.0f} ms"


def _latencies(w: World, appends: int) -> tuple[list[float], list[float]]:
    app = Appender(w.root / "a" / "s-proj.jsonl", "s-proj", "s-proj-e1")
    with w.client({"cwd": str(w.proj)}) as c:
        follow_lags, search_lags = [], []
        with c.follow("narwhal") as f:
            hits = iter(f)
            for i in range(appends):
                t = time.monotonic()
                app(f"narwhal {i}")
                next(hits)
                follow_lags.append(time.monotonic() - t)
                time.sleep(0.1)
        for i in range(appends):
            t = time.monotonic()
            (eid,) = app(f"walrus {i}")
            while not any(h.entry_id == eid for h in c.search("walrus", limit=50).hits):
                time.sleep(0.002)
            search_lags.append(time.monotonic() - t)
            time.sleep(0.1)
    return follow_lags, search_lags


def _idle_follows(w: World, n: int) -> list[socket.socket]:
    socks = []
    for _ in range(n // wire.MAX_FOLLOWS_PER_CONNECTION):
        s, _ack = _raw_follow(w, "idle0", {"cwd": str(w.proj)})
        for i in range(1, wire.MAX_FOLLOWS_PER_CONNECTION):
            args = {"query": f"idle{i}"}
            send_frame(s, {"v": PROTOCOL_VERSION, "id": i, "op": "follow", "args": args, "caller": {"all": True}})
            recv_frame(s, 1 << 24)
        socks.append(s)
    return socks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--appends", type=int, default=30)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--bytes", help="run on bench/search.py's cached corpus of this size (1G) instead")
    ap.add_argument("--shape", choices=("few-large", "many-small"), default="many-small")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--active", type=int, default=100, help="active follows beside the searches (with --bytes)")
    ap.add_argument("--per-class", type=int, default=100, help="searches per query class (with --bytes)")
    ns = ap.parse_args(argv)
    if ns.bytes:
        from bench.follow_big import run

        return run(ns)
    w = World(Path(tempfile.mkdtemp(dir="/tmp")))
    w.root.mkdir()
    write(w.root, "a", "s-proj", str(w.proj), "kraken release notes", "kraken answer")
    w.start()
    try:
        follow_lags, search_lags = _latencies(w, ns.appends)
        print(f"append -> follow update: {_q(follow_lags)}")
        print(f"append -> found by a search polled every 2 ms: {_q(search_lags)}")
        proc = psutil.Process(w.proc.pid)
        before = proc.memory_info().rss
        socks = _idle_follows(w, ns.idle)
        time.sleep(1)
        after = proc.memory_info().rss
        print(f"{ns.idle} idle follows: RSS {before / 2**20:.1f} -> {after / 2**20:.1f} MiB")
        with w.client({"cwd": str(w.proj)}) as c:
            times = []
            for _ in range(50):
                t = time.monotonic()
                c.search("kraken")
                times.append(time.monotonic() - t)
        print(f"search beside {ns.idle} idle follows: {_q(times)}")
        for s in socks:
            s.close()
    finally:
        w.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
