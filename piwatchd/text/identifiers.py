"""Identifier parts (pure): `loadSessionCache` -> load, session, cache.

Tantivy's word tokenizer splits text on every non-alphanumeric character,
so snake_case, kebab-case, dotted and slashed names already index as their
parts, and the whole name (`loadsessioncache`) stays in the `text` field.
A camelCase or PascalCase word, though, is one token, and a query for
`session cache` never finds it. No Tantivy filter splits on case and none
can be written in Python, so this module gives the case parts of a word;
they are indexed beside the stemmed text (the forms tier,
`piwatchd.text.tantivy.forms`, which splits each distinct word once).
A regex tokenizer in Tantivy could cut the parts, but it has no lookahead
(`HTTPServer` stays whole) and measured 3x the CPU of this in all.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import pairwise

__all__ = ["MAX_NAME_BYTES", "case_parts", "identifier_parts", "split_segment"]

# Longer mixed-case runs are tokens, hashes and base64, not names: their
# "parts" would be noise in the index.
MAX_NAME_BYTES = 64
_JOINERS = re.compile(r"[\W_]+")


def _kind(ch: str) -> str:
    if ch.isdigit():
        return "D"
    if ch.isupper():
        return "U"
    return "L"  # lower-case and caseless letters (CJK, ...) alike


# Each ASCII character's kind in one `str.translate`: upper-case, digit, other.
_ASCII_KINDS = str.maketrans(
    {chr(c): ("U" if chr(c).isupper() else "D" if chr(c).isdigit() else "L") for c in range(128)}
)
# Where a part starts: fooBar / foo2Bar, and the last capital of an acronym (HTTPServer).
_STARTS = re.compile(r"(?<=[LD])U|(?<=U)U(?=L)")
# The same cuts on an ASCII word's own characters (L: neither upper-case nor digit).
_ASCII_STARTS = re.compile(r"(?<=[^A-Z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][^A-Z0-9])")


# Names repeat: each is split once while it is in use. A snippet splits every
# word of its window, so a soak's unique markers filled 65,536 entries (16 MB)
# over an hour; 4,096 hold what recent searches and snippets use.
@lru_cache(maxsize=1 << 12)
def _split(segment: str) -> tuple[str, ...]:
    kinds = segment.translate(_ASCII_KINDS) if segment.isascii() else "".join(map(_kind, segment))
    cuts = [0, *(m.start() for m in _STARTS.finditer(kinds)), len(segment)]
    return tuple(segment[a:b].lower() for a, b in pairwise(cuts) if b > a)


def split_segment(segment: str) -> list[str]:
    """One word (letters and digits) split where its case changes,
    lower-cased: `parseHTTPResponse2` -> parse, http, response2 (digits stay
    with the part before them). A word without case changes is one part."""
    return list(_split(segment))


def identifier_parts(name: str) -> list[str]:
    """The parts of a name as a query word: split on every joiner (snake,
    kebab, dots, slashes) and on case: `load_session_cache`,
    `loadSessionCache` and `LoadSession.cache` all -> load, session, cache."""
    out: list[str] = []
    for segment in _JOINERS.split(name):
        if segment:
            out.extend(split_segment(segment))
    return out


def case_parts(word: str) -> tuple[str, ...]:
    """The parts of one word (a run of letters and digits, as the word
    tokenizer cuts them) where its case changes, lower-cased:
    `loadSessionCache` -> load, session, cache; () when it has no case
    change, or is longer than MAX_NAME_BYTES (a token, hash or base64)."""
    if word.islower() or word.isupper() or len(word) > MAX_NAME_BYTES:
        return ()  # the common cases, decided in C
    if word.isascii():
        # One regex split, uncached: the forms field splits each new word of a
        # history once, most of them mixed-case ids and hashes (72 % of 72,000
        # words in 46 MB), which would only churn `_split`'s cache.
        cut = _ASCII_STARTS.split(word)
        return tuple(p.lower() for p in cut) if len(cut) > 1 else ()
    if len(word.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return ()
    parts = _split(word)
    return parts if len(parts) > 1 else ()
