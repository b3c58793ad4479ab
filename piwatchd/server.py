"""The Unix-socket server: framing, limits, peer check, handshake, dispatch.

One accept thread; one thread per connection (idle connections cost a thread,
not a query slot); request execution bounded by a semaphore so a flood of
slow queries cannot starve ingest or the other clients. Every limit is
checked before the expensive step it protects. Handlers are plain functions
`(args, caller) -> result` that may raise `ProtocolError` for clean errors.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from piwatch.protocol import (
    MAX_REQUEST_BYTES,
    PROTOCOL_VERSION,
    ConnectionClosed,
    ErrorCode,
    FrameTooLarge,
    ProtocolError,
    recv_frame,
    send_frame,
)

__all__ = ["Server", "ServerLimits", "ensure_private_dir", "peer_uid", "Handler"]

log = logging.getLogger("piwatchd.server")

Handler = Callable[[dict, Any], Any]


class ServerLimits:
    max_connections = 256
    max_requests_per_connection = 10_000
    idle_timeout = 60.0  # seconds a connection may sit between frames
    frame_timeout = 10.0  # seconds to deliver one frame once it started
    concurrent_requests = 8
    queue_wait = 10.0  # seconds a request waits for a slot before `busy`


def ensure_private_dir(path: Path) -> None:
    """Create `path` 0700, or verify an existing one: a real directory, ours,
    with no group/other bits. An existing directory is never chmod-ed: a
    shared directory (say /tmp) must not be quietly changed or used."""
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise SystemExit(f"piwatchd: {path} is not a directory (symlink or file); refusing to use it")
    if st.st_uid != os.getuid():
        raise SystemExit(f"piwatchd: {path} is owned by uid {st.st_uid}, not {os.getuid()}; refusing to use it")
    if st.st_mode & 0o077:
        raise SystemExit(
            f"piwatchd: {path} is accessible to other users (mode {stat.S_IMODE(st.st_mode):o}); "
            "use a private directory for the socket (chmod 700, or another PIWATCH_SOCKET)"
        )


def peer_uid(conn: socket.socket) -> int | None:
    """The connecting process's uid, or None where the platform cannot say."""
    if hasattr(socket, "SO_PEERCRED"):
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[1]
    if sys.platform == "darwin":
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
        if libc.getpeereid(conn.fileno(), ctypes.byref(uid), ctypes.byref(gid)) == 0:
            return uid.value
    return None


