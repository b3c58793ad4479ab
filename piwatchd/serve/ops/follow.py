"""follow's evaluation: a standing query's new hits among newly committed events.

The socket server holds the subscriptions (`piwatchd.serve.follow`); this is the
request-path side: the new events in commit order, and the hits among them
through search's own path and authorization. Partial and repaired matches
are not news: only exact (and, unless `exact`, word-form) hits.
"""

from __future__ import annotations

import sqlite3

from piwatch import wire

from ...store.schema import owed_param, owed_sql
from .request import OpRequest
from .search import search

__all__ = ["events_after", "follow_hits", "newest_event"]


def follow_hits(args: wire.FollowArgs, req: OpRequest, events: list[int]) -> list[wire.Hit]:
    """The follow's hits among `events` (event rowids)."""
    if not events:
        return []  # (no restriction would mean every event)
    query = wire.SearchArgs(
        query=args.query,
        filters=args.filters,
        limit=wire.MAX_LIMIT,
        include_own_results=args.include_own_results,
        exact=args.exact,
    )
    hits: list[wire.Hit] = []
    for offset in range(0, len(events) + 1, wire.MAX_LIMIT):  # an event is at most one hit
        query.offset = offset
        result = search(query, req, only_events=tuple(events), slot=False)
        hits.extend(h for h in result.hits if h.tier in ("exact", "forms"))
        if not result.has_more:
            break
    return hits


def newest_event(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT max(event_rowid) FROM events").fetchone()
    return int(row[0] or 0)


def events_after(conn: sqlite3.Connection, rowid: int, limit: int) -> list[int]:
    """Searchable events above `rowid`, ascending: up to the first whose session still
    waits for its text to be searchable (`owed_sql`), so none is passed over unseen.
    A session whose re-feed failed before (attempts > 0) holds nobody up."""
    rows = conn.execute(
        f"SELECT e.event_rowid, {owed_sql('s.session_id', suspects=False)}"
        " FROM events e JOIN sessions s ON s.session_key = e.session_key"
        " WHERE e.event_rowid > ? ORDER BY e.event_rowid LIMIT ?",
        (owed_param(conn), rowid, limit),
    )
    out: list[int] = []
    for event, owed in rows:
        if owed:
            break
        out.append(event)
    return out
