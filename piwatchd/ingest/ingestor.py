"""Bring one source file's index up to date: observe, classify, read, parse,
project, write, checkpoint. Used by `piwatch index --once` and by the daemon's
single ingest thread.

Guarantees: only complete lines are ingested; an append reads only the new
bytes; a rewrite or replacement rebuilds the session in one transaction
(readers see the old rows or the new, never a mix); a source that cannot be
parsed keeps its last good rows and is marked stale; a file is removed only
when it is really absent.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from .. import workers
from ..model.events import Diagnostic, Header, excerpt
from ..model.project import iso_to_ms, session_name
from ..model.relations import MAX_PATHS_PER_EVENT
from ..model.rows import TreeRow
from ..source.discovery import in_layout
from ..source.fingerprint import Window, title_slot_len
from ..source.parser import ParserState, UnsupportedSource
from ..source.reader import observe, open_source
from ..source.tailer import Change, Checkpoint, Observation, classify
from ..store.extractors import index_extractors
from ..store.redaction import index_rules
from ..store.tree_store import TreeBatch
from ..store.writer import IndexWriter, SourceRecord
from .pipeline import Pipeline

__all__ = ["Ingestor", "IngestOutcome", "owner_rank"]


@dataclass(slots=True)
class IngestOutcome:
    path: str
    change: Change
    session_id: str | None = None
    events: int = 0
    bytes_read: int = 0
    state: str = "ok"
    error: str | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    more: bool = False  # a slice ended before the file's end: ingest it again to go on


def _capped_paths(entries: list[TreeRow]) -> list[Diagnostic]:
    return [
        Diagnostic(
            "capped",
            f"entry {excerpt(e.entry_id)}: file evidence kept for its first {MAX_PATHS_PER_EVENT} paths only",
            e.byte_offset,
        )
        for e in entries
    ]


class Ingestor:
    def __init__(
        self,
        writer: IndexWriter,
        *,
        gone_recheck_delay: float = 0.05,
        sleep: Callable[[float], None] = time.sleep,
        may_remove: Callable[[str], bool] | None = None,
        slice_seconds: float | None = None,
        omp_roots: Sequence[str] = (),
    ) -> None:
        self.writer = writer
        # Where omp keeps sessions: a session there (or one that begins with
        # omp's title slot, wherever it is) was written by omp.
        self.omp_roots = tuple(omp_roots)
        # New bytes are ingested in slices of about this long (None: whole), so one huge
        # file never holds back the appends of the others.
        self.slice_seconds = slice_seconds
        # The rules recorded in the index when it was built (open_writer checked them).
        self.rules = index_rules(writer.conn)
        # The custom types it makes searchable (`store.extractors.adopt` recorded them).
        self.extractors = index_extractors(writer.conn)
        self.pipeline = Pipeline(self.rules, writer.doc_forms, self.extractors)
        self.gone_recheck_delay = gone_recheck_delay
        self._sleep = sleep
        # The live service vetoes removals under a root that is missing or
        # looks unmounted: an absent file there proves nothing.
        self._may_remove = may_remove

    # -- entry point ---------------------------------------------------------

    def ahead(self, paths: list[str]) -> None:
        """The file ingested now and the ones next: those never indexed are
        started in the ingest workers (`Pipeline.ahead`), so the writer finds
        their rows ready. Without workers nothing is sent ahead, and no
        source row is read for it (a lookup per file of a cold index)."""
        if not workers.ahead():
            return
        fresh = []
        for path in paths:
            record = self.writer.source(path)
            if record is None or record.checkpoint is None:
                fresh.append(path)
        self.pipeline.ahead(fresh)

    def ingest(self, path: str) -> IngestOutcome:
        """Bring `path` up to date. A bad file never raises: an unexpected
        error while handling it is recorded against it with the byte offset
        reached, and it is retried only when it changes. Errors of the index
        (SQLite) and of reading (OSError) propagate: they are not the file's
        fault, and the caller retries."""
        self._at = 0
        try:
            return self._ingest(path)
        except (sqlite3.Error, OSError, MemoryError):
            raise
        except Exception as exc:  # noqa: BLE001 - the last line of defence: recorded against the file
            return self._contain(path, exc)

    def _contain(self, path: str, exc: Exception) -> IngestOutcome:
        record = self.writer.source(path)
        obs = observe(path, record.checkpoint if record else None)
        error = _ContainedError(
            f"cannot index from byte {self._at}: {type(exc).__name__}: {excerpt(str(exc))}; "
            "retried when the file changes"
        )
        return self._fail(path, record, obs, classify(record.checkpoint if record else None, obs), error)

    def _ingest(self, path: str) -> IngestOutcome:
        record = self.writer.source(path)
        checkpoint = record.checkpoint if record else None
        obs = observe(path, checkpoint)
        change = classify(checkpoint, obs)
        if change is Change.UNCHANGED:
            if record is not None and record.state == "unreadable":
                # Readable again (permissions restored, folder back): the
                # checkpoint still holds, so only the state changes.
                state = "ok" if record.session_id else "pending"
                with self.writer.transaction():
                    self.writer.mark_source(record.source_id, state, None)
                return IngestOutcome(path, change, record.session_id, state=state)
            return IngestOutcome(
                path, change, record.session_id if record else None, state=record.state if record else "ok"
            )
        if change is Change.GONE:
            return self._gone(path, record)
        if change is Change.UNREADABLE:
            return self._unreadable(path, record, obs)
        if record is not None and record.state in ("stale", "unsupported", "duplicate"):
            failed = self.writer.failed_observation(record.source_id)
            if failed == (obs.size, obs.mtime_ns):
                # Same bytes that failed last time: retry only on the next change.
                return IngestOutcome(path, Change.UNCHANGED, record.session_id, state=record.state, error=record.error)
        if change is Change.APPENDED and record is not None and record.parser_state is not None:
            return self._append(path, record, obs)
        if change is Change.RETITLED and record is not None and record.checkpoint and record.state == "ok":
            return self._retitle(path, record, record.checkpoint, obs)
        return self._rebuild(path, record, obs, change)

    # -- cases ---------------------------------------------------------------

    def _new_session(self, source_id: int, path: str, header: Header, window: Window) -> None:
        """The session row, once its header is read (`window` has fed the bytes up to it)."""
        self._claim_session(source_id, path, header)
        self.writer.upsert_session(source_id, path, header, self._agent(path, window))
        if header.title is not None:
            self.writer.set_name(header.session_id, session_name(header.title, self.rules))

    def _agent(self, path: str, window: Window) -> str:
        """Which agent wrote the file: omp when it lies in omp's root or begins
        with omp's title slot (a root both agents share is Pi's: the slot tells)."""
        if title_slot_len(window.prefix) or any(in_layout(root, path) for root in self.omp_roots):
            return "omp"
        return "pi"

    def _retitle(self, path: str, record: SourceRecord, checkpoint: Checkpoint, obs: Observation) -> IngestOutcome:
        """omp rewrote only its title slot: the session keeps its rows and is renamed."""
        with self.writer.transaction():
            self._name_from_slot(record.session_id, obs)
            self.writer.save_checkpoint(
                record.source_id, replace(checkpoint, mtime_ns=obs.mtime_ns), record.parser_state, record.session_id, 0
            )
        return IngestOutcome(path, Change.RETITLED, record.session_id)

    def _name_from_slot(self, session_id: str | None, obs: Observation) -> None:
        """omp's title slot names the session (the current title, set in place
        after the rename's `title_change` entry)."""
        if session_id and obs.title is not None:
            self.writer.set_name(session_id, session_name(obs.title, self.rules))

    def _gone(self, path: str, record: SourceRecord | None) -> IngestOutcome:
        if record is None:
            return IngestOutcome(path, Change.GONE, state="gone")
        # A delete-and-recreate (or a rename over) can show ENOENT for an instant.
        self._sleep(self.gone_recheck_delay)
        again = observe(path, record.checkpoint)
        if again.exists or again.error is not None:
            return self.ingest(path)
        if self._may_remove is not None and not self._may_remove(path):
            error = f"{path} is not visible but its sessions folder is unavailable; keeping its index"
            with self.writer.transaction():
                self.writer.mark_source(record.source_id, "unreadable", error)
            return IngestOutcome(path, Change.UNREADABLE, record.session_id, state="unreadable", error=error)
        with self.writer.transaction():
            self.writer.remove_source(record.source_id)
        return IngestOutcome(path, Change.GONE, record.session_id, state="removed")

    def _unreadable(self, path: str, record: SourceRecord | None, obs: Observation) -> IngestOutcome:
        error = f"cannot read {path}: {obs.error}"
        with self.writer.transaction():
            source_id = record.source_id if record else self.writer.ensure_source(path)
            self.writer.mark_source(source_id, "unreadable", error)
        return IngestOutcome(
            path, Change.UNREADABLE, record.session_id if record else None, state="unreadable", error=error
        )

    def _fail(
        self, path: str, record: SourceRecord | None, obs: Observation, change: Change, exc: Exception
    ) -> IngestOutcome:
        """Keep the last known-good rows; mark the source so status shows why."""
        has_good = bool(
            record is not None
            and record.session_id
            and (owner := self.writer.session_owner(record.session_id))
            and owner[0] == record.source_id
        )
        state = "stale" if has_good else "unsupported"
        with self.writer.transaction():
            source_id = record.source_id if record else self.writer.ensure_source(path)
            self.writer.mark_source(source_id, state, str(exc), failed=(obs.size, obs.mtime_ns))
        return IngestOutcome(path, change, record.session_id if record else None, state=state, error=str(exc))

    def _open(self, path: str, record: SourceRecord | None) -> int | IngestOutcome:
        """The source's descriptor, or the outcome when it cannot be opened."""
        try:
            return open_source(path)
        except FileNotFoundError:
            return self._gone(path, record)
        except OSError as exc:
            return self._unreadable(path, record, Observation(True, error=str(exc)))

    def _rebuild(self, path: str, record: SourceRecord | None, obs: Observation, change: Change) -> IngestOutcome:
        outcome = IngestOutcome(path, change)
        fd = self._open(path, record)
        if isinstance(fd, IngestOutcome):
            return fd
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (obs.dev, obs.ino):
                obs = Observation(True, dev=st.st_dev, ino=st.st_ino, size=st.st_size, mtime_ns=st.st_mtime_ns)
            try:
                with self.writer.transaction():
                    self._rebuild_in_transaction(fd, path, record, obs, outcome)
            except UnsupportedSource as exc:
                return self._fail(path, record, obs, change, exc)
            except _DuplicateSession as dup:
                with self.writer.transaction():
                    source_id = record.source_id if record else self.writer.ensure_source(path)
                    self.writer.mark_source(
                        source_id, "duplicate", str(dup), forget_checkpoint=True, failed=(obs.size, obs.mtime_ns)
                    )
                outcome.state, outcome.error = "duplicate", str(dup)
        finally:
            os.close(fd)
        return outcome

    def _rebuild_in_transaction(
        self, fd: int, path: str, record: SourceRecord | None, obs: Observation, outcome: IngestOutcome
    ) -> None:
        w = self.writer
        source_id = record.source_id if record else w.ensure_source(path)
        previous_session = record.session_id if record else None
        owner = w.session_owner(previous_session) if previous_session else None
        # Replacing indexed rows: readers must see the old session or the new, so no slices.
        replacing = bool(previous_session and owner and owner[0] == source_id)
        if replacing:
            assert previous_session is not None
            w.delete_session(previous_session)
        w.clear_diagnostics(source_id)
        src = _Source(fd, path, source_id, obs)
        self._ingest_range(src, _At(0, ParserState(), Window()), outcome, full=True, sliced=not replacing)

    def _ingest_range(self, src: _Source, begin: _At, outcome: IngestOutcome, *, full: bool, sliced: bool) -> None:
        """Ingest the complete lines of [begin.offset, obs.size) and save the
        checkpoint that proves them, inside the caller's transaction.

        `sliced`: stop after `slice_seconds` at a chunk boundary and say so
        (`outcome.more`); the checkpoint then proves a prefix, and the next
        ingest continues from it as an append. Only where no earlier rows
        are being replaced: a rebuild of a known session stays one transaction.
        """
        w = self.writer
        fd, path, source_id, obs = src
        start, state, window = begin
        tree = TreeBatch(w.conn, full=full)
        self._at = start
        chunks = self.pipeline.rows(fd, path, start, obs.size, state)
        deadline = time.monotonic() + self.slice_seconds if sliced and self.slice_seconds is not None else None
        consumed = start
        try:
            for data, rows in chunks:
                if data is None:
                    window.skip(fd, consumed, rows.end)
                else:
                    window.feed(data)
                state = rows.state
                if rows.header is not None:
                    self._new_session(source_id, path, rows.header, window)
                consumed = self._at = rows.end
                outcome.diagnostics.extend(rows.diagnostics)
                if rows.events:
                    assert state.header is not None  # the parser yields entries only after a header
                    outcome.diagnostics.extend(w.insert_events(state.header.session_id, rows.events))
                    tree.add(state.header, rows.tree)
                    outcome.events += len(rows.events)
                if deadline is not None and time.monotonic() >= deadline and consumed < obs.size:
                    outcome.more = True
                    break
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()  # stops the prefetch thread when the slice ended early
        self._finish_range(src, start, _At(consumed, state, window), tree, outcome)

    def _finish_range(self, src: _Source, start: int, end: _At, tree: TreeBatch, outcome: IngestOutcome) -> None:
        w = self.writer
        source_id, obs = src.source_id, src.obs
        consumed, state, window = end
        if state.header is None and consumed > 0:
            # Pi writes whole lines, so complete lines without a header are not
            # a session still being written.
            raise UnsupportedSource("no Pi session header in the file's complete lines")
        outcome.diagnostics.extend(_capped_paths(tree.capped))
        w.record_diagnostics(source_id, outcome.diagnostics)
        update = tree.finish()
        if update is not None:
            w.states_settled(update.session_id, update.states, update.changed)
        outcome.bytes_read = consumed - start
        outcome.session_id = state.header.session_id if state.header else None
        outcome.state = "ok" if state.header else "pending"
        # A slice that stopped early records the size it reached, so the next
        # observation sees the rest as an append.
        size = consumed if outcome.more else obs.size
        self._name_from_slot(outcome.session_id, obs)
        checkpoint = Checkpoint(obs.dev, obs.ino, size, obs.mtime_ns, consumed, *window.hashes())
        w.save_checkpoint(source_id, checkpoint, state, outcome.session_id, consumed - start)

    def _claim_session(self, source_id: int, path: str, header: Header) -> None:
        """One rule for the same session id in two files (an archive copy, a manual
        copy): the file with the oldest header timestamp keeps it, then the smaller
        path (`owner_rank`), whatever order they were found in. The other is reported
        as a duplicate and not indexed."""
        session_id = header.session_id
        owner = self.writer.session_owner(session_id)
        if owner is None or owner[0] == source_id:
            return
        other_id, other_path = owner
        try:
            other = os.stat(other_path)
        except OSError:  # the owner is gone: this copy takes over
            self.writer.delete_session(session_id)
            return
        if owner_rank(self.writer.session_created(session_id), other_path) <= owner_rank(header.timestamp, path):
            raise _DuplicateSession(_kept_elsewhere(session_id, other_path))
        self.writer.delete_session(session_id)
        self.writer.mark_source(
            other_id,
            "duplicate",
            _kept_elsewhere(session_id, path),
            forget_checkpoint=True,
            failed=(other.st_size, other.st_mtime_ns),
        )

    def _append(self, path: str, record: SourceRecord, obs: Observation) -> IngestOutcome:
        cp = record.checkpoint
        assert cp is not None and record.parser_state is not None
        outcome = IngestOutcome(path, Change.APPENDED, record.session_id)
        fd = self._open(path, record)
        if isinstance(fd, IngestOutcome):
            return fd
        try:
            # The checkpoint's own ranges, re-read so the new fingerprints are
            # computed from exactly the bytes that were verified and parsed.
            window = Window(
                os.pread(fd, cp.prefix_len, 0),
                os.pread(fd, cp.tail_len, cp.consumed - cp.tail_len),
                cp.consumed,
            )
            try:
                with self.writer.transaction():
                    src = _Source(fd, path, record.source_id, obs)
                    begin = _At(cp.consumed, record.parser_state, window)
                    self._ingest_range(src, begin, outcome, full=False, sliced=True)
            except UnsupportedSource as exc:
                return self._fail(path, record, obs, Change.APPENDED, exc)
            except _DuplicateSession as dup:
                with self.writer.transaction():
                    self.writer.mark_source(
                        record.source_id, "duplicate", str(dup), forget_checkpoint=True, failed=(obs.size, obs.mtime_ns)
                    )
                outcome.state, outcome.error = "duplicate", str(dup)
                return outcome
        finally:
            os.close(fd)
        return outcome


def _kept_elsewhere(session_id: str, kept: str) -> str:
    return (
        f"session id {excerpt(session_id)} is also in {kept}, which is kept (older header timestamp,"
        " or the same and a smaller path); this copy is not indexed"
    )


def owner_rank(header_timestamp: str | None, path: str) -> tuple[int, float, str]:
    """Which file owns a session id found in several: the smallest rank. Pure.

    The oldest header timestamp first (the original predates its copies), then the
    path; a file whose timestamp cannot be read ranks after every dated one.
    """
    ms = iso_to_ms(header_timestamp)
    return (0, ms, path) if ms is not None else (1, 0.0, path)


class _Source(NamedTuple):
    """The file being ingested: its open descriptor, path, source row and what was observed of it."""

    fd: int
    path: str
    source_id: int
    obs: Observation


class _At(NamedTuple):
    """A point in the file: its byte offset, the parser's state and the fingerprint window there."""

    offset: int
    state: ParserState
    window: Window


class _DuplicateSession(Exception):
    pass


class _ContainedError(Exception):
    """An unexpected error while indexing one file, recorded against it."""
