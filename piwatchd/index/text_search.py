"""Search with the Tantivy engine: rank fragments inside the text index (every
filter applied there), coalesce them into events, count matches and build
snippets for the page only.

Scores are negated so that lower is better, as FTS5's rank. Ranking is
exact: the k best fragments are fetched, and k grows until the page's last
event scores better than the k-th fragment, so no event that belongs on the
page can be missing (an event's best fragment is always among the fragments
scoring above it). Ties at that boundary are fetched too (up to TIE_K_MAX
fragments), so tied events are ordered as FTS5 orders them: newest first.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections import Counter

from ..model import Fragment
from .hits import MARK_CLOSE, MARK_OPEN, Chooser, HitRow, chosen_rows, page_rows, ranked_events
from .query import QueryTimeout, SearchRequest, Term, parse_query
from .source_events import project_rows
from .tantivy_text import TantivyText, text_reader

__all__ = ["ranked_page"]

FIRST_K = 64
MAX_K = 1 << 20
TIE_K_MAX = 4096
SNIPPET_WINDOW = 420


def _ranked(
    conn: sqlite3.Connection,
    text: TantivyText,
    request: SearchRequest,
    terms: list[Term],
    need: int,
    deadline: float | None,
) -> tuple[list[tuple], dict[int, int] | None]:
    """The first `need` events, best first, and, when every match was
    fetched on the way, how many fragments of each event match."""
    query = text.query(terms, request.filters)
    k = max(FIRST_K, need * 2)
    while True:
        if deadline is not None and time.monotonic() > deadline:
            raise QueryTimeout("the search ran past its time limit; narrow it with more words or filters")
        top = text.top(query, k)
        # (negated score, length): equal scores rank the shorter text first.
        events = ranked_events(conn, request.filters, {frag: (-score, n) for score, frag, _, n in top})
        events = [(score[0], fid, row) for score, fid, row in events]
        if len(top) < k:
            return events[:need], Counter(event for _, _, event, _ in top)
        if len(events) >= need:
            last, boundary = events[need - 1][0], -top[-1][0]
            # Strictly better than every fragment not fetched: exact. Tied
            # with the boundary: more tied fragments may sort first (newer
            # first, as FTS5 orders ties), so fetch them, up to a bound.
            if last < boundary or (last == boundary and k >= TIE_K_MAX):
                return events[:need], None
        if k >= MAX_K:
            return events[:need], None
        k *= 4


def _matched_counts(text: TantivyText, request: SearchRequest, terms: list[Term], page: list[tuple]) -> dict[int, int]:
    event_rowids = [c[2].event_rowid for c in page]
    query = text.query(terms, request.filters, events=event_rowids)
    return Counter(event for _, _, event, _ in text.top(query, 10_000))


def _match_pattern(tokens: set[str]) -> re.Pattern[str]:
    alts = "|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True))
    # Word boundaries as the analyzer sees them: letters and digits only.
    return re.compile(rf"(?<![^\W_])(?:{alts})(?![^\W_])", re.IGNORECASE)


def _window(text: TantivyText, body: str, pattern: re.Pattern[str], tokens: set[str]) -> str | None:
    """The snippet window around the first match in `body`, matches marked;
    None when nothing in `body` matches."""
    first = pattern.search(body) if tokens else None
    if first is not None:
        lo = max(0, first.start() - SNIPPET_WINDOW // 4)
        hi = min(len(body), lo + SNIPPET_WINDOW)
        return _marked(body, lo, hi, [m.span() for m in pattern.finditer(body, lo, hi)])
    if body.isascii():
        return None
    # Folded forms (`Café` for `cafe`) need the analyzer itself (bounded text).
    spans = [
        (t.char_offset_from, t.char_offset_to) for t in text.analyzer.pre_tokenize(body).tokens if t.text in tokens
    ]
    if not spans:
        return None
    lo = max(0, spans[0][0] - SNIPPET_WINDOW // 4)
    hi = min(len(body), lo + SNIPPET_WINDOW)
    return _marked(body, lo, hi, spans)


def _marked(body: str, lo: int, hi: int, spans: list[tuple[int, int]]) -> str:
    out, pos = ["…" if lo else ""], lo
    for s, e in spans:
        if s < pos or e > hi:
            continue
        out += [body[pos:s], MARK_OPEN, body[s:e], MARK_CLOSE]
        pos = e
    out += [body[pos:hi], "…" if hi < len(body) else ""]
    return "".join(out)


def _snippet(text: TantivyText, frag: Fragment | None, pattern: re.Pattern[str], tokens: set[str]) -> str:
    if frag is None:
        return ""
    for body in (frag.text, frag.tail, frag.meta):
        if body:
            window = _window(text, body, pattern, tokens)
            if window is not None:
                return window
    return _marked(frag.text, 0, min(len(frag.text), SNIPPET_WINDOW), [])


def _snippets(conn: sqlite3.Connection, text: TantivyText, terms: list[Term], page: list[tuple]) -> dict[int, str]:
    tokens = {tok for t in terms for tok in text.tokens(t.text)}
    pattern = _match_pattern(tokens)
    events = project_rows(conn, [c[2].event_rowid for c in page])
    out: dict[int, str] = {}
    for _, fragment_id, row in page:
        event = events.get(row.event_rowid)
        frag = next((f for f in event.fragments if f.fragment_id == fragment_id), None) if event else None
        out[row.frag_rowid] = _snippet(text, frag, pattern, tokens)
    return out


def ranked_page(
    conn: sqlite3.Connection,
    request: SearchRequest,
    need: int,
    deadline: float | None = None,
    chooser: Chooser | None = None,
) -> tuple[list[HitRow], dict[int, str]]:
    """Rows in the hit layout of `piwatchd.index.search` (offset applied) and
    marked snippet text per fragment rowid of the chosen rows (default: the
    first `limit`)."""
    text = text_reader(conn)
    terms = parse_query(request.query)
    ranked, counts = _ranked(conn, text, request, terms, need, deadline)
    page = ranked[request.offset :]
    chosen = [page[i] for i in chosen_rows(chooser, [c[2].session_id for c in page], request.limit)]
    if counts is None:
        counts = _matched_counts(text, request, terms, chosen) if chosen else {}
    return page_rows(page, counts), _snippets(conn, text, terms, chosen)
