"""FTS5's SQL (pure): the query's terms as an FTS5 expression, and the
statements of the FTS5 plans (`piwatchd.text.fts5.search`).

Nothing a user types is ever executed as FTS5 syntax: every term and phrase
becomes an FTS5 string literal, so `NEAR(a b)`, `col:x`, `a OR b`, `^x`, `x*`
and a lone `"` search for their words.
"""

from __future__ import annotations

from typing import Any

from ..query import HIT_COLUMNS, HIT_JOINS, SearchRequest, Term, filter_clauses, parse_query, validate_page

__all__ = ["fts_expression", "build_top_fragments_sql", "build_search_sql"]


def fts_expression(terms: list[Term]) -> str:
    """Every term as an FTS5 string: `"a""b"` matches the tokens of a"b, never an operator."""
    return " ".join('"' + t.text.replace('"', '""') + '"' for t in terms)


def build_top_fragments_sql(expression: str, k: int) -> tuple[str, list[Any]]:
    """Phase 1 of a search: the k best-ranked fragments, from the FTS index alone."""
    return "SELECT rowid, rank FROM fragments_fts WHERE fragments_fts MATCH ? ORDER BY rank, rowid LIMIT ?", [
        expression,
        k,
    ]


def build_search_sql(request: SearchRequest, *, lookahead: int = 0) -> tuple[str, list[Any]]:
    """One query ranking every match: one row per matching event (its best
    fragment). Exact for any filters; the fallback of the two-phase search.

    `lookahead` extra rows tell the caller whether another page exists.
    """
    validate_page(request)
    expression = fts_expression(parse_query(request.query))
    where, filter_params = filter_clauses(request.filters)
    params: list[Any] = [expression] + filter_params
    sql = f"""
WITH matches AS (
    SELECT fragments_fts.rowid AS frag_rowid, fragments_fts.rank AS score
    FROM fragments_fts WHERE fragments_fts MATCH ?
),
hits AS (
    SELECT m.frag_rowid, m.score, {HIT_COLUMNS},
           row_number() OVER (PARTITION BY f.event_rowid ORDER BY m.score, f.fragment_id) AS rn,
           count(*) OVER (PARTITION BY f.event_rowid) AS matched
    FROM matches m
    JOIN fragments f ON f.frag_rowid = m.frag_rowid
    {HIT_JOINS}
    WHERE {" AND ".join(where) or "1"}
)
SELECT frag_rowid, score, fragment_id, kind, tool_name, session_id, entry_id, type, role, ts_ms,
       is_error, context_role, branch_state, selection_state, cwd, session_name, matched
FROM hits WHERE rn = 1
ORDER BY score, ts_ms DESC, session_id, ordinal
LIMIT ? OFFSET ?"""
    return sql, params + [request.limit + lookahead, request.offset]
