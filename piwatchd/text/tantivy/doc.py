"""What the text index knows about a fragment, and which documents a search
admits (pure).

A text-index document is one fragment: its searchable text (head, tail and
meta words) plus the filter values of its event, so every structured filter
runs inside the text index and its top fragments already pass them (the SQL
filters applied when hits are coalesced are the same admission). This module
builds those values from index rows and turns `SearchFilters` into abstract
clauses; `piwatchd.text.tantivy.index` translates both to Tantivy.

Paths are indexed with all their ancestors (`/a`, `/a/b`, `/a/b/c`), so "this
directory or below, on a component boundary" is one exact term lookup:
`/a/proj` never matches `/a/proj2`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ...model import subtree
from ..identifiers import case_parts
from ..query import OWN_TOOLS, SearchFilters, caps_by_ordinal

__all__ = [
    "ANY_PATH",
    "FACETS",
    "KEY_FIELDS",
    "Clause",
    "EventFacts",
    "TextDoc",
    "ancestors",
    "doc_json",
    "event_fields",
    "facet",
    "field_term",
    "filter_clauses",
    "word_forms",
]

# Indexed beside every path set: "any path at all" (a root of "/" or "").
ANY_PATH = "*"

# The filter values live in one raw field as `name:value` terms, except the
# keys documents are deleted by. Tantivy builds a term dictionary per indexed
# field of each segment (an FST whose builder sets up ~1 MB however few its
# terms): with 13 filter fields, they were a third of the cost of publishing
# the overlay's one-document segment after every append.
FACETS = "facets"
KEY_FIELDS = ("event", "session")


def facet(name: str, value: str) -> str:
    """Filter `name`'s `value` as a term of the FACETS field (the one spelling
    documents are written with and queries look up)."""
    return f"{name}:{value}"


def field_term(name: str, value: str) -> tuple[str, str]:
    """The index field and term that hold filter `name`'s `value`."""
    return (name, value) if name in KEY_FIELDS else (FACETS, facet(name, value))


@lru_cache(maxsize=8192)
def _facet_paths(name: str, path: str) -> tuple[str, ...]:
    return tuple(facet(name, p) for p in ancestors(path))


@lru_cache(maxsize=8192)  # every document of a session has the same cwd
def ancestors(path: str) -> tuple[str, ...]:
    """`path` and every ancestor on a `/` boundary (`subtree.ancestors`), plus ANY_PATH."""
    return (ANY_PATH, *subtree.ancestors(path))


@dataclass(frozen=True, slots=True)
class EventFacts:
    """Event-level filter values, as the read model holds them."""

    event_rowid: int
    session_id: str
    ordinal: int
    type: str
    role: str | None
    ts_ms: int | None
    is_error: bool
    branch_state: str
    selection_state: str
    cwd_norm: str | None
    cwd_real: str | None
    own_result: bool  # a piwatch tool result (tagged `details.piwatch`)
    files_read: tuple[str, ...] = ()
    files_changed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TextDoc:
    frag_rowid: int
    facts: EventFacts
    kind: str
    tool_name: str | None
    body: str
    tail: str | None
    meta: str
    forms: str | None = None  # the `forms` value, when the ingest pipeline computed it


def _paths(paths: tuple[str, ...]) -> list[str]:
    out: set[str] = set()
    for p in paths:
        out.update(ancestors(p))
    return sorted(out)


def event_fields(f: EventFacts) -> dict[str, Any]:
    """The filter values every document of one event shares. Absent values
    are left out, so a filter on them never matches (as SQL's `IN` never
    matches NULL)."""
    facets = [
        facet("type", f.type),
        facet("error", "1" if f.is_error else "0"),
        facet("branch", f.branch_state),
        facet("selection", f.selection_state),
    ]
    d: dict[str, Any] = {
        "event_n": f.event_rowid,
        "event": str(f.event_rowid),
        "session": f.session_id,
        "ordinal": f.ordinal,
    }
    if f.role is not None:
        facets.append(facet("role", f.role))
    if f.ts_ms is not None:
        d["ts"] = f.ts_ms
    if f.cwd_norm is not None:
        facets.append(facet("cwd", f.cwd_norm))
        facets.extend(_facet_paths("cwd_up", f.cwd_norm))
    if f.cwd_real is not None:
        facets.extend(_facet_paths("root_up", f.cwd_real))
    if f.files_read:
        facets.extend(facet("file_read", p) for p in _paths(f.files_read))
    if f.files_changed:
        facets.extend(facet("file_changed", p) for p in _paths(f.files_changed))
    d[FACETS] = facets
    return d


