"""`piwatch index --once`: reconcile an index file with the session files, without a daemon.

Queries never run from here: every search/read/trace/status goes through
`piwatchd.api.Api`, over the socket or in-process via
`piwatch.transports.LocalTransport`, with the same authorization.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import load_settings
from .index.schema import open_writer
from .index.writer import IndexWriter
from .indexer import reconcile
from .indexfile import prepare_index_path
from .source.discovery import discover_roots

__all__ = ["index_once", "resolve_db"]


def resolve_db(db: str | os.PathLike | None) -> Path:
    return Path(db).expanduser() if db else load_settings().db_path


def index_once(
    db: str | os.PathLike | None = None,
    sessions: list[str] | None = None,
    progress: Callable | None = None,
) -> dict[str, Any]:
    """Reconcile the index with the session files once and return a summary."""
    settings = load_settings()
    if sessions:
        roots = [os.path.abspath(os.path.expanduser(s)) for s in sessions]
    else:
        roots = [r.path for r in discover_roots(extra=settings.extra_session_dirs)]
    db_path = prepare_index_path(resolve_db(db))
    conn = open_writer(db_path, engine=settings.engine)
    writer = IndexWriter(conn)
    try:
        writer.repay_text_debt()
        summary = reconcile(writer, roots, progress=progress)
        conn.execute("PRAGMA optimize")
    finally:
        writer.close()  # commits the text index
    return {"db": str(db_path), "roots": roots, **summary.as_dict()}
