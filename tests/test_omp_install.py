"""`piwatch pi install` for oh-my-pi: `--agent omp` (or omp alone on the machine)
puts the same extension where omp loads user extensions, `<omp agent dir>/extensions/piwatch/`
(omp 18's `getAgentDir`: `~/.omp/agent`, `PI_CODING_AGENT_DIR`, a profile's), and
takes it away again; Pi's agent dir is never touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from piwatch.commands.pi import agent_dir, which_agent

EXT_SRC = Path(__file__).resolve().parent.parent / "client" / "pi-extension"


@pytest.mark.parametrize(
    ("present", "env", "explicit", "agent", "directory"),
    [
        ((), {}, None, "pi", ".pi/agent"),  # nothing yet: Pi, as before
        ((".pi/agent",), {}, None, "pi", ".pi/agent"),
        ((".omp/agent",), {}, None, "omp", ".omp/agent"),  # omp alone: omp
        ((".pi/agent", ".omp/agent"), {}, None, "pi", ".pi/agent"),  # both: Pi unless told
        ((".pi/agent", ".omp/agent"), {}, "omp", "omp", ".omp/agent"),
        ((), {}, "omp", "omp", ".omp/agent"),
        ((".omp/profiles/work/agent",), {"OMP_PROFILE": "work"}, None, "omp", ".omp/profiles/work/agent"),
        ((".omp2/agent",), {"PI_CONFIG_DIR": ".omp2"}, None, "omp", ".omp2/agent"),
        # PI_CODING_AGENT_DIR is both agents' agent dir
        (("shared",), {"PI_CODING_AGENT_DIR": "~/shared"}, None, "pi", "shared"),
        (("shared",), {"PI_CODING_AGENT_DIR": "~/shared"}, "omp", "omp", "shared"),
    ],
)
def test_the_agent_and_its_directory(tmp_path, monkeypatch, present, env, explicit, agent, directory):
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("PI_CODING_AGENT_DIR", "PI_CONFIG_DIR", "OMP_PROFILE", "PI_PROFILE", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for d in present:
        (tmp_path / d).mkdir(parents=True)
    which = which_agent(explicit, os.environ)
    assert (which, agent_dir(None, os.environ, which)) == (agent, tmp_path / directory)


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_", "OMP_"))}
    env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "piwatch.cli", "pi", *args], env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.timeout(600)
def test_install_where_omp_loads_extensions_and_uninstall(tmp_path):
    home = tmp_path / "home"
    (home / ".omp" / "agent").mkdir(parents=True)  # omp alone on this machine
    out = _cli(home, "install")
    assert out.returncode == 0, out.stderr
    target = home / ".omp" / "agent" / "extensions" / "piwatch"
    assert f"installed the piwatch extension for omp in {target}" in out.stdout
    assert "omp loads it at its next start" in out.stdout
    assert (target / "index.ts").read_bytes() == (EXT_SRC / "index.ts").read_bytes()
    # omp reads the same manifest field Pi does (`pi.extensions`, or `omp.extensions`)
    assert json.loads((target / "package.json").read_text())["pi"]["extensions"] == ["./index.ts"]
    assert (target / "node_modules" / "@msgpack" / "msgpack" / "package.json").is_file()
    assert not (home / ".pi").exists()
    status = json.loads(_cli(home, "status", "--json").stdout)
    assert status["agent"] == "omp" and status["installed"] and status["target"] == str(target)
    # Pi appears later: the default is Pi's again, and omp's install is reached by --agent omp.
    (home / ".pi" / "agent").mkdir(parents=True)
    assert json.loads(_cli(home, "status", "--json").stdout)["installed"] is False
    out = _cli(home, "uninstall", "--agent", "omp")
    assert out.returncode == 0, out.stderr
    assert not (home / ".omp" / "agent" / "extensions").exists()  # we made it: gone
    assert (home / ".omp" / "agent").is_dir()
