"""Search with the Tantivy engine: rank fragments inside the text index (every
filter applied there), coalesce them into events, count matches and build
snippets (`snippets`) for the page only.

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
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tantivy import Query

from ...store.source_events import evidence_rows
from ..hits import Chooser, HitRow, chosen_rows, page_rows, ranked_events, sort_key
from ..query import QueryTimeout, SearchRequest, Term, parse_query, visible_scope
from ..tiers import PartialPlan, label, partial_plan
from .index import Scored, TantivyText, text_reader
from .scope import Scope
from .snippets import Marks, evidence_snippet
from .tiers import (
    Repairs,
    can_match,
    has_postings,
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
# A fetch costs about the same whatever its k (tantivy-py scores every
# posting however few documents are asked for), so after a fetch that took
# this long the next asks for 16 times as many, not 4: on 10 GB a phrase of
# common words paid ~150 ms a fetch for 64, 256, then 1024 fragments. The
# fragments fetched beyond 4x cost ~2.5 us each in Python (~2 ms from 64),
# a tenth of such a fetch; cheaper fetches keep growing by 4.
DEAR_FETCH_S = 0.02


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
    k = first = max(FIRST_K, need * 2)
    while True:
        if deadline is not None and time.monotonic() > deadline:
            raise QueryTimeout("the search ran past its time limit; narrow it with more words or filters")
        # Past the first fetch, events tie by the hundred: their times spare most row reads.
        started = time.monotonic()
        top = text.top(query, k, request.filters.event_rowids, times=k > first)
        grow = 16 if time.monotonic() - started >= DEAR_FETCH_S else 4
        if ties and len(top) == k and k < TIE_K_MAX and _tied_at_boundary(top, need):
            k = min(
                k * grow, TIE_K_MAX
            )  # the need-th event ties with fragments not fetched yet: no row read can settle it
            continue
        events = [(score[0], fid, row) for score, fid, row in _events_of(conn, request, top, need, k > first)]
        if len(top) < k:
            return events[:need], Counter(event for _, _, event, _, _ in top)
        if len(events) >= need:
            last, boundary = events[need - 1][0], -top[-1][0]
            # Strictly better than every fragment not fetched: exact. Tied
            # with the boundary: more tied fragments may sort first (newer
            # first, as FTS5 orders ties), so fetch them, up to a bound.
            if last < boundary or (last == boundary and (k >= TIE_K_MAX or not ties)):
                return events[:need], None
        if k >= MAX_K:
            return events[:need], None
        k = min(k * grow, MAX_K)


def _tied_at_boundary(top: list[Scored], need: int) -> bool:
    """Whether the need-th best event among `top` (by score; rows the filters
    drop only push it lower) scores no better than the last fragment fetched."""
    best: dict[int, float] = {}
    for score, _, event, _, _ in top:
        if event not in best:  # `top` is best first
            best[event] = score
            if len(best) == need:
                return score <= top[-1][0]
    return True


def _events_of(
    conn: sqlite3.Connection, request: SearchRequest, top: list[Scored], need: int, timed: bool
) -> list[tuple[Any, ...]]:
    """`ranked_events` of the fetched fragments, reading from SQLite only
    the events that can be among the first `need`: those that sort at least
    as well as the need-th by what the text index knows of the one-query
    plan's order (`sort_key`: best fragment's score and length, then the
    event's time, newest first); ties on all of those are kept, as the order
    among them is SQLite's to say. Reading every fetched fragment's row cost
    ~2x (a common word's 64 fragments for 21 events), and a word whose
    fragments tie by the thousand (one-letter words, repeated tool output)
    read them all: 110 of 180 ms. When an event read is gone (rows deleted
    since), all of them are read."""
    best: dict[int, tuple[float, int, bool, int]] = {}
    for score, _, event, n, ts in top:
        # Without the times (`timed`: `top` has them), events tied on score and length all sort alike.
        key = (-score, n, timed and ts is None, -(ts or 0))
        if event not in best or key < best[event]:
            best[event] = key
    if len(best) > need:
        cut = heapq.nsmallest(need, best.values())[-1]
        lead = {frag: (-score, n) for score, frag, event, n, _ in top if best[event] <= cut}
        events = ranked_events(conn, request.filters, lead)
        if len(events) >= need:
            return events
    # (negated score, length): equal scores rank the shorter text first.
    return ranked_events(conn, request.filters, {frag: (-score, n) for score, frag, _, n, _ in top})


def _matched_counts(text: TantivyText, request: SearchRequest, tier: _Tier, events: list[int]) -> dict[int, int]:
    """How many fragments of each of `events` match the tier's query: its
    words rebuilt with every term limited to those events (`within_docs`)."""
    within = text.events_query(events)
    if within is None:
        return {}
    words = [tier.word(t, within) for t in tier.terms]
    query = text.combine(words, request.filters, min_match=tier.min_match)
    return Counter(event for _, _, event, _, _ in text.top(query, 10_000))


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
    the request allows it: forms, repaired, and (below `limit`) partial
    (`own_forms`: the words' exact and forms matches as one). An event found
    by a tier is excluded from the tiers after it."""
    seen: list[int] = []
    if request.own_forms and not request.exact:
        return [_own_forms(conn, text, request, terms, seen, need, deadline)], Repairs(terms, [], [])
    exact = _Tier("exact", text.term_query, terms)
    _run(conn, text, request, exact, seen, need, deadline)
    fixed = Repairs(terms, [], [])
    if request.exact or len(seen) >= need:
        return [exact], fixed
    out = [exact]
    # Word statistics over what the caller may see only (`scope.Scope`). An
    # exact hit holds every word: none has to be looked up.
    scope = visible_scope(request.filters)
    fixed = repairs(text, terms, scope) if not exact.events else fixed
    # Skipped when a word is found nowhere (no event has every word) and
    # for phrases only (they match as phrases in every tier).
    if not fixed.options and not fixed.unmatched and not all(t.phrase for t in terms):
        out.append(_Tier("forms", functools.partial(word_query, text), terms))
        _run(conn, text, request, out[-1], seen, need, deadline)
    options, fixed = fixed.options, Repairs(terms, [], fixed.unmatched)
    for terms_k, replaced_k in options:  # the next repair only when one finds nothing
        if _repaired(conn, text, request, terms_k, out, seen, need, deadline):
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
        out.append(_partial(conn, text, request, plan, scope, seen, need, deadline))
    return out, fixed


def _partial(
    conn: sqlite3.Connection,
    text: TantivyText,
    request: SearchRequest,
    plan: PartialPlan,
    scope: Scope,
    seen: list[int],
    need: int,
    deadline: float | None,
) -> _Tier:
    """The partial tier: events holding `min_match` of the words, ranked by
    their weights (IDF in the caller's scope), in one fragment or spread
    over an event's fragments."""
    weights = word_weights(text, list(plan.terms), scope)
    # Words that cannot match are searched for by no query (`can_match`):
    # with fewer than `min_match` left, nothing is; they are still
    # labelled missing (the tier's terms keep them).
    live = [i for i, t in enumerate(plan.terms) if can_match(text, t, scope)]
    words = [partial_word_query(text, plan.terms[i], weights[i]) for i in live]
    # Its counts and labels come from `matched_masks`, never from `word`.
    tier = _Tier("partial", functools.partial(partial_match_query, text), list(plan.terms), plan.min_match, words=words)
    before = len(seen)
    if len(live) >= plan.min_match:
        _run(conn, text, request, tier, seen, need, deadline)
    if plan.min_match <= len(live) and len(seen) < need:
        _add_spread(conn, text, request, tier, [(plan.terms[i], weights[i]) for i in live], seen, need - before)
    return tier


def _own_forms(
    conn: sqlite3.Connection,
    text: TantivyText,
    request: SearchRequest,
    terms: list[Term],
    seen: list[int],
    need: int,
    deadline: float | None,
) -> _Tier:
    """The events holding the words as written or by their forms, in one
    search (a word's forms query holds its exact form): what `words` counts,
    where the tiers' order does not matter. None searched when a bare word
    has no postings in any form anywhere (a search saved, not an answer:
    the search would find none the caller may see either)."""
    tier = _Tier("forms", functools.partial(word_query, text), terms)
    if all(has_postings(text, t) for t in terms):
        _run(conn, text, request, tier, seen, need, deadline)
    return tier


def _repaired(
    conn: sqlite3.Connection,
    text: TantivyText,
    request: SearchRequest,
    terms: list[Term],
    out: list[_Tier],
    seen: list[int],
    need: int,
    deadline: float | None,
) -> bool:
    """One repaired spelling, both searches labelled repaired: its words as
    written (the exact tier's clauses), then, while the page is short, by
    their forms (as the forms tier). The first is a conjunction of single
    terms that Tantivy seeks through; the forms' unions of dense postings
    (a common word's exact and `forms` terms) cost 2-4x as much, and the
    page is nearly always full without them. True when either found an event."""
    mine = [_Tier("repaired", text.term_query, terms)]
    _run(conn, text, request, mine[0], seen, need, deadline)
    if len(seen) < need and not all(t.phrase for t in terms):
        mine.append(_Tier("repaired", functools.partial(word_query, text), terms))
        _run(conn, text, request, mine[1], seen, need, deadline)
    out += mine
    return any(t.events for t in mine)


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
    evidence = evidence_rows(conn, {page[i][1][2].event_rowid: page[i][1][1] for i in sorted(chosen)})
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
            several = [e for e in ids if e not in evidence or evidence[e].fragments > 1]
            counts = _matched_counts(text, request, tier, several)
        held |= functools.reduce(operator.or_, masks.values(), 0)
        marks = Marks(text, tier.terms, forms=tier.name != "exact")
        for (i, ev), row in zip(mine, page_rows([ev for _, ev in mine], counts, tier.name), strict=True):
            shown = evidence.get(ev[2].event_rowid) if i in chosen else None
            if shown is None:
                rows.append(row)
                continue
            snippets[row.frag_rowid] = evidence_snippet(marks, shown)
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
