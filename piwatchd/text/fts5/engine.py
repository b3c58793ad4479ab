"""The FTS5 engine: the text lives in SQLite's `fragments` rows and enters
`fragments_fts` in the same transaction; deletes follow by trigger and
filters are SQL joins, so it needs none of Tantivy's after-commit feed and a
crash leaves nothing to repair. Idle time merges FTS segments.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from ..engine import RankedPage, Written
from ..hits import Chooser
from ..query import SearchRequest
from . import search

__all__ = ["ENGINE", "Fts5Engine", "Fts5Writer"]

_SCHEMA = """
-- External content: snippets read the text from `fragments`; head and tail
-- of an oversized fragment are separate columns, so no phrase spans the gap.
-- Rows enter the FTS index from IndexWriter in the same transaction, not by
-- an insert trigger: passing large text through a trigger doubled ingest time.
CREATE VIRTUAL TABLE fragments_fts USING fts5(
    body, tail, meta,
    content='fragments', content_rowid='frag_rowid',
    tokenize='unicode61 remove_diacritics 2'
);
-- Meta words (tool name, error, custom type) count less than the text itself.
INSERT INTO fragments_fts(fragments_fts, rank) VALUES ('rank', 'bm25(1.0, 1.0, 0.25)');
CREATE TRIGGER fragments_ad AFTER DELETE ON fragments BEGIN
    INSERT INTO fragments_fts(fragments_fts, rowid, body, tail, meta)
    VALUES ('delete', old.frag_rowid, old.body, old.tail, old.meta);
END;
"""

# Idle merging starts once this many fragments entered the FTS index since
# the last complete merge, and merges this many pages per step.
MERGE_AFTER_FRAGMENTS = 50_000
MERGE_STEP_PAGES = 256


class Fts5Writer:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._unmerged = 0

    def add(self, written: Written) -> None:
        # Rows enter the FTS index here, in their transaction, not by an insert
        # trigger: passing large text through a trigger doubled ingest time.
        # Deletes follow by trigger, so a step's rows must enter before the next
        # step can replace them.
        cur = self.conn.execute(
            "INSERT INTO fragments_fts(rowid, body, tail, meta)"
            " SELECT frag_rowid, body, tail, meta FROM fragments WHERE frag_rowid > ?",
            (written.fragments_after,),
        )
        self._unmerged += max(cur.rowcount, 0)

    def maintain(self) -> bool:
        """One bounded step of segment merging. Ingest runs with a lazy
        automerge (fewer, larger merges: a faster cold index); once the
        backlog is gone, idle time merges the segments so queries touch few
        of them."""
        if self._unmerged < MERGE_AFTER_FRAGMENTS:
            return False
        before = self.conn.total_changes
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.execute("INSERT INTO fragments_fts(fragments_fts, rank) VALUES ('merge', ?)", (MERGE_STEP_PAGES,))
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        if self.conn.total_changes - before < 2:  # FTS5's own "nothing left to merge" signal
            self._unmerged = 0
            return False
        return True


class Fts5Engine:
    name = "fts5"
    keeps_text = True
    # Not `counts_words`: bm25 scores every match, one common word costs
    # hundreds of ms on 1 GB.
    schema_sql = _SCHEMA
    tables = ("fragments_fts",)

    def tune(self, conn: sqlite3.Connection) -> None:
        # FTS5 segment merges re-read recent pages; a larger cache keeps them in memory.
        conn.execute("PRAGMA cache_size = -65536")
        # Checkpoint the WAL every ~80 MB instead of every 4 MB: FTS segment pages
        # rewritten by consecutive batches are then copied back once, not each time.
        conn.execute("PRAGMA wal_autocheckpoint = 20000")
        # Merge FTS segments 16 at a time while ingesting (the default 4 redoes
        # merges often: ~25% of a cold index); the daemon merges fully when idle.
        conn.execute("INSERT INTO fragments_fts(fragments_fts, rank) VALUES ('automerge', 16)")

    def open_writer(self, conn: sqlite3.Connection) -> Fts5Writer:
        return Fts5Writer(conn)

    def ranked_page(
        self,
        conn: sqlite3.Connection,
        request: SearchRequest,
        need: int,
        deadline: float | None,
        chooser: Chooser | None = None,
    ) -> RankedPage:
        return RankedPage(*search.ranked_page(conn, request, need, deadline, chooser))

    def side_paths(self, db_path: Path) -> Sequence[Path]:
        return ()  # everything is inside the SQLite file


ENGINE = Fts5Engine()
