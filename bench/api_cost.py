"""Per-request cost of the api versus history size (issue 10: cost is
O(what the response shows), never O(all sessions)).

Builds (and caches under /tmp) indexes of N small sessions spread over many
projects, then times `Api.handle` in-process for requests whose answers are
small: a search matching nothing (workspace caller, Pi-tool caller with a
cutoff, `all`), a read, `status` (workspace and `all`) and `sessions`.

    python -m bench.api_cost --sessions 4800 20000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from piwatchd.ingest.scan import index_once
from piwatchd.serve.api import Api

__all__ = ["build", "measure", "main"]

PROJECTS = 400


def _session(i: int, cwd: str) -> bytes:
    sid = f"s{i:06d}"
    lines = [
        {"type": "session", "version": 3, "id": sid, "timestamp": "2026-05-01T10:00:00.000Z", "cwd": cwd},
        {
            "type": "message",
            "id": f"{sid}-a",
            "parentId": None,
            "timestamp": "2026-05-01T10:00:01.000Z",
            "message": {"role": "user", "content": f"question {i} about the deploy pipeline"},
        },
        {
            "type": "message",
            "id": f"{sid}-b",
            "parentId": f"{sid}-a",
            "timestamp": "2026-05-01T10:00:02.000Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": f"answer {i} with details"}]},
        },
    ]
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def build(n: int, base: Path) -> tuple[Path, Path]:
    """An index of `n` sessions over PROJECTS project directories (cached)."""
    out = base / f"api-cost-{n}"
    db = out / "index.sqlite3"
    projects = out / "projects"
    if db.exists():
        return db, projects
    for p in range(PROJECTS):
        (projects / f"p{p:03d}" / ".git").mkdir(parents=True, exist_ok=True)
    root = out / "sessions"
    for i in range(n):
        cwd = projects / f"p{i % PROJECTS:03d}"
        folder = root / f"--p{i % PROJECTS:03d}--"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"s{i:06d}.jsonl").write_bytes(_session(i, str(cwd)))
    index_once(db, [str(root)])
    return db, projects


def _time(fn, repeat: int) -> dict[str, float]:
    fn()  # warm
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples) * 1000, 3),
        "p99_ms": round(samples[int(len(samples) * 0.99) - 1] * 1000, 3),
    }


def measure(db: Path, projects: Path, repeat: int = 300) -> dict[str, dict[str, float]]:
    api = Api(db)
    ws = {"cwd": str(projects / "p007")}
    pi = {**ws, "sessionId": "s000007", "sessionFile": "/nowhere.jsonl", "cutoffEntryId": "s000007-b"}
    everyone = {"all": True}

    def ok(op, args, caller):
        def run():
            r = api.handle(op, args, caller)
            assert r.ok, r.error

        return run

    return {
        "search nothing (workspace)": _time(ok("search", {"query": "xylophonequartz"}, ws), repeat),
        "search nothing (Pi tool, cutoff)": _time(ok("search", {"query": "xylophonequartz"}, pi), repeat),
        "search nothing (all)": _time(ok("search", {"query": "xylophonequartz"}, everyone), repeat),
        "search one session (Pi tool)": _time(
            ok("search", {"query": "deploy", "filters": {"sessionId": ["s000007"]}}, pi), repeat
        ),
        "read (workspace)": _time(ok("read", {"sessionId": "s000007", "entryId": "s000007-a"}, ws), repeat),
        "status (workspace)": _time(ok("status", {}, ws), max(20, repeat // 10)),
        "status (all)": _time(ok("status", {}, everyone), max(20, repeat // 10)),
        "sessions (workspace)": _time(ok("sessions", {"limit": 20}, ws), repeat),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.api_cost")
    p.add_argument("--sessions", type=int, nargs="+", default=[4800, 20000])
    p.add_argument("--repeat", type=int, default=300)
    p.add_argument("--base", default="/tmp/piwatch-bench")
    ns = p.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f}")
    for n in ns.sessions:
        t = time.perf_counter()
        db, projects = build(n, Path(ns.base))
        print(f"\n{n} sessions (index ready in {time.perf_counter() - t:.1f} s)")
        for name, figures in measure(db, projects, ns.repeat).items():
            print(f"  {name:<34} p50 {figures['p50_ms']:>8.3f} ms   p99 {figures['p99_ms']:>8.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
