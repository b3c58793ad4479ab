"""The index file's health, as the ingest service sees it: is the file it
writes still the index readers open, and is it corrupt?

A stat per loop turn catches an index removed or replaced while piwatchd
runs; a reader's report of damage is checked with `PRAGMA quick_check` on a
fresh connection (at most every `VERIFY_MIN_SECONDS`). Either raises
`IndexLost`, and the service discards the file and rebuilds it from the
sources. `transient` and `corrupt` classify the errors a commit can raise.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

from ..model.events import excerpt
from ..store.indexfile import file_identity

__all__ = ["VERIFY_MIN_SECONDS", "IndexLost", "IndexWatch", "corrupt", "lost", "transient"]

log = logging.getLogger("piwatchd.service")

# A reader's report of a damaged index is checked at most this often.
VERIFY_MIN_SECONDS = 10.0


class IndexLost(Exception):
    """The index file is gone, replaced or corrupt; the loop rebuilds it."""


def transient(exc: BaseException) -> bool:
    """Not the file's fault and likely to pass: retry with backoff."""
    return isinstance(exc, (sqlite3.OperationalError, OSError))


def corrupt(exc: BaseException) -> bool:
    """SQLite says the index file itself is damaged: rebuild it."""
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)


def lost(exc: BaseException) -> IndexLost:
    """The rebuild order for a corrupt index, naming what SQLite said."""
    return IndexLost(f"the index is corrupt ({excerpt(str(exc))}); rebuilding it")


class IndexWatch:
    """The identity of the index file this thread writes, and the reader-reported checks."""

    def __init__(self, db_path: str, clock: Callable[[], float]) -> None:
        self.db_path = db_path
        self._clock = clock
        self._id: tuple[int, int] | None = None
        self._last_verify = -VERIFY_MIN_SECONDS

    def remember(self) -> None:
        """The index was (re)opened: this file is the one to keep writing."""
        self._id = file_identity(self.db_path)

    def check(self) -> None:
        """A stat per turn: the file we write must still be the index readers open."""
        if file_identity(self.db_path) != self._id:
            raise IndexLost("the index file was removed or replaced while piwatchd ran; rebuilding it")

    def verify(self, reason: str) -> None:
        """A reader reported damage: check the file as a fresh connection sees
        it (this thread's page cache may still hold the good pages)."""
        now = self._clock()
        if now - self._last_verify < VERIFY_MIN_SECONDS:
            return  # many failing requests ask at once; one check answers them all
        self._last_verify = now
        try:
            conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=5)
            try:
                verdict = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
            finally:
                conn.close()
        except sqlite3.OperationalError:
            return  # busy or unavailable, not damage
        except sqlite3.DatabaseError as exc:
            verdict = str(exc)
        if verdict != "ok":
            raise IndexLost(
                f"the index is corrupt ({excerpt(verdict)}; found by a reader: {excerpt(reason)}); rebuilding it"
            )
        log.info("index checked after a reader's error (%s): ok", reason)
