"""`piwatch setup` and `piwatch doctor`: the README's set-up command, run as written
in a fresh HOME from a lone clone, ends with piwatch on PATH and piwatchd answering."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import REPO, jsonl, msg, v3_header
from helpers.live import PIWATCH, poll
from piwatch.commands.setup import Link, path_advice, plan_links

README = (REPO / "README.md").read_text()


def _setup_command() -> str:
    return re.search(r"install piwatch and index.*?```sh\n(.*?)\n```", README, re.S | re.I).group(1)


# -- pure parts ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("there", "force", "action"),
    [
        (None, False, "create"),
        ("ours", False, "keep"),
        ("ours", True, "keep"),
        ("other-link", False, "refuse"),
        ("other-file", False, "refuse"),
        ("other-file", True, "create"),
    ],
)
def test_plan_links_never_overwrites_without_force(short_tmp, there, force, action):
    scripts, bin_dir = short_tmp / "venv" / "bin", short_tmp / "bin"
    scripts.mkdir(parents=True)
    bin_dir.mkdir()
    for name in ("piwatch", "piwatchd"):
        (scripts / name).write_text("#!/bin/sh\n")
        target = bin_dir / name
        if there == "ours":
            target.symlink_to(scripts / name)
        elif there == "other-link":
            target.symlink_to(short_tmp / "elsewhere")
        elif there == "other-file":
            target.write_text("someone else's\n")
    plan = plan_links(bin_dir, scripts, force)
    assert plan == [Link(bin_dir / n, scripts / n, action) for n in ("piwatch", "piwatchd")]


@pytest.mark.parametrize(
    ("path", "shell", "advice"),
    [
        ("/usr/bin:/h/.local/bin", "/bin/bash", None),
        ("/usr/bin", "/bin/bash", "echo 'export PATH=\"/h/.local/bin:$PATH\"' >> ~/.bashrc"),
        ("/usr/bin", "/usr/bin/zsh", "echo 'export PATH=\"/h/.local/bin:$PATH\"' >> ~/.zshrc"),
        ("/usr/bin", "/usr/bin/fish", "fish_add_path /h/.local/bin"),
        ("/usr/bin", "", "echo 'export PATH=\"/h/.local/bin:$PATH\"' >> ~/.profile"),
    ],
)
def test_path_advice_names_the_shells_file(path, shell, advice):
    got = path_advice(Path("/h/.local/bin"), path, shell)
    assert (got.split("   #")[0] if got else got) == advice


# -- end to end ---------------------------------------------------------------------


def _fresh_home(root: Path) -> dict[str, str]:
    home = root / "home"
    sessions = home / ".pi" / "agent" / "sessions" / "--work-proj--"
    sessions.mkdir(parents=True)
    (sessions / "2026-12-01T10-00-00-000Z_s1.jsonl").write_bytes(
        jsonl(v3_header("0190e0a0-0000-7000-8000-0000000000a1"), msg("e1", None, "user", "the zorblax reconnect error"))
    )
    runtime = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwrt-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIWATCH", "PI_CODING", "VIRTUAL_ENV"))}
    env.update(HOME=str(home), XDG_RUNTIME_DIR=str(runtime), PATH="/usr/local/bin:/usr/bin:/bin", SHELL="/bin/bash")
    for key in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_BIN_HOME"):
        env.pop(key, None)
    return env


def _stop_daemon(env: dict[str, str]) -> None:
    out = subprocess.run(
        [PIWATCH, "status", "--json"], env=env, capture_output=True, text=True, timeout=30, check=False
    ).stdout
    pid = (json.loads(out).get("daemon") or {}).get("pid") if out.strip().startswith("{") else None
    if pid:
        os.kill(pid, signal.SIGTERM)


@pytest.mark.e2e
@pytest.mark.slow
def test_the_readme_setup_command_ends_with_piwatch_on_path_and_the_daemon_answering(short_tmp):
    clone = short_tmp / "piwatch"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    env = _fresh_home(short_tmp)
    home = Path(env["HOME"])
    try:
        done = subprocess.run(
            ["bash", "-c", _setup_command()], cwd=clone, env=env, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "is not on your PATH yet" in done.stdout  # the fresh PATH lacks ~/.local/bin: it says how
        bin_dir = home / ".local" / "bin"
        assert (bin_dir / "piwatch").resolve() == (home / ".piwatch" / "bin" / "piwatch").resolve()
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
        found = poll(
            lambda: (
                (
                    r := subprocess.run(
                        ["piwatch", "search", "zorblax", "--all", "--json"], env=env, capture_output=True, text=True
                    )
                ).returncode
                == 0
                and json.loads(r.stdout)["hits"]
            ),
            timeout=60,
            message="the README's first search",
        )
        assert found[0]["entryId"] == "e1"
        doctor = subprocess.run(["piwatch", "doctor", "--json"], env=env, capture_output=True, text=True, timeout=60)
        states = {c["name"]: c["state"] for c in json.loads(doctor.stdout)}
        assert states["daemon"] == states["PATH"] == states["sessions"] == states["index"] == "ok", doctor.stdout
        assert doctor.returncode == 0
    finally:
        env["PATH"] = f"{home / '.local' / 'bin'}:{env['PATH']}"
        _stop_daemon(env)


@pytest.mark.e2e
def test_doctor_says_what_to_fix_on_a_machine_with_nothing(short_tmp):
    env = _fresh_home(short_tmp)
    for folder in (Path(env["HOME"]) / ".pi").rglob("*.jsonl"):
        folder.unlink()
    env["PATH"] = f"{Path(PIWATCH).parent}:{env['PATH']}"
    done = subprocess.run([PIWATCH, "doctor"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1  # the daemon is not answering: a failure, with its fix
    assert re.search(r"^fail  daemon .*\n .*fix: ", done.stdout, re.M), done.stdout
    assert re.search(r"^warn  sessions  0 session files", done.stdout, re.M), done.stdout
    assert "Traceback" not in done.stdout + done.stderr
