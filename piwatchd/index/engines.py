"""The text-index seam (the contract calls search engines providers): what
the one index writer asks of a text engine. Search is the other half
(`piwatchd.index.search.ENGINES`).

Two providers: Tantivy (`piwatchd.index.textfeed.TextFeed`, the default)
keeps the text in its own index, fed after each SQLite COMMIT; FTS5
(`Fts5Store`) keeps it in SQLite and indexes it inside the transaction, so
most of its hooks have nothing to do. `tests/test_engines.py` holds both to
the same results.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Protocol

from ..model import Event, Fragment
from .schema import DEFAULT_ENGINE, index_engine

__all__ = ["TextStore", "Fts5Store", "open_text_store"]


@dataclass(frozen=True, slots=True)
class Repaid:
    """What one repay did: sessions re-fed, sessions left owed, sessions quarantined."""

    done: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)


class TextStore(Protocol):
    name: str

    def fragment_row(self, event_rowid: int, f: Fragment) -> tuple:
        """The `fragments` row of a fragment (with its text, or without)."""
        ...

    def fragments_inserted(self, before: int) -> None:
        """Rows with frag_rowid > `before` were just inserted (same transaction)."""
        ...

    def delete_session(self, session_id: str) -> None: ...

    def add_events(self, session_id: str, events: list[tuple[int, Event]], replaced: list[int]) -> None: ...

    def states_changed(self, session_id: str, entry_ids: list[str]) -> None:
        """Branch/selection state of these earlier events changed (filter values)."""
        ...

    def mark(self) -> int: ...

    def rollback_to(self, mark: int) -> None: ...

    def rolled_back(self) -> None: ...

    def committed(self) -> None: ...

    def flush(self, *, idle: bool) -> bool:
        """Make the text searchable when idle or due; True when something was committed."""
        ...

    def repay(self, *, suspect: bool = False) -> Repaid:
        """Re-feed whatever the text index may lag after a crash (see TextFeed.repay)."""
        ...

    def close(self) -> None: ...


def _row(event_rowid: int, f: Fragment, with_text: bool) -> tuple:
    text = (f.text, f.tail, f.meta) if with_text else (None, None, None)
    return (event_rowid, f.fragment_id, f.kind.value, f.tool_name, f.call_id, *text, f.full_length)


class Fts5Store:
    """FTS5: the text lives in `fragments` and enters `fragments_fts` in the
    same transaction; deletes follow by trigger and filters are SQL joins."""

    name = "fts5"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def fragment_row(self, event_rowid: int, f: Fragment) -> tuple:
        return _row(event_rowid, f, True)

    def fragments_inserted(self, before: int) -> None:
        # Rows enter the FTS index here, not by an insert trigger: passing
        # large text through a trigger doubled ingest time.
        self.conn.execute(
            "INSERT INTO fragments_fts(rowid, body, tail, meta)"
            " SELECT frag_rowid, body, tail, meta FROM fragments WHERE frag_rowid > ?",
            (before,),
        )

    def delete_session(self, session_id: str) -> None:
        pass

    def add_events(self, session_id: str, events: list[tuple[int, Event]], replaced: list[int]) -> None:
        pass

    def states_changed(self, session_id: str, entry_ids: list[str]) -> None:
        pass

    def mark(self) -> int:
        return 0

    def rollback_to(self, mark: int) -> None:
        pass

    def rolled_back(self) -> None:
        pass

    def committed(self) -> None:
        pass

    def flush(self, *, idle: bool) -> bool:
        return False

    def repay(self, *, suspect: bool = False) -> Repaid:
        return Repaid()

    def close(self) -> None:
        pass


def fragment_row_without_text(event_rowid: int, f: Fragment) -> tuple:
    return _row(event_rowid, f, False)


def open_text_store(conn: sqlite3.Connection) -> TextStore:
    """The store of the engine that built this index."""
    if (index_engine(conn) or DEFAULT_ENGINE) == "fts5":
        return Fts5Store(conn)
    from .textfeed import TextFeed  # imports tantivy: only when it is the engine

    return TextFeed(conn)
