"""What every operation is given and shares: the request's visibility and budget.

An operation is `op(args: wire.<Op>Args, req: OpRequest, ...) -> wire.<Op>Result`.
`OpRequest` carries the request's one `Visibility`, its deadline, the
server's request slot, the query time limit and the connection's streams
(`Streams`: follow and unfollow); an operation names the
sessions its answer shows in `req.sessions` (the envelope reports their
freshness). Errors are `ProtocolError`s: a hidden session or event gets
exactly the error a missing one gets (`not_found()`).

A session is named by its id or, as git names a commit, by a unique prefix of
it (`wire.MIN_ID_PREFIX` characters or more): `resolved` turns the args' session
ids into whole ones once, on the request path, among the sessions the caller
may see only.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import msgspec
from piwatch import wire
from piwatch.protocol import ErrorCode, ProtocolError

from ...source.reader import open_source
from ...store.tree_store import DbTreeView
from ...text.search import QueryTimeout, time_limit
from ..auth import CallerScope
from ..visibility import NOT_FOUND_MESSAGE, Visibility

__all__ = [
    "NO_SESSION_MESSAGE",
    "OpRequest",
    "Slot",
    "Streams",
    "bad_request",
    "file_progress",
    "no_slot",
    "not_found",
    "resolved",
]

# slot(deadline, heavy=False): a request slot (the server's are shared fairly between clients;
# an expensive request takes a heavy one).
Slot = Callable[..., contextlib.AbstractContextManager[None]]
T = TypeVar("T")
_TAIL_SCAN_MAX = 8 << 20  # bytes after the indexed end read to find a complete line
# No message quotes the id asked for: a hidden session's answer is exactly a missing one's.
NO_SESSION_MESSAGE = "no session with this id, or beginning with it, among the sessions this caller may see"
SHORT_ID_MESSAGE = f"a session id is the whole id or a unique prefix of at least {wire.MIN_ID_PREFIX} characters"
AMBIGUOUS_SHOWN = 5  # sessions an ambiguous prefix lists


class Streams(Protocol):
    """What `follow` and `unfollow` need of the connection a request came on: its
    standing queries (the socket server keeps them; an index file alone has none)."""

    def follow(self, args: wire.FollowArgs, scope: CallerScope) -> int:
        """Subscribe (room made among the connections), the new subscription's id;
        ProtocolError(busy) past the limits."""
        ...

    def unfollow(self, subscription: int) -> bool:
        """End one of this connection's follows; False when it has none by that id."""
        ...


@contextlib.contextmanager
def no_slot(deadline: float, heavy: bool = False) -> Iterator[None]:
    """The slot of a caller with no concurrency limit (the local CLI)."""
    yield


def not_found(message: str = NOT_FOUND_MESSAGE) -> ProtocolError:
    return ProtocolError(ErrorCode.NOT_FOUND, wire.clip(message))


def bad_request(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.BAD_REQUEST, wire.clip(message))


class OpRequest:
    """One request as its operation sees it."""

    def __init__(
        self, vis: Visibility, deadline: float, slot: Slot, query_timeout: float, stream: Streams | None = None
    ) -> None:
        self.vis = vis
        self.deadline = deadline
        self.slot = slot
        self.query_timeout = query_timeout
        self.stream = stream  # the connection's standing queries, where it has them
        self.sessions: list[str] = []  # sessions the answer names, for freshness and warnings

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ProtocolError(ErrorCode.TIMEOUT, "the request used up its time budget")
        return left

    def query_seconds(self) -> float:
        """The time one query may take: the query timeout, within the request's budget."""
        return min(self.query_timeout, self.remaining())

    @contextlib.contextmanager
    def limited(self, *, slot: bool = True) -> Iterator[None]:
        """Hold a request slot (unless the caller already holds one) and bound
        the queries run inside by the time left."""
        with self.slot(self.deadline) if slot else contextlib.nullcontext():
            try:
                with time_limit(self.vis.conn, self.query_seconds()):
                    yield
            except QueryTimeout as exc:
                raise ProtocolError(ErrorCode.TIMEOUT, str(exc)) from None

    def require_event(self, session_id: str, entry_id: str) -> None:
        """Not found unless the caller may see this event (hidden looks missing)."""
        if not self.vis.event_visible(session_id, entry_id):
            raise not_found()

    def session_id(self, given: str, *, required: bool = True) -> str:
        """The whole id of the visible session `given` names (its id, or a
        unique prefix of at least MIN_ID_PREFIX characters). An ambiguous prefix
        or a short id that names no session is a bad request; a prefix matching
        no session is not found when `required`, else `given` is kept (a search
        filter may name a session still to be indexed)."""
        if self.vis.session(given) is not None:
            return given
        if len(given) < wire.MIN_ID_PREFIX:
            if required:
                raise bad_request(SHORT_ID_MESSAGE)
            return given
        matches = self.vis.sessions_with_prefix(given, AMBIGUOUS_SHOWN + 1)
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            more = "more than " if len(matches) > AMBIGUOUS_SHOWN else ""
            shown = ", ".join(matches[:AMBIGUOUS_SHOWN]) + (", …" if more else "")
            raise bad_request(
                f"the session id prefix is ambiguous: {more}{min(len(matches), AMBIGUOUS_SHOWN)} sessions begin"
                f" with it ({shown}); give more of the id"
            )
        if required:
            raise not_found(NO_SESSION_MESSAGE)
        return given

    def on_event(self, session_id: str, entry_id: str, body: Callable[[DbTreeView], T]) -> T:
        """`body` over the session's tree, within the request's limits, once the caller
        may see the event (read and trace); the answer names that session."""
        with self.limited():
            self.require_event(session_id, entry_id)
            result = body(DbTreeView(self.vis.conn, session_id))
        self.sessions = [session_id]
        return result


def resolved(args: wire.Wire, req: OpRequest) -> wire.Wire:
    """`args` with each session id it names made whole (`OpRequest.session_id`):
    read's, trace's and reindex's session, and a search's or follow's session filter."""
    replace = msgspec.structs.replace
    with req.limited(slot=False):
        if isinstance(args, (wire.ReadArgs, wire.TraceArgs, wire.ReindexArgs)) and args.session_id is not None:
            return replace(args, session_id=req.session_id(args.session_id))
        if isinstance(args, (wire.SearchArgs, wire.FollowArgs)) and args.filters.session_id:
            ids = [req.session_id(given, required=False) for given in args.filters.session_id]
            return replace(args, filters=replace(args.filters, session_id=ids))
    return args


def file_progress(path: str, consumed: int) -> tuple[int | None, bool]:
    """(file size, caught up) for a source indexed up to `consumed` bytes.

    Only complete lines are ever indexed, so a file whose bytes past
    `consumed` hold no newline (Pi is mid-write of its last line) is caught
    up: nothing more can be indexed until that line ends.
    """
    try:
        st = os.stat(path)  # a stat never blocks; a caught-up file needs nothing more
    except (OSError, ValueError):
        return None, False
    if not stat.S_ISREG(st.st_mode):
        return None, False
    if consumed >= st.st_size:
        return st.st_size, True
    try:
        fd = open_source(path)  # regular files only, never blocks (a FIFO named by a caller)
    except (OSError, ValueError):
        return None, False
    try:
        size = os.fstat(fd).st_size
        if consumed >= size:
            return size, True
        if size - consumed > _TAIL_SCAN_MAX:
            return size, False
        return size, b"\n" not in os.pread(fd, size - consumed, consumed)
    except OSError:
        return None, False
    finally:
        os.close(fd)
