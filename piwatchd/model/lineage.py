"""Pure: how a session names its parent (the header's `parentSession`).

Pi records the parent session's file: `pi --fork` and a branched session
write the path they read, resolved against the directory Pi ran in (the
session's cwd), and Pi compares two of them after resolving symlinks and
normalizing (`canonicalizePath`, `getPathComparisonKey`). A reference
without a `/` that does not name a `.jsonl` file is a session id. The same
file may therefore be named `/s/own.jsonl`, `//s/own.jsonl`,
`/s/./own.jsonl` or `/s/x/../own.jsonl`: lineage compares references in
one normal form, this one (plus symlinks resolved, `store.catalog`).
oh-my-pi writes either spelling: `fork()` the parent's session id (a UUID),
a branch into a new file the parent file's absolute path; this rule reads
both as omp does (`tests/test_omp_lineage.py`, with omp's own writer).
"""

from __future__ import annotations

import posixpath

__all__ = ["normal_ref", "ref_path"]


def ref_path(recorded: str, cwd: str | None) -> str | None:
    """The file a reference names, made absolute against the session's cwd
    when it is relative (as Pi resolves it), not normalized; None for a
    session id."""
    if "/" not in recorded and not recorded.endswith(".jsonl"):
        return None
    return posixpath.join(cwd, recorded) if cwd else recorded


def normal_ref(recorded: str | None, cwd: str | None) -> str | None:
    """A reference in normal form: a path made absolute against `cwd` and
    normalized (`.`, `..`, repeated and trailing slashes; a leading `//`,
    which POSIX leaves to the system and Linux and macOS read as `/`); a
    session id as recorded; None when nothing is recorded."""
    if not recorded:
        return None
    path = ref_path(recorded, cwd)
    if path is None:
        return recorded
    norm = posixpath.normpath(path)
    return "/" + norm.lstrip("/") if norm.startswith("/") else norm
