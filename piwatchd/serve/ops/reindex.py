"""reindex: queue one visible session (or, for the local CLI, every session)
to be re-read from its source file by the running ingest service."""

from __future__ import annotations

from collections.abc import Callable

from piwatch import wire
from piwatch.protocol import ErrorCode, ProtocolError

from .request import NO_SESSION_MESSAGE, OpRequest, bad_request, not_found

__all__ = ["reindex"]


def reindex(
    args: wire.ReindexArgs, req: OpRequest, request_reindex: Callable[[str | None], None] | None
) -> wire.ReindexResult:
    """`request_reindex(path)` queues a file (None: all); without it there is no service to ask."""
    if request_reindex is None:
        raise ProtocolError(ErrorCode.UNAVAILABLE, "reindex needs the running ingest service (start piwatchd)")
    if args.session_id is None:
        if req.vis.scope.roots is not None:
            raise bad_request("reindex of every session is for the local CLI (caller all)")
        request_reindex(None)
        return wire.ReindexResult(queued="all")
    row = req.vis.session(args.session_id)
    if row is None:  # made whole on the request path: gone since
        raise not_found(NO_SESSION_MESSAGE)
    request_reindex(row.path)
    req.sessions = [args.session_id]
    return wire.ReindexResult(queued=args.session_id)
