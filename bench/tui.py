"""Keystroke to updated results in `piwatch tui`, through the TUI's own
request path (Textual's pilot types into the real app; a keystroke counts
when the answer for the line typed so far is drawn), against piwatchd over
a corpus of session files.

    python -m bench.tui --sessions DIR [--words 40]

The words typed are taken from the corpus's own hits (common and rare alike),
each typed letter by letter, so most keystrokes search a prefix.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from piwatch.client import Client, PiwatchError
from piwatch.tui import Backend, SearchApp

BIN = Path(sys.executable).parent


def _start(root: str, base: Path) -> tuple[subprocess.Popen, Path]:
    run = base / "run"
    run.mkdir(mode=0o700)
    sock = run / "d.sock"
    env = {**os.environ, "PIWATCH_SOCKET": str(sock), "PIWATCH_DB": str(base / "db.sqlite3")}
    env["PIWATCH_CONFIG"] = str(base / "none.toml")
    proc = subprocess.Popen([str(BIN / "piwatchd"), "--sessions", root], env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        try:
            with Client(sock, timeout=5) as c:
                st = c.status()
                if st.service and st.service.phase == "idle" and st.catch_up is None:
                    return proc, sock
        except PiwatchError:
            pass
        time.sleep(1)
    raise SystemExit("piwatchd did not finish indexing")


def _words(sock: Path, n: int) -> list[str]:
    with Client(sock, caller={"all": True}) as c:
        hits = c.search("the", limit=200).hits
    rng = random.Random(1)
    pool = sorted({w.strip(".,:;()") for h in hits for w in h.snippet.split() if w.isalpha() and len(w) >= 4})
    return rng.sample(pool, min(n, len(pool)))


async def _type(sock: Path, words: list[str]) -> list[float]:
    app = SearchApp(Backend(str(sock)), cwd="/")
    times: list[float] = []
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("ctrl+o")  # all projects
        for word in words:
            await pilot.press("ctrl+u")
            line = ""
            for ch in word:
                line += ch
                start = time.perf_counter()
                await pilot.press(ch)
                while app.shown_query != line:
                    await asyncio.sleep(0.0005)
                times.append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", required=True, help="a directory of Pi session files")
    ap.add_argument("--words", type=int, default=40)
    ns = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(dir="/tmp"))
    proc, sock = _start(ns.sessions, base)
    try:
        times = sorted(_ms * 1000 for _ms in asyncio.run(_type(sock, _words(sock, ns.words))))
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        print(
            f"{len(times)} keystrokes: p50 {statistics.median(times):.1f} ms, p99 {p99:.1f} ms, max {times[-1]:.1f} ms"
        )
    finally:
        proc.terminate()
        proc.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
