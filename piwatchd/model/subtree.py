"""Pure: paths as a tree. The one definition of "at or under a path, on a
component boundary", for authorization (`auth`), SQL filters (`index.query`)
and the text index's path terms (`text.tantivy.doc`).

`/a/proj` holds `/a/proj` and `/a/proj/x`, never `/a/project`. A trailing
slash is ignored; the root `/` holds every absolute path.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ancestors", "base", "bounds", "is_under", "under_sql"]


def base(path: str) -> str:
    """`path` without trailing slashes (`/` stays `/`)."""
    return path.rstrip("/") or "/"


def is_under(path: str, root: str) -> bool:
    """`path` equals `root` or is below it on a component boundary."""
    root = base(root)
    if root == "/":
        return path.startswith("/")
    return path == root or path.startswith(root + "/")


def ancestors(path: str) -> tuple[str, ...]:
    """`path` and every ancestor on a `/` boundary: `/a/b` -> (`/a/b`, `/a`, `/`)
    (the path first, then from the shortest ancestor up, the root last)."""
    b = base(path)
    out = [b]
    for i in range(1, len(b)):
        if b[i] == "/":
            out.append(b[:i])
    if b.startswith("/") and b != "/":
        out.append("/")
    return tuple(out)


def bounds(path: str) -> tuple[str, str]:
    """[low, high) bounds of the strings strictly below `path` on a component boundary."""
    b = path.rstrip("/")
    # '0' is the character after '/', so this range holds exactly b + '/...'.
    return b + "/", b + "0"


def under_sql(column: str, path: str) -> tuple[str, list[Any]]:
    """SQL true when `column` equals `path` or lies below it (an index range, not LIKE)."""
    b = path.rstrip("/")
    low, high = bounds(b)
    return f"({column} = ? OR ({column} >= ? AND {column} < ?))", [b, low, high]
