"""What `status` shows, read from the index (read-only) as `piwatch.wire.StatusResult`.

Cost is bounded by the index's aggregates, never a stat of every source:
sizes are the ones recorded when each file was last observed (the live
service's own backlog rides along in `service`). A workspace caller's status
counts only its own sessions; the `all` caller (the local CLI) sees the whole
index, including files that are not sessions of any project.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec
import orjson
from piwatch import wire

from ..store.ids import IN_IDS, id_list
from ..store.redaction import index_rules, redaction_totals
from ..text.engine import engine_of, index_bytes
from ..text.query import roots_clause

__all__ = ["caller_files", "collect_status", "read_service_state", "STATES"]

STATES = ("ok", "pending", "stale", "unsupported", "unreadable", "duplicate")
PROBLEMS_SHOWN = 20


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    return True


def read_service_state(db_path: str | os.PathLike[str]) -> wire.ServiceStatus | None:
    """The live service's last recorded progress, or None when there is none
    yet (no index, no row, or the index is being created)."""
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
        try:
            row = conn.execute("SELECT value FROM service_state WHERE key='service'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return _decode_service(row[0]) if row else None


def _decode_service(value: str | bytes) -> wire.ServiceStatus:
    """The recorded row: the wire's `ServiceStatus`, as the service wrote it."""
    try:
        return msgspec.json.decode(value, type=wire.ServiceStatus)
    except msgspec.DecodeError:
        # A service of another version: show what can be read rather than fail status.
        try:
            data = orjson.loads(value)
        except orjson.JSONDecodeError:
            data = None
        if not isinstance(data, dict):
            return wire.ServiceStatus()
        pid, phase = data.get("pid"), data.get("phase")
        return wire.ServiceStatus(
            pid=pid if isinstance(pid, int) else None, phase=None if phase is None else str(phase)
        )


def _recorded_service(conn: sqlite3.Connection) -> wire.ServiceStatus | None:
    row = conn.execute("SELECT value, updated_ms FROM service_state WHERE key='service'").fetchone()
    if row is None:
        return None
    svc = _decode_service(row[0])
    svc.running = svc.phase != "stopped" and _pid_alive(svc.pid or 0)
    svc.updated_age_s = round(time.time() - row[1] / 1000, 1)
    return svc


@dataclass(frozen=True, slots=True)
class _Scope:
    """The SQL that selects the caller's sources (`src`) and sessions (`s`)."""

    sources_from: str
    sources_where: str
    params: list[object]
    sessions_where: str
    session_params: list[object]
    whole: bool  # the whole index (no roots): every source, including non-session files


def _scope(roots: tuple[str, ...] | None, exclude_sessions: Sequence[str]) -> _Scope:
    excluded = [id_list(exclude_sessions)] if exclude_sessions else []
    if roots is None:
        params: list[object] = []
        scope_from, scope_where = "sources src", "1"
    else:
        clause, params = roots_clause("s.cwd_real", roots)
        scope_from = "sessions s JOIN sources src ON src.source_id = s.source_id"
        scope_where = clause
    session_where, session_params = ("1", []) if roots is None else roots_clause("s.cwd_real", roots)
    if excluded:
        # One parameter however many forks the cutoff caps.
        scope_where += f" AND src.source_id NOT IN (SELECT source_id FROM sessions WHERE session_id {IN_IDS})"
        params = [*params, *excluded]
        session_where += f" AND s.session_id NOT {IN_IDS}"
        session_params = [*session_params, *excluded]
    return _Scope(scope_from, scope_where, params, session_where, session_params, roots is None)


def collect_status(
    conn: sqlite3.Connection,
    db_path: str | os.PathLike[str],
    *,
    roots: tuple[str, ...] | None = None,
    diagnostics_limit: int = 20,
    exclude_sessions: Sequence[str] = (),
) -> wire.StatusResult:
    """Status of the whole index (`roots` None) or of the sessions under `roots`,
    leaving out the files of `exclude_sessions` (sessions the caller may see
    only in part: the caller adds back what it may see of them)."""
    scope = _scope(roots, exclude_sessions)
    counts = _counted(conn, scope, diagnostics_limit)
    db = Path(db_path)
    size = sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists()) + index_bytes(engine_of(conn), db)
    return wire.StatusResult(
        db=str(db) if roots is None else None,
        index_bytes=size if roots is None else 0,
        sources=counts.sources,
        sessions=counts.sessions,
        events=counts.events,
        bytes=counts.bytes,
        diagnostics=counts.diagnostics,
        redactions=counts.redactions,
        service=_recorded_service(conn),  # ages and a pid's liveness: never remembered
    )


def caller_files(
    conn: sqlite3.Connection, roots: tuple[str, ...], exclude_sessions: Sequence[str] = ()
) -> tuple[int, int]:
    """(files read to their end, files) of the sessions under `roots`, leaving
    out `exclude_sessions`: a workspace caller's share of the service's file
    counts. A file counts once the index has read its header (before, its
    project is unknown); it is done once read to its size when last observed."""
    scope = _scope(roots, exclude_sessions)
    total, done = conn.execute(
        f"SELECT count(*), coalesce(sum(src.consumed >= coalesce(src.size, 0)), 0)"
        f" FROM {scope.sources_from} WHERE {scope.sources_where}",
        scope.params,
    ).fetchone()
    return int(done), int(total)


class _Counts(msgspec.Struct):
    """What status aggregates over the index's rows (all of it changes only with a commit)."""

    sessions: int
    events: int
    sources: wire.SourcesStatus
    bytes: wire.BytesStatus
    diagnostics: wire.DiagnosticsStatus
    redactions: wire.RedactionStatus


