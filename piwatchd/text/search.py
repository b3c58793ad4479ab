"""Run a search on a read-only connection, whichever text engine built the
index: rank fragments, coalesce them into event hits, and build bounded,
marked snippets for the returned page only.

The engine object that built the index (`piwatchd.text.engine.engine_of`)
ranks the page: its rows in one layout (`piwatchd.text.hits.page_rows`), raw
marked snippets and any repairs, rendered here the same way whichever engine ran.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import get_args

from piwatch import wire

from .engine import TextEngine, engine_of
from .grouping import GROUP_EVENTS_MAX, SessionPager
from .hits import SNIPPET_MAX_CHARS, HitRow, make_snippet, time_limit
from .query import QueryTimeout, SearchRequest, parse_query, validate_page, visible_scope
from .tiers import content_terms

__all__ = ["search", "make_snippet", "iso_time", "SNIPPET_MAX_CHARS", "QueryTimeout", "time_limit"]


def iso_time(ms: int | None) -> str | None:
    """A timestamp in ms as the wire's ISO 8601 UTC text."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def search(conn: sqlite3.Connection, request: SearchRequest, *, timeout: float | None = 10.0) -> wire.SearchResult:
    """One page of event hits as the wire's `SearchResult` (without its scope);
    grouped by session, `hits` is empty and `sessions` holds the page."""
    validate_page(request)
    engine = engine_of(conn)
    deadline = time.monotonic() + timeout if timeout else None
    if request.group == "session":
        result = _grouped(conn, request, engine, deadline, timeout)
    else:
        need = request.offset + request.limit + 1
        with time_limit(conn, timeout):
            rows, snippets, repairs = engine.ranked_page(conn, request, need, deadline, None)
        shown = rows[: request.limit]
        result = _result(request, _hits(request, shown, snippets), len(rows) > request.limit, shown, repairs)
    if request.offset == 0 and not result.hits and not result.sessions:
        result.words = _word_counts(conn, request, engine, deadline, timeout)
    return result


def _word_counts(
    conn: sqlite3.Connection,
    request: SearchRequest,
    engine: TextEngine,
    deadline: float | None,
    timeout: float | None,
) -> list[wire.WordCount] | None:
    """Each content word of a query that found nothing, by itself: the events
    the caller may see that hold it, as the query matches it (as written,
    and by its forms unless `exact`; a repair of it is not it), with every
    filter. Without them a caller learns only that no event holds enough of
    its words together, and concludes the history holds none of them.
    One ranked search per word on the one search path (`own_forms`: its
    exact and forms matches as one; no repair is looked up; none for a word
    found in no form), nothing projected (no snippet is chosen), at most
    WORD_COUNTS_MAX words of WORD_COUNT_MAX + 1 events each. None for a query of fewer than 2 content words (its result
    is its word's count), and from an engine that does not count them."""
    words = content_terms(parse_query(request.query))
    if len(words) < 2 or not getattr(engine, "counts_words", False):
        return None
    counts = []
    with time_limit(conn, timeout):
        for term in words[: wire.WORD_COUNTS_MAX]:
            word = f'"{term.text}"' if term.phrase else term.text
            alone = replace(request, query=word, limit=wire.WORD_COUNT_MAX, own_forms=True)
            rows, _, _ = engine.ranked_page(conn, alone, wire.WORD_COUNT_MAX + 1, deadline, _no_snippets)
            n = len(rows)
            counts.append(
                wire.WordCount(word=term.text, events=min(n, wire.WORD_COUNT_MAX), more=n > wire.WORD_COUNT_MAX)
            )
    return counts


def _no_snippets(session_ids: Sequence[str]) -> list[int]:
    return []


def _grouped(
    conn: sqlite3.Connection,
    request: SearchRequest,
    engine: TextEngine,
    deadline: float | None,
    timeout: float | None,
) -> wire.SearchResult:
    """One ranked scan of the best GROUP_EVENTS_MAX events (one more to learn
    whether more matched), grouped by session; snippets for the evidence only."""
    pager = SessionPager(request.offset, request.limit)
    scan = replace(request, offset=0, limit=GROUP_EVENTS_MAX, group="event")
    with time_limit(conn, timeout):
        rows, snippets, repairs = engine.ranked_page(conn, scan, GROUP_EVENTS_MAX + 1, deadline, pager)
    shown = [rows[g.evidence] for g in pager.page]
    evidence = _hits(request, shown, snippets)
    result = _result(request, [], pager.has_more, shown, repairs)
    result.sessions = [
        wire.SessionHit(
            session_id=g.session_id,
            session_name=hit.session_name,
            cwd=hit.cwd,
            # The session's span is the caller's to see: the api fills it (Shown.session_hit).
            first_timestamp=None,
            last_timestamp=None,
            matching_events=g.matching_events,
            evidence=hit,
        )
        for g, hit in zip(pager.page, evidence, strict=True)
    ]
    result.grouped_events = pager.grouped
    result.grouping_capped = pager.capped
    return result


def _result(
    request: SearchRequest,
    hits: list[wire.Hit],
    has_more: bool,
    shown: list[HitRow],
    repairs: list[tuple[str, str]],
) -> wire.SearchResult:
    """The page, its repairs ("did you mean") and whether a shown hit is below exact."""
    return wire.SearchResult(
        query=request.query,
        limit=request.limit,
        offset=request.offset,
        has_more=has_more,
        hits=hits,
        repairs=[wire.Repair(word=w, replacement=r) for w, r in repairs],
        relaxed=any(r.tier != "exact" for r in shown),
    )


def _hits(request: SearchRequest, rows: list[HitRow], snippets: dict[int, str]) -> list[wire.Hit]:
    # Scores only for a caller that may see everything: both engines' scores
    # weigh words by their rarity in the whole index, so a scoped caller
    # would read other projects' statistics in them (docs/concepts.md).
    scored = visible_scope(request.filters) is None
    hits: list[wire.Hit] = []
    for r in rows:
        text, spans = make_snippet(snippets.get(r.frag_rowid, ""))
        below = r.tier != "exact"
        hits.append(
            wire.Hit(
                session_id=r.session_id,
                entry_id=r.entry_id,
                event_type=r.type,
                role=r.role,
                timestamp=iso_time(r.ts_ms),
                cwd=r.cwd,
                session_name=r.session_name,
                evidence=wire.Evidence(fragment_id=r.fragment_id, kind=r.kind, tool_name=r.tool_name),
                matched_fragments=r.matched,
                score=round(-float(r.score), 6) if scored else None,
                is_error=bool(r.is_error),
                context_role=r.context_role,
                branch_state=r.branch_state,
                selection_state=r.selection_state,
                snippet=text,
                spans=[(a, b) for a, b in spans],
                tier=_TIERS.get(r.tier, "exact"),
                matched=list(r.words or ()) if below else None,
                missing=list(r.missing or ()) if below else None,
            )
        )
    return hits


_TIERS: dict[str, wire.Tier] = {t: t for t in get_args(wire.Tier)}
