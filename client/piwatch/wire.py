"""The typed wire contract: every request and response shape, defined once.

piwatchd's api and ops, the Python client and the CLI all use these
`msgspec` Structs; the Pi extension's TypeScript types are checked against
`schema()` (written to `wire_schema.json` beside this module). Field names
are camelCase on the wire (`rename="camel"`), snake_case in Python.

Requests are validated by `decode_args(op, args)`: wrong types, unknown
fields and out-of-range numbers raise `ProtocolError(bad_request)` naming the
field, never `internal`. Fields without a default are always sent (even when
null); fields with a default are left out when they hold it, so an optional
section (`content`, `fragment`, `neighbours`) is absent rather than null.

Framing and error codes live in `protocol.py`; this module never imports the
daemon.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from .protocol import ErrorCode, ProtocolError

__all__ = [
    "ARGS",
    "GROUP_EVENTS_MAX",
    "MAX_QUOTE_CHARS",
    "OPS",
    "CONNECTION_OPS",
    "Tier",
    "RESULTS",
    "SCHEMA_PATH",
    "Alternative",
    "BytesStatus",
    "Caller",
    "ContentItem",
    "DiagnosticCount",
    "DiagnosticItem",
    "DiagnosticsStatus",
    "ErrorBody",
    "EventInfo",
    "Evidence",
    "ForkStop",
    "FragmentRef",
    "FragmentWindow",
    "FollowArgs",
    "FollowResult",
    "FollowUpdate",
    "Freshness",
    "HelloArgs",
    "HelloResult",
    "Hit",
    "IndexProgress",
    "Leaf",
    "Locator",
    "Neighbours",
    "NodeSummary",
    "Notice",
    "Omitted",
    "ReadArgs",
    "ReadResult",
    "RedactionStatus",
    "ReindexArgs",
    "ReindexResult",
    "Repair",
    "Relationship",
    "Response",
    "ScanInfo",
    "SearchArgs",
    "SearchFilters",
    "SearchResult",
    "SearchScope",
    "ServiceStatus",
    "SessionFreshness",
    "SessionHit",
    "SessionInfo",
    "SessionItem",
    "SessionsArgs",
    "SessionsResult",
    "SourceInfo",
    "SourceProblem",
    "SourcesStatus",
    "StatusArgs",
    "StatusResult",
    "Target",
    "TowardLeaf",
    "TraceArgs",
    "TraceResult",
    "UnfollowArgs",
    "UnfollowResult",
    "Wire",
    "clip",
    "decode_args",
    "decode_caller",
    "decode_result",
    "quote",
    "schema",
    "schema_text",
    "to_builtins",
    "to_json",
]

T = TypeVar("T")

# Bounds shared by the daemon and its clients (the ops import them from here).
MAX_LIMIT = 200
# `group: "session"` groups at most this many best events (the bound on its cost).
GROUP_EVENTS_MAX = 200
MAX_OFFSET = 10_000
MAX_SESSIONS_LIMIT = 500
MAX_FOLLOWS_PER_CONNECTION = 8  # standing queries one connection may hold
FOLLOW_QUEUE_HITS = 1000  # hits waiting for a slow reader before its follow is dropped
SESSIONS_QUERY_HITS = 1000  # `sessions` with a query: sessions among this many best hits
MAX_WAIT_SECONDS = 10.0
NEIGHBOURS_MAX = 50
WINDOW_MAX = 64_000
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


# -- results: hello, search ----------------------------------------------------------


class HelloResult(Wire):
    proto: int
    version: str
    pid: int
    started_at: int
    capabilities: list[str]


Tier = Literal["exact", "forms", "repaired", "partial"]


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
    score: float
    is_error: bool
    context_role: str
    branch_state: str
    selection_state: str
    snippet: str
    spans: list[tuple[int, int]]  # [start, end) character offsets of the matches in `snippet`
    # How the hit matched: every word as written (exact), every word by a word
    # form or identifier part (forms), with a misspelled word repaired
    # (repaired), or only some of the words (partial).
    tier: Tier = "exact"
    # Below exact: the query words this hit matched and the ones it misses.
    matched: list[str] | None = None
    missing: list[str] | None = None


class FollowResult(Wire):
    """The answer to `follow`; then FollowUpdate results arrive, unasked, with
    the follow request's id, until `unfollow`. A reader that falls more than
    `maxQueuedHits` behind gets an error `slow_consumer` with that id instead,
    and the follow ends."""

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


class SessionsResult(Wire):
    sessions: list[SessionItem]
    has_more: bool
    limit: int
    offset: int


class ReindexResult(Wire):
    queued: str  # a session id, or "all"


# -- results: status ---------------------------------------------------------------


class ScanInfo(Wire):
    reason: str | None = None
    at_ms: int | None = None
    seconds: float | None = None
    files: int | None = None
    queued: int | None = None
    missed_by_events: int | None = None
    roots_unavailable: list[str] = []


class ServiceStatus(Wire):
    """The ingest service's progress (live from the daemon, or the row it last
    wrote to the index). Unknown fields from a newer service are ignored."""

    pid: int | None = None
    phase: str | None = None
    running: bool = False
    started_ms: int | None = None
    heartbeat_ms: int | None = None
    updated_age_s: float | None = None
    uptime_seconds: float | None = None
    socket: str | None = None
    requests_served: int | None = None
    db: str | None = None
    roots: list[dict[str, Any]] = []
    warnings: list[str] = []
    settle: float | None = None
    max_latency: float | None = None
    scan_interval: float | None = None
    files_known: int | None = None
    files_ingested: int | None = None
    files_changed: int | None = None  # of files_ingested, those with new bytes (the rest only verified)
    bytes_ingested: int | None = None
    events_ingested: int | None = None
    batches: int | None = None
    backlog_files: int | None = None
    backlog_bytes: int | None = None
    rate_bytes_per_s: float | None = None  # recent ingest rate while there is a backlog (status: time left)
    scans: int | None = None
    last_scan: ScanInfo | None = None
    startup_seconds: float | None = None
    missed_by_events: int | None = None
    removals_vetoed: int | None = None
    retrying: int | None = None  # files waiting for a retry after a transient failure
    retries: int | None = None
    index_problem: str | None = None  # set while a lost or corrupt index is rebuilt: unhealthy
    index_rebuilds: int | None = None
    errors: dict[str, str] = {}


class SourceProblem(Wire):
    path: str
    state: str
    error: str | None


class SourcesStatus(Wire):
    total: int
    by_state: dict[str, int]
    problems: list[SourceProblem]


class BytesStatus(Wire):
    files: int
    ingested: int
    backlog: int


class DiagnosticCount(Wire):
    count: int
    repaired: int


class DiagnosticItem(Wire):
    path: str
    byte_offset: int | None
    code: str
    message: str
    repaired: bool


class DiagnosticsStatus(Wire):
    by_code: dict[str, DiagnosticCount]
    recent: list[DiagnosticItem]


class IndexProgress(Wire):
    """The first index of the files the caller may see is still running."""

    files_done: int
    files_total: int


class RedactionStatus(Wire):
    """Secrets redacted from the indexed text, by kind (never values), and the rules in force."""

    total: int
    by_kind: dict[str, int]
    rules: str  # fingerprint of the built-in rules version + [redact] config
    extra_patterns: list[str]
    allowlisted: int


class StatusResult(Wire):
    """What `status` shows. A workspace caller sees only its own sessions'
    counts and problems; `all` (the local CLI) sees the whole index."""

    db: str | None = None
    ready: bool = True
    index_error: str | None = None  # why the index cannot be read (ready: false)
    index_bytes: int = 0
    sources: SourcesStatus | None = None
    sessions: int = 0
    events: int = 0
    fragments: int | None = None
    bytes: BytesStatus | None = None
    diagnostics: DiagnosticsStatus | None = None
    redactions: RedactionStatus | None = None
    service: ServiceStatus | None = None
    catch_up: IndexProgress | None = None
    running: bool = False  # set by the CLI: a daemon answered
    daemon: HelloResult | None = None


# -- envelope ----------------------------------------------------------------------


class SessionFreshness(Wire):
    session_id: str
    indexed_bytes: int
    file_bytes: int | None
    complete: bool
    ms_since_ingest: int | None


class Freshness(Wire):
    sessions: list[SessionFreshness] = []
    backlog: int | None = None
    last_scan_ms: int | None = None


class Notice(Wire):
    """Something the caller should know about the answer (catch-up, a file of
    the answer's sessions that could not be read). `code` is stable."""

    code: str
    message: str
    path: str | None = None


class ErrorBody(Wire):
    code: str
    message: str


class Response(Wire):
    id: int | str | None
    ok: bool
    result: Any = None
    error: ErrorBody | None = None
    warnings: list[Notice] = []
    freshness: Freshness | None = None


ARGS: dict[str, type[Wire]] = {
    "hello": HelloArgs,
    "status": StatusArgs,
    "search": SearchArgs,
    "read": ReadArgs,
    "trace": TraceArgs,
    "sessions": SessionsArgs,
    "reindex": ReindexArgs,
    "follow": FollowArgs,
    "unfollow": UnfollowArgs,
}

# Every op of the contract, in one place: the daemon's dispatcher and `hello`'s capabilities derive from it.
OPS: tuple[str, ...] = tuple(ARGS)
# Ops the connection answers itself (the handshake, and standing queries pushed on it), not the request path.
CONNECTION_OPS: tuple[str, ...] = ("hello", "follow", "unfollow")

RESULTS: dict[str, type[Wire]] = {
    "hello": HelloResult,
    "status": StatusResult,
    "search": SearchResult,
    "read": ReadResult,
    "trace": TraceResult,
    "sessions": SessionsResult,
    "reindex": ReindexResult,
    "follow": FollowResult,
    "unfollow": UnfollowResult,
}


def _convert(value: Any, cls: type[T], what: str) -> T:
    try:
        return msgspec.convert({} if value is None else value, cls)
    except msgspec.ValidationError as exc:
        # msgspec's message names the field path (`$.filters.sinceMs`); values are not quoted.
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"{what}: {clip(str(exc))}") from None


