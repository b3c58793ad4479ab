"""Fingerprints: the one place source bytes are hashed.

Two uses. A checkpoint proves the bytes it covers by the hashes of the first
and of the last `FINGERPRINT_BYTES` before its offset: computed from the bytes
as they are consumed (`Window`) and recomputed from the file when it is
observed again (`hash_range`), so both sides must hash the same way. And each
event keeps the fingerprint of its raw line, so `read` can prove the line it
shows is the one that was indexed.
"""

from __future__ import annotations

import hashlib
import os

__all__ = ["FINGERPRINT_BYTES", "Window", "digest", "hash_range", "line_fingerprint"]

# Bytes hashed at the start of the file and just before the checkpoint offset.
FINGERPRINT_BYTES = 4096


def digest(data: bytes) -> str | None:
    """The checkpoint hash of `data`; None for no bytes (nothing to prove)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest() if data else None


def line_fingerprint(data: bytes) -> str:
    """An event's fingerprint of its raw line (short: stored per event)."""
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def hash_range(fd: int, start: int, length: int) -> str | None:
    """`digest` of the file's bytes [start, start+length); None when the file
    no longer holds them all."""
    if length <= 0:
        return None
    data = os.pread(fd, length, start)
    if len(data) != length:
        return None
    return digest(data)


class Window:
    """The first and the most recent FINGERPRINT_BYTES of the bytes consumed."""

    __slots__ = ("prefix", "tail")

    def __init__(self, prefix: bytes = b"", tail: bytes = b"") -> None:
        self.prefix = prefix
        self.tail = tail

    def feed(self, data: bytes) -> None:
        if len(self.prefix) < FINGERPRINT_BYTES:
            self.prefix += data[: FINGERPRINT_BYTES - len(self.prefix)]
        self.tail = (self.tail + data[-FINGERPRINT_BYTES:])[-FINGERPRINT_BYTES:]

    def skip(self, fd: int, start: int, end: int) -> None:
        """Account for bytes [start, end) consumed without being fed (an over-long
        line): only the ones the prefix still lacks and the last FINGERPRINT_BYTES are read."""
        if len(self.prefix) < FINGERPRINT_BYTES:
            self.prefix += os.pread(fd, min(FINGERPRINT_BYTES - len(self.prefix), end - start), start)
        tail_start = max(start, end - FINGERPRINT_BYTES)
        self.tail = (self.tail + os.pread(fd, end - tail_start, tail_start))[-FINGERPRINT_BYTES:]

    def hashes(self) -> tuple[int, str | None, int, str | None]:
        """(prefix_len, prefix_hash, tail_len, tail_hash) for a checkpoint."""
        return len(self.prefix), digest(self.prefix), len(self.tail), digest(self.tail)
