"""The relaxed tiers on the Tantivy engine: the per-word queries of the forms,
repaired and partial tiers, the vocabulary lookups that repair a word, and
the matched/missing words of a hit (rules in `piwatchd.index.tiers`).

A word matches in the forms tier by its exact form (the exact tier's
clause) or by its `forms` tokens: the English stems of its parts
(`loadSessionCache` and `load_session_cache` -> load, session, cach), all
of them in one document. Quoted phrases match as phrases in every tier.
"""

from __future__ import annotations

from dataclasses import dataclass

from tantivy import Occur, Query

from .identifiers import camel_parts, identifier_parts
from .query import Term
from .tantivy_text import FORMS_FIELD, TantivyText
from .tiers import choose_repair, edits1, idf, repair_distance

__all__ = ["Repairs", "forms_tokens", "matched_words", "repairs", "word_query", "partial_word_query"]

# Terms listed under the shared prefix of a word that may be 2 edits away.
PREFIX_CHARS = 3
PREFIX_TERMS_MAX = 2000


def forms_tokens(text: TantivyText, term: Term) -> list[str]:
    """The `forms` tokens a bare word must all have; [] for a phrase."""
    if term.phrase:
        return []
    return list(dict.fromkeys(text.forms_analyzer.analyze(" ".join(identifier_parts(term.text)))))


def word_query(text: TantivyText, term: Term) -> Query:
    """One query word in the forms tier: as written, or by all its forms."""
    exact = text.term_query(term)
    tokens = forms_tokens(text, term)
    if not tokens:
        return exact
    forms = [(Occur.Must, Query.term_query(text.schema, FORMS_FIELD, t)) for t in tokens]
    by_forms = forms[0][1] if len(forms) == 1 else Query.boolean_query(forms)
    return Query.boolean_query([(Occur.Should, exact), (Occur.Should, by_forms)])


def _doc_freq(text: TantivyText, term: Term) -> int:
    """Documents holding the word in its rarest form (exact or forms)."""
    searcher = text.index.searcher()
    exact = text.tokens(term.text)
    tokens = forms_tokens(text, term)
    best = 0
    if len(exact) == 1:
        best = max(searcher.doc_freq("text", exact[0]), searcher.doc_freq("meta", exact[0]))
    if tokens:
        best = max(best, min(searcher.doc_freq(FORMS_FIELD, t) for t in tokens))
    return best


def partial_word_query(text: TantivyText, term: Term, num_docs: int) -> Query:
    """A word of the partial probe: matching it is worth its IDF, whatever
    its frequency in the document (events rank by the distinct words they hold)."""
    return Query.const_score_query(word_query(text, term), idf(_doc_freq(text, term), num_docs))


@dataclass(frozen=True, slots=True)
class Repairs:
    terms: list[Term]  # the query with repaired words replaced
    replaced: list[tuple[str, str]]  # (word, replacement), in query order
    unmatched: list[str]  # words with no postings in any form and no repair


def _vocabulary(text: TantivyText, word: str) -> dict[str, int]:
    """Index words near `word`: every spelling one edit away that has
    postings (one dictionary lookup each), and for words that may be 2
    edits away, the words sharing their first PREFIX_CHARS characters."""
    searcher = text.index.searcher()
    found = {}
    for candidate in edits1(word):
        df = searcher.doc_freq("text", candidate)
        if df:
            found[candidate] = df
    if repair_distance(word) > 1:
        for term, df in searcher.terms_with_prefix("text", word[:PREFIX_CHARS], limit=PREFIX_TERMS_MAX):
            if abs(len(term) - len(word)) <= 2:
                found[term] = df
    return found


def repairs(text: TantivyText, terms: list[Term]) -> Repairs:
    """Each bare one-token word of 4+ characters with no postings in any
    form, replaced by its closest index word (`tiers.choose_repair`)."""
    out: list[Term] = []
    replaced: list[tuple[str, str]] = []
    unmatched: list[str] = []
    for term in terms:
        if term.phrase or _doc_freq(text, term):
            out.append(term)
            continue
        tokens = text.tokens(term.text)
        choice = None
        if len(tokens) == 1 and repair_distance(tokens[0]):
            choice = choose_repair(tokens[0], _vocabulary(text, tokens[0]))
        if choice is None:
            out.append(term)
            unmatched.append(term.text)
        else:
            out.append(Term(choice, False))
            replaced.append((term.text, choice))
    return Repairs(out, replaced, unmatched)


def matched_words(text: TantivyText, terms: list[Term], bodies: list[str]) -> set[str]:
    """The query words (term texts) a fragment's text holds, by the forms
    tier's rule: every token as written (a phrase in order), or every forms token."""
    joined = "\n".join(bodies)
    exact = text.tokens(joined)
    exact_set = set(exact)
    forms = set(text.forms_analyzer.analyze(joined))
    forms.update(text.forms_analyzer.analyze(" ".join(camel_parts(joined))))
    out: set[str] = set()
    for term in terms:
        words = text.tokens(term.text)
        if term.phrase and len(words) > 1:
            n = len(words)
            if any(exact[i : i + n] == words for i in range(len(exact) - n + 1)):
                out.add(term.text)
            continue
        tokens = forms_tokens(text, term)
        if (words and all(w in exact_set for w in words)) or (tokens and all(t in forms for t in tokens)):
            out.add(term.text)
    return out
