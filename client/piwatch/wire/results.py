"""The wire's result shapes of hello, search (and follow), read, trace, sessions and reindex."""

from __future__ import annotations

from typing import Any, Literal

from .base import Wire

__all__ = [
    "Alternative",
    "ContentItem",
    "EventInfo",
    "Evidence",
    "FollowResult",
    "FollowUpdate",
    "ForkStop",
    "FragmentRef",
    "FragmentWindow",
    "HelloResult",
    "Hit",
    "Leaf",
    "Locator",
    "Neighbours",
    "NodeSummary",
    "Omitted",
    "ReadResult",
    "ReindexResult",
    "Relationship",
    "Repair",
    "SearchResult",
    "SearchScope",
    "SessionHit",
    "SessionInfo",
    "SessionItem",
    "SessionsResult",
    "SourceInfo",
    "Target",
    "Tier",
    "TowardLeaf",
    "TraceResult",
    "UnfollowResult",
    "WordCount",
]

# -- results: hello, search ----------------------------------------------------------


class HelloResult(Wire):
    proto: int
    version: str
    pid: int
    started_at: int
    capabilities: list[str]


Tier = Literal["exact", "forms", "repaired", "partial"]
# Which agent wrote a session: Pi, or its fork oh-my-pi (omp). Absent on the wire: Pi.
Agent = Literal["pi", "omp"]


def agent_label(agent: str) -> str:
    """What a client shows after a session's project: nothing for Pi, ` [omp]` for omp."""
    return " [omp]" if agent == "omp" else ""


class Evidence(Wire):
    fragment_id: str
    kind: str
    tool_name: str | None


class Hit(Wire):
    session_id: str
    entry_id: str
    event_type: str
    role: str | None
    timestamp: str | None
    cwd: str | None
    session_name: str | None
    evidence: Evidence
    matched_fragments: int
    is_error: bool
    context_role: str
    branch_state: str
    selection_state: str
    snippet: str
    spans: list[tuple[int, int]]  # [start, end) character offsets of the matches in `snippet`
    # The rank function's score (higher is better), only for a caller that
    # may see every session: it is computed from the whole index's
    # statistics (how rare each word is among every project's documents),
    # so a scoped caller gets the order alone, never a score.
    score: float | None = None
    # How the hit matched: every word as written (exact), every word by a word
    # form or identifier part (forms), with a misspelled word repaired
    # (repaired), or only some of the words (partial).
    tier: Tier = "exact"
    # Below exact: the query words this hit matched and the ones it misses.
    matched: list[str] | None = None
    missing: list[str] | None = None
    agent: Agent = "pi"  # the hit's session's writer


class FollowResult(Wire):
    """The answer to `follow`; then FollowUpdate results arrive, unasked, with
    the follow request's id, until `unfollow`. A follow piwatchd ends gets an
    error with that id instead: `slow_consumer` for a reader that falls more
    than `maxQueuedHits` behind or takes no update within piwatchd's frame
    timeout, `busy` when its connection was closed for another client,
    `unavailable` when piwatchd stops."""

    subscription: int
    max_queued_hits: int


class FollowUpdate(Wire):
    """New hits of a follow (pushed; `id` is the follow request's)."""

    subscription: int
    hits: list[Hit]


class UnfollowResult(Wire):
    subscription: int
    stopped: bool  # false: no such follow on this connection (already ended)


class SearchScope(Wire):
    roots: list[str] | None  # null: every session (the local CLI's --all)


class Repair(Wire):
    """A query word with no postings and the vocabulary word used instead ("did you mean")."""

    word: str
    replacement: str


class WordCount(Wire):
    """A query word by itself, when the query found nothing: how many events
    the caller may see hold it (as the query would match it, every filter
    applied), counted up to `WORD_COUNT_MAX`; `more`: that many and more."""

    word: str
    events: int
    more: bool = False


class SessionHit(Wire):
    """A session in a `group: "session"` result: its strongest matching event
    as evidence (exactly a hit), how many of the grouped events are its own,
    and the session's time span (as far as the caller may see it)."""

    session_id: str
    session_name: str | None
    cwd: str | None
    first_timestamp: str | None
    last_timestamp: str | None
    matching_events: int
    evidence: Hit


class SearchResult(Wire):
    query: str
    limit: int
    offset: int
    has_more: bool
    hits: list[Hit]  # empty when grouped by session
    scope: SearchScope | None = None
    repairs: list[Repair] = []
    relaxed: bool = False  # some hits come from a tier below exact
    # group "session": the page of sessions, best first; `grouped_events` best events were grouped
    # (at most GROUP_EVENTS_MAX; `grouping_capped`: more matched, so counts are lower bounds).
    sessions: list[SessionHit] | None = None
    grouped_events: int | None = None
    grouping_capped: bool = False
    # No hit (or session) on a first page of a query of 2+ content words: each
    # of them (at most WORD_COUNTS_MAX) by itself, so a caller learns which
    # words the history holds apart and can ask again with those.
    words: list[WordCount] | None = None


