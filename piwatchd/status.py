"""What `piwatch status` shows, read from the index file alone (read-only).

Until the daemon has a socket, the service's own progress comes from the
`service_state` row it keeps current; everything else is derived from the
index tables and a stat of each known source (for the unread backlog).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import orjson

from .index.schema import open_reader

__all__ = ["collect_status", "read_service_state", "STATES"]

STATES = ("ok", "pending", "stale", "unsupported", "unreadable", "duplicate")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_service_state(db_path: str | os.PathLike) -> dict[str, Any] | None:
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
    return orjson.loads(row[0]) if row else None


def collect_status(db_path: str | os.PathLike, *, diagnostics_limit: int = 20) -> dict[str, Any]:
    db = Path(db_path)
    conn = open_reader(db)
    try:
        by_state = dict.fromkeys(STATES, 0)
        problems = []
        file_bytes = consumed_bytes = 0
        for path, state, error, consumed, _diag in conn.execute(
            "SELECT path, state, error, consumed, diagnostics FROM sources ORDER BY path"
        ):
            by_state[state] = by_state.get(state, 0) + 1
            if state not in ("ok", "pending"):
                problems.append({"path": path, "state": state, "error": error})
            try:
                size = os.stat(path).st_size
            except OSError:
                size = consumed
            file_bytes += size
            consumed_bytes += consumed
        sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
        events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        fragments = conn.execute("SELECT count(*) FROM fragments").fetchone()[0]
        diag_by_code = {
            code: {"count": n, "repaired": rep}
            for code, n, rep in conn.execute(
                "SELECT code, count(*), sum(repaired) FROM diagnostics GROUP BY code ORDER BY code"
            )
        }
        recent = [
            {"path": path, "byteOffset": off, "code": code, "message": msg, "repaired": bool(rep)}
            for path, off, code, msg, rep in conn.execute(
                "SELECT s.path, d.byte_offset, d.code, d.message, d.repaired FROM diagnostics d"
                " JOIN sources s ON s.source_id = d.source_id ORDER BY d.rowid DESC LIMIT ?",
                (diagnostics_limit,),
            )
        ]
        row = conn.execute("SELECT value, updated_ms FROM service_state WHERE key='service'").fetchone()
    finally:
        conn.close()
    service = None
    if row is not None:
        service = orjson.loads(row[0])
        alive = service.get("phase") != "stopped" and _pid_alive(int(service.get("pid", 0)))
        service["running"] = alive
        service["updated_age_s"] = round(time.time() - row[1] / 1000, 1)
    size = sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())
    return {
        "db": str(db),
        "indexBytes": size,
        "sources": {"total": sum(by_state.values()), "byState": by_state, "problems": problems},
        "sessions": sessions,
        "events": events,
        "fragments": fragments,
        "bytes": {"files": file_bytes, "ingested": consumed_bytes, "backlog": max(0, file_bytes - consumed_bytes)},
        "diagnostics": {"byCode": diag_by_code, "recent": recent},
        "service": service,
    }