def decode_args(op: str, args: Any) -> Wire:
    """Validate a request's `args` map; raises ProtocolError(bad_request)."""
    cls = ARGS.get(op)
    if cls is None:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"unknown op {quote(op)}; known: {sorted(ARGS)}")
    return _convert(args, cls, f"bad {op} arguments")


def decode_caller(caller: Any) -> Caller | None:
    return None if caller is None else _convert(caller, Caller, "bad caller")


def decode_result(op: str, result: Any) -> Any:
    """A response's `result` as the op's typed Struct (clients)."""
    cls = RESULTS.get(op)
    return result if cls is None else msgspec.convert(result, cls)


def to_builtins(value: Any) -> Any:
    """Plain dicts/lists with wire (camelCase) names, as JSON or msgpack carry them."""
    return msgspec.to_builtins(value)


# DEL and C1 controls: JSON may carry them raw, but printed raw a U+009B is a CSI on many terminals.
_RAW_CONTROLS = re.compile("[\x7f-\x9f]")


def to_json(value: Any, *, indent: int | None = 2) -> str:
    """Pretty JSON of any wire value (one line with `indent=None`), camelCase, as `--json` prints it: the
    exact text, with every control character JSON-escaped (`\\u001b`,
    `\\u009b`), so the output is safe on a terminal and decodes to the same values."""
    text = json.dumps(to_builtins(value), indent=indent, ensure_ascii=False)
    return _RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


SCHEMA_PATH = Path(__file__).with_name("wire_schema.json")


def schema() -> dict[str, Any]:
    """JSON Schema of the whole contract: `{"ops": {op: {"args", "result"}},
    "envelope", "$defs"}`. The Pi extension's TypeScript types are checked
    against this; `python -m piwatch.wire` prints it."""
    types = [*ARGS.values(), *RESULTS.values(), FollowUpdate, Caller, Response, Notice, Freshness, ErrorBody]
    refs, defs = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    by_type = dict(zip(types, refs))
    return {
        "title": "piwatch wire contract",
        "ops": {op: {"args": by_type[ARGS[op]], "result": by_type[RESULTS[op]]} for op in ARGS},
        # Pushed after a follow's result, with its request id, until unfollow.
        "pushed": {"follow": by_type[FollowUpdate]},
        "caller": by_type[Caller],
        "response": by_type[Response],
        "errorCodes": sorted(v for k, v in vars(ErrorCode).items() if k.isupper()),
        "$defs": defs,
    }


def schema_text() -> str:
    return json.dumps(schema(), indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(schema_text(), end="")
