"""Live-ingestion benchmark: `python -m bench.ingest --bytes 200M` (from the repo root).

Generates (or reuses from bench/cache/) a corpus written by the real Pi
SessionManager (tests/pi/gen.mjs corpus mode), then measures with a real
`piwatchd` process:

- cold full index: MB/s, entries/s, peak RSS of the daemon (ru_maxrss);
- with `--workers-compare 1,2`: the cold index again with each number of
  ingest worker processes (`piwatchd --workers N`), side by side: wall
  seconds, MB/s, CPU seconds (user+sys of the daemon and its workers) and
  the peak of their summed RSS, so the scaling per core is visible;
- restart with nothing changed: seconds until the start-up scan is done;
- append-to-indexed latency (p50/p99) over N appends spread across sessions,
  from the append's write() returning to a search over the daemon's socket
  finding it;
- the cost of a 1-line append to a 100 MB session vs a 1 KB one (in-process
  `Ingestor.ingest`, so only the ingest work is timed);
- `rg` over the same files vs `piwatch search`, for a rare and a common word.

Writes bench/out/ingest-<bytes>.json and .md. Appended lines are Pi-shaped
message entries written the way Pi writes them (one `JSON.stringify(entry)\n`
append per entry); the corpus itself is all real Pi output.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from piwatchd.serve.status import read_service_state

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
OUT = REPO / "bench" / "out"
CACHE = REPO / "bench" / "cache"

sys.path.insert(0, str(REPO / "tests" / "pi"))


def python_speed_ms() -> float:
    """This machine's single-thread Python speed now: the best of 5 timings of
    `sum(range(10**6))`, in ms. The shared 2-core machine's speed varies from
    day to day (36-53 ms measured): reports carry it, so runs of different
    days compare by it, not by their wall-clock figures alone."""
    import timeit

    return round(min(timeit.repeat("sum(range(10**6))", number=5, repeat=5)) / 5 * 1000, 1)


def parse_bytes(text: str) -> int:
    text = text.strip()
    mult = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}.get(text[-1], 1)
    return int(float(text[:-1] if text[-1] in "kKMG" else text) * mult)


# Corpus shapes: few large sessions (up to 2,000 entries each), or many small
# ones over 30 projects, the way real histories look (1 GB -> ~4,800 files).
SHAPES = {
    "few-large": [],
    "many-small": ["--max-entries", "300", "--projects", "30"],
}


def corpus(nbytes: int, seed: int, shape: str = "few-large") -> tuple[Path, dict]:
    import pitools

    suffix = "" if shape == "few-large" else f"-{shape}"
    out = CACHE / f"corpus-{nbytes}-{seed}{suffix}"
    manifest = out / "manifest.json"
    if manifest.exists():
        return out, json.loads(manifest.read_text())
    pitools.ensure_installed()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    t = time.monotonic()
    m = pitools.run_gen(
        ["corpus", "--out", str(out), "--pi", "1.6.0", "--bytes", str(nbytes), "--seed", str(seed), *SHAPES[shape]],
        timeout=7200,
    )
    m["generatedSeconds"] = round(time.monotonic() - t, 1)
    manifest.write_text(json.dumps(m))
    return out, m


RG = shutil.which("rg", path=str(BIN)) or shutil.which("rg") or "rg"


def index_bytes(db: Path) -> int:
    """The SQLite file, its WAL and the text index directory beside it."""
    return sum(
        f.stat().st_size
        for p in db.parent.glob(db.name + "*")
        for f in ([p] if p.is_file() else p.rglob("*"))
        if f.is_file()
    )


class Daemon:
    def __init__(
        self,
        root: Path,
        db: Path,
        settle: float,
        max_latency: float,
        engine: str = "tantivy",
        workers: int | None = None,
        launcher: list[str] | None = None,
        env: dict[str, str] | None = None,
    ):
        self.env = {**os.environ, "PIWATCH_ENGINE": engine, **(env or {})}
        self.args = [
            *(launcher or [str(BIN / "piwatchd")]),
            "--sessions",
            str(root),
            "--db",
            str(db),
            "--settle",
            str(settle),
            "--max-latency",
            str(max_latency),
            "--scan-interval",
            "600",
            "--log-level",
            "warning",
            "--socket",
            str(Path(tempfile.mkdtemp(dir="/tmp", prefix="pwb-")) / "d.sock"),
        ]
        self.sock = self.args[-1]
        self.db = db
        if workers is not None:
            self.args += ["--workers", str(workers)]
        self.cpu_seconds = 0.0  # user+sys of the daemon and the children it waited for (its workers)

    def launch(self) -> float:
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.args, stderr=open(self.db.parent / "daemon.log", "ab"), env=self.env)
        return t0

    def start_and_wait(self, timeout: float = 7200) -> dict:
        return _wait_started(self, self.launch(), timeout)

    def stop(self) -> int:
        """SIGTERM; returns the daemon's peak RSS in bytes (ru_maxrss)."""
        self.proc.send_signal(signal.SIGTERM)
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_seconds = usage.ru_utime + usage.ru_stime
        return usage.ru_maxrss * 1024


