"""Soak run: piwatchd under steady live load for minutes (issues 10 and 33; not in CI).

50 sessions (`--sessions`) are appended to at Pi's pace (one entry per
session every 0.5-4 s, each with a unique marker word and its session's tag
word), 4 client threads (`--searchers`) search the daemon over its socket
without pause, 100 followers (`--followers`, each its own connection) follow
one session's tag word and read every update as it comes, and the daemon's
memory is sampled every few seconds. At the end every marker written must
be searchable (one search per session, filtered to it), and the memory
trend over the run is reported. A probe thread measures append -> searchable
latency on a sample of appends.

    python -m bench.soak --minutes 3            # report in bench/out/soak-<minutes>m-...json
    python -m bench.soak --minutes 60 --searchers 4 --followers 100 --sample 15

Memory is reported as the kernel splits it (/proc/PID/status): anonymous
(the heap: what can leak) and file-backed (the memory-mapped text index,
reclaimable page cache), each with its least-squares slope over the last
third of the run, the last 10 and the last 20 minutes, its median per
minute and per 5 minutes; beside them the daemon's own account of its
parts (PIWATCH_MEMLOG, `piwatchd/memory.py`: glibc's heap in use and free,
SQLite's allocations, threads). `--tracemalloc` also traces the daemon's
Python allocations and reports the sites that grew after warm-up (slow: its
figures are for finding growth, not for the plateau).

Appends are written as Pi writes them (one complete JSON line per entry,
O_APPEND), with the line shapes of tests/conftest.py; the real Pi writer
would cost a Node process per append at this rate.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from piwatch.client import Client

__all__ = ["main"]

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SESSIONS = 50
FOLLOWERS = 100
# Anonymous memory by the kind of mapping holding it (`piwatchd.memory.heap_figures`).
ANON_KINDS = ("anon_stacks", "anon_py_arenas", "anon_heaps", "anon_other")
ALL = {"all": True}  # the local CLI's caller: every session
WORDS = [
    "build",
    "failing",
    "test",
    "import",
    "module",
    "config",
    "retry",
    "socket",
    "parser",
    "token",
    "cache",
    "merge",
    "branch",
]


def _line(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"


def _header(sid: str) -> bytes:
    return _line(
        {
            "type": "session",
            "version": 3,
            "id": sid,
            "timestamp": "2026-05-01T10:00:00.000Z",
            "cwd": f"/work/soak/{sid}",
        }
    )


def _tag(sid: str) -> str:
    """The word every entry of session `sid` holds: what its followers follow."""
    return f"tag{sid}"


def _entry(sid: str, n: int, parent: str | None, marker: str, rng: random.Random) -> tuple[str, bytes]:
    eid = f"{sid}-{n}"
    filler = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 400)))
    role = "user" if n % 2 == 0 else "assistant"
    text = f"{marker} {_tag(sid)} {filler}"
    content = text if role == "user" else [{"type": "text", "text": text}]
    ts = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    return eid, _line(
        {
            "type": "message",
            "id": eid,
            "parentId": parent,
            "timestamp": ts,
            "message": {"role": role, "content": content},
        }
    )


class Soak:
    def __init__(
        self,
        base: Path,
        minutes: float,
        seed: int,
        engine: str | None = None,
        *,
        searchers: int = 4,
        sample: float = 5.0,
        sessions: int = SESSIONS,
        followers: int = FOLLOWERS,
        tracemalloc: bool = False,
    ) -> None:
        self.base = base
        self.searchers = searchers
        self.sessions = sessions
        self.followers = followers
        self.tracemalloc = tracemalloc
        self.follow_hits = 0
        self.follow_errors: list[str] = []
        self.sample = sample
        self.engine = engine
        self.root = base / "sessions" / "--work-soak--"
        self.db = base / "index.sqlite3"
        self.sock = base / "d.sock"
        self.minutes = minutes
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.written: dict[str, list[tuple[str, str]]] = {}  # sid -> [(entry id, marker)]
        self.lock = threading.Lock()
        self.searches = 0
        self.search_errors: list[str] = []
        self.search_ms: list[float] = []
        self.visible_ms: list[float] = []
        self.rss: list[tuple[float, int]] = []
        self.split: list[tuple[int, int]] = []  # (anonymous, file-backed) resident bytes per sample

    # -- parts -------------------------------------------------------------------

    def start_daemon(self) -> subprocess.Popen:
        self.root.mkdir(parents=True)
        for i in range(self.sessions):
            sid = f"soak{i:02d}"
            (self.root / f"{sid}.jsonl").write_bytes(_header(sid))
            self.written[sid] = []
        env = {**os.environ, "PIWATCH_CONFIG": str(self.base / "none.toml")}
        if self.engine:
            env["PIWATCH_ENGINE"] = self.engine
        env["PIWATCH_MEMLOG"] = str(self.base / "memlog")
        if self.tracemalloc:
            env["PIWATCH_TRACEMALLOC"] = "1"
        self.log = open(self.base / "daemon.log", "wb")
        proc = subprocess.Popen(
            [
                str(BIN / "piwatchd"),
                "--sessions",
                str(self.root.parent),
                "--db",
                str(self.db),
                "--socket",
                str(self.sock),
                "--log-level",
                "warning",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with Client(self.sock, timeout=5) as c:
                    if c.status().service.phase == "idle":
                        return proc
            except Exception:
                pass
            time.sleep(0.2)
        raise SystemExit("piwatchd did not start; see daemon.log")

    def writer(self, sid: str) -> None:
        rng = random.Random(sid)
        path = self.root / f"{sid}.jsonl"
        n, parent = 0, None
        while not self.stop.wait(rng.uniform(0.5, 4.0)):
            marker = f"mk{sid}n{n}"
            eid, data = _entry(sid, n, parent, marker, rng)
            with open(path, "ab") as fh:  # O_APPEND: one whole line per write, as Pi does
                fh.write(data)
            with self.lock:
                self.written[sid].append((eid, marker))
            n, parent = n + 1, eid

    def searcher(self) -> None:
        rng = random.Random(threading.get_ident())
        with Client(self.sock, timeout=30, caller=ALL) as c:
            while not self.stop.is_set():
                with self.lock:
                    sid = rng.choice(list(self.written))
                    recent = self.written[sid][-1][1] if self.written[sid] and rng.random() < 0.5 else None
                query = recent or " ".join(rng.sample(WORDS, 2))
                t0 = time.perf_counter()
                try:
                    c.search(query, limit=10)
                except Exception as exc:
                    self.search_errors.append(f"{type(exc).__name__}: {exc}"[:200])
                self.search_ms.append((time.perf_counter() - t0) * 1000)
                self.searches += 1

    def follower(self, i: int) -> None:
        """Follow one session's tag word on a connection of its own and read every
        update as it comes; a follow that ends is recorded and opened again."""
        sid = list(self.written)[i % len(self.written)]
        while not self.stop.is_set():
            try:
                with Client(self.sock, timeout=30, caller=ALL) as c, c.follow(_tag(sid)) as follow:
                    while not self.stop.is_set():
                        for update in follow.updates(timeout=1.0):
                            with self.lock:
                                self.follow_hits += len(update.hits)
            except Exception as exc:
                if self.stop.is_set():
                    return
                self.follow_errors.append(f"{type(exc).__name__}: {exc}"[:200])
                self.stop.wait(1.0)

    def probe(self) -> None:
        """Append -> searchable latency for a sample of appends (a fresh marker each time)."""
        rng = random.Random(7)
        with Client(self.sock, timeout=30, caller=ALL) as c:
            while not self.stop.wait(rng.uniform(1.0, 3.0)):
                with self.lock:
                    sid = rng.choice(list(self.written))
                    if not self.written[sid]:
                        continue
                    count, marker = len(self.written[sid]), self.written[sid][-1][1]
                t0 = time.perf_counter()
                while not self.stop.is_set():
                    if c.search(marker, filters={"sessionId": [sid]}, limit=1, exact=True).hits:
                        self.visible_ms.append((time.perf_counter() - t0) * 1000)
                        break
                    if time.perf_counter() - t0 > 30:
                        self.search_errors.append(f"{marker} not searchable after 30 s (entry {count})")
                        break
                    time.sleep(0.01)

    def sampler(self, pid: int) -> None:
        proc = psutil.Process(pid)
        t0 = time.monotonic()
        while True:
            info = proc.memory_info()
            self.rss.append((time.monotonic() - t0, info.rss))
            self.split.append(_rss_split(pid))
            if self.stop.wait(self.sample):
                return

    # -- the run -------------------------------------------------------------------

    def verify(self) -> dict:
        """Every marker written is searchable: one search per marker (filtered to its
        session) must find exactly its own entry. All are checked once (in parallel
        clients), then the ones not found yet are retried for up to 60 s."""
        todo = [(sid, eid, m) for sid, entries in self.written.items() for eid, m in entries]
        missing = self._check(todo)
        deadline = time.monotonic() + 60
        while missing and time.monotonic() < deadline:
            time.sleep(0.5)
            missing = self._check(missing)
        return {
            "appends": len(todo),
            "searchable": len(todo) - len(missing),
            "missing": [eid for _, eid, _ in missing[:20]],
        }

    def _check(self, todo: list[tuple[str, str, str]], clients: int = 8) -> list[tuple[str, str, str]]:
        """The (session, entry, marker) triples whose marker search does not find exactly their entry."""
        from concurrent.futures import ThreadPoolExecutor

        def part(items: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
            with Client(self.sock, timeout=30, caller=ALL) as c:
                return [
                    (sid, eid, m)
                    for sid, eid, m in items
                    if [h.entry_id for h in c.search(m, filters={"sessionId": [sid]}, limit=2, exact=True).hits]
                    != [eid]
                ]

        with ThreadPoolExecutor(clients) as pool:
            return [t for found in pool.map(part, [todo[i::clients] for i in range(clients)]) for t in found]

    def run(self) -> dict:
        proc = self.start_daemon()
        try:
            return self._run(proc)
        finally:
            if proc.poll() is None:  # a failed run must not leave its daemon behind
                proc.kill()
                proc.wait(10)
            self.log.close()

    def _run(self, proc: subprocess.Popen) -> dict:
        threads = [threading.Thread(target=self.writer, args=(sid,), daemon=True) for sid in self.written]
        threads += [threading.Thread(target=self.searcher, daemon=True) for _ in range(self.searchers)]
        threads += [threading.Thread(target=self.follower, args=(i,), daemon=True) for i in range(self.followers)]
        threads += [
            threading.Thread(target=self.probe, daemon=True),
            threading.Thread(target=self.sampler, args=(proc.pid,), daemon=True),
        ]
        started = time.monotonic()
        for t in threads:
            t.start()
        try:
            self.stop.wait(self.minutes * 60)
        finally:
            self.stop.set()
            for t in threads:
                t.join(60)
        seconds = time.monotonic() - started
        verified = self.verify()
        with Client(self.sock, timeout=10) as c:
            svc = c.status().service
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        rc = proc.wait(30)
        stop_seconds = time.monotonic() - t0
        return self.report(seconds, verified, svc, rc, stop_seconds)

    def report(self, seconds: float, verified: dict, svc, rc: int, stop_seconds: float) -> dict:
        mb = [(t, r / 2**20) for t, r in self.rss]
        warm = [r for t, r in mb if t >= 30] or [r for _, r in mb]
        third = max(1, len(warm) // 3)
        slope = _slope([(t, r) for t, r in mb if t >= 30]) * 60 if len(warm) >= 3 else 0.0
        return {
            "minutes": round(seconds / 60, 2),
            "sessions": self.sessions,
            "searchers": self.searchers,
            "followers": self.followers,
            "follow_hits": self.follow_hits,
            "follow_errors": len(self.follow_errors),
            "follow_error_samples": self.follow_errors[:5],
            "appends": verified["appends"],
            "searchable": verified["searchable"],
            "missing": verified["missing"],
            "searches": self.searches,
            "search_errors": len(self.search_errors),
            "search_error_samples": self.search_errors[:5],
            "search_ms": {
                "p50": pct(self.search_ms, 50),
                "p95": pct(self.search_ms, 95),
                "p99": pct(self.search_ms, 99),
            },
            "append_to_searchable_ms": {
                "samples": len(self.visible_ms),
                "p50": pct(self.visible_ms, 50),
                "p95": pct(self.visible_ms, 95),
                "max": round(max(self.visible_ms, default=0), 1),
            },
            "rss_mb": {
                "first": round(mb[0][1], 1),
                "after_warmup_first_third": round(statistics.median(warm[:third]), 1),
                "last_third": round(statistics.median(warm[-third:]), 1),
                "max": round(max(r for _, r in mb), 1),
                "slope_mb_per_min_after_warmup": round(slope, 2),
                "samples": len(mb),
                "series": [[round(t), round(r, 1)] for t, r in mb],
            },
            "anonymous_mb": _trend([(t, a / 2**20) for (t, _), (a, _f) in zip(self.rss, self.split)]),
            "daemon_memory": _memory_log(self.base / "memlog", seconds),
            "file_mapped_mb": _trend([(t, f / 2**20) for (t, _), (_a, f) in zip(self.rss, self.split)]),
            "index_mb": round(
                sum(
                    f.stat().st_size
                    for f in self.base.rglob("*")
                    if f.is_file() and f.name != "daemon.log" and "sessions" not in f.parts
                )
                / 2**20,
                1,
            ),
            "service": {
                "phase": svc.phase,
                "errors": len(svc.errors),
                "files_ingested": svc.files_ingested,
                "events_ingested": svc.events_ingested,
                "missed_by_events": svc.missed_by_events,
            },
            "sigterm_exit": rc,
            "sigterm_seconds": round(stop_seconds, 2),
            "load_average": os.getloadavg(),
            "cpus": os.cpu_count(),
        }


def _rss_split(pid: int) -> tuple[int, int]:
    """(anonymous, file-backed) resident bytes from /proc/PID/status; (0, 0) where there is none."""
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("RssAnon", "RssFile", "RssShmem"):
                    fields[key] = int(value.split()[0]) * 1024
    except OSError:
        return 0, 0
    return fields.get("RssAnon", 0), fields.get("RssFile", 0) + fields.get("RssShmem", 0)


def _trend(series: list[tuple[float, float]]) -> dict:
    """First, last-third median, max, medians per minute and per 5 minutes, and
    slopes (MB/min) over the last third, the last 10 and the last 20 minutes."""
    if not series:
        return {}
    end = series[-1][0]
    third = [p for p in series if p[0] >= end * 2 / 3]
    return {
        "first": round(series[0][1], 1),
        "last_third_median": round(statistics.median(r for _, r in third), 1),
        "max": round(max(r for _, r in series), 1),
        "slope_mb_per_min_last_third": round(_slope(third) * 60, 2),
        "slope_mb_per_min_last_10min": round(_slope([p for p in series if p[0] >= end - 600]) * 60, 2),
        "slope_mb_per_min_last_20min": round(_slope([p for p in series if p[0] >= end - 1200]) * 60, 2),
        "median_per_minute": _medians(series, 60),
        "median_per_5min": _medians(series, 300),
        "series": [[round(t), round(r, 1)] for t, r in series],
    }


def _medians(series: list[tuple[float, float]], width: float) -> list[float]:
    """The median of each whole `width`-second window from the start (a last partial one left out)."""
    end = series[-1][0]
    windows = int(end // width)
    return [
        round(statistics.median(r for t, r in series if i * width <= t < (i + 1) * width), 1)
        for i in range(windows)
        if any(i * width <= t < (i + 1) * width for t, _ in series)
    ]


def _memory_log(folder: Path, until: float, top: int = 25) -> dict:
    """The daemon's own account of its memory (PIWATCH_MEMLOG, `piwatchd/memory.py`):
    per minute, anonymous memory, glibc's heap in use, free and mapped apart, SQLite's share (MB),
    threads; with tracemalloc, what grew between the snapshot after warm-up (the first
    at 3 minutes or later) and the last before the load ended (`until` seconds): the
    top allocation sites by growth."""
    import tracemalloc

    log = folder / "heap.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    out: dict = {
        key: [r[key] if key == "threads" else round(r[key] / 2**20, 1) for r in rows if key in r]
        for key in ("rss_anon", "in_use", "free", "mmapped", "sqlite", "threads", *ANON_KINDS)
    }
    snaps = sorted((p for p in folder.glob("*.tm") if int(p.stem) <= until), key=lambda p: int(p.stem))
    if len(snaps) >= 3:
        warm = next((p for p in snaps if int(p.stem) >= 180), snaps[1])
        first, last = (tracemalloc.Snapshot.load(str(p)) for p in (warm, snaps[-1]))
        stats = last.compare_to(first, "lineno")
        out["python_traced_mb"] = [
            round(sum(s.size for s in snap.statistics("filename")) / 2**20, 1) for snap in (first, last)
        ]
        out["python_growth"] = [f"{s.size_diff / 2**10:+.0f} KiB {s.traceback}" for s in stats[:top]]
    return out


def pct(xs: list[float], q: int) -> float | None:
    return round(statistics.quantiles(xs, n=100, method="inclusive")[q - 1], 1) if len(xs) >= 2 else None


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope (units per second)."""
    if len(points) < 2:
        return 0.0
    mt = statistics.fmean(t for t, _ in points)
    mr = statistics.fmean(r for _, r in points)
    den = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (r - mr) for t, r in points) / den if den else 0.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--searchers", type=int, default=4, help="client threads searching without pause (default 4)")
    p.add_argument("--sample", type=float, default=5.0, help="seconds between memory samples (default 5)")
    p.add_argument("--engine", choices=("tantivy", "fts5"), help="text engine (default: the configured one)")
    p.add_argument("--sessions", type=int, default=SESSIONS, help=f"sessions appended to (default {SESSIONS})")
    p.add_argument(
        "--followers", type=int, default=FOLLOWERS, help=f"follow connections, each reading (default {FOLLOWERS})"
    )
    p.add_argument("--tracemalloc", action="store_true", help="report the daemon's Python allocation growth")
    p.add_argument("--out", default=str(REPO / "bench" / "out"))
    ns = p.parse_args(argv)
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwsoak-"))
    try:
        soak = Soak(
            base,
            ns.minutes,
            ns.seed,
            ns.engine,
            searchers=ns.searchers,
            sample=ns.sample,
            sessions=ns.sessions,
            followers=ns.followers,
            tracemalloc=ns.tracemalloc,
        )
        report = soak.run()
        report["engine"] = ns.engine or "default"
    finally:
        shutil.rmtree(base, ignore_errors=True)
    shape = f"{ns.searchers}s-{ns.followers}f{'-' + ns.engine if ns.engine else ''}{'-tm' if ns.tracemalloc else ''}"
    out = Path(ns.out) / f"soak-{ns.minutes:g}m-{shape}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(f"report: {out}")
    ok = report["searchable"] == report["appends"] and report["sigterm_exit"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
