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

import functools
import heapq
import operator
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from tantivy import Query

from ...model.events import Fragment
from ...store.source_events import project_rows
from ..hits import MARK_CLOSE, MARK_OPEN, Chooser, HitRow, chosen_rows, page_rows, ranked_events, sort_key
from ..identifiers import split_segment
from ..query import QueryTimeout, SearchRequest, Term, parse_query
from ..tiers import label, partial_plan
from .index import TantivyText, text_reader
from .tiers import (
    Repairs,
    can_match,
    forms_tokens,
    matched_masks,
    partial_match_query,
    partial_word_query,
    repairs,
    spread_events,
    word_query,
    word_weights,
)

__all__ = ["ranked_page"]

FIRST_K = 64
MAX_K = 1 << 20
TIE_K_MAX = 4096
SNIPPET_WINDOW = 420


def _ranked(
    conn: sqlite3.Connection,
    text: TantivyText,
    request: SearchRequest,
    query: Query,
    need: int,
    deadline: float | None,
    ties: bool = True,
) -> tuple[list[tuple[Any, ...]], dict[int, int] | None]:
    """The first `need` events of `query`, best first, and, when every match
    was fetched on the way, how many fragments of each event match. `ties`:
    order events tied with the boundary as FTS5 does (the exact tier, which
    both engines answer alike); the tiers below it take the ties fetched
    (the partial tier's IDF sums tie by the thousand)."""
    k = max(FIRST_K, need * 2)
    while True:
        if deadline is not None and time.monotonic() > deadline:
            raise QueryTimeout("the search ran past its time limit; narrow it with more words or filters")
        top = text.top(query, k)
        events = [(score[0], fid, row) for score, fid, row in _events_of(conn, request, top, need)]
        if len(top) < k:
            return events[:need], Counter(event for _, _, event, _ in top)
        if len(events) >= need:
            last, boundary = events[need - 1][0], -top[-1][0]
            # Strictly better than every fragment not fetched: exact. Tied
            # with the boundary: more tied fragments may sort first (newer
            # first, as FTS5 orders ties), so fetch them, up to a bound.
            if last < boundary or (last == boundary and (k >= TIE_K_MAX or not ties)):
                return events[:need], None
        if k >= MAX_K:
            return events[:need], None
        k *= 4


def _events_of(
    conn: sqlite3.Connection, request: SearchRequest, top: list[tuple[float, int, int, int]], need: int
) -> list[tuple[Any, ...]]:
    """`ranked_events` of the fetched fragments, reading from SQLite only
    the events that can be among the first `need`: those whose best
    fragment scores at least as well as the need-th event's (ties kept, as
    the order among them is SQLite's to say). Reading every fetched
    fragment's row cost ~2x (a common word's 64 fragments for 21 events);
    when an event read is gone (rows deleted since), all of them are read."""
    # (negated score, length): equal scores rank the shorter text first.
    scored = {frag: (-score, n) for score, frag, _, n in top}
    best: dict[int, float] = {}
    for score, _, event, _ in top:
        best[event] = max(best.get(event, score), score)
    if len(best) > need:
        cut = sorted(best.values(), reverse=True)[need - 1]
        lead = {frag: (-score, n) for score, frag, event, n in top if best[event] >= cut}
        events = ranked_events(conn, request.filters, lead)
        if len(events) >= need:
            return events
    return ranked_events(conn, request.filters, scored)


def _matched_counts(text: TantivyText, request: SearchRequest, tier: _Tier, events: list[int]) -> dict[int, int]:
    """How many fragments of each of `events` match the tier's query: its
    words rebuilt with every term limited to those events (`within_docs`)."""
    within = text.events_query(events)
    if within is None:
        return {}
    words = [tier.word(t, within) for t in tier.terms]
    query = text.combine(words, request.filters, min_match=tier.min_match)
    return Counter(event for _, _, event, _ in text.top(query, 10_000))


# Candidates looked at in one text before the scan gives up (whole words) or
# stops (word forms): bounded work whatever the text.
_MAX_CANDIDATES = 512


def _lower(body: str) -> str | None:
    """`body` lower-cased, when that keeps every character's offset (else None)."""
    low = body.lower()
    return low if len(low) == len(body) else None


def _occurrences(low: str, needles: Iterable[str], lo: int, hi: int) -> Iterator[tuple[int, int]]:
    """Every occurrence of any needle in low[lo:hi], by position (longest
    first at one position): `str.find` per needle, merged. A find runs at
    memory speed; a case-insensitive alternation in `re` or RE2's Python
    wrapper cost 10-40x more per 32 KB fragment here."""
    heap = []
    for n in needles:
        p = low.find(n, lo, hi)
        if p >= 0:
            heap.append((p, -len(n), n))
    heapq.heapify(heap)
    while heap:
        p, neg, n = heap[0]
        yield p, p - neg
        q = low.find(n, p + 1, hi)
        if q >= 0:
            heapq.heapreplace(heap, (q, neg, n))
        else:
            heapq.heappop(heap)


