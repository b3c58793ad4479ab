"""`piwatch setup`: from a fresh install to a running daemon and `piwatch` on PATH.

The README's one set-up command ends here. It links `piwatch` and `piwatchd`
into `~/.local/bin` (as pipx does), indexes the user's Pi history with a
progress bar, then leaves piwatchd running: as a user service where the
machine has a service manager, else started in the background, saying
plainly what that means. Every step says what it did; a step that cannot be
done says why and what to do, and the others still run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from ._common import probe_daemon

__all__ = ["add_parser", "run", "Link", "plan_links", "path_advice", "bin_dir"]

SCRIPTS = ("piwatch", "piwatchd")
_DAEMON_START_SECONDS = 30.0


class Link(NamedTuple):
    """One script to link: `action` is "create", "keep" (already ours) or
    "refuse" (something else is there: never overwritten without --force)."""

    target: Path
    source: Path
    action: str


def bin_dir(env: dict[str, str] | os._Environ[str] | None = None, home: Path | None = None) -> Path:
    """Where user commands go: $XDG_BIN_HOME, else ~/.local/bin (pipx's default)."""
    env = os.environ if env is None else env
    explicit = env.get("XDG_BIN_HOME")
    return Path(explicit) if explicit else (home or Path.home()) / ".local" / "bin"


def _existing(target: Path) -> Path | None:
    """What a link at `target` points to, itself for a plain file, None if nothing is there."""
    if target.is_symlink():
        return Path(os.readlink(target))
    return target if target.exists() else None


def plan_links(bin_path: Path, scripts_dir: Path, force: bool = False) -> list[Link]:
    """What to do for each script. Reads the file system, changes nothing."""
    plan = []
    for name in SCRIPTS:
        source, target = scripts_dir / name, bin_path / name
        there = _existing(target)
        if there is None or (force and there != source):
            action = "create"
        elif there == source:
            action = "keep"
        else:
            action = "refuse"
        plan.append(Link(target, source, action))
    return plan


def path_advice(bin_path: Path, path_env: str, shell: str) -> str | None:
    """The line that puts `bin_path` on PATH for this shell, or None when it is on PATH. Pure."""
    if str(bin_path) in path_env.split(os.pathsep):
        return None
    name = os.path.basename(shell) or "sh"
    if name == "fish":
        return f"fish_add_path {bin_path}"
    rc = {"zsh": "~/.zshrc", "bash": "~/.bashrc"}.get(name, "~/.profile")
    return f"echo 'export PATH=\"{bin_path}:$PATH\"' >> {rc}   # then open a new terminal"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "setup",
        help="put piwatch on PATH, index your Pi history and leave piwatchd running",
        description="Link piwatch and piwatchd into ~/.local/bin ($XDG_BIN_HOME if set), index the Pi session "
        "files once (progress bar), then leave piwatchd running: `piwatch service install` where a systemd user "
        "manager or launchd answers, else piwatchd started in the background (log beside the index). "
        "Safe to run again: what is already done is kept.",
    )
    p.add_argument("--force", action="store_true", help="replace other files named piwatch/piwatchd in the bin folder")
    p.add_argument("--no-index", action="store_true", help="skip the first index (piwatchd catches up by itself)")
    p.add_argument("--no-daemon", action="store_true", help="do not install a service or start piwatchd")
    p.set_defaults(run=run)


def _link(plan: list[Link]) -> bool:
    ok = True
    for link in plan:
        if not link.source.exists():
            print(f"no {link.source}: install piwatch into this environment first (pip install .)")
            ok = False
            continue
        if link.action == "refuse":
            print(f"kept {link.target}: it is not piwatch's (`piwatch setup --force` replaces it)")
            ok = False
            continue
        if link.action == "create":
            link.target.parent.mkdir(parents=True, exist_ok=True)
            if link.target.is_symlink() or link.target.exists():
                link.target.unlink()
            link.target.symlink_to(link.source)
        print(f"{'linked' if link.action == 'create' else 'already linked'} {link.target} -> {link.source}")
    return ok


def _index() -> bool:
    from .index import run as index_run

    ns = argparse.Namespace(sessions=None, db=None, workers=None, json=False, quiet=False)
    return index_run(ns) == 0


def _start_in_background(piwatchd: Path) -> tuple[bool, str]:
    """Start piwatchd detached from this terminal and wait until it answers."""
    from piwatchd.config import resolve_db  # lazy: the daemon package is optional for the client

    log = resolve_db(None).with_name("piwatchd.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [str(piwatchd)], stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
        )
    deadline = time.monotonic() + _DAEMON_START_SECONDS
    while (state := probe_daemon()) != "answering":
        if proc.poll() is not None or time.monotonic() > deadline:
            return False, f"piwatchd did not start ({state}); see {log}"
        time.sleep(0.1)  # polling a condition with a deadline: how soon it answers is the daemon's business
    return True, (
        f"started piwatchd in the background (pid {proc.pid}, log {log}).\n"
        "This machine has no user service manager, so it stops at logout or reboot: "
        "start it again with `piwatchd &` (or from your shell's login file)."
    )


def _daemon(scripts_dir: Path) -> bool:
    from . import service

    if probe_daemon() == "answering":
        print("piwatchd is already running (`piwatch service status` tells whether as a service)")
        return True
    if service.manager() is not None:
        ok, message = service.install(Path.home(), str(scripts_dir / "piwatchd"))
        print(message)
        return ok
    ok, message = _start_in_background(scripts_dir / "piwatchd")
    print(message)
    return ok


def run(ns: argparse.Namespace) -> int:
    scripts_dir = Path(sys.executable).parent
    target = bin_dir()
    ok = _link(plan_links(target, scripts_dir, ns.force))
    if not ns.no_index:
        ok = _index() and ok
    if not ns.no_daemon:
        ok = _daemon(scripts_dir) and ok
    advice = path_advice(target, os.environ.get("PATH", ""), os.environ.get("SHELL", ""))
    if advice:
        print(f"{target} is not on your PATH yet; add it:\n  {advice}")
    print("next: piwatch search 'some words'   (piwatch doctor checks everything; piwatch pi install adds the Pi tool)")
    return 0 if ok else 1
