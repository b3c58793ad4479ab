"""Keep the text index a faithful copy of the read model's searchable text.

SQLite's transaction is the commit point. Inside it, the writer queues text
operations here (delete a session, add events, states changed) and records
the session in `text_debt`. After COMMIT the queue is applied to the text
index; once the text index itself commits, the debt rows are cleared. After a
crash, every session still in `text_debt` is deleted from the text index and
re-fed from its source file (`repay`), so kill -9 at any point converges to
a clean build and a rewrite never leaves hits from the old content.

Documents come from the index rows (filter values, read after commit so they
carry the final tree state) and the fragment texts: the writer's rows (with
their `forms` values) for events just ingested, re-projected from the source
file for events whose state changed.
"""

from __future__ import annotations

import itertools
import json
import logging
import sqlite3
import time
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from ...model.rows import EventRow, FragRow, event_row
from ...store.evidence import event_files_sql
from ...store.ids import IN_IDS, KEY
from ...store.source_events import project_rows
from ..engine import Repaid, RepayProgress, Written
from .doc import EventFacts, TextDoc
from .identity import adopt_text
from .index import db_file_of, text_dir
from .readers import register_text, unregister_text

__all__ = ["COMMIT_INTERVAL", "MAX_REPAY_ATTEMPTS", "QUIET_SECONDS", "REPAY_SECONDS", "TextFeed"]

log = logging.getLogger("piwatchd.text")

# While work keeps coming, the text index commits to disk at most this often
# (each commit is an fsync and a new segment). While live, a change is
# searchable at once from the overlay (`overlay.py`), and the disk commits
# once no change came for QUIET_SECONDS, or COMMIT_INTERVAL after the first
# change it lacks; during a catch-up (no overlay) it commits when the backlog
# is done, or every COMMIT_INTERVAL.
COMMIT_INTERVAL = 1.0
QUIET_SECONDS = 0.25
# While live, the disk commit runs in its own thread (`TantivyText.start_commit`):
# the ingest thread looks this often whether it has ended (a late look only
# keeps the overlay full a little longer: appends wake the thread anyway).
COMMIT_POLL = 0.02
_CHUNK = 5000
# A session's re-feed runs at most this long per attempt, and is attempted at most this often.
REPAY_SECONDS = 60.0
MAX_REPAY_ATTEMPTS = 3


def _json_ids(ids: Iterable[int]) -> str:
    return json.dumps(list(ids))


def _own_result(meta: str | None) -> bool:
    """A piwatch tool result (tagged `details.piwatch`), as the SQL reads it
    (`json_extract(meta, '$.piwatch') IS NOT NULL`)."""
    return meta is not None and '"piwatch"' in meta and orjson.loads(meta).get("piwatch") is not None


class _NewDocs:
    """What a transaction's added events' documents need besides their rows:
    each event's session and fragments with their rowids, each session's
    settled tree state."""

    def __init__(self) -> None:
        self.session_of: dict[int, str] = {}
        self.frags: dict[int, list[tuple[int, FragRow]]] = {}
        self.states: dict[str, dict[str, tuple[str, str]]] = {}

    def add(self, session_id: str, events: list[tuple[int, EventRow]], frags: list[tuple[int, int, FragRow]]) -> None:
        for rowid, _ in events:
            self.session_of[rowid] = session_id
            self.frags[rowid] = []  # a repeated id's later step replaces its fragments
        for frag_rowid, rowid, f in frags:
            self.frags[rowid].append((frag_rowid, f))


