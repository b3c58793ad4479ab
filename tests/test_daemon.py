"""piwatchd as a real process on its socket: client, CLI, authorization,
lifecycle (second instance, stale socket, SIGTERM), hostile frames."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import jsonl, msg, v3_header
from piwatch.client import Client, DaemonNotRunning, NotFound
from piwatch.protocol import encode_frame, recv_frame
from piwatch.wire import to_json

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(120)


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
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
        except Exception as exc:  # retried until the deadline
            last = exc
        time.sleep(0.05)
    raise AssertionError(f"timed out; last error: {last!r}")


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

    def start(self, wait=True) -> subprocess.Popen:
        proc = subprocess.Popen(
            [str(BIN / "piwatchd"), "--sessions", str(self.root), "--settle", "0.02", "--max-latency", "0.2"],
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


@pytest.fixture
def world(short_tmp):
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


def sids(result):
    return sorted({h.session_id for h in result.hits})


def test_authorized_search_read_trace_sessions(world):
    with world.client({"cwd": str(world.proj / "pkg")}) as c:
        assert c.hello().proto == 1
        # nested root and symlinked cwd are inside; the prefix sibling /proj2 is not
        assert sids(c.search("kraken")) == ["s-fork", "s-link", "s-nested", "s-now", "s-proj"]
        hit = c.search('"release notes"').hits[0]
        read = c.read(hit.session_id, hit.entry_id)
        assert read.source.status == "verified"
        trace = c.trace(hit.session_id, hit.entry_id)
        assert trace.children[0].entry_id == "s-proj-e1"
        listed = {s.session_id for s in c.sessions().sessions}
        assert "s-prefix" not in listed and "s-proj" in listed
        with pytest.raises(NotFound):
            c.read("s-prefix", "s-prefix-e0")
        with pytest.raises(NotFound):
            c.trace("s-prefix", "s-prefix-e0")
    with world.client({"cwd": str(world.base / "proj2")}) as c:
        assert sids(c.search("kraken")) == ["s-prefix"]


def test_fork_lineage_never_reveals_an_unauthorized_parent(world):
    with world.client({"cwd": str(world.proj)}) as c:
        trace = c.trace("s-fork", "s-prefix-e0")
        assert "s-prefix" not in to_json(trace).replace("s-prefix-e0", "")
    with world.client({"all": True}) as c:
        kinds = {e.kind for e in c.trace("s-fork", "s-prefix-e0").relationships}
        assert {"fork-anchor", "session-parent"} <= kinds


def test_invocation_cutoff_over_the_socket(world):
    caller = {"cwd": str(world.proj), "sessionId": "s-now", "cutoffEntryId": "s-now-e1", "toolCallId": "t1"}
    with world.client(caller) as c:
        assert "s-now" not in sids(c.search("kraken"))
        own = c.search("kraken", filters={"sessionId": ["s-now"]}).hits
        assert [h.entry_id for h in own] == ["s-now-e0"]
        with pytest.raises(NotFound):
            c.read("s-now", "s-now-e1")
        with pytest.raises(NotFound):
            c.read("s-now", "s-now-e2")
        r = c.read("s-now", "s-now-e0", after=5, order="append")
        assert r.entry_id == "s-now-e0"
        assert "s-now-e1" not in to_json(r) and "s-now-e2" not in to_json(r)
        t = c.trace("s-now", "s-now-e0")
        assert "s-now-e1" not in to_json(t)


def test_live_append_is_searchable_with_freshness(world):
    path = world.root / "a" / "s-proj.jsonl"
    with open(path, "ab") as fh:
        fh.write(jsonl(msg("s-proj-e2", "s-proj-e1", "user", "leviathan appended")))
    with world.client({"cwd": str(world.proj)}) as c:
        result = c.search("leviathan", filters={"sessionId": ["s-proj"]}, wait=5)
        assert [h.entry_id for h in result.hits] == ["s-proj-e2"]
        fresh = {f.session_id: f for f in c.last_freshness.sessions}
        assert fresh["s-proj"].complete and fresh["s-proj"].indexed_bytes == path.stat().st_size


def test_cli_talks_to_the_daemon_and_falls_back(world):
    out = world.cli("search", "kraken", "--json", cwd=str(world.proj))
    assert out.returncode == 0, out.stderr
    assert "s-prefix" not in {h["sessionId"] for h in json.loads(out.stdout)["hits"]}
    (world.base / "nowhere").mkdir()
    elsewhere = world.cli("search", "kraken", cwd=str(world.base / "nowhere"))
    assert (
        elsewhere.returncode == 0 and "no hits in the sessions of" in elsewhere.stdout and "--all" in elsewhere.stdout
    )
    assert "Warning" not in elsewhere.stderr
    everything = json.loads(world.cli("search", "kraken", "--json", "--all").stdout)
    assert "s-prefix" in {h["sessionId"] for h in everything["hits"]}
    status = world.cli("status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["running"] is True
    assert json.loads(status.stdout)["service"]["requestsServed"] >= 2  # the searches above
    human = world.cli("status")
    assert human.returncode == 0 and "piwatchd 0.1.0 running" in human.stdout and "6 sessions" in human.stdout, human
    world.stop()
    assert not world.sock.exists()  # SIGTERM removed our socket
    down = world.cli("search", "kraken", "--json", cwd=str(world.proj))
    assert down.returncode == 0 and "not running" in down.stderr
    assert "s-prefix" not in {h["sessionId"] for h in json.loads(down.stdout)["hits"]}
    assert world.cli("status").returncode == 1
    with pytest.raises(DaemonNotRunning, match="piwatchd"):
        world.client({"cwd": "/"}).status()


def test_second_instance_is_refused_and_stale_socket_recovered(world):
    first = world.proc
    second = world.start(wait=False)
    _, err = second.communicate(timeout=30)
    assert second.returncode == 1 and "already running" in err
    assert first.poll() is None
    # A hard kill leaves a stale socket file; the next instance replaces it.
    first.kill()
    first.wait(10)
    assert world.sock.exists()
    third = world.start()
    assert third.pid != first.pid
    with world.client({"cwd": str(world.proj)}) as c:
        assert sids(c.search("kraken"))


def test_hostile_frames_and_version_mismatch(world):
    socks = []
    for payload in [os.urandom(32), struct.pack("!I", 1 << 31), struct.pack("!I", 50) + b"\x92"]:
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(world.sock))
        s.sendall(payload)
        socks.append(s)
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(str(world.sock))
    s.sendall(encode_frame({"v": 2, "id": 7, "op": "hello", "args": {"proto": 2}}))
    reply = recv_frame(s, 1 << 20)
    assert reply["id"] == 7 and reply["error"]["code"] == "unsupported_protocol"
    with world.client({"cwd": str(world.proj)}) as c:
        assert sids(c.search("kraken"))
    for x in socks + [s]:
        x.close()
    assert world.proc.poll() is None
