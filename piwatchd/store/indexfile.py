"""The index on disk: a private file, one writer, rebuilt when unusable.

The index holds the whole history of every session, so it is created 0600
in a 0700 directory, and an older, wider file is tightened at start. SQLite
creates its `-wal` and `-shm` files with the mode of the database file, so
pre-creating the database 0600 covers them; the process umask (0077, set by
the daemon and by `index --once`) covers whatever else appears beside it
(the lock file, a text-index directory).

An existing directory is only tightened when piwatch owns its purpose (it
created it, or it is piwatch's default state directory): `--db ~/x.sqlite3`
must not change the mode of a home directory.

One writer per index: piwatchd and `piwatch index --once` both take the
index lock (`<db>.lock`). The SQLite file is the index's anchor: a file SQLite
cannot read as an index is discarded (with its WAL) and rebuilt from the
session files; the index is a disposable read model.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sqlite3
import stat
from pathlib import Path
from typing import IO

from ..text.engine import DEFAULT_ENGINE, all_engines

__all__ = [
    "PRIVATE_UMASK",
    "SIDE_SUFFIXES",
    "IndexBusy",
    "NotAnIndex",
    "discard_index",
    "file_identity",
    "hold_lock",
    "lock_index",
    "open_or_rebuild",
    "prepare_index_path",
]

PRIVATE_UMASK = 0o077
# Files that live beside the database and hold (or lock) its contents.
SIDE_SUFFIXES = ("-wal", "-shm", ".lock", "-journal")


def _default_dir() -> Path | None:
    try:
        import platformdirs

        return Path(platformdirs.user_state_dir("piwatch"))
    except ImportError:
        return None


def _tighten(path: Path, mode: int) -> None:
    """chmod `path` to `mode` if it exists, is ours and is wider."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if st.st_uid == os.getuid() and not stat.S_ISLNK(st.st_mode) and stat.S_IMODE(st.st_mode) & ~mode:
        os.chmod(path, mode)


def file_identity(db_path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(device, inode) of the index file, None when there is none: a file removed
    or replaced at the same path (a rebuild) has another identity."""
    try:
        st = os.stat(db_path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def prepare_index_path(db_path: str | os.PathLike[str]) -> Path:
    """Make the index's directory and file private (creating both if needed)
    and set a private umask for this process. Returns the path."""
    os.umask(PRIVATE_UMASK)
    db = Path(db_path)
    directory = db.parent
    created = not directory.exists()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if created or directory == _default_dir():
        _tighten(directory, 0o700)
    if not db.exists() and not db.is_symlink():
        os.close(os.open(db, os.O_CREAT | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o600))
    for path in (db, *(Path(f"{db}{suffix}") for suffix in SIDE_SUFFIXES)):
        if path.is_file():
            _tighten(path, 0o600)
    return db


# -- one writer per index ------------------------------------------------------


class IndexBusy(Exception):
    """Another process holds the index lock (the daemon, or another `index --once`)."""


def hold_lock(path: str | os.PathLike[str], holder: str) -> tuple[IO[str] | None, str | None]:
    """Hold an exclusive lock on `path` for the process lifetime, writing who
    holds it. Returns (file, None), or (None, what the current holder wrote)."""
    fh = open(path, "a+")  # noqa: SIM115 (held open: the lock lives as long as the file)
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        other = fh.read().strip().replace("\n", ", ")
        fh.close()
        return None, other
    fh.seek(0)
    fh.truncate()
    fh.write(holder)
    fh.flush()
    return fh, None


def lock_index(db_path: str | os.PathLike[str], holder: str) -> IO[str]:
    """The index lock: exactly one writer (piwatchd or `index --once`) per index."""
    fh, other = hold_lock(f"{db_path}.lock", holder)
    if fh is None:
        raise IndexBusy(f"{db_path} is being indexed by another process ({other})")
    return fh


# -- a missing or corrupt index is rebuilt -------------------------------------------


def discard_index(db_path: str | os.PathLike[str]) -> None:
    """Remove the index file, its WAL/SHM (an old WAL would otherwise be
    applied to the new file) and what any text engine keeps beside it (whose
    documents belong to the old file's rows). The index is disposable: the
    sources rebuild it."""
    for path in (Path(db_path), *(Path(f"{db_path}{s}") for s in ("-wal", "-shm", "-journal"))):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    for engine in all_engines():  # the file may be unreadable: which engine built it is unknown
        for side in engine.side_paths(Path(db_path)):
            shutil.rmtree(side, ignore_errors=True)


class NotAnIndex(Exception):
    """The path holds a file that was never an SQLite database: not ours to replace."""


_SQLITE_MAGIC = b"SQLite format 3\x00"


def _was_an_index(db_path: str | os.PathLike[str]) -> bool:
    """Whether an unreadable file at `db_path` may be discarded: it is (or
    was) an SQLite database (its header says so, or the header was zeroed by
    a crash). Any other file (`--db` pointed at the wrong file) is never
    deleted."""
    try:
        with open(db_path, "rb") as fh:
            head = fh.read(100)
    except OSError:
        return False
    return head.startswith(_SQLITE_MAGIC) or head.count(0) == len(head)


def open_or_rebuild(
    db_path: str | os.PathLike[str], engine: str | None = None
) -> tuple[sqlite3.Connection, str | None]:
    """The write connection; an SQLite file that cannot be used as an index
    (corrupt) is discarded and created anew. Returns (connection, why it was
    rebuilt, or None). Raises NotAnIndex for a file that never was SQLite."""
    from .schema import open_writer

    engine = engine or DEFAULT_ENGINE
    try:
        conn = open_writer(Path(db_path), engine=engine)
        conn.execute("SELECT count(*) FROM sources").fetchone()
        return conn, None
    except sqlite3.OperationalError:
        raise  # locked, busy, cannot open: not the file's contents
    except sqlite3.DatabaseError as exc:
        if not _was_an_index(db_path):
            raise NotAnIndex(
                f"{db_path} is not a piwatch index (not an SQLite file); "
                "refusing to replace it: remove it or choose another --db"
            ) from exc
        problem = f"the index was corrupt ({exc}); rebuilding it from the session files"
    discard_index(db_path)
    prepare_index_path(db_path)
    return open_writer(Path(db_path), engine=engine), problem
