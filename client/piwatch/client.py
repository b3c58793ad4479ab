"""A small, synchronous client for piwatchd.

    from piwatch import Client
    with Client(caller={"cwd": "/work/proj"}) as c:
        hits = c.search("flaky websocket").hits

The transport is a seam (as in httpx): `SocketTransport` talks to the daemon,
`LocalTransport(db)` runs the same api on an index file in-process, and tests
can pass any `Transport` (`greeting`, `request(message) -> response`,
`open_stream()` for a follow, `close()`). The
client owns the handshake, request ids and error mapping; results are the
typed Structs of `piwatch.wire` (which also read like dicts by wire name).
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Callable, Iterator
from typing import Any, Literal

import msgspec

from . import __version__, wire
from .protocol import (
    MAX_RESPONSE_BYTES,
    PROTOCOL_VERSION,
    ConnectionClosed,
    ErrorCode,
    ProtocolError,
    recv_frame,
    send_frame,
)
from .transports import DaemonNotRunning, LocalTransport, PiwatchError, SocketTransport, Transport
from .wire.problems import plain_problem

__all__ = [
    "Client",
    "Follow",
    "Transport",
    "SocketTransport",
    "LocalTransport",
    "PiwatchError",
    "DaemonNotRunning",
    "ProtocolMismatch",
    "RequestFailed",
    "NotFound",
    "QueryError",
]

# The local operator's view, used by status and reindex when no caller is set.
ALL: dict[str, Any] = {"all": True}


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
        # Every new connection (the daemon closes idle and used-up ones) starts with this hello.
        self._transport.greeting = {"v": PROTOCOL_VERSION, "id": 0, "op": "hello", "args": self._hello_args()}
        self._ids = itertools.count(1)
        self._hello: wire.HelloResult | None = None
        self.caller = caller
        self.last_warnings: list[wire.Notice] = []
        self.last_freshness: wire.Freshness = wire.Freshness()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._transport.close()

    @staticmethod
    def _hello_args() -> dict[str, Any]:
        return {"proto": PROTOCOL_VERSION, "client": f"piwatch-py/{__version__}"}

    def hello(self) -> wire.HelloResult:
        if self._hello is None:
            self._hello = self._call("hello", self._hello_args())
        return self._hello

    def _call(self, op: str, args: Any, caller: dict[str, Any] | None = None) -> Any:
        message: dict[str, Any] = {
            "v": PROTOCOL_VERSION,
            "id": next(self._ids),
            "op": op,
            "args": wire.to_builtins(args),
        }
        if caller is not None or self.caller is not None:
            message["caller"] = caller if caller is not None else self.caller
        raw = self._transport.request(message)
        try:
            response = msgspec.convert(raw, wire.Response)
        except msgspec.ValidationError as exc:
            raise PiwatchError(f"malformed response from piwatchd: {exc}") from None
        self.last_warnings = response.warnings
        self.last_freshness = response.freshness or wire.Freshness()
        if response.ok:
            try:
                return wire.decode_result(op, response.result)
            except msgspec.ValidationError as exc:
                raise PiwatchError(f"piwatchd answered {op} with an unexpected shape: {exc}") from None
        error = response.error or wire.ErrorBody(code=ErrorCode.INTERNAL, message="unknown error")
        if error.code == ErrorCode.UNSUPPORTED_PROTOCOL:
            raise ProtocolMismatch(error.message)
        if error.code == ErrorCode.NOT_FOUND:
            raise NotFound(error.code, error.message)
        if error.code == ErrorCode.QUERY_ERROR:
            raise QueryError(error.code, error.message)
        raise RequestFailed(error.code, error.message)

    def request(self, op: str, args: Any = None, caller: dict[str, Any] | None = None) -> Any:
        """Any op with args as a map or the op's `wire` Struct; the typed result."""
        self.hello()
        return self._call(op, args or {}, caller)

    def status(self, *, caller: dict[str, Any] | None = None) -> wire.StatusResult:
        result: wire.StatusResult = self.request("status", {}, caller or (None if self.caller else ALL))
        return result

    def search(
        self,
        query: str,
        *,
        filters: dict[str, Any] | None = None,
        limit: int = 20,
        offset: int = 0,
        caller: dict[str, Any] | None = None,
        wait: float | None = None,
        include_own_results: bool = False,
        exact: bool = False,
        group: Literal["event", "session"] = "event",
    ) -> wire.SearchResult:
        try:
            typed = msgspec.convert(filters or {}, wire.SearchFilters)
        except msgspec.ValidationError as exc:
            raise RequestFailed(ErrorCode.BAD_REQUEST, f"bad filters: {wire.clip(plain_problem(str(exc)))}") from None
        args = wire.SearchArgs(
            query=query,
            filters=typed,
            limit=limit,
            offset=offset,
            wait_seconds=wait or None,
            include_own_results=include_own_results,
            exact=exact,
            group=group,
        )
        result: wire.SearchResult = self.request("search", args, caller)
        return result

    def follow(
        self,
        query: str,
        *,
        filters: dict[str, Any] | None = None,
        caller: dict[str, Any] | None = None,
        exact: bool = True,
        include_own_results: bool = False,
    ) -> Follow:
        """A standing query: iterate it for each new hit as its event is committed
        (blocks between hits, like `tail -f`); close it (or leave its `with`) to stop.
        Runs on a connection of its own; needs piwatchd (an index file does not change)."""
        try:
            typed = msgspec.convert(filters or {}, wire.SearchFilters)
        except msgspec.ValidationError as exc:
            raise RequestFailed(ErrorCode.BAD_REQUEST, f"bad filters: {wire.clip(plain_problem(str(exc)))}") from None
        args = wire.FollowArgs(query=query, filters=typed, exact=exact, include_own_results=include_own_results)
        sock, greeting = self._transport.open_stream()
        message: dict[str, Any] = {"v": PROTOCOL_VERSION, "id": next(self._ids), "op": "follow"}
        message["args"] = wire.to_builtins(args)
        if caller is not None or self.caller is not None:
            message["caller"] = caller if caller is not None else self.caller
        try:
            send_frame(sock, message)
            first = self._stream_frame(sock)
        except _StreamEnded as exc:
            sock.close()
            raise PiwatchError(f"piwatchd ended the follow: {exc}") from None
        except BaseException:
            sock.close()
            raise
        result = msgspec.convert(first.result, wire.FollowResult)
        pid = greeting.get("pid")
        return Follow(sock, result, self._stream_frame, lambda exc: self._silent_end(result.subscription, pid, exc))

    def _silent_end(self, subscription: int, pid: object, exc: Exception) -> PiwatchError:
        """What ended a follow whose connection closed with no frame saying why.
        piwatchd says why whenever its reader's socket has room; when the same
        piwatchd still answers, the reader left so much unread that it had none
        (or an update stuck part-way): dropped as too slow. Otherwise piwatchd ended."""
        try:
            probe, greeting = self._transport.open_stream()
            probe.close()
        except PiwatchError:
            greeting = {}
        if pid is not None and greeting.get("pid") == pid:
            return RequestFailed(
                ErrorCode.SLOW_CONSUMER,
                f"follow {subscription} dropped: too slow: piwatchd closed it with updates still unread",
            )
        now = "another piwatchd answers now" if greeting else "it is not running now"
        return PiwatchError(f"piwatchd ended the follow ({exc}): {now}")

    def _stream_frame(self, sock: socket.socket) -> wire.Response:
        """One frame of a stream as a Response; an error frame raises as `_call` would."""
        try:
            raw = recv_frame(sock, MAX_RESPONSE_BYTES)
            response = msgspec.convert(raw, wire.Response)
        except TimeoutError:
            raise  # the caller's wait is over; the stream itself is fine
        except (ConnectionClosed, OSError) as exc:
            raise _StreamEnded(str(exc)) from None
        except (ProtocolError, msgspec.ValidationError) as exc:
            raise PiwatchError(f"bad frame from piwatchd: {exc}") from None
        if not response.ok:
            error = response.error or wire.ErrorBody(code=ErrorCode.INTERNAL, message="unknown error")
            cls = QueryError if error.code == ErrorCode.QUERY_ERROR else RequestFailed
            raise cls(error.code, error.message)
        return response

    def read(
        self, session_id: str, entry_id: str, *, caller: dict[str, Any] | None = None, **options: Any
    ) -> wire.ReadResult:
        result: wire.ReadResult = self.request(
            "read", {"sessionId": session_id, "entryId": entry_id, **options}, caller
        )
        return result

    def trace(self, session_id: str, entry_id: str, *, caller: dict[str, Any] | None = None) -> wire.TraceResult:
        result: wire.TraceResult = self.request(
            "trace", wire.TraceArgs(session_id=session_id, entry_id=entry_id), caller
        )
        return result

    def sessions(
        self,
        query: str | None = None,
        *,
        caller: dict[str, Any] | None = None,
        limit: int = 50,
        offset: int = 0,
        **scope: Any,
    ) -> wire.SessionsResult:
        """Visible sessions, newest first; with `query`, those holding one of its
        best hits; `scope`: cwd, cwd_under, since_ms, until_ms (as search's filters)."""
        try:
            args = wire.SessionsArgs(limit=limit, offset=offset, query=query, **scope)
        except TypeError as exc:
            raise RequestFailed(ErrorCode.BAD_REQUEST, f"bad sessions scope: {exc}") from None
        result: wire.SessionsResult = self.request("sessions", args, caller)
        return result

    def reindex(self, session_id: str | None = None, *, caller: dict[str, Any] | None = None) -> wire.ReindexResult:
        result: wire.ReindexResult = self.request(
            "reindex", wire.ReindexArgs(session_id=session_id), caller or (None if self.caller else ALL)
        )
        return result


