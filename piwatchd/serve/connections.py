"""A connection as the server keeps it: whose request slots it uses, how
frames reach its reader, and who gives way when every connection is taken.

Connections are capped (`ServerLimits.max_connections`). When a newcomer
finds them all taken, the connection that waited longest with no request in
flight is closed for it: one without follows first (its client just
reconnects), else one holding follows (they end with a `busy` error saying
why, and must be opened again). Connections holding follows may take at most
`max_connections - request_reserve` of them, so requests always find room
without ending anyone's follow; a connection's first follow beyond that
ends the idlest other follow connection's. "Idle" for a follow connection is
the time since it last sent a frame or took an update.

A reader that takes nothing (`room` waits the write timeout for the kernel
to accept another frame) is told so while its socket buffer still has room
for a few small frames (`hang_up` never waits), then closed.
"""

from __future__ import annotations

import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any

from piwatch.protocol import encode_frame, send_frame

from .follow import ConnectionFollows

__all__ = ["Connection", "peer_pid", "peer_uid", "shutdown", "victim", "wait_for"]


def peer_pid(conn: socket.socket) -> int | None:
    """The connecting process's pid (Linux), or None where the platform cannot say."""
    if hasattr(socket, "SO_PEERCRED"):
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return int(struct.unpack("3i", creds)[0])
    return None


def peer_uid(conn: socket.socket) -> int | None:
    """The connecting process's uid, or None where the platform cannot say."""
    if hasattr(socket, "SO_PEERCRED"):
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return int(struct.unpack("3i", creds)[1])
    if sys.platform == "darwin":
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
        if libc.getpeereid(conn.fileno(), ctypes.byref(uid), ctypes.byref(gid)) == 0:
            return uid.value
    return None


def shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def wait_for(sock: socket.socket, writable: bool, timeout: float) -> bool:
    """Whether `sock` became readable (or writable) within `timeout` seconds; a
    closed or failed socket counts as ready (the next read or write says how).
    poll, not select: a daemon with many files may hold descriptors above 1023."""
    try:
        if not hasattr(select, "poll"):
            ready = select.select([] if writable else [sock], [sock] if writable else [], [], timeout)
            return bool(ready[0] or ready[1])
        poller = select.poll()
        poller.register(sock, select.POLLOUT if writable else select.POLLIN)
        return bool(poller.poll(timeout * 1000))
    except (OSError, ValueError):
        return True


class Connection:
    """One connection's bookkeeping, and the way its follows' pusher reaches
    its reader (`follow.Outlet`: `room`, `send`, `hang_up`)."""

    __slots__ = ("client", "follows", "in_request", "last_active", "send_lock", "sock", "thread", "write_timeout")

    def __init__(self, sock: socket.socket, write_timeout: float) -> None:
        self.sock = sock
        self.write_timeout = write_timeout
        # Whose request slots this connection uses: its peer process (so many connections
        # of one client share one client's quota), or the connection itself where unknown.
        pid = peer_pid(sock)
        self.client: object = ("pid", pid) if pid is not None else ("conn", id(self))
        self.thread: threading.Thread | None = None
        self.last_active = time.monotonic()
        self.in_request = False
        self.send_lock = threading.Lock()  # replies and pushed follow updates never interleave
        self.follows: ConnectionFollows | None = None

    def following(self) -> bool:
        return self.follows is not None and bool(self.follows.subs)

    def room(self) -> bool:
        """Whether the reader took enough for another frame within the write timeout."""
        return wait_for(self.sock, True, self.write_timeout)

    def send(self, frame: Any) -> bool:
        """Send one frame (a reply, or a pushed follow update); False when the connection is gone."""
        with self.send_lock:
            try:
                self.sock.settimeout(self.write_timeout)
                send_frame(self.sock, frame)
            except (TimeoutError, OSError):
                shutdown(self.sock)  # a reader that cannot take a frame in time is gone
                return False
        self.last_active = time.monotonic()
        return True

    def hang_up(self, frames: list[Any]) -> None:
        """Send what of `frames` the socket takes at once, never waiting (a
        stuck reader's buffer keeps room for a few small frames), then close:
        the reader gets them before the end of the stream."""
        with self.send_lock:
            try:
                self.sock.settimeout(0.0)
                for frame in frames:
                    data = encode_frame(frame)
                    if self.sock.send(data) < len(data):
                        break  # part of a frame: nothing can follow it
            except OSError:  # no room at all (BlockingIOError), or the reader is gone
                pass
            shutdown(self.sock)


def victim(conns: Iterable[Connection]) -> Connection | None:
    """Who gives way when every connection is taken: of those with no request
    in flight, one without follows before one with follows, each the longest
    idle first; None when every connection is in a request."""
    return min((c for c in conns if not c.in_request), key=lambda c: (c.following(), c.last_active), default=None)
