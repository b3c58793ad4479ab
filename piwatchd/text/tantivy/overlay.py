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

While live, the disk commit runs in its own thread (`TantivyText.start_commit`)
and the overlay goes on mirroring: an append that arrives meanwhile is
searchable here as quickly as any other. The changes the commit holds are
sealed (`seal`); once it has landed and the on-disk searcher was reloaded,
only their documents leave the overlay (`sealed_committed`), and the changes
made since stay.

A reload here should never wait: Tantivy's RAM directory retries a held
meta lock only after 100 ms. Its holders: the reader's own reload on each
commit (off: this reader reloads only when `_commit` tells it; on, a reload
met it in 12-50 of 1000 commits beside a CPU hog), the commit's file garbage
collection (done before `commit()` returns), and a merge ending in the
writer's thread (Tantivy merges from its eighth segment; each publish adds
one): the rest, 1-5 in 1000 in the same test. Keeping the overlay under
eight segments would remove them, but at a disk commit per few appends under
a burst, which cost more than it saved (measured: p50 10 ms against 4 ms).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import tantivy
from tantivy import Occur, Query

__all__ = ["OVERLAY_MAX_DOCS", "Overlay", "View", "WARM", "masked"]

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


@dataclass(slots=True)
class _Changes:
    """Mirrored changes since a disk commit began (or the overlay last emptied)."""

    docs: int = 0
    events: set[str] = field(default_factory=set)  # deleted event keys: masked on disk
    sessions: set[str] = field(default_factory=set)  # deleted sessions: masked on disk
    touched: set[str] = field(default_factory=set)
    # Events whose documents were added (a transaction adds all of an event's).
    added: set[int] = field(default_factory=set)


class Overlay:
    """The RAM index and its writer; written by the ingest thread only."""

    def __init__(self, schema: tantivy.Schema, register: Callable[[tantivy.Index], None]) -> None:
        self.schema = schema
        self.index = tantivy.Index(schema)  # no path: a RAM directory
        self.index.config_reader("manual")  # reloaded by `_commit` alone (see the module's docstring)
        register(self.index)
        self._writer = self.index.writer(_HEAP, 1)
        self.view = View()
        self.live = False  # mirroring; starts after the first disk commit made while idle (`resume`)
        self._warm = False  # the placeholder is in the writer (deleted by the next commit)
        self._dirty = False
        self._now = _Changes()
        self._sealed: _Changes | None = None  # the changes a running disk commit holds
        # Sessions a disk commit holds whose debt rows are not cleared yet (`release`).
        self._repaying: set[str] = set()

    # -- mirrored changes --------------------------------------------------------

    def add(self, doc: str, session_id: str, event_rowid: int) -> None:
        if not self.live:
            return
        if self._docs() >= OVERLAY_MAX_DOCS:
            self.stop()
            return
        self._writer.add_json(doc)
        self._now.docs += 1
        self._now.touched.add(session_id)
        self._now.added.add(event_rowid)
        self._dirty = True

    def delete_session(self, session_id: str) -> None:
        if self.live:
            self._writer.delete_documents_by_term("session", session_id)
            self._now.sessions.add(session_id)
            self._now.touched.add(session_id)
            self._dirty = True

    def delete_events(self, event_keys: Iterable[str], session_id: str | None = None) -> None:
        if self.live:
            for key in event_keys:
                self._writer.delete_documents_by_term("event", key)
                self._now.events.add(key)
                self._dirty = True
            if session_id is not None:
                self._now.touched.add(session_id)

    def changing(self, session_id: str) -> None:
        """The session has a change the overlay has not published (called in
        the SQLite transaction, before readers can see its rows): until it is
        published, the session is not wholly searchable here."""
        if session_id in self.view.sessions:
            self.view = replace(self.view, sessions=self.view.sessions - {session_id})

    def _parts(self) -> list[_Changes]:
        return [self._now] if self._sealed is None else [self._sealed, self._now]

    def _docs(self) -> int:
        return sum(c.docs for c in self._parts())

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
        older than, so it is never searchable), and the next one handed over; then
        the reload, which nothing holds up (see the module's docstring)."""
        if self._warm:
            self._writer.delete_documents_by_term("event", WARM)
        self._writer.commit()
        self._warm = False
        self._warm_up()
        self.index.reload()

    def publish(self) -> bool:
        """Make the mirrored changes searchable (a RAM commit, no fsync)."""
        if not self.live or not self._dirty:
            return False
        self._commit()
        self._dirty = False
        parts = self._parts()
        self.view = View(
            self.index.searcher(),
            tuple(sorted(set().union(*(c.events for c in parts)))),
            tuple(sorted(set().union(*(c.sessions for c in parts)))),
            frozenset(self._repaying).union(*(c.touched for c in parts)),
            frozenset().union(*(c.added for c in parts)),
        )
        return True

    def stop(self) -> None:
        """Stop mirroring until the next disk commit. What was published stays
        searchable, but no session (nor event) counts as wholly searchable here any more."""
        self.live = False
        self.view = replace(self.view, sessions=frozenset(), events=frozenset())

    def seal(self) -> None:
        """A disk commit of everything mirrored so far begins (in its own thread):
        what changes from now on is kept apart (see the module's docstring)."""
        assert self._sealed is None
        self.publish()
        self._sealed, self._now = self._now, _Changes()

    def sealed_committed(self) -> None:
        """The sealed changes are on disk and its searcher was reloaded: their
        documents leave the overlay, except those a later change replaced
        already (deleted here since, so a delete now would hit the new form)."""
        if self._sealed is None:
            return
        if not self.live:
            self.unseal()  # stopped: the disk commit that follows at once empties everything
            return
        sealed, self._sealed = self._sealed, None
        self._repaying |= sealed.touched
        later = {int(key) for key in self._now.events if key.isdigit()}
        for rowid in sealed.added - self._now.added - later:
            self._writer.delete_documents_by_term("event", str(rowid))
        self._dirty = True
        self.publish()

    def unseal(self) -> None:
        """The disk commit failed: the sealed changes are pending again."""
        sealed, self._sealed = self._sealed, None
        if sealed is not None:
            now, self._now = self._now, sealed
            for name in ("events", "sessions", "touched", "added"):
                getattr(sealed, name).update(getattr(now, name))
            sealed.docs += now.docs

    def disk_committed(self, *, idle: bool) -> None:
        """The disk holds everything now: empty the overlay (the on-disk
        searcher was reloaded first, so nothing disappears in between). It
        mirrors again when the commit was made while idle (not catching up)."""
        keep = self.view.sessions
        self._repaying |= keep
        self.view = View(sessions=keep)  # released by `release` once the debt rows are gone
        self.live = idle
        if self.pending or self._dirty or self._warm:
            # Changes never published (the placeholder too) are dropped first: Tantivy's
            # delete_all keeps what is still in its indexing thread, and rewinds its op
            # stamps so that a later delete misses them.
            self._writer.rollback()
            self._warm = False
            self._writer.delete_all_documents()
            self._commit()
        else:
            self._warm_up()
        self._dirty = False
        self._now, self._sealed = _Changes(), None

    def release(self) -> None:
        """The debt rows of the disk commit are gone: its sessions need no overlay
        (but for changes made since)."""
        done = self._repaying - self._now.touched
        self._repaying = set()
        self.view = replace(self.view, sessions=self.view.sessions - done)

    @property
    def pending(self) -> bool:
        """Mirrored changes the disk has not committed."""
        return any(c.docs or c.events or c.sessions for c in self._parts())
