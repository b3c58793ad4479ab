"""The `forms` field's value of a document: its inflected words and the case
parts of its camelCase words (`doc.word_forms`), each distinct word decided once.

A history repeats its vocabulary: the first 46 MB of one held 81,000
distinct words, and each document repeats hundreds of them. Stemming every
document's words again (two analyzer calls and a comparison per word) was
half of a cold index's Python time; here a document costs one tokenizer
call and two set operations in C (`words - seen`, `words & inflected`), and
only words never seen before are stemmed and split. Words are kept as
written (not lower-cased) so the case parts can be found; the field's
analyzer lower-cases, folds and stems them.

The memory is bounded: past MAX_WORDS distinct words the sets start again
(the vocabulary of the next files is learnt anew; nothing else changes).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain

import tantivy

from .doc import word_forms

__all__ = ["MAX_WORDS", "FormsCache"]

# ~150 bytes a word in the sets and the map: about 40 MB at most.
MAX_WORDS = 250_000


class FormsCache:
    def __init__(self, words: tantivy.TextAnalyzer, folded: tantivy.TextAnalyzer, stemmed: tantivy.TextAnalyzer):
        """`words` cuts the text's words as written (the `text` field's tokenizer,
        no lower-casing); `folded` is the `text` field's analyzer; `stemmed` the
        same plus the English stemmer."""
        self._words, self._folded, self._stemmed = words, folded, stemmed
        self._seen: set[str] = set()
        self._inflected: set[str] = set()  # the seen words that add something
        self._forms: dict[str, tuple[str, ...]] = {}

    def value(self, texts: Iterable[str]) -> str:
        """The `forms` field's text for a document of these texts."""
        words = set(self._words.analyze("\n".join(texts)))
        new = words - self._seen
        if len(self._seen) + len(new) > MAX_WORDS:
            # Start again, with this document's words (the ones seen before too).
            self._seen, self._inflected, self._forms = set(), set(), {}
            new = words
        if new:
            self._learn(new)
        hits = words & self._inflected
        return " ".join(dict.fromkeys(chain.from_iterable(self._forms[w] for w in hits)))

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
