"""How SQLite is handed ids.

A list of ids: a JSON array as one parameter, read with `json_each`
(`f"... id {IN_IDS}", (id_list(ids),)`): one statement per list whatever its
length, no chunking around SQLite's limit on bound variables, and no SQL text
that grows with the list.

A session: the per-event tables key it by `sessions.session_key` (an integer,
`piwatchd.store.schema`), never by the public id. Statements take the public id
and look the key up once (`KEY`, a constant subquery SQLite evaluates once and
uses as an index key); writers with many rows resolve it once (`session_key`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

import orjson

__all__ = ["IN_IDS", "KEY", "id_list", "session_key"]

IN_IDS = "IN (SELECT value FROM json_each(?))"

# The integer key of the session whose public id is the parameter (NULL when not indexed).
KEY = "(SELECT session_key FROM sessions WHERE session_id = ?)"


def id_list(ids: Iterable[str | int]) -> str:
    """The ids as the JSON array `IN_IDS` reads."""
    return orjson.dumps(list(ids)).decode()


def session_key(conn: sqlite3.Connection, session_id: str) -> int | None:
    """The integer key of an indexed session (None: not indexed)."""
    row = conn.execute("SELECT session_key FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return None if row is None else int(row[0])
