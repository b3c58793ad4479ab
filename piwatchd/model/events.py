"""The project vocabulary as plain, immutable types.

Everything here is pure data: the parser produces `Entry`, the projector turns
an entry into an `Event` with `Fragment`s, and the index stores them. Public
identity is always `(session_id, entry_id)`; ordinals and byte offsets are
observations of one representation and never leave the daemon as identity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from piwatch import wire

__all__ = [
    "FragmentKind",
    "BranchState",
    "ContextRole",
    "SelectionState",
    "SourceFormat",
    "Diagnostic",
    "Header",
    "Entry",
    "Fragment",
    "Event",
    "OMISSION_MARKER",
    "excerpt",
]

# Source values quoted in a message (an error, a diagnostic) are cut to this
# many characters: one huge value must not grow every status or response.
EXCERPT_CHARS = 60


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """`repr(value)`, cut to `limit` characters with the full length noted. Pure."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, (str, bytes)) else len(text)
    return f"{text[:limit]}… ({size} characters)"


class FragmentKind(str, Enum):
    """Semantic kinds from the seed's projection table (searchable ones only)."""

    USER_TEXT = "user.text"
    ASSISTANT_TEXT = "assistant.text"
    TOOL_CALL = "tool.call"
    TOOL_RESULT = "tool.result"
    BASH_COMMAND = "bash.command"
    BASH_OUTPUT = "bash.output"
    SUMMARY_COMPACTION = "summary.compaction"
    SUMMARY_BRANCH = "summary.branch"
    CUSTOM_MESSAGE = "custom.message"
    SESSION_NAME = "session.name"


class BranchState(str, Enum):
    SELECTED = "selected"
    ALTERNATE = "alternate"
    UNKNOWN = "unknown"


class ContextRole(str, Enum):
    CONVERSATION = "conversation"
    SUMMARY = "summary"
    CONTROL = "control"
    METADATA = "metadata"


class SelectionState(str, Enum):
    DIRECT = "direct"
    SUMMARIZED = "summarized"
    # Pi 1.6.0 `context_edit` with `replacement: null` drops an entry from the
    # model context without summarizing it; `direct` would be a lie.
    OMITTED = "omitted"
    NOT_SELECTED = "not-selected"
    NOT_APPLICABLE = "not-applicable"
    UNKNOWN = "unknown"


# The wire states each vocabulary for the callers' filters (`wire.KINDS`, ...): the enums must hold the same.
for _enum, _values in (
    (FragmentKind, wire.KINDS),
    (BranchState, wire.BRANCH_STATES),
    (SelectionState, wire.SELECTION_STATES),
):
    if [m.value for m in _enum] != list(_values):  # pragma: no cover - found at import, as the api's op table
        raise ImportError(f"piwatchd.model.events: {_enum.__name__} and the wire's values differ")


class SourceFormat(str, Enum):
    V1 = "v1"
    V2 = "v2"
    V3 = "v3"


# Shown between the kept head and tail of an oversized fragment. Head and tail
# are indexed in separate FTS columns, so no phrase can match across it.
OMISSION_MARKER = "\n[… {omitted} characters omitted by piwatch …]\n"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A problem found in a source, reported with where it happened."""

    code: str  # malformed-json | invalid-utf8 | lone-surrogate | duplicate-header | duplicate-id | torn-line | unsupported | not-object
    message: str
    byte_offset: int | None = None
    repaired: bool = False


@dataclass(frozen=True, slots=True)
class Header:
    session_id: str
    format: SourceFormat
    version: int
    cwd: str | None
    timestamp: str | None
    parent_session: str | None  # path or id as recorded (`parentSession` or legacy `branchedFrom`)
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)
    title: str | None = field(compare=False, default=None)  # omp's title slot's, as written (unredacted)


@dataclass(frozen=True, slots=True)
class Entry:
    """One persisted session entry, positioned in its source file."""

    entry_id: str
    parent_id: str | None
    type: str
    ordinal: int  # append order within the file (0 = first entry after the header)
    byte_offset: int
    byte_len: int
    fingerprint: str  # of the raw line bytes, so reads can prove the source is unchanged
    data: dict[str, Any] = field(repr=False, compare=False)
    id_recorded: bool = True  # False for v1 entries, whose ids are derived from position


@dataclass(frozen=True, slots=True)
class Fragment:
    """One searchable semantic part of an event.

    `text` is the head (or all) of the searchable text; `tail` is set only for
    oversized text, whose middle is omitted. `meta` holds secondary searchable
    words (tool name, error state, custom type) kept out of the body so phrases
    in the body never run into them.
    """

    fragment_id: str
    kind: FragmentKind
    text: str
    tail: str | None = None
    meta: str = ""
    tool_name: str | None = None
    call_id: str | None = None
    full_length: int = 0
    # Secrets replaced by markers in this text, as sorted (kind, count) pairs.
    redactions: tuple[tuple[str, int], ...] = ()

    @property
    def truncated(self) -> bool:
        return self.tail is not None

    def display_text(self) -> str:
        if self.tail is None:
            return self.text
        omitted = self.full_length - len(self.text) - len(self.tail)
        return self.text + OMISSION_MARKER.format(omitted=omitted) + self.tail


@dataclass(frozen=True, slots=True)
class Event:
    """The typed interpretation of one entry: identity, metadata, fragments."""

    session_id: str
    entry_id: str
    parent_id: str | None
    type: str
    role: str | None
    ordinal: int
    timestamp_ms: int | None
    byte_offset: int
    byte_len: int
    fingerprint: str
    is_error: bool
    tool_names: tuple[str, ...]
    meta: dict[str, Any]
    fragments: tuple[Fragment, ...]
    context_role: ContextRole = ContextRole.METADATA
    id_recorded: bool = True
    # Every redaction in the event (fragments and meta), as sorted (kind, count) pairs.
    redactions: tuple[tuple[str, int], ...] = ()
