"""Query benchmark: `python -m bench.search --bytes 1G` (from the repo root).

Reuses bench/ingest.py's corpus (written by the real Pi SessionManager, cached
under bench/cache/), indexes it with a real `piwatchd` (the index lives in the
cache directory and is reused while the corpus files are unchanged), then
measures over the daemon's Unix socket with persistent `piwatch.Client`s:

- search latency p50/p99 per query class: rare terms (manifest needles),
  common words, 2-3 word phrases taken from the corpus text, filtered queries
  (kind / tool / session filters), the Pi-tool shape (caller with a cwd,
  so authorization applies, and caller `{"all": true}`), and queries that
  reach the tiers below exact (a phrase with a misspelled word; a question
  with two corpus words and one never written);
- read and trace latency on hits returned by those searches;
- daemon RSS idle / peak under load, CPU% over ~10 s of idleness;
- `rg` over the same files with the same queries, in the same run;
- 32 client threads searching for ~10 s: throughput and p99;
- where the time goes: the daemon's handler in-process (no socket), each SQL
  statement of a search timed by stage, the building blocks of ranking a
  common word (posting list, bm25, joins, one-query plan) with SQLite's heap
  high-water, matching-fragment counts and EXPLAIN QUERY PLAN.

The index is rebuilt when the corpus files or the schema version change
(bench/cache/corpus-*/search-index.fingerprint); delete that file to force it.

Writes bench/out/search-<bytes>.json and .md and prints the markdown.
`--per-class N` sets the queries per class (default 200); `--index-only`
stops after indexing; `--engine tantivy|fts5` picks the text engine and
`--shape few-large|many-small` the corpus shape (see bench/ingest.py). `rg`
comes from the `ripgrep` PyPI wheel (`pip install -e '.[bench]'`). Linux only
(/proc, psutil).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
from piwatch.client import Client, PiwatchError

from bench.ingest import BIN, OUT, REPO, corpus, parse_bytes, pct, python_speed_ms
from piwatchd.text.identifiers import identifier_parts

ALL = {"all": True}
COMMON_WORDS = ["error", "function", "return", "file", "test", "const", "import", "the", "self", "value"]
GOALS = {"search": (5.0, 50.0), "read": (None, 10.0), "trace": (None, 10.0)}


# -- corpus and daemon ----------------------------------------------------------


RG = shutil.which("rg", path=str(BIN)) or shutil.which("rg") or "rg"


def fingerprint(sessions: Path, engine: str) -> str:
    """Identity of the corpus files, index schema and engine: any change means the cached index is stale."""
    from piwatchd.store.schema import SCHEMA_VERSION
    from piwatchd.text.tantivy.index import TEXT_LAYOUT

    h = hashlib.sha256(f"schema {SCHEMA_VERSION} text {TEXT_LAYOUT} {engine}\n".encode())
    for p in sorted(sessions.rglob("*.jsonl")):
        st = p.stat()
        h.update(f"{p.relative_to(sessions)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


class Daemon:
    """A piwatchd subprocess on a private socket; `start()` waits for phase idle."""

    def __init__(self, sessions: Path, db: Path, engine: str = "tantivy"):
        self.env = {**os.environ, "PIWATCH_ENGINE": engine}
        self.sock = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwsb-")) / "d.sock"
        self.args = [
            str(BIN / "piwatchd"),
            "--sessions",
            str(sessions),
            "--db",
            str(db),
            "--socket",
            str(self.sock),
            "--scan-interval",
            "3600",
            "--log-level",
            "warning",
        ]
        self.log = db.parent / "search-daemon.log"

    def start(self, timeout: float = 4 * 3600) -> dict:  # a 10 GB cold build here takes over an hour
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.args, stderr=open(self.log, "ab"), env=self.env)
        self.ps = psutil.Process(self.proc.pid)
        client = None
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"piwatchd exited with {self.proc.returncode}; see {self.log}")
            try:
                client = client or Client(self.sock, caller=ALL)
                svc = client.status().service
                if svc is not None and svc.phase == "idle" and svc.startup_seconds is not None:
                    client.close()
                    return {"startupSeconds": svc.startup_seconds, "wallSeconds": round(time.monotonic() - t0, 1)}
            except PiwatchError:
                client = None
            time.sleep(0.5)
        raise TimeoutError("piwatchd did not become idle")

    def rss_mb(self) -> float:
        return round(self.ps.memory_info().rss / 1e6, 1)

    def rss_split_mb(self) -> dict[str, float]:
        """Anonymous memory vs file pages (the text index's mmapped segments,
        reclaimable page cache that RSS also counts)."""
        fields = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile", "RssShmem"):
                fields[key] = round(int(value.split()[0]) * 1024 / 1e6, 1)
        return fields

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        shutil.rmtree(self.sock.parent, ignore_errors=True)


def indexed_daemon(cdir: Path, engine: str) -> tuple[Daemon, dict]:
    """Start piwatchd on the cached index, building it first when the corpus changed."""
    name = f"search-index-{engine}.sqlite3"
    sessions, db = cdir / "sessions", cdir / name
    stamp = cdir / f"search-index-{engine}.fingerprint"
    fp = fingerprint(sessions, engine)
    info: dict = {"db": str(db), "engine": engine, "reused": stamp.exists() and stamp.read_text() == fp and db.exists()}
    if not info["reused"]:
        for p in cdir.glob(name + "*"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        stamp.unlink(missing_ok=True)
        d = Daemon(sessions, db, engine)
        info["cold"] = d.start()
        info["rssAfterColdIndexMB"] = d.rss_mb()
        d.stop()
        stamp.write_text(fp)
        print(f"indexed: {info}", file=sys.stderr)
    d = Daemon(sessions, db, engine)
    info["restart"] = d.start()
    info["indexBytes"] = sum(
        f.stat().st_size for p in cdir.glob(name + "*") for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file()
    )
    return d, info


# -- query sets -------------------------------------------------------------------


def q(
    cls: str,
    text: str,
    rg_paths: list[str],
    *,
    filters: dict | None = None,
    caller: dict = ALL,
    rg_pattern: str | None = None,
) -> dict:
    """One benchmark query: what piwatch is asked and what rg greps for, where."""
    return {
        "class": cls,
        "query": text,
        "filters": filters,
        "caller": caller,
        "rgPattern": rg_pattern or text,
        "rgPaths": rg_paths,
    }


_PHRASE = re.compile(r"\b([A-Za-z]{3,}) ([A-Za-z]{3,})(?: ([A-Za-z]{3,}))?\b")


def corpus_phrases(files: list[dict], n: int, rng: random.Random) -> list[str]:
    """2-3 word phrases copied from user/assistant text in random session files."""
    phrases: list[str] = []
    while len(phrases) < n:
        f = rng.choice(files)
        lines = Path(f["path"]).read_bytes().splitlines()
        for line in rng.sample(lines, min(40, len(lines))):
            msg = json.loads(line).get("message") or {}
            blocks = msg.get("content") if msg.get("role") in ("user", "assistant") else None
            texts = (
                [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
                if isinstance(blocks, list)
                else []
            )
            found = [m for t in texts for m in _PHRASE.finditer(t)]
            if found:
                m = rng.choice(found)
                words = [w for w in m.groups() if w][: rng.choice((2, 3))]
                phrases.append(" ".join(words))
                break
    return phrases


_CAMEL = re.compile(r"\b[a-z]{4,}(?:[A-Z][a-z]{3,}){1,2}\b")


def corpus_identifiers(files: list[dict], n: int, rng: random.Random) -> list[str]:
    """camelCase names from user/assistant text in random session files."""
    names: list[str] = []
    for _ in range(n * 20):
        if len(names) >= n:
            break
        f = rng.choice(files)
        found: set[str] = set()
        for line in Path(f["path"]).read_bytes().splitlines():
            msg = json.loads(line).get("message") or {}
            blocks = msg.get("content") if msg.get("role") in ("user", "assistant") else None
            for b in blocks if isinstance(blocks, list) else []:
                if isinstance(b, dict) and b.get("type") == "text":
                    found.update(_CAMEL.findall(b.get("text", "")))
        if found:
            names.append(rng.choice(sorted(found)))
    return names


def project_dirs(files: list[dict], cwd: str) -> list[str]:
    return sorted({str(Path(f["path"]).parent) for f in files if f["cwd"] == cwd})


def build_queries(m: dict, sessions: Path, n: int, rng: random.Random) -> dict[str, list[dict]]:
    files = m["files"]
    everything = [str(sessions)]
    rare = [x["token"] for x in m["needles"]]
    rng.shuffle(rare)
    phrases = corpus_phrases(files, n, rng)
    words = [COMMON_WORDS[i % len(COMMON_WORDS)] for i in range(n)]
    big = sorted(files, key=lambda f: -f["bytes"])[:50]
    cwd = max(m["cwds"], key=lambda c: sum(f["bytes"] for f in files if f["cwd"] == c))
    filtered = []
    for i in range(n):
        word = words[i] if i % 2 else phrases[i].split()[0]
        shape = i % 4
        if shape == 0:
            filtered.append(q("filtered", word, everything, filters={"kind": ["tool.result"]}))
        elif shape == 1:
            filtered.append(q("filtered", word, everything, filters={"tool": ["bash"]}))
        elif shape == 2:
            f = big[i % len(big)]
            filtered.append(q("filtered", word, [f["path"]], filters={"sessionId": [f["sessionId"]]}))
        else:
            filtered.append(q("filtered", word, everything, filters={"kind": ["assistant.text"]}))
    mix = [
        (rare[i], None) if i % 3 == 0 else (f'"{phrases[i]}"', phrases[i]) if i % 3 == 1 else (words[i], None)
        for i in range(n)
    ]
    nothing = [f"zq{rng.getrandbits(40):x}nomatch" for _ in range(n)]
    classes = {
        **relaxed_queries(phrases, everything, rng),
        **forms_queries(phrases, corpus_identifiers(files, n, rng), everything),
        "no match, all caller": [q("no match, all caller", t, everything) for t in nothing],
        "no match, cwd caller": [
            q("no match, cwd caller", t, project_dirs(files, cwd), caller={"cwd": cwd}) for t in nothing
        ],
        "rare term": [q("rare term", t, everything) for t in rare[:n]],
        "common word": [q("common word", w, everything) for w in words],
        "phrase": [q("phrase", f'"{p}"', everything, rg_pattern=p) for p in phrases],
        "filtered": filtered,
        "pi tool, cwd caller": [
            q("pi tool, cwd caller", t, project_dirs(files, cwd), caller={"cwd": cwd}, rg_pattern=p) for t, p in mix
        ],
        "pi tool, all caller": [q("pi tool, all caller", t, everything, rg_pattern=p) for t, p in mix],
    }
    return {**classes, **scoped_relaxed_queries(files, cwd, n, rng)}


def scoped_relaxed_queries(files: list[dict], cwd: str, n: int, rng: random.Random) -> dict[str, list[dict]]:
    """The relaxed classes as a workspace caller asks them, from its own
    sessions' phrases: its word statistics are counted in its scope."""
    mine = [f for f in files if f["cwd"] == cwd]
    relaxed = relaxed_queries(corpus_phrases(mine, n, rng), project_dirs(files, cwd), rng)
    return {
        f"{name}, cwd caller": [{**x, "class": f"{name}, cwd caller", "caller": {"cwd": cwd}} for x in qs]
        for name, qs in relaxed.items()
    }


