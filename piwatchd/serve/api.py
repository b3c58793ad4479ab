"""The one request path: every operation, for the socket and the local CLI alike.

`Api.handle(op, args, caller)` validates the args against the wire contract
(`piwatch.wire`), resolves the caller's scope, computes the request's
`Visibility` once, makes the session ids it names whole (a unique prefix
names a session, as in git), dispatches to `cmd_<op>` (each a typed operation of
`piwatchd.serve.ops`: `wire.<Op>Args` in, `wire.<Op>Result` out) and builds the
envelope (freshness and warnings) from that same visibility, all inside one
time budget. The ops are the wire contract's (`wire.OPS`), registered once;
`hello` answers with them as capabilities. `follow` and `unfollow` take the
same path, with the streams of the connection they came on (`Streams`; none
on an index file alone: `hello` leaves them out). The socket server and
`piwatch.transports.LocalTransport` both call it, so the daemon-less CLI
answers with the same authorization as the daemon.

A hidden session or event gets exactly the error a missing one gets.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from piwatch import wire
from piwatch.protocol import PROTOCOL_VERSION, ErrorCode, ProtocolError

from ..ingest.commits import CommitSignal
from ..source.discovery import in_layout
from ..store.indexfile import file_identity
from ..store.schema import SchemaMismatch, open_reader
from ..text.engine import Analyzes, engine_of
from .auth import CallerScope, ScopeError, resolve_scope
from .ops.follow import NewWords, QueryWords, events_after, follow, follow_hits, newest_event, unfollow
from .ops.read import read
from .ops.reindex import reindex
from .ops.request import OpRequest, Slot, Streams, file_progress, no_slot, resolved
from .ops.search import search
from .ops.sessions import sessions
from .ops.status import ServiceSnapshot, caller_backlog, catch_up_warnings, status, unready_status
from .ops.trace import trace
from .shown import Shown
from .visibility import Visibility

__all__ = ["REQUEST_BUDGET", "Api", "Live", "ReaderPool"]

REQUEST_BUDGET = 10.0  # seconds for one request: waiting, ranking, snippets and the envelope
FRESHNESS_SESSIONS = 50  # at most this many sessions' freshness per response


class ReaderPool:
    """One read-only connection per request thread, opened lazily."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._local = threading.local()

    def get(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        identity = file_identity(self.db_path)
        if conn is not None and identity != getattr(self._local, "identity", None):
            # The index was rebuilt (a new file at the path): a long-lived
            # connection must not keep reading the discarded one.
            self.reset()
            conn = None
        if conn is None:
            conn = open_reader(self.db_path)
            self._local.conn = conn
            self._local.identity = identity
        return conn

    def reset(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


@dataclass(frozen=True, slots=True)
class Live:
    """What a running piwatchd gives its api; an api on an index file alone
    (`LocalTransport`) has none of it: nothing changes under it."""

    service_snapshot: ServiceSnapshot | None = None
    mark_dirty: Callable[[str], None] | None = None
    request_reindex: Callable[[str | None], None] | None = None
    hello_info: Callable[[], Mapping[str, object]] | None = None
    commits: CommitSignal | None = None
    # Told when a query finds the index file damaged: the ingest thread verifies and rebuilds it.
    index_trouble: Callable[[str], None] | None = None
    # A socket server gives each request its connection's streams (follow, unfollow).
    streams: bool = False


class Api:
    """The dispatcher: `cmd_<op>` for each op of the wire contract."""

    def __init__(
        self,
        db_path: Path,
        *,
        configured_roots: tuple[str, ...] = (),
        session_roots: tuple[str, ...] = (),
        live: Live = Live(),
        query_timeout: float = 5.0,
        request_budget: float = REQUEST_BUDGET,
    ) -> None:
        self.readers = ReaderPool(db_path)
        self.db_path = db_path
        self.configured_roots = configured_roots
        self.session_roots = session_roots
        self.service_snapshot: ServiceSnapshot = live.service_snapshot or (lambda: None)
        self.mark_dirty = live.mark_dirty or (lambda path: None)
        self.request_reindex = live.request_reindex
        self.hello_info = live.hello_info or dict
        self.commits = live.commits
        self.index_trouble = live.index_trouble or (lambda reason: None)
        self.query_timeout = query_timeout
        self.request_budget = request_budget
        self.streams = live.streams
        self._follow_words = QueryWords()  # the follows' query words, analyzed once for every round

    # -- the operations: one line each, the op's module does the work ----------------------

    def cmd_status(self, args: wire.StatusArgs, req: OpRequest) -> wire.StatusResult:
        return status(args, req, self.db_path, self.service_snapshot)

    def cmd_search(self, args: wire.SearchArgs, req: OpRequest) -> wire.SearchResult:
        return search(args, req, commits=self.commits, mark_dirty=self.mark_dirty)

    def cmd_read(self, args: wire.ReadArgs, req: OpRequest) -> wire.ReadResult:
        return read(args, req)

    def cmd_trace(self, args: wire.TraceArgs, req: OpRequest) -> wire.TraceResult:
        return trace(args, req)

    def cmd_sessions(self, args: wire.SessionsArgs, req: OpRequest) -> wire.SessionsResult:
        return sessions(args, req)

    def cmd_reindex(self, args: wire.ReindexArgs, req: OpRequest) -> wire.ReindexResult:
        return reindex(args, req, self.request_reindex)

    def cmd_follow(self, args: wire.FollowArgs, req: OpRequest) -> wire.FollowResult:
        return follow(args, req)

    def cmd_unfollow(self, args: wire.UnfollowArgs, stream: Streams | None) -> wire.UnfollowResult:
        return unfollow(args, stream)

    # -- follow rounds (standing queries: the server's piwatchd.serve.follow) --------------

    def follow_round(
        self, asks: list[tuple[wire.FollowArgs, CallerScope, list[int]]], pace: Callable[[], None] = lambda: None
    ) -> list[list[wire.Hit] | ProtocolError]:
        """Each follow's hits among its new events (or why its search failed), on one
        connection and one visibility per scope: a hub round asks for many at once.
        A follow whose words are not among the new events' is not searched; `pace`
        runs before each search (the hub's giving way to requests)."""
        conn = self._conn()
        engine = engine_of(conn)
        if self._follow_words.engine != engine.name:
            self._follow_words = QueryWords(engine.name)

        def words_of(text: str) -> list[str] | None:
            # None: the engine does not say (FTS5 analyzes inside SQLite), the follow is searched
            return engine.words(conn, text) if isinstance(engine, Analyzes) else None

        new_words = NewWords(conn, words_of, self._follow_words)
        seen: dict[CallerScope, Visibility] = {}
        out: list[list[wire.Hit] | ProtocolError] = []
        for args, scope, events in asks:
            if new_words.rules_out(args, events):
                out.append([])
                continue
            pace()
            visibility = seen.get(scope) or seen.setdefault(scope, Visibility(conn, scope))
            req = OpRequest(visibility, time.monotonic() + self.request_budget, no_slot, self.query_timeout)
            try:
                out.append(follow_hits(args, req, events))
            except ProtocolError as exc:
                out.append(exc)
        return out

    def newest_event(self) -> int:
        return newest_event(self._conn())

    def events_after(self, rowid: int, limit: int) -> list[int]:
        return events_after(self._conn(), rowid, limit)

    # -- the request path ----------------------------------------------------------

    def hello(self, args: object) -> wire.HelloResult:
        proto = args.get("proto") if isinstance(args, dict) else None
        if proto != PROTOCOL_VERSION:
            raise ProtocolError(
                ErrorCode.UNSUPPORTED_PROTOCOL,
                f"client speaks protocol {wire.quote(proto)}, piwatchd speaks {PROTOCOL_VERSION}: "
                "upgrade the client and the daemon to the same piwatch version (restart piwatchd after upgrading)",
            )
        info = self.hello_info()
        started = info.get("started_at")
        return wire.HelloResult(
            proto=PROTOCOL_VERSION,
            version=str(info.get("version") or ""),
            pid=os.getpid(),
            started_at=started if isinstance(started, int) else 0,
            capabilities=[op for op in wire.OPS if op not in wire.STREAM_OPS or self.streams],
        )

    def handle(
        self,
        op: object,
        args: object,
        caller: object,
        *,
        slot: Slot = no_slot,
        budget: float | None = None,
        stream: Streams | None = None,
    ) -> wire.Response:
        """Answer one request (never raises for bad input: errors are responses).
        `stream`: the connection's standing queries, where it can have them."""
        deadline = time.monotonic() + (budget or self.request_budget)
        vis: Visibility | None = None
        named: list[str] = []  # sessions the answer names, for freshness and warnings
        try:
            if not isinstance(op, str) or op not in COMMANDS:
                raise ProtocolError(ErrorCode.BAD_REQUEST, f"unknown op {wire.quote(op)}; known: {sorted(COMMANDS)}")
            parsed = wire.decode_args(op, args)
            if isinstance(parsed, wire.UnfollowArgs):  # the connection's own follow: no caller, no index
                return self._response(None, named, result=self.cmd_unfollow(parsed, stream))
            scope = self._scope(caller)
            try:
                vis = Visibility(self._conn(), scope)
            except ProtocolError:
                if op != "status":
                    raise
                result: wire.Wire = unready_status(scope, self.service_snapshot, self._unready_reason())
                return self._response(None, named, result=result)
            req = OpRequest(vis, deadline, slot, self.query_timeout, stream)
            result = self._run(op, parsed, req)
            named = req.sessions
        except ProtocolError as exc:
            error = wire.ErrorBody(code=exc.code, message=wire.clip(exc.message, 2000))
            return self._response(vis, [], error=error)  # an error names no session
        return self._response(vis, named, result=result)

    def _run(self, op: str, args: wire.Wire, req: OpRequest) -> wire.Wire:
        try:
            result: wire.Wire = getattr(self, COMMANDS[op])(resolved(args, req), req)
            return result
        except sqlite3.DatabaseError as exc:
            # The index went away or broke under us (deleted, replaced, corrupt): the
            # daemon rebuilds it; this thread's next request opens a fresh connection.
            self.readers.reset()
            if not isinstance(exc, sqlite3.OperationalError):
                self.index_trouble(str(exc))
            raise ProtocolError(ErrorCode.UNAVAILABLE, f"the index cannot be read: {wire.clip(str(exc))}") from None

    # -- helpers -----------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        try:
            return self.readers.get()
        except (FileNotFoundError, SchemaMismatch, sqlite3.Error) as exc:
            if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
                self.index_trouble(str(exc))
            raise ProtocolError(
                ErrorCode.UNAVAILABLE, f"the index {self.db_path} cannot be read: {wire.clip(str(exc))}"
            ) from None

    def _reader(self) -> sqlite3.Connection | None:
        """This thread's reader, or None while the index cannot be read (said elsewhere)."""
        try:
            return self.readers.get()
        except (OSError, SchemaMismatch, sqlite3.Error):
            return None

    def _unready_reason(self) -> str:
        """Why the index cannot be read, for `status` (asked again: it may be ready by now)."""
        try:
            self.readers.get()
            return "the index is not ready"
        except (OSError, SchemaMismatch, sqlite3.Error) as again:
            return wire.clip(str(again))

    def _scope(self, caller: object) -> CallerScope:
        try:
            scope = resolve_scope(wire.decode_caller(caller), self.configured_roots)
        except ScopeError as exc:
            raise ProtocolError(ErrorCode.BAD_REQUEST, str(exc)) from None
        if scope.current_file and not self._in_session_roots(scope.current_file):
            # Only files where Pi keeps sessions under the session roots are ever indexed or waited for.
            scope = replace(scope, current_file=None)
        return scope

    def _in_session_roots(self, path: str) -> bool:
        real = os.path.realpath(path)
        return any(in_layout(os.path.realpath(r), real) for r in self.session_roots)

    # -- envelope --------------------------------------------------------------------------

    def _response(
        self,
        vis: Visibility | None,
        named: list[str],
        *,
        result: wire.Wire | None = None,
        error: wire.ErrorBody | None = None,
    ) -> wire.Response:
        """The response with its envelope: freshness and warnings of the sessions
        the answer names (only those the caller may see), plus the service's
        catch-up progress."""
        snapshot = self.service_snapshot()
        warnings = catch_up_warnings(snapshot, vis)
        fresh = []
        if vis is not None and named:
            now = time.time() * 1000
            for sid, row in list(vis.sessions(named).items())[:FRESHNESS_SESSIONS]:
                end = vis.visible_end(sid)
                if end is not None:
                    # Capped by the cutoff: the file as far as the caller may see it, indexed
                    # (the first hidden entry is); its later growth and ingest times are hidden.
                    fresh.append(
                        wire.SessionFreshness(
                            session_id=sid, indexed_bytes=end, file_bytes=end, complete=True, ms_since_ingest=None
                        )
                    )
                else:
                    size, done = file_progress(row.path, row.consumed)
                    fresh.append(
                        wire.SessionFreshness(
                            session_id=sid,
                            indexed_bytes=row.consumed,
                            file_bytes=size,
                            complete=done,
                            ms_since_ingest=None if row.last_ingest_ms is None else int(now - row.last_ingest_ms),
                        )
                    )
                if row.state != "ok":
                    warnings.append(
                        wire.Notice(
                            code=row.state, path=row.path, message=wire.clip(row.error or f"the source is {row.state}")
                        )
                    )
        if warnings:  # they quote paths, whether or not the caller is known yet
            shown = Shown(vis) if vis is not None else Shown(None, conn=self._reader())
            warnings = [shown.notice(n) for n in warnings]
        last_scan = snapshot.last_scan if snapshot else None
        freshness = wire.Freshness(
            sessions=fresh,
            backlog=caller_backlog(snapshot, vis),
            last_scan_ms=last_scan.at_ms if last_scan else None,
        )
        return wire.Response(
            id=None, ok=error is None, result=result, error=error, warnings=warnings, freshness=freshness
        )


# The dispatch table, derived once from the wire contract: every op but the handshake has its cmd_<op>.
COMMANDS: dict[str, str] = {op: f"cmd_{op}" for op in wire.OPS if op != "hello"}
_missing = [name for name in COMMANDS.values() if not callable(getattr(Api, name, None))]
if _missing:  # pragma: no cover - a wire op without its command is a bug found at import
    raise ImportError(f"piwatchd.serve.api: no {', '.join(_missing)} for the wire contract's ops")
