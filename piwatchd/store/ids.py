"""One way to hand SQLite a list of ids: a JSON array as one parameter, read
with `json_each` (`f"... id {IN_IDS}", (id_list(ids),)`).

One statement per list whatever its length: no chunking around SQLite's
limit on bound variables, and no SQL text that grows with the list.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

__all__ = ["IN_IDS", "id_list"]

IN_IDS = "IN (SELECT value FROM json_each(?))"


def id_list(ids: Iterable[str | int]) -> str:
    """The ids as the JSON array `IN_IDS` reads."""
    return orjson.dumps(list(ids)).decode()
