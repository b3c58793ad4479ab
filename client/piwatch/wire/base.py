"""The wire's foundations: the bounds shared by the daemon and its clients, the caps on
caller-supplied values (checked while decoding), quoting of values in error
messages, and the base Structs (camelCase on the wire, strict requests)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

__all__ = [
    "FOLLOW_QUEUE_HITS",
    "GROUP_EVENTS_MAX",
    "MAX_EXTRA_ROOTS",
    "MAX_FILTER_VALUES",
    "MAX_FOLLOWS_PER_CONNECTION",
    "MAX_ID_CHARS",
    "MIN_ID_PREFIX",
    "MAX_INDEX",
    "MAX_LIMIT",
    "MAX_OFFSET",
    "MAX_PATH_COMPONENTS",
    "MAX_QUOTE_CHARS",
    "MAX_SESSIONS_LIMIT",
    "MAX_WAIT_SECONDS",
    "NEIGHBOURS_MAX",
    "PATH_MAX",
    "Request",
    "SESSIONS_QUERY_HITS",
    "WORD_COUNTS_MAX",
    "WORD_COUNT_MAX",
    "WINDOW_DEFAULT",
    "WINDOW_MAX",
    "Wire",
    "clip",
    "quote",
]

# Bounds shared by the daemon and its clients (the ops import them from here).
MAX_LIMIT = 200
# `group: "session"` groups at most this many best events (the bound on its cost).
GROUP_EVENTS_MAX = 200
MAX_OFFSET = 10_000
MAX_SESSIONS_LIMIT = 500
MAX_FOLLOWS_PER_CONNECTION = 8  # standing queries one connection may hold
FOLLOW_QUEUE_HITS = 1000  # hits waiting for a slow reader before its follow is dropped
SESSIONS_QUERY_HITS = 1000  # `sessions` with a query: sessions among this many best hits
# A query that found nothing: its first WORD_COUNTS_MAX content words are
# counted by themselves, each up to WORD_COUNT_MAX events (`SearchResult.words`).
WORD_COUNTS_MAX = 8
WORD_COUNT_MAX = 20
MAX_WAIT_SECONDS = 10.0
NEIGHBOURS_MAX = 50
WINDOW_MAX = 64_000
WINDOW_DEFAULT = 8_000  # characters of a fragment window when the caller names no length
# Offsets into text or lists: far beyond any real value, well inside SQLite's 64-bit integers.
MAX_INDEX = 2**53
# SQLite integers are 64-bit; a larger filter value would be an OverflowError.
_INT64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
# Error messages quote at most this much of any caller- or file-supplied value.
MAX_QUOTE_CHARS = 200
# Caps on caller-supplied values, checked while decoding (before any filesystem or
# database work): the cost of resolving a path grows with its length and depth, an
# SQL or text-index expression with its number of roots and filter values.
PATH_MAX = 4096  # bytes of one path, as Linux's PATH_MAX
MAX_PATH_COMPONENTS = 128  # `/`-separated parts of one path (real ones have a few dozen)
MAX_ID_CHARS = 1024  # a session, entry, fragment or tool-call id, a kind, role or tool name
# A session may be named by a unique prefix of its id this long or longer (as git takes
# a commit's): shorter, it would too often be ambiguous or name a session by accident.
MIN_ID_PREFIX = 8
MAX_EXTRA_ROOTS = 32  # a caller's extra authorization roots
MAX_FILTER_VALUES = 100  # values of one list filter (session ids, files, kinds, ...)

_Path = Annotated[str, msgspec.Meta(max_length=PATH_MAX)]
_Id = Annotated[str, msgspec.Meta(max_length=MAX_ID_CHARS)]
_Ids = Annotated[list[_Id], msgspec.Meta(max_length=MAX_FILTER_VALUES)]


def _check_paths(**paths: str | list[str] | None) -> None:
    """Raise ValueError (a bad_request naming the field) for a path beyond PATH_MAX
    bytes or MAX_PATH_COMPONENTS parts; the character cap already bounds this work."""
    for name, value in paths.items():
        for path in [value] if isinstance(value, str) else value or ():
            if len(path.encode("utf-8", "surrogatepass")) >= PATH_MAX:
                raise ValueError(f"`{name}`: a path must be shorter than {PATH_MAX} bytes")
            if path.count("/") > MAX_PATH_COMPONENTS:
                raise ValueError(f"`{name}`: a path may have at most {MAX_PATH_COMPONENTS} components")


def clip(text: str, limit: int = MAX_QUOTE_CHARS) -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    return text if len(text) <= limit else text[:limit] + f"…(+{len(text) - limit} chars)"


def quote(value: Any, limit: int = MAX_QUOTE_CHARS) -> str:
    """`repr` of a value, cut to `limit` characters: error messages never carry
    a huge caller or source value (a 60 MB first line must not ride along
    every response)."""
    return clip(repr(value[: limit + 1] if isinstance(value, (str, bytes)) else value), limit)


class Wire(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    """Base of every wire shape: read by attribute (snake_case); camelCase only on the wire."""


class Request(Wire):
    """Base of the request shapes. `hello` stays lenient about unknown fields,
    so a newer client can always be told which version to upgrade to."""


class _Strict(Request, forbid_unknown_fields=True):
    """Requests that refuse unknown fields: a typo is a clear bad_request."""
