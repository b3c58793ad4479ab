"""Run a search on a read-only connection: rank fragments, coalesce them into
event hits, and build bounded, marked snippets for the returned page only."""

from __future__ import annotations

import re
import sqlite3
import time
from datetime import UTC, datetime
from typing import Any

from .query import (
    QueryTimeout,
    SearchRequest,
    build_candidates_sql,
    build_search_sql,
    build_top_fragments_sql,
    roots_clause,
    validate_page,
)
from .schema import index_engine
from .text_search import ranked_page

__all__ = ["search", "make_snippet", "SNIPPET_MAX_CHARS", "QueryTimeout", "time_limit"]

SNIPPET_MAX_CHARS = 320
_OPEN, _CLOSE = "\x02", "\x03"
_WS = re.compile(r"\s+")
_MARK = re.compile("([\x02\x03])")



class time_limit:
    """Abort statements on `conn` that run longer than `seconds` (datasette's trick)."""

    def __init__(self, conn: sqlite3.Connection, seconds: float | None) -> None:
        self.conn, self.seconds = conn, seconds

    def __enter__(self) -> time_limit:
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
    for part in _MARK.split(raw):
        if part == _OPEN:
            start = pos
        elif part == _CLOSE:
            if start is not None and pos > start:
                spans.append([start, pos])
            start = None
        elif part:
            text_parts.append(part)
            pos += len(part)
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
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# Phase-1 sizes: fragments ranked from the FTS index alone before joining.
PHASE1_START = 64
PHASE1_MAX = 4096


def _sort_key(c: tuple) -> tuple:
    score, _, row = c
    ts = row[10]
    # The full query's ORDER BY score, ts_ms DESC (NULLs last), session_id, ordinal.
    return (score, ts is None, -(ts or 0), row[5], row[7])


def _ranked_events(conn: sqlite3.Connection, filters, score: dict[int, float]) -> list[tuple]:
    """The events of the scored fragments that pass the filters, each with its
    best fragment as (score, fragment_id, row), in the one-query plan's order."""
    best: dict[int, tuple] = {}
    ids = list(score)
    for start in range(0, len(ids), 20_000):
        for row in conn.execute(*build_candidates_sql(filters, ids[start : start + 20_000])):
            cand = (score[row[0]], row[1], row)
            current = best.get(row[4])
            if current is None or cand[:2] < current[:2]:
                best[row[4]] = cand
    return sorted(best.values(), key=_sort_key)


def _two_phase(conn: sqlite3.Connection, request: SearchRequest, expression: str, need: int) -> list | None:
    """The first `need` events in exact rank order, from the top-ranked
    fragments only; None when the filters are too selective for that to pay
    (the caller then ranks every match in one query).

    Each round ranks every match again inside FTS5, so at most two rounds
    run: the second is sized from how many candidates the first one kept.
    """
    k = max(PHASE1_START, need * 4)
    for _round in range(2):
        top = conn.execute(*build_top_fragments_sql(expression, k)).fetchall()
        events = _ranked_events(conn, request.filters, dict(top))
        if len(top) < k:
            return events[:need]  # every match was ranked: exact
        # Every event scoring strictly better than the k-th fragment is
        # complete and correctly placed; the need-th one must be among them.
        if len(events) >= need and events[need - 1][0] < top[-1][1]:
            return events[:need]
        # Size the next round from the share of fragments the filters kept.
        k = k * 2 * need // max(len(events), 1) + k
        if k > PHASE1_MAX:
            return None
    return None


# Filter-first plan limits: ranking inside rowid ranges is cheap per range.
FILTER_FIRST_MAX_FRAGMENTS = 100_000
FILTER_FIRST_MAX_RANGES = 512


def _session_scope(conn: sqlite3.Connection, filters) -> list[str] | None:
    """The sessions a session or authorization filter confines the search
    to, or None when the filters do not name a session set."""
    sessions: set[str] | None = set(filters.session_ids) if filters.session_ids else None
    if filters.authorized_roots is not None:
        clause, params = roots_clause("cwd_real", filters.authorized_roots)
        rooted = {r[0] for r in conn.execute(f"SELECT session_id FROM sessions WHERE {clause}", params)}
        sessions = rooted if sessions is None else sessions & rooted
    return None if sessions is None else sorted(sessions - set(filters.exclude_sessions))


# Each ranged FTS5 statement recounts the phrase over the whole index for
# bm25's IDF; ranking a few thousand foreign rows in a gap is cheaper than
# another statement. Foreign rows are dropped by the filters afterwards.
RANGE_MERGE_GAP = 4096


def _rowid_ranges(rowids: list[int], gap: int = RANGE_MERGE_GAP) -> list[tuple[int, int]]:
    """Sorted rowids as few [low, high] ranges, bridging gaps up to `gap`."""
    ranges: list[list[int]] = []
    for r in rowids:
        if ranges and r - ranges[-1][1] <= gap + 1:
            ranges[-1][1] = r
        else:
            ranges.append([r, r])
    return [(a, b) for a, b in ranges]


