"""Run a search on a read-only connection, whichever text engine built the
index: rank fragments, coalesce them into event hits, and build bounded,
marked snippets for the returned page only.

The engine object that built the index (`piwatchd.text.engine.engine_of`)
ranks the page: its rows in one layout (`piwatchd.index.hits.page_rows`), raw
marked snippets and any repairs, rendered here the same way whichever engine ran.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from ..text.engine import TextEngine, engine_of
from .grouping import GROUP_EVENTS_MAX, SessionPager
from .hits import SNIPPET_MAX_CHARS, HitRow, make_snippet, time_limit
from .query import QueryTimeout, SearchRequest, validate_page

__all__ = ["search", "make_snippet", "iso_time", "SNIPPET_MAX_CHARS", "QueryTimeout", "time_limit"]


def iso_time(ms: int | None) -> str | None:
    """A timestamp in ms as the wire's ISO 8601 UTC text."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def search(conn: sqlite3.Connection, request: SearchRequest, *, timeout: float | None = 10.0) -> dict[str, Any]:
    """Return `{"hits": [...], "query": ..., "limit", "offset", "hasMore"}`;
    grouped by session, `hits` is empty and `sessions` holds the page."""
    validate_page(request)
    engine = engine_of(conn)
    deadline = time.monotonic() + timeout if timeout else None
    if request.group == "session":
        return _grouped(conn, request, engine, deadline, timeout)
    need = request.offset + request.limit + 1
    with time_limit(conn, timeout):
        rows, snippets, repairs = engine.ranked_page(conn, request, need, deadline, None)
    shown = rows[: request.limit]
    result = _result(request, _hits(shown, snippets), len(rows) > request.limit)
    return {**result, **_relaxation(shown, repairs)}


def _grouped(
    conn: sqlite3.Connection,
    request: SearchRequest,
    engine: TextEngine,
    deadline: float | None,
    timeout: float | None,
) -> dict[str, Any]:
    """One ranked scan of the best GROUP_EVENTS_MAX events (one more to learn
    whether more matched), grouped by session; snippets for the evidence only."""
    pager = SessionPager(request.offset, request.limit)
    scan = replace(request, offset=0, limit=GROUP_EVENTS_MAX, group="event")
    with time_limit(conn, timeout):
        rows, snippets, repairs = engine.ranked_page(conn, scan, GROUP_EVENTS_MAX + 1, deadline, pager)
    shown = [rows[g.evidence] for g in pager.page]
    evidence = _hits(shown, snippets)
    sessions = [
        {
            "sessionId": g.session_id,
            "sessionName": hit["sessionName"],
            "cwd": hit["cwd"],
            # The session's span is the caller's to see: the api fills it (Visibility.describe_sessions).
            "firstTimestamp": None,
            "lastTimestamp": None,
            "matchingEvents": g.matching_events,
            "evidence": hit,
        }
        for g, hit in zip(pager.page, evidence, strict=True)
    ]
    result = _result(request, [], pager.has_more)
    return {
        **result,
        **_relaxation(shown, repairs),
        "sessions": sessions,
        "groupedEvents": pager.grouped,
        "groupingCapped": pager.capped,
    }


def _relaxation(shown: list[HitRow], repairs: list[tuple[str, str]]) -> dict[str, Any]:
    """The result's repairs ("did you mean") and whether a shown hit is below exact."""
    return {
        "repairs": [{"word": w, "replacement": r} for w, r in repairs],
        "relaxed": any(r.tier != "exact" for r in shown),
    }


def _result(request: SearchRequest, hits: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "query": request.query,
        "limit": request.limit,
        "offset": request.offset,
        "hasMore": has_more,
        "hits": hits,
    }


def _hits(rows: list[HitRow], snippets: dict[int, str]) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = []
    for r in rows:
        text, spans = make_snippet(snippets.get(r.frag_rowid, ""))
        hits.append(
            {
                "sessionId": r.session_id,
                "entryId": r.entry_id,
                "eventType": r.type,
                "role": r.role,
                "timestamp": iso_time(r.ts_ms),
                "cwd": r.cwd,
                "sessionName": r.session_name,
                "evidence": {"fragmentId": r.fragment_id, "kind": r.kind, "toolName": r.tool_name},
                "matchedFragments": r.matched,
                "score": round(-float(r.score), 6),
                "isError": bool(r.is_error),
                "contextRole": r.context_role,
                "branchState": r.branch_state,
                "selectionState": r.selection_state,
                "snippet": text,
                "spans": spans,
                "tier": r.tier,
            }
        )
        if r.tier != "exact":
            hits[-1]["matched"] = list(r.words or ())
            hits[-1]["missing"] = list(r.missing or ())
    return hits
