"""How follows end, end to end against piwatchd as a subprocess (issue 33,
rows 3 and 5): connections holding follows never lock other clients out
(follows keep requests a reserve of connections, and the idlest follow
connection gives way), every follow piwatchd ends is told why in a frame
with its request id, and a reader that never reads is told it was too slow
before its connection closes. Where piwatchd could not say why, the client
does (a scripted peer: no real daemon can be made to close exactly so)."""

from __future__ import annotations

import os
import signal
import socket
import struct
import tempfile
import threading
from pathlib import Path

import msgpack
import pytest
from helpers.live import poll
from helpers.world import Appender, World, write
from piwatch.client import Client, PiwatchError, RequestFailed
from piwatch.protocol import PROTOCOL_VERSION, ErrorCode, encode_frame, recv_frame, send_frame

from piwatchd.serve.server import ServerLimits

pytestmark = pytest.mark.timeout(240)

HELLO = {"v": PROTOCOL_VERSION, "id": 0, "op": "hello", "args": {"proto": PROTOCOL_VERSION}}


def _world(short_tmp: Path, *args: str) -> World:
    w = World(short_tmp)
    w.root.mkdir()
    write(w.root, "a", "s-proj", str(w.proj), "kraken release notes")
    w.start(args=args)
    return w


def _greeted(w: World) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(str(w.sock))
    sock.settimeout(30)
    send_frame(sock, HELLO)
    assert recv_frame(sock, 1 << 20)["ok"]
    return sock


def _follow(sock: socket.socket, req_id: int, query: str, caller: dict) -> dict:
    send_frame(sock, {"v": PROTOCOL_VERSION, "id": req_id, "op": "follow", "args": {"query": query}, "caller": caller})
    return recv_frame(sock, 1 << 24)


def _frames(data: bytes) -> tuple[list[dict], bytes]:
    """The whole frames at the start of `data`, and what is left."""
    out = []
    while len(data) >= 4 and len(data) >= 4 + (size := struct.unpack("!I", data[:4])[0]):
        out.append(msgpack.unpackb(data[4 : 4 + size], raw=False))
        data = data[4 + size :]
    return out, data


def _ended(sock: socket.socket) -> bool:
    """Whether the daemon has said something, or closed (without waiting)."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)
        return True
    except BlockingIOError:
        return False
    finally:
        sock.settimeout(30)


def _rest(sock: socket.socket) -> list[dict]:
    """Every frame until the daemon closes the connection."""
    data = b""
    while chunk := sock.recv(1 << 16):
        data += chunk
    frames, left = _frames(data)
    assert left == b"", left
    return frames


def test_follows_on_every_connection_lock_nobody_out(short_tmp):
    limits = ServerLimits()
    cap = limits.max_connections - limits.request_reserve
    w = _world(short_tmp)
    caller = {"cwd": str(w.proj)}
    held: list[socket.socket] = []
    try:
        with w.client(caller) as c:
            first = c.follow("kraken")  # the oldest: the first to give way
            # More follow connections than the daemon has connections: each is answered.
            for i in range(limits.max_connections + 20):
                sock = _greeted(w)
                assert _follow(sock, 100 + i, "kraken", caller)["ok"]
                held.append(sock)
            # The follow connections past the cap ended the idlest ones, each told why.
            with pytest.raises(RequestFailed) as ended:
                next(iter(first))
            assert ended.value.code == ErrorCode.BUSY and "another client" in ended.value.message
            gone = limits.max_connections + 20 + 1 - cap
            for i, sock in enumerate(held[: gone - 1]):
                (frame,) = _rest(sock)
                assert frame["id"] == 100 + i and frame["error"]["code"] == ErrorCode.BUSY, frame
                assert f"{cap} connections held follows" in frame["error"]["message"]
            assert not any(_ended(sock) for sock in held[gone - 1 :])
            # Every connection taken: the reserve with idle connections, the rest with follows.
            held += [_greeted(w) for _ in range(limits.max_connections - cap)]
            for _ in range(3):
                status = w.cli("status")
                assert status.returncode == 0, status.stderr
            assert c.search("kraken").hits
            assert not any(_ended(sock) for sock in held[gone - 1 : gone - 1 + cap])  # no follow ended for them
    finally:
        for sock in held:
            sock.close()
        w.stop()


def test_a_reader_that_never_reads_is_told_it_was_too_slow(short_tmp):
    w = _world(short_tmp, "--frame-timeout", "2")
    append = Appender(w.root / "a" / "s-proj.jsonl", "s-proj", "s-proj-e0")
    stuck = _greeted(w)
    assert _follow(stuck, 7, "torrent", {"cwd": str(w.proj)})["ok"]
    try:
        with w.client({"cwd": str(w.proj)}) as c, c.follow("torrent") as reading:
            got: list = []

            def read() -> None:
                try:
                    for hit in reading:
                        got.append(hit.entry_id)
                except PiwatchError as exc:
                    got.append(exc)

            reader = threading.Thread(target=read)
            reader.start()
            # Updates the stuck reader never takes, until its socket holds no more.
            sent = 0

            def told() -> bool:
                nonlocal sent
                if sent < 2000:
                    sent += len(append(*[f"torrent {sent + i} " + "x" * 300 for i in range(20)]))
                frames, _ = _frames(stuck.recv(1 << 22, socket.MSG_PEEK))
                return any(not f["ok"] for f in frames)

            poll(told, 60, 0.2, "the stuck reader told why")
            frames = _rest(stuck)
            assert all(f["ok"] for f in frames[:-1]) and frames[:-1], frames[:3]
            error = frames[-1]
            assert error["id"] == 7 and error["error"]["code"] == ErrorCode.SLOW_CONSUMER, error
            assert "too slow" in error["error"]["message"]
            # The reading follow got every hit, and still goes on.
            poll(lambda: len(got) >= sent, 60, message="the reading follow's hits")
            assert len(got) == sent and set(got) == {f"s-proj-f{i}" for i in range(1, sent + 1)}, got[-3:]
            assert c.search("kraken").hits
            reading.close()
            reader.join(10)
    finally:
        stuck.close()
        w.stop()


def test_a_stopping_daemon_tells_its_follows(short_tmp):
    w = _world(short_tmp)
    with w.client({"cwd": str(w.proj)}) as c, c.follow("kraken") as follow:
        w.stop()
        with pytest.raises(RequestFailed) as ended:
            next(iter(follow))
        assert ended.value.code == ErrorCode.UNAVAILABLE and "stopping" in ended.value.message


def test_a_follow_of_a_killed_daemon_says_it_is_gone(short_tmp):
    w = _world(short_tmp)
    with w.client({"cwd": str(w.proj)}) as c, c.follow("kraken") as follow:
        w.proc.send_signal(signal.SIGKILL)
        w.proc.wait(10)
        with pytest.raises(PiwatchError, match=r"ended the follow.*not running now") as ended:
            next(iter(follow))
        assert not isinstance(ended.value, RequestFailed)


class SilentPeer:
    """A daemon's stand-in that greets (with its pid), acknowledges a follow
    and then closes that connection without a word, as piwatchd does when a
    reader's socket had no room left to say why; later connections are greeted."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(dir="/tmp", prefix="pws-"))
        self.dir.chmod(0o700)
        self.path = self.dir / "s.sock"
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(self.path))
        self.listener.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                hello = recv_frame(conn, 1 << 20)
                conn.sendall(encode_frame({"id": hello["id"], "ok": True, "result": {"pid": os.getpid()}}))
                try:
                    follow = recv_frame(conn, 1 << 20)
                except Exception:
                    continue  # the client's probe: greeted, then closed
                ack = {"subscription": 1, "maxQueuedHits": 1000}
                conn.sendall(encode_frame({"id": follow["id"], "ok": True, "result": ack}))

    def close(self) -> None:
        self.listener.close()


