"""The text engine: one object per engine, the only code that knows which
engine built an index (the contract calls engines providers).

httpx's transport is the model: a small protocol, two implementations
(`piwatchd.text.tantivy.engine`, the default, and `piwatchd.text.fts5.engine`),
chosen here, in one place (`engine_named`, `engine_of`). The read model, the
writer, the service, status and the api ask the engine object:

- schema: the DDL it adds to the read model (`schema_sql`, `tables`), and
  whether SQLite's `fragments` rows keep the text (`keeps_text`);
- writing: `open_writer` gives the writer's half (`TextWriter`: `add`, and
  idle `maintain`);
- search: `ranked_page`, the ranked page of hits with raw marked snippets;
- size: `side_paths` (what a discarded index leaves; `index_bytes` sums them).

What only one engine has is a capability of that engine, asked for with
`isinstance` where it is used, never a no-op in the other: Tantivy's writer is
an `AfterCommitFeed` (its own index fed after COMMIT: deletes, the RAM
overlay's publishing, the deferred disk commit, the repair after a crash), and
the engine `Analyzes` (a follow's words), `OwesText` (debt it can search
anyway) and `counts_words`; FTS5 is `Tuned` (its write pragmas).

`tests/test_engines.py` holds both engines to the same results.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..model.rows import EventRow
    from .hits import Chooser, HitRow
    from .query import SearchRequest

__all__ = [
    "TextEngine",
    "TextWriter",
    "Written",
    "AfterCommitFeed",
    "Tuned",
    "Analyzes",
    "OwesText",
    "index_bytes",
    "RankedPage",
    "Repaid",
    "RepayProgress",
    "ENGINE_NAMES",
    "DEFAULT_ENGINE",
    "engine_named",
    "engine_of",
    "index_engine",
    "all_engines",
]


# (sessions re-fed so far, sessions owed): told after each session a repay re-feeds.
RepayProgress = Callable[[int, int], None]


class RankedPage(NamedTuple):
    """A search page as an engine ranks it: the rows (offset applied, one
    lookahead row at most), the raw marked snippet of each chosen fragment,
    keyed by fragment rowid (\\x02/\\x03 around matches), and the repairs
    made ("did you mean": word, replacement)."""

    rows: list[HitRow]
    snippets: dict[int, str]
    repairs: list[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Repaid:
    """What one repay did: sessions re-fed, sessions left owed, sessions quarantined."""

    done: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)


class Written(NamedTuple):
    """One step of a session's write, inside its SQLite transaction: events
    (rowid, its row) whose fragments were just inserted (rowids above
    `fragments_after`), and the event rowids whose old fragments they replace."""

    session_id: str
    events: list[tuple[int, EventRow]]
    replaced: list[int]
    fragments_after: int


class TextWriter(Protocol):
    """What every engine's half of the one index writer does (one write
    connection, one thread). Deleting and committing are SQLite's: an engine
    that keeps its own index does them after COMMIT (`AfterCommitFeed`)."""

    def add(self, written: Written) -> None:
        """Index what was just written (inside the transaction)."""
        ...

    def maintain(self) -> bool:
        """One bounded step of idle maintenance; True while there is more to do."""
        ...


@runtime_checkable
class AfterCommitFeed(Protocol):
    """A writer whose index lives outside SQLite (Tantivy): it queues each
    transaction's changes, applies them after COMMIT, makes them searchable
    (RAM overlay, deferred disk commit) and repairs what a crash left unfed."""

    def delete_session(self, session_id: str) -> None: ...

    def states_settled(self, session_id: str, states: dict[str, tuple[str, str]], changed: list[str]) -> None:
        """The session's (branch, selection) by entry id after this transaction
        (filter values of its new events), and the earlier events whose state changed."""
        ...

    def ended(self, *, committed: bool) -> None:
        """The transaction committed or rolled back (runs after it ended)."""
        ...

    def flush(self, *, idle: bool) -> bool:
        """Make the text searchable when idle or due; True when something was committed."""
        ...

    def due(self) -> float | None:
        """Seconds until `maintain` has deferred work due (the ingest thread
        wakes for it); None when nothing is deferred."""
        ...

    def repay(self, *, suspect: bool = False, progress: RepayProgress | None = None) -> Repaid:
        """Re-feed whatever the text index may lag after a crash (the repair;
        see `piwatchd.text.tantivy.feed.TextFeed.repay`); `progress(done, total)`
        after each session."""
        ...

    def close(self) -> None:
        """Commit what is queued and release the index."""
        ...


class TextEngine(Protocol):
    """What every engine is: a schema, a writer, a ranked page, a size."""

    name: str
    # SQLite's `fragments` rows keep the text (snippets and previews can read
    # it there); otherwise they hold NULL and the text is re-projected from source.
    keeps_text: bool
    # Extra DDL in the read model's schema script (after the common tables),
    # and the tables it creates (dropped when the index is rebuilt).
    schema_sql: str
    tables: tuple[str, ...]

    def open_writer(self, conn: sqlite3.Connection) -> TextWriter: ...

    def ranked_page(
        self,
        conn: sqlite3.Connection,
        request: SearchRequest,
        need: int,
        deadline: float | None,
        chooser: Chooser | None = None,
    ) -> RankedPage:
        """The first `need` events' rows (offset applied, in tier order where
        the engine has tiers), snippets for the rows `chooser` picks (default:
        the first `limit`), and the repairs made."""
        ...

    def side_paths(self, db_path: Path) -> Sequence[Path]:
        """Files or directories beside the SQLite file that belong to it (its size: `index_bytes`)."""
        ...


# Capabilities only some engines have, each asked for where it is used.


@runtime_checkable
class Tuned(Protocol):
    def tune(self, conn: sqlite3.Connection) -> None:
        """Pragmas for the write connection."""
        ...


@runtime_checkable
class Analyzes(Protocol):
    def words(self, conn: sqlite3.Connection, text: str) -> list[str]:
        """`text` as the index's words (what the exact tier looks up), for a
        follow's cheap can-it-match check."""
        ...