class Server:
    def __init__(
        self,
        path: Path,
        handlers: dict[str, Handler],
        *,
        hello_info: Callable[[], dict[str, Any]],
        envelope: Callable[[str, dict, Any, Any], dict[str, Any]] | None = None,
        limits: ServerLimits | None = None,
        on_connection_end: Callable[[], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.handlers = handlers
        self.hello_info = hello_info
        self.envelope = envelope
        self.limits = limits or ServerLimits()
        # Per-connection-thread resources (the read-only SQLite connection) are
        # released here; otherwise every finished client leaves its files open.
        self.on_connection_end = on_connection_end
        self._sock: socket.socket | None = None
        self._inode: int | None = None
        self._stop = threading.Event()
        self._accept_thread: threading.Thread | None = None
        self._conn_threads: set[threading.Thread] = set()
        self._conn_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.limits.concurrent_requests)
        self.requests_served = 0

    # -- lifecycle -------------------------------------------------------------

    def bind(self) -> None:
        """Bind the socket. The caller holds the instance lock, so anything at
        the path is a stale socket of an earlier instance."""
        ensure_private_dir(self.path.parent)
        if len(os.fsencode(str(self.path))) >= 104:
            raise SystemExit(f"piwatchd: socket path {self.path} is too long for AF_UNIX; set PIWATCH_SOCKET")
        try:
            st = os.lstat(self.path)
            if stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid():
                os.unlink(self.path)
            else:
                raise SystemExit(f"piwatchd: {self.path} exists and is not our socket; refusing to replace it")
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            sock.bind(str(self.path))
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        sock.listen(128)
        sock.settimeout(0.5)  # lets the accept loop notice stop() promptly
        self._sock = sock
        self._inode = os.stat(self.path).st_ino

    def start(self) -> None:
        if self._sock is None:
            self.bind()
        self._accept_thread = threading.Thread(target=self._accept_loop, name="piwatchd-accept", daemon=True)
        self._accept_thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._accept_thread:
            self._accept_thread.join(timeout)
        if self._sock:
            self._sock.close()
        # Unlink only our own socket: a newer instance may have bound the path.
        try:
            if self._inode is not None and os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        with self._conn_lock:
            threads = list(self._conn_threads)
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def threads(self) -> list[threading.Thread]:
        with self._conn_lock:
            return [t for t in [self._accept_thread, *self._conn_threads] if t is not None]

    # -- connections -------------------------------------------------------------

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                time.sleep(0.05)
                continue
            uid = peer_uid(conn)
            if uid is not None and uid != os.getuid():
                log.warning("refused a connection from uid %s", uid)
                conn.close()
                continue
            with self._conn_lock:
                if len(self._conn_threads) >= self.limits.max_connections:
                    self._refuse(conn, ErrorCode.BUSY, "too many connections; try again")
                    continue
                t = threading.Thread(target=self._serve, args=(conn,), name="piwatchd-conn", daemon=True)
                self._conn_threads.add(t)
            t.start()

    def _refuse(self, conn: socket.socket, code: str, message: str) -> None:
        try:
            conn.settimeout(1.0)
            send_frame(conn, {"id": None, "ok": False, "error": {"code": code, "message": message}})
        except OSError:
            pass
        conn.close()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._serve_frames(conn)
        except Exception:  # never let one connection take the daemon down
            log.exception("connection handler failed")
        finally:
            conn.close()
            if self.on_connection_end is not None:
                try:
                    self.on_connection_end()
                except Exception:
                    log.exception("releasing connection resources failed")
            with self._conn_lock:
                self._conn_threads.discard(threading.current_thread())

    def _serve_frames(self, conn: socket.socket) -> None:
        greeted = False
        for _ in range(self.limits.max_requests_per_connection):
            if self._stop.is_set():
                return
            conn.settimeout(self.limits.idle_timeout)
            try:
                message = recv_frame(conn, MAX_REQUEST_BYTES)
            except (TimeoutError, ConnectionClosed, ConnectionResetError, OSError):
                return
            except FrameTooLarge as exc:
                # The body was not read, so the stream cannot be resynchronised.
                self._reply(conn, None, error=(exc.code, exc.message))
                return
            except ProtocolError as exc:
                self._reply(conn, None, error=(exc.code, exc.message))
                return
            if not isinstance(message, dict):
                self._reply(conn, None, error=(ErrorCode.BAD_REQUEST, "a request must be a map"))
                return
            req_id = message.get("id")
            if not isinstance(req_id, (int, str, type(None))):
                req_id = None
            op = message.get("op")
            if not greeted:
                if op != "hello":
                    self._reply(conn, req_id, error=(ErrorCode.HELLO_REQUIRED, "the first request must be hello"))
                    return
                greeted = self._hello(conn, req_id, message.get("args"))
                if not greeted:
                    return
                continue
            self._dispatch(conn, req_id, op, message)

    def _hello(self, conn: socket.socket, req_id: Any, args: Any) -> bool:
        proto = args.get("proto") if isinstance(args, dict) else None
        if proto != PROTOCOL_VERSION:
            self._reply(
                conn,
                req_id,
                error=(
                    ErrorCode.UNSUPPORTED_PROTOCOL,
                    f"client speaks protocol {proto!r}, piwatchd speaks {PROTOCOL_VERSION}: "
                    "upgrade the client and the daemon to the same piwatch version "
                    "(restart piwatchd after upgrading)",
                ),
            )
            return False
        self._reply(conn, req_id, result=self.hello_info())
        return True

    def _dispatch(self, conn: socket.socket, req_id: Any, op: Any, message: dict) -> None:
        handler = self.handlers.get(op) if isinstance(op, str) else None
        if handler is None:
            self._reply(conn, req_id, error=(ErrorCode.BAD_REQUEST, f"unknown op {op!r}; known: {sorted(self.handlers)}"))
            return
        args = message.get("args") or {}
        if not isinstance(args, dict):
            self._reply(conn, req_id, error=(ErrorCode.BAD_REQUEST, "args must be a map"))
            return
        if not self._slots.acquire(timeout=self.limits.queue_wait):
            self._reply(conn, req_id, error=(ErrorCode.BUSY, "piwatchd is busy; try again"))
            return
        try:
            result = handler(args, message.get("caller"))
        except ProtocolError as exc:
            self._reply(conn, req_id, error=(exc.code, exc.message), op=op, args=args, caller=message.get("caller"))
            return
        except Exception as exc:
            log.exception("op %s failed", op)
            self._reply(conn, req_id, error=(ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}"))
            return
        finally:
            self._slots.release()
        self.requests_served += 1
        self._reply(conn, req_id, result=result, op=op, args=args, caller=message.get("caller"))

    def _reply(self, conn, req_id, *, result=None, error=None, op=None, args=None, caller=None) -> None:
        response: dict[str, Any] = {"id": req_id, "ok": error is None}
        if error is None:
            response["result"] = result
        else:
            response["error"] = {"code": error[0], "message": error[1]}
        if self.envelope is not None and op is not None:
            try:
                response.update(self.envelope(op, args or {}, caller, result))
            except Exception:
                log.exception("building the response envelope failed")
        conn.settimeout(self.limits.frame_timeout)
        try:
            send_frame(conn, response)
        except (TimeoutError, OSError):
            pass
