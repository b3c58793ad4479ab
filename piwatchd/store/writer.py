"""The index writer: the rows of sources, sessions and events, and the text
engine's half of each write (`piwatchd.text.engine.TextWriter`).

One `IndexWriter` wraps the single write connection and is used by one
thread. Callers group work in `transaction()`: the rows a read produced and
the checkpoint that proves them are committed together, so a crash can never
leave rows without their checkpoint or the reverse.
"""

from __future__ import annotations

import os
import posixpath
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson

from ..model.events import Diagnostic, Header, excerpt
from ..model.rows import EventRow, FragRow
from ..source.parser import ParserState
from ..source.tailer import Checkpoint
from ..text.engine import AfterCommitFeed, DocForms, Repaid, RepayProgress, TextWriter, Written, engine_of
from .catalog import canonical_ref
from .ids import IN_IDS, id_list, session_key
from .redaction import add_counts

__all__ = ["IndexWriter", "SourceRecord", "normalize_cwd", "canonical_cwd", "MAX_DIAGNOSTICS_PER_SOURCE"]

MAX_DIAGNOSTICS_PER_SOURCE = 200


def normalize_cwd(cwd: str | None) -> str | None:
    """Normalize a recorded cwd for subtree comparison (no filesystem access)."""
    if not cwd:
        return None
    norm = posixpath.normpath(cwd.replace("\\", "/"))
    return norm if norm != "//" else "/"


def canonical_cwd(cwd: str | None) -> str | None:
    """The recorded cwd with symlinks resolved, when it exists on this machine.

    Authorization compares canonical paths so a symlink cannot smuggle another
    tree under an authorized root, and a symlinked root still matches.
    """
    norm = normalize_cwd(cwd)
    if norm is None or not norm.startswith("/"):
        return norm
    try:
        return os.path.realpath(norm)
    except ValueError:  # a NUL in the recorded cwd: no directory can match it
        return None


@dataclass(frozen=True, slots=True)
class SourceRecord:
    source_id: int
    path: str
    checkpoint: Checkpoint | None
    parser_state: ParserState | None
    session_id: str | None
    state: str
    error: str | None


def _fragment_row(event_rowid: int, f: FragRow, with_text: bool) -> tuple[Any, ...]:
    text = (f.text, f.tail, f.meta) if with_text else (None, None, None)
    return (event_rowid, f.fragment_id, f.kind, f.tool_name, f.call_id, *text, f.full_length)


def _now_ms() -> int:
    return int(time.time() * 1000)


# An event row's leading values are the `events` columns after session_key (entry_id .. meta).
_EVENT_COLUMNS = 14

# Planner statistics: rows read per index by ANALYZE, and the index size below
# which they are not refreshed (an empty index's plans are the defaults).
STATS_ROWS = 400
STATS_MIN_EVENTS = 500


def analyzed_events(conn: sqlite3.Connection) -> int:
    """The events table's row count when its statistics were taken (0: never)."""
    try:
        row = conn.execute("SELECT stat FROM sqlite_stat1 WHERE tbl = 'events' LIMIT 1").fetchone()
    except sqlite3.OperationalError:  # no sqlite_stat1 until the first ANALYZE
        return 0
    return int(row[0].split()[0]) if row else 0


