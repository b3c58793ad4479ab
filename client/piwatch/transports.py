"""How a `Client` reaches an `Api`: over piwatchd's socket, or in-process.

A transport takes one request message (a map) and returns one response map,
exactly as the socket carries them, and opens a stream of pushed frames
(`follow`) where something can push them. `SocketTransport` talks to piwatchd and
refuses a socket that another user could have planted (its directory must be
ours and private, as the Pi extension checks). `LocalTransport` runs the
daemon's own `piwatchd.serve.api.Api` on an index file, read-only: the CLI's
fallback when piwatchd is not running, with the same authorization. It
imports `piwatchd` only when constructed, so this package stays usable where
only the client is installed.
"""

from __future__ import annotations

import os
import socket
import stat
import time
from pathlib import Path
from typing import Any, Protocol

from .paths import socket_path
from .protocol import (
    MAX_RESPONSE_BYTES,
    ConnectionClosed,
    ProtocolError,
    decode_body,
    encode_frame,
    recv_frame,
    send_frame,
)

__all__ = ["DaemonNotRunning", "LocalTransport", "PiwatchError", "SocketTransport", "Transport", "check_socket_owner"]


class PiwatchError(Exception):
    """Base of every error the client raises."""


class DaemonNotRunning(PiwatchError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            f"piwatchd is not running at {path} ({reason}); start it with `piwatchd` "
            "or install the service with `piwatch service install`"
        )
        self.path = path


class Transport(Protocol):
    # The hello (`Client` sets it) that comes before the first request a
    # connection carries; a failed one answers that request.
    greeting: dict[str, Any] | None

    def request(self, message: dict[str, Any]) -> dict[str, Any]: ...

    def open_stream(self) -> tuple[socket.socket, dict[str, Any]]:
        """A connection of its own, greeted, for a stream of pushed frames, with
        the greeting's result (the daemon's pid); PiwatchError where nothing can push them."""
        ...

    def close(self) -> None: ...


def check_socket_owner(path: str) -> str | None:
    """Why the socket at `path` must not be trusted, or None. Its directory
    must be a real directory of ours with no group/other access, and the
    socket ours: otherwise another user could answer in piwatchd's place."""
    uid = os.geteuid()
    parent = os.path.dirname(os.path.abspath(path)) or "/"
    try:
        dst = os.lstat(parent)
        sst = os.lstat(path)
    except FileNotFoundError:
        return None  # nothing there: connecting reports "not running"
    except OSError as exc:
        return f"cannot check {parent}: {exc.strerror or exc}"
    if not stat.S_ISDIR(dst.st_mode):
        return f"{parent} is not a directory"
    if dst.st_uid != uid:
        return f"{parent} is owned by uid {dst.st_uid}, not {uid}"
    if dst.st_mode & 0o077:
        return f"{parent} is accessible to other users (mode {stat.S_IMODE(dst.st_mode):o})"
    if sst.st_uid != uid:
        return f"{path} is owned by uid {sst.st_uid}, not {uid}"
    return None