# -- results: read -----------------------------------------------------------------


class NodeSummary(Wire):
    """A tree node with bounded metadata and a small index preview (never content)."""

    session_id: str
    entry_id: str
    type: str
    role: str | None
    timestamp: str | None
    tool_names: list[str]
    is_error: bool
    context_role: str
    branch_state: str
    selection_state: str
    preview: str | None
    preview_source: str  # "index" (the read model's text) or "source" (re-projected from the verified line)
    provenance: str | None = None  # siblings: "derived"


class Locator(Wire):
    path: str
    byte_offset: int
    byte_length: int


class SourceInfo(Wire):
    path: str
    byte_offset: int
    byte_length: int
    fingerprint: str
    status: Literal["verified", "changed", "missing", "unreadable"]
    detail: str | None = None


class FragmentRef(Wire):
    fragment_id: str
    offset: int


class ContentItem(Wire):
    fragment_id: str
    kind: str
    tool_name: str | None
    call_id: str | None
    length: int
    text: str
    truncated: bool
    next: FragmentRef | None = None
    locator: Locator | None = None


class FragmentWindow(Wire):
    fragment_id: str
    kind: str
    offset: int
    length: int
    total_length: int
    text: str
    has_more: bool
    next_offset: int | None
    locator: Locator


class Omitted(Wire):
    field: str
    kind: str
    reason: str
    mime_type: str | None = None
    base64_chars: int | None = None
    counts: dict[str, int] | None = None  # kind "redacted": secrets replaced, by kind (never values)


class Alternative(Wire):
    """A fork passed on the materialized path (branch order)."""

    at: str
    followed: str
    alternatives: list[str]


class ForkStop(Wire):
    at: str
    candidates: list[str]


class Neighbours(Wire, omit_defaults=False):
    """Branch order fills `alternatives`, `stoppedAtFork` and `reachedRoot`;
    append order leaves them null."""

    order: Literal["append", "branch"]
    before: list[NodeSummary]
    after: list[NodeSummary]
    alternatives: list[Alternative] | None = None  # branch order only
    stopped_at_fork: ForkStop | None = None
    reached_root: bool | None = None


class EventInfo(Wire):
    type: str
    role: str | None
    parent_id: str | None
    id_recorded: bool
    timestamp: str | None
    tool_names: list[str]
    is_error: bool
    context_role: str
    branch_state: str
    selection_state: str
    meta: dict[str, Any]


class SessionInfo(Wire):
    cwd: str | None
    source_path: str


class ReadResult(Wire):
    session_id: str
    entry_id: str
    event: EventInfo
    session: SessionInfo
    source: SourceInfo
    content: list[ContentItem] | None = None  # absent when the source could not be verified
    omitted: list[Omitted] | None = None
    fragment: FragmentWindow | None = None
    neighbours: Neighbours | None = None
    unredacted: bool = False  # true only when the caller asked for secrets as recorded


# -- results: trace ----------------------------------------------------------------


class Leaf(Wire):
    entry_id: str | None
    known: bool
    is_target: bool


class TowardLeaf(Wire):
    entry_id: str
    via: Literal["parent", "child"] | None


class Target(Wire):
    session_id: str | None = None
    entry_id: str | None = None
    indexed: bool | None = None
    ref: str | None = None
    path: str | None = None


class Relationship(Wire):
    kind: str
    direction: Literal["in", "out"]
    provenance: str
    target: Target
    detail: dict[str, Any] | None = None


class TraceResult(Wire):
    session_id: str
    entry_id: str
    node: NodeSummary | None
    materialized_leaf: Leaf
    parent: NodeSummary | None
    parent_missing: str | None
    children: list[NodeSummary]
    siblings: list[NodeSummary]
    toward_leaf: TowardLeaf | None
    toward_leaf_known: bool
    relationships: list[Relationship]
    omitted: list[Omitted] | None = None  # fields whose secrets were redacted


# -- results: sessions, reindex ------------------------------------------------------


class SessionItem(Wire):
    session_id: str
    name: str | None
    cwd: str | None
    created: str | None
    first_ms: int | None
    last_ms: int | None
    events: int
    parent_session: str | None
    format: str
    path: str
    state: str
    agent: Agent = "pi"


class SessionsResult(Wire):
    sessions: list[SessionItem]
    has_more: bool
    limit: int
    offset: int


class ReindexResult(Wire):
    queued: str  # a session id, or "all"
