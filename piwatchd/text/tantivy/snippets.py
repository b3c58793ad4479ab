"""Snippets of the Tantivy engine's hits: the window of evidence text around
a tier's first matching word, matches marked (`piwatchd.text.hits` renders
them). The exact tier marks its words as written; the tiers below it also
by English stem and camelCase part, as they matched.

The index stores no text: the evidence comes re-projected from its source
line (`piwatchd.store.source_events`), unredacted, and a snippet redacts
only the lines it shows (`evidence_snippet`), as redacting the whole
fragment would have them.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache

from ...model.events import Fragment
from ...model.project import HEAD_CHARS, MAX_FRAGMENT_CHARS, TAIL_CHARS, Evidence, unmarked
from ...model.redact import Rules, line_secrets, shown
from ..hits import MARK_CLOSE, MARK_OPEN
from ..identifiers import split_segment
from ..query import Term
from .index import TantivyText
from .words import forms_tokens

__all__ = ["SNIPPET_WINDOW", "Marks", "evidence_snippet", "snippet"]

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
    return list(_iter_whole_words(body, low, tokens, lo, hi))


def _iter_whole_words(
    body: str, low: str | None, tokens: frozenset[str], lo: int, hi: int
) -> Iterator[tuple[int, int]]:
    """`_whole_words` one by one: the first costs no scan of the rest (a
    common word occurs hundreds of times in a large tool output)."""
    if low is None:
        yield from _regex_words(body, tokens, lo, hi)
        return
    end = lo
    for n, (s, e) in enumerate(_occurrences(low, tokens, lo, hi)):
        if n >= _MAX_CANDIDATES:
            yield from _regex_words(body, tokens, max(s, end), hi)
            return
        if s >= end and (s == 0 or not body[s - 1].isalnum()) and (e == len(body) or not body[e].isalnum()):
            yield s, e
            end = e


def _regex_words(body: str, tokens: frozenset[str], lo: int, hi: int) -> Iterator[tuple[int, int]]:
    """`_whole_words` by the regex: words of the whole text (none cut at `hi`)."""
    for m in _match_pattern(tokens).finditer(body, lo):
        if m.end() > hi:
            break
        yield m.span()


@lru_cache(maxsize=128)
def _match_pattern(tokens: frozenset[str]) -> re.Pattern[str]:
    alts = "|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True))
    # Word boundaries as the analyzer sees them: letters and digits only.
    return re.compile(rf"(?<![^\W_])(?:{alts})(?![^\W_])", re.IGNORECASE)


@lru_cache(maxsize=128)
def _loose_pattern(prefixes: frozenset[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(p) for p in sorted(prefixes, key=len, reverse=True)), re.IGNORECASE)


# Where a snippet's window falls in a body: (its first match's start, the
# window [lo, hi), the matches inside it to mark).
_Place = tuple[int, int, int, list[tuple[int, int]]]


def _around(body: str, first: int, spans: list[tuple[int, int]]) -> _Place:
    lo = max(0, first - SNIPPET_WINDOW // 4)
    return first, lo, min(len(body), lo + SNIPPET_WINDOW), spans


def _place(text: TantivyText, body: str, tokens: frozenset[str]) -> _Place | None:
    """The snippet window around the first match of `tokens` in `body`;
    None when nothing in `body` matches."""
    low = _lower(body)
    first = next(_iter_whole_words(body, low, tokens, 0, len(body)), None) if tokens else None
    if first:
        _, lo, hi, _ = _around(body, first[0], [])
        return _around(body, first[0], _whole_words(body, low, tokens, lo, hi))
    if body.isascii():
        return None
    # Folded forms (`Café` for `cafe`) need the analyzer itself (bounded text).
    spans = [
        (t.char_offset_from, t.char_offset_to) for t in text.analyzer.pre_tokenize(body).tokens if t.text in tokens
    ]
    if not spans:
        return None
    return _around(body, spans[0][0], spans)


def _marked(
    body: str, lo: int, hi: int, spans: list[tuple[int, int]], before: bool = False, after: bool = False
) -> str:
    """body[lo:hi] with `spans` marked, an ellipsis where text goes on (`before`,
    `after`: `body` is part of a longer text that goes on there)."""
    out, pos = ["…" if lo or before else ""], lo
    for s, e in spans:
        if s < pos or e > hi:
            continue
        out += [body[pos:s], MARK_OPEN, body[s:e], MARK_CLOSE]
        pos = e
    out += [body[pos:hi], "…" if hi < len(body) or after else ""]
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

    def _loose_place(self, body: str) -> _Place | None:
        """The window around the first word matching by form."""
        low = _lower(body)
        if low is not None:
            candidates = _occurrences(low, self.prefixes, 0, len(body))
        else:  # lower-casing moved offsets (rare): `re` finds the candidates
            candidates = (m.span() for m in _loose_pattern(self.prefixes).finditer(body))
        spans: list[tuple[int, int]] = []
        hi, pos = len(body), 0
        for n, (s, e) in enumerate(candidates):
            if s >= hi or n >= _MAX_CANDIDATES:
                break
            if s < pos:
                continue  # inside a word already looked at
            start, end = _word_around(body, s, e)
            found = self._word_spans(body, start, end)
            if found and not spans:
                hi = _around(body, found[0][0], [])[2]
            spans += [sp for sp in found if sp[1] <= hi]
            pos = end
        if not spans:
            return None
        return _around(body, spans[0][0], spans)

    def place(self, body: str) -> _Place | None:
        """Where the snippet window of `body` falls; None when nothing in it matches."""
        if self.loose:
            return self._loose_place(body)
        return _place(self.text, body, self.tokens)

    def window(self, body: str) -> str | None:
        """The snippet window of `body`, matches marked; None when nothing in it matches."""
        place = self.place(body)
        return None if place is None else _marked(body, *place[1:])


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
    """The marked snippet of a fragment as indexed (redacted whole)."""
    if frag is None:
        return ""
    for body in (frag.text, frag.tail, frag.meta):
        if body:
            window = marks.window(body)
            if window is not None:
                return window
    return _marked(frag.text, 0, min(len(frag.text), SNIPPET_WINDOW), [])


class _WholeText(Exception):
    """Only the whole text's redaction can say where the snippet falls."""


