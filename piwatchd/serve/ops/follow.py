"""follow and unfollow, and a standing query's new hits among newly committed events.

`follow` is a request like any other (`Api.handle`): its query is searched
once, so a bad one is refused at once, then the connection it came on
subscribes (`OpRequest.stream`; the socket server holds the subscriptions,
`piwatchd.serve.follow`). The rest is each round's side: the new events in
commit order, and the hits among them through search's own path and
authorization. Partial and repaired matches
are not news: only exact (and, unless `exact`, word-form) hits.

An exact follow (the default) can only have a hit among the new events if
every word of its query is among their words, so a round first analyzes the
few new events' text once (`NewWords`, the same projection and analyzer the
text index was fed with) and searches only for the follows that pass: most
commits match no follow, and a search of a large index costs a follow about
0.5 ms even when it finds nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Set

from piwatch import wire
from piwatch.protocol import ErrorCode, ProtocolError

from ...store.schema import owed_param, owed_sql
from ...store.source_events import project_rows
from ...text.query import QueryError, parse_query
from .request import OpRequest, Streams
from .search import search

__all__ = [
    "NewWords",
    "QueryWords",
    "QUERY_WORDS_MAX",
    "could_match",
    "events_after",
    "follow",
    "follow_hits",
    "newest_event",
    "unfollow",
]

# text -> the index's words of it (the text engine's analysis); None: the engine does not say.
WordsOf = Callable[[str], "list[str] | None"]
# Distinct follow queries whose words are kept between rounds (the hub's follows are bounded
# by connections x MAX_FOLLOWS_PER_CONNECTION; past this the cache starts again).
QUERY_WORDS_MAX = 4096
_UNKNOWN = object()


def could_match(query_words: Iterable[Iterable[str]], present: Set[str]) -> bool:
    """Whether every word of every query term is among `present` (pure): what
    an exact hit needs; False rules the follow's search out."""
    return all(word in present for words in query_words for word in words)


class QueryWords(dict[str, "list[list[str]] | None"]):
    """Follow queries -> their words (None: unknown), kept across rounds for one
    engine's analysis; at most QUERY_WORDS_MAX queries (then it starts again)."""

    def __init__(self, engine: str = "") -> None:
        super().__init__()
        self.engine = engine

    def remember(self, query: str, words: list[list[str]] | None) -> None:
        if len(self) >= QUERY_WORDS_MAX:
            self.clear()
        self[query] = words


class NewWords:
    """The words of a round's new events, projected and analyzed once for all
    its follows. Rules a follow out only when that is certain: an exact
    follow, an engine that says its words, every event's text projected."""

    def __init__(self, conn: sqlite3.Connection, words_of: WordsOf, queries: QueryWords | None = None) -> None:
        self.conn = conn
        self.words_of = words_of
        self._present: dict[tuple[int, ...], frozenset[str] | None] = {}
        # A follow's query is the same every round: its words are analyzed once
        # for all rounds when the caller keeps them (`QueryWords`).
        self._query_words = queries if queries is not None else QueryWords()

    def rules_out(self, args: wire.FollowArgs, events: list[int]) -> bool:
        if not args.exact:
            return False  # word forms match words that are not in the text as written
        key = tuple(events)
        if key not in self._present:
            self._present[key] = self._words(events)
        present = self._present[key]
        query_words = self._query(args.query)
        return present is not None and query_words is not None and not could_match(query_words, present)

    def _query(self, query: str) -> list[list[str]] | None:
        # One lookup (a new follow's validation, on its connection's thread, may clear the cache).
        known = self._query_words.get(query, _UNKNOWN)
        if known is not _UNKNOWN:
            return known  # type: ignore[return-value]
        try:
            analyzed = [self.words_of(term.text) for term in parse_query(query)]
        except QueryError:
            analyzed = [None]  # its search says what is wrong
        words = None if None in analyzed else [w or [] for w in analyzed]
        self._query_words.remember(query, words)
        return words

    def _words(self, events: list[int]) -> frozenset[str] | None:
        rows = project_rows(self.conn, events)
        if len(rows) < len(set(events)):
            return None  # a source changed under us: rule nothing out
        out: set[str] = set()
        for event in rows.values():
            for frag in event.fragments:
                for text in (frag.text, frag.tail, frag.meta):
                    words = self.words_of(text) if text else []
                    if words is None:
                        return None
                    out.update(words)
        return frozenset(out)


def follow(args: wire.FollowArgs, req: OpRequest) -> wire.FollowResult:
    """Subscribe the request's connection to a standing query, once the query is
    searched (its search holds a request slot like any other)."""
    if req.stream is None:
        raise ProtocolError(ErrorCode.UNAVAILABLE, "follow needs piwatchd running: an index file alone never changes")
    with req.slot(req.deadline):
        follow_hits(args, req, [0])  # no event 0: the query is checked, nothing found
    subscription = req.stream.follow(args, req.vis.scope)
    return wire.FollowResult(subscription=subscription, max_queued_hits=wire.FOLLOW_QUEUE_HITS)


def unfollow(args: wire.UnfollowArgs, stream: Streams | None) -> wire.UnfollowResult:
    """End one of the connection's own follows (no caller needed: it names no one else's)."""
    stopped = stream is not None and stream.unfollow(args.subscription)
    return wire.UnfollowResult(subscription=args.subscription, stopped=stopped)


def follow_hits(args: wire.FollowArgs, req: OpRequest, events: list[int]) -> list[wire.Hit]:
    """The follow's hits among `events` (event rowids): one search for each
    MAX_LIMIT of them, whose first page holds all their hits (an event is at
    most one hit). Never pages of one search: the ingest goes on between them,
    and a ranking that moved in between (tied scores are ordered by where the
    documents sit, which a commit changes) repeated some events and skipped
    others (`tests/test_follow.py`)."""
    query = wire.SearchArgs(
        query=args.query,
        filters=args.filters,
        limit=wire.MAX_LIMIT,
        include_own_results=args.include_own_results,
        exact=args.exact,
    )
    hits: list[wire.Hit] = []
    for start in range(0, len(events), wire.MAX_LIMIT):  # none for no events (no restriction: every event)
        result = search(query, req, only_events=tuple(events[start : start + wire.MAX_LIMIT]), slot=False)
        hits.extend(h for h in result.hits if h.tier in ("exact", "forms"))
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
