"""sessions: the sessions the caller may see, newest first, one page.

Scope filters (cwd, under, since, until) are search's own, and a query
lists the sessions holding one of its best hits, found through search's own
path (same authorization and cutoff). Each row is shown through its one
builder (`Shown.session_item`).
"""

from __future__ import annotations

from piwatch import wire

from ...store.catalog import list_sessions
from ...text.query import overridden, roots_clause, session_filter_clauses
from ..shown import Shown
from .request import OpRequest
from .search import search, search_request

__all__ = ["sessions"]


def sessions(args: wire.SessionsArgs, req: OpRequest) -> wire.SessionsResult:
    vis = req.vis
    scope = vis.scope
    where, params = ("1", []) if scope.roots is None else roots_clause("s.cwd_real", scope.roots)
    if scope.current_session:
        # The caller's own session is never listed: its later entries lie past the cutoff.
        where += " AND s.session_id != ?"
        params.append(scope.current_session)
    # Forks capped by the cutoff are ordered and filtered by their visible span, not their later activity.
    with req.limited(slot=False):
        spans = vis.capped_spans() if vis.has_cutoff else {}
    first = overridden("s.first_ms", {sid: f for sid, (f, _) in spans.items()})
    last = overridden("s.last_ms", {sid: t for sid, (_, t) in spans.items()})
    extra, extra_params = session_filter_clauses(search_request(_as_search(args, 1, 0)).filters, first, last)
    where, params = " AND ".join([where, *extra]), [*params, *extra_params]
    with req.slot(req.deadline, heavy=args.query is not None):  # a query ranks its best 1,000 hits
        if args.query is not None:
            ids = _matching_sessions(args, req)
            where += f" AND s.session_id IN ({','.join('?' * len(ids))})" if ids else " AND 0"
            params.extend(ids)
        with req.limited(slot=False):
            rows = list_sessions(vis.conn, where, params, args.limit + 1, args.offset, last)
            shown = Shown(vis)  # each row as the caller may see it (a capped fork: its visible events)
            items = [shown.session_item(r) for r in rows[: args.limit]]
    return wire.SessionsResult(sessions=items, has_more=len(rows) > args.limit, limit=args.limit, offset=args.offset)


def _matching_sessions(args: wire.SessionsArgs, req: OpRequest) -> list[str]:
    """Sessions holding one of the query's best hits, through search's own
    path (same authorization and cutoff): bounded by SESSIONS_QUERY_HITS."""
    found: dict[str, None] = {}
    for offset in range(0, wire.SESSIONS_QUERY_HITS, wire.MAX_LIMIT):
        result = search(_as_search(args, wire.MAX_LIMIT, offset), req, slot=False)
        found.update(dict.fromkeys(h.session_id for h in result.hits))
        if not result.has_more:
            break
    req.sessions = []  # the listing names its sessions itself; the probe's hits need no freshness
    return list(found)


def _as_search(args: wire.SessionsArgs, limit: int, offset: int) -> wire.SearchArgs:
    """`sessions`' query and scope filters as search args (one definition of the filters)."""
    filters = wire.SearchFilters(cwd=args.cwd, cwd_under=args.cwd_under, since_ms=args.since_ms, until_ms=args.until_ms)
    return wire.SearchArgs(query=args.query or "", filters=filters, limit=limit, offset=offset)
