"""Standing queries (`follow`): new hits for a query and filters, pushed as
their events are committed.

One thread (the hub) wakes on the ingest thread's commit signal, takes the
events committed since it last looked (events' rowids only grow: AUTOINCREMENT)
and runs each subscription's search restricted to those events, through the
api's own search path (same authorization and visibility as `search`).
Subscriptions that ask the same (query, filters, caller scope) of the same new
events share one search, and a round's searches share one index connection and
one visibility per scope: with many subscribers, the per-search setup was
about a third of a round. Hits go into the subscription's bounded queue; a
per-connection pusher thread writes them to the socket. The hub never touches a socket, so a slow reader cannot
hold up the others: when a queue would exceed its bound, that subscription is
dropped with a `slow_consumer` error and nothing more is queued for it. A
reader that takes nothing at all (its socket accepts no frame within the
write timeout) is told the same for each of its follows, and its connection
closed; a connection ended to make room for another client (`busy`) or by
the daemon stopping (`unavailable`) says so too. Every end the daemon
chooses is said in a frame with the follow's request id, as far as the
reader's socket takes it.

Standing queries give way to requests: while any request holds a slot,
a round waits before each follow's search, up to twice as long as that search
took (`Pacer`, at most ROUND_YIELD_SECONDS a round). The hub's searches and
a client's share one interpreter lock, so 100 follows matching every append
(one per 0.2 s) doubled another client's search latency; a follow update may
instead arrive up to ROUND_YIELD_SECONDS later while the daemon is
answering requests back to back.

Memory: a subscription costs its args and a queue of at most
`FOLLOW_QUEUE_HITS` hits; a connection with follows costs one pusher thread;
the hub reads at most `EVENTS_PER_ROUND` new events per search.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import msgspec
from piwatch import wire
from piwatch.protocol import ErrorCode, ProtocolError

from ..ingest.commits import CommitSignal

__all__ = [
    "EVENTS_PER_ROUND",
    "ROUND_YIELD_SECONDS",
    "ConnectionFollows",
    "FollowHub",
    "Outlet",
    "Pacer",
    "Subscription",
]

log = logging.getLogger("piwatchd.follow")

EVENTS_PER_ROUND = 500  # new events searched at once (a catch-up commits thousands)

# A round's waits for requests to finish (`Pacer`): in all, at least at a time, and
# at most this many times the work done since the last wait.
ROUND_YIELD_SECONDS = 1.0
YIELD_STEP_SECONDS = 0.005
YIELD_SHARE = 2.0

# [(subscription, event rowids)], and the round's pacer (called before each search) -> for
# each, its hits among those events, or why its search failed this round (the index is being
# rebuilt, a timeout).
Evaluate = Callable[
    [list[tuple["Subscription", list[int]]], Callable[[], None]], list["list[wire.Hit] | ProtocolError"]
]
# timeout -> whether no request is running (waiting at most `timeout` seconds for that).
RequestsIdle = Callable[[float], bool]


class Pacer:
    """One round's giving way to requests: each call (before a follow's
    search) waits while requests run, at most YIELD_SHARE times as long as
    the round worked since the last call (at least YIELD_STEP_SECONDS), until
    the round's budget is spent. While requests keep coming, a round so takes
    about 1 / (1 + YIELD_SHARE) of the interpreter, and a request waits for
    at most one follow's search at a time."""

    def __init__(
        self,
        idle: RequestsIdle,
        budget: float = ROUND_YIELD_SECONDS,
        step: float = YIELD_STEP_SECONDS,
        share: float = YIELD_SHARE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle, self.left, self.step, self.share, self.clock = idle, budget, step, share, clock
        self._since = clock()

    def __call__(self) -> None:
        start = self.clock()
        if self.left > 0:
            self.idle(min(self.left, max(self.step, (start - self._since) * self.share)))
            self.left -= self.clock() - start
        self._since = self.clock()


# rowid -> up to `limit` event rowids above it, ascending.
EventsAfter = Callable[[int, int], list[int]]


def _no_pace() -> None:
    pass


class Subscription:
    """One follow: what it asks, who asks, and the hits not yet sent."""

    __slots__ = ("after", "args", "conn", "dropped", "id", "key", "queue", "request_id", "scope")

    def __init__(
        self, sub_id: int, request_id: Any, args: wire.FollowArgs, scope: Any, conn: ConnectionFollows, after: int
    ) -> None:
        self.id = sub_id
        self.request_id = request_id
        self.args = args
        self.scope = scope  # the caller's resolved scope (piwatchd.serve.auth.CallerScope)
        self.conn = conn
        self.after = after  # only events above this rowid are new to it
        # What its search depends on: subscriptions with the same key and news share one search.
        self.key = (msgspec.msgpack.encode(args), scope)
        self.queue: deque[wire.Hit] = deque()
        self.dropped = False


class Outlet(Protocol):
    """How a connection's pusher reaches its reader (the server's connection)."""

    write_timeout: float

    def room(self) -> bool:
        """Wait, at most `write_timeout` seconds, until the reader has room for another frame."""

    def send(self, frame: Any) -> bool:
        """Write one frame; False when the connection is gone. Blocks on a slow
        reader, which holds up this connection only."""

    def hang_up(self, frames: list[Any]) -> None:
        """Write what of `frames` fits at once, never waiting, then close the connection."""


class ConnectionFollows:
    """A connection's follows and the thread that writes their updates."""

    def __init__(self, outlet: Outlet, limit: int = wire.MAX_FOLLOWS_PER_CONNECTION) -> None:
        self.outlet = outlet
        self.limit = limit
        self.subs: dict[int, Subscription] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._hanging_up = False  # the frames in _ending are the connection's last
        self._ending: list[tuple[Any, wire.ErrorBody]] = []  # dropped follows' last word
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._push_loop, name="piwatchd-follow-push", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def join(self, timeout: float) -> None:
        """Wait (at most `timeout` seconds) for the pusher to finish, its last words said."""
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def end(self, code: str, why: Callable[[Subscription], str]) -> None:
        """End every follow with an error frame (`code`, `why(sub)`), then the connection."""
        with self._cond:
            self._end_all(code, why)
            self._cond.notify()

    def _end_all(self, code: str, why: Callable[[Subscription], str]) -> None:
        """Holds _cond."""
        for sub in list(self.subs.values()):
            sub.dropped = True
            sub.queue.clear()
            self._ending.append((sub.request_id, wire.ErrorBody(code=code, message=why(sub))))
        self.subs.clear()
        self._hanging_up = True

    def offer(self, sub: Subscription, hits: list[wire.Hit]) -> bool:
        """Queue `hits` for `sub`; False when that would pass the bound (the caller drops it)."""
        with self._cond:
            if sub.dropped:
                return True
            if len(sub.queue) + len(hits) > wire.FOLLOW_QUEUE_HITS:
                return False
            sub.queue.extend(hits)
            self._cond.notify()
            return True

    def drop(self, sub: Subscription, message: str) -> None:
        """End `sub` with an error frame (queued hits are discarded: the reader is behind anyway)."""
        with self._cond:
            sub.dropped = True
            sub.queue.clear()
            self.subs.pop(sub.id, None)
            self._ending.append((sub.request_id, wire.ErrorBody(code=ErrorCode.SLOW_CONSUMER, message=message)))
            self._cond.notify()

    def _next(self) -> tuple[list[wire.Response], bool] | None:
        """The frames to write next, and whether they are the last; None once closed."""
        with self._cond:
            while True:
                frames = [wire.Response(id=rid, ok=False, error=err) for rid, err in self._ending]
                self._ending.clear()
                if self._hanging_up:
                    return frames, True  # said even when the connection closed meanwhile (a stop)
                if self._closed:
                    return None
                for sub in list(self.subs.values()):
                    if sub.queue:
                        hits = [sub.queue.popleft() for _ in range(min(len(sub.queue), wire.MAX_LIMIT))]
                        update = wire.FollowUpdate(subscription=sub.id, hits=hits)
                        frames.append(wire.Response(id=sub.request_id, ok=True, result=update))
                if frames:
                    return frames, False
                self._cond.wait()

    def _push_loop(self) -> None:
        while (step := self._next()) is not None:
            frames, last = step
            if last:
                self.outlet.hang_up(frames)
                return
            for frame in frames:
                if not self.outlet.room():
                    self._stalled()
                    return
                if not self.outlet.send(frame):
                    return  # the connection is gone; its thread ends the follows

    def _stalled(self) -> None:
        """The reader took nothing for the write timeout: each follow ends with
        `slow_consumer`, said while the socket still has room, and the connection closes."""
        timeout = self.outlet.write_timeout
        with self._cond:
            self._end_all(
                ErrorCode.SLOW_CONSUMER,
                lambda sub: (
                    f"follow {sub.id} dropped: too slow: its reader took no update for {timeout:g} s; "
                    "read updates as they come"
                ),
            )
            frames = [wire.Response(id=rid, ok=False, error=err) for rid, err in self._ending]
            self._ending.clear()
        self.outlet.hang_up(frames)


class FollowHub:
    def __init__(self, commits: CommitSignal, newest_event: Callable[[], int], events_after: EventsAfter) -> None:
        self.commits = commits
        self.newest_event = newest_event
        self.events_after = events_after
        self.evaluate: Evaluate | None = None  # set by the api that owns the search path
        self.requests_idle: RequestsIdle | None = None  # set by the server that runs the requests
        self._subs: dict[int, Subscription] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._watermark: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- subscriptions (connection threads) ----------------------------------------------

    def subscribe(self, conn: ConnectionFollows, request_id: Any, args: wire.FollowArgs, scope: Any) -> Subscription:
        with self._lock:
            if len(conn.subs) >= conn.limit:
                raise ProtocolError(
                    ErrorCode.BUSY, f"at most {conn.limit} follows per connection; unfollow one or open a connection"
                )
            # News to this follow: events committed from now on (the hub's watermark may lag
            # behind a session whose text is not searchable yet; those events are not news here).
            now = self.newest_event()
            if self._watermark is None:
                self._watermark = now
            sub = Subscription(next(self._ids), request_id, args, scope, conn, now)
            self._subs[sub.id] = sub
            conn.subs[sub.id] = sub
        self._ensure_thread()
        conn.start()
        return sub

    def unsubscribe(self, conn: ConnectionFollows, sub_id: int) -> bool:
        with self._lock:
            sub = conn.subs.pop(sub_id, None)
            if sub is None:
                return False
            self._subs.pop(sub_id, None)
            return True

    def end_connection(
        self, conn: ConnectionFollows, code: str | None = None, why: Callable[[Subscription], str] | None = None
    ) -> None:
        """The connection's follows are over: closed quietly (its reader is gone),
        or, with `code`, each told why (`why(sub)`) before the connection closes."""
        with self._lock:
            for sub_id in list(conn.subs):
                self._subs.pop(sub_id, None)
            if code is not None and why is not None:
                conn.end(code, why)  # its pusher says so, then closes the connection
            conn.subs.clear()
        conn.close()

    def count(self) -> int:
        with self._lock:
            return len(self._subs)

    # -- the hub thread ------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="piwatchd-follow", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        seen = self.commits.generation
        while not self._stop.is_set():
            generation = self.commits.wait(seen, 1.0)
            if generation == seen:
                continue
            seen = generation
            try:
                self.round()
            except Exception:  # a follow must never take the daemon down; the next commit retries
                log.exception("follow round failed")

    def round(self) -> None:
        """Search what was committed since the last round, for every subscription."""
        with self._lock:
            if not self._subs or self._watermark is None:
                self._watermark = None  # nobody listens: the next subscriber starts at its own now
                return
            low = self._watermark
        while True:
            events = self.events_after(low, EVENTS_PER_ROUND)
            if not events:
                return
            with self._lock:
                subs = list(self._subs.values())
            groups: dict[tuple[Any, tuple[int, ...]], list[Subscription]] = {}
            for sub in subs:
                fresh = tuple(e for e in events if e > sub.after)
                if fresh and not sub.dropped:
                    groups.setdefault((sub.key, fresh), []).append(sub)
            if groups:
                self._offer(list(groups.items()))
            low = events[-1]
            with self._lock:
                self._watermark = low

    def _offer(self, groups: list[tuple[tuple[Any, tuple[int, ...]], list[Subscription]]]) -> None:
        """One search per group; its hits to each member."""
        assert self.evaluate is not None
        pace = Pacer(self.requests_idle) if self.requests_idle is not None else _no_pace
        answers = self.evaluate([(members[0], list(fresh)) for (_, fresh), members in groups], pace)
        for (_, members), hits in zip(groups, answers, strict=True):
            if isinstance(hits, ProtocolError):  # the index is being rebuilt, a timeout: this round only
                log.info("follow %s: %s", ", ".join(str(s.id) for s in members), hits.message)
                continue
            for sub in members:
                if hits:
                    self._queue(sub, hits)

    def _queue(self, sub: Subscription, hits: list[wire.Hit]) -> None:
        if not sub.conn.offer(sub, hits):
            with self._lock:
                self._subs.pop(sub.id, None)
            sub.conn.drop(
                sub,
                f"follow {sub.id} dropped: the reader fell more than {wire.FOLLOW_QUEUE_HITS} hits behind; "
                "read updates as they come, or follow a narrower query",
            )
