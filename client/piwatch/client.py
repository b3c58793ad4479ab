"""A small, synchronous client for piwatchd.

    from piwatch import Client
    with Client() as c:
        hits = c.search("flaky websocket", caller={"cwd": "/work/proj"})["hits"]

The transport is a seam (as in httpx): `SocketTransport` talks to the daemon;
tests can pass any object with `request(message) -> response` and
`close()`. The client owns the handshake, request ids and error mapping.
"""

from __future__ import annotations

import itertools
import os
import socket
from typing import Any, Protocol, cast

from . import __version__
from .paths import socket_path
from .protocol import (
    MAX_RESPONSE_BYTES,
    PROTOCOL_VERSION,
    ConnectionClosed,
    ErrorCode,
    ProtocolError,
    recv_frame,
    send_frame,
)

__all__ = [
    "Client",
    "Transport",
    "SocketTransport",
    "PiwatchError",
    "DaemonNotRunning",
    "ProtocolMismatch",
    "RequestFailed",
    "NotFound",
    "QueryError",
]


class PiwatchError(Exception):
    """Base of every error this client raises."""


class DaemonNotRunning(PiwatchError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            f"piwatchd is not running at {path} ({reason}); start it with `piwatchd` "
            "or install the service with `piwatch service install`"
        )
        self.path = path


class ProtocolMismatch(PiwatchError):
    pass


class RequestFailed(PiwatchError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class NotFound(RequestFailed):
    pass


class QueryError(RequestFailed):
    pass


class Transport(Protocol):
    def request(self, message: dict[str, Any]) -> dict[str, Any]: ...

    def close(self) -> None: ...


class SocketTransport:
    def __init__(self, path: str | os.PathLike[str] | None = None, timeout: float = 15.0) -> None:
        self.path = str(path or socket_path())
        self.timeout = timeout
        self._sock: socket.socket | None = None

    def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()
            raise DaemonNotRunning(self.path, type(exc).__name__) from None
        except OSError as exc:
            sock.close()
            raise DaemonNotRunning(self.path, str(exc)) from None
        return sock

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        if self._sock is None:
            self._sock = self._connect()
        try:
            send_frame(self._sock, message)
            response: dict[str, Any] = recv_frame(self._sock, MAX_RESPONSE_BYTES)  # Client._call checks the shape
            return response
        except TimeoutError:
            self.close()
            raise PiwatchError(f"piwatchd did not answer within {self.timeout:g} s") from None
        except (ConnectionClosed, ConnectionResetError, BrokenPipeError) as exc:
            self.close()
            raise PiwatchError(f"piwatchd closed the connection: {exc}") from None
        except ProtocolError as exc:
            self.close()
            raise PiwatchError(f"bad response from piwatchd: {exc}") from None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class Client:
    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        *,
        timeout: float = 15.0,
        transport: Transport | None = None,
        caller: dict[str, Any] | None = None,
    ) -> None:
        self._transport = transport or SocketTransport(socket_path, timeout)
        self._ids = itertools.count(1)
        self._hello: dict[str, Any] | None = None
        self.caller = caller
        self.last_warnings: list[Any] = []
        self.last_freshness: dict[str, Any] = {}

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._transport.close()

    def hello(self) -> dict[str, Any]:
        if self._hello is None:
            self._hello = self._call("hello", {"proto": PROTOCOL_VERSION, "client": f"piwatch-py/{__version__}"})
        return self._hello

    def _call(self, op: str, args: dict[str, Any], caller: dict[str, Any] | None = None) -> dict[str, Any]:
        message = {"v": PROTOCOL_VERSION, "id": next(self._ids), "op": op, "args": args}
        if caller is not None or self.caller is not None:
            message["caller"] = caller if caller is not None else self.caller
        response = self._transport.request(message)
        if not isinstance(response, dict) or "ok" not in response:
            raise PiwatchError("malformed response from piwatchd")
        self.last_warnings = response.get("warnings") or []
        self.last_freshness = response.get("freshness") or {}
        if response["ok"]:
            return cast(dict[str, Any], response.get("result"))  # every op's result is a map
        error = response.get("error") or {}
        code, text = error.get("code", ErrorCode.INTERNAL), error.get("message", "unknown error")
        if code == ErrorCode.UNSUPPORTED_PROTOCOL:
            raise ProtocolMismatch(text)
        if code == ErrorCode.NOT_FOUND:
            raise NotFound(code, text)
        if code == ErrorCode.QUERY_ERROR:
            raise QueryError(code, text)
        raise RequestFailed(code, text)

    def request(self, op: str, args: dict[str, Any] | None = None, caller: dict[str, Any] | None = None) -> dict[str, Any]:
        self.hello()
        return self._call(op, args or {}, caller)

    def status(self) -> dict[str, Any]:
        return self.request("status")

    def search(self, query: str, *, filters: dict[str, Any] | None = None, limit: int = 20, offset: int = 0,
               caller: dict[str, Any] | None = None, wait: float | None = None) -> dict[str, Any]:
        args: dict[str, Any] = {"query": query, "limit": limit, "offset": offset}
        if filters:
            args["filters"] = filters
        if wait:
            args["waitSeconds"] = wait
        return self.request("search", args, caller)

    def read(self, session_id: str, entry_id: str, *, caller: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
        return self.request("read", {"sessionId": session_id, "entryId": entry_id, **options}, caller)

    def trace(self, session_id: str, entry_id: str, *, caller: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
        return self.request("trace", {"sessionId": session_id, "entryId": entry_id, **options}, caller)

    def sessions(self, *, caller: dict[str, Any] | None = None, limit: int = 50, offset: int = 0) -> dict[str, Any]:
        return self.request("sessions", {"limit": limit, "offset": offset}, caller)

    def reindex(self, session_id: str | None = None) -> dict[str, Any]:
        return self.request("reindex", {"sessionId": session_id} if session_id else {})