def _typo(word: str, rng: random.Random) -> str:
    """One edit that keeps the first letter: swap, drop or double an inner letter."""
    i = rng.randrange(1, len(word) - 1)
    kind = rng.randrange(3)
    if kind == 0:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind == 1:
        return word[:i] + word[i + 1 :]
    return word[:i] + word[i] + word[i:]


def relaxed_queries(phrases: list[str], paths: list[str], rng: random.Random) -> dict[str, list[dict]]:
    """Queries that reach the tiers below exact (README: tiers): a corpus
    phrase's words with one of them misspelled (the repaired tier), and an
    agent-style question holding two of its words and a word never written
    (the partial tier, after a failed repair)."""
    typos, questions = [], []
    for p in phrases:
        words = p.split()
        long = [w for w in words if len(w) >= 5 and w.isalpha()]
        if long:
            w = rng.choice(long)
            typos.append(q("repaired word", " ".join(_typo(x, rng) if x == w else x for x in words), paths))
        if len(words) >= 2:
            made_up = "".join(rng.choice("bcdfgklmnprstvz") + rng.choice("aeiou") for _ in range(4))
            questions.append(q("partial (question)", f"why did the {words[0]} {words[1]} {made_up}", paths))
    return {"repaired word": typos, "partial (question)": questions}


