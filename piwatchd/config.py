"""Paths and settings: where the index lives, which extra session folders to read.

Settings come from the environment and an optional TOML file at
`<user config dir>/piwatch/config.toml`:

    extra_session_dirs = ["~/pi-archive"]   # read in addition to Pi's own
    db = "~/somewhere/index.sqlite3"        # default: <user state dir>/piwatch/index.sqlite3
    workspace_roots = ["~/work/monorepo"]   # authorize a caller below one for the whole root
    ingest_workers = 0                      # indexing worker processes (default: cores - 2; 0: none)

    [redact]                                # see piwatchd.model.redact.rules_from_config
    allow = ["AKIAIOSFODNN7EXAMPLE"]
    [[redact.patterns]]
    name = "acme-key"
    regex = "acme_[0-9a-f]{32}"

    [[extract]]                             # see piwatchd.model.extractors
    custom_type = "acme.notes"              # a custom entry type made searchable
    fields = ["data.summary"]
    kind = "custom.message"

The `[cli]` table is the command line's own (`scope`: its default scope,
read by `piwatch.commands._common.default_scope`, never by the daemon).

Environment overrides: `PIWATCH_DB`, `PIWATCH_EXTRA_SESSION_DIRS`, `PIWATCH_WORKSPACE_ROOTS`
(both os.pathsep-separated), `PIWATCH_INGEST_WORKERS`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
from piwatch.paths import config_path

from .model.extractors import NO_EXTRACTORS, ExtractorError, Registry, registry_from_config
from .model.redact import DEFAULT_RULES, Rules, RulesError, rules_from_config
from .text.engine import DEFAULT_ENGINE, ENGINE_NAMES

__all__ = ["Settings", "load_settings", "config_path", "resolve_db", "omp_roots", "session_roots"]


@dataclass(frozen=True, slots=True)
class Settings:
    db_path: Path
    extra_session_dirs: tuple[str, ...] = field(default_factory=tuple)
    # Authorization roots: a caller whose cwd lies below one is authorized for
    # the whole root (say a monorepo), ahead of its Git worktree root.
    workspace_roots: tuple[str, ...] = field(default_factory=tuple)
    redact_rules: Rules = DEFAULT_RULES
    # The text engine's name (piwatchd.text.engine); changing it rebuilds the index.
    engine: str = DEFAULT_ENGINE
    # Ingest worker processes (`piwatchd.workers`); None: one per core beside the writer's.
    ingest_workers: int | None = None
    # Custom entry types made searchable (`[[extract]]`); a change re-feeds the sessions holding them.
    extractors: Registry = NO_EXTRACTORS


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    data: dict[str, Any] = {}
    path = config_path(env)
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        pass
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SystemExit(f"piwatch: cannot read config {path}: {exc}") from exc
    db = env.get("PIWATCH_DB") or data.get("db") or str(Path(platformdirs.user_state_dir("piwatch")) / "index.sqlite3")
    extra = [str(x) for x in data.get("extra_session_dirs", []) if isinstance(x, str)]
    if env.get("PIWATCH_EXTRA_SESSION_DIRS"):
        extra += [p for p in env["PIWATCH_EXTRA_SESSION_DIRS"].split(os.pathsep) if p]
    roots = [os.path.expanduser(x) for x in data.get("workspace_roots", []) if isinstance(x, str)]
    if env.get("PIWATCH_WORKSPACE_ROOTS"):
        roots += [os.path.expanduser(p) for p in env["PIWATCH_WORKSPACE_ROOTS"].split(os.pathsep) if p]
    try:
        rules = rules_from_config(data.get("redact"))
        extractors = registry_from_config(data.get("extract"))
    except (RulesError, ExtractorError) as exc:
        raise SystemExit(f"piwatch: config {path}: {exc}") from exc
    engine = env.get("PIWATCH_ENGINE") or data.get("engine") or DEFAULT_ENGINE
    if engine not in ENGINE_NAMES:
        names = " or ".join(f'"{name}"' for name in ENGINE_NAMES)
        raise SystemExit(f"piwatch: config {path}: engine must be {names}, not {engine!r}")
    return Settings(
        Path(db).expanduser(),
        tuple(os.path.expanduser(p) for p in extra),
        tuple(r for r in roots if os.path.isabs(r)),
        rules,
        engine,
        _workers(env.get("PIWATCH_INGEST_WORKERS") or data.get("ingest_workers"), path),
        extractors,
    )


def _workers(value: object, path: Path) -> int | None:
    if value is None:
        return None
    try:
        n = int(str(value))
    except ValueError:
        n = -1
    if n < 0 or isinstance(value, bool):
        raise SystemExit(f"piwatch: config {path}: ingest_workers must be a whole number >= 0, not {value!r}")
    return n


def resolve_db(db: str | os.PathLike[str] | None, settings: Settings | None = None) -> Path:
    """The index file: `--db` as given (`~` expanded, symlinks resolved, so the
    daemon and `index --once` lock the same file), else the configured one."""
    if db:
        return Path(db).expanduser().resolve()
    return (settings or load_settings()).db_path


def session_roots(sessions: Iterable[str] | None, settings: Settings | None = None) -> list[str]:
    """The session directories to index: `--sessions` as given (absolute), else
    Pi's discovered ones plus the configured extra directories."""
    given = [os.path.abspath(os.path.expanduser(s)) for s in sessions or ()]
    if given:
        return given
    from .source.discovery import discover_roots

    return [r.path for r in discover_roots(extra=(settings or load_settings()).extra_session_dirs)]


def omp_roots(sessions: Iterable[str] | None) -> list[str]:
    """The discovered roots omp writes to; none when `--sessions` names the
    roots (a session there is omp's when it begins with omp's title slot)."""
    if sessions:
        return []
    from .source.discovery import discover_roots

    return [r.path for r in discover_roots() if r.agent == "omp"]
