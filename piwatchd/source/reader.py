"""File I/O for sources: observe a file against its checkpoint, read byte ranges."""

from __future__ import annotations

import errno
import hashlib
import os
from typing import Iterator

from .tailer import FINGERPRINT_BYTES, Checkpoint, Observation

__all__ = ["observe", "read_chunks", "hash_range", "checkpoint_hashes", "READ_CHUNK"]

READ_CHUNK = 8 * 1024 * 1024


def hash_range(fd: int, start: int, length: int) -> str | None:
    if length <= 0:
        return None
    data = os.pread(fd, length, start)
    if len(data) != length:
        return None
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def checkpoint_hashes(fd: int, consumed: int) -> tuple[int, str | None, int, str | None]:
    """(prefix_len, prefix_hash, tail_len, tail_hash) proving bytes before `consumed`."""
    n = min(FINGERPRINT_BYTES, consumed)
    return n, hash_range(fd, 0, n), n, hash_range(fd, consumed - n, n)


def observe(path: str, checkpoint: Checkpoint | None) -> Observation:
    """Stat and fingerprint `path`; never raises for a missing or unreadable file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return Observation(exists=False)
    except NotADirectoryError:
        return Observation(exists=False)
    except OSError as exc:
        return Observation(exists=True, error=errno.errorcode.get(exc.errno or 0, str(exc)))
    try:
        st = os.fstat(fd)
        prefix_hash = tail_hash = None
        if checkpoint is not None and (st.st_dev, st.st_ino) == (checkpoint.dev, checkpoint.ino):
            if st.st_size >= checkpoint.consumed:
                prefix_hash = hash_range(fd, 0, checkpoint.prefix_len)
                tail_hash = hash_range(fd, checkpoint.consumed - checkpoint.tail_len, checkpoint.tail_len)
        return Observation(
            exists=True,
            dev=st.st_dev,
            ino=st.st_ino,
            size=st.st_size,
            mtime_ns=st.st_mtime_ns,
            prefix_hash=prefix_hash,
            tail_hash=tail_hash,
        )
    except OSError as exc:
        return Observation(exists=True, error=errno.errorcode.get(exc.errno or 0, str(exc)))
    finally:
        os.close(fd)


def read_chunks(fd: int, start: int, end: int, chunk: int = READ_CHUNK) -> Iterator[tuple[int, bytes]]:
    """Yield (offset, bytes) pieces of [start, end) that each end at a newline.

    A line longer than `chunk` is read whole: a record is never split. The
    bytes after the last newline before `end` are not yielded.
    """
    offset = start
    pending = b""
    pending_at = start
    while offset < end:
        data = os.pread(fd, min(chunk, end - offset), offset)
        if not data:
            break
        offset += len(data)
        buf = pending + data if pending else data
        cut = buf.rfind(b"\n")
        if cut < 0:
            pending = buf
            continue
        yield pending_at, buf[: cut + 1]
        pending = buf[cut + 1 :]
        pending_at = offset - len(pending)
