"""Keep the daemon's heap from creeping: fewer malloc arenas, freed pages returned.

The server runs a thread per connection. glibc gives threads their own malloc
arenas (up to 8 per core), and each arena keeps the memory its thread freed:
a long run of clients on changing threads leaves many half-empty arenas, so
resident memory climbs with no Python object behind it. Limiting the arenas
and trimming the heap when idle keeps anonymous memory level.

Large blocks are mapped on their own, always: Tantivy's writers set up a
4 MB table (and 1 MB pages) for each new segment, the RAM overlay's after
every published append. glibc's default raises its mmap threshold to the
largest block freed, so after the first those blocks came from the arenas,
between small long-lived ones: 20-40 MB of free chunks that trimming every
30 s could not keep down (they are re-dirtied by the next table), half the
daemon's anonymous memory in a soak and most of its swing between samples.
A fixed threshold (MMAP_THRESHOLD) returns each at once; it costs page
faults, ~1.5 ms of CPU a published append (measured in-process: 4.4-5.0 ->
6.1-6.2 ms for the overlay's add, commit and reload; searches unchanged).

Each thread's cache of freed small blocks is off (glibc's tcache:
`THREAD_CACHE_OFF`). Up to 7 blocks of each of 64 sizes stay with the
thread that freed them, ~240 KB a thread at most, counted as in use and
out of reach of trimming; a follow connection keeps two threads (reader
and pusher) for as long as it lasts, so 100 followers (213 threads) held
a cache that filled for the whole soak: with it off, the heap in use of a
followers-only soak (SQLite's share aside) grew 0.2 instead of 0.6 MB/min
and sat 6-8 MB lower, and issue 33's 60-minute soak levelled off (last 20
minutes +0.09 instead of +0.61 MB/min). glibc reads it at start only
(GLIBC_TUNABLES), so the daemon's entry point runs itself again with it
set (`thread_cache_env`); the pid stays. The cost is one more interpreter
start-up and import of the daemon's modules (~0.2 s of CPU). Off glibc
(macOS, musl) all of this is a no-op.

Finding what grows (a debugging aid, used by `python -m bench.soak`): with
PIWATCH_MEMLOG=DIR the daemon appends its memory's parts to DIR/heap.jsonl
every LOG_SECONDS (anonymous resident memory, glibc's heap in use and free,
SQLite's own allocations, threads), so a growth can be placed in Python
objects, SQLite, or the rest of the native heap (Tantivy); with
PIWATCH_TRACEMALLOC=1 as well it traces Python's allocations and writes a
tracemalloc snapshot beside each line (`<seconds>.tm`; slow).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import logging
import os
import platform
import threading
import time
import tracemalloc
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "ARENAS",
    "LOG_ENV",
    "MMAP_THRESHOLD",
    "THREAD_CACHE_OFF",
    "TRACE_ENV",
    "MemoryLog",
    "heap_figures",
    "on_glibc",
    "thread_cache_env",
    "trim",
    "tune_heap",
]

log = logging.getLogger("piwatchd.memory")

ARENAS = 2
MMAP_THRESHOLD = 1 << 20  # blocks of this size or more are mapped apart and returned at free
_M_ARENA_MAX = -8  # glibc's mallopt parameters
_M_MMAP_THRESHOLD = -3
LOG_ENV = "PIWATCH_MEMLOG"
TRACE_ENV = "PIWATCH_TRACEMALLOC"
LOG_SECONDS = 60.0
THREAD_CACHE_OFF = "glibc.malloc.tcache_count=0"  # a glibc tunable, read at process start
_TUNABLES = "GLIBC_TUNABLES"
TRACE_FRAMES = 8  # frames kept per allocation: enough to name the caller of a shared helper


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


_LIBC = _libc()


def tune_heap(arenas: int = ARENAS, mmap_threshold: int = MMAP_THRESHOLD) -> bool:
    """Cap glibc's malloc arenas and fix its mmap threshold; call before the
    server's threads start. True when applied."""
    if _LIBC is None:
        return False
    return bool(_LIBC.mallopt(_M_ARENA_MAX, arenas)) and bool(_LIBC.mallopt(_M_MMAP_THRESHOLD, mmap_threshold))


def thread_cache_env(env: Mapping[str, str], on_glibc: bool = True) -> dict[str, str] | None:
    """`env` with glibc's per-thread caches off (THREAD_CACHE_OFF added to any
    tunables already set), or None when there is nothing to change: not on
    glibc, or the caller already chose a tcache count (theirs is kept)."""
    tunables = env.get(_TUNABLES, "")
    if not on_glibc or "glibc.malloc.tcache_count=" in tunables:
        return None
    return {**env, _TUNABLES: ":".join(filter(None, (tunables, THREAD_CACHE_OFF)))}


