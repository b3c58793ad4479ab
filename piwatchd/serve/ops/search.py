"""search: ranked event hits in the sessions the caller may see.

The wire's filters become the engine's request (paths normalized, the
caller's roots, own session and cutoff caps applied from the request's one
visibility). With `waitSeconds`, the op first waits, holding no request
slot, until the named sessions' files are searchable up to their last
complete line; it wakes on each commit.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import replace

from piwatch import wire
from piwatch.protocol import ErrorCode, ProtocolError

from ...ingest.commits import CommitSignal
from ...store.schema import searchable_bytes
from ...text.query import QueryError, SearchFilters, SearchRequest
from ...text.search import QueryTimeout, search as run_search
from ..shown import Shown
from .request import OpRequest, bad_request, file_progress

__all__ = ["HEAVY_ROWS", "heavy", "search", "search_request"]


HEAVY_ROWS = 100  # a search ranking more rows than this (offset + limit) takes a heavy slot


def heavy(args: wire.SearchArgs) -> bool:
    """An expensive search: a deep or long page, or sessions grouped from many events."""
    return args.offset + args.limit > HEAVY_ROWS or args.group == "session"


def search(
    args: wire.SearchArgs,
    req: OpRequest,
    *,
    commits: CommitSignal | None = None,
    mark_dirty: Callable[[str], None] = lambda path: None,
    only_events: tuple[int, ...] = (),
    slot: bool = True,
) -> wire.SearchResult:
    """One page of hits (or sessions); `only_events` restricts it to those
    events (a follow's new ones); `slot` False runs inside a slot already held."""
    vis = req.vis
    request = search_request(args)
    scope = vis.scope
    targeted = bool(scope.current_session) and scope.current_session in args.filters.session_id
    if args.wait_seconds:
        # Waiting holds no request slot; it wakes on each commit.
        own = (scope.current_file,) if targeted and scope.current_file else ()
        seconds = min(args.wait_seconds, wire.MAX_WAIT_SECONDS)
        _wait_for(req, args.filters.session_id, own, seconds, commits, mark_dirty)
        vis.refresh()
    with req.slot(req.deadline, heavy=heavy(args)) if slot else contextlib.nullcontext():
        exclude = (scope.current_session,) if scope.current_session and not (targeted and scope.cutoff_entry) else ()
        filters = replace(
            request.filters,
            authorized_roots=scope.roots,
            exclude_sessions=request.filters.exclude_sessions + exclude,
            ordinal_caps=vis.search_caps(only_events),
            exclude_own_results=not args.include_own_results,
            event_rowids=only_events,
        )
        try:
            result = run_search(vis.conn, replace(request, filters=filters), timeout=req.query_seconds())
        except QueryError as exc:
            raise ProtocolError(ErrorCode.QUERY_ERROR, str(exc)) from None
        except QueryTimeout as exc:
            raise ProtocolError(ErrorCode.TIMEOUT, str(exc)) from None
    result = Shown(vis).search(result)  # what the caller may see of each hit and session, in one step
    req.sessions = [h.session_id for h in result.hits] + [s.session_id for s in result.sessions or []]
    return result


def _wait_for(
    req: OpRequest,
    session_ids: list[str],
    paths: tuple[str, ...],
    seconds: float,
    commits: CommitSignal | None,
    mark_dirty: Callable[[str], None],
) -> None:
    """Wait until the named sessions the request may see have their files (and
    `paths`: the caller's own file, which may not be indexed yet) caught up."""
    vis = req.vis
    deadline = min(time.monotonic() + seconds, req.deadline - 0.5)
    files = {row.path for row in vis.sessions(session_ids).values()} | set(paths)
    while files:
        seen = commits.generation if commits else 0
        pending = [p for p in sorted(files) if not _caught_up(vis.conn, p)]
        if not pending or time.monotonic() >= deadline:
            return
        for path in pending:
            mark_dirty(path)
        if commits is None:
            return  # no ingest service (the local CLI): nothing will change while we wait
        commits.wait(seen, deadline - time.monotonic())


def _caught_up(conn: sqlite3.Connection, path: str) -> bool:
    # Searchable, not just ingested: the text index may commit a moment later.
    searchable = searchable_bytes(conn, path)
    size, done = file_progress(path, searchable or 0)
    return size is None or (searchable is not None and done)


def search_request(args: wire.SearchArgs) -> SearchRequest:
    """The wire's search args as the engine's request (paths normalized)."""
    f = args.filters

    def norm(path: str | None) -> str | None:
        return os.path.normpath(path) if path else None

    if any("\x00" in p for p in (f.cwd or "", f.cwd_under or "", *f.files)):
        raise bad_request("paths in filters must not contain NUL")
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
    return SearchRequest(args.query, filters, args.limit, args.offset, args.exact, args.group)
