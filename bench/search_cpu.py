"""Search CPU per query class, in-process: `python -m bench.search_cpu --bytes 1G`.

The daemon's one request path (`Api.handle`, through `LocalTransport`, so
the same wire encoding) on the cached index of `bench.search` (build it
first with `python -m bench.search --bytes 1G --index-only`), with the same
query classes. Each query's CPU time is the calling thread's
(`time.thread_time`: Tantivy searches on the calling thread), which a
loaded machine inflates far less than wall-clock time, so before/after
comparisons hold on a shared machine; wall-clock is printed beside it.

`--caches cold` empties the process's per-query caches (the words'
statistics memo, the re-projected events) before each query, as a new
question finds them; `--caches live` does so too but keeps the size of the
caller's scope and counts one document changed since (a new question while
a live session commits once a second); `--caches warm` runs each query once
before measuring it (the same question asked again); the default measures
them as the previous queries of the run left them.

`--query TEXT` measures that one query, `--per-class` times.

`--evidence-pages N` measures one stage alone, a page's snippets: N pages
of 20 large tool outputs (16,000+ characters, as an agent's question on a
real history finds them), each page cold, re-projected and snippeted for
the word "error" whole (`project_rows` + `snippet`) and redacted only where
shown (`evidence_rows` + `evidence_snippet`), side by side.

`--profile CLASS` runs that class under cProfile and prints the top
functions by cumulative time; `--json FILE` writes the figures.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import sqlite3
import sys
import time
from pathlib import Path

from piwatch.client import Client, PiwatchError
from piwatch.transports import LocalTransport

from bench.ingest import corpus, parse_bytes, pct
from bench.search import ALL, build_queries
from piwatchd.store import source_events
from piwatchd.text.query import Term
from piwatchd.text.tantivy.index import TantivyText, text_dir
from piwatchd.text.tantivy.readers import register_text
from piwatchd.text.tantivy.snippets import Marks, evidence_snippet, snippet

CACHES = ("found", "cold", "warm", "live")


def drop_caches(text: TantivyText, keep: frozenset[str] = frozenset()) -> None:
    """Empty what a search remembers between queries in this process (but
    the memo's entries of the kinds in `keep`)."""
    text._memo = {k: v for k, v in text._memo.items() if k[0] in keep}
    with source_events._cache_lock:
        source_events._cache.clear()
        source_events._cache_chars = 0


def _measured(client: Client, x: dict, text: TantivyText, caches: str) -> tuple[float, float, int]:
    if caches == "cold":
        drop_caches(text)
    elif caches == "live":
        # A new question during a live session: its words unknown, the
        # caller's scope counted before, one document committed since.
        drop_caches(text, keep=frozenset({"docs"}))
        text.churn += 1
    elif caches == "warm":
        _one(client, x)
    return _one(client, x)


def _one(client: Client, x: dict) -> tuple[float, float, int]:
    t, c = time.perf_counter(), time.thread_time()
    try:
        n = len(client.search(x["query"], filters=x["filters"], caller=x["caller"], limit=20).hits)
    except PiwatchError:
        n = -1
    return time.perf_counter() - t, time.thread_time() - c, n


def run_class(client: Client, qs: list[dict], text: TantivyText, caches: str = "found") -> dict:
    for x in qs[:3]:  # warm-up
        _one(client, x)
    wall, cpu, hits = zip(*(_measured(client, x, text, caches) for x in qs), strict=True)
    return {
        "n": len(qs),
        "cpuP50ms": round(pct(list(cpu), 50) * 1000, 2),
        "cpuP99ms": round(pct(list(cpu), 99) * 1000, 2),
        "cpuMeanms": round(sum(cpu) / len(cpu) * 1000, 2),
        "wallP50ms": round(pct(list(wall), 50) * 1000, 2),
        "wallP99ms": round(pct(list(wall), 99) * 1000, 2),
        "hitsMean": round(sum(max(h, 0) for h in hits) / len(hits), 1),
        "errors": sum(1 for h in hits if h < 0),
    }


def evidence_pages(db: Path, text: TantivyText, pages: int, seed: int) -> dict:
    """CPU per page of snippets of large tool outputs, redacted whole and where shown."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = conn.execute(
        "SELECT event_rowid, fragment_id, full_length FROM fragments WHERE kind = 'tool.result' AND full_length >= 16000"
    ).fetchall()
    rng = random.Random(seed)
    marks = Marks(text, [Term("error", False)], False)
    cpu: dict[str, list[float]] = {"whole": [], "shown": []}
    chars = []
    for _ in range(pages):
        page = rng.sample(rows, 20)
        chars.append(sum(r[2] for r in page))
        for how in ("whole", "shown"):
            drop_caches(text)
            c = time.thread_time()
            if how == "whole":
                events = source_events.project_rows(conn, [r[0] for r in page])
                for r in page:
                    frags = events[r[0]].fragments if r[0] in events else ()
                    snippet(marks, next((f for f in frags if f.fragment_id == r[1]), None))
            else:
                shown = source_events.evidence_rows(conn, {r[0]: r[1] for r in page})
                for r in page:
                    evidence_snippet(marks, shown[r[0]])
            cpu[how].append(time.thread_time() - c)
    conn.close()
    return {
        "pages": pages,
        "charsPerPage": round(sum(chars) / pages),
        **{f"{how}P50ms": round(pct(v, 50) * 1000, 2) for how, v in cpu.items()},
        **{f"{how}Meanms": round(sum(v) / pages * 1000, 2) for how, v in cpu.items()},
    }


def status_cpu(client: Client, n: int = 30) -> dict:
    cpu = []
    for _ in range(n):
        c = time.thread_time()
        client.status()
        cpu.append(time.thread_time() - c)
    return {"n": n, "cpuP50ms": round(pct(cpu, 50) * 1000, 2), "cpuP99ms": round(pct(cpu, 99) * 1000, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.search_cpu", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", default="1G")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shape", default="many-small")
    ap.add_argument("--engine", default="tantivy")
    ap.add_argument("--per-class", type=int, default=60)
    ap.add_argument("--classes", help="only the classes whose names contain one of these comma-separated words")
    ap.add_argument("--query", help="measure this one query (class 'query', --per-class times) instead of the classes")
    ap.add_argument("--profile", help="profile this class (cProfile, top 40 by cumulative time)")
    ap.add_argument("--sort", default="cumulative", help="the profile's order: cumulative or tottime")
    ap.add_argument("--evidence-pages", type=int, help="measure a page's snippets alone, on this many pages")
    ap.add_argument("--caches", choices=CACHES, default="found", help="per-query caches: as found, cold or warm")
    ap.add_argument("--json", help="also write the figures to this file")
    ns = ap.parse_args(argv)
    cdir, m = corpus(parse_bytes(ns.bytes), ns.seed, ns.shape)
    db = cdir / f"search-index-{ns.engine}.sqlite3"
    if not db.exists():
        print(f"no index at {db}: run python -m bench.search --bytes {ns.bytes} --index-only", file=sys.stderr)
        return 2
    queries = build_queries(m, cdir / "sessions", ns.per_class, random.Random(ns.seed))
    if ns.classes:
        queries = {k: v for k, v in queries.items() if any(w in k for w in ns.classes.split(","))}
    if ns.query:
        queries = {"query": [{"query": ns.query, "filters": None, "caller": ALL}] * ns.per_class}
    client = Client(transport=LocalTransport(db), caller=ALL)
    # The daemon's readers share the writer's index object and never look for
    # another process's commits; a read-only user (the CLI) checks before each
    # search. Register one shared object so the figures are the daemon's.
    text = TantivyText(text_dir(db), writable=False)
    register_text(text)
    if ns.evidence_pages:
        print(json.dumps(evidence_pages(db, text, ns.evidence_pages, ns.seed)))
        return 0
    if ns.profile:
        qs = next(v for k, v in queries.items() if ns.profile in k)
        run_class(client, qs[:3], text)
        prof = cProfile.Profile()
        for x in qs:
            if ns.caches == "cold":
                drop_caches(text)
            elif ns.caches == "warm":
                _one(client, x)
            prof.enable()
            _one(client, x)
            prof.disable()
        pstats.Stats(prof).sort_stats(ns.sort).print_stats(40)
        return 0
    report = {name: run_class(client, qs, text, ns.caches) for name, qs in queries.items()}
    report["status"] = status_cpu(client)
    print(f"{'class':28} {'n':>4} {'cpu p50':>8} {'cpu p99':>8} {'cpu mean':>8} {'wall p50':>8} {'wall p99':>8} hits")
    for name, s in report.items():
        if name == "status":
            print(f"{'status':28} {s['n']:>4} {s['cpuP50ms']:>8} {s['cpuP99ms']:>8}")
            continue
        print(
            f"{name:28} {s['n']:>4} {s['cpuP50ms']:>8} {s['cpuP99ms']:>8} {s['cpuMeanms']:>8} "
            f"{s['wallP50ms']:>8} {s['wallP99ms']:>8} {s['hitsMean']}"
        )
    if ns.json:
        Path(ns.json).write_text(json.dumps(report, indent=1))
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
