"""The socket server in-process on a real Unix socket: protocol, limits,
authorization, hostile clients. (Process-level tests are in test_daemon.py.)"""

from __future__ import annotations

import os
import socket
import struct
import threading

import msgpack
import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import poll
from piwatch.client import Client, QueryError, RequestFailed
from piwatch.protocol import encode_frame, recv_frame

from piwatchd.ingest.scan import index_once
from piwatchd.serve.api import Api, Live
from piwatchd.serve.server import Server


def write_session(root, folder, sid, cwd, *texts, header_extra=None):
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    entries, parent = [], None
    for i, t in enumerate(texts):
        eid = f"{sid}-e{i}"
        role = "user" if i % 2 == 0 else "assistant"
        content = t if role == "user" else [{"type": "text", "text": t}]
        entries.append(msg(eid, parent, role, content))
        parent = eid
    (d / f"{sid}.jsonl").write_bytes(jsonl(v3_header(sid, cwd, **(header_extra or {})), *entries))


@pytest.fixture
def served(short_tmp):
    proj = short_tmp / "proj"
    (proj / ".git").mkdir(parents=True)
    (short_tmp / "proj2").mkdir()
    root = short_tmp / "sessions"
    write_session(root, "a", "s-mine", str(proj), "unicorn deploy plan", "unicorn done")
    write_session(root, "b", "s-sub", str(proj / "sub"), "unicorn in a subfolder")
    write_session(root, "c", "s-other", str(short_tmp / "proj2"), "unicorn secret elsewhere")
    write_session(root, "d", "s-current", str(proj), "unicorn before", "unicorn call", "unicorn after")
    (root / "e").mkdir()
    (root / "e" / "s-echo.jsonl").write_bytes(
        jsonl(
            v3_header("s-echo", str(proj)),
            msg(
                "q",
                None,
                "assistant",
                [{"type": "toolCall", "id": "t1", "name": "event_search", "arguments": {"query": "unicorn"}}],
            ),
            msg(
                "r",
                "q",
                "toolResult",
                [{"type": "text", "text": "1 hit: unicorn deploy plan"}],
                toolCallId="t1",
                toolName="event_search",
                isError=False,
                details={"piwatch": {"v": 1}},
            ),
        )
    )
    db = short_tmp / "db.sqlite3"
    index_once(db, [str(root)])
    api = Api(db, live=Live(hello_info=lambda: {"version": "test"}))
    server = Server(short_tmp / "run" / "s.sock", api.handle, hello=api.hello, on_connection_end=api.readers.reset)
    server.start()
    yield server, proj, short_tmp
    server.stop()


def sessions_of(result):
    return sorted({h.session_id for h in result.hits})


def test_search_is_authorized_by_workspace_root(served):
    server, proj, tmp = served
    with Client(server.path, caller={"cwd": str(proj / "sub")}) as c:  # git root is proj
        assert sessions_of(c.search("unicorn")) == ["s-current", "s-mine", "s-sub"]
        assert c.last_freshness.sessions and all(f.complete for f in c.last_freshness.sessions)
    with Client(server.path, caller={"cwd": str(tmp / "proj2")}) as c:
        assert sessions_of(c.search("unicorn")) == ["s-other"]
    with Client(server.path, caller={"all": True}) as c:
        assert len(sessions_of(c.search("unicorn"))) == 4


def test_own_tool_calls_and_results_are_hidden_unless_asked(served):
    server, proj, _ = served
    with Client(server.path, caller={"cwd": str(proj)}) as c:
        assert "s-echo" not in sessions_of(c.search("unicorn"))
        asked = c.request("search", {"query": "unicorn", "includeOwnResults": True})
        assert {(h.entry_id, h.evidence.kind) for h in asked.hits if h.session_id == "s-echo"} == {
            ("q", "tool.call"),
            ("r", "tool.result"),
        }


def test_current_session_cutoff(served):
    server, proj, _ = served
    caller = {"cwd": str(proj), "sessionId": "s-current", "cutoffEntryId": "s-current-e1"}
    with Client(server.path, caller=caller) as c:
        assert "s-current" not in sessions_of(c.search("unicorn"))  # excluded by default
        hits = c.search("unicorn", filters={"sessionId": ["s-current"]}).hits
        assert [h.entry_id for h in hits] == ["s-current-e0"]  # only before the invoking entry
    with Client(server.path, caller={"cwd": str(proj), "sessionId": "s-current"}) as c:
        assert c.search("unicorn", filters={"sessionId": ["s-current"]}).hits == []  # no cutoff: nothing