def _inflect(word: str) -> str:
    """Another inflection of an English word (a rule of thumb; the stem is what counts)."""
    for end, other in (("ing", "ed"), ("ed", "ing"), ("ies", "y"), ("s", ""), ("e", "ed")):
        if word.endswith(end):
            return word[: -len(end)] + other
    return word + "s"


def forms_queries(phrases: list[str], names: list[str], paths: list[str]) -> dict[str, list[dict]]:
    """Queries for the forms tier: a corpus phrase's words, the longest in
    another inflection; the case parts of a camelCase name from the corpus
    (`loadSessionCache` -> `load session cache`)."""
    inflected = []
    for p in phrases:
        words = p.split()
        w = max(words, key=len)
        inflected.append(q("inflection", " ".join(_inflect(x) if x == w else x for x in words), paths))
    parts = [q("identifier parts", " ".join(identifier_parts(n)), paths) for n in names]
    return {"inflection": inflected, "identifier parts": parts}


# -- measurement ------------------------------------------------------------------


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def summary(times: list[float]) -> dict:
    return {
        "n": len(times),
        "p50ms": ms(pct(times, 50)),
        "p99ms": ms(pct(times, 99)),
        "maxms": ms(max(times)),
        "meanms": ms(statistics.mean(times)),
    }


