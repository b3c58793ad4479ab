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


def _tracked_text_files():
    import subprocess

    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, names):
        path = REPO / name.decode()
        if path.suffix in {".py", ".md", ".mjs", ".ts", ".toml", ".json", ""} and path.is_file():
            yield path


def test_repository_refers_to_nothing_beside_it():
    # A clone with nothing next to it must work: no file may reach into a sibling `shared/` folder.
    offenders = [
        str(p.relative_to(REPO))
        for p in _tracked_text_files()
        if p != Path(__file__) and re.search(r"\.\./shared|/work/shared", p.read_text(errors="replace"))
    ]
    assert offenders == []


def test_markdown_links_stay_inside_the_repository():
    broken = []
    for md in [p for p in _tracked_text_files() if p.suffix == ".md"]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", md.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            resolved = (md.parent / target).resolve()
            if not resolved.exists() or not resolved.is_relative_to(REPO):
                broken.append(f"{md.relative_to(REPO)} -> {target}")
    assert broken == []
