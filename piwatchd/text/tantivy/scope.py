"""Word statistics over what a caller may see, on the Tantivy engine.

A caller with a scope (`query.visible_scope`: its authorized roots, its own
session left out, its cutoff caps) gets answers whose statistics come from
the documents of that scope only: whether a word has postings, which index
words may repair it and how often each occurs, a partial-tier word's weight
(`piwatchd.text.tantivy.words`). Otherwise a caller that plants a word in
its own history learns from the answer whether another project holds it
(a repair made or not, a label, an order). Each is one search that visits
every match in the scope (~1 ms for a word in 6,500 of a scope's 27,000
documents, 200 MB corpus; 2-5 ms for `error` in 37,000 of 117,000 at 1 GB),
remembered per searcher generation and scope.

The term dictionary itself stays the whole index's: which words are listed
near a word or under a stem (`_vocabulary`'s and `_derivations`' bounded
walks) can change with other projects' words only when they fill a walk's
bound (2,000 and 64 terms). That, and BM25's order inside a tier, are the
residual channel (docs/concepts.md, "Who may see what").
"""

from __future__ import annotations

from typing import TypeAlias

from tantivy import Occur, Query

from ..query import SearchFilters
from ..tiers import repair_candidates
from .index import TantivyText

__all__ = ["Scope", "scope_count", "scope_docs", "scope_vocabulary"]

# What a word's statistics are taken over; None: the whole index.
Scope: TypeAlias = SearchFilters | None


def scope_count(text: TantivyText, query: Query, scope: SearchFilters) -> int:
    """Documents of the scope that `query` matches (unscored: BM25 for each
    match cost a third more)."""
    return text.count(text.combine([Query.const_score_query(query, 0.0)], scope))


def scope_docs(text: TantivyText, scope: Scope) -> int:
    """Documents in the scope (all of them for None), for this searcher
    generation, as the words' frequencies are."""
    return text.memo(
        ("docs", scope), lambda: text.count() if scope is None else scope_count(text, Query.all_query(), scope)
    )


def scope_vocabulary(
    text: TantivyText,
    word: str,
    found: dict[str, int],
    near: dict[str, int],
    fields: tuple[str, ...],
    scope: SearchFilters,
) -> tuple[dict[str, int], dict[str, int]]:
    """The index words of `found` within `word`'s repair distance that
    documents of the scope hold in one of `fields`, each with how many
    (a search each), and every such word's distance (computed once): a
    word only another project holds is no candidate and ranks none."""
    close = repair_candidates(word, found, near)
    counts = {t: scope_count(text, _field_terms(text, t, fields), scope) for t in sorted(close)}
    return {t: n for t, n in counts.items() if n}, close


def _field_terms(text: TantivyText, term: str, fields: tuple[str, ...]) -> Query:
    leaves = [Query.term_query(text.schema, f, term) for f in fields]
    return leaves[0] if len(leaves) == 1 else Query.boolean_query([(Occur.Should, q) for q in leaves])
