"""Operations on an index file without a daemon.

The CLI imports this lazily: it is `piwatch index --once`, the daemon-down
fallback of `piwatch search`, and the way to inspect any index file. Requests
and responses are plain dicts, the same shapes the socket protocol carries.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import load_settings
from .index.query import QueryError, SearchFilters, SearchRequest
from .index.schema import open_reader, open_writer
from .index.search import search
from .index.writer import IndexWriter
from .indexer import reconcile
from .indexfile import prepare_index_path
from .ops.read import OpError
from .source.discovery import discover_roots

__all__ = ["index_once", "search_index", "request_from_args", "QueryError", "resolve_db", "read_event", "trace_event", "OpError"]


def resolve_db(db: str | os.PathLike | None) -> Path:
    return Path(db).expanduser() if db else load_settings().db_path


def index_once(
    db: str | os.PathLike | None = None,
    sessions: list[str] | None = None,
    progress: Callable | None = None,
) -> dict[str, Any]:
    """Reconcile the index with the session files once and return a summary."""
    settings = load_settings()
    if sessions:
        roots = [os.path.abspath(os.path.expanduser(s)) for s in sessions]
    else:
        roots = [r.path for r in discover_roots(extra=settings.extra_session_dirs)]
    db_path = prepare_index_path(resolve_db(db))
    conn = open_writer(db_path)
    try:
        summary = reconcile(IndexWriter(conn), roots, progress=progress)
        conn.execute("PRAGMA optimize")
    finally:
        conn.close()
    return {"db": str(db_path), "roots": roots, **summary.as_dict()}


def _tuple(value: Any) -> tuple:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value)
    return (str(value),)


def request_from_args(args: dict[str, Any]) -> SearchRequest:
    """Build a SearchRequest from the wire/CLI dict shape, validating types."""
    f = args.get("filters") or {}
    if not isinstance(f, dict):
        raise QueryError("filters must be a map")

    def opt_int(key: str) -> int | None:
        v = f.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            raise QueryError(f"filter {key} must be an integer (milliseconds since the epoch)")
        return v

    is_error = f.get("isError")
    if is_error is not None and not isinstance(is_error, bool):
        raise QueryError("filter isError must be true or false")
    if f.get("fileMode") not in (None, "read", "changed", "any"):
        raise QueryError("filter fileMode must be read, changed or any")
    cwd = f.get("cwd")
    under = f.get("cwdUnder")
    filters = SearchFilters(
        session_ids=_tuple(f.get("sessionId")),
        cwd=os.path.normpath(cwd) if isinstance(cwd, str) and cwd else None,
        cwd_under=os.path.normpath(under) if isinstance(under, str) and under else None,
        event_types=_tuple(f.get("eventType")),
        kinds=_tuple(f.get("kind")),
        roles=_tuple(f.get("role")),
        tools=_tuple(f.get("tool")),
        since_ms=opt_int("sinceMs"),
        until_ms=opt_int("untilMs"),
        is_error=is_error,
        branch_states=_tuple(f.get("branchState")),
        selection_states=_tuple(f.get("selectionState")),
        files=tuple(os.path.normpath(os.path.abspath(os.path.expanduser(p))) for p in _tuple(f.get("files")) if p),
        file_mode=str(f.get("fileMode") or "any"),
    )
    limit = args.get("limit", 20)
    offset = args.get("offset", 0)
    if isinstance(limit, bool) or not isinstance(limit, int) or isinstance(offset, bool) or not isinstance(offset, int):
        raise QueryError("limit and offset must be integers")
    return SearchRequest(str(args.get("query", "")), filters, limit, offset)


def search_index(db: str | os.PathLike | None, args: dict[str, Any]) -> dict[str, Any]:
    request = request_from_args(args)
    conn = open_reader(resolve_db(db))
    try:
        return search(conn, request)
    finally:
        conn.close()


def _read_op(db: str | os.PathLike | None, op: Callable[[Any, dict[str, Any]], dict[str, Any]], args: dict[str, Any]) -> dict[str, Any]:
    conn = open_reader(resolve_db(db))
    try:
        return op(conn, args)
    finally:
        conn.close()


def read_event(db: str | os.PathLike | None, args: dict[str, Any]) -> dict[str, Any]:
    """event_read: see piwatchd.ops.read. Raises OpError (code not-found | invalid)."""
    from .ops.read import event_read

    return _read_op(db, event_read, args)


def trace_event(db: str | os.PathLike | None, args: dict[str, Any]) -> dict[str, Any]:
    """event_trace: see piwatchd.ops.trace. Raises OpError (code not-found | invalid)."""
    from .ops.trace import event_trace

    return _read_op(db, event_trace, args)
