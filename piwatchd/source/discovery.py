"""Where Pi keeps sessions, resolved the way Pi resolves it.

Roots, in Pi's precedence: `PI_CODING_AGENT_SESSION_DIR`, the `sessionDir`
setting of the agent's `settings.json` (both flat custom directories), and the
default `<agent dir>/sessions/--<cwd>--/`. The agent dir is
`PI_CODING_AGENT_DIR` or `~/.pi/agent`. All of them are watched, not only the
winner: sessions written before a setting changed stay where they were.
Folder names are never decoded: the cwd comes from each file's header.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SessionRoot",
    "agent_dir",
    "discover_roots",
    "in_layout",
    "is_session_filename",
    "is_sessions_folder",
    "iter_session_files",
    "session_files_in",
]


@dataclass(frozen=True, slots=True)
class SessionRoot:
    path: str
    origin: str  # default | env | settings | extra


def _expand(value: str, home: str) -> str:
    if value == "~":
        return home
    if value.startswith("~/"):
        return os.path.join(home, value[2:])
    return value


def agent_dir(env: Mapping[str, str] | None = None, home: str | None = None) -> str:
    env = os.environ if env is None else env
    home = home or os.path.expanduser("~")
    value = env.get("PI_CODING_AGENT_DIR")
    return os.path.abspath(_expand(value, home)) if value else os.path.join(home, ".pi", "agent")


def _settings_session_dir(agent: str, home: str) -> str | None:
    try:
        with open(os.path.join(agent, "settings.json"), encoding="utf-8") as fh:
            settings = json.load(fh)
    except (OSError, ValueError):
        return None
    value = settings.get("sessionDir") if isinstance(settings, dict) else None
    if not isinstance(value, str) or not value.strip():
        return None
    value = _expand(value.strip(), home)
    # Pi resolves a relative sessionDir against the directory of the settings file.
    return os.path.normpath(value if os.path.isabs(value) else os.path.join(agent, value))


def discover_roots(
    env: Mapping[str, str] | None = None,
    home: str | None = None,
    extra: Iterable[str] = (),
) -> list[SessionRoot]:
    """Every directory that may hold Pi session files, deduplicated, in order."""
    env = os.environ if env is None else env
    home = home or os.path.expanduser("~")
    agent = agent_dir(env, home)
    candidates: list[SessionRoot] = []
    if env.get("PI_CODING_AGENT_SESSION_DIR"):
        candidates.append(SessionRoot(os.path.abspath(_expand(env["PI_CODING_AGENT_SESSION_DIR"], home)), "env"))
    configured = _settings_session_dir(agent, home)
    if configured:
        candidates.append(SessionRoot(configured, "settings"))
    candidates.append(SessionRoot(os.path.join(agent, "sessions"), "default"))
    for path in extra:
        candidates.append(SessionRoot(os.path.abspath(_expand(path, home)), "extra"))
    seen: set[str] = set()
    roots = []
    for root in candidates:
        key = os.path.normpath(root.path)
        if key not in seen:
            seen.add(key)
            roots.append(SessionRoot(key, root.origin))
    return roots


def is_session_filename(name: str) -> bool:
    return name.endswith(".jsonl") and not name.startswith(".")


def _below(root: str, path: str) -> list[str] | None:
    """`path`'s components below `root`, or None when it is not below it."""
    base = root.rstrip(os.sep) + os.sep
    return path[len(base) :].split(os.sep) if path.startswith(base) and len(path) > len(base) else None


def in_layout(root: str, path: str) -> bool:
    """Whether `path` is where Pi keeps a session under `root`: a session's
    name directly in it (flat custom dirs) or in a folder directly below it
    (`--<cwd>--/`). A folder with a session's name is no folder of sessions:
    it is a source itself, refused as not a regular file (`open_source`) and
    reported, and nothing in it is read. The scan, the watcher and the
    listing of a new folder all decide by this (pure)."""
    parts = _below(root, path)
    if not parts or not is_session_filename(parts[-1]):
        return False
    return len(parts) == 1 or (len(parts) == 2 and not is_session_filename(parts[0]))


def is_sessions_folder(root: str, path: str) -> bool:
    """Whether `path` is a folder directly below `root` whose session files
    `session_files_in` lists (pure)."""
    parts = _below(root, path)
    return parts is not None and len(parts) == 1 and not is_session_filename(parts[0])


def session_files_in(folder: str) -> list[str]:
    """What `folder` holds with a session's name, sorted, whatever it is (the
    ingest reads regular files and reports the rest); [] when it cannot be listed."""
    try:
        with os.scandir(folder) as it:
            names = sorted(e.name for e in it if is_session_filename(e.name))
    except OSError:
        return []
    return [os.path.join(folder, name) for name in names]


def iter_session_files(root: str) -> Iterator[str]:
    """Everything `in_layout` of `root`, as Pi lists sessions: session names
    directly in `root` (flat custom dirs) and in the folders below it
    (`--<cwd>--/`). Unreadable folders are skipped."""
    try:
        with os.scandir(root) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if is_session_filename(entry.name):
            yield entry.path  # a directory, FIFO or device too: refused and reported, never descended into
            continue
        try:
            folder = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if folder:
            yield from session_files_in(entry.path)


def root_is_listable(root: str) -> bool:
    return Path(root).is_dir() and os.access(root, os.R_OK | os.X_OK)
