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
from datetime import UTC, datetime
from typing import Any

from . import fts5_search, text_search
from .hits import SNIPPET_MAX_CHARS, HitRow, make_snippet, time_limit
from .query import QueryTimeout, SearchRequest, validate_page
from .schema import DEFAULT_ENGINE, index_engine

__all__ = ["search", "make_snippet", "SNIPPET_MAX_CHARS", "QueryTimeout", "time_limit"]

RankedPage = Callable[[sqlite3.Connection, SearchRequest, int, "float | None"], tuple[list[HitRow], dict[int, str]]]
ENGINES: dict[str, RankedPage] = {"tantivy": text_search.ranked_page, "fts5": fts5_search.ranked_page}


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def search(conn: sqlite3.Connection, request: SearchRequest, *, timeout: float | None = 10.0) -> dict[str, Any]:
    """Return `{"hits": [...], "query": ..., "limit", "offset", "hasMore"}`."""
    expression = validate_page(request)
    need = request.offset + request.limit + 1
    ranked_page = ENGINES[index_engine(conn) or DEFAULT_ENGINE]
    deadline = time.monotonic() + timeout if timeout else None
    with time_limit(conn, timeout):
        rows, snippets = ranked_page(conn, request, need, deadline)
    return _result(request, expression, rows[: request.limit], snippets, len(rows) > request.limit)


def _result(
    request: SearchRequest, expression: str, rows: list[HitRow], snippets: dict[int, str], has_more: bool
) -> dict[str, Any]:
    hits = []
    for r in rows:
        text, spans = make_snippet(snippets.get(r.frag_rowid, ""))
        hits.append(
            {
                "sessionId": r.session_id,
                "entryId": r.entry_id,
                "eventType": r.type,
                "role": r.role,
                "timestamp": _iso(r.ts_ms),
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
            }
        )
    return {
        "query": request.query,
        "fts": expression,
        "limit": request.limit,
        "offset": request.offset,
        "hasMore": has_more,
        "hits": hits,
    }
