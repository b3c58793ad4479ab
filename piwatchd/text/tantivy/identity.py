"""The text index must belong to its read model: the one opened beside an
index file is adopted only when its layout and the index's build match;
any other (another build's, an older layout's, an unreadable one, none) is
replaced by an empty index, and every indexed session is owed to it."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

from .index import TEXT_LAYOUT, TantivyText, remove_text_dir

__all__ = ["adopt_text"]

log = logging.getLogger("piwatchd.text")


def adopt_text(conn: sqlite3.Connection, path: Path) -> TantivyText:
    """Open the text index that belongs to this read model. One from
    another build or layout, an unreadable one, or none at all is
    replaced by an empty index, and every indexed session is owed to it."""
    marker = path / "piwatch-layout"
    want = f"{TEXT_LAYOUT} {_model_id(conn)}"
    have = marker.read_text().strip() if marker.exists() else None
    if have == want:
        try:
            return TantivyText(path, writable=True)
        except (OSError, ValueError) as exc:  # a corrupt or foreign directory
            log.warning("text index %s cannot be opened (%s); rebuilding it", path, exc)
    elif have is not None and have.split(" ")[0] != str(TEXT_LAYOUT):
        log.warning(
            "text index %s has layout %s, this piwatch writes %s: re-feeding every session into it",
            path,
            have.split(" ")[0],
            TEXT_LAYOUT,
        )
    elif have is not None:
        log.warning("text index %s belongs to another index build; rebuilding it", path)
    remove_text_dir(path)
    text = TantivyText(path, writable=True)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT OR IGNORE INTO text_debt(session_id) SELECT session_id FROM sessions")
    conn.execute("COMMIT")
    marker.write_text(want + "\n")
    return text


def _model_id(conn: sqlite3.Connection) -> str:
    row = conn.execute("SELECT value FROM index_meta WHERE key='model_id'").fetchone()
    if row:
        return str(row[0])
    model_id = f"{time.time_ns():x}"
    conn.execute("INSERT INTO index_meta(key, value) VALUES ('model_id', ?)", (model_id,))
    return model_id
