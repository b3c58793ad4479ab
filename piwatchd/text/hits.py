"""What both text engines share: the time limit, the candidate rows of
ranked fragments coalesced into events, the hit row layout and snippets."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, NamedTuple

from .query import QueryTimeout, SearchFilters, build_candidates_sql

__all__ = [
    "Candidate",
    "HitRow",
    "Ranked",
    "SNIPPET_MAX_CHARS",
    "time_limit",
    "make_snippet",
    "ranked_events",
    "page_rows",
    "Chooser",
    "chosen_rows",
    "sort_key",
    "MARK_OPEN",
    "MARK_CLOSE",
]

SNIPPET_MAX_CHARS = 320
# Match marks inside raw snippet text; the projection removes them from source text.
MARK_OPEN, MARK_CLOSE = "\x02", "\x03"
_OPEN, _CLOSE = MARK_OPEN, MARK_CLOSE
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

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.conn.set_progress_handler(None, 1000)
        if exc_type is sqlite3.OperationalError and "interrupted" in str(exc):
            raise QueryTimeout(f"query exceeded its {self.seconds:g} s time limit") from exc


def make_snippet(raw: str) -> tuple[str, list[list[int]]]:
    """Plain text with match spans from an engine's raw snippet marked by \\x02/\\x03.

    Whitespace is collapsed and the result is cut to SNIPPET_MAX_CHARS around
    the first match; the text itself is never altered otherwise.
    """
    # Whitespace runs collapsed, ends stripped: str.split's C loop (the same
    # Unicode whitespace as re's \s) costs a tenth of re.sub per snippet.
    raw = " ".join(raw.split())
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
            [max(s + shift, len(prefix)), min(e + shift, len(prefix) + hi - lo)] for s, e in spans if e > lo and s < hi
        ]
    return text, spans


class Candidate(NamedTuple):
    """A row of `query.build_candidates_sql`: a fragment with its event and session."""

    frag_rowid: int
    fragment_id: str
    kind: str
    tool_name: str | None
    event_rowid: int
    session_id: str
    entry_id: str
    ordinal: int
    type: str
    role: str | None
    ts_ms: int | None
    is_error: int
    context_role: str
    branch_state: str
    selection_state: str
    cwd: str | None
    session_name: str | None


class Ranked(NamedTuple):
    """An event as ranked: the score and id of its best fragment (the one
    shown as evidence) and that fragment's candidate row."""

    score: Any  # a float, or an engine's (score, length) pair; lower is better
    fragment_id: str
    row: Candidate


class HitRow(NamedTuple):
    """One event of a page, its best fragment as evidence (also the layout of
    `piwatchd.text.fts5.sql.build_search_sql`'s rows)."""

    frag_rowid: int
    score: float
    fragment_id: str
    kind: str
    tool_name: str | None
    session_id: str
    entry_id: str
    type: str
    role: str | None
    ts_ms: int | None
    is_error: int
    context_role: str
    branch_state: str
    selection_state: str
    cwd: str | None
    session_name: str | None
    matched: int
    # The tier that found the event and, below exact, the query words its
    # evidence holds and misses (`piwatchd.text.tiers`).
    tier: str = "exact"
    words: tuple[str, ...] | None = None
    missing: tuple[str, ...] | None = None


# Which ranked rows of a page get snippets (and match counts), given the rows'
# session ids in rank order; None: the first `limit` rows (a page of events).
Chooser = Callable[[Sequence[str]], list[int]]


def chosen_rows(chooser: Chooser | None, session_ids: Sequence[str], limit: int) -> list[int]:
    return chooser(session_ids) if chooser is not None else list(range(min(limit, len(session_ids))))


def sort_key(ranked: Ranked) -> tuple[Any, ...]:
    row = ranked.row
    ts = row.ts_ms
    # The full query's ORDER BY score, ts_ms DESC (NULLs last), session_id, ordinal.
    return (ranked.score, ts is None, -(ts or 0), row.session_id, row.ordinal)


def ranked_events(conn: sqlite3.Connection, filters: SearchFilters, score: dict[int, Any]) -> list[Ranked]:
    """The events of the scored fragments that pass the filters, each with its
    best fragment, in the one-query plan's order."""
    best: dict[int, Ranked] = {}
    ids = list(score)
    for start in range(0, len(ids), 20_000):
        for values in conn.execute(*build_candidates_sql(filters, ids[start : start + 20_000])):
            row = Candidate._make(values)
            ranked = Ranked(score[row.frag_rowid], row.fragment_id, row)
            current = best.get(row.event_rowid)
            if current is None or ranked[:2] < current[:2]:
                best[row.event_rowid] = ranked
    return sorted(best.values(), key=sort_key)


def page_rows(page: list[Ranked], counts: dict[int, int], tier: str = "exact") -> list[HitRow]:
    """Ranked events -> HitRow, with each event's matched-fragment count and
    the tier that found it."""
    return [
        HitRow(
            c.frag_rowid,
            score,
            c.fragment_id,
            c.kind,
            c.tool_name,
            c.session_id,
            c.entry_id,
            c.type,
            c.role,
            c.ts_ms,
            c.is_error,
            c.context_role,
            c.branch_state,
            c.selection_state,
            c.cwd,
            c.session_name,
            counts.get(c.event_rowid, 1),
            tier,
        )
        for score, _, c in page
    ]