class TextFeed:
    """The Tantivy engine's `TextWriter` (piwatchd.text.engine)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._ops: list[tuple[Any, ...]] = []
        self._owed: set[str] = set()
        self._committing_owed: set[str] = set()  # the sessions the running disk commit repays
        self._last_commit = time.monotonic()
        self._unsynced: tuple[float, float] | None = None  # (first, last) change the disk lacks
        self.text = adopt_text(conn, text_dir(db_file_of(conn)))
        register_text(self.text)

    # -- queued inside the SQLite transaction ----------------------------------

    def _owe(self, session_id: str) -> None:
        assert self.text.overlay is not None
        self.text.overlay.changing(session_id)
        if session_id not in self._owed:
            self.conn.execute("INSERT OR IGNORE INTO text_debt(session_id) VALUES (?)", (session_id,))
            self._owed.add(session_id)

    def delete_session(self, session_id: str) -> None:
        self._owe(session_id)
        self._clear_attempts(session_id)  # rebuilt whole in this transaction: no longer a suspect
        self._ops.append(("delete_session", session_id))

    def add(self, written: Written) -> None:
        """Queue the step's documents; they are built and fed after COMMIT."""
        session_id, events, replaced, before = written
        self._owe(session_id)
        if replaced:
            self._ops.append(("delete_events", replaced))
        if events:
            # The writer numbered the fragments from `before` + 1, in this order.
            rowids = itertools.count(before + 1)
            frags = [(next(rowids), rowid, f) for rowid, event in events for f in event.fragments]
            self._ops.append(("add", session_id, events, frags))

    def states_settled(self, session_id: str, states: dict[str, tuple[str, str]], changed: list[str]) -> None:
        self._ops.append(("settled", session_id, states))
        if changed:
            self._owe(session_id)
            self._ops.append(("changed", session_id, changed))

    def ended(self, *, committed: bool) -> None:
        """After COMMIT, apply the queued operations; after a rollback they
        never happened, and the transaction's debt rows are gone with it."""
        if committed:
            self._apply()
            return
        self._ops.clear()
        self._owed = {s for s in self._owed if self._still_owed(s)}

    def _still_owed(self, session_id: str) -> bool:
        return self.conn.execute("SELECT 1 FROM text_debt WHERE session_id=?", (session_id,)).fetchone() is not None

    # -- applied after COMMIT ---------------------------------------------------

    def _apply(self) -> None:
        """Apply the committed transaction's operations: deletes in order, then
        the new events' documents, then re-fed documents of earlier events
        whose state changed (new events already carry their final state)."""
        ops, self._ops = self._ops, []
        if ops:
            now = time.monotonic()
            self._unsynced = (self._unsynced[0] if self._unsynced else now, now)
        added: dict[int, EventRow] = {}
        new = _NewDocs()
        changed: list[tuple[str, list[str]]] = []
        for op in ops:
            if op[0] == "delete_session":
                self.text.delete_session(op[1])
            elif op[0] == "delete_events":
                self.text.delete_events(op[1])
            elif op[0] == "add":
                added.update(op[2])
                new.add(op[1], op[2], op[3])
            elif op[0] == "settled":
                new.states[op[1]] = op[2]
            elif op[0] == "changed":
                changed.append((op[1], op[2]))
        if added:
            self.text.add(self._new_docs(list(added), added, new))
        for session_id, entry_ids in changed:
            rowids = [r for r in self._rowids(session_id, entry_ids) if r not in added]
            self.refeed_events(rowids)

    def _rowids(self, session_id: str, entry_ids: list[str]) -> list[int]:
        rowids: list[int] = []
        for start in range(0, len(entry_ids), _CHUNK):
            chunk = entry_ids[start : start + _CHUNK]
            rowids += [
                r[0]
                for r in self.conn.execute(
                    f"SELECT event_rowid FROM events WHERE session_key={KEY} AND entry_id {IN_IDS}",
                    (session_id, json.dumps(chunk)),
                )
            ]
        return rowids

    def refeed_events(self, rowids: list[int]) -> None:
        """Replace the documents of these events, texts re-projected from source."""
        if not rowids:
            return
        self.text.delete_events(rowids)
        self.text.add(self._docs(rowids, {}))

    def flush(self, *, idle: bool) -> bool:
        """Make the text searchable: while live from the overlay at once, on
        disk when due (`due`, in its own thread); while catching up on disk
        every COMMIT_INTERVAL or when `idle`. True when something new became searchable."""
        overlay = self.text.overlay
        assert overlay is not None
        # A catch-up stops the overlay: nothing may stay sealed. The end of a disk commit
        # publishes what the overlay holds (`Overlay.sealed_committed`).
        finished = self._finish(wait=not idle)
        if not self._owed and not self.text.dirty:
            if idle and not overlay.pending:
                overlay.resume()  # the disk holds everything: mirror from now on
            return False
        now = time.monotonic()
        if not idle:
            overlay.stop()  # a catch-up is not mirrored (see overlay.py)
            if now - self._last_commit < COMMIT_INTERVAL:
                return False
            self._commit(idle=False)
            return True
        if not overlay.live:  # only the disk commit shows these changes
            self._commit(idle=True)
            return True
        published = self.text.publish() or finished
        self.maintain()
        return published

    def due(self) -> float | None:
        """Seconds until the deferred disk commit is due, or its thread is looked
        at (`maintain` does both); None when nothing waits for it."""
        if self.text.committing:
            return COMMIT_POLL
        due = self._due_at()
        return None if due is None else max(0.0, due - time.monotonic())

    def _due_at(self) -> float | None:
        """When the disk commit is due (monotonic time); None when nothing waits for it."""
        if self._unsynced is None and not self._owed and not self.text.dirty:
            return None
        first, last = self._unsynced or (self._last_commit, self._last_commit)
        overlay = self.text.overlay
        if overlay is None or not overlay.live:
            return min(first, last)  # nothing shows these changes before the disk commit
        return min(first + COMMIT_INTERVAL, last + QUIET_SECONDS)

    def _commit(self, *, idle: bool) -> None:
        """Commit the text index to disk here and now, then clear the debt it repaid."""
        self._finish(wait=True)
        self.text.commit(idle=idle)
        self._committed(self._owed)
        self._owed = set()
        assert self.text.overlay is not None
        self.text.overlay.release()

    def _start(self) -> None:
        """Begin the disk commit in its own thread (live: the overlay shows every change)."""
        self.text.start_commit()
        self._committing_owed, self._owed = self._owed, set()
        self._last_commit = time.monotonic()
        self._unsynced = None

    def _finish(self, *, wait: bool) -> bool:
        """The disk commit's thread ended (or, when `wait`, once it ends): clear
        the debt it repaid, except a session's changed since (owed to the next).
        False when none ended."""
        try:
            if not self.text.finish_commit(wait=wait):
                return False
        except BaseException:
            self._owed |= self._committing_owed
            self._committing_owed = set()
            raise
        repaid, self._committing_owed = self._committing_owed - self._owed, set()
        self._clear_debt(repaid)
        assert self.text.overlay is not None
        self.text.overlay.release()
        return True

    def _committed(self, owed: set[str]) -> None:
        self._last_commit = time.monotonic()
        self._unsynced = None
        self._clear_debt(owed)

    def _clear_debt(self, owed: set[str]) -> None:
        if owed:
            self.conn.execute("BEGIN IMMEDIATE")
            # A suspect or quarantined session stays owed until a re-feed or a rebuild completes it.
            self.conn.execute(
                "DELETE FROM text_debt WHERE attempts = 0 AND session_id IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(owed)),),
            )
            self.conn.execute("COMMIT")

    def maintain(self) -> bool:
        """The disk commit the overlay deferred, once due, in its own thread;
        and the account of one that ended."""
        self._finish(wait=False)
        due = self._due_at()
        if due is not None and time.monotonic() >= due and not self.text.committing:
            if self.text.overlay is not None and self.text.overlay.live:
                self._start()
            else:
                self._commit(idle=True)
        return False  # Tantivy merges segments in its own threads

    def repay(self, *, suspect: bool = False, progress: RepayProgress | None = None) -> Repaid:
        """Re-feed sessions the text index may lag (after a crash or a lost text
        index) from the read model and the source files.

        At start-up (`suspect=False`) every session no earlier re-feed began.
        One whose re-feed began and never finished (the process died in it, or it
        ran past REPAY_SECONDS) is a suspect: the service re-feeds those later, one
        per call (`suspect=True`), and after MAX_REPAY_ATTEMPTS leaves it quarantined.
        `progress(done, total)` after each session (a lost text index owes every one).
        """
        rows = self.conn.execute("SELECT session_id, attempts FROM text_debt ORDER BY attempts, session_id").fetchall()
        owed = [s for s, n in rows if 0 < n < MAX_REPAY_ATTEMPTS][:1] if suspect else [s for s, n in rows if n == 0]
        done = []
        for n, session_id in enumerate(owed, 1):
            if self._repay_session(session_id):
                done.append(session_id)
            if progress is not None:
                progress(n, len(owed))
        self._owed.update(done)
        if owed:
            self._commit(idle=True)
        return Repaid(done, [s for s in owed if s not in done], self.quarantined())

    def _repay_session(self, session_id: str) -> bool:
        """Re-feed one session within REPAY_SECONDS; False when it ran out of time."""
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("UPDATE text_debt SET attempts = attempts + 1 WHERE session_id = ?", (session_id,))
        self.conn.execute("COMMIT")
        deadline = time.monotonic() + REPAY_SECONDS
        self.text.delete_session(session_id)
        rowids = [
            r[0]
            for r in self.conn.execute(
                f"SELECT event_rowid FROM events WHERE session_key={KEY} ORDER BY ordinal", (session_id,)
            )
        ]
        for start in range(0, len(rowids), _CHUNK):
            if time.monotonic() > deadline:
                log.warning("re-feeding session %s ran past %.0fs; left for later", session_id, REPAY_SECONDS)
                return False
            self.text.add(self._docs(rowids[start : start + _CHUNK], {}))
        self._clear_attempts(session_id)
        return True

    def _clear_attempts(self, session_id: str) -> None:
        """All of the session's documents are queued again: its debt is an ordinary one."""
        in_transaction = self.conn.in_transaction
        if not in_transaction:
            self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("UPDATE text_debt SET attempts = 0 WHERE session_id = ?", (session_id,))
        if not in_transaction:
            self.conn.execute("COMMIT")

    def quarantined(self) -> list[str]:
        """Sessions whose re-feed failed MAX_REPAY_ATTEMPTS times: not searchable until they change."""
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT session_id FROM text_debt WHERE attempts >= ? ORDER BY session_id", (MAX_REPAY_ATTEMPTS,)
            )
        ]

    def close(self) -> None:
        self._finish(wait=True)
        if self._owed or self.text.dirty:
            self._commit(idle=False)
        self.text.close()
        unregister_text(self.text)

    # -- documents ---------------------------------------------------------------

    def _new_docs(self, rowids: list[int], events: dict[int, EventRow], new: _NewDocs) -> Iterator[TextDoc]:
        """The documents of the events this transaction added: their facts from
        the rows in memory and the tree state the writer settled (nothing read
        back but file evidence, whose tool results share their call's, and each
        session's cwd); any event whose state was not told is read back."""
        cwds: dict[str, tuple[str | None, str | None]] = {}
        for start in range(0, len(rowids), _CHUNK):
            chunk = rowids[start : start + _CHUNK]
            ids = _json_ids(chunk)
            files = self._files(ids)
            unknown: list[int] = []
            for rowid in chunk:
                row, sid = events[rowid], new.session_of[rowid]
                state = new.states.get(sid, {}).get(row.entry_id)
                if state is None:
                    unknown.append(rowid)
                    continue
                if sid not in cwds:
                    cwds[sid] = self._cwds(sid)
                read, changed = files.get(rowid, ((), ()))
                facts = EventFacts(
                    rowid, sid, row.ordinal, row.type, row.role, row.ts_ms, bool(row.is_error), *state,
                    *cwds[sid], _own_result(row.meta), tuple(read), tuple(changed),
                )  # fmt: skip
                for frag_rowid, f in new.frags[rowid]:
                    yield TextDoc(frag_rowid, facts, f.kind, f.tool_name, f.text, f.tail, f.meta, f.forms)
            if unknown:
                yield from self._docs_chunk(unknown, events)

    def _cwds(self, session_id: str) -> tuple[str | None, str | None]:
        row = self.conn.execute("SELECT cwd_norm, cwd_real FROM sessions WHERE session_id=?", (session_id,)).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def _files(self, ids: str) -> dict[int, tuple[list[str], list[str]]]:
        """{event rowid: (paths read, paths changed)} of these events (`event_files_sql`)."""
        files: dict[int, tuple[list[str], list[str]]] = {}
        for rowid, path, mode in self.conn.execute(
            event_files_sql("e.event_rowid, fe.path, fe.mode", f"e.event_rowid {IN_IDS}", events=True), (ids, ids)
        ):
            files.setdefault(rowid, ([], []))[0 if mode == "read" else 1].append(path)
        return files

    def _docs(self, rowids: list[int], events: dict[int, EventRow]) -> Iterator[TextDoc]:
        for start in range(0, len(rowids), _CHUNK):
            yield from self._docs_chunk(rowids[start : start + _CHUNK], events)

    def _docs_chunk(self, rowids: list[int], events: dict[int, EventRow]) -> Iterator[TextDoc]:
        ids = _json_ids(rowids)
        files = self._files(ids)
        facts: dict[int, EventFacts] = {}
        for r in self.conn.execute(
            "SELECT e.event_rowid, s.session_id, e.ordinal, e.type, e.role, e.ts_ms, e.is_error, e.branch_state,"
            " e.selection_state, s.cwd_norm, s.cwd_real, json_extract(e.meta, '$.piwatch') IS NOT NULL"
            " FROM events e JOIN sessions s ON s.session_key = e.session_key"
            " WHERE e.event_rowid IN (SELECT value FROM json_each(?))",
            (ids,),
        ):
            read, changed = files.get(r[0], ((), ()))
            facts[r[0]] = EventFacts(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                bool(r[6]),
                r[7],
                r[8],
                r[9],
                r[10],
                bool(r[11]),
                tuple(read),
                tuple(changed),
            )
        missing = [rowid for rowid in rowids if rowid not in events and rowid in facts]
        if missing:
            events = {**events, **{r: event_row(ev) for r, ev in project_rows(self.conn, missing).items()}}
        # A dict per event, not a scan of its fragments per fragment: an entry may have thousands.
        by_id: dict[int, dict[str, FragRow]] = {}
        for frag_rowid, event_rowid, fragment_id, kind, tool_name in self.conn.execute(
            "SELECT frag_rowid, event_rowid, fragment_id, kind, tool_name FROM fragments"
            " WHERE event_rowid IN (SELECT value FROM json_each(?))",
            (ids,),
        ):
            event = events.get(event_rowid)
            fact = facts.get(event_rowid)
            frag = None
            if event is not None:
                if event_rowid not in by_id:
                    by_id[event_rowid] = {f.fragment_id: f for f in event.fragments}
                frag = by_id[event_rowid].get(fragment_id)
            if fact is None or frag is None:
                continue  # the source changed under us: its rebuild re-feeds it
            yield TextDoc(frag_rowid, fact, kind, tool_name, frag.text, frag.tail, frag.meta, frag.forms)