def on_glibc() -> bool:
    return _LIBC is not None and platform.libc_ver()[0] == "glibc"


def trim() -> bool:
    """Return free heap pages to the system (glibc `malloc_trim(0)`). True when some were released."""
    if _LIBC is None:
        return False
    return bool(_LIBC.malloc_trim(0))


def _sqlite() -> ctypes.CDLL | None:
    """The SQLite library Python's sqlite3 module uses (where it is shared), for its allocation figures."""
    name = ctypes.util.find_library("sqlite3")
    try:
        lib = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return lib if lib is not None and hasattr(lib, "sqlite3_status64") else None


def heap_figures() -> dict[str, int]:
    """The memory's parts in bytes: anonymous resident memory; glibc's heap
    (`mallinfo2`: in use, free inside the arenas, mmapped blocks); what SQLite
    holds; threads. A part the platform cannot say is left out."""
    out: dict[str, int] = {"threads": threading.active_count()}
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("RssAnon:"):
                out["rss_anon"] = int(line.split()[1]) * 1024
    if _LIBC is not None and hasattr(_LIBC, "mallinfo2"):
        _LIBC.mallinfo2.restype = _MallInfo2
        info = _LIBC.mallinfo2()
        out.update(in_use=info.uordblks, free=info.fordblks, mmapped=info.hblkhd)
    lib = _sqlite()
    if lib is not None:
        used, peak = ctypes.c_int64(), ctypes.c_int64()
        if lib.sqlite3_status64(0, ctypes.byref(used), ctypes.byref(peak), 0) == 0:  # SQLITE_STATUS_MEMORY_USED
            out["sqlite"] = used.value
    out.update(_anonymous_by_mapping())
    return out


_STACK_BYTES = 8 << 20  # glibc's default thread stack (RLIMIT_STACK)
_PY_ARENA_BYTES = 1 << 20  # CPython's small-object arenas (3.10+)


def _anonymous_by_mapping() -> dict[str, int]:
    """Resident anonymous memory by the kind of mapping that holds it (Linux
    `smaps`), told apart by their sizes: thread stacks, CPython's small-object
    arenas, glibc's heaps (the main one and the arenas' 64 MB reservations), the rest."""
    kinds = {"anon_stacks": 0, "anon_py_arenas": 0, "anon_heaps": 0, "anon_other": 0}
    kind = None
    with contextlib.suppress(OSError, ValueError), open("/proc/self/smaps") as fh:
        for line in fh:
            head = line.split()
            if "-" in head[0] and len(head) >= 5:  # a mapping's first line: range perms offset dev inode [path]
                start, end = (int(x, 16) for x in head[0].split("-"))
                kind = _kind(end - start, head[5] if len(head) > 5 else "")
            elif head[0] == "Anonymous:" and kind is not None:
                kinds[kind] += int(head[1]) * 1024
    return kinds


def _kind(size: int, path: str) -> str | None:
    if path == "[heap]" or (not path and size >= 32 << 20):
        return "anon_heaps"
    if path:
        return None
    return {_STACK_BYTES: "anon_stacks", _PY_ARENA_BYTES: "anon_py_arenas"}.get(size, "anon_other")


class MemoryLog:
    """PIWATCH_MEMLOG=DIR: the memory's parts appended every LOG_SECONDS (`tick()`
    from the main thread's upkeep); with PIWATCH_TRACEMALLOC=1, a tracemalloc snapshot too."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.folder = Path(env[LOG_ENV]) if env.get(LOG_ENV) else None
        self.started = time.monotonic()
        self.due = self.started
        self.trace = self.folder is not None and env.get(TRACE_ENV) == "1"
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
        if self.trace:
            tracemalloc.start(TRACE_FRAMES)
            log.warning("tracing Python allocations into %s (slow: a debugging aid)", self.folder)

    def tick(self) -> None:
        if self.folder is None or time.monotonic() < self.due:
            return
        self.due += LOG_SECONDS
        at = int(time.monotonic() - self.started)
        if self.trace:
            tracemalloc.take_snapshot().dump(str(self.folder / f"{at}.tm"))
        with open(self.folder / "heap.jsonl", "a") as fh:
            fh.write(json.dumps({"at": at, **heap_figures()}) + "\n")
