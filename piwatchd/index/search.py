"""Run a search on a read-only connection, whichever text engine built the
index: rank fragments, coalesce them into event hits, and build bounded,
marked snippets for the returned page only.

Engines (providers) are `piwatchd.index.text_search` (Tantivy, the default)
and `piwatchd.index.fts5_search`; each returns the page's rows in one layout
(`piwatchd.index.hits.page_rows`) and raw marked snippets.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from . import fts5_search, text_search
from .grouping import GROUP_EVENTS_MAX, SessionPager
from .hits import SNIPPET_MAX_CHARS, Chooser, HitRow, make_snippet, time_limit
from .query import QueryTimeout, SearchRequest, validate_page
from .schema import DEFAULT_ENGINE, index_engine

__all__ = ["search", "make_snippet", "iso_time", "SNIPPET_MAX_CHARS", "QueryTimeout", "time_limit"]

RankedPage = Callable[
    [sqlite3.Connection, SearchRequest, int, "float | None", "Chooser | None"],
    tuple[list[HitRow], dict[int, str], list[tuple[str, str]]],
]
ENGINES: dict[str, RankedPage] = {"tantivy": text_search.ranked_page, "fts5": fts5_search.ranked_page}


def iso_time(ms: int | None) -> str | None:
    """A timestamp in ms as the wire's ISO 8601 UTC text."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def search(conn: sqlite3.Connection, request: SearchRequest, *, timeout: float | None = 10.0) -> dict[str, Any]:
    """Return `{"hits": [...], "query": ..., "limit", "offset", "hasMore"}`;
    grouped by session, `hits` is empty and `sessions` holds the page."""
    expression = validate_page(request)
    ranked_page = ENGINES[index_engine(conn) or DEFAULT_ENGINE]
    deadline = time.monotonic() + timeout if timeout else None
    if request.group == "session":
        return _grouped(conn, request, expression, ranked_page, deadline, timeout)
    need = request.offset + request.limit + 1
    with time_limit(conn, timeout):
        rows, snippets, repairs = ranked_page(conn, request, need, deadline, None)
    shown = rows[: request.limit]
    result = _result(request, expression, _hits(shown, snippets), len(rows) > request.limit)
    return {**result, **_relaxation(shown, repairs)}


def _grouped(
    conn: sqlite3.Connection,
    request: SearchRequest,
    expression: str,
    ranked_page: RankedPage,
    deadline: float | None,
    timeout: float | None,
) -> dict[str, Any]:
    """One ranked scan of the best GROUP_EVENTS_MAX events (one more to learn
    whether more matched), grouped by session; snippets for the evidence only."""
    pager = SessionPager(request.offset, request.limit)
    scan = replace(request, offset=0, limit=GROUP_EVENTS_MAX, group="event")
    with time_limit(conn, timeout):
        rows, snippets, repairs = ranked_page(conn, scan, GROUP_EVENTS_MAX + 1, deadline, pager)
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
    result = _result(request, expression, [], pager.has_more)
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


def _result(request: SearchRequest, expression: str, hits: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "query": request.query,
        "fts": expression,
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
