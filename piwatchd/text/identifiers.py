"""Identifier parts (pure): `loadSessionCache` -> load, session, cache.

Tantivy's word tokenizer splits text on every non-alphanumeric character,
so snake_case, kebab-case, dotted and slashed names already index as their
parts, and the whole name (`loadsessioncache`) stays in the `text` field.
A camelCase or PascalCase word, though, is one token, and a query for
`session cache` never finds it. No Tantivy filter splits on case and none
can be written in Python, so this module finds the case parts of every
camelCase word; they are indexed beside the stemmed text (the forms tier).

Case changes are found in ASCII (`fooBar`, `HTTPServer`); a word holding
one is split wherever its case changes, in any script. The scan is
`bytes.translate` plus `bytes.find` (C speed, ~100 MB/s here): it runs over
every indexed text, and a regular expression there cost 4x the ingest time.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import pairwise

__all__ = ["MAX_NAME_BYTES", "camel_parts", "identifier_parts", "split_segment"]

# Byte classes: word bytes (lower-case, digits, every UTF-8 byte of a
# non-ASCII character) -> "a", upper-case -> "A", the rest -> " ".
_CLASSES = bytes(
    ord("A") if 65 <= c <= 90 else ord("a") if (97 <= c <= 122 or 48 <= c <= 57 or c >= 128) else ord(" ")
    for c in range(256)
)
# fooBar / foo2Bar, and the end of an acronym: HTTPServer.
_CASE_CHANGES = (b"aA", b"AAa")
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


@lru_cache(maxsize=1 << 16)  # names repeat across a history: each is split once
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


def camel_parts(text: str) -> list[str]:
    """The case parts of every camelCase / PascalCase word in `text`, each
    once, in order of first appearance: the words the `forms` field adds."""
    raw = text.encode("utf-8", "surrogatepass")
    classes = raw.translate(_CLASSES)
    starts: dict[int, int] = {}  # word start -> end
    for change in _CASE_CHANGES:
        pos = classes.find(change)
        while pos >= 0:
            start = classes.rfind(b" ", 0, pos) + 1
            end = classes.find(b" ", pos)
            end = len(classes) if end < 0 else end
            if end - start <= MAX_NAME_BYTES:
                starts[start] = end
            pos = classes.find(change, end)
    words = dict.fromkeys(raw[start : starts[start]] for start in sorted(starts))
    out: dict[str, None] = {}
    for word in words:
        parts = _split(word.decode("utf-8", "replace"))
        if len(parts) > 1:
            out.update(dict.fromkeys(parts))
    return list(out)