def _whole_words(body: str, low: str | None, tokens: frozenset[str], lo: int, hi: int) -> list[tuple[int, int]]:
    """Spans in body[lo:hi] of `tokens` as whole words (letters and digits
    only, as the analyzer sees them), case-insensitively."""
    if low is None:
        return _regex_words(body, tokens, lo, hi)
    spans: list[tuple[int, int]] = []
    end = lo
    for n, (s, e) in enumerate(_occurrences(low, tokens, lo, hi)):
        if n >= _MAX_CANDIDATES:
            return spans + _regex_words(body, tokens, max(s, end), hi)
        if s >= end and (s == 0 or not body[s - 1].isalnum()) and (e == len(body) or not body[e].isalnum()):
            spans.append((s, e))
            end = e
    return spans


def _regex_words(body: str, tokens: frozenset[str], lo: int, hi: int) -> list[tuple[int, int]]:
    """`_whole_words` by the regex: words of the whole text (none cut at `hi`)."""
    out = []
    for m in _match_pattern(tokens).finditer(body, lo):
        if m.end() > hi:
            break
        out.append(m.span())
    return out


@lru_cache(maxsize=128)
def _match_pattern(tokens: frozenset[str]) -> re.Pattern[str]:
    alts = "|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True))
    # Word boundaries as the analyzer sees them: letters and digits only.
    return re.compile(rf"(?<![^\W_])(?:{alts})(?![^\W_])", re.IGNORECASE)


@lru_cache(maxsize=128)
def _loose_pattern(prefixes: frozenset[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(p) for p in sorted(prefixes, key=len, reverse=True)), re.IGNORECASE)


