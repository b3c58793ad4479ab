"""Socket operations: authorization first, then read-only queries.

Each handler takes the wire `args` and `caller` maps and returns a plain
result or raises `ProtocolError`. An unauthorized target gets exactly the
error a missing one gets, so nothing leaks the existence of other projects'
sessions.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from piwatch.protocol import ErrorCode, ProtocolError

from .auth import CallerScope, ScopeError, resolve_scope
from .direct import request_from_args
from .index.query import QueryError, roots_clause
from .index.schema import SchemaMismatch, open_reader
from .index.search import QueryTimeout, search
from .ops.read import OpError, event_read
from .ops.trace import event_trace
from .status import collect_status

__all__ = ["Api", "ReaderPool"]

NOT_FOUND_MESSAGE = "no such event in the sessions this caller may see"
MAX_WAIT_SECONDS = 10.0


class ReaderPool:
    """One read-only connection per request thread, opened lazily."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._local = threading.local()

    def get(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = open_reader(self.db_path)
            self._local.conn = conn
        return conn

    def reset(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def _not_found() -> ProtocolError:
    return ProtocolError(ErrorCode.NOT_FOUND, NOT_FOUND_MESSAGE)


class Api:
    def __init__(
        self,
        db_path: Path,
        *,
        configured_roots: tuple[str, ...] = (),
        service_snapshot: Callable[[], dict[str, Any]] | None = None,
        mark_dirty: Callable[[str], None] | None = None,
        request_reindex: Callable[[str | None], dict[str, Any]] | None = None,
        query_timeout: float = 5.0,
    ) -> None:
        self.readers = ReaderPool(db_path)
        self.db_path = db_path
        self.configured_roots = configured_roots
        self.service_snapshot = service_snapshot or dict
        self.mark_dirty = mark_dirty or (lambda path: None)
        self.request_reindex = request_reindex
        self.query_timeout = query_timeout

    def handlers(self) -> dict[str, Callable[[dict, Any], Any]]:
        return {
            "status": self.status,
            "search": self.search,
            "read": self.read,
            "trace": self.trace,
            "sessions": self.sessions,
            "reindex": self.reindex,
        }

    # -- helpers -------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        try:
            return self.readers.get()
        except (FileNotFoundError, SchemaMismatch) as exc:
            raise ProtocolError(ErrorCode.INTERNAL, f"index not ready: {exc}") from None

    def _scope(self, caller: Any) -> CallerScope:
        try:
            return resolve_scope(caller, self.configured_roots)
        except ScopeError as exc:
            raise ProtocolError(ErrorCode.BAD_REQUEST, str(exc)) from None

    def _session_row(self, conn, session_id: str):
        return conn.execute(
            "SELECT s.session_id, s.cwd_real, src.path, src.consumed, src.last_ingest_ms FROM sessions s"
            " JOIN sources src ON src.source_id = s.source_id WHERE s.session_id = ?",
            (session_id,),
        ).fetchone()

    def _wait_for(self, session_ids: list[str], seconds: float, paths: tuple[str, ...] = ()) -> None:
        """Bounded wait until the named sessions' files (and `paths`, e.g. the
        caller's own session file, which may not be indexed yet) are fully ingested."""
        deadline = time.monotonic() + min(max(seconds, 0.0), MAX_WAIT_SECONDS)
        conn = self._conn()
        while True:
            files = {row[2] for sid in session_ids if (row := self._session_row(conn, sid)) is not None}
            files.update(p for p in paths if p)
            pending = []
            for path in sorted(files):
                row = conn.execute("SELECT consumed FROM sources WHERE path=?", (path,)).fetchone()
                try:
                    size = os.stat(path).st_size
                except OSError:
                    continue
                if row is None or row[0] < size:
                    pending.append(path)
            if not pending or time.monotonic() >= deadline:
                return
            for path in pending:
                self.mark_dirty(path)
            time.sleep(0.02)

    def _cutoff_caps(self, conn, scope: CallerScope) -> tuple[tuple[str, int], ...]:
        """Ordinal caps hiding the invoking entry and everything after it, in
        the current session and in forks that copied it."""
        if not scope.current_session or not scope.cutoff_entry:
            return ()
        caps = []
        row = conn.execute(
            "SELECT ordinal FROM events WHERE session_id=? AND entry_id=?", (scope.current_session, scope.cutoff_entry)
        ).fetchone()
        caps.append((scope.current_session, row[0] if row else -1))
        parents = [p for p in (scope.current_file, scope.current_session) if p]
        like = f"%_{scope.current_session}.jsonl"
        for sid, ordinal in conn.execute(
            "SELECT e.session_id, e.ordinal FROM sessions s JOIN events e ON e.session_id = s.session_id"
            f" WHERE (s.parent_session IN ({','.join('?' * len(parents))}) OR s.parent_session LIKE ?)"
            " AND e.entry_id = ? AND s.session_id != ?",
            (*parents, like, scope.cutoff_entry, scope.current_session),
        ):
            caps.append((sid, ordinal))
        return tuple(caps)

    def _visible_event(self, conn, scope: CallerScope, session_id: Any, entry_id: Any, caps=None) -> None:
        """Raise the uniform not-found error unless the caller may see this event."""
        if not isinstance(session_id, str) or not isinstance(entry_id, str):
            raise ProtocolError(ErrorCode.BAD_REQUEST, "sessionId and entryId must be strings")
        row = conn.execute(
            "SELECT s.cwd_real, e.ordinal FROM events e JOIN sessions s ON s.session_id = e.session_id"
            " WHERE e.session_id=? AND e.entry_id=?",
            (session_id, entry_id),
        ).fetchone()
        if row is None or not scope.allows_cwd(row[0]):
            raise _not_found()
        if scope.roots is not None or scope.current_session:
            for sid, cap in self._cutoff_caps(conn, scope) if caps is None else caps:
                if sid == session_id and row[1] >= cap:
                    raise _not_found()
            if session_id == scope.current_session and not scope.cutoff_entry:
                raise _not_found()

    # -- operations ------------------------------------------------------------

    def search(self, args: dict, caller: Any) -> dict[str, Any]:
        scope = self._scope(caller)
        try:
            request = request_from_args(args)
        except QueryError as exc:
            raise ProtocolError(ErrorCode.QUERY_ERROR, str(exc)) from None
        wait = args.get("waitSeconds")
        if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > 0:
            own_file = (scope.current_file,) if scope.current_file and scope.current_session in request.filters.session_ids else ()
            self._wait_for(list(request.filters.session_ids), float(wait), own_file)
        conn = self._conn()
        filters = request.filters
        targeted = scope.current_session in filters.session_ids if scope.current_session else False
        exclude: tuple[str, ...] = ()
        if scope.current_session and (not targeted or not scope.cutoff_entry):
            exclude = (scope.current_session,)
        if args.get("includeOwnResults") is not True:
            filters = replace(filters, exclude_own_results=True)
        filters = replace(
            filters,
            authorized_roots=scope.roots,
            exclude_sessions=filters.exclude_sessions + exclude,
            ordinal_caps=self._cutoff_caps(conn, scope),
        )
        try:
            result = search(conn, replace(request, filters=filters), timeout=self.query_timeout)
            result["scope"] = {"roots": None if scope.roots is None else list(scope.roots)}
            return result
        except QueryError as exc:
            raise ProtocolError(ErrorCode.QUERY_ERROR, str(exc)) from None
        except QueryTimeout as exc:
            raise ProtocolError(ErrorCode.TIMEOUT, str(exc)) from None

    def _op(self, name: str, args: dict, caller: Any) -> dict[str, Any]:
        scope = self._scope(caller)
        conn = self._conn()
        self._visible_event(conn, scope, args.get("sessionId"), args.get("entryId"))
        fn = event_read if name == "read" else event_trace
        try:
            result = fn(conn, args)
        except OpError as exc:
            code = ErrorCode.NOT_FOUND if exc.code == "not-found" else ErrorCode.BAD_REQUEST
            raise ProtocolError(code, str(exc)) from None
        caps = self._cutoff_caps(conn, scope)  # once per request, not once per node
        return _filter_visible(result, lambda sid, eid: self._is_visible(conn, scope, sid, eid, caps))

    def _is_visible(self, conn, scope: CallerScope, session_id: str, entry_id: str | None, caps=None) -> bool:
        if entry_id is None:
            row = conn.execute("SELECT cwd_real FROM sessions WHERE session_id=?", (session_id,)).fetchone()
            return row is not None and scope.allows_cwd(row[0]) and (
                session_id != scope.current_session or bool(scope.cutoff_entry))
        try:
            self._visible_event(conn, scope, session_id, entry_id, caps)
            return True
        except ProtocolError:
            return False

    def read(self, args: dict, caller: Any) -> dict[str, Any]:
        return self._op("read", args, caller)

    def trace(self, args: dict, caller: Any) -> dict[str, Any]:
        return self._op("trace", args, caller)

    def sessions(self, args: dict, caller: Any) -> dict[str, Any]:
        scope = self._scope(caller)
        limit = args.get("limit", 50)
        offset = args.get("offset", 0)
        if not isinstance(limit, int) or not 1 <= limit <= 500 or not isinstance(offset, int) or offset < 0:
            raise ProtocolError(ErrorCode.BAD_REQUEST, "limit must be 1-500 and offset >= 0")
        conn = self._conn()
        where, params = ("1", []) if scope.roots is None else roots_clause("s.cwd_real", scope.roots)
        if scope.current_session and not scope.cutoff_entry:
            where += " AND s.session_id != ?"
            params.append(scope.current_session)
        rows = conn.execute(
            "SELECT s.session_id, s.name, s.cwd, s.created, s.first_ms, s.last_ms, s.entry_count, s.parent_session,"
            " s.format, src.path, src.state FROM sessions s JOIN sources src ON src.source_id = s.source_id"
            f" WHERE {where} ORDER BY coalesce(s.last_ms, 0) DESC, s.session_id LIMIT ? OFFSET ?",
            (*params, limit + 1, offset),
        ).fetchall()
        items = [
            {
                "sessionId": r[0],
                "name": r[1],
                "cwd": r[2],
                "created": r[3],
                "firstMs": r[4],
                "lastMs": r[5],
                "events": r[6],
                "parentSession": r[7],
                "format": r[8],
                "path": r[9],
                "state": r[10],
            }
            for r in rows[:limit]
        ]
        return {"sessions": items, "hasMore": len(rows) > limit, "limit": limit, "offset": offset}

    def status(self, args: dict, caller: Any) -> dict[str, Any]:
        try:
            result = collect_status(self.db_path)
        except (FileNotFoundError, SchemaMismatch) as exc:
            result = {"index": f"not ready: {exc}"}
        live = self.service_snapshot()
        if live:
            # The live snapshot is fresher than the row the service last wrote.
            result["service"] = {**(result.get("service") or {}), **live, "running": True, "updated_age_s": 0}
        return result

    def reindex(self, args: dict, caller: Any) -> dict[str, Any]:
        if self.request_reindex is None:
            raise ProtocolError(ErrorCode.BAD_REQUEST, "reindex needs the running ingest service")
        session_id = args.get("sessionId")
        if session_id is not None and not isinstance(session_id, str):
            raise ProtocolError(ErrorCode.BAD_REQUEST, "sessionId must be a string")
        if session_id is not None:
            row = self._session_row(self._conn(), session_id)
            if row is None:
                raise _not_found()
        return self.request_reindex(session_id)

    # -- envelope ----------------------------------------------------------------

    def envelope(self, op: str, args: dict, caller: Any, result: Any) -> dict[str, Any]:
        """Warnings and the freshness watermark that ride along every response."""
        snapshot = self.service_snapshot() or {}
        sessions: set[str] = set()
        if isinstance(result, dict):
            for hit in result.get("hits") or []:
                sessions.add(hit["sessionId"])
            if isinstance(result.get("event"), dict) and result["event"].get("sessionId"):
                sessions.add(result["event"]["sessionId"])
        if isinstance(args.get("sessionId"), str):
            sessions.add(args["sessionId"])
        fresh = []
        warnings = []
        try:
            conn = self._conn()
            now = time.time() * 1000
            for sid in sorted(sessions)[:50]:
                row = self._session_row(conn, sid)
                if row is None:
                    continue
                try:
                    size = os.stat(row[2]).st_size
                except OSError:
                    size = None
                fresh.append(
                    {
                        "sessionId": sid,
                        "indexedBytes": row[3],
                        "fileBytes": size,
                        "complete": size is not None and row[3] >= size,
                        "msSinceIngest": None if row[4] is None else int(now - row[4]),
                    }
                )
            for path, state, error in conn.execute(
                "SELECT path, state, error FROM sources WHERE state IN ('stale','unsupported','unreadable','duplicate')"
                " ORDER BY path LIMIT 5"
            ):
                warnings.append({"code": state, "path": path, "message": error})
        except ProtocolError:
            pass
        for w in snapshot.get("warnings", []) if isinstance(snapshot, dict) else []:
            warnings.append(w)
        return {
            "freshness": {"sessions": fresh, "backlog": snapshot.get("backlog"), "lastScanMs": snapshot.get("lastScanMs")},
            "warnings": warnings,
        }


_ID_LIST_KEYS = frozenset({"alternatives", "candidates"})
_ID_KEYS = frozenset({"at", "followed"})
_HIDDEN = object()


def _filter_visible(result: Any, visible: Callable[[str, str | None], bool], session_id: str | None = None) -> Any:
    """Remove every node the caller may not see from a read/trace result.

    Neighbours, relationship targets, fork candidates and the materialized
    leaf can point past the invocation cutoff or into another project's
    session (fork anchors). Ids without a session belong to the event's own
    session. Hidden nodes disappear from lists and become None elsewhere.
    """
    if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
        session_id = result["sessionId"]
    return _redact(result, visible, session_id, top=True)


def _redact(value: Any, visible: Callable[[str, str | None], bool], sid: str | None, top: bool = False) -> Any:
    if isinstance(value, dict):
        own_sid = value.get("sessionId") if isinstance(value.get("sessionId"), str) else sid
        if not top and isinstance(value.get("entryId"), str) and own_sid and not visible(own_sid, value["entryId"]):
            return _HIDDEN
        if not top and isinstance(value.get("sessionId"), str) and value.get("entryId") is None:
            if not visible(value["sessionId"], None):  # a whole session, e.g. a fork's parent
                return _HIDDEN
        target = value.get("target")
        if isinstance(target, dict) and isinstance(target.get("entryId"), str):
            tsid = target.get("sessionId") if isinstance(target.get("sessionId"), str) else sid
            if tsid and not visible(tsid, target["entryId"]):
                return _HIDDEN
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in _ID_LIST_KEYS and isinstance(item, list):
                out[key] = [
                    x for x in (_redact(i, visible, sid) for i in item)
                    if x is not _HIDDEN and not (isinstance(x, str) and sid and not visible(sid, x))
                ]
            elif key in _ID_KEYS and isinstance(item, str) and sid and not visible(sid, item):
                return _HIDDEN
            else:
                red = _redact(item, visible, sid)
                out[key] = None if red is _HIDDEN else red
        return out
    if isinstance(value, list):
        return [x for x in (_redact(i, visible, sid) for i in value) if x is not _HIDDEN]
    return value