class IndexWriter:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        # The engine that built this index, and its half of every write.
        self.engine = engine_of(conn)
        self.text: TextWriter = self.engine.open_writer(conn)
        # An engine whose index lives outside SQLite deletes, commits and
        # repairs after COMMIT; another's text commits with the rows.
        self.feed = self.text if isinstance(self.text, AfterCommitFeed) else None
        # The engine's derived words of a document, computed by the ingest pipeline (None: it has none).
        self.doc_forms = self.engine.doc_forms if isinstance(self.engine, DocForms) else None
        self._analyzed_events: int | None = None  # events when the statistics were taken

    def flush_text(self, *, idle: bool = True) -> bool:
        """Make the text searchable when idle or due; True when something was committed."""
        return self.feed.flush(idle=idle) if self.feed else False

    def maintain_text(self) -> bool:
        """One bounded step of the engine's idle maintenance; True while there is more."""
        return self.text.maintain()

    def text_due(self) -> float | None:
        """Seconds until the engine has deferred work due (None: nothing deferred)."""
        return self.feed.due() if self.feed else None

    def repay_text_debt(self, *, suspect: bool = False, progress: RepayProgress | None = None) -> Repaid:
        """Re-feed sessions the text index may lag (after a crash); nothing when the engine keeps none."""
        return self.feed.repay(suspect=suspect, progress=progress) if self.feed else Repaid()

    def close(self) -> None:
        if self.feed:
            self.feed.close()
        self.conn.close()

    def refresh_statistics(self, *, force: bool = False) -> bool:
        """Refresh SQLite's planner statistics when the index has grown past
        twice the size they were taken at (or when forced); True when refreshed.

        Statistics taken on a young, tiny index steer queries on a big one
        to full scans (a fragments lookup by event became a scan of every
        fragment), and `PRAGMA optimize` on SQLite 3.40 analyzes only what
        this connection queried. ANALYZE reading at most STATS_ROWS rows per
        index costs ~3 ms on a 1 GB index (a full one ~0.6 s)."""
        events = self.conn.execute("SELECT coalesce(max(event_rowid), 0) FROM events").fetchone()[0]
        if self._analyzed_events is None:
            self._analyzed_events = analyzed_events(self.conn)
        if not force and events < 2 * max(self._analyzed_events, STATS_MIN_EVENTS):
            return False
        self.conn.execute(f"PRAGMA analysis_limit = {STATS_ROWS}")
        self.conn.execute("ANALYZE")
        self._analyzed_events = events
        return True

    def save_service_state(self, key: str, value: str) -> None:
        """The live service's progress row (JSON), read by `status` from another process."""
        self.conn.execute(
            "INSERT INTO service_state(key, value, updated_ms) VALUES (?,?,?)"
            " ON CONFLICT(key) DO UPDATE SET value=excluded.value, updated_ms=excluded.updated_ms",
            (key, value, int(time.time() * 1000)),
        )

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic unit (never nested: each file commits on its own)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            if self.feed:
                self.feed.ended(committed=False)
            raise
        self.conn.execute("COMMIT")
        if self.feed:
            self.feed.ended(committed=True)

    # -- sources -----------------------------------------------------------

    def source(self, path: str) -> SourceRecord | None:
        row = self.conn.execute(
            "SELECT source_id, path, dev, ino, size, mtime_ns, consumed, prefix_len, prefix_hash,"
            " tail_len, tail_hash, parser_state, session_id, state, error FROM sources WHERE path = ?",
            (path,),
        ).fetchone()
        if row is None:
            return None
        checkpoint = None
        if row[2] is not None:
            checkpoint = Checkpoint(row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9], row[10])
        parser_state = ParserState.from_json(orjson.loads(row[11])) if row[11] else None
        return SourceRecord(row[0], row[1], checkpoint, parser_state, row[12], row[13], row[14])

    def known_paths(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT path FROM sources ORDER BY path")]

    def ensure_source(self, path: str) -> int:
        self.conn.execute(
            "INSERT INTO sources(path, state) VALUES (?, 'pending') ON CONFLICT(path) DO NOTHING", (path,)
        )
        return int(self.conn.execute("SELECT source_id FROM sources WHERE path = ?", (path,)).fetchone()[0])

    def save_checkpoint(
        self,
        source_id: int,
        checkpoint: Checkpoint,
        parser_state: ParserState | None,
        session_id: str | None,
        bytes_ingested: int,
    ) -> None:
        self.conn.execute(
            "UPDATE sources SET dev=?, ino=?, size=?, mtime_ns=?, consumed=?, prefix_len=?, prefix_hash=?,"
            " tail_len=?, tail_hash=?, parser_state=?, session_id=?, state='ok', error=NULL,"
            " failed_size=NULL, failed_mtime_ns=NULL,"
            " bytes_ingested = bytes_ingested + ?, last_ingest_ms=? WHERE source_id=?",
            (
                checkpoint.dev,
                checkpoint.ino,
                checkpoint.size,
                checkpoint.mtime_ns,
                checkpoint.consumed,
                checkpoint.prefix_len,
                checkpoint.prefix_hash,
                checkpoint.tail_len,
                checkpoint.tail_hash,
                orjson.dumps(parser_state.to_json()).decode() if parser_state else None,
                session_id,
                bytes_ingested,
                _now_ms(),
                source_id,
            ),
        )

    def failed_observation(self, source_id: int) -> tuple[int | None, int | None]:
        row: tuple[int | None, int | None] = self.conn.execute(
            "SELECT failed_size, failed_mtime_ns FROM sources WHERE source_id=?", (source_id,)
        ).fetchone()
        return row

    def mark_source(
        self,
        source_id: int,
        state: str,
        error: str | None,
        *,
        forget_checkpoint: bool = False,
        failed: tuple[int, int] | None = None,
    ) -> None:
        """Record a problem. The session's indexed events are left as they are
        (the last known-good index) unless the caller removes them."""
        if failed is not None:
            self.conn.execute(
                "UPDATE sources SET failed_size=?, failed_mtime_ns=? WHERE source_id=?", (*failed, source_id)
            )
        if forget_checkpoint:
            self.conn.execute(
                "UPDATE sources SET state=?, error=?, dev=NULL, ino=NULL, size=NULL, mtime_ns=NULL, consumed=0,"
                " prefix_len=0, prefix_hash=NULL, tail_len=0, tail_hash=NULL, parser_state=NULL,"
                " last_ingest_ms=? WHERE source_id=?",
                (state, error, _now_ms(), source_id),
            )
        else:
            self.conn.execute(
                "UPDATE sources SET state=?, error=?, last_ingest_ms=? WHERE source_id=?",
                (state, error, _now_ms(), source_id),
            )

    def record_diagnostics(self, source_id: int, diagnostics: Iterable[Diagnostic]) -> int:
        rows = [(source_id, d.byte_offset, d.code, d.message, int(d.repaired), _now_ms()) for d in diagnostics]
        if not rows:
            return 0
        self.conn.execute("UPDATE sources SET diagnostics = diagnostics + ? WHERE source_id=?", (len(rows), source_id))
        self.conn.executemany(
            "INSERT INTO diagnostics(source_id, byte_offset, code, message, repaired, observed_ms) VALUES (?,?,?,?,?,?)",
            rows[-MAX_DIAGNOSTICS_PER_SOURCE:],
        )
        # Keep the newest few per source so a noisy file cannot grow the index.
        self.conn.execute(
            "DELETE FROM diagnostics WHERE source_id=? AND rowid NOT IN"
            " (SELECT rowid FROM diagnostics WHERE source_id=? ORDER BY rowid DESC LIMIT ?)",
            (source_id, source_id, MAX_DIAGNOSTICS_PER_SOURCE),
        )
        return len(rows)

    def clear_diagnostics(self, source_id: int) -> None:
        self.conn.execute("DELETE FROM diagnostics WHERE source_id=?", (source_id,))
        self.conn.execute("UPDATE sources SET diagnostics = 0 WHERE source_id=?", (source_id,))

    def remove_source(self, source_id: int) -> None:
        row = self.conn.execute("SELECT session_id FROM sources WHERE source_id=?", (source_id,)).fetchone()
        if row and row[0]:
            owner = self.conn.execute("SELECT source_id FROM sessions WHERE session_id=?", (row[0],)).fetchone()
            if owner and owner[0] == source_id:
                self.delete_session(row[0])
        self.conn.execute("DELETE FROM diagnostics WHERE source_id=?", (source_id,))
        self.conn.execute("DELETE FROM sources WHERE source_id=?", (source_id,))

    # -- sessions ----------------------------------------------------------

    def session_owner(self, session_id: str) -> tuple[int, str] | None:
        """The source that owns a session id, with its path."""
        row: tuple[int, str] | None = self.conn.execute(
            "SELECT s.source_id, src.path FROM sessions s JOIN sources src ON src.source_id = s.source_id"
            " WHERE s.session_id=?",
            (session_id,),
        ).fetchone()
        return row

    def session_created(self, session_id: str) -> str | None:
        """The header timestamp of an indexed session, as recorded."""
        row = self.conn.execute("SELECT created FROM sessions WHERE session_id=?", (session_id,)).fetchone()
        return row[0] if row else None

    def delete_session(self, session_id: str) -> None:
        if self.feed:
            self.feed.delete_session(session_id)
        key = session_key(self.conn, session_id)
        if key is None:
            return
        self.conn.execute(
            "DELETE FROM fragments WHERE event_rowid IN (SELECT event_rowid FROM events WHERE session_key=?)", (key,)
        )
        self.conn.execute("DELETE FROM events WHERE session_key=?", (key,))
        self.conn.execute("DELETE FROM relationships WHERE session_key=?", (key,))
        self.conn.execute("DELETE FROM sessions WHERE session_key=?", (key,))

    def upsert_session(self, source_id: int, path: str, header: Header, agent: str = "pi") -> None:
        """The session row of a header read from `path`: its lineage references
        in their canonical spelling (`catalog.canonical_ref`), so a fork finds
        its parent however either path was written."""
        self.conn.execute(
            "INSERT INTO sessions(session_id, source_id, cwd, cwd_norm, cwd_real, created, parent_session, parent_ref,"
            " file_ref, format, version, agent) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(session_id) DO UPDATE SET"
            " source_id=excluded.source_id, cwd=excluded.cwd, cwd_norm=excluded.cwd_norm, cwd_real=excluded.cwd_real,"
            " created=excluded.created, parent_session=excluded.parent_session, parent_ref=excluded.parent_ref,"
            " file_ref=excluded.file_ref, format=excluded.format, version=excluded.version, agent=excluded.agent",
            (
                header.session_id,
                source_id,
                header.cwd,
                normalize_cwd(header.cwd),
                canonical_cwd(header.cwd),
                header.timestamp,
                header.parent_session,
                canonical_ref(header.parent_session, header.cwd),
                canonical_ref(path),
                header.format.value,
                header.version,
                agent,
            ),
        )

    def set_name(self, session_id: str, name: str) -> None:
        """The session's name (omp's title slot), already normalized and redacted."""
        self.conn.execute("UPDATE sessions SET name=? WHERE session_id=?", (name or None, session_id))

    def insert_events(self, session_id: str, events: Iterable[EventRow]) -> list[Diagnostic]:
        """Insert events; a repeated entry id replaces the earlier content but
        keeps its append position (Pi's `byId` keeps the last occurrence).

        New ids go in with one executemany (a statement per event cost ~40% of a
        cold index); repeats, rare, are applied after them one by one.
        """
        conn = self.conn
        events = list(events)
        key = session_key(conn, session_id)
        if key is None:
            raise ValueError(f"events of session {session_id!r} before its session row")
        rowids = self._event_rowids(key, [ev.entry_id for ev in events])
        fresh: list[EventRow] = []
        repeats: list[EventRow] = []
        for ev in events:
            (repeats if ev.entry_id in rowids else fresh).append(ev)
            rowids.setdefault(ev.entry_id, 0)
        conn.executemany(
            "INSERT INTO events(session_key, entry_id, ordinal, parent_id, type, role, tool_names, ts_ms,"
            " byte_offset, byte_len, fingerprint, is_error, id_recorded, context_role, meta)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(session_key, entry_id) DO NOTHING",
            [(key, *ev[:_EVENT_COLUMNS]) for ev in fresh],
        )
        rowids.update(self._event_rowids(key, [ev.entry_id for ev in fresh]))
        self._write_fragments(session_id, [(rowids[ev.entry_id], ev) for ev in fresh], [])
        diagnostics: list[Diagnostic] = []
        for ev in repeats:
            event_rowid = rowids[ev.entry_id]
            conn.execute(
                "UPDATE events SET parent_id=?, type=?, role=?, tool_names=?, ts_ms=?, byte_offset=?, byte_len=?,"
                " fingerprint=?, is_error=?, id_recorded=?, context_role=?, meta=? WHERE event_rowid=?",
                (*ev[2:_EVENT_COLUMNS], event_rowid),
            )
            conn.execute("DELETE FROM fragments WHERE event_rowid=?", (event_rowid,))
            self._write_fragments(session_id, [(event_rowid, ev)], [event_rowid])
            diagnostics.append(
                Diagnostic(
                    "duplicate-id",
                    f"entry id {excerpt(ev.entry_id)} repeated; the later line's content wins (as in Pi)",
                    ev.byte_offset,
                )
            )
        self._update_session(session_id, events, len(fresh))
        return diagnostics

    def _event_rowids(self, key: int, entry_ids: list[str]) -> dict[str, int]:
        """{entry id: event rowid} of those already indexed in the session (by its key)."""
        if not entry_ids:
            return {}
        return dict(
            self.conn.execute(
                f"SELECT entry_id, event_rowid FROM events WHERE session_key=? AND entry_id {IN_IDS}",
                (key, id_list(entry_ids)),
            ).fetchall()
        )

    def _update_session(self, session_id: str, events: list[EventRow], inserted: int) -> None:
        """The session row's leaf, counts, time span and name after these events."""
        if not events:
            return
        redactions: dict[str, int] = {}
        name: str | None = None
        stamps = [ev.ts_ms for ev in events if ev.ts_ms is not None]
        first_ms, last_ms = (min(stamps), max(stamps)) if stamps else (None, None)
        for ev in events:
            for kind, n in ev.redactions:
                redactions[kind] = redactions.get(kind, 0) + n
            if ev.name is not None:
                name = ev.name
        self.conn.execute(
            "UPDATE sessions SET leaf_id=?, entry_count=entry_count + ?,"
            " first_ms=min(coalesce(first_ms, ?), coalesce(?, first_ms)),"
            " last_ms=max(coalesce(last_ms, ?), coalesce(?, last_ms)),"
            " name=CASE WHEN ? IS NULL THEN name WHEN ? = '' THEN NULL ELSE ? END WHERE session_id=?",
            (events[-1].entry_id, inserted, first_ms, first_ms, last_ms, last_ms, name, name, name, session_id),
        )
        add_counts(self.conn, session_id, redactions)

    def states_settled(self, session_id: str, states: dict[str, tuple[str, str]], changed: list[str]) -> None:
        """The session's tree state after this transaction: `states` (branch,
        selection) by entry id as stored, `changed` the earlier events whose
        state changed. Text-index documents carry those filter values: the
        new events' documents take them from here, the changed ones are re-fed."""
        if self.feed:
            self.feed.states_settled(session_id, states, changed)

    def _write_fragments(self, session_id: str, events: list[tuple[int, EventRow]], replaced: list[int]) -> None:
        """Insert the events' fragments, then hand the step to the text engine
        (one step at a time: a later step of the batch may replace these rows)."""
        keeps_text = self.engine.keeps_text  # else the text goes to the engine's own index alone
        rows = [_fragment_row(rowid, f, keeps_text) for rowid, ev in events for f in ev.fragments]
        # AUTOINCREMENT: rowids above every one the table ever had. The writer
        # numbers the rows itself, so the text engine knows each fragment's
        # rowid without reading them back (before + 1, + 2, ... in order).
        before = self.conn.execute(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'fragments'), 0),"
            " coalesce((SELECT max(frag_rowid) FROM fragments), 0))"
        ).fetchone()[0]
        if rows:
            self.conn.executemany(
                "INSERT INTO fragments(frag_rowid, event_rowid, fragment_id, kind, tool_name, call_id, body, tail,"
                " meta, full_length) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(before + i, *row) for i, row in enumerate(rows, 1)],
            )
        self.text.add(Written(session_id, events, replaced, before))
