"""A client that outlives its connection (issue 16, rows 10 and 11).

piwatchd closes connections that sat idle or carried their quota of
requests. The Python client must then reconnect transparently before the
next request (as an HTTP keep-alive pool does), retry once a request whose
connection closed before any byte of the reply, and never retry silently
after a partial reply. `hello` is answered on a live connection too.

The daemon runs as a real process with its idle and per-connection limits
lowered by its own options; the two close-at-the-worst-moment cases use a
small scripted peer, because no real daemon can be made to close exactly
between a client's check and its send.
"""

from __future__ import annotations

import socket
import tempfile
import threading
from pathlib import Path

import pytest
from helpers.live import BASE, poll, search_cli
from piwatch.client import Client, PiwatchError
from piwatch.protocol import PROTOCOL_VERSION, encode_frame, recv_frame
from piwatch.transports import _peer_closed

pytestmark = pytest.mark.timeout(90)


def _words(result) -> list[str]:
    return sorted(h.entry_id for h in result.hits)


@pytest.mark.parametrize("idle, per_connection", [(0.4, 10_000), (60.0, 3), (0.4, 2)])
def test_the_client_reconnects_after_idle_and_used_up_connections(live, idle, per_connection):
    live.path.write_bytes(BASE)
    d = live.daemon(args=("--idle-timeout", str(idle), "--max-requests-per-connection", str(per_connection)))
    poll(lambda: search_cli(live.db, "walrus"), message="the base session indexed")
    with Client(d.socket, caller={"all": True}) as client:
        for round_ in range(3):
            for _ in range(per_connection + 2 if per_connection < 100 else 2):
                assert _words(client.search("walrus")) == ["a"], round_
            if idle < 1:  # the daemon closes the idle connection; the next search reconnects
                poll(lambda: _peer_closed(client._transport._sock), message="the idle connection closed")
        assert client.hello().proto == PROTOCOL_VERSION
        assert _words(client.search("heron")) == ["b"]
    assert d.stop() == 0


def test_hello_on_a_live_connection_is_answered(live):
    live.path.write_bytes(BASE)
    d = live.daemon()
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(d.socket))
        hello = {"v": PROTOCOL_VERSION, "op": "hello", "args": {"proto": PROTOCOL_VERSION}}
        for n in range(1, 4):
            s.sendall(encode_frame({**hello, "id": n}))
            reply = recv_frame(s, 1 << 20)
            assert reply["ok"] and reply["id"] == n and reply["result"]["proto"] == PROTOCOL_VERSION, reply
        s.sendall(encode_frame({"v": PROTOCOL_VERSION, "id": 9, "op": "status", "args": {}, "caller": {"all": True}}))
        assert recv_frame(s, 1 << 24)["ok"]
        # A wrong version mid-connection is refused as at the start, and ends the connection.
        s.sendall(encode_frame({**hello, "id": 10, "args": {"proto": 99}}))
        assert recv_frame(s, 1 << 20)["error"]["code"] == "unsupported_protocol"
        assert s.recv(1) == b""
    assert d.stop() == 0


class ScriptedPeer:
    """A socket peer that answers hello and then follows `script`, one step
    per request: "answer", "close" (before any reply) or "half" (half a reply,
    then close). Counts the requests it received."""

    def __init__(self, script: list[str]) -> None:
        self.dir = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwc-"))
        self.dir.chmod(0o700)
        self.path = self.dir / "s.sock"
        self.script = list(script)
        self.requests: list[str] = []
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(self.path))
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.script:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self._serve(conn)

    def _serve(self, conn: socket.socket) -> None:
        while self.script:
            try:
                message = recv_frame(conn, 1 << 20)
            except Exception:
                return
            if message["op"] == "hello":
                result = {"proto": PROTOCOL_VERSION, "version": "t", "pid": 1, "startedAt": 0, "capabilities": []}
                conn.sendall(encode_frame({"id": message["id"], "ok": True, "result": result}))
                continue
            self.requests.append(message["op"])
            step = self.script.pop(0)
            if step == "close":
                return
            frame = encode_frame({"id": message["id"], "ok": True, "result": {"queued": "all"}})
            if step == "half":
                conn.sendall(frame[: len(frame) // 2])
                return
            conn.sendall(frame)

    def close(self) -> None:
        self.sock.close()
        self.thread.join(5)


def test_a_request_whose_connection_closed_before_any_reply_is_sent_once_more():
    peer = ScriptedPeer(["answer", "close", "answer", "close", "close"])
    try:
        with Client(peer.path) as client:
            assert client.reindex().queued == "all"
            assert client.reindex().queued == "all"  # closed before the reply: retried once, answered
            with pytest.raises(PiwatchError, match="closed the connection"):
                client.reindex()  # closed twice: retried once only
        assert peer.requests == ["reindex"] * 5
    finally:
        peer.close()


def test_a_partial_reply_is_never_retried_silently():
    peer = ScriptedPeer(["half", "answer"])
    try:
        with Client(peer.path) as client:
            with pytest.raises(PiwatchError, match="part-way"):
                client.reindex()
            assert peer.requests == ["reindex"]  # not sent again
            assert client.reindex().queued == "all"  # the next request gets a new connection
    finally:
        peer.close()


# -- the Pi extension: one connection per call, the same retry rule ------------------------------------

NODE_CALL = """
const m = await import(process.argv[1]);
try {
    const r = await m.callDaemon("reindex", {}, { all: true }, { socket: process.argv[2], timeoutMs: 10000 });
    console.log(JSON.stringify({ ok: r.result }));
} catch (e) {
    console.log(JSON.stringify({ error: e.message, code: e.code }));
}
"""


@pytest.fixture(scope="module")
def extension():
    import shutil
    import subprocess
    import sys

    from pi import pitools

    agent = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwx-"))
    subprocess.run([sys.executable, "-m", "piwatch.cli", "pi", "install", "--agent-dir", str(agent)], check=True)
    yield agent / "extensions" / "piwatch" / "daemon-client.ts", pitools
    shutil.rmtree(agent, ignore_errors=True)


def _node_call(extension, sock: Path) -> dict:
    import json
    import subprocess

    client, pitools = extension
    cmd = [pitools.find_node(), "--input-type=module", "-e", NODE_CALL, client.as_uri(), str(sock)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=pitools.node_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize(
    "script, answered, sent",
    [(["close", "answer"], True, 2), (["close", "close"], False, 2), (["half", "answer"], False, 1)],
    ids=["closed-then-answered", "closed-twice", "partial-reply"],
)
def test_the_pi_extension_retries_once_only_before_any_reply(extension, script, answered, sent):
    peer = ScriptedPeer(script)
    try:
        got = _node_call(extension, peer.path)
        assert ("ok" in got) is answered, got
        if not answered:
            assert got["code"] == "daemon_down" and "closed the connection" in got["error"], got
            assert ("part-way" in got["error"]) is (script[0] == "half"), got
        assert peer.requests == ["reindex"] * sent
    finally:
        peer.close()
