"""`piwatch doctor`: what a newcomer needs, checked, with what to do for each.

Each check is a function returning a `Check`; the command prints them in
order and exits 0 when none failed (warnings are advice, not failures).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import Any, NamedTuple

from ._common import probe_daemon

__all__ = ["add_parser", "run", "Check", "CHECKS", "format_check"]

_COUNT_CAP = 100_000  # counting session files stops here: a doctor must answer quickly on any history


class Check(NamedTuple):
    name: str
    state: str  # "ok", "warn" or "fail"
    detail: str
    fix: str | None = None


def check_sessions() -> Check:
    from piwatchd.config import session_roots  # lazy: the daemon package is optional for the client
    from piwatchd.source.discovery import iter_session_files

    roots = session_roots(None)
    found = [r for r in roots if os.path.isdir(r)]
    if not found:
        return Check(
            "sessions",
            "fail",
            f"no Pi sessions directory ({', '.join(roots) or 'none configured'})",
            "run Pi once, or name the folder: PI_CODING_AGENT_DIR, or `sessions = [...]` in piwatch's config.toml",
        )
    count = 0
    for root in found:
        for _ in iter_session_files(root):
            count += 1
            if count >= _COUNT_CAP:
                break
    shown = f"{count:,}+" if count >= _COUNT_CAP else f"{count:,}"
    return Check("sessions", "ok" if count else "warn", f"{shown} session files in {', '.join(found)}")


def check_path() -> Check:
    missing = [name for name in ("piwatch", "piwatchd") if shutil.which(name) is None]
    if not missing:
        return Check("PATH", "ok", f"piwatch at {shutil.which('piwatch')}")
    return Check(
        "PATH", "warn", f"{' and '.join(missing)} not on PATH", "run `piwatch setup` (links into ~/.local/bin)"
    )


def check_daemon() -> Check:
    state = probe_daemon()
    if state == "answering":
        return Check("daemon", "ok", "piwatchd answers on its socket")
    from . import service

    fix = "piwatch service install" if service.manager() else "start it: piwatchd &  (no user service manager here)"
    return Check("daemon", "fail", f"piwatchd is not answering: {state}", fix)


def check_service() -> Check:
    from . import service

    manager = service.manager()
    if manager is None:
        return Check("service", "warn", "no user service manager: piwatchd must be started by hand", "piwatchd &")
    unit = service._plist_path(Path.home()) if manager == "launchd" else service._unit_path(Path.home())
    if not unit.exists():
        return Check("service", "warn", f"no {manager} unit installed", "piwatch service install")
    return Check("service", "ok", f"{manager} unit {unit}")


def check_index() -> Check:
    from piwatch.client import Client, PiwatchError

    from .status import _unhealthy

    try:
        with Client(timeout=5.0) as client:
            st = client.status(caller={"all": True})  # the local user's own index, every project
    except PiwatchError:
        return Check("index", "warn", "not checked: piwatchd is not answering")
    if _unhealthy(st):
        return Check("index", "fail", "the index reports problems", "piwatch status (it says what and where)")
    return Check("index", "ok", f"{st.sessions:,} sessions, {st.events:,} events indexed")


def check_extension() -> Check:
    from .pi import AGENTS, agent_dir, status, which_agent

    which = which_agent()  # Pi's, or omp's when only omp is here
    result = status(agent_dir(None, agent=which))
    fix = "piwatch pi install" + ("" if which == "pi" else f" --agent {which}")
    if not result["installed"]:
        return Check("Pi tool", "warn", f"the extension is not installed in {AGENTS[which]}", fix)
    if result.get("sourceDiffers") or not result.get("dependencyInstalled"):
        return Check("Pi tool", "warn", f"the extension in {AGENTS[which]} is out of date", fix)
    return Check("Pi tool", "ok", f"installed at {result['target']}")


CHECKS = (check_sessions, check_path, check_service, check_daemon, check_index, check_extension)


def format_check(check: Check) -> str:
    line = f"{check.state:<4}  {check.name:<9} {check.detail}"
    return line + (f"\n      {'':<9} fix: {check.fix}" if check.fix else "")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "doctor",
        help="check the set-up (sessions, PATH, service, daemon, index, Pi tool) and say what to fix",
        description="Exit 0 when no check failed (warnings are advice), 1 otherwise.",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def _run_check(check: Any) -> Check:
    try:
        return check()  # type: ignore[no-any-return]
    except Exception as exc:  # noqa: BLE001  a doctor reports a broken check instead of dying on it
        return Check(check.__name__.removeprefix("check_"), "fail", f"could not check: {exc}")


def run(ns: argparse.Namespace) -> int:
    checks = [_run_check(c) for c in CHECKS]
    if ns.json:
        print(json.dumps([c._asdict() for c in checks], indent=2))
    else:
        print("\n".join(format_check(c) for c in checks))
    return 1 if any(c.state == "fail" for c in checks) else 0