@runtime_checkable
class DocForms(Protocol):
    # A module-level function (it is sent to the ingest workers): a
    # document's derived words, computed by the ingest pipeline.
    doc_forms: Callable[[Iterable[str]], str]


@runtime_checkable
class OwesText(Protocol):
    def searchable_owed(self, conn: sqlite3.Connection) -> frozenset[str]:
        """Sessions in `text_debt` (attempts 0) whose text this process can
        search anyway (changes not yet durable in the engine's own index)."""
        ...


def index_bytes(engine: TextEngine, db_path: Path) -> int:
    """Bytes the engine keeps beside the SQLite file: the files of its side
    paths. An engine writes and deletes files while we list: one gone before
    its stat counts 0."""
    total = 0
    for side in engine.side_paths(db_path):
        try:
            entries = list(os.scandir(side)) if side.is_dir() else [side]
        except OSError:  # not there yet, or being rebuilt
            continue
        for entry in entries:
            try:
                if isinstance(entry, Path):
                    total += entry.stat().st_size
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total


# The one registry: engine name -> module with an `ENGINE`. Imported on first
# use, so naming engines (config validation) does not load Tantivy.
_MODULES = {"tantivy": "piwatchd.text.tantivy.engine", "fts5": "piwatchd.text.fts5.engine"}
ENGINE_NAMES = tuple(_MODULES)
DEFAULT_ENGINE = "tantivy"


@cache
def engine_named(name: str) -> TextEngine:
    if name not in _MODULES:
        raise ValueError(f"unknown text engine {name!r}: use one of {', '.join(ENGINE_NAMES)}")
    engine: TextEngine = importlib.import_module(_MODULES[name]).ENGINE
    return engine


def all_engines() -> list[TextEngine]:
    return [engine_named(name) for name in ENGINE_NAMES]


def index_engine(conn: sqlite3.Connection) -> str | None:
    """The name of the engine that built this index (None for an empty or foreign file)."""
    try:
        row = conn.execute("SELECT value FROM index_meta WHERE key='engine'").fetchone()
    except sqlite3.OperationalError:
        return None
    return row[0] if row else None


def engine_of(conn: sqlite3.Connection) -> TextEngine:
    """The engine that built the index on this connection."""
    return engine_named(index_engine(conn) or DEFAULT_ENGINE)