class _StreamEnded(Exception):
    """A stream's connection closed with no frame saying why."""


class Follow:
    """A running follow: iterate for hits (`updates()` for whole updates with a
    timeout); `close()` ends it. A follow piwatchd ends raises RequestFailed:
    `slow_consumer` for a reader that fell too far behind or took nothing for
    its frame timeout (also when piwatchd closed it without a word and still
    runs), `busy` when its connection was closed for another client,
    `unavailable` when piwatchd stopped."""

    def __init__(
        self,
        sock: socket.socket,
        result: wire.FollowResult,
        read: Callable[[socket.socket], wire.Response],
        silent_end: Callable[[Exception], PiwatchError],
    ) -> None:
        self._sock = sock
        self._read = read
        self._silent_end = silent_end
        self._closed = False
        self.subscription = result.subscription
        self.max_queued_hits = result.max_queued_hits

    def __enter__(self) -> Follow:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[wire.Hit]:
        for update in self.updates():
            yield from update.hits

    def updates(self, timeout: float | None = None) -> Iterator[wire.FollowUpdate]:
        """Each pushed update; with `timeout`, stops after that long without one."""
        while not self._closed:
            try:
                self._sock.settimeout(timeout)
                response = self._read(self._sock)
            except TimeoutError:
                return
            except (_StreamEnded, OSError) as exc:
                if self._closed:
                    return  # closed here, maybe by another thread: not piwatchd's doing
                raise self._silent_end(exc) from None
            yield msgspec.convert(response.result, wire.FollowUpdate)

    def close(self) -> None:
        self._closed = True
        self._sock.close()