def test_unauthorized_looks_exactly_like_missing(served):
    server, proj, _ = served
    with Client(server.path, caller={"cwd": str(proj)}) as c:
        # Ids shorter than a prefix may be (wire.MIN_ID_PREFIX): "too short" for both alike.
        with pytest.raises(RequestFailed) as hidden:
            c.read("s-other", "s-other-e0")
        with pytest.raises(RequestFailed) as missing:
            c.read("nope", "nope")
        assert str(hidden.value) == str(missing.value)
        listed = [s.session_id for s in c.sessions().sessions]
        assert "s-other" not in listed and "s-mine" in listed


def test_query_errors_and_version_mismatch(served):
    server, proj, _ = served
    with Client(server.path, caller={"cwd": str(proj)}) as c:
        with pytest.raises(QueryError, match="no searchable words"):
            c.search('"')
        assert c.search("NEAR(unicorn deploy)").hits == []
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(server.path))
    s.sendall(encode_frame({"v": 99, "id": 1, "op": "hello", "args": {"proto": 99}}))
    reply = recv_frame(s, 1 << 20)
    assert reply["error"]["code"] == "unsupported_protocol" and "upgrade" in reply["error"]["message"]
    s.close()


def _raw(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(str(path))
    return s


@pytest.mark.timeout(60)
def test_hostile_clients_do_not_disturb_a_normal_one(served):
    server, proj, _ = served
    idle = [_raw(server.path) for _ in range(100)]
    hostile = []
    for payload in [
        os.urandom(64),
        struct.pack("!I", 1 << 30) + b"x",  # oversized announcement
        struct.pack("!I", 200_000) + b"\x91" * 100_000,  # deep nesting, half-sent
        struct.pack("!I", 10) + b"\xc1" * 10,  # invalid msgpack
        encode_frame({"op": "search", "args": {"query": "x"}}),  # no hello
        encode_frame([1, 2, 3]),
    ]:
        s = _raw(server.path)
        s.sendall(payload)
        hostile.append(s)
    deep = _raw(server.path)
    body = b"\x91" * 5000 + b"\xc0"
    deep.sendall(struct.pack("!I", len(body)) + body)
    hostile.append(deep)
    try:
        with Client(server.path, caller={"cwd": str(proj)}) as c:
            for _ in range(20):
                assert sessions_of(c.search("unicorn"))
        for s in hostile:
            try:
                s.settimeout(5)
                data = s.recv(65536)
                if data:
                    (n,) = struct.unpack("!I", data[:4])
                    reply = msgpack.unpackb(data[4 : 4 + n])
                    assert reply["ok"] is False and reply["error"]["code"] in (
                        "bad_request",
                        "too_large",
                        "hello_required",
                    )
            except (TimeoutError, ConnectionResetError):
                pass
    finally:
        for s in idle + hostile:
            s.close()


@pytest.mark.timeout(60)
def test_many_concurrent_clients(served):
    server, proj, _ = served
    errors = []

    def worker():
        try:
            with Client(server.path, caller={"cwd": str(proj)}) as c:
                for _ in range(5):
                    assert len(sessions_of(c.search("unicorn"))) == 3
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # Finished connections release their SQLite connections (no descriptor leak).
    poll(lambda: len(server.threads()) <= 1, 5, interval=0.05, message="the finished connections' threads gone")
    # (The text index's segment files stay open in the one shared index object.)
    db_fds = [
        f
        for f in os.listdir("/proc/self/fd")
        if "db.sqlite3" in (p := os.path.realpath(f"/proc/self/fd/{f}")) and ".tantivy" not in p
    ]
    assert len(db_fds) <= 6, db_fds


def test_socket_is_private(served):
    server, _, _ = served
    assert os.stat(server.path).st_mode & 0o777 == 0o600
    assert os.stat(server.path.parent).st_mode & 0o777 == 0o700
