"""The ingest worker processes: the pure pipeline of ingest (decode, project,
redact, the text index's `forms`, the tree's per-entry facts), spread over
the machine's cores (`piwatchd.ingest.pipeline`).

The writer stays the only writer of SQLite and of the text index; a worker
only turns a chunk of a file's bytes into flat rows (`model.rows`), sent
back as msgpack: the parse objects themselves cost ~31 us an entry to
unpickle, about what computing them costs, where the rows unpack in ~2 us.

Workers are started on first use with `spawn` (a fork of a process running
Tantivy's threads is unsafe), never outlive the writer (each watches its
parent), and a worker that dies or fails leaves the work to the writer
itself: a batch's result is only ever a speed-up.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Future, ProcessPoolExecutor
from typing import Any

__all__ = ["WORKERS_MAX", "ahead", "configure", "default_workers", "pool", "result", "shutdown", "submit"]

log = logging.getLogger(__name__)

# More processes than cores only costs memory (~40 MB each).
WORKERS_MAX = 8
# A pool whose workers die this often is given up for the process's life (a
# worker that cannot start, say a script without a `__main__` guard, which
# `spawn` imports again in every worker): the writer does the work.
MAX_BREAKS = 3
_lock = threading.Lock()
_size = 0
_breaks = 0
_pool: ProcessPoolExecutor | None = None


def default_workers() -> int:
    """The pool a machine gets unless configured: the cores beyond the two
    the writer keeps busy (its Python thread and Tantivy's indexing thread).
    On 2 cores that is none: a cold index of the 1 GB corpus took 210 s with
    0 workers and 209 s with 1, which added ~100 MB of peak memory."""
    return max(0, min(WORKERS_MAX, (os.cpu_count() or 1) - 2))


def configure(workers: int | None) -> int:
    """Set this process's pool size (None: `default_workers`; 0: no pool, all
    work in the writer). Takes effect on the next start of the pool."""
    global _size, _breaks
    n = default_workers() if workers is None else max(0, min(WORKERS_MAX, int(workers)))
    with _lock:
        _size, _breaks = n, 0
    return n


def ahead() -> int:
    """How many files the writer starts ahead in the pool (`Pipeline.ahead`):
    one per worker and one more, so none waits while the writer inserts."""
    with _lock:
        return _size + 1 if _size and _breaks < MAX_BREAKS else 0


def pool() -> ProcessPoolExecutor | None:
    """The running pool, started on first use; None when configured off."""
    global _pool
    with _lock:
        if _size == 0 or _breaks >= MAX_BREAKS:
            return None
        if _pool is None:
            ctx = multiprocessing.get_context("spawn")
            _pool = ProcessPoolExecutor(_size, mp_context=ctx, initializer=_watch_parent, initargs=(os.getpid(),))
        return _pool


def submit(fn: Callable[..., Any], *args: Any) -> Future[Any] | None:
    """Run `fn(*args)` in a worker; None when there is no pool or it broke
    (the caller does the work itself)."""
    p = pool()
    if p is None:
        return None
    try:
        return p.submit(fn, *args)
    except Exception as exc:  # noqa: BLE001 - a broken pool (a worker died): start a new one next time
        _drop(p, exc)
        return None


def result(future: Future[Any] | None) -> Any | None:
    """A submitted batch's result; None when it failed (the caller does it itself)."""
    if future is None:
        return None
    try:
        return future.result()
    except BrokenExecutor as exc:  # a worker died: start a new pool next time
        with _lock:
            broken = _pool
        if broken is not None:
            _drop(broken, exc)
        return None
    except Exception as exc:  # noqa: BLE001 - any worker failure falls back to the writer
        log.warning("an ingest worker failed (%s); working in the writer", exc)
        return None


def _drop(p: ProcessPoolExecutor, why: BaseException) -> None:
    """Forget a broken pool (once, however many of its batches fail)."""
    global _pool, _breaks
    with _lock:
        if _pool is not p:
            return
        _pool = None
        _breaks += 1
        given_up = _breaks >= MAX_BREAKS
    if given_up:
        log.error("ingest workers keep dying (%s); the writer does their work from now on", why)
    else:
        log.warning("an ingest worker died (%s); working in the writer, a new pool next time", why)
    with contextlib.suppress(Exception):
        p.shutdown(wait=False, cancel_futures=True)


def shutdown() -> None:
    """Stop the workers (the writer closes)."""
    global _pool
    with _lock:
        p, _pool = _pool, None
    if p is not None:
        p.shutdown(wait=True, cancel_futures=True)


def _watch_parent(parent: int) -> None:
    """In each worker: exit when the writer is gone (kill -9 included), so no
    worker outlives it."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="piwatchd-parent-watch", daemon=True).start()
