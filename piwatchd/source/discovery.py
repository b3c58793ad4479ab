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

__all__ = ["SessionRoot", "agent_dir", "discover_roots", "is_session_filename", "iter_session_files"]


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


def iter_session_files(root: str) -> Iterator[str]:
    """`*.jsonl` directly in `root` (flat custom dirs) and one level below
    (`--<cwd>--/` folders), as Pi lists them. Unreadable folders are skipped."""
    try:
        with os.scandir(root) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_file() and is_session_filename(entry.name):
                yield entry.path
            elif entry.is_dir(follow_symlinks=False):
                try:
                    with os.scandir(entry.path) as sub:
                        names = sorted(e.name for e in sub if e.is_file() and is_session_filename(e.name))
                except OSError:
                    continue
                for name in names:
                    yield os.path.join(entry.path, name)
        except OSError:
            continue


def root_is_listable(root: str) -> bool:
    return Path(root).is_dir() and os.access(root, os.R_OK | os.X_OK)