def _filter_first(conn: sqlite3.Connection, request: SearchRequest, expression: str, need: int) -> list | None:
    """Rank only inside the fragment-rowid ranges of the sessions the filters
    allow (a session's fragments are mostly contiguous): exact, because every
    match in those sessions is ranked, and bm25 scores inside a rowid range
    equal the global ones. None when the scope is too large or scattered."""
    sessions = _session_scope(conn, request.filters)
    if sessions is None:
        return None
    if not sessions:
        return []
    marks = ",".join("?" * len(sessions))
    total = conn.execute(f"SELECT coalesce(sum(entry_count), 0) FROM sessions WHERE session_id IN ({marks})", sessions).fetchone()[0]
    if total > FILTER_FIRST_MAX_FRAGMENTS:
        return None
    rowids = [r[0] for r in conn.execute(
        f"SELECT f.frag_rowid FROM events e JOIN fragments f ON f.event_rowid = e.event_rowid"
        f" WHERE e.session_id IN ({marks}) ORDER BY f.frag_rowid", sessions)]
    ranges = _rowid_ranges(rowids)
    if len(ranges) > FILTER_FIRST_MAX_RANGES:
        return None
    score: dict[int, float] = {}
    for low, high in ranges:
        score.update(conn.execute(
            "SELECT rowid, rank FROM fragments_fts WHERE fragments_fts MATCH ? AND rowid BETWEEN ? AND ?",
            (expression, low, high)))
    return _ranked_events(conn, request.filters, score)[:need]


def _matched_counts(conn: sqlite3.Connection, request: SearchRequest, expression: str, event_rowids: list[int]) -> dict[int, int]:
    """How many fragments of each page event match (and pass the filters).

    The MATCH is restricted to the page's own fragments: an unrestricted
    `IN (SELECT rowid ... MATCH ?)` walks every match of a common word.
    """
    marks = ",".join("?" * len(event_rowids))
    own = [r[0] for r in conn.execute(f"SELECT frag_rowid FROM fragments WHERE event_rowid IN ({marks})", event_rowids)]
    matching = [
        r[0]
        for r in conn.execute(
            f"SELECT rowid FROM fragments_fts WHERE fragments_fts MATCH ? AND rowid IN ({','.join('?' * len(own))})",
            [expression, *own],
        )
    ]
    counts: dict[int, int] = {}
    if matching:
        for row in conn.execute(*build_candidates_sql(request.filters, matching)):
            counts[row[4]] = counts.get(row[4], 0) + 1
    return counts


def search(conn: sqlite3.Connection, request: SearchRequest, *, timeout: float | None = 10.0) -> dict[str, Any]:
    """Return `{"hits": [...], "query": ..., "limit", "offset", "hasMore"}`.

    Ranking every fragment that matches a common word costs time in
    proportion to the matches, so three exact plans are tried, cheapest
    first: filter-first (rank inside the allowed sessions' rowid ranges),
    two-phase (rank from the FTS index alone, join only the best), and the
    one query that ranks every match. All give the same order. The Tantivy
    engine (the default) ranks inside its own index with every filter
    applied there (`piwatchd.index.text_search`).
    """
    expression = validate_page(request)
    need = request.offset + request.limit + 1
    if index_engine(conn) == "tantivy":
        deadline = time.monotonic() + timeout if timeout else None
        with time_limit(conn, timeout):
            rows, snippets = ranked_page(conn, request, need, deadline)
        has_more = len(rows) > request.limit
        return _result(request, expression, rows[: request.limit], snippets, has_more)
    rows, snippets, has_more = _fts5_page(conn, request, expression, need, timeout)
    return _result(request, expression, rows, snippets, has_more)


def _fts5_page(conn: sqlite3.Connection, request: SearchRequest, expression: str, need: int,
               timeout: float | None) -> tuple[list, dict[int, str], bool]:
    with time_limit(conn, timeout):
        ranked = _filter_first(conn, request, expression, need)
        if ranked is None:
            ranked = _two_phase(conn, request, expression, need)
        if ranked is None:
            rows = conn.execute(*build_search_sql(request, lookahead=1)).fetchall()
        else:
            page = ranked[request.offset :]
            counts = _matched_counts(conn, request, expression, [c[2][4] for c in page]) if page else {}
            rows = [
                (r[0], score, r[1], r[2], r[3], r[5], r[6], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15], r[16],
                 counts.get(r[4], 1))
                for score, _, r in page
            ]
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
    return rows, snippets, has_more


def _result(request: SearchRequest, expression: str, rows: list, snippets: dict[int, str], has_more: bool) -> dict[str, Any]:
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
        "fts": expression,
        "limit": request.limit,
        "offset": request.offset,
        "hasMore": has_more,
        "hits": hits,
    }
