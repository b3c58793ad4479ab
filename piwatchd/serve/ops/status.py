"""status: index health and the live service's progress, as the caller may see them.

A workspace caller sees only its own sessions' counts and the service's
progress (no paths of other projects' files, no machine-wide file counts:
its own files the index has met instead); `all` (the local CLI) sees
everything. While the index cannot be read, status still answers
(`ready: false`, why, and the service's progress). The first index's
catch-up progress is defined here once, for `status` and for the warning
every answer carries while it runs, and so is the caller's file backlog.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable

import msgspec
from piwatch import wire

from ..auth import CallerScope
from ..shown import Shown
from ..status import caller_files, collect_status
from ..visibility import Visibility
from .request import OpRequest

__all__ = [
    "ServiceSnapshot",
    "caller_backlog",
    "caller_catch_up",
    "catch_up",
    "catch_up_warnings",
    "status",
    "unready_status",
]

# The ingest service's live progress in its one shape; None without a service (the CLI's fallback).
ServiceSnapshot = Callable[[], wire.ServiceStatus | None]


def status(
    args: wire.StatusArgs, req: OpRequest, db_path: str | os.PathLike[str], snapshot: ServiceSnapshot
) -> wire.StatusResult:
    vis = req.vis
    snap = snapshot()
    with req.limited():
        # Sessions past the cutoff (or the caller's own) count only as far as the caller may see them.
        excluded, visible = vis.partial_sessions()
        result = collect_status(vis.conn, db_path, roots=vis.scope.roots, exclude_sessions=excluded)
        for events, end in visible:
            result.sessions, result.events = result.sessions + 1, result.events + events
            if result.bytes is not None:
                result.bytes.files, result.bytes.ingested = result.bytes.files + end, result.bytes.ingested + end
        if snap:
            # The live snapshot is fresher than the row the service last wrote.
            result.service = msgspec.structs.replace(snap, running=True, updated_age_s=0)
        result.catch_up = caller_catch_up(snap, vis)
        return Shown(vis).status(result)  # one step: what the caller is shown of it


def unready_status(scope: CallerScope, snapshot: ServiceSnapshot, error: str) -> wire.StatusResult:
    """Status while the index cannot be read (being created or missing)."""
    snap = snapshot()
    service = Shown(None, scope).service(msgspec.structs.replace(snap, running=True)) if snap else None
    return wire.StatusResult(ready=False, index_error=error, service=service)


def catch_up(snapshot: wire.ServiceStatus | None) -> wire.IndexProgress | None:
    """The first index's progress while it runs (None once caught up, or
    without a live service). One definition for the warning and `status`."""
    if snapshot is None or snapshot.startup_seconds is not None or snapshot.phase in (None, "stopped"):
        return None
    known = snapshot.files_known or 0
    backlog = snapshot.backlog_files or 0
    return wire.IndexProgress(files_done=max(0, known - backlog), files_total=known)


def _caller_files(vis: Visibility) -> tuple[int, int]:
    """(done, total) of a workspace caller's own files (`caller_files`), the
    sessions it sees in part counted as read."""
    assert vis.scope.roots is not None
    excluded, visible = vis.partial_sessions()
    done, total = caller_files(vis.conn, vis.scope.roots, excluded)
    return done + len(visible), total + len(visible)


def caller_catch_up(snapshot: wire.ServiceStatus | None, vis: Visibility) -> wire.IndexProgress | None:
    """The first index's progress as the caller may see it (None when not
    catching up): the service's counts for the whole-index caller; a workspace
    caller's own files the index has met so far (a file's project is known
    only once it is read), never the machine's."""
    progress = catch_up(snapshot)
    if progress is None or vis.scope.roots is None:
        return progress
    done, total = _caller_files(vis)
    return wire.IndexProgress(files_done=done, files_total=total)


def caller_backlog(snapshot: wire.ServiceStatus | None, vis: Visibility | None) -> int | None:
    """The envelope's file backlog as the caller may see it: the service's for
    the whole-index caller; a workspace caller's own files not read to their
    end (counted only while the service has a backlog at all); None before the
    caller is known (an error answered before its visibility) or when the
    index fails now (the answer's error says why)."""
    backlog = snapshot.backlog_files if snapshot else None
    if vis is None or vis.scope.roots is None or not backlog:
        return None if vis is None else backlog
    try:
        done, total = _caller_files(vis)
    except sqlite3.Error:
        return None
    return total - done


def catch_up_warnings(snapshot: wire.ServiceStatus | None, vis: Visibility | None) -> list[wire.Notice]:
    """The service's watch warnings, and the catch-up notice first while the
    first index runs, with the counts the caller may see (`caller_catch_up`;
    none before the caller is known)."""
    out = [wire.Notice(code="watch", message=wire.clip(w)) for w in snapshot.warnings] if snapshot else []
    if catch_up(snapshot) is None:
        return out
    try:
        progress = None if vis is None else caller_catch_up(snapshot, vis)
    except sqlite3.Error:  # the index fails now: the answer's error says why, no counts
        progress = None
    if progress is None:
        message = "indexing: results may be incomplete"
    elif vis is not None and vis.scope.roots is not None:
        message = (
            f"indexing: {progress.files_done} of {progress.files_total} files of this workspace found so far, "
            "results may be incomplete"
        )
    elif progress.files_total == 0:
        message = "indexing: listing the session files, results may be incomplete"
    else:
        message = f"indexing: {progress.files_done} of {progress.files_total} files, results may be incomplete"
    out.insert(0, wire.Notice(code="indexing", message=message))
    return out
