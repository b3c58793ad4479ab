"""Keep the daemon's heap from creeping: fewer malloc arenas, freed pages returned.

The server runs a thread per connection. glibc gives threads their own malloc
arenas (up to 8 per core), and each arena keeps the memory its thread freed:
a long run of clients on changing threads leaves many half-empty arenas, so
resident memory climbs with no Python object behind it. Limiting the arenas
and trimming the heap when idle keeps anonymous memory level. Off glibc (macOS,
musl) both are no-ops.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

__all__ = ["ARENAS", "limit_arenas", "trim"]

log = logging.getLogger("piwatchd.memory")

ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter


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


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas; call before the server's threads start. True when applied."""
    if _LIBC is None:
        return False
    return bool(_LIBC.mallopt(_M_ARENA_MAX, arenas))


def trim() -> bool:
    """Return free heap pages to the system (glibc `malloc_trim(0)`). True when some were released."""
    if _LIBC is None:
        return False
    return bool(_LIBC.malloc_trim(0))
