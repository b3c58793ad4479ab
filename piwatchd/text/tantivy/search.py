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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from tantivy import FieldType, Occur, Query

from ...model.project import Evidence
from ...store.source_events import evidence_rows
from ..hits import Chooser, HitRow, Ranked, chosen_rows, page_rows, ranked_events, sort_key
from ..query import QueryTimeout, SearchRequest, Term, parse_query, visible_scope
from ..tiers import PartialPlan, label, partial_plan
from .index import Scored
from .readers import text_reader
from .scope import Scope
from .snippets import Marks, evidence_snippet
from .words import (
    Repairs,
    can_match,
    conjunction_cost,
    has_postings,
    matched_masks,
    partial_match_query,
    partial_word_query,
    repairs,
    spread_events,
    word_query,
    word_weights,
)

__all__ = ["TierSearch", "ranked_page"]

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
# A phrase whose rarest word is in more documents than this is searched in
# slices of fragments, newest first (`TierSearch._slices`).
PHRASE_SLICE_DOCS = 20_000
FRAG_MAX = (1 << 63) - 1


@dataclass
class _Tier:
    """One tier's search: how it asks for a word (within some documents, for
    counting), the words as searched (repaired ones replaced), and the events
    it placed, best first, with their matched-fragment counts when known."""

    name: str
    word: Callable[[Term, Query | None], Query]
    terms: list[Term]
    min_match: int | None = None
    # One query per word searched for, over the whole index (default: one per term).
    words: list[Query] | None = None
    events: list[Ranked] = field(default_factory=list)
    counts: dict[int, int] | None = None

    def __post_init__(self) -> None:
        if self.words is None:
            self.words = [self.word(t, None) for t in self.terms]


@dataclass
class _Page:
    """A page being laid out: the rows shown in full (snippet, counts,
    labels) and their evidence, the rows, snippets and the words the page's
    partial hits hold."""

    chosen: set[int]
    evidence: dict[int, Evidence]
    rows: list[HitRow] = field(default_factory=list)
    snippets: dict[int, str] = field(default_factory=dict)
    held: int = 0


