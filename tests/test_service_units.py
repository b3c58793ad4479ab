"""The systemd unit and the launchd agent are well-formed and say what the
daemon needs (Type=notify with a watchdog; RunAtLoad and KeepAlive on failure)."""

from __future__ import annotations

import configparser
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from piwatch.commands.service import LAUNCHD_LABEL, render_launchd_plist, render_systemd_unit

REPO = Path(__file__).resolve().parent.parent
PIWATCHD = str(Path(sys.executable).with_name("piwatchd"))


def _unit(text: str) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str
    cp.read_string(text)
    return cp


@pytest.mark.parametrize("text", [(REPO / "systemd" / "piwatchd.service").read_text(), render_systemd_unit(PIWATCHD)])
def test_systemd_unit_shape(text):
    unit = _unit(text)
    svc = unit["Service"]
    assert svc["Type"] == "notify" and svc["Restart"] == "on-failure" and int(svc["WatchdogSec"]) > 0
    assert unit["Install"]["WantedBy"] == "default.target"


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed here")
def test_systemd_analyze_verify(tmp_path):
    path = tmp_path / "piwatchd.service"
    path.write_text(render_systemd_unit(PIWATCHD))
    out = subprocess.run(["systemd-analyze", "--user", "verify", str(path)], capture_output=True, text=True)
    # Only complaints about this unit count (the host's other units are not ours).
    ours = [line for line in (out.stdout + out.stderr).splitlines() if "piwatchd.service" in line]
    assert not ours, ours


@pytest.mark.parametrize(
    "data",
    [(REPO / "launchd" / "dev.piwatch.piwatchd.plist").read_bytes(), render_launchd_plist(PIWATCHD, "/Users/someone")],
)
def test_launchd_plist_shape(data):
    plist = plistlib.loads(data)
    assert plist["Label"] == LAUNCHD_LABEL and plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["ProgramArguments"][0].endswith("piwatchd")
    assert "Library/Logs/piwatch" in plist["StandardErrorPath"]


@pytest.mark.skipif(not shutil.which("plutil"), reason="plutil exists only on macOS")
def test_plutil_lint(tmp_path):
    path = tmp_path / "p.plist"
    path.write_bytes(render_launchd_plist(PIWATCHD, "/Users/someone"))
    subprocess.run(["plutil", "-lint", str(path)], check=True)


def test_service_print_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    out = subprocess.run(
        [sys.executable, "-m", "piwatch.cli", "service", "install", "--print"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "ExecStart=" in out.stdout or "<plist" in out.stdout
    assert not (tmp_path / "cfg").exists()
    subprocess.run(
        [sys.executable, "-m", "piwatch.cli", "service", "install", "--no-start"], check=True, capture_output=True
    )
    unit = tmp_path / "cfg" / "systemd" / "user" / "piwatchd.service"
    assert unit.exists() and f"ExecStart={PIWATCHD}" in unit.read_text()
    subprocess.run([sys.executable, "-m", "piwatch.cli", "service", "uninstall"], check=True, capture_output=True)
    assert not unit.exists()


def test_install_renders_the_shipped_files():
    """One unit and one agent: `service install` writes the shipped files, only
    the program path (and the user's log paths) filled in."""
    shipped = (REPO / "systemd" / "piwatchd.service").read_text().splitlines()
    rendered = render_systemd_unit(PIWATCHD).splitlines()
    assert f"ExecStart={PIWATCHD}" in rendered
    assert [x for x in rendered if not x.startswith("ExecStart=")] == [
        x for x in shipped if not x.startswith("ExecStart=")
    ]
    filled = ("ProgramArguments", "StandardErrorPath", "StandardOutPath")
    agent = plistlib.loads(render_launchd_plist(PIWATCHD, "/Users/someone"))
    original = plistlib.loads((REPO / "launchd" / "dev.piwatch.piwatchd.plist").read_bytes())
    assert {k: v for k, v in agent.items() if k not in filled} == {k: v for k, v in original.items() if k not in filled}
    assert agent["ProgramArguments"] == [PIWATCHD]
    assert agent["StandardErrorPath"] == "/Users/someone/Library/Logs/piwatch/piwatchd.log"
