"""The extractor registry an index was built with (`piwatchd.model.extractors`).

Like the redaction rules (`store.redaction`), the registry in force is
recorded in the index (`index_meta`): the writer, a re-feed, `read` and a
snippet all project a custom entry by the registry that indexed it. Unlike a
change of rules, a change of registry rebuilds nothing else: `adopt` finds the
sessions holding an entry of a changed type (the events' recorded
`customType`) and forgets their checkpoints in the same transaction that
records the new registry, so the next scan re-reads those files and only
those, even after a crash in between.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import TYPE_CHECKING

import orjson

from ..model.events import FragmentKind
from ..model.extractors import NO_EXTRACTORS, Registry, changed_types, registry_from_config

if TYPE_CHECKING:
    from .writer import IndexWriter

__all__ = ["adopt", "index_extractors"]

log = logging.getLogger(__name__)

_KEY = "extractors"
_CACHE: dict[str, Registry] = {}


def _recorded(conn: sqlite3.Connection) -> str | None:
    try:
        row = conn.execute("SELECT value FROM index_meta WHERE key=?", (_KEY,)).fetchone()
    except sqlite3.OperationalError:  # no such table: an index from before the registry
        return None
    return row[0] if row else None


def index_extractors(conn: sqlite3.Connection) -> Registry:
    """The registry this index was built with (none when none is recorded)."""
    value = _recorded(conn)
    if value is None:
        return NO_EXTRACTORS
    registry = _CACHE.get(value)
    if registry is None:
        doc = orjson.loads(value)
        tables = [
            {"custom_type": t, "fields": x["fields"], "kind": FragmentKind(x["kind"]).value} for t, x in doc.items()
        ]
        registry = _CACHE[value] = registry_from_config(tables)
    return registry


def adopt(writer: IndexWriter, registry: Registry) -> list[str]:
    """Record `registry` as the index's and queue the sessions it projects
    differently for a re-read; their files' paths (none when nothing changed)."""
    value = _recorded(writer.conn)
    changed = changed_types(orjson.loads(value) if value else {}, registry)
    if not changed:
        return []
    with writer.transaction():
        rows = writer.conn.execute(
            "SELECT DISTINCT src.source_id, src.path FROM events e"
            " JOIN sessions s ON s.session_key = e.session_key JOIN sources src ON src.source_id = s.source_id"
            " WHERE e.type = 'custom' AND json_extract(e.meta, '$.customType') IN (SELECT value FROM json_each(?))",
            (orjson.dumps(sorted(changed)).decode(),),
        ).fetchall()
        for source_id, _path in rows:
            writer.mark_source(source_id, "pending", "its custom types' registry changed", forget_checkpoint=True)
        writer.conn.execute(
            "INSERT OR REPLACE INTO index_meta(key, value) VALUES (?, ?)", (_KEY, orjson.dumps(registry.doc()).decode())
        )
    log.info("custom types registered or changed (%s): %d sessions to re-read", ", ".join(sorted(changed)), len(rows))
    return [path for _, path in rows]
