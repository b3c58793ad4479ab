"""Where piwatchd listens: resolved the same way by the daemon, the Python
client and the Pi extension (which mirrors this logic in TypeScript); and
where piwatch's config.toml is.

`PIWATCH_SOCKET` overrides everything. Otherwise the socket lives in the
per-user runtime directory (`$XDG_RUNTIME_DIR/piwatch` on Linux), falling back
to `/tmp/piwatch-<uid>/` when that path would not fit in an AF_UNIX address.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path

import platformdirs

__all__ = ["config_path", "runtime_dir", "socket_path", "lock_path", "MAX_SOCKET_PATH"]

MAX_SOCKET_PATH = 100  # sun_path is 104 bytes on macOS, 108 on Linux
SOCKET_NAME = "piwatchd.sock"


def _fits(path: Path) -> bool:
    return len(os.fsencode(str(path))) < MAX_SOCKET_PATH


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """piwatch's config.toml (the daemon's settings, and the command line's `[cli]` table)."""
    env = os.environ if env is None else env
    if env.get("PIWATCH_CONFIG"):
        return Path(env["PIWATCH_CONFIG"]).expanduser()
    return Path(platformdirs.user_config_dir("piwatch")) / "config.toml"


def runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("PIWATCH_RUNTIME_DIR"):
        return Path(env["PIWATCH_RUNTIME_DIR"])
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset and falls back to
        # /tmp/runtime-<uid>; that fallback is fine (the daemon verifies the
        # directory is private), so the CLI should not print the warning.
        warnings.simplefilter("ignore")
        preferred = Path(platformdirs.user_runtime_dir("piwatch"))
    if _fits(preferred / SOCKET_NAME):
        return preferred
    return Path(f"/tmp/piwatch-{os.getuid()}")


def socket_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("PIWATCH_SOCKET"):
        return Path(env["PIWATCH_SOCKET"])
    return runtime_dir(env) / SOCKET_NAME


def lock_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("PIWATCH_SOCKET"):
        sock = Path(env["PIWATCH_SOCKET"])
        return sock.with_name(sock.name + ".lock")
    return runtime_dir(env) / "piwatchd.lock"