class TierSearch:
    """One query's search through the tiers (`piwatchd.text.tiers`), top to
    bottom: exact; then, while the page is short and the request allows it,
    forms, repaired and partial (`own_forms`: the words' exact and forms
    matches as one tier). An event is placed by the first tier that finds
    it; each tier excludes the events placed before it."""

    def __init__(self, conn: sqlite3.Connection, request: SearchRequest, need: int, deadline: float | None) -> None:
        self.conn, self.request, self.need, self.deadline = conn, request, need, deadline
        self.text = text_reader(conn)
        self.terms = parse_query(request.query)
        self.tiers: list[_Tier] = []
        self.fixed = Repairs(self.terms, [], [])

    @property
    def placed(self) -> list[int]:
        return [ranked.row.event_rowid for tier in self.tiers for ranked in tier.events]

    def short(self) -> bool:
        return len(self.placed) < self.need

    def run(self) -> TierSearch:
        request, terms = self.request, self.terms
        if request.own_forms and not request.exact:
            self._own_forms()
            return self
        exact = self._search(_Tier("exact", self.text.term_query, terms))
        if request.exact or not self.short():
            return self
        # Word statistics over what the caller may see only (`scope.Scope`).
        scope = visible_scope(request.filters)
        if not exact.events:  # an exact hit holds every word: none needs repair
            self.fixed = repairs(self.text, terms, scope)
        # Skipped when a word is found nowhere (no event has every word) and
        # for phrases only (they match as phrases in every tier).
        if not self.fixed.options and not self.fixed.unmatched and not _phrases(terms):
            self._search(_Tier("forms", functools.partial(word_query, self.text), terms))
        self._repair()
        plan = partial_plan(self.fixed.terms)
        if plan is not None and len(self.placed) < min(request.limit, self.need):
            self._partial(plan, scope)
        return self

    # -- the tiers ---------------------------------------------------------------------

    def _own_forms(self) -> None:
        """The events holding the words as written or by their forms, in one
        search (a word's forms query holds its exact form): what `words`
        counts, where the tiers' order does not matter. None searched when a
        bare word has no postings in any form anywhere (a search saved, not
        an answer: the search would find none the caller may see either)."""
        tier = self._add(_Tier("forms", functools.partial(word_query, self.text), self.terms))
        if all(has_postings(self.text, t) for t in self.terms):
            self._run(tier)

    def _repair(self) -> None:
        """The repaired tier: each spelling in turn, best first, until one
        finds an event. Reported only with hits the caller may see: a repair
        never names a word that only sessions hidden from the caller hold.
        When none finds one, the partial tier still tries the best spelling
        (reported only if a hit holds it: `_reported`)."""
        options = self.fixed.options
        self.fixed = Repairs(self.terms, [], self.fixed.unmatched)
        for terms, replaced in options:
            if self._repaired(terms):
                self.fixed = Repairs(terms, replaced, [], options)
                return
        if options:
            self.fixed = Repairs(options[0][0], options[0][1], [], options, tentative=True)

    def _repaired(self, terms: list[Term]) -> bool:
        """One repaired spelling, both searches labelled repaired: its words as
        written (the exact tier's clauses), then, while the page is short, by
        their forms (as the forms tier). The first is a conjunction of single
        terms that Tantivy seeks through; the forms' unions of dense postings
        (a common word's exact and `forms` terms) cost 2-4x as much, and the
        page is nearly always full without them. True when either found an event."""
        found = bool(self._search(_Tier("repaired", self.text.term_query, terms)).events)
        if self.short() and not _phrases(terms):
            found |= bool(self._search(_Tier("repaired", functools.partial(word_query, self.text), terms)).events)
        return found

    def _partial(self, plan: PartialPlan, scope: Scope) -> None:
        """The partial tier: events holding `min_match` of the words, ranked by
        their weights (IDF in the caller's scope), in one fragment or spread
        over an event's fragments. Words that cannot match (`can_match`) are
        searched for by no query; with fewer than `min_match` left, nothing
        is (the tier's terms keep them: they are labelled missing). Its
        counts and labels come from `matched_masks`, never from `word`."""
        text, terms = self.text, list(plan.terms)
        weights = word_weights(text, terms, scope)
        live = [i for i, t in enumerate(terms) if can_match(text, t, scope)]
        words = [partial_word_query(text, terms[i], weights[i]) for i in live]
        tier = self._add(_Tier("partial", functools.partial(partial_match_query, text), terms, plan.min_match, words))
        if len(live) < plan.min_match:
            return
        room = self.need - len(self.placed)
        self._run_partial(tier, max(weights[i] for i in live))
        if self.short():
            self._add_spread(tier, [(terms[i], weights[i]) for i in live], room)

    def _run_partial(self, tier: _Tier, heaviest: float) -> None:
        """The partial tier's search, first as a plain union of its words: an
        event scoring above the heaviest word's weight holds two words or
        more, so when the page's last event does, the union's first events
        are the tier's, in its order. Tantivy's minimum-match disjunction
        walks each posting slower than a union (15-16 against 10 ms of CPU
        for a question of four common words on 1 GB); it runs only when the
        page reaches events holding a single word, or when its words are
        too few for a union to differ from the conjunction it is."""
        assert tier.min_match is not None and tier.words is not None
        if len(tier.words) > tier.min_match > 1:
            need = self.need - len(self.placed)
            union = replace(tier, min_match=1)
            events, _ = self._ranked(self._query(union), need, ties=False)
            if len(events) >= need and -events[need - 1].score > heaviest:
                tier.events = events
                return
        self._run(tier)

    def _add_spread(self, tier: _Tier, live: list[tuple[Term, float]], room: int) -> None:
        """Merge into the partial tier (by the same IDF sums) the events whose
        `live` words (those that can match, with their weights) sit in
        different fragments (`spread_events`)."""
        assert tier.min_match is not None
        filters = self.request.filters
        terms, weights = [t for t, _ in live], [w for _, w in live]
        spread = spread_events(self.text, terms, weights, filters, self.placed, tier.min_match)
        if not spread:
            return
        extra = ranked_events(self.conn, filters, {f: (-w, 0) for f, w in spread.items()})
        merged = tier.events + [ranked._replace(score=ranked.score[0]) for ranked in extra]
        tier.events = sorted(merged, key=sort_key)[:room]

    def _add(self, tier: _Tier) -> _Tier:
        self.tiers.append(tier)
        return tier

    def _search(self, tier: _Tier) -> _Tier:
        return self._run(self._add(tier))

    def _run(self, tier: _Tier) -> _Tier:
        """The tier's events, for the room left on the page, excluding those
        placed by the tiers before it."""
        assert not tier.events  # each tier runs once
        slices = self._slices(tier)
        if slices is None:
            need = self.need - len(self.placed)
            tier.events, tier.counts = self._ranked(self._query(tier), need, ties=tier.name == "exact")
            return tier
        for frags in slices:  # the tier's own events are placed too: a slice never finds them again
            if not self.short():
                break
            need = self.need - len(self.placed)
            events, _ = self._ranked(self._query(tier, frags), need, ties=tier.name == "exact")
            tier.events += events
        tier.counts = None  # an event's fragments may lie in two slices: counted for the page
        return tier

    def _slices(self, tier: _Tier) -> Iterator[tuple[int, int]] | None:
        """Fragment rowid ranges, newest first, for a tier that must match a
        phrase of common words (a dear phrase: its rarest word is in more
        than PHRASE_SLICE_DOCS documents), each holding about that many of
        them; None for any other tier. Tantivy checks the positions of every
        document holding all of a phrase's words: `"the the"` on 1 GB, 59 ms
        for its 405,000 documents, 0.8 s on 10 GB. A dear phrase ranks its
        events slice by slice, newest first, by score within a slice, and
        stops once the page is full; its matches are exact phrases still."""
        if tier.min_match is not None or not any(t.phrase for t in tier.terms):
            return None
        filters = self.request.filters
        if filters.session_ids or filters.event_rowids:
            # The filter drives the intersection: cheap whole, while slices
            # would each pay a range over the index (200 of them on 10 GB).
            return None
        cost = conjunction_cost(self.text, tier.terms)
        if cost <= PHRASE_SLICE_DOCS:
            return None
        (top,) = self.conn.execute("SELECT max(frag_rowid) FROM fragments").fetchone()
        span = max(1, (top or 0) * PHRASE_SLICE_DOCS // cost)
        # The first slice is open above: fragments indexed since `top` was read belong in it.
        return ((max(0, hi - span + 1), FRAG_MAX if hi == top else hi) for hi in range(top or 0, 0, -span))

    def _query(self, tier: _Tier, frags: tuple[int, int] | None = None) -> Query:
        """The tier's words under the request's filters, excluding the events
        placed before it; only the fragments of rowids `frags` when given."""
        assert tier.words is not None
        query = self.text.combine(tier.words, self.request.filters, exclude=self.placed, min_match=tier.min_match)
        if frags is None:
            return query
        within = Query.range_query(self.text.schema, "frag", FieldType.Unsigned, *frags)
        return Query.boolean_query([(Occur.Must, query), (Occur.Must, Query.const_score_query(within, 0.0))])

    # -- ranking -----------------------------------------------------------------------

    def _ranked(self, query: Query, need: int, ties: bool) -> tuple[list[Ranked], dict[int, int] | None]:
        """The first `need` events of `query`, best first, and, when every
        match was fetched on the way, how many fragments of each event match.
        `ties`: order events tied with the boundary as FTS5 does (the exact
        tier, which both engines answer alike); the tiers below it take the
        ties fetched (the partial tier's IDF sums tie by the thousand)."""
        k = first = max(FIRST_K, need * 2)
        while True:
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise QueryTimeout("the search ran past its time limit; narrow it with more words or filters")
            started = time.monotonic()
            # Past the first fetch, events tie by the hundred: their times spare most row reads.
            top = self.text.top(query, k, self.request.filters.event_rowids, times=k > first)
            grow = 16 if time.monotonic() - started >= DEAR_FETCH_S else 4
            if ties and len(top) == k and k < TIE_K_MAX and _tied_at_boundary(top, need):
                # The need-th event ties with fragments not fetched yet: no row read can settle it.
                k = min(k * grow, TIE_K_MAX)
                continue
            events = [ranked._replace(score=ranked.score[0]) for ranked in self._events_of(top, need, k > first)]
            if len(top) < k:
                return events[:need], Counter(event for _, _, event, _, _ in top)
            if len(events) >= need:
                last, boundary = events[need - 1].score, -top[-1][0]
                # Strictly better than every fragment not fetched: exact. Tied
                # with the boundary: more tied fragments may sort first (newer
                # first, as FTS5 orders ties), so fetch them, up to a bound.
                if last < boundary or (last == boundary and (k >= TIE_K_MAX or not ties)):
                    return events[:need], None
            if k >= MAX_K:
                return events[:need], None
            k = min(k * grow, MAX_K)

    def _events_of(self, top: list[Scored], need: int, timed: bool) -> list[Ranked]:
        """`ranked_events` of the fetched fragments, reading from SQLite only
        the events that can be among the first `need`: those that sort at
        least as well as the need-th by what the text index knows of the
        one-query plan's order (`sort_key`: best fragment's score and length,
        then the event's time, newest first); ties on all of those are kept,
        as the order among them is SQLite's to say. Reading every fetched
        fragment's row cost ~2x (a common word's 64 fragments for 21 events),
        and a word whose fragments tie by the thousand (one-letter words,
        repeated tool output) read them all: 110 of 180 ms. When an event
        read is gone (rows deleted since), all of them are read."""
        filters = self.request.filters
        best: dict[int, tuple[float, int, bool, int]] = {}
        for score, _, event, n, ts in top:
            # Without the times (`timed`: `top` has them), events tied on score and length all sort alike.
            key = (-score, n, timed and ts is None, -(ts or 0))
            if event not in best or key < best[event]:
                best[event] = key
        if len(best) > need:
            cut = heapq.nsmallest(need, best.values())[-1]
            lead = {frag: (-score, n) for score, frag, event, n, _ in top if best[event] <= cut}
            events = ranked_events(self.conn, filters, lead)
            if len(events) >= need:
                return events
        # (negated score, length): equal scores rank the shorter text first.
        return ranked_events(self.conn, filters, {frag: (-score, n) for score, frag, _, n, _ in top})

    def _matched_counts(self, tier: _Tier, events: list[int]) -> dict[int, int]:
        """How many fragments of each of `events` match the tier's query: its
        words rebuilt with every term limited to those events (`within_docs`)."""
        within = self.text.events_query(events)
        if within is None:
            return {}
        words = [tier.word(t, within) for t in tier.terms]
        query = self.text.combine(words, self.request.filters, min_match=tier.min_match)
        return Counter(event for _, _, event, _, _ in self.text.top(query, 10_000))

    # -- the page ----------------------------------------------------------------------

    def page(self, chooser: Chooser | None) -> tuple[list[HitRow], dict[int, str], list[tuple[str, str]]]:
        """Rows in the hit layout of `piwatchd.text.search` (offset applied),
        marked snippet text per fragment rowid of the chosen rows (default:
        the first `limit`), and the repairs made."""
        request = self.request
        placed = [(tier, ranked) for tier in self.tiers for ranked in tier.events][request.offset :]
        chosen = set(chosen_rows(chooser, [ranked.row.session_id for _, ranked in placed], request.limit))
        shown = {placed[i][1].row.event_rowid: placed[i][1].fragment_id for i in sorted(chosen)}
        page = _Page(chosen, evidence_rows(self.conn, shown))
        for tier in self.tiers:
            mine = [(i, ranked) for i, (t, ranked) in enumerate(placed) if t is tier]
            if mine:
                self._lay_out(tier, mine, page)
        return page.rows, page.snippets, _reported(self.fixed, self.tiers[-1], page.held)

    def _lay_out(self, tier: _Tier, mine: list[tuple[int, Ranked]], page: _Page) -> None:
        """The tier's rows of the page; the chosen ones with their snippet,
        matched-fragment count and (below exact) matched and missing words."""
        ids = [ranked.row.event_rowid for i, ranked in mine if i in page.chosen]
        partial = tier.name == "partial"
        masks: dict[int, int] = {}
        if partial:  # its words, and its fragments holding one of them, from one search
            masks, counts = matched_masks(self.text, tier.terms, ids, self.request.filters)
        elif tier.counts is not None:
            counts = tier.counts
        else:
            # An event of one fragment matched there: only the others are counted.
            several = [e for e in ids if e not in page.evidence or page.evidence[e].fragments > 1]
            counts = self._matched_counts(tier, several)
        page.held |= functools.reduce(operator.or_, masks.values(), 0)
        marks = Marks(self.text, tier.terms, forms=tier.name != "exact")
        for (i, ranked), row in zip(mine, page_rows([r for _, r in mine], counts, tier.name), strict=True):
            evidence = page.evidence.get(ranked.row.event_rowid) if i in page.chosen else None
            if evidence is None:
                page.rows.append(row)
                continue
            page.snippets[row.frag_rowid] = evidence_snippet(marks, evidence)
            matched, missing = _labels(tier, self.terms, self.fixed, masks.get(ranked.row.event_rowid, 0))
            page.rows.append(row._replace(words=matched, missing=missing))


def _phrases(terms: list[Term]) -> bool:
    return all(t.phrase for t in terms)


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


def _reported(fixed: Repairs, last: _Tier, held: int) -> list[tuple[str, str]]:
    """The repairs to report: a tentative one (tried by the partial tier
    only) when a partial hit on the page holds the replacement."""
    if not fixed.tentative:
        return fixed.replaced
    terms = last.terms if last.name == "partial" else []
    return [
        (old, new) for old, new in fixed.replaced if any(t.text == new and held >> i & 1 for i, t in enumerate(terms))
    ]


def ranked_page(
    conn: sqlite3.Connection,
    request: SearchRequest,
    need: int,
    deadline: float | None = None,
    chooser: Chooser | None = None,
) -> tuple[list[HitRow], dict[int, str], list[tuple[str, str]]]:
    """The page of `request` (`TierSearch.page`), its tiers run for `need` events."""
    return TierSearch(conn, request, need, deadline).run().page(chooser)
