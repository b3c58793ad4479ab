"""`piwatch service install|uninstall|status`: run piwatchd as a user service
(a systemd user unit on Linux, a LaunchAgent on macOS)."""

from __future__ import annotations

import argparse
import json
import os
import plistlib
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

from ._common import probe_daemon

__all__ = [
    "add_parser",
    "run",
    "install",
    "manager",
    "render_systemd_unit",
    "render_launchd_plist",
    "shipped",
    "UNIT_NAME",
    "LAUNCHD_LABEL",
]

UNIT_NAME = "piwatchd.service"
LAUNCHD_LABEL = "dev.piwatch.piwatchd"


def _piwatchd_path() -> str:
    # Prefer the piwatchd installed beside this interpreter (a venv or pipx).
    beside = Path(sys.executable).with_name("piwatchd")
    if beside.exists():
        return str(beside)
    return shutil.which("piwatchd") or str(beside)


def shipped(name: str) -> bytes:
    """A unit file as shipped: `systemd/piwatchd.service` or
    `launchd/dev.piwatch.piwatchd.plist` of a source checkout, else the copy
    installed as package data (`piwatch.systemd`, `piwatch.launchd`)."""
    folder = "launchd" if name.endswith(".plist") else "systemd"
    checkout = Path(__file__).resolve().parents[3] / folder / name
    if checkout.is_file():
        return checkout.read_bytes()
    return (resources.files(f"piwatch.{folder}") / name).read_bytes()


def render_systemd_unit(exec_path: str) -> str:
    """The shipped unit with ExecStart naming this piwatchd."""
    lines = shipped(UNIT_NAME).decode().splitlines()
    return "\n".join(f"ExecStart={exec_path}" if line.startswith("ExecStart=") else line for line in lines) + "\n"


def render_launchd_plist(exec_path: str, home: str) -> bytes:
    """The shipped agent with this piwatchd and the user's log paths."""
    plist = plistlib.loads(shipped(f"{LAUNCHD_LABEL}.plist"))
    plist["ProgramArguments"] = [exec_path]
    for key in ("StandardErrorPath", "StandardOutPath"):
        value = plist[key]
        plist[key] = home + value[1:] if value.startswith("~/") else value
    return plistlib.dumps(plist)


def _unit_path(home: Path) -> Path:
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return config / "systemd" / "user" / UNIT_NAME


def _plist_path(home: Path) -> Path:
    return home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "service",
        help="install, remove or inspect the piwatchd user service",
        description="install: write a systemd user unit (~/.config/systemd/user/piwatchd.service) or a macOS "
        "LaunchAgent (~/Library/LaunchAgents/dev.piwatch.piwatchd.plist) that runs this piwatchd, then run "
        "`systemctl --user daemon-reload` and `systemctl --user enable --now piwatchd.service` "
        "(`launchctl load -w` on macOS). uninstall: stop, disable and remove it. status: the unit, whether it is "
        "active, and whether a piwatchd answers on the socket (started by the service or by hand).",
    )
    p.add_argument("action", choices=["install", "uninstall", "status"])
    p.add_argument("--no-start", action="store_true", help="write the unit but do not enable or start it")
    p.add_argument("--print", dest="print_only", action="store_true", help="print the unit instead of installing it")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def _run(cmd: list[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def run(ns: argparse.Namespace) -> int:
    home = Path.home()
    exec_path = _piwatchd_path()
    mac = sys.platform == "darwin"
    target = _plist_path(home) if mac else _unit_path(home)
    if ns.action == "status":
        info = {"unit": str(target), "installed": target.exists(), "execPath": exec_path}
        if not mac and shutil.which("systemctl"):
            info["systemctl"] = _run(["systemctl", "--user", "is-active", UNIT_NAME])[1]
        info["daemon"] = probe_daemon()  # answers whether the service or a hand-started piwatchd runs
        print(json.dumps(info, indent=2) if ns.json else "\n".join(f"{k}: {v}" for k, v in info.items()))
        return 0 if target.exists() else 1
    if ns.action == "uninstall":
        if not target.exists():
            print(f"not installed: {target}")
            return 0
        if mac:
            _run(["launchctl", "unload", str(target)])
        elif shutil.which("systemctl"):
            _run(["systemctl", "--user", "disable", "--now", UNIT_NAME])
        target.unlink()
        if not mac and shutil.which("systemctl"):
            _run(["systemctl", "--user", "daemon-reload"])
        print(f"removed {target}")
        return 0
    if ns.print_only:
        content = render_launchd_plist(exec_path, str(home)) if mac else render_systemd_unit(exec_path).encode()
        sys.stdout.write(content.decode())
        return 0
    ok, message = install(home, exec_path, start=not ns.no_start)
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def manager() -> str | None:
    """The user service manager this machine has: "launchd", "systemd" (a
    user manager that answers, not just a systemctl binary: containers and
    sessions without a user bus have the binary but no manager), or None."""
    if sys.platform == "darwin":
        return "launchd"
    if shutil.which("systemctl") and _run(["systemctl", "--user", "show-environment"])[0] == 0:
        return "systemd"
    return None


def install(home: Path, exec_path: str, *, start: bool = True) -> tuple[bool, str]:
    """Write the unit (or LaunchAgent) and, with `start`, enable and start it.
    (ok, what happened in one or two lines)."""
    mac = sys.platform == "darwin"
    target = _plist_path(home) if mac else _unit_path(home)
    content = render_launchd_plist(exec_path, str(home)) if mac else render_systemd_unit(exec_path).encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    if not start:
        return True, f"wrote {target}"
    if mac:
        (home / "Library" / "Logs" / "piwatch").mkdir(parents=True, exist_ok=True)
        code, out = _run(["launchctl", "load", "-w", str(target)])
    elif manager() == "systemd":
        _run(["systemctl", "--user", "daemon-reload"])
        code, out = _run(["systemctl", "--user", "enable", "--now", UNIT_NAME])
    else:
        code, out = 1, "no systemd user manager answers here: start piwatchd yourself (`piwatchd &`)"
    if code != 0:
        return False, f"wrote {target}\npiwatch: could not start the service: {out}"
    linger = "" if mac else "\nto keep it running after logout: loginctl enable-linger $USER"
    return True, f"wrote {target}\nstarted the piwatchd service{linger}"
