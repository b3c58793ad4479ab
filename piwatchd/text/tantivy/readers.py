"""The open text indexes of this process: one object per directory. The
writer registers its own (`feed`): readers in the daemon share it and see
each commit as soon as the writer reloads, and its overlay says which
sessions owed to the disk are searchable anyway; another process (the CLI)
opens the directory read-only and looks for the writer's commits before
each search."""

from __future__ import annotations

import sqlite3
import threading
from functools import lru_cache
from pathlib import Path

from .index import TantivyText, _db_file_name, text_dir

__all__ = ["register_text", "searchable_owed", "text_reader", "unregister_text"]

# Directory -> (its index object, whether the writer registered it).
_OPEN: dict[Path, tuple[TantivyText, bool]] = {}
_OPEN_LOCK = threading.Lock()


@lru_cache(maxsize=64)
def _key(path: Path) -> Path:
    """Writer and readers may name the index file differently (symlinks);
    resolved once per name, not on every search."""
    return path.resolve()


def register_text(text: TantivyText) -> None:
    with _OPEN_LOCK:
        _OPEN[_key(text.path)] = (text, True)


def unregister_text(text: TantivyText) -> None:
    with _OPEN_LOCK:
        key = _key(text.path)
        if key in _OPEN and _OPEN[key][0] is text:
            del _OPEN[key]


def _text_key_of(conn: sqlite3.Connection) -> Path:
    """The `_OPEN` key of the text index beside this connection's index file."""
    return _text_key(_db_file_name(conn))


@lru_cache(maxsize=64)
def _text_key(db_file: str) -> Path:
    """Once per index file name, not per search (paths cost ~40 us per search)."""
    return _key(text_dir(db_file))


def searchable_owed(conn: sqlite3.Connection) -> frozenset[str]:
    """Sessions still owed to the on-disk text index (`text_debt`) whose every
    change is searchable anyway from this process (the writer's overlay)."""
    try:
        path = _text_key_of(conn)
    except ValueError:
        return frozenset()
    with _OPEN_LOCK:
        entry = _OPEN.get(path)
    if entry is None or not entry[1] or entry[0].overlay is None:
        return frozenset()
    return entry[0].overlay.view.sessions


def text_reader(conn: sqlite3.Connection) -> TantivyText:
    """The text index that belongs to this read model, for searching."""
    path = _text_key_of(conn)
    with _OPEN_LOCK:
        entry = _OPEN.get(path)
        if entry is None:
            try:
                entry = (TantivyText(path, writable=False), False)
            except ValueError as exc:  # tantivy's word for an unreadable index
                raise FileNotFoundError(
                    f"the text index {path} cannot be read ({exc}): start piwatchd or run "
                    "`piwatch index --once`, which rebuild it from the session files"
                ) from None
            _OPEN[path] = entry
    text, shared = entry
    if not shared:
        text.refresh()  # another process writes: see its latest commit
    return text
