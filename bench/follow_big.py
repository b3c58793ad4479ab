"""`python -m bench.follow --bytes 1G`: standing queries on a large index
(see bench/follow.py's docstring). piwatchd runs with its default settings on
bench/search.py's cached corpus and index plus a scratch session root, which
is the only place appended to.

1. Each append (a new user entry, one every ~50 ms) is timed to the follow
   update that carries it and to the first polled search (every 2 ms) that
   finds it: the same append, so both figures share the ingest path.
2. Search latency (bench/search.py's query classes, serially, one client) while
   an entry is appended every 0.2 s: first with no follows, then beside
   `--active` follows, each of which gets a hit from every append.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from piwatch.client import Client, PiwatchError
from piwatch.protocol import PROTOCOL_VERSION, recv_frame, send_frame

from bench.ingest import OUT, corpus, parse_bytes, python_speed_ms
from bench.search import ALL, Daemon, build_queries, indexed_daemon, run_searches

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers.world import Appender, write  # the test suite's session writer

CLASSES = ("rare term", "common word", "pi tool, cwd caller", "pi tool, all caller")
PER_CONNECTION = 8  # piwatchd's follows per connection (wire.MAX_FOLLOWS_PER_CONNECTION)


def _summary(seconds: list[float]) -> dict:
    ms = sorted(x * 1000 for x in seconds)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return {"n": len(ms), "p50ms": round(statistics.median(ms), 2), "p99ms": round(p99, 2), "maxms": round(ms[-1], 2)}


def _word(j: int) -> str:
    """A distinct all-letter word per follow (one token for every analyzer)."""
    return "lumen" + "".join("abcdefghijklmnopqrstuvwxyz"[(j // 26**k) % 26] for k in range(2))


def _append_lags(sock: Path, proj: Path, app: Appender, n: int) -> tuple[list[float], list[float]]:
    caller = {"cwd": str(proj)}
    arrived: dict[str, float] = {}
    with Client(sock, caller=caller) as fc, fc.follow("lighthouse") as follow, Client(sock, caller=caller) as c:

        def listen() -> None:
            try:
                for hit in follow:
                    arrived.setdefault(hit.entry_id, time.monotonic())
            except PiwatchError:  # the follow is closed when the measurement ends
                return

        threading.Thread(target=listen, daemon=True).start()
        follow_lags, search_lags = [], []
        for i in range(n):
            marker = f"beam{_word(i)}"
            t = time.monotonic()
            (eid,) = app(f"lighthouse {marker}")
            while not any(h.entry_id == eid for h in c.search(marker, limit=5).hits):
                time.sleep(0.002)
            search_lags.append(time.monotonic() - t)
            deadline = time.monotonic() + 10
            while eid not in arrived and time.monotonic() < deadline:
                time.sleep(0.001)
            follow_lags.append(arrived.get(eid, float("inf")) - t)
            time.sleep(0.05)
    return follow_lags, search_lags


class Appends:
    """Appends `text` as a new entry every `every` seconds, in a thread, while inside `with`."""

    def __init__(self, app: Appender, text: str, every: float) -> None:
        self.app, self.text, self.every, self.count = app, text, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.app(self.text)
            self.count += 1

    def __enter__(self) -> Appends:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class ActiveFollows:
    """`words` followed over raw connections (8 per connection), each drained by a thread that counts hits."""

    def __init__(self, sock: Path, caller: dict, words: list[str]) -> None:
        self.hits = 0
        self.errors: list[str] = []
        self._socks: list[socket.socket] = []
        for start in range(0, len(words), PER_CONNECTION):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(sock))
            send_frame(s, {"v": PROTOCOL_VERSION, "id": 0, "op": "hello", "args": {"proto": PROTOCOL_VERSION}})
            recv_frame(s, 1 << 24)
            for i, word in enumerate(words[start : start + PER_CONNECTION], 1):
                send_frame(
                    s, {"v": PROTOCOL_VERSION, "id": i, "op": "follow", "args": {"query": word}, "caller": caller}
                )
                ack = recv_frame(s, 1 << 24)
                if not ack.get("ok"):
                    raise RuntimeError(f"follow {word!r} refused: {ack}")
            self._socks.append(s)
            threading.Thread(target=self._drain, args=(s,), daemon=True).start()

    def _drain(self, s: socket.socket) -> None:
        while True:
            try:
                frame = recv_frame(s, 1 << 24)
            except Exception:  # closed at the end of the run
                return
            if frame.get("ok"):
                self.hits += len((frame.get("result") or {}).get("hits") or [])
            else:
                self.errors.append(str(frame.get("error")))

    def close(self) -> None:
        for s in self._socks:
            s.close()


class _Cpu:
    """piwatchd's CPU seconds (user + system) and the wall time inside each `with`."""

    def __init__(self, d: Daemon) -> None:
        self.ps = d.ps
        self.used: dict = {}

    def _now(self) -> tuple[float, float]:
        t = self.ps.cpu_times()
        return t.user + t.system, time.monotonic()

    def __enter__(self) -> _Cpu:
        self._start = self._now()
        return self

    def __exit__(self, *exc: object) -> None:
        (c0, w0), (c1, w1) = self._start, self._now()
        self.used = {"cpuSeconds": round(c1 - c0, 2), "wallSeconds": round(w1 - w0, 2)}


