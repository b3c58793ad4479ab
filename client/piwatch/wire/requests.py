"""The wire's request shapes: who asks (`Caller`) and each op's arguments,
validated while decoding (types, ranges, path and list caps)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .base import (
    _INT64,
    MAX_EXTRA_ROOTS,
    MAX_FILTER_VALUES,
    MAX_INDEX,
    MAX_LIMIT,
    MAX_OFFSET,
    MAX_QUOTE_CHARS,
    MAX_SESSIONS_LIMIT,
    NEIGHBOURS_MAX,
    WINDOW_MAX,
    Request,
    _check_paths,
    _Id,
    _Ids,
    _Path,
    _Strict,
    quote,
)

__all__ = [
    "BRANCH_STATES",
    "ENTRY_TYPES",
    "FILTER_VALUES",
    "KINDS",
    "ROLES",
    "SELECTION_STATES",
    "Caller",
    "FileMode",
    "FollowArgs",
    "HelloArgs",
    "ReadArgs",
    "ReindexArgs",
    "SearchArgs",
    "SearchFilters",
    "SessionsArgs",
    "StatusArgs",
    "TraceArgs",
    "UnfollowArgs",
]

# -- the closed vocabularies of the filters -----------------------------------------
# A filter value outside these finds nothing by construction: it is refused
# with the valid values instead (piwatchd.model.events' enums hold the same).

# Fragment kinds (docs/concepts.md): what a piece of searchable text is.
KINDS = (
    "user.text",
    "assistant.text",
    "tool.call",
    "tool.result",
    "bash.command",
    "bash.output",
    "summary.compaction",
    "summary.branch",
    "custom.message",
    "session.name",
)
# The entry types Pi writes (and piwatch projects); the header (`session`) is no event.
ENTRY_TYPES = (
    "message",
    "compaction",
    "branch_summary",
    "custom_message",
    "custom",
    "session_info",
    "label",
    "model_change",
    "thinking_level_change",
    "context_edit",
    "usage",
    "leaf",
    "active_tools_change",
)
# The roles of Pi's messages (`hookMessage` is v2's name of `custom`).
ROLES = (
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "custom",
    "hookMessage",
    "branchSummary",
    "compactionSummary",
    "system",
    "developer",
)
BRANCH_STATES = ("selected", "alternate", "unknown")
SELECTION_STATES = ("direct", "summarized", "omitted", "not-selected", "not-applicable", "unknown")
# Each list filter with a closed vocabulary: its wire name and its values.
FILTER_VALUES: dict[str, tuple[str, ...]] = {
    "kind": KINDS,
    "eventType": ENTRY_TYPES,
    "role": ROLES,
    "branchState": BRANCH_STATES,
    "selectionState": SELECTION_STATES,
}


def _check_values(**given: list[str]) -> None:
    """Raise ValueError (a bad_request naming the filter and its values) for a value outside its vocabulary."""
    for name, values in given.items():
        valid = FILTER_VALUES[name]
        unknown = next((v for v in values if v not in valid), None)
        if unknown is not None:
            raise ValueError(
                f"`{name}`: no such value {quote(unknown, MAX_QUOTE_CHARS // 4)}; one of: {', '.join(valid)}"
            )


# -- caller ------------------------------------------------------------------------


class Caller(_Strict):
    """Who asks. `all` is the trusted local CLI's explicit opt-in to every
    session; otherwise `cwd` or `workspaceRoot` names the authorization root."""

    cwd: _Path | None = None
    workspace_root: _Path | None = None
    extra_roots: Annotated[list[_Path], msgspec.Meta(max_length=MAX_EXTRA_ROOTS)] = []
    session_id: _Id | None = None
    session_file: _Path | None = None
    cutoff_entry_id: _Id | None = None
    tool_call_id: _Id | None = None
    all: bool = False

    def __post_init__(self) -> None:
        _check_paths(
            cwd=self.cwd, workspaceRoot=self.workspace_root, sessionFile=self.session_file, extraRoots=self.extra_roots
        )


# -- requests ----------------------------------------------------------------------


class HelloArgs(Request):
    proto: int
    client: _Id | None = None


class StatusArgs(_Strict):
    pass


FileMode = Literal["read", "changed", "any"]


class SearchFilters(_Strict):
    session_id: _Ids = []
    cwd: _Path | None = None
    cwd_under: _Path | None = None
    event_type: _Ids = []
    kind: _Ids = []
    role: _Ids = []
    tool: _Ids = []
    since_ms: _INT64 | None = None
    until_ms: _INT64 | None = None
    is_error: bool | None = None
    branch_state: _Ids = []
    selection_state: _Ids = []
    files: Annotated[list[_Path], msgspec.Meta(max_length=MAX_FILTER_VALUES)] = []
    file_mode: FileMode = "any"

    def __post_init__(self) -> None:
        _check_paths(cwd=self.cwd, cwdUnder=self.cwd_under, files=self.files)
        _check_values(
            kind=self.kind,
            eventType=self.event_type,
            role=self.role,
            branchState=self.branch_state,
            selectionState=self.selection_state,
        )


class SearchArgs(_Strict):
    query: str
    filters: SearchFilters = msgspec.field(default_factory=SearchFilters)
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_LIMIT)] = 20
    offset: Annotated[int, msgspec.Meta(ge=0, le=MAX_OFFSET)] = 0
    # Wait (at most MAX_WAIT_SECONDS) until the named sessions are fully ingested.
    wait_seconds: Annotated[float, msgspec.Meta(ge=0)] | None = None
    include_own_results: bool = False
    # Only the words as written, all of them: no word forms, repairs or partial matches.
    exact: bool = False
    # "session": the page is of sessions (`SearchResult.sessions`), each with its strongest event.
    group: Literal["event", "session"] = "event"


class FollowArgs(_Strict):
    """A standing query: new hits for `query` and `filters` as their events are
    committed, pushed on this connection until `unfollow` or the connection ends."""

    query: str
    filters: SearchFilters = msgspec.field(default_factory=SearchFilters)
    include_own_results: bool = False
    # The words as written (default). False adds word forms (never partial or repaired matches);
    # it costs each follow a dictionary probe per commit (~10-30 ms), so it is opt-in.
    exact: bool = True


class UnfollowArgs(_Strict):
    subscription: Annotated[int, msgspec.Meta(ge=1, le=MAX_INDEX)]


class ReadArgs(_Strict):
    session_id: _Id
    entry_id: _Id
    fragment_id: _Id | None = None
    offset: Annotated[int, msgspec.Meta(ge=0, le=MAX_INDEX)] | None = None
    length: Annotated[int, msgspec.Meta(ge=1, le=WINDOW_MAX)] | None = None
    before: Annotated[int, msgspec.Meta(ge=0, le=NEIGHBOURS_MAX)] = 0
    after: Annotated[int, msgspec.Meta(ge=0, le=NEIGHBOURS_MAX)] = 0
    order: Literal["append", "branch"] = "append"
    # Secrets as recorded instead of [redacted: kind] markers: only for caller all (the local CLI).
    unredacted: bool = False


class TraceArgs(_Strict):
    session_id: _Id
    entry_id: _Id


class SessionsArgs(_Strict):
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_SESSIONS_LIMIT)] = 50
    offset: Annotated[int, msgspec.Meta(ge=0, le=MAX_INDEX)] = 0
    # Only sessions holding one of the query's best SESSIONS_QUERY_HITS hits (search's query syntax).
    query: str | None = None
    # The scope filters of search, over the sessions' recorded cwd and time span.
    cwd: _Path | None = None
    cwd_under: _Path | None = None
    since_ms: _INT64 | None = None  # sessions active at or after (their last entry)
    until_ms: _INT64 | None = None  # sessions started before (their first entry)

    def __post_init__(self) -> None:
        _check_paths(cwd=self.cwd, cwdUnder=self.cwd_under)


class ReindexArgs(_Strict):
    session_id: _Id | None = None
