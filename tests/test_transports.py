"""The client's transports: the socket's owner and directory are checked
before connecting (as the Pi extension does), and LocalTransport answers
through the daemon's own api with the same authorization."""

from __future__ import annotations

import os
import socket

import pytest
from conftest import jsonl, msg, v3_header
from piwatch.client import Client, DaemonNotRunning, LocalTransport, NotFound, PiwatchError, RequestFailed
from piwatch.transports import check_socket_owner


def _listening(path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.listen(1)
    return s


@pytest.mark.parametrize("mode", [0o755, 0o770, 0o701])
def test_a_socket_in_a_directory_others_can_enter_is_refused(short_tmp, mode):
    d = short_tmp / "run"
    d.mkdir()
    s = _listening(d / "d.sock")
    try:
        d.chmod(mode)
        assert "accessible to other users" in (check_socket_owner(str(d / "d.sock")) or "")
        with pytest.raises(PiwatchError, match="refusing to use"):
            Client(d / "d.sock").status()
    finally:
        s.close()


def test_a_symlinked_socket_directory_is_refused(short_tmp):
    real = short_tmp / "real"
    real.mkdir(mode=0o700)
    s = _listening(real / "d.sock")
    (short_tmp / "link").symlink_to(real)
    try:
        assert "not a directory" in (check_socket_owner(str(short_tmp / "link" / "d.sock")) or "")
    finally:
        s.close()


def test_a_private_directory_and_a_missing_socket_pass_the_check(short_tmp):
    d = short_tmp / "run"
    d.mkdir(mode=0o700)
    assert check_socket_owner(str(d / "absent.sock")) is None
    with pytest.raises(DaemonNotRunning):
        Client(d / "absent.sock").status()
    s = _listening(d / "d.sock")
    try:
        assert check_socket_owner(str(d / "d.sock")) is None
    finally:
        s.close()


def test_local_transport_applies_the_same_authorization(index_dir):
    index_dir.write("a.jsonl", jsonl(v3_header("s-a", "/work/proj"), msg("e", None, "user", "otter here")))
    index_dir.write(
        "b.jsonl",
        jsonl(v3_header("s-other-b", "/work/other"), msg("e", None, "user", "otter there")),
        folder="--work-other--",
    )
    index_dir.index()
    with Client(transport=LocalTransport(index_dir.db), caller={"workspaceRoot": "/work/proj"}) as c:
        assert {h.session_id for h in c.search("otter").hits} == {"s-a"}
        with pytest.raises(NotFound):
            c.read("s-other-b", "e")
        assert [s.session_id for s in c.sessions().sessions] == ["s-a"]
        assert c.status().sessions == 1
    with pytest.raises(PiwatchError, match="no index at"):
        LocalTransport(os.path.join(str(index_dir.root), "missing.sqlite3"))


def test_a_broken_index_under_a_running_api_is_unavailable_not_internal(index_dir):
    for i in range(80):
        index_dir.write(
            f"s{i}.jsonl",
            jsonl(
                v3_header(f"s-{i}", "/work/proj"),
                *[msg(f"e{j}", None, "user", f"otter {i} {j} " * 40) for j in range(8)],
            ),
        )
    index_dir.index()
    with Client(transport=LocalTransport(index_dir.db), caller={"all": True}) as c:
        assert c.read("s-0", "e0").source.status == "verified"
        size = index_dir.db.stat().st_size
        with open(index_dir.db, "r+b") as fh:
            fh.write(os.urandom(size))  # corrupted while the api holds a connection
        codes = []
        for i in range(40, 80):  # pages this connection never read
            try:
                c.trace(f"s-{i}", "e7")
            except RequestFailed as exc:
                codes.append(exc.code)
        assert codes and set(codes) == {"unavailable"}
        assert c.status().ready is False


def test_local_transport_greets_and_streams_as_the_transport_protocol_says(index_dir):
    """A LocalTransport answers the greeting as piwatchd would, and its stream
    (what a follow needs) says why there is none; the client asks no transport's type."""
    index_dir.write("a.jsonl", jsonl(v3_header("s-a", "/work/proj"), msg("e", None, "user", "otter here")))
    index_dir.index()
    transport = LocalTransport(index_dir.db)
    transport.greeting = {"v": 1, "id": 0, "op": "hello", "args": {"proto": -1}}
    reply = transport.request({"v": 1, "id": 7, "op": "status", "args": {}, "caller": {"all": True}})
    assert (reply["ok"], reply["id"], reply["error"]["code"]) == (False, 7, "unsupported_protocol")
    transport.close()
    with Client(transport=LocalTransport(index_dir.db), caller={"all": True}) as c:
        assert c.status().sessions == 1  # the client's own greeting passes
        with pytest.raises(PiwatchError, match="follow needs piwatchd running"):
            c.follow("otter")


def test_follow_takes_the_one_request_path(index_dir):
    """`follow` and `unfollow` are requests like every other (`Api.handle`): on an index
    file alone, with no connection to push on, they are known ops that say why they cannot
    run, and `hello` leaves them out of its capabilities."""
    index_dir.write("a.jsonl", jsonl(v3_header("s-a", "/work/proj"), msg("e", None, "user", "otter here")))
    index_dir.index()
    with Client(transport=LocalTransport(index_dir.db), caller={"all": True}) as c:
        assert "follow" not in c.hello().capabilities and "search" in c.hello().capabilities
        with pytest.raises(RequestFailed, match="follow needs piwatchd running") as refused:
            c.request("follow", {"query": "otter"})
        assert refused.value.code == "unavailable"
        assert c.request("unfollow", {"subscription": 1}).stopped is False  # none of its own to end