class RssSampler:
    """Peak RSS of the daemon while a block runs (sampled every 20 ms)."""

    def __init__(self, d: Daemon):
        self.d, self.peak, self._stop = d, 0.0, threading.Event()

    def __enter__(self) -> RssSampler:
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.d.rss_mb())
            time.sleep(0.02)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


class ForeignCpu:
    """CPU% used by processes other than the daemon and this harness (with its
    rg children) while a block runs, out of 100 x CPUs: well above 0 means the
    machine was shared and the figures are pessimistic."""

    def __init__(self, d: Daemon):
        self.d, self.percent = d, 0.0

    @staticmethod
    def _busy() -> float:
        t = psutil.cpu_times()
        return t.user + t.nice + t.system + t.irq + t.softirq + getattr(t, "steal", 0.0)

    def _ours(self) -> float:
        me, dm = psutil.Process().cpu_times(), self.d.ps.cpu_times()
        return me.user + me.system + me.children_user + me.children_system + dm.user + dm.system

    def __enter__(self) -> ForeignCpu:
        self.t0, self.busy0, self.ours0 = time.monotonic(), self._busy(), self._ours()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.monotonic() - self.t0
        other = (self._busy() - self.busy0) - (self._ours() - self.ours0)
        self.percent = round(max(0.0, 100 * other / wall), 1)


