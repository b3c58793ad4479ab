"""The relaxed tiers on the Tantivy engine: the per-word queries of the forms,
repaired and partial tiers, the vocabulary lookups that repair a word, and
the matched/missing words of a hit (rules in `piwatchd.text.tiers`).

A word matches in the forms tier by its exact form (the exact tier's
clause) or by its `forms` tokens: the English stems of its parts
(`loadSessionCache` and `load_session_cache` -> load, session, cach), all
of them in one document. Quoted phrases match as phrases in every tier.
A caller's scope (`scope.Scope`) is what its words' statistics are taken over.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tantivy import Occur, Query

from ..identifiers import identifier_parts
from ..query import SearchFilters, Term
from ..tiers import edits1, edits1_changing_prefix, idf, rank_repairs, repair_distance
from .index import FORMS_FIELD, TantivyText, within_docs
from .scope import Scope, scope_count, scope_docs, scope_vocabulary

__all__ = [
    "Repairs",
    "can_match",
    "conjunction_cost",
    "forms_tokens",
    "has_postings",
    "matched_masks",
    "partial_match_query",
    "partial_word_query",
    "repairs",
    "spread_events",
    "word_query",
    "word_weights",
]

# Terms listed under the shared prefix of a word that may be 2 edits away.
PREFIX_CHARS = 3
PREFIX_TERMS_MAX = 2000


def forms_tokens(text: TantivyText, term: Term) -> list[str]:
    """The `forms` tokens a bare word must all have; [] for a phrase."""
    if term.phrase:
        return []
    return text.memo(("forms", term.text), lambda: _forms_tokens(text, term.text))


def _forms_tokens(text: TantivyText, word: str) -> list[str]:
    return list(dict.fromkeys(text.forms_analyzer.analyze(" ".join(identifier_parts(word)))))


_STEM_FIELDS = (FORMS_FIELD, "text", "meta")


def _stem_query(
    text: TantivyText, stem: str, within: Query | None = None, fields: tuple[str, ...] = _STEM_FIELDS
) -> Query:
    """A word with this stem: an inflected one (`forms`), or the stem itself
    as a word (`text`, `meta`: words that are their own stem stay there)."""
    leaves = [within_docs(Query.term_query(text.schema, field, stem), within) for field in fields]
    return leaves[0] if len(leaves) == 1 else Query.boolean_query([(Occur.Should, q) for q in leaves])


def _stem_doc_freq(text: TantivyText, stem: str) -> int:
    searcher = text.index.searcher()
    return sum(searcher.doc_freq(field, stem) for field in (FORMS_FIELD, "text", "meta"))


def word_query(text: TantivyText, term: Term, within: Query | None = None) -> Query:
    """One query word in the forms tier: as written, or by all its forms
    (only in the documents of `within`, when given)."""
    exact = text.term_query(term, within)
    tokens = forms_tokens(text, term)
    if not tokens:
        return exact
    if len(tokens) == 1 and text.tokens(term.text) == tokens:
        # A word that is its own stem: as a word of text/meta it is the
        # exact clause already (a common word's postings read twice cost
        # 2-3x the search); only its inflections (`forms`) add. Doubled, the
        # exact clause scores about as when it was counted twice.
        by_forms = _stem_query(text, tokens[0], within, (FORMS_FIELD,))
        return Query.boolean_query([(Occur.Should, Query.boost_query(exact, 2.0)), (Occur.Should, by_forms)])
    forms = [(Occur.Must, _stem_query(text, t, within)) for t in tokens]
    by_forms = forms[0][1] if len(forms) == 1 else Query.boolean_query(forms)
    return Query.boolean_query([(Occur.Should, exact), (Occur.Should, by_forms)])


def _doc_freq(text: TantivyText, term: Term, scope: Scope = None) -> int:
    """Documents holding the word: in the whole index, in its rarest form
    (exact or forms), from the term dictionary; in a caller's scope, counted
    there (`_scope_doc_freq`)."""
    if scope is None:
        return text.memo(("df", term.text, term.phrase), lambda: _count_docs(text, term))
    return text.memo(("df", term.text, term.phrase, scope), lambda: _scope_doc_freq(text, term, scope))


def _scope_doc_freq(text: TantivyText, term: Term, scope: SearchFilters) -> int:
    """Documents of the scope holding a one-part word as written in `text`,
    else in `meta`, else by every one of its stems (the fewest): one count
    for a word found as written, one term against the scope (a word's whole
    forms query counted cost 2-3x: 12 against 5 ms for `error` in 37,000
    of a project's 117,000 documents, 1 GB, loaded). A phrase or a word of
    several parts: what its forms query matches."""
    exact = text.tokens(term.text)
    if term.phrase or len(exact) != 1:
        return scope_count(text, word_query(text, term), scope)
    for name in ("text", "meta"):
        n = scope_count(text, Query.term_query(text.schema, name, exact[0]), scope)
        if n:
            return n
    return min((scope_count(text, _stem_query(text, t), scope) for t in forms_tokens(text, term)), default=0)


def _count_docs(text: TantivyText, term: Term) -> int:
    searcher = text.index.searcher()
    exact = text.tokens(term.text)
    tokens = forms_tokens(text, term)
    best = 0
    if len(exact) == 1:
        best = max(searcher.doc_freq("text", exact[0]), searcher.doc_freq("meta", exact[0]))
    if tokens:
        best = max(best, min(_stem_doc_freq(text, t) for t in tokens))
    return best


def conjunction_cost(text: TantivyText, terms: list[Term]) -> int:
    """Documents a conjunction of `terms` walks, about: those of its rarest
    word (of a phrase, its rarest word; in `text` or `meta`), which drives
    the intersection."""
    searcher = text.index.searcher()
    tokens = [text.tokens(t.text) for t in terms]
    return min(
        (min(searcher.doc_freq("text", w) + searcher.doc_freq("meta", w) for w in words) for words in tokens if words),
        default=0,
    )


def has_postings(text: TantivyText, term: Term, scope: Scope = None) -> bool:
    """False only for a bare one-part word with no postings in any form (no
    event of the scope holds it, as written or by its forms)."""
    if term.phrase or len(text.tokens(term.text)) != 1:
        return True
    return bool(_doc_freq(text, term, scope))


def can_match(text: TantivyText, term: Term, scope: Scope = None) -> bool:
    """Whether a word of the partial probe may match at all: False for a
    bare word with no postings in any form (`has_postings`) and no
    derivation (`_derived`), which can only be missing. Left out of the
    probe's searches, it changes no match and no score; in a minimum-match
    disjunction it still cost the walk of every other word's postings. In
    a scope, a derivation counts only if a document there holds one: a
    word left in takes one of the spread search's SPREAD_WORDS places."""
    if has_postings(text, term, scope):
        return True
    if scope is None:
        return bool(_derived(text, term))
    derived = _derived_query(text, term)
    return derived is not None and text.memo(
        ("derived_in", term.text, scope), lambda: scope_count(text, derived, scope) > 0
    )


def word_weights(text: TantivyText, terms: list[Term], scope: Scope = None) -> list[float]:
    """Each word's IDF (its rarest form; in a scope, among the documents
    there): what matching it is worth in the partial tier."""
    return [idf(_doc_freq(text, t, scope), scope_docs(text, scope)) for t in terms]


# Derivations the English stemmer keeps apart (fail/failure, minify/
# minification, large/larger, config/configure): in the partial tier a word
# also matches a word whose stem extends its stem by at most DERIVED_EXTRA
# letters, or is a prefix of it, the shorter of the two 4+ letters long.
MIN_DERIVED = 4
DERIVED_EXTRA = 3
DERIVED_TERMS = 64  # vocabulary terms listed per field and stem
# Derivations kept per stem: each is a term in every field of every segment
# for each search holding the word; a word glued to others in the text
# (`errorand`, `buildthe`) listed dozens.
DERIVED_MAX = 8


# A compound word's parts get derivations too, the first few of them (each
# costs two term-dictionary walks).
DERIVED_PARTS_MAX = 4


def _derived(text: TantivyText, term: Term) -> list[str]:
    """The stems a bare one-part word's stem derives from or into (not itself)."""
    tokens = forms_tokens(text, term)
    return _stem_derived(text, tokens[0]) if len(tokens) == 1 else []


def _stem_derived(text: TantivyText, stem: str) -> list[str]:
    return text.memo(("derived", stem), lambda: _derivations(text, stem))


def _derivations(text: TantivyText, stem: str) -> list[str]:
    if len(stem) < MIN_DERIVED:
        return []
    searcher = text.index.searcher()
    out: set[str] = set()
    for name in (FORMS_FIELD, "text"):
        for t, _ in searcher.terms_with_prefix(name, stem, limit=DERIVED_TERMS):
            if len(t) - len(stem) <= DERIVED_EXTRA:
                out.add(t)
    out.update(stem[:n] for n in range(MIN_DERIVED, len(stem)) if _stem_doc_freq(text, stem[:n]))
    out.discard(stem)
    # The nearest first (fewest letters added or cut), then the commonest.
    nearest = sorted(out, key=lambda t: (abs(len(t) - len(stem)), -_stem_doc_freq(text, t), t))
    return sorted(nearest[:DERIVED_MAX])


def _derived_query(text: TantivyText, term: Term, within: Query | None = None) -> Query | None:
    """The word by derivations: a one-part word by any of its stem's; a
    compound one (`airflow-worke`) by every part, each by its stem or one of
    its derivations (so a typo that stems to a real word, worke -> work,
    still meets `airflow-worker`). None when there are none."""
    tokens = forms_tokens(text, term)
    if len(tokens) == 1:
        derived = [(Occur.Should, _stem_query(text, t, within)) for t in _derived(text, term)]
        return Query.boolean_query(derived) if derived else None
    alternatives = [
        [part, *(_stem_derived(text, part) if i < DERIVED_PARTS_MAX else [])] for i, part in enumerate(tokens)
    ]
    if all(len(alts) == 1 for alts in alternatives):
        return None
    parts = []
    for alts in alternatives:
        leaves = [_stem_query(text, a, within) for a in alts]
        parts.append(
            (Occur.Must, leaves[0] if len(leaves) == 1 else Query.boolean_query([(Occur.Should, q) for q in leaves]))
        )
    return Query.boolean_query(parts)


def partial_match_query(text: TantivyText, term: Term, within: Query | None = None) -> Query:
    """A word in the partial tier: as in the forms tier, or by a derivation
    (only in the documents of `within`, when given)."""
    derived = _derived_query(text, term, within)
    if derived is None:
        return word_query(text, term, within)
    return Query.boolean_query([(Occur.Should, word_query(text, term, within)), (Occur.Should, derived)])


# A derivation is weaker evidence than a form: half the word's weight.
DERIVED_WEIGHT = 0.5


def partial_word_query(text: TantivyText, term: Term, weight: float) -> Query:
    """A word of the partial probe: matching it is worth its IDF (half by a
    derivation only), whatever its frequency in the document (events rank
    by the distinct words they hold)."""
    form = Query.const_score_query(word_query(text, term), weight)
    derived = _derived_query(text, term)
    if derived is None:
        return form
    return Query.disjunction_max_query([form, Query.const_score_query(derived, weight * DERIVED_WEIGHT)])


@dataclass(frozen=True, slots=True)
class Repairs:
    terms: list[Term]  # the query with repaired words replaced (the best repairs)
    replaced: list[tuple[str, str]]  # (word, replacement), in query order
    unmatched: list[str]  # words with no postings in any form and no repair
    # Up to MAX_REPAIR_OPTIONS (terms, replaced) pairs, best first: the
    # repaired tier tries the next when one finds nothing.
    options: list[tuple[list[Term], list[tuple[str, str]]]] = field(default_factory=list)
    # Tried by the partial tier only (no repaired tier found an event):
    # reported only when a partial hit holds a replacement.
    tentative: bool = False


MAX_REPAIR_OPTIONS = 3
# Words repaired per query: each costs a fuzzy probe and up to ~1,000 lookups.
MAX_REPAIRED_WORDS = 3


def _vocabulary(
    text: TantivyText, word: str, fields: tuple[str, ...] = ("text",), scope: Scope = None
) -> tuple[dict[str, int], dict[str, int]]:
    """Index words near `word`: every spelling one edit away that has
    postings, and for words that may be 2 edits away, the words sharing
    their first PREFIX_CHARS characters. That walk, when complete, holds
    every 1-edit spelling keeping those characters, so only the edits
    within them are looked up (one dictionary lookup each, ~1.4 us: ~260
    instead of 37 per character, what a long word that matches nothing
    cost). In a caller's scope, the words a document there holds, with
    their documents there (`scope_vocabulary`). Without one, whether the
    caller may see them is the repaired search's to say (it runs with the
    caller's filters, and a repair is reported only with hits that hold
    it); a fuzzy probe that checked first cost more than the lookups it
    saved (3-30 ms against 2-5 ms on 1 GB under load)."""
    searcher = text.index.searcher()
    found: dict[str, int] = {}
    near: dict[str, int] = {}  # found one edit away: no distance to compute
    walked: list[tuple[str, int]] = []
    complete = False
    if repair_distance(word) > 1:
        lists = [searcher.terms_with_prefix(f, word[:PREFIX_CHARS], limit=PREFIX_TERMS_MAX) for f in fields]
        complete = all(len(listed) < PREFIX_TERMS_MAX for listed in lists)
        walked = [pair for listed in lists for pair in listed]
    for candidate in edits1_changing_prefix(word, PREFIX_CHARS) if complete else edits1(word):
        df = sum(searcher.doc_freq(f, candidate) for f in fields)
        if df:
            found[candidate] = df
            near[candidate] = 1
    for term, df in walked:
        if abs(len(term) - len(word)) <= 2:
            found[term] = found.get(term, 0) + df
    return (found, near) if scope is None else scope_vocabulary(text, word, found, near, fields, scope)


def _near(text: TantivyText, token: str, scope: Scope) -> tuple[dict[str, int], int, dict[str, int]]:
    found, near = _vocabulary(text, token, scope=scope)
    return found, MAX_REPAIR_OPTIONS, near


def _token_has_postings(text: TantivyText, token: str, scope: Scope) -> bool:
    if scope is not None:
        return has_postings(text, Term(token, False), scope)
    searcher = text.index.searcher()
    if searcher.doc_freq("text", token) or searcher.doc_freq("meta", token):
        return True
    return any(_stem_doc_freq(text, t) for t in text.forms_analyzer.analyze(token))


def _term_repairs(text: TantivyText, term: Term, scope: Scope) -> list[str]:
    """Up to MAX_REPAIR_OPTIONS spellings of a bare word with no postings,
    best first, each of its tokens without postings repaired (the rest of a
    compound name, `test_redeliver_after_timout`, kept); [] when one of
    them cannot be repaired."""
    return text.memo(("repairs", term.text, scope), lambda: _spellings(text, term, scope))


# Stems are listed in `forms` (those of inflected words) and in `text`
# (words that are their own stem).
_STEM_VOCABULARY = (FORMS_FIELD, "text")


def _stem_repairs(text: TantivyText, token: str, scope: Scope) -> list[str]:
    """Repairs of a misspelt inflection (`laqptops`, `publuishing`): its
    stem repaired among the index's stems (laptop, publish), when no word
    is close enough to the token itself, the right word's inflection being
    absent (the text says `laptop`). The repair is that stem, searched by
    its forms as any word, within the stem's `repair_distance`. Never a
    stop-word (`with` for `piths`; `rank_repairs`): a short stem is near many of them."""
    stems = text.forms_analyzer.analyze(token)
    if len(stems) != 1 or stems[0] == token or not repair_distance(token):
        return []
    found, near = _vocabulary(text, stems[0], _STEM_VOCABULARY, scope)
    return rank_repairs(stems[0], found, MAX_REPAIR_OPTIONS, near)  # never a stop-word


def _spellings(text: TantivyText, term: Term, scope: Scope) -> list[str]:
    tokens = text.tokens(term.text)
    choices: list[list[str]] = []
    for token in tokens:
        if _token_has_postings(text, token, scope):
            choices.append([token])
            continue
        ranked = rank_repairs(token, *_near(text, token, scope)) if repair_distance(token) else []
        if not ranked:
            ranked = _stem_repairs(text, token, scope)
        if not ranked:
            return []
        choices.append(ranked)
    if all(len(c) == 1 and c[0] == t for c, t in zip(choices, tokens, strict=True)):
        return []
    # Spans of the tokens in the word as typed: a repair keeps its joiners (put-bucket-versioning).
    spans = [(t.char_offset_from, t.char_offset_to) for t in text.analyzer.pre_tokenize(term.text).tokens]
    out: dict[str, None] = {}
    for k in range(MAX_REPAIR_OPTIONS):
        picked = [c[min(k, len(c) - 1)] for c in choices]
        if len(spans) != len(tokens):
            out["_".join(picked)] = None
            continue
        word, pos = [], 0
        for (start, end), token, new in zip(spans, tokens, picked, strict=True):
            word += [term.text[pos:start], term.text[start:end] if new == token else new]
            pos = end
        out["".join(word) + term.text[pos:]] = None
    return list(out)


def repairs(text: TantivyText, terms: list[Term], scope: Scope = None) -> Repairs:
    """Each bare word with no postings in any form (in the caller's scope),
    repaired token by token from the term dictionary (`tiers.rank_repairs`,
    among the scope's words); the options combine every repaired word's
    k-th choice."""
    per_term: list[list[str]] = []
    unmatched: list[str] = []
    for term in terms:
        if term.phrase or _doc_freq(text, term, scope):
            per_term.append([])
            continue
        attempted = sum(1 for x in per_term if x) + len(unmatched)
        spellings = _term_repairs(text, term, scope) if attempted < MAX_REPAIRED_WORDS else []
        if not spellings:
            unmatched.append(term.text)
        per_term.append(spellings)
    if unmatched or not any(per_term):
        return Repairs(terms, [], unmatched)
    options: list[tuple[list[Term], list[tuple[str, str]]]] = []
    for k in range(MAX_REPAIR_OPTIONS):
        new_terms, replaced = [], []
        for term, spellings in zip(terms, per_term, strict=True):
            if not spellings:
                new_terms.append(term)
                continue
            choice = spellings[min(k, len(spellings) - 1)]
            new_terms.append(Term(choice, False))
            replaced.append((term.text, choice))
        if all(replaced != r for _, r in options):
            options.append((new_terms, replaced))
    return Repairs(options[0][0], options[0][1], [], options)


# Scores are float32: a sum of distinct powers of two is exact up to 2^24.
_MASK_BITS = 24
# Fragments of the labelled events fetched at most (an event has a few).
LABEL_K = 10_000


def _fragment_masks(
    text: TantivyText, terms: list[Term], filters: SearchFilters, events: Iterable[int]
) -> list[tuple[int, int, int]]:
    """(fragment rowid, event rowid, bit mask) of each fragment of `events`
    that holds one of `terms` (at most 24), by the partial tier's rule
    (`partial_match_query`): word i scores 2^i, so a fragment's score is the sum of
    the words it holds. One index search."""
    # The events limit the whole query, not each term (`within_docs`): a
    # partial word's many derivation terms each limited cost more than the
    # union's seeks they save (measured on 1 GB).
    words = [Query.const_score_query(partial_match_query(text, t), float(1 << i)) for i, t in enumerate(terms)]
    query = text.combine(words, filters, events, min_match=1)
    return [(frag, event, round(score)) for score, frag, event, _, _ in text.top(query, LABEL_K)]


def matched_masks(
    text: TantivyText, terms: list[Term], events: list[int], filters: SearchFilters
) -> tuple[dict[int, int], dict[int, int]]:
    """Which of `terms` each of `events` holds, in any of its fragments the
    filters admit: event rowid -> bit mask (bit i: terms[i]), and event
    rowid -> its fragments holding one of them; one search per 24 words. A
    label computed so never disagrees with the search that found the hit."""
    out: dict[int, int] = {}
    frags: dict[int, set[int]] = {}
    for start in range(0, len(terms) if events else 0, _MASK_BITS):
        for frag, event, mask in _fragment_masks(text, terms[start : start + _MASK_BITS], filters, events):
            out[event] = out.get(event, 0) | (mask << start)
            frags.setdefault(event, set()).add(frag)
    return out, {event: len(f) for event, f in frags.items()}


# The partial tier's second look, for events whose words sit in different
# fragments (a command and its output, a message and its tool call): the
# best SPREAD_K fragments of each of the SPREAD_WORDS rarest words name the
# candidate events, and one mask search over their fragments says which
# words each holds.
SPREAD_K = 128
SPREAD_WORDS = 8


def spread_events(
    text: TantivyText,
    terms: list[Term],
    weights: list[float],
    filters: SearchFilters,
    exclude: list[int],
    min_match: int,
) -> dict[int, float]:
    """Events (not in `exclude`) holding at least `min_match` distinct words
    of `terms` in any of their fragments: each event's evidence (its
    fragment holding the most weight) -> the IDF sum of the event's words.
    At most SPREAD_WORDS + 1 searches."""
    order = sorted(range(len(terms)), key=lambda i: -weights[i])[:SPREAD_WORDS]
    candidates: set[int] = set()
    for i in order:
        query = text.combine([partial_match_query(text, terms[i])], filters, exclude=exclude)
        candidates.update(event for _, _, event, _, _ in text.top(query, SPREAD_K))
    if not candidates:
        return {}
    worth = [weights[i] for i in order]
    masks: dict[int, int] = {}
    best: dict[int, tuple[float, int]] = {}
    for frag, event, mask in _fragment_masks(text, [terms[i] for i in order], filters, sorted(candidates)):
        masks[event] = masks.get(event, 0) | mask
        held = sum(w for j, w in enumerate(worth) if mask >> j & 1)
        if event not in best or held > best[event][0]:
            best[event] = (held, frag)
    return {
        best[event][1]: sum(w for j, w in enumerate(worth) if mask >> j & 1)
        for event, mask in masks.items()
        if mask.bit_count() >= min_match
    }
