"""Fingerprints: the one place source bytes are hashed.

Two uses. A checkpoint proves the bytes it covers by the hashes of the first
and of the last `FINGERPRINT_BYTES` before its offset: computed from the bytes
as they are consumed (`Window`) and recomputed from the file when it is
observed again (`hash_range`), so both sides must hash the same way. And each
event keeps the fingerprint of its raw line, so `read` can prove the line it
shows is the one that was indexed.

oh-my-pi's files begin with a fixed-size title slot (`{"type":"title",...}`)
that omp rewrites in place while the session grows. Its bytes are masked out
of a checkpoint's hashes (`title_slot_len`, `checkpoint_digest`): a new title
is not a rewrite of the session. Both sides find the slot in the file's first
bytes, so they mask the same range.
"""

from __future__ import annotations

import hashlib
import os

__all__ = [
    "FINGERPRINT_BYTES",
    "Window",
    "checkpoint_digest",
    "digest",
    "hash_range",
    "line_fingerprint",
    "title_slot_len",
]

# Bytes hashed at the start of the file and just before the checkpoint offset.
FINGERPRINT_BYTES = 4096

# omp's slot is 256 bytes; any first line of a title record up to the prefix is one.
_TITLE_SLOT_START = b'{"type":"title"'


def title_slot_len(head: bytes) -> int:
    """The length of the omp title slot line `head` (a file's first bytes)
    begins with, newline included; 0 when it begins with none. Decided by the
    line's start alone, never by its JSON: a slot read while omp rewrites it
    is still the slot (pure)."""
    if not head.startswith(_TITLE_SLOT_START):
        return 0
    end = head.find(b"\n", 0, FINGERPRINT_BYTES)
    return end + 1 if end >= 0 else 0


def checkpoint_digest(data: bytes, start: int, slot: int) -> str | None:
    """`digest` of the file's bytes `data` read from offset `start`, with the
    title slot's bytes [0, slot) masked (pure)."""
    if start < slot and data:
        cut = min(slot - start, len(data))
        data = b"\0" * cut + data[cut:]
    return digest(data)


def digest(data: bytes) -> str | None:
    """The checkpoint hash of `data`; None for no bytes (nothing to prove)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest() if data else None


def line_fingerprint(data: bytes) -> str:
    """An event's fingerprint of its raw line (short: stored per event)."""
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def hash_range(fd: int, start: int, length: int, slot: int = 0) -> str | None:
    """`checkpoint_digest` of the file's bytes [start, start+length); None when
    the file no longer holds them all."""
    if length <= 0:
        return None
    data = os.pread(fd, length, start)
    if len(data) != length:
        return None
    return checkpoint_digest(data, start, slot)


class Window:
    """The first and the most recent FINGERPRINT_BYTES of the bytes consumed,
    and where they end (`end`: the offset after the last byte consumed)."""

    __slots__ = ("end", "prefix", "tail")

    def __init__(self, prefix: bytes = b"", tail: bytes = b"", end: int = 0) -> None:
        self.prefix = prefix
        self.tail = tail
        self.end = end

    def feed(self, data: bytes) -> None:
        if len(self.prefix) < FINGERPRINT_BYTES:
            self.prefix += data[: FINGERPRINT_BYTES - len(self.prefix)]
        self.tail = (self.tail + data[-FINGERPRINT_BYTES:])[-FINGERPRINT_BYTES:]
        self.end += len(data)

    def skip(self, fd: int, start: int, end: int) -> None:
        """Account for bytes [start, end) consumed without being fed (an over-long
        line): only the ones the prefix still lacks and the last FINGERPRINT_BYTES are read."""
        if len(self.prefix) < FINGERPRINT_BYTES:
            self.prefix += os.pread(fd, min(FINGERPRINT_BYTES - len(self.prefix), end - start), start)
        tail_start = max(start, end - FINGERPRINT_BYTES)
        self.tail = (self.tail + os.pread(fd, end - tail_start, tail_start))[-FINGERPRINT_BYTES:]
        self.end = end

    def hashes(self) -> tuple[int, str | None, int, str | None]:
        """(prefix_len, prefix_hash, tail_len, tail_hash) for a checkpoint."""
        slot = title_slot_len(self.prefix)
        return (
            len(self.prefix),
            checkpoint_digest(self.prefix, 0, slot),
            len(self.tail),
            checkpoint_digest(self.tail, self.end - len(self.tail), slot),
        )
