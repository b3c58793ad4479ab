"""Pi session format reader (pure): header detection and entries, all versions.

The parser is incremental so the tailer can feed it only the new complete
lines of a file: `ParserState` carries what earlier lines established (the
header, how many entries were seen, the v1 position counter) and is small
enough to persist beside the byte-offset checkpoint.

Supported: v1 (no ids: ids are derived from the entry's position in the file,
so an unchanged file always yields the same ids; Pi re-ids the file when it
migrates it), v2 and v3, Pi 1.6.0 additions, oh-my-pi's title slot. Reported
as unsupported, never half-indexed: `--mode json` streams, agent-core
format 4, and anything whose first line is not a session header.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import orjson

from ..model.events import Diagnostic, Entry, Header, SourceFormat, excerpt
from .fingerprint import line_fingerprint
from .lines import RawLine, decode_line

__all__ = [
    "STREAM_EVENT_TYPES",
    "ParseResult",
    "ParserState",
    "UnsupportedSource",
    "line_fingerprint",
    "parse_lines",
    "slot_title",
    "v1_entry_id",
]

# `pi --mode json` writes these after a session-shaped first line: a stdout
# stream, never a session file.
STREAM_EVENT_TYPES = frozenset(
    {
        "agent_start",
        "agent_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "auto_compaction_start",
        "auto_compaction_end",
        "auto_retry_start",
        "auto_retry_end",
    }
)


class UnsupportedSource(Exception):
    """The file is not a Pi session this reader understands; index none of it."""


def v1_entry_id(index: int) -> str:
    # Position-derived and deterministic; `index` counts the header as 0, the
    # same numbering v1's `firstKeptEntryIndex` uses, so it resolves directly.
    return f"v1-{index:06d}"


@dataclass(frozen=True, slots=True)
class ParserState:
    header: Header | None = None
    entries_seen: int = 0  # ordinal of the next entry
    objects_seen: int = 0  # JSON objects seen including headers (v1 index base)
    previous_v1_id: str | None = None
    # Set while a line longer than the line cap is being read past (where it began), so a read
    # that stopped inside it resumes skipping instead of parsing its rest as a line.
    overlong_at: int | None = None

    def to_json(self) -> dict[str, Any]:
        h = self.header
        return {
            "header": None
            if h is None
            else {
                "session_id": h.session_id,
                "format": h.format.value,
                "version": h.version,
                "cwd": h.cwd,
                "timestamp": h.timestamp,
                "parent_session": h.parent_session,
            },
            "entries_seen": self.entries_seen,
            "objects_seen": self.objects_seen,
            "previous_v1_id": self.previous_v1_id,
            "overlong_at": self.overlong_at,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ParserState:
        h = data.get("header")
        header = None
        if h is not None:
            header = Header(
                session_id=h["session_id"],
                format=SourceFormat(h["format"]),
                version=h["version"],
                cwd=h["cwd"],
                timestamp=h["timestamp"],
                parent_session=h["parent_session"],
            )
        return cls(
            header=header,
            entries_seen=data["entries_seen"],
            objects_seen=data["objects_seen"],
            previous_v1_id=data.get("previous_v1_id"),
            overlong_at=data.get("overlong_at"),
        )


@dataclass(frozen=True, slots=True)
class ParseResult:
    state: ParserState
    entries: list[Entry]
    diagnostics: list[Diagnostic]
    header_changed: bool = False  # the header arrived in this batch


def _header_from(obj: dict[str, Any], offset: int) -> Header:
    session_id = obj.get("id")
    if not isinstance(session_id, str) or not session_id:
        raise UnsupportedSource(f"session header at byte {offset} has no string id")
    version = obj.get("version")
    if version is None:
        fmt, version = SourceFormat.V1, 1
    elif version == 2:
        fmt = SourceFormat.V2
    elif version == 3:
        fmt = SourceFormat.V3
    else:
        raise UnsupportedSource(f"session header version {excerpt(version)} is not supported (known: 1, 2, 3)")
    cwd = obj.get("cwd")
    parent = obj.get("parentSession") or obj.get("branchedFrom")
    return Header(
        session_id=session_id,
        format=fmt,
        version=int(version),
        cwd=cwd if isinstance(cwd, str) else None,
        timestamp=obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else None,
        parent_session=parent if isinstance(parent, str) else None,
        raw=obj,
    )


def _slot_title(obj: Any) -> str | None:
    """The title an omp title slot (a `title` record) holds; None for an empty or odd one."""
    if isinstance(obj, dict) and obj.get("type") == "title" and isinstance(obj.get("title"), str):
        return obj["title"].strip() or None
    return None


def slot_title(line: bytes) -> str | None:
    """`_slot_title` of an omp title slot line; None when it does not parse
    (read while omp rewrote it: the name then stays as it was)."""
    if not line:
        return None
    try:
        return _slot_title(orjson.loads(line))
    except orjson.JSONDecodeError:
        return None


def _classify_first(obj: Any, offset: int) -> Header | None:
    """Return the header, None for an omp title slot, or raise UnsupportedSource."""
    if not isinstance(obj, dict):
        raise UnsupportedSource(f"first line (byte {offset}) is not a JSON object")
    if obj.get("type") == "title":
        return None
    if obj.get("kind") == "header":
        raise UnsupportedSource("agent-core format 4 session (kind=header) is not supported yet")
    if obj.get("type") != "session":
        raise UnsupportedSource(
            f"first line (byte {offset}) is not a Pi session header (type={excerpt(obj.get('type'))})"
        )
    return _header_from(obj, offset)


def parse_lines(state: ParserState, lines: Iterable[RawLine]) -> ParseResult:
    """Parse complete lines that follow `state`. Pure; raises UnsupportedSource."""
    batch = _Batch(state)
    for line in lines:
        decoded = decode_line(line)
        batch.diagnostics.extend(decoded.diagnostics)
        obj = decoded.value
        if decoded.skipped:
            line = RawLine(line.offset + decoded.skipped, line.data[decoded.skipped :])
        if obj is None:
            continue
        if batch.header is None:
            batch.first(obj, line.offset)
        else:
            batch.entry(batch.header, obj, line)
    new_state = replace(
        state,
        header=batch.header,
        entries_seen=batch.entries_seen,
        objects_seen=batch.objects_seen,
        previous_v1_id=batch.previous_v1_id,
    )
    return ParseResult(new_state, batch.entries, batch.diagnostics, batch.header_changed)


class _Batch:
    """What one `parse_lines` call has read so far; its counts become the next state."""

    __slots__ = (
        "diagnostics",
        "entries",
        "entries_seen",
        "header",
        "header_changed",
        "objects_seen",
        "previous_v1_id",
        "seen_ids",
        "title",
    )

    def __init__(self, state: ParserState) -> None:
        self.entries: list[Entry] = []
        self.diagnostics: list[Diagnostic] = []
        self.header = state.header
        self.header_changed = False
        self.entries_seen = state.entries_seen
        self.objects_seen = state.objects_seen
        self.previous_v1_id = state.previous_v1_id
        # Duplicates within this batch are reported here; duplicates of ids
        # indexed by an earlier batch are reported by the index writer, so the
        # state stays constant-size and an append costs the same at any file size.
        self.seen_ids: set[str] = set()
        self.title: str | None = None  # an omp title slot's, until the header comes

    def first(self, obj: Any, offset: int) -> None:
        """The first object of the file: the header, or an omp title slot before it."""
        self.header = _classify_first(obj, offset)
        if self.header is None:
            self.title = _slot_title(obj)
        else:
            if self.title is not None:
                self.header = replace(self.header, title=self.title)
            self.header_changed = True
            self.objects_seen += 1

    def entry(self, header: Header, obj: Any, line: RawLine) -> None:
        """One line after the header: an entry, or a diagnostic saying why not."""
        if not isinstance(obj, dict):
            self.diagnostics.append(Diagnostic("not-object", "line is JSON but not an object", line.offset))
            return
        etype = obj.get("type")
        if etype in STREAM_EVENT_TYPES:
            raise UnsupportedSource(
                f"line at byte {line.offset} has type {excerpt(etype)}: this is a `pi --mode json` stream, not a session file"
            )
        self.objects_seen += 1
        if etype == "session":
            self.diagnostics.append(
                Diagnostic("duplicate-header", "extra session header ignored (Pi uses the first)", line.offset)
            )
            return
        if not isinstance(etype, str):
            self.diagnostics.append(Diagnostic("no-type", "entry has no string type; skipped", line.offset))
            return
        ids = self._v1_ids() if header.format is SourceFormat.V1 else self._recorded_ids(obj, etype, line.offset)
        if ids is None:
            return
        entry_id, parent_id, id_recorded = ids
        self.entries.append(
            Entry(
                entry_id=entry_id,
                parent_id=parent_id,
                type=etype,
                ordinal=self.entries_seen,
                byte_offset=line.offset,
                byte_len=line.length,
                fingerprint=line_fingerprint(line.data),
                data=obj,
                id_recorded=id_recorded,
            )
        )
        self.entries_seen += 1

    def _v1_ids(self) -> tuple[str, str | None, bool]:
        """v1 has no ids: derived from the position, each entry's parent the one before."""
        entry_id = v1_entry_id(self.objects_seen - 1)
        parent_id = self.previous_v1_id
        self.previous_v1_id = entry_id
        return entry_id, parent_id, False

    def _recorded_ids(self, obj: dict[str, Any], etype: str, offset: int) -> tuple[str, str | None, bool] | None:
        """v2/v3: the recorded id and parent; None (and a diagnostic) without an id."""
        raw_id = obj.get("id")
        if not isinstance(raw_id, str) or not raw_id:
            self.diagnostics.append(Diagnostic("no-id", f"{excerpt(etype)} entry without an id; skipped", offset))
            return None
        raw_parent = obj.get("parentId")
        parent_id = raw_parent if isinstance(raw_parent, str) and raw_parent else None
        if raw_id in self.seen_ids:
            self.diagnostics.append(
                Diagnostic(
                    "duplicate-id",
                    f"entry id {excerpt(raw_id)} repeated; the later line's content wins (as in Pi)",
                    offset,
                )
            )
        self.seen_ids.add(raw_id)
        return raw_id, parent_id, True
