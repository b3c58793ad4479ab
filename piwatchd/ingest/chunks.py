"""One chunk of a source, start to end (pure): complete lines -> entries ->
events, with the parser state threaded from chunk to chunk. An entry that
cannot be projected is kept bare and reported at its byte offset; an
over-long line's range becomes a diagnostic. The ingestor runs this on a
helper thread (`prefetch`) while SQLite writes the chunk before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

import orjson

from ..model.events import Diagnostic, Entry, Event, excerpt
from ..model.extractors import NO_EXTRACTORS, Registry
from ..model.project import MAX_FRAGMENTS_PER_EVENT, project_entry
from ..model.redact import DEFAULT_RULES, Rules
from ..source.lines import split_complete_lines
from ..source.parser import ParseResult, ParserState, UnsupportedSource, parse_lines
from ..source.reader import MAX_LINE_BYTES, Overlong

__all__ = ["PIPELINE_CHUNK", "parsed_chunks", "project_contained"]

# Small enough that a typical session file spans several chunks, so parsing
# the next chunk overlaps with SQLite writing this one.
PIPELINE_CHUNK = 512 * 1024


def parsed_chunks(
    chunks: Iterable[tuple[int, bytes] | Overlong],
    state: ParserState,
    rules: Rules = DEFAULT_RULES,
    extractors: Registry = NO_EXTRACTORS,
) -> Iterator[tuple[Any, ...]]:
    """Pure per chunk: complete lines -> entries -> events (redacted by `rules`, registered
    custom types made searchable by `extractors`), threading the parser state.

    Yields (offset, bytes, end, result, events); an over-long line's range comes with bytes None.
    """
    for item in chunks:
        if isinstance(item, Overlong):
            yield item.start, None, item.end, _skipped(item, state), []
            state = replace(state, overlong_at=None if item.complete else item.line_at)
            continue
        offset, data = item
        lines, end = split_complete_lines(data, offset)
        result = parse_lines(state, lines)
        state = result.state
        events: list[Event] = []
        if result.entries:
            assert state.header is not None  # the parser yields entries only after a header
            result, events = project_contained(state.header.session_id, result, rules, extractors)
        yield offset, data, end, result, events


def _skipped(item: Overlong, state: ParserState) -> ParseResult:
    """The parse result of an over-long line's range: a diagnostic where the line begins."""
    if state.header is None:
        # A header is a few hundred bytes; a first line this long is no Pi session.
        raise UnsupportedSource(f"the first line is longer than {MAX_LINE_BYTES >> 20} MiB: not a Pi session file")
    after = replace(state, overlong_at=None if item.complete else item.line_at)
    diagnostics = []
    if item.start == item.line_at:
        diagnostics.append(
            Diagnostic("overlong-line", f"a line longer than {MAX_LINE_BYTES >> 20} MiB skipped unread", item.line_at)
        )
    return ParseResult(after, [], diagnostics)


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
