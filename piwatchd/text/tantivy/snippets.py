"""Snippets of the Tantivy engine's hits: the window of evidence text around
a tier's first matching word, matches marked (`piwatchd.text.hits` renders
them). The exact tier marks its words as written; the tiers below it also
by English stem and camelCase part, as they matched.

The index stores no text: the evidence comes re-projected from its source
line (`piwatchd.store.source_events`), bounded per fragment.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache

from ...model.events import Fragment
from ..hits import MARK_CLOSE, MARK_OPEN
from ..identifiers import split_segment
from ..query import Term
from .index import TantivyText
from .tiers import forms_tokens

__all__ = ["SNIPPET_WINDOW", "Marks", "snippet"]

SNIPPET_WINDOW = 420


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


class Marks:
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


def snippet(marks: Marks, frag: Fragment | None) -> str:
    if frag is None:
        return ""
    for body in (frag.text, frag.tail, frag.meta):
        if body:
            window = marks.window(body)
            if window is not None:
                return window
    return _marked(frag.text, 0, min(len(frag.text), SNIPPET_WINDOW), [])