def context_switches(pid: int) -> int:
    """Voluntary + involuntary switches summed over every thread (wake-ups)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if "ctxt_switches:" in line:
                    total += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def index_fds(pid: int) -> int:
    """Open descriptors on the index files: ~2 per open reader connection."""
    n = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            n += "search-index-" in os.readlink(fd)
        except OSError:
            pass
    return n


def idle_cpu(d: Daemon, seconds: float = 10.0) -> dict:
    """CPU% and wake-ups of the daemon while nobody talks to it."""
    before, ctx0, t0 = d.ps.cpu_times(), context_switches(d.proc.pid), time.monotonic()
    time.sleep(seconds)
    after, ctx1, wall = d.ps.cpu_times(), context_switches(d.proc.pid), time.monotonic() - t0
    busy = (after.user - before.user) + (after.system - before.system)
    return {
        "seconds": round(wall, 1),
        "cpuPercent": round(100 * busy / wall, 3),
        "wakeupsPerSecond": round((ctx1 - ctx0) / wall, 1),
        "threads": d.ps.num_threads(),
    }


def run_searches(client: Client, queries: list[dict]) -> tuple[list[float], list[dict]]:
    """Latency of each query over the socket, and what came back."""
    times, results = [], []
    for x in queries:
        t = time.perf_counter()
        try:
            r = client.search(x["query"], filters=x["filters"], caller=x["caller"], limit=20)
            out = {
                "hits": [(h.session_id, h.entry_id) for h in r.hits],
                "tiers": [h.tier for h in r.hits],
                "error": None,
            }
        except PiwatchError as exc:
            out = {"hits": [], "error": str(exc)}
        times.append(time.perf_counter() - t)
        results.append(out)
    return times, results


def run_ops(client: Client, op: str, targets: list[tuple[str, str]], caller: dict) -> tuple[list[float], int]:
    times, errors = [], 0
    fn = client.read if op == "read" else client.trace
    for sid, eid in targets:
        t = time.perf_counter()
        try:
            fn(sid, eid, caller=caller)
        except PiwatchError:
            errors += 1
        times.append(time.perf_counter() - t)
    return times, errors


def rg_time(x: dict) -> tuple[float, int]:
    """`rg -c -i -F` (FTS5 is case-insensitive) over the files piwatch would search."""
    t = time.perf_counter()
    out = subprocess.run(
        [RG, "-c", "-i", "-F", "--with-filename", "--no-messages", "--", x["rgPattern"], *x["rgPaths"]],
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - t
    return elapsed, sum(int(line.rsplit(":", 1)[1]) for line in out.stdout.splitlines() if ":" in line)


def compare_rg(queries: list[dict], times: list[float], k: int) -> dict:
    """rg on the first k queries of a class vs piwatch's time on the same k
    (k 0: no rg, for a corpus the page cache cannot hold, where one rg reads
    the disk for minutes)."""
    if k <= 0:
        return {"n": 0}
    rg, lines = zip(*(rg_time(x) for x in queries[:k]))
    mine = times[:k]
    return {
        "n": len(rg),
        "rgP50ms": ms(pct(list(rg), 50)),
        "rgP99ms": ms(pct(list(rg), 99)),
        "piwatchP50msSameQueries": ms(pct(mine, 50)),
        "rgMatchingLinesMean": round(statistics.mean(lines)),
        "ratioRgOverPiwatch": round(statistics.median(rg) / statistics.median(mine), 1),
    }


def concurrency(d: Daemon, pool: list[dict], threads: int, seconds: float) -> dict:
    """`threads` clients, each with its own connection, searching for `seconds`."""
    times: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(threads + 1)
    deadline = [0.0]

    def worker(k: int) -> None:
        rng = random.Random(k)
        with Client(d.sock, caller=ALL, timeout=60) as c:
            c.hello()
            start.wait()
            mine, errs = [], []
            while time.monotonic() < deadline[0]:
                x = rng.choice(pool)
                t = time.perf_counter()
                try:
                    c.search(x["query"], filters=x["filters"], caller=x["caller"], limit=20)
                except PiwatchError as exc:
                    errs.append(str(exc)[:120])
                mine.append(time.perf_counter() - t)
        with lock:
            times.extend(mine)
            errors.extend(errs)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    deadline[0] = time.monotonic() + seconds
    t0, cpu0, mine0 = time.monotonic(), d.ps.cpu_times(), psutil.Process().cpu_times()
    start.wait()
    for t in ts:
        t.join()
    wall = time.monotonic() - t0
    cpu1, mine1 = d.ps.cpu_times(), psutil.Process().cpu_times()
    cpu = {
        "daemonCpuPercent": round(100 * (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / wall),
        "clientsCpuPercent": round(100 * (mine1.user + mine1.system - mine0.user - mine0.system) / wall),
    }
    return {
        "threads": threads,
        "seconds": round(wall, 1),
        "requests": len(times),
        "qps": round(len(times) / wall, 1),
        "errors": len(errors),
        "errorSamples": sorted(set(errors))[:3],
        **cpu,
        **summary(times),
    }


# -- where the time goes (in-process, no socket) --------------------------------------


def revision() -> str:
    """The commit measured, with a mark when piwatchd/ or client/ differ from it.

    Taken before the daemon starts; the daemon's lazily imported modules are
    loaded by a warm-up read/trace and the harness imports its piwatchd
    modules at start, so a commit landing mid-run does not change what is measured."""
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "piwatchd", "client"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    return head + ("+dirty" if dirty else "")


def index_counts(db: Path) -> dict:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("sessions", "events", "fragments")}
    finally:
        conn.close()


# -- report ----------------------------------------------------------------------------


def verdict(p50: float | None, p99: float, goal: tuple[float | None, float]) -> str:
    misses = [f"p50 > {goal[0]:g}" for _ in [0] if goal[0] is not None and p50 is not None and p50 > goal[0]]
    misses += [f"p99 > {goal[1]:g}"] if p99 > goal[1] else []
    return "ok" if not misses else "**miss** (" + ", ".join(misses) + ")"


def markdown(r: dict, command: str) -> str:
    c, ix = r["corpus"], r["index"]
    out = [
        f"# piwatchd search / read / trace benchmark — engine {r['index']['engine']}",
        "",
        f"`{command}` at {r['revision']} — {r['cpus']} CPUs; over the Unix socket with persistent clients; {r['perClass']} queries per class"
        + (
            f" (HEAD moved to {r['revisionAtEnd']} during the run; measured code was loaded at start)"
            if "revisionAtEnd" in r
            else ""
        ),
        "",
        f"Corpus (real Pi {c['piVersion']} writer): {c['files']} files, {c['bytes'] / 1e6:.1f} MB, {c['entries']} entries; "
        f"index {ix['indexBytes'] / 1e6:.0f} MB ({ix['counts']['events']} events, {ix['counts']['fragments']} fragments; "
        + ("reused from the cache" if ix["reused"] else f"built cold in {ix['cold']['startupSeconds']} s")
        + ")",
        "",
        "CPU used by other processes on the machine meanwhile (% of one CPU): "
        + ", ".join(f"{k} {v}" for k, v in r["otherProcessesCpuPercent"].items())
        + f"; load average at the end {r['loadAverageAtEnd']}"
        + f"; Python speed {r.get('pythonSpeedMs')} ms (`sum(range(10**6))`, lower is faster)",
        "",
        "## Search (limit 20)",
        "",
        "| class | n | p50 ms | p99 ms | max ms | hits/query | hits by tier | errors | rg p50 ms (same queries) | rg / piwatch | goal p50 <= 5, p99 <= 50 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in r["search"].items():
        g = r["rg"][name]
        rg = (
            f"{g['rgP50ms']} ({g['n']} q, piwatch {g['piwatchP50msSameQueries']}) | {g['ratioRgOverPiwatch']}x"
            if g["n"]
            else "not run | -"
        )
        out.append(
            f"| {name} | {s['n']} | {s['p50ms']} | {s['p99ms']} | {s['maxms']} | {s['hitsMean']} "
            f"| {', '.join(f'{k} {v}' for k, v in s.get('hitsByTier', {}).items())} | {s['errors']} "
            f"| {rg} "
            f"| {verdict(s['p50ms'], s['p99ms'], GOALS['search'])} |"
        )
    out += [
        "",
        "## Read and trace (on search hits)",
        "",
        "| op | caller | n | p50 ms | p99 ms | max ms | errors | goal p99 <= 10 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in r["ops"].items():
        op, caller = name.split(" ", 1)
        out.append(
            f"| {op} | {caller} | {s['n']} | {s['p50ms']} | {s['p99ms']} | {s['maxms']} | {s['errors']} "
            f"| {verdict(None, s['p99ms'], GOALS[op])} |"
        )
    st = r["status"]
    out += ["", f"`status`: p50 {st['p50ms']} ms, p99 {st['p99ms']} ms over {st['n']} calls (goal <= 20 ms)."]
    res = r["resources"]
    out += [
        "",
        "## Daemon resources",
        "",
        "| measure | value | goal |",
        "|---|---|---|",
        f"| RSS idle (fresh start on the index) | **{res['rssIdleMB']} MB** | <= 100 MB |",
        f"| RSS peak during the serial query runs | {res['rssPeakSerialMB']} MB | |",
        f"| RSS peak during the {next(iter(r['concurrency'].values()))['threads']}-thread load | {res['rssPeakConcurrentMB']} MB | |",
        f"| RSS idle after all load | {res['rssIdleAfterLoadMB']} MB: anonymous {res['rssSplitAfterLoadMB'].get('RssAnon')} MB, "
        f"mapped index files {res['rssSplitAfterLoadMB'].get('RssFile')} MB | |",
        f"| open descriptors on the index: idle / after load ({res['threadsAfterLoad']} threads left) "
        f"| {res['indexFdsIdle']} / {res['indexFdsAfterLoad']} | |",
        f"| CPU idle, fresh ({res['idleCpu']['seconds']} s) | **{res['idleCpu']['cpuPercent']} %** "
        f"({res['idleCpu']['wakeupsPerSecond']} context switches/s, {res['idleCpu']['threads']} threads) | ~0 |",
        f"| CPU idle after load ({res['idleCpuAfterLoad']['seconds']} s) | {res['idleCpuAfterLoad']['cpuPercent']} % "
        f"({res['idleCpuAfterLoad']['wakeupsPerSecond']} context switches/s, {res['idleCpuAfterLoad']['threads']} threads) | ~0 |",
    ]
    if "rssAfterColdIndexMB" in ix:
        out.append(f"| RSS right after the cold index (same process) | {ix['rssAfterColdIndexMB']} MB | |")
    threads = next(iter(r["concurrency"].values()))["threads"]
    out += [
        "",
        f"## Concurrency ({threads} client threads, own connection each, for {r['loadSeconds']:g} s per pool)",
        "",
        "| query pool | seconds | requests | req/s | p50 ms | p99 ms | max ms | errors | daemon CPU % | load generator CPU % |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in r["concurrency"].items():
        out.append(
            f"| {name} | {s['seconds']} | {s['requests']} | {s['qps']} | {s['p50ms']} | {s['p99ms']} | {s['maxms']} "
            f"| {s['errors']} | {s['daemonCpuPercent']} | {s['clientsCpuPercent']} |"
        )
    out += [
        "",
        "rg: `rg -c -i -F PATTERN` over the files piwatch searches (all sessions; a cwd caller's project directories; "
        "a session filter's one file). rg cannot apply kind/tool filters, so for those it greps everything.",
        "",
    ]
    return "\n".join(out)


# -- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", default="1G", help="corpus size (k/M/G suffixes; default 1G, what the issue asks for)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--per-class", type=int, default=200, help="search queries per class (default 200)")
    ap.add_argument(
        "--rg-per-class",
        type=int,
        default=20,
        help="queries per class also run with rg (default 20; 0: none, for a corpus the page cache cannot hold)",
    )
    ap.add_argument("--threads", type=int, default=32)
    ap.add_argument("--load-seconds", type=float, default=10.0)
    ap.add_argument("--index-only", action="store_true")
    ap.add_argument("--engine", choices=("tantivy", "fts5"), default="tantivy")
    ap.add_argument("--shape", choices=("few-large", "many-small"), default="many-small")
    ap.add_argument("--classes", help="only the query classes whose names contain one of these comma-separated words")
    ns = ap.parse_args(argv)
    for module in ("piwatchd.serve.api", "piwatchd.text.search", "piwatchd.serve.ops.read", "piwatchd.serve.ops.trace"):
        importlib.import_module(module)  # see revision()

    rev = revision()
    cdir, m = corpus(parse_bytes(ns.bytes), ns.seed, ns.shape)
    d, info = indexed_daemon(cdir, ns.engine)
    info["revision"] = rev
    try:
        if ns.classes and not ns.index_only:
            report = measure_classes(d, m, cdir / "sessions", ns)
            report["revision"] = rev
            print(json.dumps(report, indent=1))
            return 0
        if not ns.index_only:
            report = measure(d, cdir, m, info, ns)
    finally:
        d.stop()
    if ns.index_only:
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    name = f"search-{ns.bytes}-{ns.shape}-{ns.engine}"
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=2))
    (OUT / f"{name}.md").write_text(markdown(report, " ".join(["python -m bench.search", *(argv or sys.argv[1:])])))
    print((OUT / f"{name}.md").read_text())
    return 0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def measure(d: Daemon, cdir: Path, m: dict, info: dict, ns: argparse.Namespace) -> dict:
    sessions, db = cdir / "sessions", Path(info["db"])
    info["counts"] = index_counts(db)
    report: dict = {
        "revision": info.pop("revision"),
        "corpus": {
            "dir": str(cdir),
            "files": len(m["files"]),
            "bytes": m["totalBytes"],
            "entries": m["entries"],
            "piVersion": m["piVersion"],
        },
        "index": info,
        "cpus": os.cpu_count(),
        "perClass": ns.per_class,
        "loadSeconds": ns.load_seconds,
    }
    log(f"index: {info}; load average {os.getloadavg()}")
    time.sleep(2)
    res = report["resources"] = {"rssIdleMB": d.rss_mb(), "indexFdsIdle": index_fds(d.proc.pid), "idleCpu": idle_cpu(d)}
    log(f"idle: {res}")
    queries = build_queries(m, sessions, ns.per_class, random.Random(ns.seed))
    client = Client(d.sock, caller=ALL, timeout=60)
    for qs in queries.values():  # warm-up, not measured
        run_searches(client, qs[:3])
    sid, eid = run_searches(client, queries["rare term"][:1])[1][0]["hits"][0]
    client.read(sid, eid), client.trace(sid, eid)  # the daemon imports its read/trace code now
    report["search"], results, times_by = {}, {}, {}
    with RssSampler(d) as rss, ForeignCpu(d) as foreign:
        for name, qs in queries.items():
            times_by[name], results[name], report["search"][name] = search_class(client, name, qs)
        report["ops"] = measure_ops(client, queries, results, ns.per_class)
        report["status"] = status_latency(client, 100)
        log(f"status: {report['status']}")
    res["rssPeakSerialMB"] = rss.peak
    report["otherProcessesCpuPercent"] = {"serial searches, read, trace": foreign.percent}
    client.close()
    report["rg"] = {}
    for name, qs in queries.items():
        report["rg"][name] = compare_rg(qs, times_by[name], ns.rg_per_class)
        log(f"rg {name}: {report['rg'][name]}")
    report["concurrency"] = {}
    pools = {"all classes mixed": [x for qs in queries.values() for x in qs], "rare terms only": queries["rare term"]}
    with RssSampler(d) as rss, ForeignCpu(d) as foreign:
        for name, pool in pools.items():
            report["concurrency"][name] = concurrency(d, pool, ns.threads, ns.load_seconds)
            log(f"concurrency {name}: {report['concurrency'][name]}")
    res["rssPeakConcurrentMB"] = rss.peak
    report["otherProcessesCpuPercent"]["concurrency"] = foreign.percent
    report["loadAverageAtEnd"] = [round(x, 2) for x in os.getloadavg()]
    report["pythonSpeedMs"] = python_speed_ms()
    time.sleep(2)
    res["rssIdleAfterLoadMB"] = d.rss_mb()
    res["rssSplitAfterLoadMB"] = d.rss_split_mb()
    res["indexFdsAfterLoad"] = index_fds(d.proc.pid)
    res["threadsAfterLoad"] = d.ps.num_threads()
    res["idleCpuAfterLoad"] = idle_cpu(d)
    if revision() != report["revision"]:
        report["revisionAtEnd"] = revision()  # informational: see revision()
    report["queriesSample"] = {name: [x["query"] for x in qs[:10]] for name, qs in queries.items()}
    return report


def search_class(client: Client, name: str, qs: list[dict]) -> tuple[list[float], list[dict], dict]:
    """One class's latencies, results and summary (with the tiers its hits came from)."""
    times, out = run_searches(client, qs)
    stats = {
        **summary(times),
        "errors": sum(1 for o in out if o["error"]),
        "hitsMean": round(statistics.mean(len(o["hits"]) for o in out), 1),
        "errorSamples": sorted({o["error"] for o in out if o["error"]})[:3],
        "hitsByTier": dict(Counter(t for o in out for t in o.get("tiers", []))),
    }
    log(f"search {name}: {stats}")
    return times, out, stats