def _searches(sock: Path, queries: dict[str, list[dict]]) -> dict[str, dict]:
    out = {}
    with Client(sock, caller=ALL, timeout=60) as c:
        every: list[float] = []
        for cls, qs in queries.items():
            times, _ = run_searches(c, qs)
            out[cls] = _summary(times)
            every += times
        out["all classes"] = _summary(every)
    return out


def _measure(d: Daemon, proj: Path, app: Appender, m: dict, cdir: Path, ns: argparse.Namespace) -> dict:
    follow_lags, search_lags = _append_lags(d.sock, proj, app, ns.appends)
    queries = build_queries(m, cdir / "sessions", ns.per_class, random.Random(ns.seed))
    queries = {k: queries[k] for k in CLASSES}
    words = [_word(j) for j in range(ns.active)]
    text = "every follow hears this: " + " ".join(words)
    cpu = _Cpu(d)
    with cpu, Appends(app, text, 0.2) as quiet:
        without = _searches(d.sock, queries)
    cpu_without = cpu.used
    active = ActiveFollows(d.sock, {"cwd": str(proj)}, words)
    try:
        with cpu, Appends(app, text, 0.2) as busy:
            beside = _searches(d.sock, queries)
        cpu_beside = cpu.used
        time.sleep(1)
    finally:
        active.close()
    searches = without["all classes"]["n"]
    return {
        "appendToFollowUpdate": _summary(follow_lags),
        "appendToSearchable": _summary(search_lags),
        "searchWithoutFollows": without,
        "searchBesideFollows": beside,
        "follows": {"active": ns.active, "hitsPushed": active.hits, "errors": active.errors[:5]},
        "appendsDuringSearches": {"withoutFollows": quiet.count, "besideFollows": busy.count},
        # Load-independent: piwatchd's own CPU (user + system) in each phase, per search and per append.
        "daemonCpu": {
            "withoutFollows": {**cpu_without, "msPerSearch": round(cpu_without["cpuSeconds"] * 1000 / searches, 2)},
            "besideFollows": {**cpu_beside, "msPerSearch": round(cpu_beside["cpuSeconds"] * 1000 / searches, 2)},
            "followRoundsMsPerAppend": round(
                (cpu_beside["cpuSeconds"] - cpu_without["cpuSeconds"]) * 1000 / max(1, busy.count), 1
            ),
        },
        "rss": {"MB": d.rss_mb(), **d.rss_split_mb()},
    }


