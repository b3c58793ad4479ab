"""The `forms` field's value of a document: its inflected words and the case
parts of its camelCase words (`doc.word_forms`), each distinct word decided
once, in whichever process runs the ingest pipeline (`doc_forms`); and the
analyzers (the one definition of the text's analysis).

A history repeats its vocabulary: the first 46 MB of one held 81,000
distinct words, and each document repeats hundreds of them. Stemming every
document's words again (two analyzer calls and a comparison per word) was
half of a cold index's Python time; here a document costs one tokenizer
call and a few set operations in C (`words - seen`, `words & plain`, `words &
camel`, the camel words' parts added), and only words never seen before are
stemmed and split. The tokenizer leaves out the words already known to add
nothing (most of every document's), so they never become Python strings (40 %
of the values' cost, measured). Words are kept as written (not lower-cased)
so the case parts can be found; the field's analyzer lower-cases, folds and
stems them.

The memory is bounded: past MAX_WORDS distinct words the sets start again
(the vocabulary of the next files is learnt anew; nothing else changes).
Words with a digit (ids, hashes, numbers, markers: most of a history's
distinct words, each met a few times) are kept apart and forgotten together
past DIGIT_WORDS, so the vocabulary levels off at what the text keeps
using: a soak that wrote one unique marker per entry grew the daemon by
~0.3 MB a minute for as long as it ran (100,000 words after ~75 minutes,
~22 MB), to a level after ~8 minutes now.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from itertools import chain

import tantivy
from tantivy import Filter, TextAnalyzerBuilder, Tokenizer

from .doc import word_forms

__all__ = ["DIGIT_WORDS", "MAX_WORDS", "SKIP_STEP", "FormsCache", "analyzer", "doc_forms"]

# About 18 MB of sets and maps when full, ~28 MB of RSS with the skipping
# tokenizer and the heap's slack (in the writer and in each worker; measured
# on the 1 GB corpus). Half as many words saved 12-14 MB and cost 40-50 %
# more CPU for the values (a vocabulary relearnt twice as often).
MAX_WORDS = 100_000
# Of those, the words with a digit kept at most (forgotten together; ~2 MB).
DIGIT_WORDS = 10_000
_DIGIT = re.compile(r"\d")
# The words-as-written tokenizer is rebuilt to leave out the words learnt to
# add nothing once at least this many more are known (`FormsCache._skip_learnt`).
SKIP_STEP = 1000


def analyzer(stem: bool = False, *, fold: bool = True, skip: list[str] | None = None) -> tantivy.TextAnalyzer:
    """Unicode words, lower-cased and folded (the `text` and `meta` fields),
    English-stemmed too (`stem`: the `forms` field), or as written (`fold=False`;
    without the words in `skip`, exactly as written)."""
    b = TextAnalyzerBuilder(Tokenizer.simple()).filter(Filter.remove_long(255))
    if not fold:
        return (b.filter(Filter.custom_stopword(skip)) if skip else b).build()
    b = b.filter(Filter.lowercase()).filter(Filter.ascii_fold())
    return (b.filter(Filter.stemmer("english")) if stem else b).build()


class FormsCache:
    def __init__(self) -> None:
        # The text's words as written (the `text` field's tokenizer, no
        # lower-casing), less the words learnt to add nothing (`_skip_learnt`);
        # the `text` field's analyzer; the same plus the English stemmer.
        self._words, self._folded, self._stemmed = analyzer(fold=False), analyzer(), analyzer(stem=True)
        self._seen: set[str] = set()
        # The seen words that add something: those that add only themselves
        # (inflected words), and the camelCase words (a set, and a map to
        # everything each adds). Kept apart so that a document's value is set
        # operations and a join in C, with no Python code per word; the camel
        # set repeats the map's keys because a set meets a set twice as fast
        # as it meets a map's keys.
        self._plain: set[str] = set()
        self._camel: set[str] = set()
        self._parts: dict[str, tuple[str, ...]] = {}
        self._digits: set[str] = set()  # the seen words with a digit
        self._skipped = 0  # how many words `_words` leaves out

    def value(self, texts: Iterable[str]) -> str:
        """The `forms` field's text for a document of these texts."""
        words = set(self._words.analyze("\n".join(texts)))
        new = words - self._seen
        if len(self._seen) - len(self._digits) + len(new) > MAX_WORDS:
            # Start again, with this document's words (the ones seen before too).
            self._seen, self._plain, self._camel, self._parts, self._digits = set(), set(), set(), {}, set()
            self._words, self._skipped = analyzer(fold=False), 0
            new = words
        if new:
            self._learn(new)
            self._skip_learnt()
        adds = words & self._plain
        camel = words & self._camel
        if camel:
            adds.update(chain.from_iterable(map(self._parts.__getitem__, camel)))
        value = " ".join(adds)
        if len(self._digits) > DIGIT_WORDS:
            self._forget_digits()
        return value

    def _forget_digits(self) -> None:
        """The words with a digit start again; the tokenizer skipping the
        learnt words is rebuilt without them once 1,000 plain words are known."""
        self._seen -= self._digits
        self._plain -= self._digits
        for word in self._digits & self._camel:
            del self._parts[word]
        self._camel -= self._digits
        self._digits = set()
        self._skipped = 0
        self._skip_learnt()

    def _learn(self, new: set[str]) -> None:
        words = list(new)
        joined = " ".join(words)
        folded, stems = self._folded.analyze(joined), self._stemmed.analyze(joined)
        if len(folded) != len(words) or len(stems) != len(words):
            # A word that folds into two (rare): one by one.
            folded = [" ".join(self._folded.analyze(w)) for w in words]
            stems = [" ".join(self._stemmed.analyze(w)) for w in words]
        for word, fold, stem in zip(words, folded, stems, strict=True):
            forms = word_forms(word, fold, stem)
            if forms == (word,):
                self._plain.add(word)
            elif forms:
                self._parts[word] = forms
                self._camel.add(word)
        self._seen.update(words)
        self._digits.update(filter(_DIGIT.search, words))

    def _skip_learnt(self) -> None:
        """Most of a document's words are known to add nothing; the tokenizer
        leaves those out (a stop-word filter in Rust), so they never become
        Python strings: that was most of a value's cost. Rebuilt as the
        vocabulary grows by half (a few ms each time, O(words) in all)."""
        nothing = len(self._seen) - len(self._plain) - len(self._camel)
        if nothing >= self._skipped * 3 // 2 + SKIP_STEP:
            self._words = analyzer(fold=False, skip=list(self._seen - self._plain - self._camel))
            self._skipped = nothing


_CACHE: list[FormsCache] = []
_LOCK = threading.Lock()


def doc_forms(texts: Iterable[str]) -> str:
    """The `forms` value of a document of these texts, from this process's
    one cache: the ingest pipeline's (in a worker, or in the writer's
    process on its parse thread) and the writer's re-fed documents share it
    (hence the lock)."""
    with _LOCK:
        if not _CACHE:
            _CACHE.append(FormsCache())
        return _CACHE[0].value(texts)