def _window(text: TantivyText, body: str, tokens: frozenset[str]) -> str | None:
    """The snippet window around the first match in `body`, matches marked;
    None when nothing in `body` matches."""
    low = _lower(body)
    first = next(iter(_whole_words(body, low, tokens, 0, len(body))), None) if tokens else None
    if first:
        lo = max(0, first[0] - SNIPPET_WINDOW // 4)
        hi = min(len(body), lo + SNIPPET_WINDOW)
        return _marked(body, lo, hi, _whole_words(body, low, tokens, lo, hi))
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


class _Marks:
    """Where a tier's query words occur in evidence text: as written (the
    exact tier) or, below it, also by English stem and camelCase part."""

    def __init__(self, text: TantivyText, terms: list[Term], forms: bool) -> None:
        self.text = text
        self.tokens = frozenset(tok for t in terms for tok in text.tokens(t.text))
        self.forms = {tok for t in terms for tok in forms_tokens(text, t)} if forms else set()
        # Stems lose a letter or two (retry -> retri): look for their prefixes, then verify.
        self.prefixes = frozenset(self.tokens | {f[: max(3, len(f) - 1)] for f in self.forms})
        self.loose = bool(self.prefixes) and forms

    def _word_spans(self, body: str, start: int, end: int) -> list[tuple[int, int]]:
        word = body[start:end]
        if word.lower() in self.tokens or any(t in self.forms for t in self.text.forms_analyzer.analyze(word)):
            return [(start, end)]
        spans, pos = [], start
        for part in split_segment(word):
            if any(t in self.forms for t in self.text.forms_analyzer.analyze(part)):
                spans.append((pos, pos + len(part)))
            pos += len(part)
        return spans

    def loose_window(self, body: str) -> str | None:
        """The window around the first word matching by form, marked."""
        low = _lower(body)
        if low is not None:
            candidates = _occurrences(low, self.prefixes, 0, len(body))
        else:  # lower-casing moved offsets (rare): `re` finds the candidates
            candidates = (m.span() for m in _loose_pattern(self.prefixes).finditer(body))
        spans: list[tuple[int, int]] = []
        lo, hi, pos = 0, len(body), 0
        for n, (s, e) in enumerate(candidates):
            if s >= hi or n >= _MAX_CANDIDATES:
                break
            if s < pos:
                continue  # inside a word already looked at
            start, end = _word_around(body, s, e)
            found = self._word_spans(body, start, end)
            if found and not spans:
                lo = max(0, found[0][0] - SNIPPET_WINDOW // 4)
                hi = min(len(body), lo + SNIPPET_WINDOW)
            spans += [sp for sp in found if sp[1] <= hi]
            pos = end
        if not spans:
            return None
        return _marked(body, lo, hi, spans)

    def window(self, body: str) -> str | None:
        if self.loose:
            return self.loose_window(body)
        return _window(self.text, body, self.tokens)


def _word_around(body: str, start: int, end: int) -> tuple[int, int]:
    """The word (letters and digits, at most 64 more on each side) around body[start:end]."""
    lo, stop = start, max(0, start - 64)
    while lo > stop and body[lo - 1].isalnum():
        lo -= 1
    hi, stop = end, min(len(body), end + 64)
    while hi < stop and body[hi].isalnum():
        hi += 1
    return lo, hi


def _snippet(marks: _Marks, frag: Fragment | None) -> str:
    if frag is None:
        return ""
    for body in (frag.text, frag.tail, frag.meta):
        if body:
            window = marks.window(body)
            if window is not None:
                return window
    return _marked(frag.text, 0, min(len(frag.text), SNIPPET_WINDOW), [])


@dataclass
class _Tier:
    """One tier's events (best first) and how to label and count them."""

    name: str
    word: Callable[[Term, Query | None], Query]  # a word's query (within some documents)
    terms: list[Term]  # the words as searched (repaired ones replaced)
    min_match: int | None = None
    events: list[tuple[Any, ...]] = field(default_factory=list)
    counts: dict[int, int] | None = None
    # One query per word searched for, over the whole index (default: one per term).
    words: list[Query] | None = None

    def __post_init__(self) -> None:
        if self.words is None:
            self.words = [self.word(t, None) for t in self.terms]


def _run(
    conn: sqlite3.Connection,
    text: TantivyText,
    request: SearchRequest,
    tier: _Tier,
    seen: list[int],
    need: int,
    deadline: float | None,
) -> None:
    assert tier.words is not None
    query = text.combine(tier.words, request.filters, exclude=seen, min_match=tier.min_match)
    tier.events, tier.counts = _ranked(conn, text, request, query, need - len(seen), deadline, tier.name == "exact")
    seen += [c[2].event_rowid for c in tier.events]


def _tiers(
    conn: sqlite3.Connection,
    text: TantivyText,
    request: SearchRequest,
    terms: list[Term],
    need: int,
    deadline: float | None,
) -> tuple[list[_Tier], Repairs]:
    """The exact tier, then, while fewer than `need` events were found and
    the request allows it: forms, repaired, and (below `limit`) partial. An
    event found by a tier is excluded from the tiers after it."""
    exact = _Tier("exact", text.term_query, terms)
    seen: list[int] = []
    _run(conn, text, request, exact, seen, need, deadline)
    fixed = Repairs(terms, [], [])
    if request.exact or len(seen) >= need:
        return [exact], fixed
    out = [exact]
    fixed = repairs(text, terms)
    # Skipped when a word is found nowhere (no event has every word) and
    # for phrases only (they match as phrases in every tier).
    if not fixed.options and not fixed.unmatched and not all(t.phrase for t in terms):
        out.append(_Tier("forms", functools.partial(word_query, text), terms))
        _run(conn, text, request, out[-1], seen, need, deadline)
    options, fixed = fixed.options, Repairs(terms, [], fixed.unmatched)
    for terms_k, replaced_k in options:  # the next repair only when one finds nothing
        out.append(_Tier("repaired", functools.partial(word_query, text), terms_k))
        _run(conn, text, request, out[-1], seen, need, deadline)
        if out[-1].events:
            # Reported only with hits the caller may see: a repair never
            # names a word that only sessions hidden from the caller hold.
            fixed = Repairs(terms_k, replaced_k, [], options)
            break
    if options and not fixed.replaced:
        # No repaired tier found an event: the partial tier still tries the
        # best spelling (reported only if a hit holds it: `_reported`).
        fixed = Repairs(options[0][0], options[0][1], [], options, tentative=True)
    plan = partial_plan(fixed.terms)
    if plan is not None and len(seen) < min(request.limit, need):
        weights = word_weights(text, list(plan.terms), text.count())
        # Words that cannot match are searched for by no query (`can_match`):
        # with fewer than `min_match` left, nothing is; they are still
        # labelled missing (the tier's terms keep them).
        live = [i for i, t in enumerate(plan.terms) if can_match(text, t)]
        words = [partial_word_query(text, plan.terms[i], weights[i]) for i in live]
        # Its counts and labels come from `matched_masks`, never from `word`.
        out.append(
            _Tier(
                "partial", functools.partial(partial_match_query, text), list(plan.terms), plan.min_match, words=words
            )
        )
        before = len(seen)
        if len(live) >= plan.min_match:
            _run(conn, text, request, out[-1], seen, need, deadline)
        if plan.min_match <= len(live) and len(seen) < need:
            _add_spread(conn, text, request, out[-1], [(plan.terms[i], weights[i]) for i in live], seen, need - before)
    return out, fixed


def _add_spread(
    conn: sqlite3.Connection,
    text: TantivyText,
    request: SearchRequest,
    tier: _Tier,
    live: list[tuple[Term, float]],
    seen: list[int],
    room: int,
) -> None:
    """Merge into the partial tier (by the same IDF sums) the events whose
    `live` words (those that can match, with their weights) sit in
    different fragments (`spread_events`)."""
    assert tier.min_match is not None
    terms, weights = [t for t, _ in live], [w for _, w in live]
    spread = spread_events(text, terms, weights, request.filters, seen, tier.min_match)
    if not spread.weights:
        return
    extra = ranked_events(conn, request.filters, {f: (-w, 0) for f, w in spread.weights.items()})
    mine = {c[2].event_rowid for c in tier.events}
    del seen[len(seen) - len(mine) :]
    tier.events = sorted(tier.events + [(s[0], fid, row) for s, fid, row in extra], key=sort_key)[:room]
    seen += [c[2].event_rowid for c in tier.events]
    if tier.counts is not None:
        tier.counts = {**spread.counts, **tier.counts}


def _labels(
    tier: _Tier, terms: list[Term], fixed: Repairs, mask: int
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """(matched, missing) query words of a hit; None for exact hits. A
    partial hit's words are those its event holds (`mask`, from
    `matched_masks`); every word matched in the forms and repaired tiers."""
    if tier.name == "exact":
        return None, None
    if tier.name != "partial":
        return tuple(dict.fromkeys(t.text for t in terms)), ()
    original = {new: old for old, new in fixed.replaced}
    held = {original.get(t.text, t.text) for i, t in enumerate(tier.terms) if mask >> i & 1}
    words = [Term(original.get(t.text, t.text), t.phrase) for t in tier.terms]
    matched, missing = label(words, held)
    return tuple(matched), tuple(missing)


def ranked_page(
    conn: sqlite3.Connection,
    request: SearchRequest,
    need: int,
    deadline: float | None = None,
    chooser: Chooser | None = None,
) -> tuple[list[HitRow], dict[int, str], list[tuple[str, str]]]:
    """Rows in the hit layout of `piwatchd.text.search` (offset applied),
    marked snippet text per fragment rowid of the chosen rows (default: the
    first `limit`), and the repairs made."""
    text = text_reader(conn)
    terms = parse_query(request.query)
    tiers, fixed = _tiers(conn, text, request, terms, need, deadline)
    page = [(tier, ev) for tier in tiers for ev in tier.events][request.offset :]
    chosen = set(chosen_rows(chooser, [ev[2].session_id for _, ev in page], request.limit))
    events = project_rows(conn, [page[i][1][2].event_rowid for i in sorted(chosen)])
    rows: list[HitRow] = []
    snippets: dict[int, str] = {}
    held = 0  # the words the page's partial hits hold
    for tier in tiers:
        mine = [(i, ev) for i, (t, ev) in enumerate(page) if t is tier]
        if not mine:
            continue
        ids = [ev[2].event_rowid for i, ev in mine if i in chosen]
        # A partial hit's words and matching fragments come from one search.
        masks, counts = matched_masks(text, tier.terms, ids, request.filters) if tier.name == "partial" else ({}, {})
        if tier.counts is not None:
            counts = tier.counts
        elif tier.name != "partial":
            # An event of one fragment matched there: only the others are counted.
            several = [e for e in ids if e not in events or len(events[e].fragments) > 1]
            counts = _matched_counts(text, request, tier, several)
        held |= functools.reduce(operator.or_, masks.values(), 0)
        marks = _Marks(text, tier.terms, forms=tier.name != "exact")
        for (i, ev), row in zip(mine, page_rows([ev for _, ev in mine], counts, tier.name), strict=True):
            event = events.get(ev[2].event_rowid) if i in chosen else None
            if event is None:
                rows.append(row)
                continue
            frag = next((f for f in event.fragments if f.fragment_id == ev[1]), None)
            snippets[row.frag_rowid] = _snippet(marks, frag)
            matched, missing = _labels(tier, terms, fixed, masks.get(ev[2].event_rowid, 0))
            rows.append(row._replace(words=matched, missing=missing))
    return rows, snippets, _reported(fixed, tiers[-1], held)


def _reported(fixed: Repairs, last: _Tier, held: int) -> list[tuple[str, str]]:
    """The repairs to report: a tentative one (tried by the partial tier
    only) when a partial hit on the page holds the replacement."""
    if not fixed.tentative:
        return fixed.replaced
    terms = last.terms if last.name == "partial" else []
    return [
        (old, new) for old, new in fixed.replaced if any(t.text == new and held >> i & 1 for i, t in enumerate(terms))
    ]