# Each reader connection's last aggregates: (the connection, its data_version
# then, what was asked, the aggregates encoded). Bounded: connections come
# and go with clients; a closed one is only held until it is pushed out.
_COUNTED: dict[int, tuple[sqlite3.Connection, int, tuple[object, ...], bytes]] = {}
_COUNTED_MAX = 64
_COUNTED_LOCK = threading.Lock()


def _counted(conn: sqlite3.Connection, scope: _Scope, diagnostics_limit: int) -> _Counts:
    """The aggregates, computed again only when the index changed since this
    connection last computed them (SQLite's data_version: another connection
    committed). They cost 10-30 ms of SQL over 4,300 sessions and grow with the
    index; `status` is polled (every second by the TUI) and mostly nothing changed.
    Each caller gets its own copy (the op fills in what the caller may see)."""
    version = conn.execute("PRAGMA data_version").fetchone()[0]
    asked = (scope.sources_from, scope.sources_where, *scope.params, scope.sessions_where, *scope.session_params)
    asked += (diagnostics_limit,)
    with _COUNTED_LOCK:
        last = _COUNTED.get(id(conn))
    if last is not None and last[0] is conn and last[1] == version and last[2] == asked:
        return msgspec.msgpack.decode(last[3], type=_Counts)
    counts = _count(conn, scope, diagnostics_limit)
    with _COUNTED_LOCK:
        _COUNTED.pop(id(conn), None)
        if len(_COUNTED) >= _COUNTED_MAX:
            del _COUNTED[next(iter(_COUNTED))]
        _COUNTED[id(conn)] = (conn, version, asked, msgspec.msgpack.encode(counts))
    return counts


def _count(conn: sqlite3.Connection, scope: _Scope, diagnostics_limit: int) -> _Counts:
    sessions, events = conn.execute(
        f"SELECT count(*), coalesce(sum(s.entry_count), 0) FROM sessions s WHERE {scope.sessions_where}",
        scope.session_params,
    ).fetchone()
    sources, file_bytes, consumed_bytes = _sources(conn, scope)
    return _Counts(
        sessions=sessions,
        events=events,
        sources=sources,
        bytes=wire.BytesStatus(files=file_bytes, ingested=consumed_bytes, backlog=max(0, file_bytes - consumed_bytes)),
        diagnostics=_diagnostics(conn, scope, diagnostics_limit),
        redactions=_redactions(conn, scope.sessions_where, scope.session_params),
    )


def _sources(conn: sqlite3.Connection, scope: _Scope) -> tuple[wire.SourcesStatus, int, int]:
    """Sources by state with the problems among them, and (file bytes, bytes ingested)."""
    by_state = dict.fromkeys(STATES, 0)
    file_bytes = consumed_bytes = 0
    for state, n, size, consumed in conn.execute(
        f"SELECT src.state, count(*), coalesce(sum(max(coalesce(src.size, 0), src.consumed)), 0),"
        f" coalesce(sum(src.consumed), 0) FROM {scope.sources_from} WHERE {scope.sources_where} GROUP BY src.state",
        scope.params,
    ):
        by_state[state] = n
        file_bytes += size
        consumed_bytes += consumed
    # Problems are listed only when the counts say there are any (the usual
    # answer, "none", then costs no second pass over the sources).
    problems = []
    if any(n for state, n in by_state.items() if state not in ("ok", "pending")):
        problems = [
            wire.SourceProblem(path=path, state=state, error=None if error is None else wire.clip(error))
            for path, state, error in conn.execute(
                f"SELECT src.path, src.state, src.error FROM {scope.sources_from} WHERE {scope.sources_where}"
                " AND src.state NOT IN ('ok', 'pending') ORDER BY src.path LIMIT ?",
                (*scope.params, PROBLEMS_SHOWN),
            )
        ]
    status = wire.SourcesStatus(total=sum(by_state.values()), by_state=by_state, problems=problems)
    return status, file_bytes, consumed_bytes


def _diagnostics(conn: sqlite3.Connection, scope: _Scope, limit: int) -> wire.DiagnosticsStatus:
    """Diagnostics of the sources in scope, by code, and the `limit` most recent."""
    # All sources in the whole index: no restriction to evaluate.
    in_scope = (
        "1"
        if scope.whole
        else f"d.source_id IN (SELECT src.source_id FROM {scope.sources_from} WHERE {scope.sources_where})"
    )
    by_code = {
        code: wire.DiagnosticCount(count=n, repaired=rep or 0)
        for code, n, rep in conn.execute(
            f"SELECT d.code, count(*), sum(d.repaired) FROM diagnostics d WHERE {in_scope} GROUP BY d.code ORDER BY d.code",
            scope.params,
        )
    }
    recent = [
        wire.DiagnosticItem(path=path, byte_offset=off, code=code, message=wire.clip(msg), repaired=bool(rep))
        for path, off, code, msg, rep in conn.execute(
            "SELECT src.path, d.byte_offset, d.code, d.message, d.repaired FROM diagnostics d"
            f" JOIN sources src ON src.source_id = d.source_id WHERE {in_scope}"
            " ORDER BY d.rowid DESC LIMIT ?",
            (*scope.params, limit),
        )
    ]
    return wire.DiagnosticsStatus(by_code=by_code, recent=recent)


def _redactions(conn: sqlite3.Connection, where: str, params: list[object]) -> wire.RedactionStatus:
    """Counts by kind, never values, over the sessions `s` that `where` selects."""
    rules = index_rules(conn)
    by_kind = redaction_totals(conn, where, params)
    return wire.RedactionStatus(
        total=sum(by_kind.values()),
        by_kind=by_kind,
        rules=rules.fingerprint,
        extra_patterns=[name for name, _ in rules.extra],
        allowlisted=len(rules.allow),
    )