def doc_json(doc: TextDoc, shared: dict[str, Any] | None = None) -> dict[str, Any]:
    """The document as a field -> value(s) mapping; `shared` is
    `event_fields(doc.facts)` when the caller already has it."""
    d = dict(shared if shared is not None else event_fields(doc.facts))
    own = doc.facts.own_result or (doc.kind == "tool.call" and doc.tool_name in OWN_TOOLS)
    d["frag"] = doc.frag_rowid
    facets = [*d[FACETS], facet("kind", doc.kind), facet("own", "1" if own else "0")]
    if doc.tool_name is not None:
        facets.append(facet("tool", doc.tool_name))
    d[FACETS] = facets
    d["text"] = [doc.body, doc.tail] if doc.tail else doc.body
    d["len"] = len(doc.body) + len(doc.tail or "")
    if doc.meta:
        d["meta"] = doc.meta
    return d


def word_forms(word: str, folded: str, stem: str) -> tuple[str, ...]:
    """What one word of a document adds to its `forms` field: the word when
    its English stem differs from it (`folded`, as the `text` field holds it;
    the field's analyzer stems it: `retried` -> retri), and its case parts
    when it is a camelCase word. A word that is its own stem (`error`) is
    already a word of `text` or `meta`, where the forms tier looks for stems
    too: leaving it out keeps this field to the inflected words (a third of
    the postings)."""
    return ((word,) if folded != stem else ()) + case_parts(word)


@dataclass(frozen=True, slots=True)
class Clause:
    """One admission rule: `op` is must | must_not | nothing.

    `terms` is a list of (field, value) alternatives (any may match); `range`
    is (field, low inclusive, high exclusive); `both` is a conjunction of
    (field, value) terms and a range, for per-session ordinal caps.
    """

    op: str
    terms: tuple[tuple[str, str], ...] = ()
    range: tuple[str, int | None, int | None] | None = None


def _any(field: str, values: Iterable[str]) -> tuple[tuple[str, str], ...]:
    return tuple((field, v) for v in values)


def _root_terms(field: str, roots: Iterable[str]) -> tuple[tuple[str, str], ...]:
    return tuple((field, (r.rstrip("/") or ANY_PATH)) for r in roots)


def filter_clauses(f: SearchFilters) -> list[Clause]:
    """The same admission as `query.filter_clauses` (SQL), as text-index clauses."""
    out: list[Clause] = []
    if f.authorized_roots is not None:
        out.append(
            Clause("must", _root_terms("root_up", f.authorized_roots)) if f.authorized_roots else Clause("nothing")
        )
    for field, values in (
        ("session", f.session_ids),
        ("type", f.event_types),
        ("kind", f.kinds),
        ("role", f.roles),
        ("tool", f.tools),
        ("branch", f.branch_states),
        ("selection", f.selection_states),
    ):
        if values:
            out.append(Clause("must", _any(field, values)))
    if f.event_rowids:
        out.append(Clause("must", _any("event", [str(r) for r in f.event_rowids])))
    if f.exclude_sessions:
        out.append(Clause("must_not", _any("session", f.exclude_sessions)))
    if f.cwd is not None:
        out.append(Clause("must", (("cwd", f.cwd),)))
    if f.cwd_under is not None and f.cwd_under.rstrip("/"):
        out.append(Clause("must", (("cwd_up", f.cwd_under.rstrip("/")),)))
    if f.since_ms is not None or f.until_ms is not None:
        out.append(Clause("must", range=("ts", f.since_ms, f.until_ms)))
    if f.is_error is not None:
        out.append(Clause("must", (("error", "1" if f.is_error else "0"),)))
    if f.exclude_own_results:
        out.append(Clause("must_not", (("own", "1"),)))
    for cap, sessions in caps_by_ordinal(f.ordinal_caps):
        out.append(Clause("must_not", _any("session", sessions), range=("ordinal", cap, None)))
    if f.files:
        fields = {"read": ("file_read",), "changed": ("file_changed",)}.get(f.file_mode, ("file_read", "file_changed"))
        terms = tuple((fld, (p.rstrip("/") or ANY_PATH)) for p in f.files for fld in fields)
        out.append(Clause("must", terms))
    return out