def measure_classes(d: Daemon, m: dict, sessions: Path, ns: argparse.Namespace) -> dict:
    """`--classes`: search latency of the named classes only (after a warm-up pass)."""
    wanted = ns.classes.split(",")
    queries = build_queries(m, sessions, ns.per_class, random.Random(ns.seed))
    queries = {k: v for k, v in queries.items() if any(w in k for w in wanted)}
    client = Client(d.sock, caller=ALL, timeout=60)
    for qs in queries.values():
        run_searches(client, qs)
    with ForeignCpu(d) as foreign:
        search = {name: search_class(client, name, qs)[2] for name, qs in queries.items()}
    client.close()
    return {"search": search, "otherProcessesCpuPercent": foreign.percent, "loadAverage": os.getloadavg()}


def status_latency(client: Client, n: int) -> dict:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        client.status()
        times.append(time.perf_counter() - t)
    return summary(times)


def measure_ops(client: Client, queries: dict, results: dict, n: int) -> dict:
    """read and trace on the first hit of each search (all-caller and cwd-caller hits)."""

    def targets(names: list[str]) -> list[tuple[str, str]]:
        seen = {}
        for name in names:
            for o in results[name]:
                for hit in o["hits"][:3]:
                    seen.setdefault(hit, None)
        return list(seen)[:n]

    all_targets = targets([k for k in queries if k != "pi tool, cwd caller"])
    cwd_caller = queries["pi tool, cwd caller"][0]["caller"]
    cwd_targets = targets(["pi tool, cwd caller"])
    ops = {}
    for op in ("read", "trace"):
        for label, tg, caller in (("all", all_targets, ALL), ("cwd", cwd_targets, cwd_caller)):
            if tg:
                times, errors = run_ops(client, op, tg, caller)
                ops[f"{op} {label}"] = {**summary(times), "errors": errors}
                log(f"{op} {label}: {ops[f'{op} {label}']}")
    return ops


if __name__ == "__main__":
    sys.exit(main())