def evidence_snippet(marks: Marks, evidence: Evidence) -> str:
    """`snippet` of the evidence fragment as indexed, from the source's text
    with only the lines it shows redacted (`redact.line_secrets`), exactly
    as the whole text's redaction has them: redacting a page of large tool
    outputs whole cost more than the rest of the search.

    The first match is looked for in the source's text, and is the first of
    the redacted text where no secret lies before its line (the triggers of
    the text before it say so): redaction takes matches away (a word inside
    a secret) and adds them (a marker's words, a word a secret ran into)
    only where a secret is. Where one may lie before the first match, or
    one may span lines (`Rules.lines_suffice`), the whole text is redacted.
    The head and tail are cut where the whole text's redaction cuts them;
    only whether there are a head and a tail is told by the source's length
    (secrets that change it across MAX_FRAGMENT_CHARS may differ)."""
    frag = evidence.unredacted
    if frag is None:
        return ""
    text, rules = frag.text, evidence.rules
    oversized = len(text) > MAX_FRAGMENT_CHARS
    try:
        if not rules.lines_suffice(text):
            raise _WholeText
        window = _head_window(marks, text, HEAD_CHARS if oversized else None, rules)
    except _WholeText:
        return snippet(marks, evidence.indexed())
    if window is None and oversized:
        window = marks.window(_tail(text, rules))
    if window is None and frag.meta:
        window = marks.window(frag.meta)
    return window if window is not None else _opening(text, rules, oversized)


def _head_window(marks: Marks, text: str, cut: int | None, rules: Rules) -> str | None:
    """The window around the first match of the head (the text's first
    `cut` characters, or all of it), as redacted whole; None when none matches."""
    head = len(text) if cut is None else cut
    place = marks.place(unmarked(text[:head]))
    first = None if place is None else place[0]
    before = head if first is None else text.rfind("\n", 0, first) + 1
    if rules.candidates(text[:before]):
        raise _WholeText  # a secret may lie before the first match
    if first is None:
        return None
    window = _window_at(marks, text, first, cut, rules)
    if window is None:
        raise _WholeText  # the first match lay inside a secret
    return window


def _window_at(marks: Marks, text: str, first: int, cut: int | None, rules: Rules) -> str | None:
    """The marked window around the first match of the redacted head, from
    the redacted lines around `first` (the head's first match in the
    source's text; no secret lies in the lines before it, so those lines
    start where they do in the redacted text and the head's `cut` falls
    where it falls there); lines are added until the window's place is
    known. None when the match at `first` lies inside a secret and those
    lines hold no other."""
    n, margin = len(text), SNIPPET_WINDOW
    while True:
        start, end, secrets = line_secrets(text, max(0, first - margin), min(n, first + margin), rules)
        seg = unmarked(shown(text, start, end, secrets))
        whole = end == n
        if cut is not None and len(seg) >= cut - start:
            seg, whole = seg[: cut - start], True
        place = marks.place(seg)
        if place is None:
            return None
        at, lo, hi, spans = place
        if (start == 0 or at >= SNIPPET_WINDOW // 4) and (whole or lo + SNIPPET_WINDOW <= len(seg)):
            return _marked(seg, lo, hi, spans, before=start > 0, after=not whole)
        margin *= 4


def _tail(text: str, rules: Rules) -> str:
    """The tail of an oversized text as redacted whole: its last TAIL_CHARS
    characters, from the lines that hold them redacted."""
    n, margin = len(text), TAIL_CHARS + SNIPPET_WINDOW
    while True:
        start, _, secrets = line_secrets(text, max(0, n - margin), n, rules)
        redacted = unmarked(shown(text, start, n, secrets))
        if len(redacted) >= TAIL_CHARS or start == 0:
            return redacted[-TAIL_CHARS:]
        margin *= 4


def _opening(text: str, rules: Rules, oversized: bool) -> str:
    """The head's first SNIPPET_WINDOW characters, unmarked, from its first lines redacted."""
    n, margin = len(text), SNIPPET_WINDOW
    while True:
        _, end, secrets = line_secrets(text, 0, min(n, margin), rules)
        seg = unmarked(shown(text, 0, end, secrets))
        if len(seg) >= SNIPPET_WINDOW or end == n:
            return _marked(seg, 0, min(len(seg), SNIPPET_WINDOW), [], after=oversized or end < n)
        margin *= 4