def _markdown(r: dict, command: str) -> str:
    fu, sr = r["appendToFollowUpdate"], r["appendToSearchable"]
    ok = "met" if fu["p99ms"] <= sr["p99ms"] + 20 else "**missed**"
    lines = [
        f"# Standing queries (`follow`) on {r['corpus']['files']} files, {r['corpus']['bytes'] / 1e6:.0f} MB",
        "",
        f"`{command}`; load average at the end {r['loadAverage']} (2 CPUs, shared with other work); "
        f"Python speed {r.get('pythonSpeedMs')} ms (`sum(range(10**6))`, lower is faster).",
        "",
        "| each append (same appends) | n | p50 ms | p99 ms | max ms |",
        "|---|---|---|---|---|",
        f"| → follow update | {fu['n']} | {fu['p50ms']} | {fu['p99ms']} | {fu['maxms']} |",
        f"| → found by a search polled every 2 ms | {sr['n']} | {sr['p50ms']} | {sr['p99ms']} | {sr['maxms']} |",
        "",
        f"Goal: follow p99 <= searchable p99 + 20 ms: {ok}.",
        "",
        f"Search latency, one client, serial, while an entry is appended every 0.2 s; beside "
        f"{r['follows']['active']} follows that each get every append ({r['follows']['hitsPushed']} hits pushed, "
        f"errors {r['follows']['errors'] or 'none'}):",
        "",
        "| class | n | without follows p50 / p99 ms | beside follows p50 / p99 ms | goal p50 <= 5, p99 <= 50 |",
        "|---|---|---|---|---|",
    ]
    for cls, b in r["searchBesideFollows"].items():
        a = r["searchWithoutFollows"][cls]
        goal = "ok" if b["p50ms"] <= 5 and b["p99ms"] <= 50 else "**miss**"
        lines.append(f"| {cls} | {b['n']} | {a['p50ms']} / {a['p99ms']} | {b['p50ms']} / {b['p99ms']} | {goal} |")
    cpu = r["daemonCpu"]
    lines += [
        "",
        "piwatchd's own CPU (user + system; what the load on this shared machine does not change much): "
        f"{cpu['withoutFollows']['msPerSearch']} ms per search (the appends' ingest included) without follows "
        f"({cpu['withoutFollows']['cpuSeconds']} s over {cpu['withoutFollows']['wallSeconds']} s), "
        f"{cpu['besideFollows']['msPerSearch']} ms beside them ({cpu['besideFollows']['cpuSeconds']} s over "
        f"{cpu['besideFollows']['wallSeconds']} s); the follows' rounds cost {cpu['followRoundsMsPerAppend']} ms "
        f"per append ({r['follows']['active']} follows searched).",
    ]
    return "\n".join(lines) + "\n"


def run(ns: argparse.Namespace) -> int:
    cdir, m = corpus(parse_bytes(ns.bytes), ns.seed, ns.shape)
    d, info = indexed_daemon(cdir, "tantivy")  # builds the index once; later runs reuse it
    d.stop()
    scratch = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwfb-"))
    proj, root = scratch / "proj", scratch / "sessions"
    proj.mkdir()
    write(root, "a", "s-follow", str(proj), "follow bench start", "ok")
    d = Daemon(cdir / "sessions", Path(info["db"]))
    d.args += ["--sessions", str(root)]
    d.start()
    try:
        app = Appender(root / "a" / "s-follow.jsonl", "s-follow", "s-follow-e1")
        report = _measure(d, proj, app, m, cdir, ns)
    finally:
        d.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    report["corpus"] = {"files": m["fileCount"], "bytes": m["totalBytes"]}
    report["loadAverage"] = [round(x, 2) for x in os.getloadavg()]
    report["pythonSpeedMs"] = python_speed_ms()
    name = f"follow-{ns.bytes}-{ns.shape}"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=2))
    command = (
        f"python -m bench.follow --bytes {ns.bytes} --shape {ns.shape} --appends {ns.appends} --active {ns.active}"
    )
    (OUT / f"{name}.md").write_text(_markdown(report, command))
    print(_markdown(report, command))
    return 0
