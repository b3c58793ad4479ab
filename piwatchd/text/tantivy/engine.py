"""The Tantivy engine (the default): the text lives in its own index beside
the SQLite file (`<db>.tantivy/`), fed after each SQLite COMMIT
(`piwatchd.text.tantivy.feed`); SQLite's `fragments` rows keep no text, and
`text_debt` records what a crash may have left unfed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from ..engine import RankedPage
from ..hits import Chooser
from ..query import SearchRequest
from . import search
from .feed import TextFeed
from .forms import doc_forms
from .index import text_dir
from .readers import searchable_owed, text_reader

__all__ = ["ENGINE", "TantivyEngine"]


class TantivyEngine:
    name = "tantivy"
    keeps_text = False
    counts_words = True  # its ranking does not score every match of a common word
    schema_sql = ""  # `text_debt` is in the common schema: freshness reads it whichever engine
    tables: tuple[str, ...] = ()
    doc_forms = staticmethod(doc_forms)  # the `forms` field's values, computed by the ingest pipeline

    def open_writer(self, conn: sqlite3.Connection) -> TextFeed:
        return TextFeed(conn)

    def words(self, conn: sqlite3.Connection, text: str) -> list[str]:
        return text_reader(conn).tokens(text)  # the analyzer that indexed the text and analyzes queries

    def ranked_page(
        self,
        conn: sqlite3.Connection,
        request: SearchRequest,
        need: int,
        deadline: float | None,
        chooser: Chooser | None = None,
    ) -> RankedPage:
        return RankedPage(*search.ranked_page(conn, request, need, deadline, chooser))

    def searchable_owed(self, conn: sqlite3.Connection) -> frozenset[str]:
        return searchable_owed(conn)

    def side_paths(self, db_path: Path) -> Sequence[Path]:
        return (text_dir(db_path),)


ENGINE = TantivyEngine()
