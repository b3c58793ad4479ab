"""Deadlines (issue 10, items 5-6): slow senders cannot lock others out,
waiting for freshness holds no request slot and wakes on commit, a partial
last line counts as fresh, and every request stays inside its budget."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import poll, stretched, waiting_on
from helpers.world import World, write
from piwatch.client import Client
from piwatch.protocol import encode_frame

from piwatchd.ingest.commits import CommitSignal
from piwatchd.ingest.scan import index_once
from piwatchd.serve.api import Api, Live
from piwatchd.serve.server import Server, ServerLimits

pytestmark = pytest.mark.timeout(120)


class Limits(ServerLimits):
    concurrent_requests = 1  # one slot: a waiter holding it would block everyone
    frame_timeout = 0.5
    max_connections = 64


@pytest.fixture
def served(short_tmp):
    proj = short_tmp / "proj"
    (proj / ".git").mkdir(parents=True)
    root = short_tmp / "sessions"
    path = root / "a" / "s-live.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(jsonl(v3_header("s-live", str(proj)), msg("e0", None, "user", "walrus first")))
    db = short_tmp / "db.sqlite3"
    index_once(db, [str(root)])
    commits = CommitSignal()
    api = Api(db, live=Live(commits=commits), session_roots=(str(root),))
    server = Server(
        short_tmp / "run" / "s.sock", api.handle, hello=api.hello, limits=Limits(), on_connection_end=api.readers.reset
    )
    server.start()
    yield server, proj, root, db, path, commits
    server.stop()


def _client(server, proj):
    return Client(server.path, caller={"cwd": str(proj)}, timeout=20)


def test_waiting_for_freshness_holds_no_slot_and_wakes_on_commit(served):
    server, proj, root, db, path, commits = served
    with open(path, "ab") as fh:
        fh.write(jsonl(msg("e1", "e0", "user", "walrus appended")))
    waited: dict[str, float] = {}

    def waiter():
        t = time.monotonic()
        with _client(server, proj) as c:
            waited["hits"] = len(c.search("walrus", filters={"sessionId": ["s-live"]}, wait=8).hits)
        waited["seconds"] = time.monotonic() - t

    thread = threading.Thread(target=waiter)
    thread.start()
    poll(lambda: waiting_on(commits._cond), message="the search waiting for a commit")
    # With one request slot, an unrelated request still answers at once while the waiter waits.
    for _ in range(3):
        t = time.monotonic()
        with _client(server, proj) as c:
            assert c.search("walrus").hits
        assert time.monotonic() - t < min(stretched(1.0), 4.0)
    index_once(db, [str(root)])  # the "ingest thread" commits the append ...
    committed = time.monotonic()
    commits.notify()  # ... and signals it
    thread.join(10)
    assert waited["hits"] == 2
    assert time.monotonic() - committed < min(stretched(1.0), 4.0)  # woken by the commit, long before its 8 s


@pytest.mark.parametrize("tail", [b'{"type":"message","id":"e9"', b"x" * 100_000, b" "])
def test_a_partial_last_line_counts_as_fresh(served, tail):
    server, proj, _root, _db, path, _commits = served
    with open(path, "ab") as fh:
        fh.write(tail)  # Pi is mid-write: no newline yet
    t = time.monotonic()
    with _client(server, proj) as c:
        c.search("walrus", filters={"sessionId": ["s-live"]}, wait=5)
        fresh = c.last_freshness.sessions[0]
    assert time.monotonic() - t < min(stretched(1.0), 3.0)  # not its 5 s wait
    assert fresh.complete and fresh.file_bytes == path.stat().st_size > fresh.indexed_bytes


def _raw(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(str(path))
    return s


def test_a_trickling_sender_is_cut_off_at_the_frame_deadline(served):
    server, *_ = served
    frame = encode_frame({"v": 1, "id": 1, "op": "hello", "args": {"proto": 1}})
    for prefix in (frame[:1], frame[:4], frame[:-1]):
        s = _raw(server.path)
        s.sendall(prefix)
        t = time.monotonic()
        assert s.recv(100) == b""  # closed by the daemon, not answered
        assert time.monotonic() - t < min(stretched(3), 4.5)  # not the socket's 5 s timeout
        s.close()


def test_hundreds_of_slow_connections_do_not_lock_others_out(short_tmp):
    w = World(short_tmp)
    w.root.mkdir()
    write(w.root, "a", "s-proj", str(w.proj), "narwhal notes")
    w.start()
    held = []
    try:
        frame = encode_frame({"v": 1, "id": 1, "op": "hello", "args": {"proto": 1}})
        for i in range(300):  # more than the daemon's 256 connections
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(w.sock))
            kind = i % 3
            if kind == 1:
                s.sendall(frame[:2])  # a frame started, never finished
            elif kind == 2:
                s.sendall(struct.pack("!I", 1000))  # header only
            held.append(s)
        for _ in range(5):
            t = time.monotonic()
            with w.client({"cwd": str(w.proj)}) as c:
                assert c.search("narwhal").hits
            assert time.monotonic() - t < min(stretched(3.0), 15)
        assert w.proc.poll() is None
    finally:
        for s in held:
            s.close()
        w.stop()


def test_every_request_has_a_budget(served):
    _server, proj, _root, db, path, commits = served
    api = Api(db, live=Live(commits=commits), request_budget=0.3)
    with open(path, "ab") as fh:
        fh.write(jsonl(msg("e2", "e0", "user", "walrus never ingested")))
    t = time.monotonic()
    response = api.handle(
        "search", {"query": "walrus", "filters": {"sessionId": ["s-live"]}, "waitSeconds": 10}, {"cwd": str(proj)}
    )
    assert time.monotonic() - t < min(stretched(1.0), 5.0)  # the budget, not waitSeconds (10 s), bounds the wait
    assert response.ok or response.error.code == "timeout"
