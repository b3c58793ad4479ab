"""Where `piwatch tui` gets its answers: piwatchd over its socket, or the
index file read-only in-process (`LocalTransport`, as the CLI falls back)
when piwatchd is not running: at start, or when it stops mid-session (the
next call that finds no daemon moves every connection to the index file and
is answered from it). While on the file because piwatchd went away, the
status poll tries the socket again and moves back once piwatchd answers.
And the footer line that says which it is, and the line of an entry in its
session file (for the editor).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .client import Client, DaemonNotRunning, Follow, LocalTransport, PiwatchError
from .rates import format_duration, format_rate, time_left

__all__ = ["Backend", "line_of", "status_line"]

T = TypeVar("T")


class Backend:
    """Searches have a connection of their own, so a keystroke's search never
    waits behind a preview's read or the status poll; calls on one connection
    are serialized. The index file read in-process is one connection for
    everything."""

    def __init__(self, socket: str | None = None, db: str | None = None) -> None:
        self._lock = threading.Lock()
        self._swap = threading.Lock()  # one move between the daemon and the file at a time
        self.socket = socket
        self.read_only = False
        self.down_reason: str | None = None  # why the daemon's place was taken by the file
        self.client = Client(transport=LocalTransport(db)) if db else Client(socket)
        self._searches = (self.client, self._lock)
        if db:
            self.read_only = True
            return
        try:
            self.client.hello()
        except DaemonNotRunning as exc:
            self._fall_back(str(exc))
        else:
            self._searches = (Client(socket), threading.Lock())

    def call(self, op: str, args: dict[str, Any], caller: dict[str, Any]) -> Any:
        return self._on_client(op == "search", lambda client: client.request(op, args, caller))

    def status(self) -> Any:
        return self._on_client(False, lambda client: client.status())

    def _on_client(self, search: bool, work: Callable[[Client], T]) -> T:
        """`work` on the searches' or the others' connection; if piwatchd has
        gone, once more on the index file."""
        for attempt in (1, 2):
            client, lock = self._searches if search else (self.client, self._lock)
            try:
                with lock:
                    return work(client)
            except DaemonNotRunning as exc:
                if attempt == 2:
                    raise
                self._fall_back(str(exc))
        raise AssertionError("unreachable")

    def _fall_back(self, reason: str) -> None:
        """Answer from the index file from now on (PiwatchError: there is none)."""
        from .commands._common import _db_path

        with self._swap:
            if self.read_only:
                return  # another thread's call moved first
            local = Client(transport=LocalTransport(_db_path(None)))
            old = {self.client, self._searches[0]}
            with self._lock:
                self.client, self._searches = local, (local, self._lock)
                self.read_only, self.down_reason = True, reason
            for client in old:
                client.close()

    def reconnect(self) -> bool:
        """After a fall back, move back to piwatchd if it answers again (whether it did)."""
        if self.down_reason is None:
            return False  # on the daemon already, or on a file the user named
        fresh = Client(self.socket)
        try:
            fresh.hello()
        except PiwatchError:
            fresh.close()
            return False
        with self._swap, self._lock:
            local, self.client = self.client, fresh
            self._searches = (Client(self.socket), threading.Lock())
            self.read_only, self.down_reason = False, None
            local.close()
        return True

    def follow(self, query: str, filters: dict[str, Any], caller: dict[str, Any]) -> Follow:
        """A standing query on a connection of its own (never serialized with the searches)."""
        if self.read_only:
            raise PiwatchError("pinning a query needs piwatchd running (an index file never changes)")
        return Client(self.socket).follow(query, filters=filters, caller=caller)

    def close(self) -> None:
        self.client.close()
        if self._searches[0] is not self.client:
            self._searches[0].close()


def status_line(backend: Backend, st: Any) -> str:
    """The footer: daemon down, catch-up progress with rate and time left, or idle."""
    if backend.read_only:
        why = "piwatchd is not running" if backend.down_reason else "reading an index file"
        return f"{why}: answers from the index file, read-only (may lag)"
    svc = st.service
    backlog = max(st.bytes.backlog if st.bytes is not None else 0, (svc.backlog_bytes or 0) if svc else 0)
    if st.catch_up is not None or backlog > 0:
        rate = svc.rate_bytes_per_s if svc else None
        files = f"{st.catch_up.files_done} of {st.catch_up.files_total} files, " if st.catch_up else ""
        return f"indexing: {files}{format_rate(rate)}, {format_duration(time_left(backlog, rate))} left"
    return f"piwatchd: {st.sessions} sessions, {st.events} events indexed"


def line_of(path: str, byte_offset: int) -> int:
    """The 1-based line at `byte_offset` of `path` (counted in 1 MiB reads)."""
    line, left = 1, byte_offset
    try:
        with open(path, "rb") as fh:
            while left > 0:
                chunk = fh.read(min(left, 1 << 20))
                if not chunk:
                    break
                line += chunk.count(b"\n")
                left -= len(chunk)
    except OSError:
        pass
    return line
