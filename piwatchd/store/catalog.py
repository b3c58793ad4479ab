"""One accessor for a session and its source file (the `sessions JOIN
sources` that the api, the ops, reindex and status all need), as named rows.

Every lookup is by primary key or an index (session id, source path, parent
reference), so a request costs O(the sessions it names), never O(history).
A session's lineage (its forks, theirs, its parent) is matched here alone,
on references in one canonical spelling (`canonical_ref`).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..model.lineage import normal_ref, ref_path
from ..text.query import roots_clause
from .ids import IN_IDS, id_list

__all__ = [
    "SessionRow",
    "canonical_ref",
    "descendants",
    "forks_of",
    "orphan_forks",
    "list_sessions",
    "parent_of",
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


def canonical_ref(recorded: str | None, cwd: str | None = None) -> str | None:
    """A parent reference (or a session's own file) as lineage compares them:
    `model.lineage.normal_ref` with symlinks resolved where the path exists
    (Pi compares its paths so). Read when a session is ingested and for the
    caller's own file; the same spelling on both sides of a match."""
    norm = normal_ref(recorded, cwd)
    path = ref_path(recorded, cwd) if recorded else None
    if norm is None or path is None or not norm.startswith("/"):
        return norm
    try:
        return normal_ref(os.path.realpath(path), None)
    except (OSError, ValueError):  # a NUL, a loop: the path as written
        return norm


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


# Sessions `c` that name a session as their parent, by id or by file: the
# partial index of forks answers it (IS NOT NULL lets the planner use it).
_FORK_OF = "c.parent_ref IS NOT NULL AND c.parent_ref IN ({refs})"


def forks_of(conn: sqlite3.Connection, session_id: str, limit: int) -> list[str]:
    """The sessions that name this one as their parent (its direct forks), by id."""
    return [
        r[0]
        for r in conn.execute(
            f"SELECT c.session_id FROM sessions c JOIN sessions p ON p.session_id = ?"
            f" WHERE {_FORK_OF.format(refs='p.session_id, p.file_ref')} AND c.session_id != p.session_id"
            " ORDER BY c.session_id LIMIT ?",
            (session_id, limit),
        )
    ]


def descendants(conn: sqlite3.Connection, session_id: str, also: Iterable[str] = ()) -> list[tuple[str, str | None]]:
    """The forks of a session, and theirs, to any depth: (fork, the session it
    names as its parent, None for `session_id` itself), a parent always
    before its forks. `also`: further references to the session (the
    caller's own file, before it is indexed). One recursive query through the
    partial index of forks, O(descendants); a cycle of headers ends at
    `session_id`, and a session names one parent, so each appears once."""
    refs = id_list(r for r in dict.fromkeys([session_id, *also, _file_ref(conn, session_id)]) if r)
    sql = f"""
        WITH RECURSIVE lineage(key, parent) AS (
            SELECT c.session_key, NULL FROM sessions c
             WHERE {_FORK_OF.format(refs="SELECT value FROM json_each(?)")} AND c.session_id != ?
            UNION
            SELECT c.session_key, l.key FROM lineage l
              JOIN sessions p ON p.session_key = l.key
              JOIN sessions c ON {_FORK_OF.format(refs="p.session_id, p.file_ref")}
             WHERE c.session_id != ?
        )
        SELECT s.session_id, p.session_id FROM lineage l
          JOIN sessions s ON s.session_key = l.key LEFT JOIN sessions p ON p.session_key = l.parent"""
    out: dict[str, str | None] = {}
    for child, parent in conn.execute(sql, (refs, session_id, session_id)):
        out.setdefault(child, parent)  # a parent named two ways: the first found
    return list(out.items())


def orphan_forks(conn: sqlite3.Connection) -> list[str]:
    """Sessions naming a parent (by file or id) that is not indexed: a fork
    indexed before the session it names, or naming one since removed. No
    lineage walk reaches them. Through the partial index of forks, O(forks)."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT c.session_id FROM sessions c WHERE c.parent_ref IS NOT NULL"
            " AND NOT EXISTS (SELECT 1 FROM sessions p WHERE p.file_ref = c.parent_ref)"
            " AND NOT EXISTS (SELECT 1 FROM sessions p WHERE p.session_id = c.parent_ref)"
        )
    ]


def _file_ref(conn: sqlite3.Connection, session_id: str) -> str | None:
    row = conn.execute("SELECT file_ref FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return row[0] if row else None


def parent_of(conn: sqlite3.Connection, session_id: str) -> str | None:
    """The indexed session a session names as its parent (by file or id), or None."""
    row = conn.execute(
        "SELECT p.session_id FROM sessions c JOIN sessions p ON p.file_ref = c.parent_ref"
        " WHERE c.session_id = ? AND c.parent_ref IS NOT NULL"
        " UNION ALL SELECT p.session_id FROM sessions c JOIN sessions p ON p.session_id = c.parent_ref"
        " WHERE c.session_id = ? LIMIT 1",
        (session_id, session_id),
    ).fetchone()
    return row[0] if row else None


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
