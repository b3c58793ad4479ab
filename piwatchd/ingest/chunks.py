"""One chunk of a source, start to end (pure): complete lines -> entries ->
events -> the flat rows the writer inserts (`model.rows`), with the parser
state threaded from chunk to chunk. An entry that cannot be projected is
kept bare and reported at its byte offset; an over-long line's range becomes
a diagnostic. `ingest.pipeline` runs this in an ingest worker (the rows come
back as msgpack, `pack_rows`) or in the writer's process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, NamedTuple

import msgpack
import orjson

from ..model.events import Diagnostic, Entry, Event, Header, SourceFormat, excerpt
from ..model.extractors import NO_EXTRACTORS, Registry
from ..model.project import MAX_FRAGMENTS_PER_EVENT, project_entry
from ..model.redact import DEFAULT_RULES, Rules
from ..model.rows import EventRow, TreeRow, event_row, tree_row, unpack_event, unpack_tree
from ..source.lines import split_complete_lines
from ..source.parser import ParseResult, ParserState, UnsupportedSource, parse_lines
from ..source.reader import MAX_LINE_BYTES, Overlong

__all__ = ["PIPELINE_CHUNK", "Rows", "chunk_rows", "pack_rows", "project_contained", "skipped_rows", "unpack_rows"]

# Small enough that a typical session file spans several chunks, so parsing
# the next chunk overlaps with SQLite writing this one.
PIPELINE_CHUNK = 512 * 1024

Forms = Callable[[Iterable[str]], str]


class Rows(NamedTuple):
    """A chunk's flat rows: where its complete lines end, the parser state
    there, the header when this chunk found it, diagnostics, and one event
    row and one tree row per entry."""

    end: int
    state: ParserState
    header: Header | None
    diagnostics: list[Diagnostic]
    events: list[EventRow]
    tree: list[TreeRow]


def chunk_rows(
    offset: int,
    data: bytes,
    state: ParserState,
    rules: Rules,
    forms: Forms | None,
    extractors: Registry = NO_EXTRACTORS,
) -> Rows:
    """The whole pure pipeline of one chunk read at `offset`, after `state`:
    complete lines -> entries -> events (redacted by `rules`, registered
    custom types made searchable by `extractors`, each fragment's `forms`
    value by `forms`) -> flat rows."""
    lines, end = split_complete_lines(data, offset)
    result = parse_lines(state, lines)
    after = result.state
    found = after.header if state.header is None else None
    if not result.entries:
        return Rows(end, after, found, list(result.diagnostics), [], [])
    assert after.header is not None  # the parser yields entries only after a header
    result, events = project_contained(after.header.session_id, result, rules, extractors)
    cwd = after.header.cwd
    return Rows(
        end,
        after,
        found,
        list(result.diagnostics),
        [event_row(ev, forms) for ev in events],
        [tree_row(e, cwd) for e in result.entries],
    )


def skipped_rows(item: Overlong, state: ParserState) -> Rows:
    """The rows of an over-long line's range: none, a diagnostic where the line begins."""
    if state.header is None:
        # A header is a few hundred bytes; a first line this long is no Pi session.
        raise UnsupportedSource(f"the first line is longer than {MAX_LINE_BYTES >> 20} MiB: not a Pi session file")
    after = replace(state, overlong_at=None if item.complete else item.line_at)
    diagnostics = []
    if item.start == item.line_at:
        diagnostics.append(
            Diagnostic("overlong-line", f"a line longer than {MAX_LINE_BYTES >> 20} MiB skipped unread", item.line_at)
        )
    return Rows(item.end, after, None, diagnostics, [], [])


def pack_rows(rows: Rows) -> bytes:
    """Rows as msgpack: what a worker sends back (plain values only)."""
    h = rows.header
    header = None if h is None else _header_values(h)
    diagnostics = [(d.code, d.message, d.byte_offset, d.repaired) for d in rows.diagnostics]
    packed: bytes = msgpack.packb(
        (rows.end, rows.state.to_json(), header, diagnostics, rows.events, rows.tree), use_bin_type=True
    )
    return packed


def unpack_rows(packed: bytes) -> Rows:
    end, state, header, diagnostics, events, tree = msgpack.unpackb(packed, use_list=True)
    return Rows(
        end,
        ParserState.from_json(state),
        None if header is None else _header_of(header),
        [Diagnostic(*d) for d in diagnostics],
        [unpack_event(e) for e in events],
        [unpack_tree(t) for t in tree],
    )


def _header_values(h: Header) -> tuple[Any, ...]:
    return (h.session_id, h.format.value, h.version, h.cwd, h.timestamp, h.parent_session, h.title)


def _header_of(v: list[Any]) -> Header:
    return Header(v[0], SourceFormat(v[1]), v[2], v[3], v[4], v[5], title=v[6])


def project_contained(
    session_id: str, result: ParseResult, rules: Rules = DEFAULT_RULES, extractors: Registry = NO_EXTRACTORS
) -> tuple[ParseResult, list[Event]]:
    """Project each entry. One that cannot be projected, or whose metadata
    cannot be stored, is kept bare (identity and type, no content) and
    reported at its byte offset: it never blocks the entries after it."""
    events: list[Event] = []
    entries: list[Entry] = []
    diagnostics: list[Diagnostic] = []
    for entry in result.entries:
        try:
            event = project_entry(session_id, entry, rules, extractors=extractors)
            orjson.dumps(event.meta)  # what the writer stores; deep nesting fails here
        except Exception as exc:  # noqa: BLE001 - any projection failure is contained and reported
            diagnostics.append(
                Diagnostic(
                    "unprojectable",
                    f"entry {excerpt(entry.entry_id)} indexed without its content: {type(exc).__name__}: {excerpt(str(exc))}",
                    entry.byte_offset,
                )
            )
            entry = replace(entry, data={k: entry.data[k] for k in _BARE_KEYS if k in entry.data})
            event = project_entry(session_id, entry, rules)
        if "fragmentsNotIndexed" in event.meta:
            diagnostics.append(_capped_fragments(entry, event.meta["fragmentsNotIndexed"]))
        entries.append(entry)
        events.append(event)
    if diagnostics:
        result = replace(result, entries=entries, diagnostics=[*result.diagnostics, *diagnostics])
    return result, events


def _capped_fragments(entry: Entry, left_out: int) -> Diagnostic:
    return Diagnostic(
        "capped",
        f"entry {excerpt(entry.entry_id)}: only its first {MAX_FRAGMENTS_PER_EVENT} fragments are searchable;"
        f" {left_out} more are shown by read but not indexed",
        entry.byte_offset,
    )


# What a bare entry keeps: enough for its place in the tree.
_BARE_KEYS = ("type", "id", "parentId", "timestamp")
