"""The index on disk: a private file in a private directory.

The index holds the whole history of every session, so it is created 0600
in a 0700 directory, and an older, wider file is tightened at start. SQLite
creates its `-wal` and `-shm` files with the mode of the database file, so
pre-creating the database 0600 covers them; the process umask (0077, set by
the daemon and by `index --once`) covers whatever else appears beside it
(the lock file, a text-index directory).

An existing directory is only tightened when piwatch owns its purpose (it
created it, or it is piwatch's default state directory): `--db ~/x.sqlite3`
must not change the mode of a home directory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["PRIVATE_UMASK", "SIDE_SUFFIXES", "prepare_index_path"]

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


def prepare_index_path(db_path: str | os.PathLike) -> Path:
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
