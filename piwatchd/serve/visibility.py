"""One request's visibility, computed once and asked by everything that builds its answer.

A request's caller resolves to a `CallerScope` (authorized roots, the
caller's own session and cutoff). `Visibility` turns that into answers about
the sessions and events a response names: which session rows may be shown
(hits, freshness, warnings, sessions, status counts), which events (read and
trace nodes, relationship targets), where the cutoff caps a session and what
a capped session's visible events say of it (`session_view`). It answers;
the builders decide with it while building (`serve/shown.py` for recorded
values, read's and trace's nodes before their redaction). Every
lookup is by key and cached for the request, so the cost is O(what the
response names), never O(history); a caller with a cutoff adds its session's
lineage once, O(descendants). A hidden session or event looks exactly like a
missing one: the same error, the same shape.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import NamedTuple

from ..store.catalog import SessionRow, canonical_ref, descendants, orphan_forks, session_rows, sessions_with_prefix
from ..store.ids import IN_IDS, KEY, id_list
from .auth import CallerScope

__all__ = ["NOT_FOUND_MESSAGE", "SessionView", "Visibility"]

NOT_FOUND_MESSAGE = "no such event in the sessions this caller may see"

# A parent hiding fewer entries than this has each looked up in a fork in one
# statement (~1 us each in SQLite); past it, bisecting the fork is cheaper.
WALK_MAX = 256


class SessionView(NamedTuple):
    """What a caller may see of a session's recorded facts (all of them, or
    for a session capped by the cutoff only what its visible events say)."""

    name: str | None
    first_ms: int | None
    last_ms: int | None
    events: int


class Visibility:
    def __init__(self, conn: sqlite3.Connection, scope: CallerScope) -> None:
        self.conn = conn
        self.scope = scope
        self._rows: dict[str, SessionRow | None] = {}
        self._cutoff_ordinals: dict[str, int | None] = {}
        self._lineage: dict[str, int] | None = None  # first hidden ordinals (`_caps`)

    # -- sessions ----------------------------------------------------------------

    @property
    def unrestricted(self) -> bool:
        """Every session and event is visible (the local CLI's `all` without a session)."""
        return self.scope.roots is None and not self.scope.current_session

    @property
    def has_cutoff(self) -> bool:
        return bool(self.scope.current_session and self.scope.cutoff_entry)

    def load(self, session_ids: Iterable[str]) -> None:
        """Fetch the rows of these sessions in one query (cached)."""
        missing = {s for s in session_ids if s not in self._rows}
        if missing:
            found = session_rows(self.conn, missing)
            for sid in missing:
                self._rows[sid] = found.get(sid)

    def refresh(self) -> None:
        """Forget cached rows (after waiting for ingest, progress has moved)."""
        self._rows.clear()
        self._cutoff_ordinals.clear()
        self._lineage = None

    def session(self, session_id: str) -> SessionRow | None:
        """The session's row if the caller may see the session, else None
        (exactly as for a missing session)."""
        self.load((session_id,))
        row = self._rows.get(session_id)
        if row is None or not self.scope.allows_cwd(row.cwd_real):
            return None
        # The caller's own session is visible only when it names a cutoff.
        if session_id == self.scope.current_session and not self.scope.cutoff_entry:
            return None
        return row

    def sessions(self, session_ids: Iterable[str]) -> dict[str, SessionRow]:
        ids = list(dict.fromkeys(session_ids))
        self.load(ids)
        return {sid: row for sid in ids if (row := self.session(sid)) is not None}

    def sessions_with_prefix(self, prefix: str, limit: int) -> list[str]:
        """Up to `limit` ids of visible sessions beginning with `prefix`, in id
        order: only sessions the caller may see, so a prefix is never ambiguous
        because of a hidden one."""
        candidates = sessions_with_prefix(self.conn, prefix, self.scope.roots, limit + 1)  # + the own session
        return list(self.sessions(candidates))[:limit]

    # -- the invocation cutoff -------------------------------------------------------
    #
    # The caller's session hides the cutoff entry and everything after it. A
    # fork copies its parent's entries with their ids, in their order (`pi
    # --fork` all of them, a branched session the path to its leaf), so in
    # every session descending from the caller's, to any depth, the first of
    # these starts what it hides: its copy of the cutoff entry, its copy of an
    # entry its parent hides. A fork that copied nothing hidden (made before
    # the cutoff) is not capped: what it wrote itself is its own session's.

    def _ordinal_of_cutoff(self, session_id: str) -> int | None:
        if session_id not in self._cutoff_ordinals:
            row = self.conn.execute(
                f"SELECT ordinal FROM events WHERE session_key={KEY} AND entry_id=?",
                (session_id, self.scope.cutoff_entry),
            ).fetchone()
            self._cutoff_ordinals[session_id] = row[0] if row else None
        return self._cutoff_ordinals[session_id]

    def _first_hidden_copy(self, fork: str, parent: str, parent_cap: int) -> int | None:
        """The fork's ordinal of its first copy of an entry its parent hides,
        or None. A fork holds its copies first, in its parent's order (as Pi
        copies: `--fork` every entry, a branch the path to its leaf), so it is
        its copy of the first hidden entry it holds in the parent's order:
        one statement when the parent hides few entries (a caller's cutoff is
        its present), or the copy of the first one (a fork made after the
        cutoff); else bisection (`_bisect_hidden_copy`)."""
        (end,) = self.conn.execute(f"SELECT max(ordinal) FROM events WHERE session_key = {KEY}", (parent,)).fetchone()
        few = end is not None and end - parent_cap < WALK_MAX
        if few:  # each hidden entry looked up in the fork
            where = f"p.session_key = {KEY} AND p.ordinal >= ?"
        else:  # the first hidden entry alone
            where = f"p.event_rowid = (SELECT event_rowid FROM events WHERE session_key = {KEY} AND ordinal >= ? ORDER BY ordinal LIMIT 1)"
        first = self.conn.execute(
            f"SELECT f.ordinal FROM events p JOIN events f ON f.session_key = {KEY} AND f.entry_id = p.entry_id"
            f" WHERE {where} ORDER BY p.ordinal LIMIT 1",
            (fork, parent, parent_cap),
        ).fetchone()
        if first is not None:
            return int(first[0])
        return None if few else self._bisect_hidden_copy(fork, parent, parent_cap)

    def _bisect_hidden_copy(self, fork: str, parent: str, parent_cap: int) -> int | None:
        """`_first_hidden_copy` for a fork made before the cutoff, or branched
        through a later entry: along the fork, "its own entry, or a copy of a
        hidden one" turns true once; the turn is found in O(log fork) lookups."""

        def hidden_copy(row: tuple[int, int | None] | None) -> bool:
            return row is not None and row[1] is not None and row[1] >= parent_cap

        (end,) = self.conn.execute(f"SELECT max(ordinal) FROM events WHERE session_key = {KEY}", (fork,)).fetchone()
        lo, hi = 0, -1 if end is None else end + 1
        while lo < hi:
            mid = (lo + hi) // 2
            row = self._copy_at(fork, parent, mid)
            if row is None or row[1] is None or hidden_copy(row):
                hi = mid
            else:
                lo = row[0] + 1  # every ordinal up to this event's is a copy of a visible entry
        row = self._copy_at(fork, parent, lo)
        return row[0] if row is not None and hidden_copy(row) else None

    def _copy_at(self, fork: str, parent: str, ordinal: int) -> tuple[int, int | None] | None:
        """The fork's first event at or after `ordinal`, and the parent's
        ordinal of the same entry (None: the fork's own)."""
        row: tuple[int, int | None] | None = self.conn.execute(
            f"SELECT f.ordinal, p.ordinal FROM events f"
            f" LEFT JOIN events p ON p.session_key = {KEY} AND p.entry_id = f.entry_id"
            f" WHERE f.session_key = {KEY} AND f.ordinal >= ? ORDER BY f.ordinal LIMIT 1",
            (parent, fork, ordinal),
        ).fetchone()
        return row

    def _lineage_caps(self) -> dict[str, int]:
        """First hidden ordinal of the caller's session (-1: all of it while
        the cutoff entry is not indexed) and of each descendant that copied
        something it hides. One walk of the lineage, O(descendants). A fork
        indexed before the session it names is in no walk (its chain to the
        caller's is broken until that session is indexed): each such orphan
        holding a copy of an entry the caller's session hides is capped at
        it, and its own descendants walked, O(orphans)."""
        own = self.scope.current_session
        assert own is not None
        ordinal = self._ordinal_of_cutoff(own)
        caps = {own: -1 if ordinal is None else ordinal}
        file = canonical_ref(self.scope.current_file) if self.scope.current_file else None
        self._cap_descendants(own, [file] if file else [], caps)
        for orphan in orphan_forks(self.conn):
            if orphan not in caps and (cap := self._first_hidden_copy(orphan, own, caps[own])) is not None:
                caps[orphan] = cap
                self._cap_descendants(orphan, [], caps)
        return caps

    def _cap_descendants(self, root: str, also: list[str], caps: dict[str, int]) -> None:
        """Caps of the descendants of `root` (capped in `caps`): each at its
        copy of the cutoff entry or of the first entry its parent hides."""
        for sid, parent in descendants(self.conn, root, also):
            found = [self._ordinal_of_cutoff(sid)]
            if (parent_cap := caps.get(parent or root)) is not None:
                found.append(self._first_hidden_copy(sid, parent or root, parent_cap))
            if (cap := min((o for o in found if o is not None), default=None)) is not None:
                caps[sid] = min(cap, caps.get(sid, cap))

    def _caps(self) -> dict[str, int]:
        if self._lineage is None:
            self._lineage = self._lineage_caps() if self.has_cutoff else {}
        return self._lineage

    def cap(self, session_id: str) -> int | None:
        """First hidden ordinal of a session (the cutoff entry and everything
        after it, in the caller's session and in every session copying it),
        or None. A session outside the lineage that holds a copy of the
        cutoff entry (a fork indexed before the session it names) is capped
        at it too."""
        if not self.has_cutoff:
            return None
        caps = self._caps()
        return caps[session_id] if session_id in caps else self._ordinal_of_cutoff(session_id)

    def session_view(self, session_id: str) -> SessionView | None:
        """What the caller may see of a session's name, time span and event
        count: all of it, or for a capped session only what its events before
        the cap say (the name is the last one set before the cap). None when
        the session is hidden. A capped session costs one range scan of its
        visible events."""
        row = self.session(session_id)
        if row is None:
            return None
        cap = self.cap(session_id)
        if cap is None:
            return SessionView(row.name, row.first_ms, row.last_ms, row.entry_count)
        first, last, count = self.conn.execute(
            f"SELECT min(ts_ms), max(ts_ms), count(*) FROM events WHERE session_key={KEY} AND ordinal < ?",
            (session_id, cap),
        ).fetchone()
        named = self.conn.execute(
            "SELECT json_extract(meta, '$.name') FROM events"
            f" WHERE session_key={KEY} AND ordinal < ? AND type IN ('session_info', 'title_change')"
            " ORDER BY ordinal DESC LIMIT 1",
            (session_id, cap),
        ).fetchone()
        return SessionView((named[0] or None) if named else None, first, last, count)

    def visible_end(self, session_id: str) -> int | None:
        """Where the caller's view of a capped session's file ends (the byte
        offset of its first hidden entry), or None when it is not capped or
        the cutoff entry is not indexed yet (then the caller is waiting for
        its own file, and may see how far it is indexed)."""
        cap = self.cap(session_id)
        if cap is None or cap < 0:
            return None
        row = self.conn.execute(
            f"SELECT byte_offset FROM events WHERE session_key={KEY} AND ordinal=?", (session_id, cap)
        ).fetchone()
        return row[0] if row else None

    def capped_spans(self) -> dict[str, tuple[int | None, int | None]]:
        """(first_ms, last_ms) of the caller's visible events of each fork that
        copied its session (every one, to any depth): a listing orders and
        filters them by these, not by their later activity."""
        own = self.scope.current_session
        spans = {}
        for sid, _ in self.search_caps():
            if sid != own and (view := self.session_view(sid)) is not None:
                spans[sid] = (view.first_ms, view.last_ms)
        return spans

    def partial_sessions(self) -> tuple[list[str], list[tuple[int, int]]]:
        """What `status` must leave out of its aggregates, and add back: the
        sessions the caller may see only in part or not at all (its own
        session without a cutoff; its session and the forks that copied it,
        capped by the cutoff), and for each capped one in the caller's roots
        (visible events, visible bytes: up to the first hidden entry)."""
        own = self.scope.current_session
        if not own:
            return [], []
        if not self.scope.cutoff_entry:
            return [own], []
        excluded, visible = [], []
        for sid, cap in self.search_caps():
            excluded.append(sid)
            if cap < 0 or (view := self.session_view(sid)) is None:
                continue  # an unknown cutoff hides the whole session; outside the roots it is not counted
            end = self.visible_end(sid)
            visible.append((view.events, end or 0))
        return excluded, visible

    def search_caps(self, events: tuple[int, ...] = ()) -> tuple[tuple[str, int], ...]:
        """Every cap a search must apply: the caller's session and each
        descendant the caller may see. `events`: a search restricted to these
        (a follow's new events, delivered once): their sessions holding a copy
        of the cutoff entry are capped too, though not in the lineage yet."""
        if not self.has_cutoff:
            return ()
        own = self.scope.current_session
        assert own is not None
        caps = dict(self._caps())
        if events:
            for (sid,) in self.conn.execute(
                f"SELECT DISTINCT s.session_id FROM events e JOIN sessions s ON s.session_key = e.session_key"
                f" WHERE e.event_rowid {IN_IDS}",
                (id_list(events),),
            ):
                if sid not in caps and (ordinal := self._ordinal_of_cutoff(sid)) is not None:
                    caps[sid] = ordinal
        seen = self.sessions(sid for sid in caps if sid != own)  # the others are invisible anyway
        return ((own, caps[own]), *((sid, cap) for sid, cap in caps.items() if sid in seen))

    # -- events ----------------------------------------------------------------------

    def visible_events(self, pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """The (session, entry) pairs the caller may see: one query per session."""
        by_session: dict[str, set[str]] = {}
        for sid, eid in pairs:
            by_session.setdefault(sid, set()).add(eid)
        self.load(by_session)
        out: set[tuple[str, str]] = set()
        for sid, eids in by_session.items():
            if self.session(sid) is None:
                continue
            cap = self.cap(sid)
            for eid, ordinal in self.conn.execute(
                f"SELECT entry_id, ordinal FROM events WHERE session_key={KEY} AND entry_id {IN_IDS}",
                (sid, id_list(sorted(eids))),
            ):
                if cap is None or ordinal < cap:
                    out.add((sid, eid))
        return out

    def event_visible(self, session_id: str, entry_id: str) -> bool:
        return (session_id, entry_id) in self.visible_events([(session_id, entry_id)])
