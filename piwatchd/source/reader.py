"""File I/O for sources: open defensively, observe a file against its
checkpoint, read newline-aligned byte ranges.

Every open of a session file goes through `open_source`: a FIFO named
`*.jsonl` would block a plain `open()` forever (and with it the only ingest
thread), a device could answer endlessly, and a directory or socket has no
lines. Only regular files are read, and opening never blocks.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from .fingerprint import hash_range
from .tailer import Checkpoint, Observation

__all__ = ["MAX_LINE_BYTES", "READ_CHUNK", "NotRegularFile", "Overlong", "observe", "open_source", "read_chunks"]

READ_CHUNK = 8 * 1024 * 1024
# Pi writes one entry per line; no real entry comes near this. A longer line (a sparse file of
# NULs, a runaway tool output) is skipped with a diagnostic instead of being buffered whole.
MAX_LINE_BYTES = 64 * 1024 * 1024

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


class NotRegularFile(OSError):
    """The path names a FIFO, socket, device or directory: never read."""

    def __str__(self) -> str:
        return self.strerror or "not a regular file"


def _kind(mode: int) -> str | None:
    """What a non-regular file is, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _refuse(fd: int | None, mode: int) -> None:
    kind = _kind(mode)
    if kind is not None:
        if fd is not None:
            os.close(fd)
        raise NotRegularFile(errno.EINVAL, f"{kind}, not a regular file: never read")


def open_source(path: str) -> int:
    """A read-only descriptor of the regular file at `path`.

    Stat first (a FIFO or device is never opened at all), then open with
    O_NONBLOCK (a FIFO swapped in meanwhile cannot block the open) and check
    again on the descriptor, which is what is read. Raises OSError, including
    NotRegularFile.
    """
    _refuse(None, os.stat(path).st_mode)
    fd = os.open(path, _OPEN_FLAGS)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    _refuse(fd, mode)
    return fd


def _error(exc: OSError) -> str:
    if isinstance(exc, NotRegularFile):
        return str(exc)
    return errno.errorcode.get(exc.errno or 0, str(exc))


def observe(path: str, checkpoint: Checkpoint | None) -> Observation:
    """Stat and fingerprint `path`; never raises for a missing, unreadable or
    non-regular file (the latter two are observations with an error)."""
    try:
        fd = open_source(path)
    except (FileNotFoundError, NotADirectoryError):
        return Observation(exists=False)
    except OSError as exc:
        return Observation(exists=True, error=_error(exc))
    except ValueError:  # a NUL in the path: nothing can exist there
        return Observation(exists=False)
    try:
        st = os.fstat(fd)
        prefix_hash = tail_hash = None
        same = checkpoint is not None and (st.st_dev, st.st_ino) == (checkpoint.dev, checkpoint.ino)
        if same and checkpoint is not None and st.st_size >= checkpoint.consumed:
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
        return Observation(exists=True, error=_error(exc))
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class Overlong:
    """Bytes [start, end) of a line longer than the line cap, read past without being buffered.

    `line_at` is where that line begins; `complete` once its newline has been read. A line not
    complete when the read stops is resumed from `end` by the next read (`overlong_at`).
    """

    line_at: int
    start: int
    end: int
    complete: bool


def read_chunks(
    fd: int,
    start: int,
    end: int,
    chunk: int = READ_CHUNK,
    *,
    max_line: int = MAX_LINE_BYTES,
    overlong_at: int | None = None,
) -> Iterator[tuple[int, bytes] | Overlong]:
    """Yield (offset, bytes) pieces of [start, end) that each end at a newline,
    and `Overlong` ranges for lines longer than `max_line`.

    A line up to `max_line` is read whole: a record is never split. A longer one
    is skipped in chunks (memory stays bounded by `max_line` plus a chunk), and
    `overlong_at` says a read starts inside one. The bytes after the last newline
    before `end` are not yielded, unless they belong to an over-long line.
    Pending bytes are kept as a list of pieces and joined once per yield, so a
    long line costs linear copying, not one copy of the line per chunk.
    """
    chunk = max(1, min(chunk, max_line))
    offset = start
    pieces: list[bytes] = []
    pending = 0  # bytes in pieces
    line_at = start  # where the pending (or skipped) line begins
    skipping = overlong_at is not None
    if overlong_at is not None:
        line_at = overlong_at
    while offset < end:
        data = os.pread(fd, min(chunk, end - offset), offset)
        if not data:
            break
        at = offset
        offset += len(data)
        if skipping:
            newline = data.find(b"\n")
            if newline < 0:
                yield Overlong(line_at, at, offset, False)
                continue
            yield Overlong(line_at, at, at + newline + 1, True)
            skipping = False
            data, at = data[newline + 1 :], at + newline + 1
            line_at = at
            if not data:
                continue
        first = data.find(b"\n")
        if first < 0:
            pieces.append(data)
            pending += len(data)
            if pending > max_line:
                yield Overlong(line_at, line_at, offset, False)
                pieces, pending, skipping = [], 0, True
            continue
        if pending + first > max_line:
            yield Overlong(line_at, line_at, at + first + 1, True)
            pieces, pending = [], 0
            data, at = data[first + 1 :], at + first + 1
            line_at = at
        cut = data.rfind(b"\n")
        if cut >= 0:
            yield line_at, b"".join([*pieces, data[: cut + 1]])
            pieces, pending = [], 0
            data, at = data[cut + 1 :], at + cut + 1
            line_at = at
        if data:
            pieces.append(data)
            pending += len(data)
