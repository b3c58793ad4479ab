"""Run a search on a read-only connection: rank fragments, coalesce them into
event hits, and build bounded, marked snippets for the returned page only."""

from __future__ import annotations

import re
import sqlite3
import time
from datetime import datetime, timezone
from typing import Any

from .query import SearchRequest, build_search_sql, fts_expression, parse_query

__all__ = ["search", "make_snippet", "SNIPPET_MAX_CHARS", "QueryTimeout", "time_limit"]

SNIPPET_MAX_CHARS = 320
_OPEN, _CLOSE = "\x02", "\x03"
_WS = re.compile(r"\s+")


class QueryTimeout(Exception):
    pass


class time_limit:
    """Abort statements on `conn` that run longer than `seconds` (datasette's trick)."""

    def __init__(self, conn: sqlite3.Connection, seconds: float | None) -> None:
        self.conn, self.seconds = conn, seconds

    def __enter__(self) -> "time_limit":
        if self.seconds:
            deadline = time.monotonic() + self.seconds
            self.conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1000)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.conn.set_progress_handler(None, 1000)
        if exc_type is sqlite3.OperationalError and "interrupted" in str(exc):
            raise QueryTimeout(f"query exceeded its {self.seconds:g} s time limit") from exc


def make_snippet(raw: str) -> tuple[str, list[list[int]]]:
    """Plain text with match spans from an FTS5 snippet marked by \\x02/\\x03.

    Whitespace is collapsed and the result is cut to SNIPPET_MAX_CHARS around
    the first match; the text itself is never altered otherwise.
    """
    raw = _WS.sub(" ", raw).strip()
    text_parts: list[str] = []
    spans: list[list[int]] = []
    pos = 0
    start = None
    for ch in raw:
        if ch == _OPEN:
            start = pos
        elif ch == _CLOSE:
            if start is not None and pos > start:
                spans.append([start, pos])
            start = None
        else:
            text_parts.append(ch)
            pos += 1
    text = "".join(text_parts)
    if len(text) > SNIPPET_MAX_CHARS:
        first = spans[0][0] if spans else 0
        lo = max(0, min(first - SNIPPET_MAX_CHARS // 3, len(text) - SNIPPET_MAX_CHARS))
        hi = lo + SNIPPET_MAX_CHARS
        prefix = "…" if lo > 0 else ""
        suffix = "…" if hi < len(text) else ""
        shift = len(prefix) - lo
        text = prefix + text[lo:hi] + suffix
        spans = [
            [max(s + shift, len(prefix)), min(e + shift, len(prefix) + hi - lo)]
            for s, e in spans
            if e > lo and s < hi
        ]
    return text, spans


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def search(conn: sqlite3.Connection, request: SearchRequest, *, timeout: float | None = 10.0) -> dict[str, Any]:
    """Return `{"hits": [...], "query": ..., "limit", "offset", "has_more"}`."""
    sql, params = build_search_sql(request, lookahead=1)
    expression = params[0]
    with time_limit(conn, timeout):
        rows = conn.execute(sql, params).fetchall()
        has_more = len(rows) > request.limit
        rows = rows[: request.limit]
        snippets: dict[int, str] = {}
        if rows:
            ids = [r[0] for r in rows]
            for rowid, snip in conn.execute(
                "SELECT rowid, snippet(fragments_fts, -1, ?, ?, '…', 24) FROM fragments_fts"
                f" WHERE fragments_fts MATCH ? AND rowid IN ({','.join('?' * len(ids))})",
                [_OPEN, _CLOSE, expression, *ids],
            ):
                snippets[rowid] = snip or ""
    hits = []
    for r in rows:
        text, spans = make_snippet(snippets.get(r[0], ""))
        hits.append(
            {
                "sessionId": r[5],
                "entryId": r[6],
                "eventType": r[7],
                "role": r[8],
                "timestamp": _iso(r[9]),
                "cwd": r[14],
                "sessionName": r[15],
                "evidence": {"fragmentId": r[2], "kind": r[3], "toolName": r[4]},
                "matchedFragments": r[16],
                "score": round(-float(r[1]), 6),
                "isError": bool(r[10]),
                "contextRole": r[11],
                "branchState": r[12],
                "selectionState": r[13],
                "snippet": text,
                "spans": spans,
            }
        )
    return {
        "query": request.query,
        "fts": fts_expression(parse_query(request.query)),
        "limit": request.limit,
        "offset": request.offset,
        "hasMore": has_more,
        "hits": hits,
    }
