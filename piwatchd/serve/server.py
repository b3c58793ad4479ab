"""The Unix-socket server: framing, limits, peer check, handshake, dispatch.

One accept thread; one thread per connection (idle connections cost a thread,
not a query slot); request execution bounded by a semaphore so a flood of
slow queries cannot starve ingest or the other clients, shared fairly
between clients (`piwatchd.serve.slots`: a per-client share, and a smaller pool
for expensive requests). Every limit is
checked before the expensive step it protects. A frame must arrive whole
within `frame_timeout` once its first byte did (and a reader must take one
within it), and when every connection is taken the one idle longest is
closed for the newcomer, follows or not (`piwatchd.serve.connections`: who
gives way), so slow, idle or following clients can never lock the others
out. The request itself is answered by
`piwatchd.serve.api.Api.handle` (the one request path, shared with the local CLI).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from piwatch import wire
from piwatch.protocol import (
    MAX_REQUEST_BYTES,
    ConnectionClosed,
    ErrorCode,
    ProtocolError,
    recv_frame,
    send_frame,
)

from .connections import Connection, peer_pid, peer_uid, shutdown, victim, wait_for
from .follow import ConnectionFollows, FollowHub, Subscription
from .slots import FairSlots

__all__ = ["Server", "ServerLimits", "ensure_private_dir", "peer_pid", "peer_uid", "HandleFn", "HelloFn"]

log = logging.getLogger("piwatchd.server")

# Api.handle(op, args, caller, slot=..., stream=...) -> wire.Response; Api.hello(args) -> result.
HandleFn = Callable[..., Any]
HelloFn = Callable[[Any], Any]


class ServerLimits:
    max_connections = 256
    request_reserve = 32  # connections that follows never take: requests find room without ending a follow
    max_requests_per_connection = 10_000
    idle_timeout = 60.0  # seconds a connection may sit between frames
    frame_timeout = 10.0  # seconds to deliver one whole frame once its first byte arrived, or to take one
    concurrent_requests = 8
    per_client_requests = 4  # of those, at most this many for one client (peer process)
    heavy_requests = 2  # expensive requests (deep pages, grouping) run at most this many at once
    heavy_per_client = 1
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


class Server:
    def __init__(
        self,
        path: Path,
        handle: HandleFn,
        *,
        hello: HelloFn,
        limits: ServerLimits | None = None,
        on_connection_end: Callable[[], None] | None = None,
        follows: FollowHub | None = None,
    ) -> None:
        self.path = Path(path)
        # Standing queries: the hub evaluates them; a follow is a request like any other (`Streams`).
        self.follows = follows
        self.handle = handle
        self.hello = hello
        self.limits = limits or ServerLimits()
        # Per-connection-thread resources (the read-only SQLite connection) are
        # released here; otherwise every finished client leaves its files open
        # (and every waiting follow connection its reader's caches).
        self.on_connection_end = on_connection_end
        self._sock: socket.socket | None = None
        self._inode: int | None = None
        self._stop = threading.Event()
        self._accept_thread: threading.Thread | None = None
        self._conns: dict[threading.Thread, Connection] = {}
        self._conn_lock = threading.Lock()
        lim = self.limits
        self._slots = FairSlots(
            lim.concurrent_requests, lim.per_client_requests, lim.heavy_requests, lim.heavy_per_client
        )
        self.requests_served = 0

    def requests_idle(self, timeout: float) -> bool:
        """Wait until no request runs, at most `timeout` seconds (standing queries give way)."""
        return self._slots.wait_idle(timeout)

    # -- lifecycle -------------------------------------------------------------

    def bind(self) -> None:
        """Bind the socket. The caller holds the instance lock, so anything at
        the path is a stale socket of an earlier instance (or our own, on a
        rebind). The socket is bound and listening under a temporary name
        first, then renamed over the path: a client never finds the path
        missing or bound but not yet listening (a SIGHUP's rebind refused
        connections in that window)."""
        ensure_private_dir(self.path.parent)
        staged = self.path.with_name(self.path.name + "~")
        if len(os.fsencode(str(staged))) >= 104:
            raise SystemExit(f"piwatchd: socket path {self.path} is too long for AF_UNIX; set PIWATCH_SOCKET")
        for path in (self.path, staged):
            _refuse_foreign(path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)  # an earlier instance's, stopped between its bind and rename
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            sock.bind(str(staged))
        finally:
            os.umask(old_umask)
        os.chmod(staged, 0o600)
        sock.listen(1024)  # a burst of connections waits here, not in EAGAIN
        sock.settimeout(0.5)  # lets the accept loop notice stop() promptly
        os.replace(staged, self.path)
        self._sock = sock
        self._inode = os.stat(self.path).st_ino

    def is_bound(self) -> bool:
        """Our socket file is still at the path (not removed, not replaced)."""
        try:
            return self._inode is not None and os.stat(self.path).st_ino == self._inode
        except OSError:
            return False

    def rebind(self) -> None:
        """Bind the path again (the socket file was removed, or SIGHUP); the
        accept loop picks up the new listening socket, the old one is closed."""
        old = self._sock
        self.bind()
        if old is not None:
            self._drain(old)
            old.close()

    def _drain(self, old: socket.socket) -> None:
        """Admit the connections still queued on a replaced socket: closing
        it with them in its backlog would reset clients that had connected."""
        old.setblocking(False)
        while True:
            try:
                conn, _ = old.accept()
            except OSError:  # BlockingIOError: the backlog is empty
                return
            conn.setblocking(True)
            self._admit(conn)

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
            conns = list(self._conns.values())
        for c in conns:
            if c.follows is not None:
                self._end_follows(c)  # its pusher says why, then closes it
            elif not c.in_request:
                shutdown(c.sock)  # wake threads blocked in recv
        deadline = time.monotonic() + timeout
        for c in conns:
            if c.thread is not None:
                c.thread.join(max(0.0, deadline - time.monotonic()))

    def threads(self) -> list[threading.Thread]:
        with self._conn_lock:
            return [t for t in [self._accept_thread, *self._conns] if t is not None]

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
            self._admit(conn)

    def _admit(self, conn: socket.socket) -> None:
        """Serve an accepted connection on its own thread, or refuse it."""
        uid = peer_uid(conn)
        if uid is not None and uid != os.getuid():
            log.warning("refused a connection from uid %s", uid)
            conn.close()
            return
        with self._conn_lock:
            if len(self._conns) >= self.limits.max_connections:
                idlest = victim(self._conns.values())
                if idlest is None:  # every connection is in a request: soon one is not
                    self._refuse(conn, ErrorCode.BUSY, "too many connections; try again")
                    return
                self._evict(idlest, f"all {self.limits.max_connections} connections were taken")
            entry = Connection(conn, self.limits.frame_timeout)
            t = threading.Thread(target=self._serve, args=(entry,), name="piwatchd-conn", daemon=True)
            entry.thread = t
            self._conns[t] = entry
        t.start()

    def _evict(self, entry: Connection, reason: str) -> None:
        """Close `entry` to make room; its follows are told `reason` first. Holds _conn_lock."""
        if entry.thread is not None:
            self._conns.pop(entry.thread, None)
        if entry.following() and entry.follows is not None and self.follows is not None:
            why = f"piwatchd closed its connection for another client ({reason})"
            self.follows.end_connection(entry.follows, ErrorCode.BUSY, _ended(why))
        else:
            shutdown(entry.sock)

    def _follow_room(self, entry: Connection) -> None:
        """Before a connection's first follow: follows may hold all connections
        but `request_reserve`; past that, the idlest other follow connection gives
        way (`busy` when every one is in a request). Holds _conn_lock."""
        lim = self.limits
        cap = max(1, lim.max_connections - lim.request_reserve)
        holders = [c for c in self._conns.values() if c is not entry and c.following()]
        if len(holders) < cap:
            return
        idlest = victim(holders)
        if idlest is None:
            raise ProtocolError(ErrorCode.BUSY, f"{cap} connections hold follows, the most piwatchd allows; try again")
        self._evict(idlest, f"{cap} connections held follows, the most it allows")

    def _refuse(self, conn: socket.socket, code: str, message: str) -> None:
        try:
            conn.settimeout(1.0)
            send_frame(conn, {"id": None, "ok": False, "error": {"code": code, "message": message}})
        except OSError:
            pass
        conn.close()

    def _serve(self, entry: Connection) -> None:
        conn = entry.sock
        try:
            self._serve_frames(entry)
        except Exception:  # never let one connection take the daemon down
            log.exception("connection handler failed")
        finally:
            if entry.follows is not None:
                self._end_follows(entry)
                entry.follows.join(self.limits.frame_timeout)  # its last words (a stop's) before the close
            with entry.send_lock:
                conn.close()
            self._release_thread()
            with self._conn_lock:
                self._conns.pop(threading.current_thread(), None)

    def _serve_frames(self, entry: Connection) -> None:
        conn = entry.sock
        greeted = False
        for _ in range(self.limits.max_requests_per_connection):
            if self._stop.is_set():
                return
            if entry.following() and not self._await_frame(entry):
                return
            conn.settimeout(self.limits.idle_timeout)
            try:
                message = recv_frame(conn, MAX_REQUEST_BYTES, frame_timeout=self.limits.frame_timeout)
            except (TimeoutError, ConnectionClosed, ConnectionResetError, OSError):
                return
            except ProtocolError as exc:
                # Too large or undecodable: the stream cannot be resynchronised.
                entry.send({"id": None, "ok": False, "error": {"code": exc.code, "message": exc.message}})
                return
            entry.last_active = time.monotonic()
            if not isinstance(message, dict):
                entry.send(_error(None, ErrorCode.BAD_REQUEST, "a request must be a map"))
                return
            req_id = message.get("id")
            if isinstance(req_id, bool) or not isinstance(req_id, (int, str, type(None))):
                req_id = None
            op = message.get("op")
            if not greeted:
                if op != "hello":
                    entry.send(_error(req_id, ErrorCode.HELLO_REQUIRED, "the first request must be hello"))
                    return
                greeted = self._hello(entry, req_id, message.get("args"))
                if not greeted:
                    return
                continue
            if op == "hello":
                # A client may re-check the version at any time (say, after it
                # reconnected); a mismatch mid-connection ends it, as at the start.
                if not self._hello(entry, req_id, message.get("args")):
                    return
                continue
            entry.in_request = True
            try:
                response = self._dispatch(req_id, op, message, entry)
            finally:
                entry.in_request = False
                entry.last_active = time.monotonic()
            entry.send(response)

    def _hello(self, entry: Connection, req_id: Any, args: Any) -> bool:
        try:
            result = self.hello(args)
        except ProtocolError as exc:
            entry.send(_error(req_id, exc.code, exc.message))
            return False
        entry.send({"id": req_id, "ok": True, "result": result})
        return True

    def _slot_for(self, client: object) -> Callable[..., Any]:
        @contextmanager
        def slot(deadline: float, heavy: bool = False) -> Iterator[None]:
            """One of the request slots `client` may take (a heavy one for an
            expensive request), waited for at most until `deadline`."""
            wait = min(self.limits.queue_wait, deadline - time.monotonic())
            if wait <= 0 or not self._slots.acquire(client, heavy, wait):
                raise ProtocolError(ErrorCode.BUSY, "piwatchd is busy; try again")
            try:
                yield
            finally:
                self._slots.release(client, heavy)

        return slot

    def _dispatch(self, req_id: Any, op: Any, message: dict[str, Any], entry: Connection) -> Any:
        args = message.get("args")
        stream = None if self.follows is None else _Streams(self, entry, req_id)
        try:
            response = self.handle(
                op,
                {} if args is None else args,
                message.get("caller"),
                slot=self._slot_for(entry.client),
                stream=stream,
            )
        except Exception as exc:
            log.exception("op %s failed", op if isinstance(op, str) else "?")
            return _error(req_id, ErrorCode.INTERNAL, f"{type(exc).__name__}: {str(exc)[:200]}")
        response.id = req_id
        self.requests_served += 1
        return response

    # -- follow ------------------------------------------------------------------------

    def _end_follows(self, entry: Connection) -> None:
        """The connection's follows are over: told why when the server stops
        (whichever of stop() and the connection's own thread comes first),
        quietly when the connection ended."""
        if entry.follows is None or self.follows is None:
            return
        if self._stop.is_set():
            self.follows.end_connection(entry.follows, ErrorCode.UNAVAILABLE, _ended("piwatchd is stopping"))
        else:
            self.follows.end_connection(entry.follows)

    def _release_thread(self) -> None:
        if self.on_connection_end is not None:
            try:
                self.on_connection_end()
            except Exception:
                log.exception("releasing connection resources failed")

    def _await_frame(self, entry: Connection) -> bool:
        """With follows open, a connection may stay quiet for as long as it likes
        (no idle timeout): wait until it sends, closes, or the server stops. Its
        thread's reader is released meanwhile: 100 waiting follow connections
        held ~12 MB of SQLite caches, reopened only by a request of their own."""
        self._release_thread()
        while not self._stop.is_set():
            if wait_for(entry.sock, False, 1.0) or not entry.following():
                return True
        return False

    def _subscribe(self, entry: Connection, request_id: Any, args: wire.FollowArgs, scope: Any) -> int:
        """A follow on `entry`, its updates sent with `request_id` (`Streams.follow`)."""
        assert self.follows is not None
        with self._conn_lock:
            if not entry.following():
                self._follow_room(entry)
            if entry.follows is None:
                entry.follows = ConnectionFollows(entry)
            return self.follows.subscribe(entry.follows, request_id, args, scope).id

    def _unsubscribe(self, entry: Connection, subscription: int) -> bool:
        return (
            entry.follows is not None
            and self.follows is not None
            and self.follows.unsubscribe(entry.follows, subscription)
        )


class _Streams:
    """A connection's standing queries as one request sees them (`ops.request.Streams`)."""

    def __init__(self, server: Server, entry: Connection, request_id: Any) -> None:
        self._server, self._entry, self._request_id = server, entry, request_id

    def follow(self, args: wire.FollowArgs, scope: Any) -> int:
        return self._server._subscribe(self._entry, self._request_id, args, scope)

    def unfollow(self, subscription: int) -> bool:
        return self._server._unsubscribe(self._entry, subscription)


def _error(req_id: Any, code: str, message: str) -> dict[str, Any]:
    return {"id": req_id, "ok": False, "error": {"code": code, "message": message}}


def _ended(why: str) -> Callable[[Subscription], str]:
    """What a follow ended by the server is told."""
    return lambda sub: f"follow {sub.id} ended: {why}; follow again"


def _refuse_foreign(path: Path) -> None:
    """Nothing may be at `path` but a socket of ours (left by an earlier
    instance, or the one this instance is replacing): exit on anything else."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not (stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid()):
        raise SystemExit(f"piwatchd: {path} exists and is not our socket; refusing to replace it")
