"""The wire contract between piwatchd and its clients.

A frame is a 4-byte big-endian length followed by one msgpack map. The length
is checked against the limit before a single body byte is read, and a body is
decoded with `msgpack.unpackb`, which bounds every container by the frame's
own size, so a small frame can never announce a huge allocation.

Request:  {"v": 1, "id": int, "op": str, "args": map, "caller": map | nil}
Response: {"id": int, "ok": true, "result": any, "warnings": [..], "freshness": map}
       or {"id": int, "ok": false, "error": {"code": str, "message": str}, ...}

The shapes of `args`, `caller` and every `result` are the Structs of
`piwatch.wire` (camelCase); this module is the framing underneath.

The first frame on a connection must be `hello` with the client's protocol
version; a mismatch answers `unsupported_protocol` with what to do.

The daemon imports this module; this module never imports the daemon.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import msgpack
import msgspec

__all__ = [
    "PROTOCOL_VERSION",
    "MAX_REQUEST_BYTES",
    "MAX_RESPONSE_BYTES",
    "MAX_DEPTH",
    "ErrorCode",
    "ProtocolError",
    "FrameTooLarge",
    "ConnectionClosed",
    "encode_frame",
    "recv_frame",
    "send_frame",
    "decode_body",
    "check_depth",
]

PROTOCOL_VERSION = 1
MAX_REQUEST_BYTES = 1 << 20  # 1 MiB: a request is a query and a few ids
MAX_RESPONSE_BYTES = 32 << 20  # responses carry bounded snippets and previews
MAX_DEPTH = 16
_HEADER = struct.Struct("!I")


class ErrorCode:
    BAD_REQUEST = "bad_request"  # malformed frame, wrong types, unknown op
    UNSUPPORTED_PROTOCOL = "unsupported_protocol"
    HELLO_REQUIRED = "hello_required"
    QUERY_ERROR = "query_error"  # the query cannot be searched; message says why
    NOT_FOUND = "not_found"  # also what an unauthorized target looks like
    TIMEOUT = "timeout"
    TOO_LARGE = "too_large"
    BUSY = "busy"
    UNAVAILABLE = "unavailable"  # the index cannot be read yet (being created, missing); retry
    INTERNAL = "internal"  # a bug in piwatchd; never the answer to bad input
    SLOW_CONSUMER = "slow_consumer"  # a follow's reader fell too far behind; that follow ended


class ProtocolError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class FrameTooLarge(ProtocolError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(ErrorCode.TOO_LARGE, f"frame of {size} bytes exceeds the limit of {limit}")


class ConnectionClosed(Exception):
    """The peer closed the connection (cleanly between frames or mid-frame).
    `partial`: some bytes of the frame had arrived (a client must not retry
    silently: the peer may have acted on the request)."""

    def __init__(self, message: str, *, partial: bool = False) -> None:
        super().__init__(message)
        self.partial = partial


def encode_frame(message: Any) -> bytes:
    """Frame a message: plain values or `piwatch.wire` Structs (camelCase)."""
    body = msgspec.msgpack.encode(message)
    return _HEADER.pack(len(body)) + body


def send_frame(sock: socket.socket, message: Any) -> None:
    sock.sendall(encode_frame(message))


def _recv_exact(sock: socket.socket, n: int, *, at_boundary: bool, deadline: float | None = None) -> bytes:
    chunks = []
    remaining = n
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"frame not delivered in time ({n - remaining} of {n} bytes)")
            sock.settimeout(left)
        try:
            chunk = sock.recv(min(remaining, 1 << 20))
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            if at_boundary and remaining == n:
                raise ConnectionClosed("peer closed the connection")
            raise ConnectionClosed(f"peer closed the connection mid-frame ({n - remaining} of {n} bytes)", partial=True)
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


_CONTAINERS = (dict, list, tuple)


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Raise bad_request for a message nested deeper than `limit`. Only
    containers are stacked: a list of 50,000 strings costs one C-level pass."""
    stack = [(value, 0)] if isinstance(value, _CONTAINERS) else []
    while stack:
        item, depth = stack.pop()
        if depth >= limit:
            raise ProtocolError(ErrorCode.BAD_REQUEST, f"message nests deeper than {limit} levels")
        values = item.values() if isinstance(item, dict) else item
        if _CONTAINER_TYPES.isdisjoint(set(map(type, values))):
            continue  # scalars only (the common case): checked at C speed
        stack.extend((v, depth + 1) for v in values if isinstance(v, _CONTAINERS))


_CONTAINER_TYPES = frozenset(_CONTAINERS)


def decode_body(body: bytes) -> Any:
    try:
        value = msgpack.unpackb(body, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several types for hostile input
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"frame is not valid msgpack: {type(exc).__name__}") from None
    check_depth(value)
    return value


def recv_frame(sock: socket.socket, limit: int, *, frame_timeout: float | None = None) -> Any:
    """Read one frame; raises ConnectionClosed, FrameTooLarge or ProtocolError.

    The socket's own timeout bounds the wait for the first byte; with
    `frame_timeout`, the whole frame must then arrive within that many
    seconds (socket.timeout otherwise), so a sender trickling bytes cannot
    hold the connection open."""
    first = _recv_exact(sock, 1, at_boundary=True)
    deadline = None if frame_timeout is None else time.monotonic() + frame_timeout
    header = first + _recv_exact(sock, _HEADER.size - 1, at_boundary=False, deadline=deadline)
    (size,) = _HEADER.unpack(header)
    if size > limit:
        raise FrameTooLarge(size, limit)
    return decode_body(_recv_exact(sock, size, at_boundary=False, deadline=deadline))