def test_a_follow_closed_without_a_word_is_reported_too_slow():
    peer = SilentPeer()
    try:
        with Client(peer.path, timeout=5) as c, c.follow("kraken") as follow, pytest.raises(RequestFailed) as ended:
            next(iter(follow))
        assert ended.value.code == ErrorCode.SLOW_CONSUMER
        assert "follow 1 dropped: too slow" in ended.value.message
    finally:
        peer.close()


class _Conn:
    def __init__(self, idle: float, following: bool, in_request: bool = False) -> None:
        self.last_active, self._following, self.in_request = -idle, following, in_request

    def following(self) -> bool:
        return self._following


@pytest.mark.parametrize(
    "conns, gives_way",
    [
        ([_Conn(5, True), _Conn(1, False), _Conn(3, False)], 2),  # the idlest without follows
        ([_Conn(5, True), _Conn(9, True), _Conn(1, False, in_request=True)], 1),  # then the idlest follow
        ([_Conn(5, True, in_request=True), _Conn(9, False, in_request=True)], None),  # a request is never cut off
    ],
)
def test_who_gives_way_when_every_connection_is_taken(conns, gives_way):
    from piwatchd.serve.connections import victim

    assert victim(conns) is (None if gives_way is None else conns[gives_way])


def test_a_pusher_whose_reader_takes_nothing_says_so_and_hangs_up():
    from piwatch import wire

    from piwatchd.ingest.commits import CommitSignal
    from piwatchd.serve.follow import ConnectionFollows, FollowHub

    class Stuck:
        write_timeout = 3.0
        last: list | None = None

        def room(self) -> bool:
            return False

        def send(self, frame) -> bool:
            raise AssertionError("nothing is written without room")

        def hang_up(self, frames: list) -> None:
            self.last = frames

    rowids = [1]
    hub = FollowHub(CommitSignal(), lambda: rowids[-1], lambda low, n: [r for r in rowids if r > low][:n])
    hub.evaluate = lambda asks, pace: [[object()] for _ in asks]
    outlet = Stuck()
    conn = ConnectionFollows(outlet)
    subs = [hub.subscribe(conn, rid, wire.FollowArgs(query=q), scope=None) for rid, q in ((4, "a"), (5, "b"))]
    rowids.append(2)
    hub.round()
    poll(lambda: outlet.last is not None, message="the pusher's last words")
    assert [(f.id, f.error.code) for f in outlet.last] == [(4, ErrorCode.SLOW_CONSUMER), (5, ErrorCode.SLOW_CONSUMER)]
    assert all(
        f"follow {s.id} dropped: too slow" in f.error.message and "3 s" in f.error.message
        for s, f in zip(subs, outlet.last)
    )
    assert not conn.subs
    hub.end_connection(conn)
