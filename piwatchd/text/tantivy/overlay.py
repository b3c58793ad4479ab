"""The newest changes, searchable before the text index's durable commit.

A commit of the on-disk text index writes a segment and fsyncs it (50-80 ms
on this project's machine), and only a commit makes documents searchable. So
while the ingest thread is live (caught up, following appends), every change
it makes to the on-disk writer is mirrored here too: a small Tantivy index in
RAM with the same schema and analyzers, committed without an fsync (a few
milliseconds) as soon as SQLite has committed the rows. Searches run the same
query on both indexes (`TantivyText.top`) and merge the hits by score, one
per fragment. Deletions the disk has not committed yet are masked in the
on-disk searcher (their events and sessions), so a re-fed or rewritten event
is found only in its new form. When the disk commit lands, the overlay
empties.

Nothing here is durable, and nothing needs to be: `text_debt` rows are
cleared only after the disk commit, so after a crash every session whose
changes lived only here is re-fed from its source (`feed.TextFeed.repay`).

Matching is identical in both indexes; scores are not quite: a document here
is scored with this small index's statistics (how rare its words are among a
few documents) until the disk commit, at most COMMIT_INTERVAL later.

A publish costs a RAM commit, and most of a small commit is not the new
documents: Tantivy starts a fresh segment writer for the first document
after each commit (its indexing thread sets up the segment's buffers: ~12 ms
of CPU for a one-document segment here, against 0.4 ms for a commit of
deletions alone). So right after each commit the overlay hands the writer a
placeholder document (`WARM`, with no text) and deletes it in the next
commit, before anything is published: the new segment writer is set up
while the writer waits for the next append, not while an append waits to
become searchable. No searcher ever sees the placeholder: every commit
deletes it first.

A catch-up (a backlog of whole files) is not mirrored: it would double the
indexing work for documents the next commit makes searchable anyway. Then
the overlay stops (`stop`), keeps showing the changes it published (a
consistent earlier state, as any searcher), and starts again empty after the
next disk commit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import tantivy
from tantivy import Occur, Query

__all__ = ["OVERLAY_MAX_DOCS", "Overlay", "View", "WARM", "masked", "reload_after_commit"]

# More documents than this since the last disk commit: the overlay stops
# mirroring (a burst of whole files, not appends; the disk commit is due).
OVERLAY_MAX_DOCS = 5000
_HEAP = 15_000_000  # Tantivy's least writer heap per thread
# The placeholder's event key: event keys are event rowids (digits), so none is this.
WARM = "warm"
_WARM_DOC = '{"event": "warm"}'


@dataclass(frozen=True, slots=True)
class View:
    """What a search sees of the overlay: one immutable snapshot, swapped whole."""

    ram: tantivy.Searcher | None = None
    masked_events: tuple[str, ...] = ()
    masked_sessions: tuple[str, ...] = ()
    # Sessions owed to the disk (`text_debt`) whose every pending change is searchable here.
    sessions: frozenset[str] = field(default_factory=frozenset)
    # Events (rowids) whose documents were all added here: the disk has nothing of them
    # that a search may show (a new event; an older form of a re-fed one is masked there).
    events: frozenset[int] = field(default_factory=frozenset)


def masked(schema: tantivy.Schema, query: Query, view: View) -> Query:
    """`query` on the on-disk index, without what the overlay replaces."""
    parts = [(Occur.MustNot, Query.term_set_query(schema, f, list(v))) for f, v in _masks(view) if v]
    if not parts:
        return query
    return Query.boolean_query([(Occur.Must, query), *parts])


def _masks(view: View) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return (("event", view.masked_events), ("session", view.masked_sessions))


def reload_after_commit(index: tantivy.Index) -> None:
    """`index.reload()` right after its writer's commit, without Tantivy's 100 ms stall.

    Opening segment readers takes the directory's meta lock, and a lock that
    is held is retried only after 100 ms. Right after `commit()` returns, the
    writer's own thread still holds it for well under a millisecond (its file
    garbage collection): a reload at once lost that race in nearly every
    commit on an idle machine (measured: reload p50 100 ms, the whole
    append -> searchable latency's mode), and a 1 ms pause first won it in
    200 of 200 (reload p95 0.5 ms, max 1.8 ms)."""
    time.sleep(0.001)
    index.reload()


class Overlay:
    """The RAM index and its writer; written by the ingest thread only."""

    def __init__(self, schema: tantivy.Schema, register: Callable[[tantivy.Index], None]) -> None:
        self.schema = schema
        self.index = tantivy.Index(schema)  # no path: a RAM directory
        register(self.index)
        self._writer = self.index.writer(_HEAP, 1)
        self.view = View()
        self.live = False  # mirroring; starts after the first disk commit made while idle (`resume`)
        self._warm = False  # the placeholder is in the writer (deleted by the next commit)
        self._docs = 0
        self._dirty = False
        self._events: set[str] = set()
        self._sessions: set[str] = set()
        self._touched: set[str] = set()
        self._added: set[int] = set()  # events whose documents were added (a transaction adds all of an event's)

    # -- mirrored changes --------------------------------------------------------

    def add(self, doc: str, session_id: str, event_rowid: int) -> None:
        if not self.live:
            return
        if self._docs >= OVERLAY_MAX_DOCS:
            self.stop()
            return
        self._writer.add_json(doc)
        self._docs += 1
        self._touched.add(session_id)
        self._added.add(event_rowid)
        self._dirty = True

    def delete_session(self, session_id: str) -> None:
        if self.live:
            self._writer.delete_documents_by_term("session", session_id)
            self._sessions.add(session_id)
            self._touched.add(session_id)
            self._dirty = True

    def delete_events(self, event_keys: Iterable[str], session_id: str | None = None) -> None:
        if self.live:
            for key in event_keys:
                self._writer.delete_documents_by_term("event", key)
                self._events.add(key)
                self._dirty = True
            if session_id is not None:
                self._touched.add(session_id)

    def changing(self, session_id: str) -> None:
        """The session has a change the overlay has not published (called in
        the SQLite transaction, before readers can see its rows): until it is
        published, the session is not wholly searchable here."""
        if session_id in self.view.sessions:
            self.view = replace(self.view, sessions=self.view.sessions - {session_id})

    # -- visibility ----------------------------------------------------------------

    def resume(self) -> None:
        """Mirror from now on (the disk holds everything)."""
        self.live = True
        self._warm_up()

    def _warm_up(self) -> None:
        """Hand the writer the placeholder: its indexing thread sets up the next
        segment now, while nothing waits (see the module's docstring)."""
        if self.live and not self._warm:
            self._writer.add_json(_WARM_DOC)
            self._warm = True

    def _commit(self) -> None:
        """The RAM commit, the placeholder deleted in it (after every document it is
        older than, so it is never searchable), and the next one handed over."""
        if self._warm:
            self._writer.delete_documents_by_term("event", WARM)
        self._writer.commit()
        self._warm = False
        self._warm_up()

    def publish(self) -> bool:
        """Make the mirrored changes searchable (a RAM commit, no fsync)."""
        if not self.live or not self._dirty:
            return False
        self._commit()
        reload_after_commit(self.index)
        self._dirty = False
        self.view = View(
            self.index.searcher(),
            tuple(sorted(self._events)),
            tuple(sorted(self._sessions)),
            frozenset(self._touched),
            frozenset(self._added),
        )
        return True

    def stop(self) -> None:
        """Stop mirroring until the next disk commit. What was published stays
        searchable, but no session (nor event) counts as wholly searchable here any more."""
        self.live = False
        self.view = replace(self.view, sessions=frozenset(), events=frozenset())

    def disk_committed(self, *, idle: bool) -> None:
        """The disk holds everything now: empty the overlay (the on-disk
        searcher was reloaded first, so nothing disappears in between). It
        mirrors again when the commit was made while idle (not catching up)."""
        keep = self.view.sessions
        self.view = View(sessions=keep)  # released by `release` once the debt rows are gone
        self.live = idle
        if self._docs or self._events or self._sessions or self._dirty or self._warm:
            # Changes never published (the placeholder too) are dropped first: Tantivy's
            # delete_all keeps what is still in its indexing thread, and rewinds its op
            # stamps so that a later delete misses them.
            self._writer.rollback()
            self._warm = False
            self._writer.delete_all_documents()
            self._commit()
        else:
            self._warm_up()
        self._docs, self._dirty = 0, False
        self._events, self._sessions, self._touched, self._added = set(), set(), set(), set()

    def release(self) -> None:
        """The debt rows of the disk commit are gone: the sessions need no overlay."""
        self.view = replace(self.view, sessions=frozenset())

    @property
    def pending(self) -> bool:
        """Mirrored changes the disk has not committed."""
        return bool(self._docs or self._events or self._sessions)