class SocketTransport:
    def __init__(self, path: str | os.PathLike[str] | None = None, timeout: float = 15.0) -> None:
        self.path = str(path or socket_path())
        self.timeout = timeout
        # The hello sent first on every new connection (`Client` sets it), so
        # a replaced connection is greeted before the request it carries.
        self.greeting: dict[str, Any] | None = None
        self._sock: socket.socket | None = None

    def _connect(self) -> socket.socket:
        problem = check_socket_owner(self.path)
        if problem is not None:
            raise PiwatchError(f"refusing to use the piwatchd socket {self.path}: {problem}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            self._connect_retrying(sock)
        except FileNotFoundError:
            sock.close()
            raise DaemonNotRunning(self.path, "no socket there") from None
        except ConnectionRefusedError:
            sock.close()
            raise DaemonNotRunning(self.path, "nothing is listening on it") from None
        except OSError as exc:
            sock.close()
            raise DaemonNotRunning(self.path, exc.strerror or str(exc)) from None
        return sock

    def _connect_retrying(self, sock: socket.socket) -> None:
        """Connect; a full listen backlog (EAGAIN on a Unix socket) is a busy
        daemon, not a dead one: retry it briefly within the timeout."""
        deadline = time.monotonic() + min(self.timeout, 5.0)
        while True:
            try:
                sock.connect(self.path)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return its response, like an HTTP client's
        keep-alive pool: a connection the daemon closed while it sat idle (its
        idle timeout, or its requests-per-connection limit) is replaced before
        the request is sent, and a request whose connection closed before any
        byte of the reply is sent once more on a new connection. A reply cut
        off part-way is an error, never retried silently."""
        for attempt in (1, 2):
            if self._sock is not None and _peer_closed(self._sock):
                self.close()
            if self._sock is None:
                greeting = self._open(message)
                if greeting is not None:
                    return greeting  # the handshake failed: its error answers the request
            try:
                return self._exchange(message)
            except _ClosedBeforeReply as exc:
                self.close()
                if attempt == 2:
                    raise PiwatchError(f"piwatchd closed the connection: {exc}") from None
        raise AssertionError("unreachable")

    def _open(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Connect; on a new connection, say hello first (unless `message` is
        the hello). Returns the hello's error response, or None when greeted."""
        self._sock = self._connect()
        if self.greeting is None or message.get("op") == "hello":
            return None
        try:
            reply = self._exchange(self.greeting)
        except _ClosedBeforeReply as exc:
            self.close()
            raise PiwatchError(f"piwatchd closed the connection: {exc}") from None
        if reply.get("ok") is True:
            return None
        self.close()
        return {**reply, "id": message.get("id")}

    def _exchange(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self._sock is not None
        try:
            send_frame(self._sock, message)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise _ClosedBeforeReply(str(exc)) from None
        try:
            response: dict[str, Any] = recv_frame(self._sock, MAX_RESPONSE_BYTES)
            return response
        except TimeoutError:
            self.close()
            raise PiwatchError(f"piwatchd did not answer within {self.timeout:g} s") from None
        except ConnectionClosed as exc:
            if not exc.partial:
                raise _ClosedBeforeReply(str(exc)) from None
            self.close()
            raise PiwatchError(f"piwatchd closed the connection part-way through its reply: {exc}") from None
        except ProtocolError as exc:
            self.close()
            raise PiwatchError(f"bad response from piwatchd: {exc}") from None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def open_stream(self) -> tuple[socket.socket, dict[str, Any]]:
        """A new connection of its own, greeted, for a stream of pushed frames
        (`follow`): the request/response connection never carries those. With
        it, the greeting's result (the daemon's pid: whether a later one is the same)."""
        sock = self._connect()
        if self.greeting is None:
            return sock, {}
        try:
            send_frame(sock, self.greeting)
            reply = recv_frame(sock, MAX_RESPONSE_BYTES)
        except (OSError, ConnectionClosed, ProtocolError) as exc:
            sock.close()
            raise PiwatchError(f"piwatchd closed the connection during hello: {exc}") from None
        if reply.get("ok") is not True:
            sock.close()
            error = reply.get("error") or {}
            raise PiwatchError(f"{error.get('code')}: {error.get('message')}")
        result = reply.get("result")
        return sock, result if isinstance(result, dict) else {}


class _ClosedBeforeReply(Exception):
    """The connection closed before any byte of the reply: safe to send again."""


def _peer_closed(sock: socket.socket) -> bool:
    """Whether the daemon has closed (or reset) an idle connection: it sends
    nothing unasked, so any readable state between requests means the end."""
    timeout = sock.gettimeout()
    sock.settimeout(0.0)  # a peek that never waits (Python's own timeout would poll first)
    try:
        sock.recv(1, socket.MSG_PEEK)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    finally:
        sock.settimeout(timeout)
    return True


class LocalTransport:
    """The daemon's `Api` in this process, on the index file `db` (read-only).

    Messages go through the same msgpack encoding as the socket, so a
    response is byte-for-byte what piwatchd would have sent.
    """

    def __init__(self, db: str | os.PathLike[str]) -> None:
        from piwatchd.serve.api import Api  # lazy: only the fallback needs the daemon package

        self.db = Path(db).expanduser()
        if not self.db.is_file():
            raise PiwatchError(f"no index at {self.db}: start piwatchd or run `piwatch index --once`")
        self.api = Api(self.db)
        self.greeting: dict[str, Any] | None = None
        self._greeted = False

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Answer as piwatchd would: the greeting first, as on a new connection."""
        if self.greeting is not None and not self._greeted and message.get("op") != "hello":
            reply = self._answer(self.greeting)
            if reply.get("ok") is not True:
                return {**reply, "id": message.get("id")}
            self._greeted = True
        return self._answer(message)

    def _answer(self, message: dict[str, Any]) -> dict[str, Any]:
        message = decode_body(encode_frame(message)[4:])
        op, req_id = message.get("op"), message.get("id")
        try:
            if op == "hello":
                response: Any = {"id": req_id, "ok": True, "result": self.api.hello(message.get("args"))}
            else:
                response = self.api.handle(op, message.get("args") or {}, message.get("caller"))
                response.id = req_id
        except ProtocolError as exc:
            response = {"id": req_id, "ok": False, "error": {"code": exc.code, "message": exc.message}}
        decoded: dict[str, Any] = decode_body(encode_frame(response)[4:])
        return decoded

    def open_stream(self) -> tuple[socket.socket, dict[str, Any]]:
        raise PiwatchError("follow needs piwatchd running: an index file alone never changes")

    def close(self) -> None:
        self.api.readers.reset()
        self._greeted = False
