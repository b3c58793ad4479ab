"""The FTS5 provider's search: three exact plans, cheapest first.

Ranking every fragment that matches a common word costs time in proportion
to the matches (FTS5's bm25 scores each), so: filter-first (rank inside the
fragment-rowid ranges of the sessions a session or workspace filter allows),
two-phase (rank from the FTS index alone, join only the best), and the one
query that ranks every match. All give the same order
(`tests/test_search_plans.py`).
"""

from __future__ import annotations

import sqlite3

from ..hits import MARK_CLOSE, MARK_OPEN, Candidate, Chooser, HitRow, Ranked, chosen_rows, page_rows, ranked_events
from ..query import SearchFilters, SearchRequest, build_candidates_sql, parse_query, roots_clause
from .sql import build_search_sql, build_top_fragments_sql, fts_expression

__all__ = ["ranked_page"]


# Phase-1 sizes: fragments ranked from the FTS index alone before joining.
PHASE1_START = 64
PHASE1_MAX = 4096


def _two_phase(conn: sqlite3.Connection, request: SearchRequest, expression: str, need: int) -> list[Ranked] | None:
    """The first `need` events in exact rank order, from the top-ranked
    fragments only; None when the filters are too selective for that to pay
    (the caller then ranks every match in one query).

    Each round ranks every match again inside FTS5, so at most two rounds
    run: the second is sized from how many candidates the first one kept.
    """
    k = max(PHASE1_START, need * 4)
    for _round in range(2):
        top = conn.execute(*build_top_fragments_sql(expression, k)).fetchall()
        events = ranked_events(conn, request.filters, dict(top))
        if len(top) < k:
            return events[:need]  # every match was ranked: exact
        # Every event scoring strictly better than the k-th fragment is
        # complete and correctly placed; the need-th one must be among them.
        if len(events) >= need and events[need - 1].score < top[-1][1]:
            return events[:need]
        # Size the next round from the share of fragments the filters kept.
        k = k * 2 * need // max(len(events), 1) + k
        if k > PHASE1_MAX:
            return None
    return None


# Filter-first plan limits: ranking inside rowid ranges is cheap per range.
FILTER_FIRST_MAX_FRAGMENTS = 100_000
FILTER_FIRST_MAX_RANGES = 512


def _session_scope(conn: sqlite3.Connection, filters: SearchFilters) -> list[str] | None:
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


def _filter_first(conn: sqlite3.Connection, request: SearchRequest, expression: str, need: int) -> list[Ranked] | None:
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
    total = conn.execute(
        f"SELECT coalesce(sum(entry_count), 0) FROM sessions WHERE session_id IN ({marks})", sessions
    ).fetchone()[0]
    if total > FILTER_FIRST_MAX_FRAGMENTS:
        return None
    rowids = [
        r[0]
        for r in conn.execute(
            "SELECT f.frag_rowid FROM sessions s JOIN events e ON e.session_key = s.session_key"
            f" JOIN fragments f ON f.event_rowid = e.event_rowid WHERE s.session_id IN ({marks}) ORDER BY f.frag_rowid",
            sessions,
        )
    ]
    ranges = _rowid_ranges(rowids)
    if len(ranges) > FILTER_FIRST_MAX_RANGES:
        return None
    score: dict[int, float] = {}
    for low, high in ranges:
        score.update(
            conn.execute(
                "SELECT rowid, rank FROM fragments_fts WHERE fragments_fts MATCH ? AND rowid BETWEEN ? AND ?",
                (expression, low, high),
            )
        )
    return ranked_events(conn, request.filters, score)[:need]


def _matched_counts(
    conn: sqlite3.Connection, request: SearchRequest, expression: str, event_rowids: list[int]
) -> dict[int, int]:
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
            event_rowid = Candidate._make(row).event_rowid
            counts[event_rowid] = counts.get(event_rowid, 0) + 1
    return counts


def ranked_page(
    conn: sqlite3.Connection,
    request: SearchRequest,
    need: int,
    deadline: float | None = None,
    chooser: Chooser | None = None,
) -> tuple[list[HitRow], dict[int, str], list[tuple[str, str]]]:
    """Rows in the hit layout (offset applied, up to `need` - offset) and
    FTS5's marked snippet per fragment rowid, for the chosen rows (default:
    the first `limit`). The exact tier only: this engine makes no repairs
    (README, engines)."""
    expression = fts_expression(parse_query(request.query))
    ranked = _filter_first(conn, request, expression, need)
    if ranked is None:
        ranked = _two_phase(conn, request, expression, need)
    if ranked is None:
        rows = [HitRow(*r) for r in conn.execute(*build_search_sql(request, lookahead=1))]
    else:
        page = ranked[request.offset :]
        counts = _matched_counts(conn, request, expression, [ranked.row.event_rowid for ranked in page]) if page else {}
        rows = page_rows(page, counts)
    snippets: dict[int, str] = {}
    ids = [rows[i].frag_rowid for i in chosen_rows(chooser, [r.session_id for r in rows], request.limit)]
    if ids:
        for rowid, snip in conn.execute(
            "SELECT rowid, snippet(fragments_fts, -1, ?, ?, '…', 24) FROM fragments_fts"
            f" WHERE fragments_fts MATCH ? AND rowid IN ({','.join('?' * len(ids))})",
            [MARK_OPEN, MARK_CLOSE, expression, *ids],
        ):
            snippets[rowid] = snip or ""
    return rows, snippets, []
