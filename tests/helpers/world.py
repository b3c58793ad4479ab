"""piwatchd as a real process on its socket with a small world of sessions
(the `world` fixture's parts): two projects, a nested and a symlinked cwd, a
session with a cutoff, a fork across projects."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from conftest import jsonl, msg, v3_header
from piwatch.client import Client

from helpers.live import poll

__all__ = ["BIN", "Appender", "World", "wait_for", "world_env", "write"]

BIN = Path(sys.executable).parent


def write(root: Path, folder: str, sid: str, cwd: str, *texts: str) -> Path:
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    entries, parent = [], None
    for i, t in enumerate(texts):
        eid = f"{sid}-e{i}"
        entries.append(
            msg(eid, parent, "user" if i % 2 == 0 else "assistant", t if i % 2 == 0 else [{"type": "text", "text": t}])
        )
        parent = eid
    p = d / f"{sid}.jsonl"
    p.write_bytes(jsonl(v3_header(sid, cwd), *entries))
    return p


def wait_for(fn, timeout=30.0):
    """`poll` for a world's daemon: any error means "not yet" (it may still be starting)."""
    return poll(fn, timeout, interval=0.05, errors=(Exception,))


class World:
    def __init__(self, base: Path):
        self.base = base
        self.root = base / "sessions"
        self.db = base / "index.sqlite3"
        self.sock = base / "run" / "d.sock"
        self.proj = base / "proj"
        (self.proj / ".git").mkdir(parents=True)
        (self.base / "proj2").mkdir()
        (self.base / "link").symlink_to(self.proj)
        self.env = {
            **os.environ,
            "PIWATCH_SOCKET": str(self.sock),
            "PIWATCH_DB": str(self.db),
            "PIWATCH_CONFIG": str(base / "none.toml"),
        }
        self.proc: subprocess.Popen | None = None

    def start(self, wait=True, args: tuple[str, ...] = ()) -> subprocess.Popen:
        proc = subprocess.Popen(
            [str(BIN / "piwatchd"), "--sessions", str(self.root), "--settle", "0.02", "--max-latency", "0.2", *args],
            env=self.env,
            stderr=subprocess.PIPE,
            text=True,
        )
        if wait:
            self.proc = proc  # the primary instance (stopped by the fixture); a refused second one is not tracked here
            wait_for(
                lambda: (
                    self.client().status().service.pid == proc.pid and self.client().status().service.phase == "idle"
                )
            )
        return proc

    def client(self, caller=None) -> Client:
        return Client(self.sock, caller=caller, timeout=10)

    def cli(self, *args, cwd=None):
        return subprocess.run(
            [str(BIN / "piwatch"), *args], env=self.env, cwd=cwd, capture_output=True, text=True, timeout=60
        )

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)


def world_env(short_tmp: Path) -> Iterator[World]:
    """The `world` fixture (conftest): six sessions in two projects, a fork across them, piwatchd running."""
    w = World(short_tmp)
    w.root.mkdir()
    write(w.root, "a", "s-proj", str(w.proj), "kraken release notes", "kraken answer")
    write(w.root, "b", "s-nested", str(w.proj / "pkg" / "deep"), "kraken nested")
    write(w.root, "c", "s-prefix", str(w.base / "proj2"), "kraken sibling secret")
    write(w.root, "d", "s-link", str(w.base / "link" / "sub"), "kraken through symlink")
    write(w.root, "e", "s-now", str(w.proj), "kraken early", "kraken invoking call", "kraken later result")
    # A fork into this project of the other project's session: it copies the parent's first entry.
    other = (w.root / "c" / "s-prefix.jsonl").read_text().splitlines()
    (w.root / "f").mkdir()
    (w.root / "f" / "s-fork.jsonl").write_text(
        "\n".join(
            [
                json.dumps(v3_header("s-fork", str(w.proj), parentSession=str(w.root / "c" / "s-prefix.jsonl"))),
                other[1],
                json.dumps(
                    msg("s-fork-e1", "s-prefix-e0", "assistant", [{"type": "text", "text": "kraken forked reply"}])
                ),
            ]
        )
        + "\n"
    )
    try:
        w.start()
        yield w
    finally:
        w.stop()  # also when start-up timed out: never leave a daemon behind


class Appender:
    """Appends entries to a session file the way Pi does (whole lines)."""

    def __init__(self, path: Path, sid: str, last: str):
        self.path, self.sid, self.last, self.n = path, sid, last, 0

    def __call__(self, *texts: str) -> list[str]:
        ids, lines = [], []
        for text in texts:
            self.n += 1
            eid = f"{self.sid}-f{self.n}"
            lines.append(msg(eid, self.last, "user", text))
            self.last = eid
            ids.append(eid)
        with open(self.path, "ab") as fh:
            fh.write(jsonl(*lines))
        return ids
