"""Where Pi keeps sessions, resolved the way Pi resolves it.

Roots, in Pi's precedence: `PI_CODING_AGENT_SESSION_DIR`, the `sessionDir`
setting of the agent's `settings.json` (both flat custom directories), and the
default `<agent dir>/sessions/--<cwd>--/`. The agent dir is
`PI_CODING_AGENT_DIR` or `~/.pi/agent`. All of them are watched, not only the
winner: sessions written before a setting changed stay where they were.
Folder names are never decoded: the cwd comes from each file's header.

oh-my-pi (`omp`) writes the same tree to its own root, resolved as omp 18
resolves it (`omp_session_roots`); each root says which agent writes there.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SessionRoot",
    "agent_dir",
    "agent_of",
    "discover_roots",
    "in_layout",
    "is_session_filename",
    "is_sessions_folder",
    "iter_session_files",
    "omp_agent_dir",
    "omp_session_roots",
    "session_files_in",
]


@dataclass(frozen=True, slots=True)
class SessionRoot:
    path: str
    origin: str  # default | env | settings | extra
    agent: str = "pi"  # pi | omp: which agent writes sessions there


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


def _omp_profile(env: Mapping[str, str]) -> str | None:
    """omp's profile (`OMP_PROFILE`, else `PI_PROFILE`); "default" or blank is none.
    A name omp would refuse (a path, dots) is ignored, as omp then fails to start."""
    chosen = env.get("OMP_PROFILE")
    value = (chosen if chosen is not None else env.get("PI_PROFILE", "")).strip()
    if not value or value == "default" or value.endswith(".") or not _PROFILE.fullmatch(value):
        return None
    return value


_PROFILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _omp_agent_dirs(env: Mapping[str, str], home: str) -> tuple[str, str | None]:
    """omp's default agent dir, `<config root>/agent` (the config root
    `~/<PI_CONFIG_DIR or .omp>`, a profile's under `profiles/<name>`), and
    the agent dir it is told to use instead (`PI_CODING_AGENT_DIR`, shared
    with Pi, ignored under a profile), absolute, or None."""
    profile = _omp_profile(env)
    config_root = os.path.join(home, env.get("PI_CONFIG_DIR") or ".omp")
    if profile:
        config_root = os.path.join(config_root, "profiles", profile)
    override = None if profile else env.get("PI_CODING_AGENT_DIR")
    return os.path.join(config_root, "agent"), os.path.abspath(_expand(override, home)) if override else None


def omp_agent_dir(env: Mapping[str, str] | None = None, home: str | None = None) -> str:
    """omp's agent dir as omp 18 resolves it (`getAgentDir`): where its
    settings and its user extensions (`extensions/`) are."""
    env = os.environ if env is None else env
    default_agent, override = _omp_agent_dirs(env, home or os.path.expanduser("~"))
    return override or default_agent


def omp_session_roots(env: Mapping[str, str] | None = None, home: str | None = None) -> list[SessionRoot]:
    """Where omp keeps sessions, as omp 18 resolves it (`getSessionsDir`): the
    config root `~/<PI_CONFIG_DIR or .omp>` (a profile's under `profiles/<name>`);
    the agent dir `PI_CODING_AGENT_DIR` (shared with Pi, ignored under a
    profile) or `<config root>/agent`; for the default agent dir,
    `$XDG_DATA_HOME/omp[/profiles/<name>]` instead when that folder exists.
    The default `~/.omp/agent/sessions` is always watched too: sessions
    written before a setting changed stay there."""
    env = os.environ if env is None else env
    home = home or os.path.expanduser("~")
    profile = _omp_profile(env)
    default_agent, override = _omp_agent_dirs(env, home)
    roots: list[SessionRoot] = []
    if override:
        roots.append(SessionRoot(os.path.join(override, "sessions"), "env", "omp"))
    elif env.get("XDG_DATA_HOME"):
        data = os.path.join(env["XDG_DATA_HOME"], "omp", *(("profiles", profile) if profile else ()))
        if os.path.isdir(data):
            roots.append(SessionRoot(os.path.join(data, "sessions"), "env", "omp"))
    roots.append(SessionRoot(os.path.join(default_agent, "sessions"), "default", "omp"))
    if default_agent != os.path.join(home, ".omp", "agent"):
        roots.append(SessionRoot(os.path.join(home, ".omp", "agent", "sessions"), "default", "omp"))
    return roots


def discover_roots(
    env: Mapping[str, str] | None = None,
    home: str | None = None,
    extra: Iterable[str] = (),
) -> list[SessionRoot]:
    """Every directory that may hold Pi's or omp's session files, deduplicated,
    in order (Pi's first: a root both write to, `PI_CODING_AGENT_DIR`, is Pi's)."""
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
    candidates.extend(omp_session_roots(env, home))
    for path in extra:
        candidates.append(SessionRoot(os.path.abspath(_expand(path, home)), "extra"))
    seen: set[str] = set()
    roots = []
    for root in candidates:
        key = os.path.normpath(root.path)
        if key not in seen:
            seen.add(key)
            roots.append(SessionRoot(key, root.origin, root.agent))
    return roots


def agent_of(path: str, roots: Iterable[SessionRoot]) -> str:
    """Which agent writes the session file at `path`: its root's (pure; "pi"
    outside every root, as for `--sessions` directories)."""
    for root in roots:
        if in_layout(root.path, path):
            return root.agent
    return "pi"


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
