"""The `forms` field's value of a document: its inflected words and the case
parts of its camelCase words (`doc.word_forms`), each distinct word decided
once; a transaction's worth computed ahead by the ingest workers (`Forms`);
and the analyzers (the one definition of the text's analysis).

A history repeats its vocabulary: the first 46 MB of one held 81,000
distinct words, and each document repeats hundreds of them. Stemming every
document's words again (two analyzer calls and a comparison per word) was
half of a cold index's Python time; here a document costs one tokenizer
call and two set operations in C (`words - seen`, `words & inflected`), and
only words never seen before are stemmed and split. The tokenizer leaves out
the words already known to add nothing (most of every document's), so they
never become Python strings (40 % of the values' cost, measured). Words are kept as
written (not lower-cased) so the case parts can be found; the field's
analyzer lower-cases, folds and stems them.

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
from collections.abc import Iterable
from concurrent.futures import Future
from itertools import chain

import tantivy
from tantivy import Filter, TextAnalyzerBuilder, Tokenizer

from ... import workers
from ...model.events import Fragment
from .doc import word_forms

__all__ = [
    "DIGIT_WORDS",
    "MAX_WORDS",
    "PREPARE_BATCH",
    "PREPARE_MIN",
    "SKIP_STEP",
    "Forms",
    "FormsCache",
    "analyzer",
    "forms_batch",
]

# ~150 bytes a word in the sets and the map: about 15 MB at most (in the
# writer and in each worker).
MAX_WORDS = 100_000
# Of those, the words with a digit kept at most (forgotten together; ~2 MB).
DIGIT_WORDS = 10_000
_DIGIT = re.compile(r"\d")
# The words-as-written tokenizer is rebuilt to leave out the words learnt to
# add nothing once at least this many more are known (`FormsCache._skip_learnt`).
SKIP_STEP = 1000
# Fragments' forms are computed by the ingest workers (`Forms.prepare`) in
# batches of about this much text; less than PREPARE_MIN in all (an append)
# stays in the writer, where it costs less than the round trip.
PREPARE_BATCH = 256 * 1024
PREPARE_MIN = 64 * 1024
_Texts = tuple[str, str | None, str]  # a fragment's (text, tail, meta)


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
        self._inflected: set[str] = set()  # the seen words that add something
        self._forms: dict[str, tuple[str, ...]] = {}
        self._digits: set[str] = set()  # the seen words with a digit
        self._skipped = 0  # how many words `_words` leaves out

    def value(self, texts: Iterable[str]) -> str:
        """The `forms` field's text for a document of these texts."""
        words = set(self._words.analyze("\n".join(texts)))
        new = words - self._seen
        if len(self._seen) - len(self._digits) + len(new) > MAX_WORDS:
            # Start again, with this document's words (the ones seen before too).
            self._seen, self._inflected, self._forms, self._digits = set(), set(), {}, set()
            self._words, self._skipped = analyzer(fold=False), 0
            new = words
        if new:
            self._learn(new)
            self._skip_learnt()
        hits = words & self._inflected
        value = " ".join(dict.fromkeys(chain.from_iterable(self._forms[w] for w in hits)))
        if len(self._digits) > DIGIT_WORDS:
            self._forget_digits()
        return value

    def _forget_digits(self) -> None:
        """The words with a digit start again; the tokenizer skipping the
        learnt words is rebuilt without them once 1,000 plain words are known."""
        self._seen -= self._digits
        self._inflected -= self._digits
        for word in self._digits.intersection(self._forms):
            del self._forms[word]
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
            if forms:
                self._forms[word] = forms
                self._inflected.add(word)
        self._seen.update(words)
        self._digits.update(filter(_DIGIT.search, words))

    def _skip_learnt(self) -> None:
        """Most of a document's words are known to add nothing; the tokenizer
        leaves those out (a stop-word filter in Rust), so they never become
        Python strings: that was most of a value's cost. Rebuilt as the
        vocabulary grows by half (a few ms each time, O(words) in all)."""
        plain = len(self._seen) - len(self._inflected)
        if plain >= self._skipped * 3 // 2 + SKIP_STEP:
            self._words = analyzer(fold=False, skip=list(self._seen - self._inflected))
            self._skipped = plain


class Forms:
    """The writer's `forms` values: computed by the workers when `prepare`d
    (the events of a transaction, before its COMMIT), else here."""

    def __init__(self) -> None:
        self.cache = FormsCache()
        self._prepared: dict[_Texts, tuple[Future[list[str]], int]] = {}  # texts -> (batch, place in it)

    def prepare(self, fragments: Iterable[Fragment]) -> None:
        """Start computing these fragments' forms in the ingest workers."""
        batches: list[list[_Texts]] = [[]]
        size = total = 0
        for f in fragments:
            key = (f.text, f.tail, f.meta)
            if key in self._prepared:
                continue
            n = len(f.text) + len(f.tail or "") + len(f.meta)
            if size + n > PREPARE_BATCH and batches[-1]:
                batches.append([])
                size = 0
            batches[-1].append(key)
            size += n
            total += n
        if total < PREPARE_MIN:
            return
        for batch in batches:
            future = workers.submit(forms_batch, batch)
            if future is None:
                return
            for i, key in enumerate(batch):
                self._prepared[key] = (future, i)

    def forget(self) -> None:
        """The prepared values are no longer wanted (taken, or rolled back)."""
        self._prepared.clear()

    def value(self, key: _Texts) -> str:
        """The `forms` value of a document of these texts."""
        prepared = self._prepared.get(key)
        if prepared is not None:
            done = workers.result(prepared[0])
            if done is not None:
                return str(done[prepared[1]])
        return self.cache.value(v for v in key if v)


_WORKER_CACHE: list[FormsCache] = []


def forms_batch(batch: list[_Texts]) -> list[str]:
    """In an ingest worker: the `forms` values of a batch of fragments (its
    own cache, kept between batches)."""
    if not _WORKER_CACHE:
        _WORKER_CACHE.append(FormsCache())
    cache = _WORKER_CACHE[0]
    return [cache.value(v for v in key if v) for key in batch]
