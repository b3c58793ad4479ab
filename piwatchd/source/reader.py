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

from .fingerprint import hash_range, title_slot_len
from .lines import LineCutter, Overlong
from .parser import slot_title
from .tailer import Checkpoint, Observation, stat_unchanged

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
        if stat_unchanged(checkpoint, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns):
            return Observation(
                exists=True, dev=st.st_dev, ino=st.st_ino, size=st.st_size, mtime_ns=st.st_mtime_ns, hashed=False
            )
        prefix_hash = tail_hash = title = None
        slot = 0
        same = checkpoint is not None and (st.st_dev, st.st_ino) == (checkpoint.dev, checkpoint.ino)
        if same and checkpoint is not None and st.st_size >= checkpoint.consumed:
            head = os.pread(fd, checkpoint.prefix_len, 0)
            slot = title_slot_len(head)
            title = slot_title(head[:slot])
            prefix_hash = hash_range(fd, 0, checkpoint.prefix_len, slot)
            tail_hash = hash_range(fd, checkpoint.consumed - checkpoint.tail_len, checkpoint.tail_len, slot)
        return Observation(
            exists=True,
            dev=st.st_dev,
            ino=st.st_ino,
            size=st.st_size,
            mtime_ns=st.st_mtime_ns,
            prefix_hash=prefix_hash,
            tail_hash=tail_hash,
            titled=slot > 0,
            title=title,
        )
    except OSError as exc:
        return Observation(exists=True, error=_error(exc))
    finally:
        os.close(fd)


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
    and `Overlong` ranges for lines longer than `max_line` (the cutting is
    `LineCutter`'s; this is its I/O loop).

    A line up to `max_line` is read whole: a record is never split. A longer one
    is skipped in chunks (memory stays bounded by `max_line` plus a chunk), and
    `overlong_at` says a read starts inside one. The bytes after the last newline
    before `end` are not yielded, unless they belong to an over-long line.
    """
    chunk = max(1, min(chunk, max_line))
    cutter = LineCutter(start, max_line, overlong_at)
    offset = start
    while offset < end:
        data = os.pread(fd, min(chunk, end - offset), offset)
        if not data:
            break
        yield from cutter.feed(offset, data)
        offset += len(data)
