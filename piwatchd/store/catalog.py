"""One accessor for a session and its source file (the `sessions JOIN
sources` that the api, the ops, reindex and status all need), as named rows.

Every lookup is by primary key or an index (session id, source path, parent
reference), so a request costs O(the sessions it names), never O(history).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..text.query import roots_clause
from .ids import IN_IDS, id_list

__all__ = [
    "SessionRow",
    "child_sessions",
    "list_sessions",
    "session_by_path",
    "session_row",
    "session_rows",
    "sessions_with_prefix",
]

_COLUMNS = (
    "s.session_id, s.cwd, s.cwd_real, s.name, s.created, s.first_ms, s.last_ms, s.entry_count, s.parent_session,"
    " s.format, src.path, src.state, src.error, src.consumed, src.size, src.last_ingest_ms, s.agent"
)
_FROM = "sessions s JOIN sources src ON src.source_id = s.source_id"


@dataclass(frozen=True, slots=True)
class SessionRow:
    session_id: str
    cwd: str | None
    cwd_real: str | None
    name: str | None
    created: str | None
    first_ms: int | None
    last_ms: int | None
    entry_count: int
    parent_session: str | None
    format: str
    path: str  # the source file
    state: str  # the source's state: ok | stale | unsupported | ...
    error: str | None
    consumed: int  # bytes ingested: end of the last complete line
    size: int | None  # file size when last observed
    last_ingest_ms: int | None
    agent: str  # pi | omp


def _rows(conn: sqlite3.Connection, where: str, params: Iterable[object]) -> list[SessionRow]:
    return [SessionRow(*r) for r in conn.execute(f"SELECT {_COLUMNS} FROM {_FROM} WHERE {where}", tuple(params))]


def session_row(conn: sqlite3.Connection, session_id: str) -> SessionRow | None:
    rows = _rows(conn, "s.session_id = ?", (session_id,))
    return rows[0] if rows else None


def session_rows(conn: sqlite3.Connection, session_ids: Iterable[str]) -> dict[str, SessionRow]:
    ids = sorted(set(session_ids))
    if not ids:
        return {}
    return {row.session_id: row for row in _rows(conn, f"s.session_id {IN_IDS}", (id_list(ids),))}


def session_by_path(conn: sqlite3.Connection, path: str) -> SessionRow | None:
    rows = _rows(conn, "src.path = ?", (path,))
    return rows[0] if rows else None


def sessions_with_prefix(conn: sqlite3.Connection, prefix: str, roots: tuple[str, ...] | None, limit: int) -> list[str]:
    """Ids beginning with `prefix` of sessions whose cwd lies under `roots`
    (every session when None), in id order, at most `limit`: a range of the
    session id index (no id holds U+10FFFF right after a prefix)."""
    where, params = ("1", []) if roots is None else roots_clause("cwd_real", roots)
    rows = conn.execute(
        f"SELECT session_id FROM sessions WHERE session_id >= ? AND session_id < ? AND {where}"
        " ORDER BY session_id LIMIT ?",
        (prefix, prefix + "\U0010ffff", *params, limit),
    )
    return [sid for (sid,) in rows if sid.startswith(prefix)]


def child_sessions(
    conn: sqlite3.Connection,
    refs: Iterable[str],
    exclude: str | None = None,
    limit: int = 50,
    roots: tuple[str, ...] | None = None,
) -> list[str]:
    """Sessions whose recorded parent is one of `refs` (a session id or a
    source path, as Pi records it), ordered by id. With `roots`, only
    sessions whose cwd lies under them."""
    refs = [r for r in dict.fromkeys(refs) if r]
    if not refs:
        return []
    # IS NOT NULL lets the planner use the partial index of forks (store.schema).
    where = f"parent_session IS NOT NULL AND parent_session IN ({','.join('?' * len(refs))})"
    params = list(refs)
    if roots is not None:
        clause, root_params = roots_clause("cwd_real", roots)
        where = f"{clause} AND {where}"
        params = [*root_params, *params]
    return [
        r[0]
        for r in conn.execute(
            f"SELECT session_id FROM sessions WHERE {where} AND session_id != ? ORDER BY session_id LIMIT ?",
            (*params, exclude or "", limit),
        )
    ]


def list_sessions(
    conn: sqlite3.Connection,
    where: str,
    params: Iterable[object],
    limit: int,
    offset: int,
    last: tuple[str, list[Any]] = ("s.last_ms", []),
) -> list[SessionRow]:
    """A page of sessions matching `where` (over aliases `s`, `src`), newest
    first by `last` (an expression of the last activity and its parameters)."""
    order = f"ORDER BY coalesce({last[0]}, 0) DESC, s.session_id LIMIT ? OFFSET ?"
    return _rows(conn, f"{where} {order}", (*params, *last[1], limit, offset))
