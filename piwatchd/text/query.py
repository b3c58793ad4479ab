"""Query planning (pure): user text -> terms and phrases, filters -> SQL.

The query language is plain terms and quoted phrases with implicit AND.
Nothing a user types is ever executed as engine syntax: each engine builds
its queries from the terms (`piwatchd.text.fts5.sql` quotes them as FTS5
string literals). A query with no searchable words is a clear `QueryError`,
never an SQLite error.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Any

from piwatch.wire import MAX_LIMIT, MAX_OFFSET

from ..model import subtree
from ..model.subtree import under_sql
from ..store.evidence import event_files_sql

__all__ = [
    "QueryError",
    "QueryTimeout",
    "Term",
    "SearchFilters",
    "SearchRequest",
    "parse_query",
    "build_candidates_sql",
    "HIT_COLUMNS",
    "HIT_JOINS",
    "filter_clauses",
    "session_filter_clauses",
    "overridden",
    "caps_by_ordinal",
    "validate_page",
    "visible_scope",
    "roots_clause",
    "files_clause",
    "FILE_MODES",
    "MAX_LIMIT",
    "MAX_OFFSET",
    "MAX_QUERY_CHARS",
]

# The page bounds are the wire contract's (one definition).
MAX_QUERY_CHARS = 2_000
MAX_TERMS = 32
# piwatch's Pi tools; their calls and tagged results are hidden from the Pi tool by default.
OWN_TOOLS = ("event_search", "event_read", "event_trace")


class QueryError(ValueError):
    """The request cannot be searched; the message says why and what to do."""


class QueryTimeout(Exception):
    """The search ran past its time budget."""


@dataclass(frozen=True, slots=True)
class Term:
    text: str
    phrase: bool


def _is_token_char(ch: str) -> bool:
    # unicode61 makes tokens of letters, numbers and private-use characters.
    cat = unicodedata.category(ch)
    return cat[0] in "LN" or cat == "Co"


def has_token(text: str) -> bool:
    return any(_is_token_char(c) for c in text)


def parse_query(text: str) -> list[Term]:
    """Split into bare terms and quoted phrases. An unclosed quote runs to the end."""
    if not isinstance(text, str):
        raise QueryError("query must be a string")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"query is longer than {MAX_QUERY_CHARS} characters")
    # SQLite reads the expression as a C string: a NUL would cut it short.
    text = text.replace("\x00", " ")
    terms: list[Term] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch == '"':
            close = text.find('"', i + 1)
            end = n if close < 0 else close
            body = " ".join(text[i + 1 : end].split())
            if has_token(body):
                terms.append(Term(body, True))
            i = end + 1
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] != '"':
            j += 1
        word = text[i:j]
        if has_token(word):
            terms.append(Term(word, False))
        i = j
    if not terms:
        raise QueryError("the query has no searchable words (letters or digits)")
    if len(terms) > MAX_TERMS:
        raise QueryError(f"the query has more than {MAX_TERMS} terms")
    return terms


@dataclass(frozen=True, slots=True)
class SearchFilters:
    session_ids: tuple[str, ...] = ()
    cwd: str | None = None  # exact recorded cwd (normalized)
    cwd_under: str | None = None  # cwd equal to or below this path
    event_types: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    since_ms: int | None = None
    until_ms: int | None = None
    is_error: bool | None = None
    branch_states: tuple[str, ...] = ()
    selection_states: tuple[str, ...] = ()
    exclude_sessions: tuple[str, ...] = ()
    # Authorization, set by the daemon from the caller, never by users:
    # None = unrestricted (trusted local CLI); () = nothing is visible.
    authorized_roots: tuple[str, ...] | None = None
    # (session id, first excluded ordinal): events at or after an invocation
    # cutoff are invisible, in the current session and in forks copying it.
    ordinal_caps: tuple[tuple[str, int], ...] = ()
    # File evidence: events that read/changed one of these absolute paths
    # (or anything below it); mode is read | changed | any.
    files: tuple[str, ...] = ()
    file_mode: str = "any"
    # piwatch's own Pi tool results (tagged `details.piwatch`) are history of
    # searching, not of the work: hidden from the Pi tool unless asked.
    exclude_own_results: bool = False
    # Only these events (their rowids): a standing query (`follow`) searches just what a commit added.
    event_rowids: tuple[int, ...] = ()


def visible_scope(f: SearchFilters) -> SearchFilters | None:
    """The part of `f` that says what the caller may see (its authorized
    roots, its own session left out, its cutoff caps), without what it chose
    to filter; None when it may see everything. Statistics a scoped caller's
    answer depends on (whether a word has postings, which word repairs it,
    a word's weight) are taken over this scope only, and its hits show no
    score: a score carries the whole index's statistics (docs/concepts.md,
    "Who may see what")."""
    if f.authorized_roots is None and not f.exclude_sessions and not f.ordinal_caps:
        return None
    return SearchFilters(
        authorized_roots=f.authorized_roots, exclude_sessions=f.exclude_sessions, ordinal_caps=f.ordinal_caps
    )


@dataclass(frozen=True, slots=True)
class SearchRequest:
    query: str
    filters: SearchFilters = field(default_factory=SearchFilters)
    limit: int = 20
    offset: int = 0
    exact: bool = False  # the exact tier only: no word forms, repairs or partial matches
    group: str = "event"  # "session": limit and offset count sessions (index/grouping.py)
    # A word's own matches, as written and by its forms, in one search; no repair of it (`SearchResult.words`).
    own_forms: bool = False


def caps_by_ordinal(caps: tuple[tuple[str, int], ...]) -> list[tuple[int, list[str]]]:
    """Ordinal caps grouped by their value: (cap, its sessions), lowest first.
    Forks copy their parent's entries in place, so most capped sessions of a
    lineage share one cap; a filter per value, not per session, keeps a
    search's cost from growing with the number of forks (each range filter
    costs the text index a pass over its ordinals). Pure."""
    groups: dict[int, list[str]] = {}
    for session_id, cap in caps:
        groups.setdefault(cap, []).append(session_id)
    return sorted(groups.items())


def _in(column: str, values: tuple[Any, ...], where: list[str], params: list[Any]) -> None:
    if values:
        where.append(f"{column} IN ({','.join('?' * len(values))})")
        params.extend(values)


def roots_clause(column: str, roots: tuple[str, ...]) -> tuple[str, list[Any]]:
    """SQL true when `column` equals one of `roots` or lies below it."""
    if not roots:
        return "0", []
    parts: list[str] = []
    params: list[Any] = []
    for root in roots:
        if root.rstrip("/") == "":
            return f"{column} IS NOT NULL", []
        clause, clause_params = under_sql(column, root)
        parts.append(clause)
        params.extend(clause_params)
    return "(" + " OR ".join(parts) + ")", params


FILE_MODES = ("read", "changed", "any")


def files_clause(paths: tuple[str, ...], mode: str = "any") -> tuple[str, list[Any]]:
    """SQL true for events with file evidence on one of `paths` (exact or below)."""
    if mode not in FILE_MODES:
        raise QueryError(f"file mode must be one of {', '.join(FILE_MODES)}")
    parts: list[str] = []
    params: list[Any] = []
    for path in paths:
        if subtree.base(path) == "/":
            parts.append("1")
            continue
        clause, clause_params = under_sql("fe.path", path)
        parts.append(clause)
        params.extend(clause_params)
    mode_sql = "" if mode == "any" else " AND fe.mode = ?"
    if mode != "any":
        params.append(mode)
    # Own evidence and a tool result's share of its call's: the arms repeat the parameters.
    holders = event_files_sql("{h}.session_key, {h}.entry_id", f"({' OR '.join(parts)}){mode_sql}")
    return f"(e.session_key, e.entry_id) IN ({holders})", params + params


SqlExpr = tuple[str, list[Any]]  # an SQL expression and its parameters


def overridden(column: str, values: dict[str, Any]) -> SqlExpr:
    """`column` of alias `s`, except for the sessions in `values` (session id ->
    value): a span as far as a caller may see it. Pure."""
    if not values:
        return column, []
    cases = " ".join("WHEN ? THEN ?" for _ in values)
    return f"CASE s.session_id {cases} ELSE {column} END", [x for item in values.items() for x in item]


def session_filter_clauses(
    f: SearchFilters, first: SqlExpr = ("s.first_ms", []), last: SqlExpr = ("s.last_ms", [])
) -> tuple[list[str], list[Any]]:
    """WHERE conditions over alias `s` (sessions) for the scope filters a session
    list shares with search: recorded cwd (exact or below) and time span (`first`
    and `last`: the span's expressions, see `overridden`). Pure."""
    where: list[str] = []
    params: list[Any] = []
    if f.cwd is not None:
        where.append("s.cwd_norm = ?")
        params.append(f.cwd)
    if f.cwd_under is not None and f.cwd_under.rstrip("/") != "":
        clause, clause_params = under_sql("s.cwd_norm", f.cwd_under)
        where.append(clause)
        params.extend(clause_params)
    if f.since_ms is not None:
        where.append(f"{last[0]} >= ?")
        params.extend([*last[1], f.since_ms])
    if f.until_ms is not None:
        where.append(f"{first[0]} < ?")
        params.extend([*first[1], f.until_ms])
    return where, params


def filter_clauses(f: SearchFilters) -> tuple[list[str], list[Any]]:
    """WHERE conditions over aliases `f` (fragments), `e` (events), `s` (sessions)."""
    where: list[str] = []
    params: list[Any] = []
    _in("s.session_id", f.session_ids, where, params)
    _in("e.event_rowid", f.event_rowids, where, params)
    if f.exclude_sessions:
        where.append(f"s.session_id NOT IN ({','.join('?' * len(f.exclude_sessions))})")
        params.extend(f.exclude_sessions)
    cwd_where, cwd_params = session_filter_clauses(replace(f, since_ms=None, until_ms=None))
    where.extend(cwd_where)
    params.extend(cwd_params)
    _in("e.type", f.event_types, where, params)
    _in("f.kind", f.kinds, where, params)
    _in("e.role", f.roles, where, params)
    _in("f.tool_name", f.tools, where, params)
    if f.since_ms is not None:
        where.append("e.ts_ms >= ?")
        params.append(f.since_ms)
    if f.until_ms is not None:
        where.append("e.ts_ms < ?")
        params.append(f.until_ms)
    if f.is_error is not None:
        where.append("e.is_error = ?")
        params.append(int(f.is_error))
    if f.authorized_roots is not None:
        clause, clause_params = roots_clause("s.cwd_real", f.authorized_roots)
        where.append(clause)
        params.extend(clause_params)
    if f.exclude_own_results:
        where.append("(e.meta IS NULL OR json_extract(e.meta, '$.piwatch') IS NULL)")
        # The calls of piwatch's own tools would echo earlier queries back as hits.
        where.append(f"NOT (f.kind = 'tool.call' AND f.tool_name IN ({','.join('?' * len(OWN_TOOLS))}))")
        params.extend(OWN_TOOLS)
    for cap, sessions in caps_by_ordinal(f.ordinal_caps):
        where.append("(s.session_id NOT IN (SELECT value FROM json_each(?)) OR e.ordinal < ?)")
        params.extend([json.dumps(sessions), cap])
    _in("e.branch_state", f.branch_states, where, params)
    _in("e.selection_state", f.selection_states, where, params)
    if f.files:
        clause, clause_params = files_clause(f.files, f.file_mode)
        where.append(clause)
        params.extend(clause_params)
    return where, params


def validate_page(request: SearchRequest) -> None:
    """Check limit, offset and the query (QueryError when it has no searchable words)."""
    if not 1 <= request.limit <= MAX_LIMIT:
        raise QueryError(f"limit must be between 1 and {MAX_LIMIT}")
    if not 0 <= request.offset <= MAX_OFFSET:
        raise QueryError(f"offset must be between 0 and {MAX_OFFSET}")
    parse_query(request.query)


HIT_COLUMNS = """f.fragment_id, f.kind, f.tool_name, f.event_rowid,
           s.session_id, e.entry_id, e.ordinal, e.type, e.role, e.ts_ms, e.is_error,
           e.context_role, e.branch_state, e.selection_state, s.cwd, s.name AS session_name"""
HIT_JOINS = """JOIN events e ON e.event_rowid = f.event_rowid
    JOIN sessions s ON s.session_key = e.session_key"""


def build_candidates_sql(filters: SearchFilters, rowids: list[int]) -> tuple[str, list[Any]]:
    """Phase 2: the filtered event rows of the phase-1 fragments."""
    where, params = filter_clauses(filters)
    sql = f"""SELECT f.frag_rowid, {HIT_COLUMNS}
    FROM fragments f
    {HIT_JOINS}
    WHERE f.frag_rowid IN (SELECT value FROM json_each(?)){"".join(" AND " + w for w in where)}"""

    return sql, [json.dumps(rowids)] + params
