"""The one request path: every operation, for the socket and the local CLI alike.

`Api.handle(op, args, caller)` validates the args against the wire contract
(`piwatch.wire`), resolves the caller's scope, computes the request's
`Visibility` once, runs the operation and builds the envelope (freshness and
warnings) from that same visibility, all inside one time budget. The socket
server and `piwatch.transports.LocalTransport` both call it, so the daemon-less
CLI answers with the same authorization as the daemon.

A hidden session or event gets exactly the error a missing one gets.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
from piwatch import wire
from piwatch.protocol import PROTOCOL_VERSION, ErrorCode, ProtocolError

from .auth import CallerScope, ScopeError, is_under, resolve_scope
from .catalog import list_sessions
from .commits import CommitSignal
from .index.query import (
    QueryError,
    SearchFilters,
    SearchRequest,
    overridden,
    roots_clause,
    session_filter_clauses,
)
from .index.schema import SchemaMismatch, open_reader, searchable_bytes
from .index.search import QueryTimeout, search, time_limit
from .ops.read import OpError, event_read
from .ops.trace import event_trace
from .shown import Shown
from .source.reader import open_source
from .status import collect_status, service_status
from .visibility import NOT_FOUND_MESSAGE, Visibility

__all__ = ["REQUEST_BUDGET", "Api", "ReaderPool", "file_progress"]

REQUEST_BUDGET = 10.0  # seconds for one request: waiting, ranking, snippets and the envelope
FRESHNESS_SESSIONS = 50  # at most this many sessions' freshness per response
_TAIL_SCAN_MAX = 8 << 20  # bytes after the indexed end read to find a complete line


class ReaderPool:
    """One read-only connection per request thread, opened lazily."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._local = threading.local()

    def get(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        identity = self._identity()
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

    def _identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.db_path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def reset(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def file_progress(path: str, consumed: int) -> tuple[int | None, bool]:
    """(file size, caught up) for a source indexed up to `consumed` bytes.

    Only complete lines are ever indexed, so a file whose bytes past
    `consumed` hold no newline (Pi is mid-write of its last line) is caught
    up: nothing more can be indexed until that line ends.
    """
    try:
        fd = open_source(path)  # regular files only, never blocks (a FIFO named by a caller)
    except (OSError, ValueError):
        return None, False
    try:
        size = os.fstat(fd).st_size
        if consumed >= size:
            return size, True
        if size - consumed > _TAIL_SCAN_MAX:
            return size, False
        return size, b"\n" not in os.pread(fd, size - consumed, consumed)
    except OSError:
        return None, False
    finally:
        os.close(fd)


def _not_found() -> ProtocolError:
    return ProtocolError(ErrorCode.NOT_FOUND, NOT_FOUND_MESSAGE)


@contextlib.contextmanager
def _no_slot(deadline: float, heavy: bool = False) -> Iterator[None]:
    yield


# slot(deadline, heavy=False): a request slot (the server's are shared fairly between clients).
Slot = Callable[..., contextlib.AbstractContextManager[None]]
HEAVY_ROWS = 100  # a search ranking more rows than this (offset + limit) takes a heavy slot


def _heavy(a: wire.SearchArgs) -> bool:
    """An expensive search: a deep or long page, or sessions grouped from many events."""
    return a.offset + a.limit > HEAVY_ROWS or a.group == "session"


class _Request:
    """What one request carries through its operation and envelope."""

    def __init__(self, vis: Visibility | None, deadline: float) -> None:
        self.vis = vis
        self.deadline = deadline
        self.sessions: list[str] = []  # sessions the answer names, for freshness and warnings

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ProtocolError(ErrorCode.TIMEOUT, "the request used up its time budget")
        return left


class Api:
    def __init__(
        self,
        db_path: Path,
        *,
        configured_roots: tuple[str, ...] = (),
        session_roots: tuple[str, ...] = (),
        service_snapshot: Callable[[], dict[str, Any]] | None = None,
        mark_dirty: Callable[[str], None] | None = None,
        request_reindex: Callable[[str | None], None] | None = None,
        hello_info: Callable[[], dict[str, Any]] | None = None,
        commits: CommitSignal | None = None,
        index_trouble: Callable[[str], None] | None = None,
        query_timeout: float = 5.0,
        request_budget: float = REQUEST_BUDGET,
    ) -> None:
        self.readers = ReaderPool(db_path)
        self.db_path = db_path
        self.configured_roots = configured_roots
        self.session_roots = session_roots
        self.service_snapshot = service_snapshot or dict
        self.mark_dirty = mark_dirty or (lambda path: None)
        self.request_reindex = request_reindex
        self.hello_info = hello_info or dict
        self.commits = commits
        # Told when a query finds the index file damaged: the ingest thread verifies and rebuilds it.
        self.index_trouble = index_trouble or (lambda reason: None)
        self.query_timeout = query_timeout
        self.request_budget = request_budget
        self._ops: dict[str, Callable[[Any, _Request, Slot], Any]] = {
            "status": self._status,
            "search": self._search,
            "read": self._read,
            "trace": self._trace,
            "sessions": self._sessions,
            "reindex": self._reindex,
        }

    # -- the request path ----------------------------------------------------------

    def hello(self, args: Any) -> wire.HelloResult:
        proto = args.get("proto") if isinstance(args, dict) else None
        if proto != PROTOCOL_VERSION:
            raise ProtocolError(
                ErrorCode.UNSUPPORTED_PROTOCOL,
                f"client speaks protocol {wire.quote(proto)}, piwatchd speaks {PROTOCOL_VERSION}: "
                "upgrade the client and the daemon to the same piwatch version (restart piwatchd after upgrading)",
            )
        info = {
            "proto": PROTOCOL_VERSION,
            "version": "",
            "pid": os.getpid(),
            "startedAt": 0,
            "capabilities": ["hello", *self._ops],
            **self.hello_info(),
        }
        return msgspec.convert(info, wire.HelloResult)

    def handle(
        self, op: Any, args: Any, caller: Any, *, slot: Slot = _no_slot, budget: float | None = None
    ) -> wire.Response:
        """Answer one request (never raises for bad input: errors are responses)."""
        req = _Request(None, time.monotonic() + (budget or self.request_budget))
        try:
            fn = self._ops.get(op) if isinstance(op, str) else None
            if fn is None:
                raise ProtocolError(ErrorCode.BAD_REQUEST, f"unknown op {wire.quote(op)}; known: {sorted(self._ops)}")
            parsed = wire.decode_args(op, args)
            scope = self._scope(caller)
            try:
                req.vis = Visibility(self._conn(), scope)
            except ProtocolError:
                if op != "status":
                    raise
                return wire.Response(id=None, ok=True, result=self._unready_status(scope), **self._envelope(req))
            try:
                result = fn(parsed, req, slot)
            except sqlite3.DatabaseError as exc:
                # The index went away or broke under us (deleted, replaced, corrupt): the
                # daemon rebuilds it; this thread's next request opens a fresh connection.
                self.readers.reset()
                if not isinstance(exc, sqlite3.OperationalError):
                    self.index_trouble(str(exc))
                raise ProtocolError(ErrorCode.UNAVAILABLE, f"the index cannot be read: {wire.clip(str(exc))}") from None
        except ProtocolError as exc:
            req.sessions = []  # an error names no session
            return wire.Response(
                id=None,
                ok=False,
                error=wire.ErrorBody(code=exc.code, message=wire.clip(exc.message, 2000)),
                **self._envelope(req),
            )
        return wire.Response(id=None, ok=True, result=result, **self._envelope(req))

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

    def _scope(self, caller: Any) -> CallerScope:
        try:
            scope = resolve_scope(wire.decode_caller(caller), self.configured_roots)
        except ScopeError as exc:
            raise ProtocolError(ErrorCode.BAD_REQUEST, str(exc)) from None
        if scope.current_file and not self._under_session_roots(scope.current_file):
            # Only files under the session roots are ever indexed or waited for.
            scope = replace(scope, current_file=None)
        return scope

    def _under_session_roots(self, path: str) -> bool:
        real = os.path.realpath(path)
        return any(is_under(real, os.path.realpath(r)) for r in self.session_roots)

    @contextlib.contextmanager
    def _limited(self, conn: sqlite3.Connection, req: _Request) -> Iterator[None]:
        try:
            with time_limit(conn, min(self.query_timeout, req.remaining())):
                yield
        except QueryTimeout as exc:
            raise ProtocolError(ErrorCode.TIMEOUT, str(exc)) from None

    # -- operations ----------------------------------------------------------------------

    # -- follow (standing queries: piwatchd.follow) -----------------------------------------

    def follow_scope(self, args: Any, caller: Any) -> tuple[wire.FollowArgs, CallerScope]:
        """Validate a follow's args and caller (raises ProtocolError as any request would)."""
        parsed = wire.decode_args("follow", args)
        assert isinstance(parsed, wire.FollowArgs)
        scope = self._scope(caller)
        Visibility(self._conn(), scope)  # the index is readable and the caller resolvable now
        # The query must be searchable at all: a bad one is refused here, not at the first commit.
        self.follow_hits(parsed, scope, [0])
        return parsed, scope

    def follow_hits(self, a: wire.FollowArgs, scope: CallerScope, events: list[int]) -> list[wire.Hit]:
        """The follow's hits among `events`, through search's own path and authorization.
        Partial and repaired matches are not news: only exact (and, unless `exact`, word-form) hits."""
        if not events:
            return []  # (no restriction would mean every event)
        req = _Request(Visibility(self._conn(), scope), time.monotonic() + self.request_budget)
        args = wire.SearchArgs(
            query=a.query,
            filters=a.filters,
            limit=wire.MAX_LIMIT,
            include_own_results=a.include_own_results,
            exact=a.exact,
        )
        hits: list[wire.Hit] = []
        for offset in range(0, len(events) + 1, wire.MAX_LIMIT):  # an event is at most one hit
            args.offset = offset
            result = self._search(args, req, _no_slot, only_events=tuple(events))
            hits.extend(h for h in result.hits if h.tier in ("exact", "forms"))
            if not result.has_more:
                break
        return hits

    def newest_event(self) -> int:
        row = self._conn().execute("SELECT max(event_rowid) FROM events").fetchone()
        return int(row[0] or 0)

    def events_after(self, rowid: int, limit: int) -> list[int]:
        """Searchable events above `rowid`, ascending: up to the first whose session still
        waits for the text index to commit (its `text_debt`), so none is passed over unseen.
        A session whose re-feed failed before (attempts > 0) holds nobody up."""
        rows = self._conn().execute(
            "SELECT e.event_rowid, EXISTS (SELECT 1 FROM text_debt d WHERE d.session_id = e.session_id"
            " AND d.attempts = 0) FROM events e WHERE e.event_rowid > ? ORDER BY e.event_rowid LIMIT ?",
            (rowid, limit),
        )
        out: list[int] = []
        for event, owed in rows:
            if owed:
                break
            out.append(event)
        return out

    def _search(
        self, a: wire.SearchArgs, req: _Request, slot: Slot, only_events: tuple[int, ...] = ()
    ) -> wire.SearchResult:
        vis = req.vis
        assert vis is not None
        request = _search_request(a)
        scope = vis.scope
        targeted = bool(scope.current_session) and scope.current_session in a.filters.session_id
        if a.wait_seconds:
            # Waiting holds no request slot; it wakes on each commit.
            own = (scope.current_file,) if targeted and scope.current_file else ()
            self._wait_for(vis, a.filters.session_id, own, min(a.wait_seconds, wire.MAX_WAIT_SECONDS), req)
            vis.refresh()
        with slot(req.deadline, heavy=_heavy(a)):
            conn = vis.conn
            exclude = (
                (scope.current_session,) if scope.current_session and not (targeted and scope.cutoff_entry) else ()
            )
            filters = replace(
                request.filters,
                authorized_roots=scope.roots,
                exclude_sessions=request.filters.exclude_sessions + exclude,
                ordinal_caps=vis.search_caps(),
                exclude_own_results=not a.include_own_results,
                event_rowids=only_events,
            )
            try:
                raw = search(conn, replace(request, filters=filters), timeout=min(self.query_timeout, req.remaining()))
            except QueryError as exc:
                raise ProtocolError(ErrorCode.QUERY_ERROR, str(exc)) from None
            except QueryTimeout as exc:
                raise ProtocolError(ErrorCode.TIMEOUT, str(exc)) from None
        result = msgspec.convert(raw, wire.SearchResult)
        vis.describe_sessions(result)
        Shown(conn).search(result)  # recorded cwds, names and tool names: redacted, then bounded
        grouped = result.sessions or []
        items: list[wire.Hit | wire.SessionHit] = [*result.hits, *grouped, *(s.evidence for s in grouped)]
        for item in items:
            # Recorded values repeat on every hit of a session: bounded.
            item.session_name, item.cwd = _short(item.session_name), _short(item.cwd)
        result.scope = wire.SearchScope(roots=None if scope.roots is None else list(scope.roots))
        req.sessions = [h.session_id for h in result.hits] + [s.session_id for s in grouped]
        return result

    def _wait_for(
        self, vis: Visibility, session_ids: list[str], paths: tuple[str, ...], seconds: float, req: _Request
    ) -> None:
        """Wait until the named visible sessions' files (and `paths`: the
        caller's own file, which may not be indexed yet) are caught up."""
        deadline = min(time.monotonic() + seconds, req.deadline - 0.5)
        files = {row.path for row in vis.sessions(session_ids).values()} | set(paths)
        while files:
            seen = self.commits.generation if self.commits else 0
            pending = [p for p in sorted(files) if not self._caught_up(vis.conn, p)]
            if not pending or time.monotonic() >= deadline:
                return
            for path in pending:
                self.mark_dirty(path)
            if self.commits is None:
                return  # no ingest service (the local CLI): nothing will change while we wait
            self.commits.wait(seen, deadline - time.monotonic())

    @staticmethod
    def _caught_up(conn: sqlite3.Connection, path: str) -> bool:
        # Searchable, not just ingested: the text index may commit a moment later.
        searchable = searchable_bytes(conn, path)
        size, done = file_progress(path, searchable or 0)
        return size is None or (searchable is not None and done)

    def _event_op(
        self, op: Callable[[sqlite3.Connection, Any], dict[str, Any]], a: Any, req: _Request, slot: Slot
    ) -> dict:
        vis = req.vis
        assert vis is not None
        with slot(req.deadline), self._limited(vis.conn, req):
            if not vis.event_visible(a.session_id, a.entry_id):
                raise _not_found()
            try:
                raw = op(vis.conn, a)
            except OpError as exc:
                code = ErrorCode.NOT_FOUND if exc.code == "not-found" else ErrorCode.BAD_REQUEST
                raise ProtocolError(code, wire.clip(str(exc))) from None
        req.sessions = [a.session_id]
        return raw

    def _read(self, a: wire.ReadArgs, req: _Request, slot: Slot) -> wire.ReadResult:
        if a.unredacted and (req.vis is None or req.vis.scope.roots is not None):
            # Model-facing output is always redacted; only the file owner's local CLI may opt out.
            raise ProtocolError(
                ErrorCode.BAD_REQUEST,
                "unredacted is allowed only for the local CLI with"
                " caller all: true (`piwatch read --all --unredacted`)",
            )
        result = msgspec.convert(self._event_op(event_read, a, req, slot), wire.ReadResult)
        assert req.vis is not None
        return req.vis.filter_read(result)

    def _trace(self, a: wire.TraceArgs, req: _Request, slot: Slot) -> wire.TraceResult:
        result = msgspec.convert(self._event_op(event_trace, a, req, slot), wire.TraceResult)
        assert req.vis is not None
        return req.vis.filter_trace(result)

    def _sessions(self, a: wire.SessionsArgs, req: _Request, slot: Slot) -> wire.SessionsResult:
        vis = req.vis
        assert vis is not None
        scope = vis.scope
        where, params = ("1", []) if scope.roots is None else roots_clause("s.cwd_real", scope.roots)
        if scope.current_session:
            # The caller's own session is never listed: its later entries lie past the cutoff.
            where += " AND s.session_id != ?"
            params.append(scope.current_session)
        # Forks capped by the cutoff are ordered and filtered by their visible span, not their later activity.
        with self._limited(vis.conn, req):
            spans = vis.capped_spans() if vis.has_cutoff else {}
        first = overridden("s.first_ms", {sid: f for sid, (f, _) in spans.items()})
        last = overridden("s.last_ms", {sid: t for sid, (_, t) in spans.items()})
        extra, extra_params = session_filter_clauses(_search_request(_sessions_search(a, 1, 0)).filters, first, last)
        where, params = " AND ".join([where, *extra]), [*params, *extra_params]
        with slot(req.deadline, heavy=a.query is not None):  # a query ranks its best 1,000 hits
            if a.query is not None:
                ids = self._matching_sessions(a, req)
                where += f" AND s.session_id IN ({','.join('?' * len(ids))})" if ids else " AND 0"
                params.extend(ids)
            with self._limited(vis.conn, req):
                rows = list_sessions(vis.conn, where, params, a.limit + 1, a.offset, last)
        shown = Shown(vis.conn)  # recorded values through the redaction rules, before they are cut
        items = [
            wire.SessionItem(
                session_id=r.session_id,
                name=_short(shown(r.name)),
                cwd=_short(shown(r.cwd)),
                created=_short(shown(r.created)),
                first_ms=r.first_ms,
                last_ms=r.last_ms,
                events=r.entry_count,
                parent_session=_short(shown(r.parent_session)),
                format=r.format,
                path=shown(r.path) or r.path,
                state=r.state,
            )
            for r in rows[: a.limit]
        ]
        if vis.has_cutoff:  # forks of the caller's session: only what their visible events say
            with slot(req.deadline), self._limited(vis.conn, req):
                vis.describe_listing(items)
        return wire.SessionsResult(sessions=items, has_more=len(rows) > a.limit, limit=a.limit, offset=a.offset)

    def _matching_sessions(self, a: wire.SessionsArgs, req: _Request) -> list[str]:
        """Sessions holding one of the query's best hits, through search's own
        path (same authorization and cutoff): bounded by SESSIONS_QUERY_HITS."""
        found: dict[str, None] = {}
        for offset in range(0, wire.SESSIONS_QUERY_HITS, wire.MAX_LIMIT):
            result = self._search(_sessions_search(a, wire.MAX_LIMIT, offset), req, _no_slot)
            found.update(dict.fromkeys(h.session_id for h in result.hits))
            if not result.has_more:
                break
        req.sessions = []  # the listing names its sessions itself; the probe's hits need no freshness
        return list(found)

    def _status(self, a: wire.StatusArgs, req: _Request, slot: Slot) -> wire.StatusResult:
        vis = req.vis
        assert vis is not None
        snapshot = self.service_snapshot()
        with slot(req.deadline), self._limited(vis.conn, req):
            result = collect_status(vis.conn, self.db_path, roots=vis.scope.roots)
            hidden_sessions, hidden_events = vis.hidden_counts()  # past the cutoff, or the caller's own session
            result.sessions -= hidden_sessions
            result.events -= hidden_events
            Shown(vis.conn).status(result)  # paths, errors and diagnostics quote session files
        if snapshot:
            # The live snapshot is fresher than the row the service last wrote.
            live = service_status({**snapshot, "running": True, "updated_age_s": 0})
            result.service = live if vis.scope.roots is None else _public_service(live)
        elif vis.scope.roots is not None and result.service is not None:
            result.service = _public_service(result.service)
        result.catch_up = catch_up(snapshot)
        return result

    def _unready_status(self, scope: CallerScope) -> wire.StatusResult:
        """Status while the index cannot be read (being created or missing)."""
        snapshot = self.service_snapshot()
        try:
            self.readers.get()
            error = "the index is not ready"
        except (OSError, SchemaMismatch, sqlite3.Error) as exc:
            error = wire.clip(str(exc))
        service = service_status({**snapshot, "running": True}) if snapshot else None
        if service is not None and scope.roots is not None:
            service = _public_service(service)
        return wire.StatusResult(ready=False, index_error=error, service=service)

    def _reindex(self, a: wire.ReindexArgs, req: _Request, slot: Slot) -> wire.ReindexResult:
        if self.request_reindex is None:
            raise ProtocolError(ErrorCode.UNAVAILABLE, "reindex needs the running ingest service (start piwatchd)")
        vis = req.vis
        assert vis is not None
        if a.session_id is None:
            if vis.scope.roots is not None:
                raise ProtocolError(ErrorCode.BAD_REQUEST, "reindex of every session is for the local CLI (caller all)")
            self.request_reindex(None)
            return wire.ReindexResult(queued="all")
        row = vis.session(a.session_id)
        if row is None:
            raise _not_found()
        self.request_reindex(row.path)
        req.sessions = [a.session_id]
        return wire.ReindexResult(queued=a.session_id)

    # -- envelope --------------------------------------------------------------------------

    def _envelope(self, req: _Request) -> dict[str, Any]:
        """Freshness and warnings of the sessions the answer names (only those
        the caller may see), plus the service's catch-up progress."""
        snapshot = self.service_snapshot() or {}
        warnings = _catch_up_warnings(snapshot)
        fresh = []
        vis = req.vis
        if vis is not None and req.sessions:
            now = time.time() * 1000
            for sid, row in list(vis.sessions(req.sessions).items())[:FRESHNESS_SESSIONS]:
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
        if vis is not None:
            Shown(vis.conn).notices(warnings)
        last_scan = snapshot.get("last_scan") if isinstance(snapshot.get("last_scan"), dict) else {}
        return {
            "warnings": warnings,
            "freshness": wire.Freshness(
                sessions=fresh, backlog=snapshot.get("backlog_files"), last_scan_ms=(last_scan or {}).get("at_ms")
            ),
        }


SHORT_VALUE_CHARS = 1000  # a recorded name or cwd in a listing; the full value is in the source file


def _short(value: str | None) -> str | None:
    """A recorded value shown in a listing, cut so one huge header or name
    (Pi writes what it is given) cannot inflate every answer naming its session."""
    return value if value is None or len(value) <= SHORT_VALUE_CHARS else wire.clip(value, SHORT_VALUE_CHARS)


def catch_up(snapshot: dict[str, Any]) -> wire.IndexProgress | None:
    """The first index's progress while it runs (None once caught up, or
    without a live service). One definition for the warning and `status`."""
    if not snapshot or snapshot.get("startup_seconds") is not None or snapshot.get("phase") in (None, "stopped"):
        return None
    known = int(snapshot.get("files_known") or 0)
    backlog = int(snapshot.get("backlog_files") or 0)
    return wire.IndexProgress(files_done=max(0, known - backlog), files_total=known)


def _catch_up_warnings(snapshot: dict[str, Any]) -> list[wire.Notice]:
    out = [wire.Notice(code="watch", message=wire.clip(str(w))) for w in snapshot.get("warnings") or []]
    progress = catch_up(snapshot)
    if progress is not None:
        if progress.files_total == 0:
            message = "indexing: listing the session files, results may be incomplete"
        else:
            message = f"indexing: {progress.files_done} of {progress.files_total} files, results may be incomplete"
        out.insert(0, wire.Notice(code="indexing", message=message))
    return out


def _public_service(svc: wire.ServiceStatus) -> wire.ServiceStatus:
    """What a workspace caller may see of the service: progress, no paths of
    other projects' files."""
    return wire.ServiceStatus(
        pid=svc.pid,
        phase=svc.phase,
        running=svc.running,
        started_ms=svc.started_ms,
        heartbeat_ms=svc.heartbeat_ms,
        updated_age_s=svc.updated_age_s,
        uptime_seconds=svc.uptime_seconds,
        files_known=svc.files_known,
        backlog_files=svc.backlog_files,
        startup_seconds=svc.startup_seconds,
        last_scan=wire.ScanInfo(at_ms=svc.last_scan.at_ms) if svc.last_scan else None,
    )


def _sessions_search(a: wire.SessionsArgs, limit: int, offset: int) -> wire.SearchArgs:
    """`sessions`' query and scope filters as search args (one definition of the filters)."""
    filters = wire.SearchFilters(cwd=a.cwd, cwd_under=a.cwd_under, since_ms=a.since_ms, until_ms=a.until_ms)
    return wire.SearchArgs(query=a.query or "", filters=filters, limit=limit, offset=offset)


def _search_request(a: wire.SearchArgs) -> SearchRequest:
    """The wire's search args as the engine's request (paths normalized)."""
    f = a.filters

    def norm(path: str | None) -> str | None:
        return os.path.normpath(path) if path else None

    if any("\x00" in p for p in (f.cwd or "", f.cwd_under or "", *f.files)):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "paths in filters must not contain NUL")
    filters = SearchFilters(
        session_ids=tuple(f.session_id),
        cwd=norm(f.cwd),
        cwd_under=norm(f.cwd_under),
        event_types=tuple(f.event_type),
        kinds=tuple(f.kind),
        roles=tuple(f.role),
        tools=tuple(f.tool),
        since_ms=f.since_ms,
        until_ms=f.until_ms,
        is_error=f.is_error,
        branch_states=tuple(f.branch_state),
        selection_states=tuple(f.selection_state),
        files=tuple(os.path.normpath(os.path.abspath(os.path.expanduser(p))) for p in f.files if p),
        file_mode=f.file_mode,
    )
    return SearchRequest(a.query, filters, a.limit, a.offset, a.exact, a.group)
