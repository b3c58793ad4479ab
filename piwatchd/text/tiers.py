"""Tier planning (pure): which relaxed searches a query gets, and how.

A search answers in tiers, each labelled on its hits:

1. `exact`: every query word as written (today's strict AND);
2. `forms`: every query word still, each by its exact form, its English
   stem or as a camelCase identifier part;
3. `repaired`: a word with no postings at all replaced by a close word of
   the index's vocabulary ("did you mean");
4. `partial`: when the tiers above found fewer events than the page's
   limit, one probe for events holding at least two of the query's
   content words (all of them when it has only two), ranked by the IDF
   weight of the distinct words they hold.

This module holds the rules (stop-words, repair candidates and choice,
the partial probe's words and threshold, matched/missing labels); the
engine runs them against the index (`piwatchd.text.tantivy.words` for the
word queries and statistics, `piwatchd.text.tantivy.search` for the tiers).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rapidfuzz.distance import OSA

from .query import Term

__all__ = [
    "MAX_REPAIR_CHARS",
    "MIN_REPAIR_CHARS",
    "STOP_WORDS",
    "TIERS",
    "PartialPlan",
    "edit_distance",
    "edits1",
    "edits1_changing_prefix",
    "idf",
    "label",
    "partial_plan",
    "repair_distance",
    "choose_repair",
    "rank_repairs",
    "repair_candidates",
    "content_terms",
]

TIERS = ("exact", "forms", "repaired", "partial")
MIN_REPAIR_CHARS = 4
# Longer words are ids, hashes and paths: a near miss there is another thing.
MAX_REPAIR_CHARS = 32
# Candidate spellings of one word are looked up in the vocabulary one by one.
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"

# English function words (the common NLTK list) and question words: a
# question's frame ("why did the ... fail") says nothing about the event.
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves""".split()  # noqa: SIM905 (a list of 130 words reads better as text)
)


def repair_distance(word: str) -> int:
    """How far a repair of `word` may be: 0 (never), 1, or 2 for long words.
    A stop-word is never repaired: one missing from a history (`during`) is
    a word it does not hold, not a misspelling of one it does."""
    if not MIN_REPAIR_CHARS <= len(word) <= MAX_REPAIR_CHARS or not word.isalnum() or word.lower() in STOP_WORDS:
        return 0
    return 2 if len(word) >= 8 else 1


def edits1(word: str) -> set[str]:
    """Every string one deletion, transposition, substitution or insertion
    away (lower-case letters and digits, plus the word's own characters)."""
    alphabet = set(_ALPHABET) | set(word)
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    out = {a + b[1:] for a, b in splits if b}
    out |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    out |= {a + c + b[1:] for a, b in splits if b for c in alphabet}
    out |= {a + c + b for a, b in splits for c in alphabet}
    out.discard(word)
    return out


def edits1_changing_prefix(word: str, n: int) -> set[str]:
    """The spellings of `edits1(word)` that do not start with word[:n]: an
    edit at or after position n (an insertion at n too) keeps that prefix,
    so only the edits within it are made."""
    alphabet = set(_ALPHABET) | set(word)
    head = word[:n]
    splits = [(word[:i], word[i:]) for i in range(min(n, len(word)))]
    out = {a + b[1:] for a, b in splits}
    out |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    out |= {a + c + b[1:] for a, b in splits for c in alphabet}
    out |= {a + c + b for a, b in splits for c in alphabet}
    return {w for w in out if not w.startswith(head)}


def edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal-string-alignment distance (a transposition costs 1), or
    limit + 1 when it is larger than `limit` (rapidfuzz, banded in C++:
    ~100x the banded table in Python, which a repair ran over hundreds of
    words sharing a long word's prefix)."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    return int(OSA.distance(a, b, score_cutoff=limit))


def repair_candidates(word: str, terms: Iterable[str], known: Mapping[str, int] | None = None) -> dict[str, int]:
    """Each of `terms` (not `word` itself) within `repair_distance(word)` of
    it -> its distance; `known` gives distances already known (the
    spellings `edits1` made are 1 away)."""
    limit = repair_distance(word)
    out: dict[str, int] = {}
    for term in terms:
        if term == word:
            continue
        d = (known or {}).get(term)
        if d is None:
            d = edit_distance(word, term, limit)
        if d <= limit:
            out[term] = d
    return out


def rank_repairs(
    word: str, vocabulary: Mapping[str, int], n: int = 3, known: Mapping[str, int] | None = None
) -> list[str]:
    """The best `n` repairs of `word` among `vocabulary` (term -> document
    frequency), best first: within `repair_distance(word)`; terms in at
    least 2 documents before one-offs (often typos themselves), then the
    closest, then the most frequent, then alphabetical. Never a stop-word:
    one edit from a short word (`thme`) it is in nearly every event, and
    would bury the word meant (`theme`) or find everything. `known` gives
    distances already known (`repair_candidates`)."""
    words = [t for t, df in vocabulary.items() if df > 0 and t not in STOP_WORDS]
    near = repair_candidates(word, words, known)
    ranked = sorted((vocabulary[t] < 2, d, -vocabulary[t], t) for t, d in near.items())
    return [key[3] for key in ranked[:n]]


def choose_repair(word: str, vocabulary: Mapping[str, int]) -> str | None:
    """The best repair of `word` (`rank_repairs`), or None when nothing is close enough."""
    best = rank_repairs(word, vocabulary, 1)
    return best[0] if best else None


def idf(doc_freq: int, num_docs: int) -> float:
    """BM25's inverse document frequency (always positive)."""
    return math.log(1 + (num_docs - doc_freq + 0.5) / (doc_freq + 0.5))


@dataclass(frozen=True, slots=True)
class PartialPlan:
    """The partial tier's probe: its words and how many must match."""

    terms: tuple[Term, ...]
    min_match: int


def content_terms(terms: Iterable[Term]) -> list[Term]:
    """The query's terms without stop-words and repeats (phrases are kept)."""
    seen: set[str] = set()
    out: list[Term] = []
    for t in terms:
        key = t.text.lower()
        if key in seen or (not t.phrase and key in STOP_WORDS):
            continue
        seen.add(key)
        out.append(t)
    return out


def partial_plan(terms: Iterable[Term]) -> PartialPlan | None:
    """At least 2 distinct content words must match (all of them when there
    are only 2); a query with fewer than 2 has no partial tier."""
    content = content_terms(terms)
    if len(content) < 2:
        return None
    return PartialPlan(tuple(content), 2)


def label(terms: Iterable[Term], matched: Iterable[str]) -> tuple[list[str], list[str]]:
    """(matched, missing) query words, in query order, each once."""
    got = set(matched)
    words = list(dict.fromkeys(t.text for t in terms))
    return [w for w in words if w in got], [w for w in words if w not in got]
