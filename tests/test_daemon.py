"""piwatchd as a real process on its socket: client, CLI, authorization,
lifecycle (second instance, stale socket, SIGTERM), hostile frames."""

from __future__ import annotations

import json
import os
import socket
import struct

import pytest
from conftest import jsonl, msg
from piwatch.client import DaemonNotRunning, NotFound
from piwatch.protocol import encode_frame, recv_frame
from piwatch.wire import to_json

pytestmark = pytest.mark.timeout(120)


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
