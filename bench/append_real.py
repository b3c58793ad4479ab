"""Append -> searchable with the real Pi writer, over the socket.

    python -m bench.append_real --history 60 --appends 60
    python -m bench.append_real --bytes 1G --appends 60

Pi 1.6.0's own `SessionManager` (tests/pi/gen.mjs `append`, one Node process
per append) adds a user message to a random session of the history, and its
assistant reply REPLY_AFTER_MS later; the span measured is from the moment
the file grows (its size polled every 0.5 ms) to the first socket search, as
a Pi tool's caller sees it, that finds the message's unique word. The history is either
`--history N` sessions written by the real Pi (gen.mjs `random`, cached in
bench/cache) or the `--bytes` many-small corpus; either is copied (the
appends must not change the cache) and indexed cold by a fresh daemon.

Reported: p50 / p99 / max ms, the load average (a loaded run says so), and
the p50 time to each stage in the daemon (watcher hint, taken by the ingest
thread, ingested, published by the overlay, found), as bench.append_stages.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.append_stages import _BOOT, STAGES, stage_rows
from bench.ingest import CACHE, REPO, Daemon, corpus, parse_bytes, pct  # bench.ingest puts pitools on sys.path

# Growth is looked for this often: well under the spans measured.
STAT_POLL = 0.0005
# A search is retried this often until it finds the new message.
SEARCH_POLL = 0.001
TIMEOUT = 30.0
# Pi appends the prompt, then the reply once the model has answered: the
# writer waits this long between them (a reply written at once, and the
# Node process's exit, would compete for the 2 cores while the prompt is
# being made searchable, as no real Pi does).
REPLY_AFTER_MS = 500


def history(n: int, seed: int) -> Path:
    """N sessions written by the real Pi writer (cached)."""
    import pitools

    out = CACHE / f"history-{n}-{seed}"
    if (out / "manifest.json").exists():
        return Path(json.loads((out / "manifest.json").read_text())["sessionsDir"])
    shutil.rmtree(out, ignore_errors=True)
    m = pitools.run_gen(
        ["random", "--out", str(out / "sessions"), "--pi", "1.6.0", "--seed", str(seed), "--count", str(n)]
    )
    (out / "manifest.json").write_text(json.dumps(m))
    return Path(m["sessionsDir"])  # Pi's agent dir holds them in sessions/<project>/


def daemon_on(sessions: Path, tmp: Path) -> tuple[Daemon, Path]:
    """A started daemon over a copy of `sessions`, and the copy; it notes
    each stage's time in tmp/trace.log (bench.append_stages's shim)."""
    copy = tmp / "sessions"
    shutil.copytree(sessions, copy)
    (tmp / "boot.py").write_text(_BOOT)
    env = {"TRACE_LOG": str(tmp / "trace.log"), "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "client")])}
    d = Daemon(copy, tmp / "index.sqlite3", 0.05, 1.0, launcher=[sys.executable, str(tmp / "boot.py")], env=env)
    d.start_and_wait()
    return d, copy


def one_append(client: object, path: str, marker: str) -> tuple[float, float, str]:
    """When the file grew and when a search first found `marker` (wall-clock
    seconds, to line up with the daemon's trace; the span is monotonic)."""
    import pitools

    before = os.stat(path).st_size
    args = ["append", "--file", path, "--pi", "1.6.0", "--count", "1", "--marker", marker]
    proc = pitools.spawn_gen([*args, "--reply-after-ms", str(REPLY_AFTER_MS)])
    try:
        deadline = time.monotonic() + TIMEOUT
        while os.stat(path).st_size == before:
            if time.monotonic() > deadline or proc.poll() not in (None, 0):
                raise TimeoutError(f"Pi never appended to {path}: {proc.communicate()[1][-2000:]}")
            time.sleep(STAT_POLL)
        wall, grew = time.time(), time.perf_counter()
        while not client.search(marker, limit=1).hits:  # type: ignore[attr-defined]
            if time.perf_counter() - grew > TIMEOUT:
                raise TimeoutError(f"append {marker} not searchable after {TIMEOUT} s")
            time.sleep(SEARCH_POLL)
        return wall, wall + time.perf_counter() - grew, path
    finally:
        proc.communicate()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.append_real", description=__doc__.split("\n\n")[0])
    ap.add_argument("--history", type=int, default=60, help="sessions in a fresh history (ignored with --bytes)")
    ap.add_argument("--bytes", help="the cached many-small corpus of this size (e.g. 1G) and its index instead")
    ap.add_argument("--appends", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ns = ap.parse_args(argv)
    from piwatch import Client

    if ns.bytes:
        cdir, _ = corpus(parse_bytes(ns.bytes), 1, "many-small")
        sessions = cdir / "sessions"
        label = f"beside the {ns.bytes} many-small history"
    else:
        sessions = history(ns.history, ns.seed)
        label = f"beside a {ns.history}-session history"
    rng = random.Random(ns.seed)
    tmp = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwar-"))
    d, copy = daemon_on(sessions, tmp)
    files = sorted(str(p) for p in copy.rglob("*.jsonl"))
    done = []
    try:
        with Client(d.sock, caller={"all": True}, timeout=60) as client:
            for i in range(ns.appends):
                marker = f"realappend{rng.randrange(10**9):09d}x{i}"
                done.append(one_append(client, rng.choice(files), marker))
                time.sleep(rng.uniform(0.0, 0.05))
        d.stop()
        stages = stage_rows(tmp / "trace.log", done)
    finally:
        if d.proc.returncode is None:
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    spans = [(found - grew) * 1000 for grew, found, _ in done]
    print(
        f"append -> searchable, real Pi 1.6.0 writer, {label}, {len(spans)} appends: "
        f"p50 {pct(spans, 50):.1f} ms, p99 {pct(spans, 99):.1f} ms, max {max(spans):.1f} ms; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    if stages:
        cells = ", ".join(f"{s} {pct([r[i] for r in stages], 50):.1f}" for i, s in enumerate((*STAGES, "found")))
        print(f"p50 ms from the growth to each stage ({len(stages)} appends traced): {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
