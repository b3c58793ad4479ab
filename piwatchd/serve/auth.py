"""Who may see what: the seed's workspace-root authorization.

A model-facing caller sees a session only when the session's recorded cwd,
canonicalized, equals its authorization root or lies below it on a
path-component boundary (`/a/proj` never authorizes `/a/proj2`). The root is,
in order: the caller's explicit absolute workspace root; a configured root
containing the caller's cwd; the Git worktree root of the cwd; the cwd.
Discovery never grants access. The caller's own session is excluded unless
targeted explicitly, and then only before the invocation cutoff.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from piwatch.protocol import ProtocolError
from piwatch.wire import Caller, decode_caller

from ..model.subtree import is_under

__all__ = ["CallerScope", "ScopeError", "resolve_scope", "is_under", "canonical", "git_root"]


class ScopeError(ValueError):
    pass


def canonical(path: str) -> str:
    return os.path.realpath(os.path.normpath(os.path.expanduser(path)))


def git_root(path: str) -> str | None:
    """The enclosing Git worktree root (`.git` dir, or file for linked worktrees)."""
    current = path
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


@dataclass(frozen=True, slots=True)
class CallerScope:
    roots: tuple[str, ...] | None  # None: every session (explicit opt-in of the trusted CLI)
    current_session: str | None = None
    current_file: str | None = None
    cutoff_entry: str | None = None
    tool_call_id: str | None = None

    def allows_cwd(self, cwd_real: str | None) -> bool:
        if self.roots is None:
            return True
        return cwd_real is not None and any(is_under(cwd_real, r) for r in self.roots)


def _absolute(value: str, name: str) -> str:
    if not value.startswith("/"):
        raise ScopeError(f"caller {name} must be an absolute path")
    if "\x00" in value:
        raise ScopeError(f"caller {name} must not contain NUL")
    return value


def resolve_scope(caller: Caller | object, configured_roots: Iterable[str] = ()) -> CallerScope:
    """Turn the wire caller (a `Caller`, or its map) into a scope. Raises
    ScopeError when unusable."""
    if caller is None:
        raise ScopeError("this request needs a caller context: cwd or workspaceRoot (or all: true from the local CLI)")
    if not isinstance(caller, Caller):
        try:
            caller = decode_caller(caller)
        except ProtocolError as exc:
            raise ScopeError(exc.message) from None
        assert caller is not None
    for name, value in (
        ("sessionId", caller.session_id),
        ("sessionFile", caller.session_file),
        ("cutoffEntryId", caller.cutoff_entry_id),
        ("toolCallId", caller.tool_call_id),
    ):
        if value is not None and "\x00" in value:
            raise ScopeError(f"caller {name} must not contain NUL")
    current = {
        "current_session": caller.session_id or None,
        "current_file": caller.session_file or None,
        "cutoff_entry": caller.cutoff_entry_id or None,
        "tool_call_id": caller.tool_call_id or None,
    }
    if current["current_file"] is not None:
        current["current_file"] = canonical(_absolute(current["current_file"], "sessionFile"))
    if caller.all:
        return CallerScope(None, **current)
    roots: list[str] = []
    if caller.workspace_root is not None:
        roots.append(canonical(_absolute(caller.workspace_root, "workspaceRoot")))
    elif caller.cwd is not None:
        cwd = canonical(_absolute(caller.cwd, "cwd"))
        configured = sorted((canonical(r) for r in configured_roots), key=len, reverse=True)
        match = next((r for r in configured if is_under(cwd, r)), None)
        roots.append(match or git_root(cwd) or cwd)
    else:
        raise ScopeError("caller needs cwd or workspaceRoot")
    roots.extend(canonical(_absolute(r, "extraRoots entry")) for r in caller.extra_roots)
    return CallerScope(tuple(dict.fromkeys(roots)), **current)
