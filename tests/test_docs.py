"""The README stays true: its commands exist and CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

import piwatch.cli

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def test_ci_runs_the_readme_test_command():
    block = re.search(r"Install and run the tests.*?```sh\n(.*?)\n```", README, re.S).group(1)
    steps = [s.strip() for s in block.split("&&")]
    ci = (REPO / ".ci" / "run").read_text()
    for step in steps[2:]:  # after creating and activating the venv
        assert step in ci, step


def test_every_documented_subcommand_exists():
    documented = set(re.findall(r"^piwatch ([a-z]+)", README, re.M))
    assert documented <= set(piwatch.cli.COMMANDS), documented - set(piwatch.cli.COMMANDS)
    assert set(piwatch.cli.COMMANDS) <= documented, set(piwatch.cli.COMMANDS) - documented