class RssSampler:
    """The peak of the summed RSS of a process and its children (the daemon
    and its ingest workers), sampled every 0.2 s; and the peak of their summed
    anonymous RSS (`peak_anon`: what they allocate, without the pages of the
    text index's files that Tantivy maps while it merges segments, which
    count in RSS but are page cache the kernel can drop)."""

    def __init__(self, pid: int) -> None:
        import threading

        self.peak = 0
        self.peak_anon = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(pid,), daemon=True)
        self._thread.start()

    def _run(self, pid: int) -> None:
        import psutil

        while not self._stop.wait(0.2):
            try:
                proc = psutil.Process(pid)
                procs = [proc, *proc.children(recursive=True)]
                total = anon = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss
                        anon += _rss_anon(p.pid)
                    except (psutil.Error, OSError):
                        pass
            except psutil.Error:
                return
            self.peak = max(self.peak, total)
            self.peak_anon = max(self.peak_anon, anon)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def _rss_anon(pid: int) -> int:
    """A process's anonymous resident memory in bytes (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def cold_run(d: Daemon) -> tuple[dict, int, RssSampler]:
    """Run `d` until it has caught up, then stop it: its start-up figures,
    its own peak RSS (ru_maxrss) and the stopped sampler of it and its workers."""
    t0 = d.launch()
    sampler = RssSampler(d.proc.pid)
    st = _wait_started(d, t0)
    rss = d.stop()
    sampler.stop()
    return st, rss, sampler


def cold_by_workers(work: Path, tmp: Path, total: int, ns: argparse.Namespace) -> list[dict]:
    """The cold index with each number of ingest workers, a fresh index each time."""
    rows = []
    for n in [int(x) for x in ns.workers_compare.split(",") if x.strip()]:
        db = tmp / f"workers-{n}" / "index.sqlite3"
        db.parent.mkdir()
        d = Daemon(work, db, ns.settle, ns.max_latency, ns.engine, workers=n)
        st, rss, sampler = cold_run(d)
        secs = st["startup_seconds"]
        rows.append(
            {
                "workers": n,
                "seconds": secs,
                "MBps": round(total / 1e6 / secs, 1),
                "cpuSeconds": round(d.cpu_seconds, 1),
                "cpuSecondsPerGB": round(d.cpu_seconds / (total / 1e9), 1),
                "daemonPeakRssMB": round(rss / 1e6, 1),
                "peakRssSumMB": round(sampler.peak / 1e6, 1),
                "peakAnonSumMB": round(sampler.peak_anon / 1e6, 1),
            }
        )
        print(f"cold with {n} workers: {rows[-1]}", file=sys.stderr)
        shutil.rmtree(db.parent, ignore_errors=True)
    return rows


def _wait_started(d: Daemon, t0: float, timeout: float = 7200) -> dict:
    deadline = t0 + timeout
    while time.monotonic() < deadline:
        st = read_service_state(d.db)
        if st and st.pid == d.proc.pid and st.startup_seconds is not None:
            out = msgspec.structs.asdict(st)
            out["wall_seconds"] = round(time.monotonic() - t0, 3)
            return out
        if d.proc.poll() is not None:
            raise RuntimeError(f"piwatchd exited with {d.proc.returncode}")
        time.sleep(0.01)
    raise TimeoutError("piwatchd did not finish its start-up scan")


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


def pi_message(entry_id: str, parent: str | None, text: str) -> bytes:
    # Exactly Pi's shape and serialization (JSON.stringify: no spaces).
    entry = {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "message": {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": int(time.time() * 1000)},
    }
    return json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def measure_append_latency(sock: str, db: Path, files: list[dict], n: int, rng: random.Random) -> list[float]:
    """Seconds from an append until a search over the daemon's socket (as the
    Pi tool and the CLI ask) finds its unique word."""
    return [found - written for written, found, _ in timed_appends(sock, db, files, n, rng)]


def timed_appends(sock: str, db: Path, files: list[dict], n: int, rng: random.Random) -> list[tuple[float, float, str]]:
    """(written, found, path) of `n` appends, in wall-clock seconds: each is one
    Pi message appended to a random indexed session, then polled by a search
    for its unique word until found."""
    from piwatch import Client

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    leaf = dict(conn.execute("SELECT session_id, leaf_id FROM sessions"))
    conn.close()
    out = []
    targets = [f for f in files if f["sessionId"] in leaf]
    with Client(sock, caller={"all": True}, timeout=60) as client:
        for i in range(n):
            f = rng.choice(targets)
            eid = uuid.uuid4().hex[:8]
            data = pi_message(eid, leaf[f["sessionId"]], f"latency probe {i} zz{eid}")
            fd = os.open(f["path"], os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            # Wall clock to line up with other processes' timestamps; the span itself is monotonic.
            written, t0 = time.time(), time.perf_counter()
            while not client.search(f"zz{eid}", limit=1).hits:
                if time.perf_counter() - t0 > 30:
                    raise TimeoutError(f"append {eid} not indexed after 30 s")
                time.sleep(0.001)
            out.append((written, written + time.perf_counter() - t0, f["path"]))
            leaf[f["sessionId"]] = eid
            time.sleep(rng.uniform(0.0, 0.05))
    return out


def build_big_session(source: Path, dest: Path, target: int) -> None:
    """A 100 MB session made of a real Pi session's entries, re-id'd and chained."""
    lines = source.read_bytes().splitlines()
    header, body = lines[0], [json.loads(line) for line in lines[1:] if line.strip()]
    h = json.loads(header)
    h["id"] = str(uuid.uuid4())
    with open(dest, "wb") as out:
        out.write(json.dumps(h, separators=(",", ":")).encode() + b"\n")
        size, parent, k = 0, None, 0
        while size < target:
            for e in body:
                k += 1
                e = dict(e, id=f"{k:08x}", parentId=parent)
                parent = e["id"]
                line = json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
                out.write(line)
                size += len(line)
                if size >= target:
                    break


def append_cost(tmp: Path, source: Path, repeats: int = 30, engine: str = "tantivy") -> dict:
    from piwatchd.ingest.ingestor import Ingestor
    from piwatchd.store.schema import open_writer
    from piwatchd.store.writer import IndexWriter

    root = tmp / "appendcost" / "--x--"
    root.mkdir(parents=True)
    big, small = root / "big.jsonl", root / "small.jsonl"
    build_big_session(source, big, 100_000_000)
    h = {"type": "session", "version": 3, "id": str(uuid.uuid4()), "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/x"}
    small.write_bytes(json.dumps(h).encode() + b"\n" + pi_message("s0", None, "x" * 700))
    conn = open_writer(tmp / "appendcost.sqlite3", engine=engine)
    writer = IndexWriter(conn)
    ing = Ingestor(writer)
    result = {}
    for name, path in (("100MB", big), ("1KB", small)):
        t = time.perf_counter()
        ing.ingest(str(path))
        first = time.perf_counter() - t
        parent = None
        times = []
        for i in range(repeats):
            with open(path, "ab") as fh:
                fh.write(pi_message(f"ap{i}", parent, f"append cost probe {i}"))
            parent = f"ap{i}"
            t = time.perf_counter()
            out = ing.ingest(str(path))
            writer.flush_text()  # searchable, not just stored
            times.append(time.perf_counter() - t)
            assert out.change.value == "appended" and out.events == 1, out
        result[name] = {
            "fileBytes": path.stat().st_size,
            "coldIngestSeconds": round(first, 3),
            "appendMsP50": round(pct(times, 50) * 1000, 3),
            "appendMsMax": round(max(times) * 1000, 3),
        }
    writer.close()
    result["ratio100MBto1KB"] = round(result["100MB"]["appendMsP50"] / result["1KB"]["appendMsP50"], 2)
    return result


def rg_vs_search(db: Path, sessions: Path, words: list[str]) -> list[dict]:
    from piwatch.client import Client, LocalTransport

    rows = []
    for word in words:
        t = time.perf_counter()
        rg = subprocess.run([RG, "-c", "--no-messages", "-F", word, str(sessions)], capture_output=True, text=True)
        rg_s = time.perf_counter() - t
        rg_lines = sum(int(line.rsplit(":", 1)[1]) for line in rg.stdout.splitlines() if ":" in line)
        t = time.perf_counter()
        cli = subprocess.run(
            [str(BIN / "piwatch"), "search", "--db", str(db), "--json", word], capture_output=True, text=True
        )
        cli_s = time.perf_counter() - t
        hits = len(json.loads(cli.stdout)["hits"]) if cli.returncode == 0 else -1
        t = time.perf_counter()
        with Client(transport=LocalTransport(db), caller={"all": True}) as c:
            c.search(word, limit=20)
        inproc_s = time.perf_counter() - t
        rows.append(
            {
                "query": word,
                "rgSeconds": round(rg_s, 4),
                "rgMatchingLines": rg_lines,
                "piwatchSearchCliSeconds": round(cli_s, 4),
                "piwatchSearchInProcessSeconds": round(inproc_s, 4),
                "hitsReturned": hits,
                "rgOverCli": round(rg_s / cli_s, 2),
                "rgOverInProcess": round(rg_s / inproc_s, 2),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ingest", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", default="200M", help="corpus size (k/M/G suffixes; default 200M; the issue asks for 1G)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--appends", type=int, default=200)
    ap.add_argument("--settle", type=float, default=0.05)
    ap.add_argument("--max-latency", type=float, default=1.0)
    ap.add_argument("--skip-append-cost", action="store_true")
    ap.add_argument("--engine", choices=("tantivy", "fts5"), default="tantivy")
    ap.add_argument("--shape", choices=tuple(SHAPES), default="many-small")
    ap.add_argument(
        "--workers-compare",
        metavar="N,N",
        help="also index cold with each number of ingest workers (e.g. 1,2) and report them side by side",
    )
    ap.add_argument(
        "--cold-only", action="store_true", help="only the cold index (and --workers-compare): no restart, appends, rg"
    )
    ns = ap.parse_args(argv)
    nbytes = parse_bytes(ns.bytes)
    cdir, m = corpus(nbytes, ns.seed, ns.shape)
    sessions = cdir / "sessions"
    tmp = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwbench-"))
    # Appends go to a copy so the cached corpus stays pristine.
    work = tmp / "sessions"
    shutil.copytree(sessions, work)
    # The manifest names files where the corpus was generated (bench/cache/ may link to it).
    recorded = Path(m.get("sessionsDir") or sessions)
    files = [dict(f, path=str(work / Path(f["path"]).relative_to(recorded))) for f in m["files"]]
    total = sum(p.stat().st_size for p in work.rglob("*.jsonl"))
    db = tmp / "index.sqlite3"
    report: dict = {
        "corpus": {
            "dir": str(cdir),
            "files": len(files),
            "bytes": total,
            "entries": m["entries"],
            "piVersion": m["piVersion"],
            "generatedSeconds": m.get("generatedSeconds"),
        },
        "settle": ns.settle,
        "maxLatency": ns.max_latency,
        "cpus": os.cpu_count(),
        "pythonSpeedMs": python_speed_ms(),
        "engine": ns.engine,
        "shape": ns.shape,
    }
    print(f"corpus: {len(files)} files, {total / 1e6:.1f} MB, {m['entries']} entries", file=sys.stderr)

    d = Daemon(work, db, ns.settle, ns.max_latency, ns.engine)
    st, rss, sampler = cold_run(d)
    conn = sqlite3.connect(db)
    events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    conn.close()
    secs = st["startup_seconds"]
    report["cold"] = {
        "seconds": secs,
        "wallSeconds": st["wall_seconds"],
        "MBps": round(total / 1e6 / secs, 1),
        "entriesPerSecond": round(events / secs),
        "events": events,
        "peakRssMB": round(rss / 1e6, 1),
        "peakAnonMB": round(sampler.peak_anon / 1e6, 1),
        "indexBytes": index_bytes(db),
        "indexOverCorpus": round(index_bytes(db) / total, 3),
    }
    print(f"cold: {report['cold']}", file=sys.stderr)
    if ns.workers_compare:
        report["coldByWorkers"] = cold_by_workers(work, tmp, total, ns)
    if ns.cold_only:
        return _write(report, ns, argv, tmp)

    d = Daemon(work, db, ns.settle, ns.max_latency, ns.engine)
    st = d.start_and_wait()
    report["restart"] = {
        "seconds": st["startup_seconds"],
        "wallSecondsIncludingPythonStart": st["wall_seconds"],
        "files": st["files_known"],
        "bytesReparsed": st["bytes_ingested"],
    }
    print(f"restart: {report['restart']}", file=sys.stderr)
    lat = measure_append_latency(d.sock, db, files, ns.appends, random.Random(ns.seed))
    rss2 = d.stop()
    report["appendLatency"] = {
        "n": len(lat),
        "sessionsTouched": len({1 for _ in lat}) and None,
        "p50ms": round(pct(lat, 50) * 1000, 1),
        "p99ms": round(pct(lat, 99) * 1000, 1),
        "maxms": round(max(lat) * 1000, 1),
        "meanms": round(statistics.mean(lat) * 1000, 1),
        "peakRssMBDuringRun": round(rss2 / 1e6, 1),
    }
    del report["appendLatency"]["sessionsTouched"]
    print(f"append latency: {report['appendLatency']}", file=sys.stderr)

    needles = [n["token"] for n in m.get("needles", [])][:1]
    report["rgVsSearch"] = rg_vs_search(db, work, needles + ["error", "function"])
    print(f"rg vs search: {report['rgVsSearch']}", file=sys.stderr)

    if not ns.skip_append_cost:
        biggest = max(files, key=lambda f: f["bytes"])
        report["appendCost"] = append_cost(tmp, Path(biggest["path"]), engine=ns.engine)
        print(f"append cost: {report['appendCost']}", file=sys.stderr)

    return _write(report, ns, argv, tmp)


def _write(report: dict, ns: argparse.Namespace, argv: list[str] | None, tmp: Path) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    name = f"ingest-{ns.bytes}-{ns.shape}-{ns.engine}" + ("-cold" if ns.cold_only else "")
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=2))
    (OUT / f"{name}.md").write_text(markdown(report, " ".join(["python -m bench.ingest", *(argv or sys.argv[1:])])))
    print((OUT / f"{name}.md").read_text())
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def markdown(r: dict, command: str) -> str:
    c, cold = r["corpus"], r["cold"]
    lines = [
        f"# piwatchd ingest benchmark — engine {r['engine']}, corpus shape {r['shape']}",
        "",
        f"`{command}` — {r['cpus']} CPUs, settle {r['settle']} s, max latency {r['maxLatency']} s, "
        f"Python speed {r.get('pythonSpeedMs')} ms (`sum(range(10**6))`, lower is faster)",
        "",
        f"Corpus (real Pi {c['piVersion']} writer): {c['files']} files, {c['bytes'] / 1e6:.1f} MB, {c['entries']} entries",
        "",
        "| measure | value | goal |",
        "|---|---|---|",
        f"| cold full index | {cold['seconds']} s, **{cold['MBps']} MB/s**, {cold['entriesPerSecond']} entries/s | >= 30 MB/s |",
        f"| index on disk (SQLite + text index) | {cold['indexBytes'] / 1e6:.0f} MB, **{cold['indexOverCorpus']}x** the session files | <= 0.4x |",
        f"| peak RSS while indexing (of it anonymous, sampled) | **{cold['peakRssMB']} MB** ({cold.get('peakAnonMB', '-')} MB) | <= 300 MB |",
    ]
    if "restart" in r:
        lines += _live_rows(r)
    if "coldByWorkers" in r:
        lines += [
            "",
            "Cold index by number of ingest worker processes (`piwatchd --workers N`; CPU: the daemon and its workers):",
            "",
            "| workers | seconds | MB/s | CPU seconds | CPU s per GB | peak RSS, daemon + workers | of it anonymous |",
            "|---|---|---|---|---|---|---|",
        ]
        for w in r["coldByWorkers"]:
            lines.append(
                f"| {w['workers']} | {w['seconds']} | **{w['MBps']}** | {w['cpuSeconds']} | {w['cpuSecondsPerGB']} | {w['peakRssSumMB']} MB | {w.get('peakAnonSumMB', '-')} MB |"
            )
    if "rgVsSearch" in r:
        lines += ["", "| query | rg | piwatch search (CLI) | in-process search | rg / CLI |", "|---|---|---|---|---|"]
        for q in r["rgVsSearch"]:
            lines.append(
                f"| `{q['query']}` | {q['rgSeconds']} s ({q['rgMatchingLines']} lines) | {q['piwatchSearchCliSeconds']} s | {q['piwatchSearchInProcessSeconds']} s | {q['rgOverCli']}x |"
            )
    return "\n".join(lines) + "\n"


def _live_rows(r: dict) -> list[str]:
    rs, al = r["restart"], r["appendLatency"]
    lines = [
        f"| restart, nothing changed | **{rs['seconds']} s** for {rs['files']} files ({rs['bytesReparsed']} bytes reparsed); {rs['wallSecondsIncludingPythonStart']} s wall incl. process start | <= 2 s for 5,000 files |",
        f"| append -> searchable ({al['n']} appends, polled by a socket search) | **p50 {al['p50ms']} ms, p99 {al['p99ms']} ms** (max {al['maxms']}) | p50 <= 30, p99 <= 150 |",
    ]
    if "appendCost" in r:
        a = r["appendCost"]
        lines.append(
            f"| 1-line append ingest cost | 100 MB session {a['100MB']['appendMsP50']} ms vs 1 KB session {a['1KB']['appendMsP50']} ms (ratio {a['ratio100MBto1KB']}) | independent of size |"
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
