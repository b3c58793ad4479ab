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


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)\n```", text, re.S)


def test_the_python_examples_run_as_written(world):
    # Every Python example of the README and the guide runs unchanged against a real piwatchd
    # (found through PIWATCH_SOCKET, as a user's default socket would be) and prints what it promises.
    import subprocess
    import sys

    from helpers.world import wait_for, write

    write(world.root, "--w--", "s-doc", str(world.proj), "the websocket reconnect error again", "fixed the backoff")
    wait_for(lambda: world.client({"all": True}).search("backoff").hits)
    blocks = _python_blocks(README) + _python_blocks((REPO / "docs" / "guide.md").read_text())
    assert len(blocks) >= 3
    for block in blocks:
        proc = subprocess.Popen(
            [sys.executable, "-c", block], env=world.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        if "follow(" in block:  # a standing query: new sessions are written until its first new hit ends it
            n = 0
            while wait_for_exit(proc, 0.5) is None and n < 60:
                write(world.root, "--w--", f"s-new{n}", str(world.proj), "websocket once more")
                n += 1
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, block + err
        assert "s-doc" in out or "s-new" in out, block + out


def wait_for_exit(proc, seconds: float):
    import subprocess

    try:
        return proc.wait(seconds)
    except subprocess.TimeoutExpired:
        return None


def test_the_readme_first_searches_run_as_written(world):
    # The README's first commands, word for word (those naming no placeholder such as SESSION).
    import shlex
    import subprocess

    from helpers.world import BIN, wait_for, write

    write(world.root, "--w--", "s-doc", str(world.proj), "the websocket reconnect error and the lockfile")
    wait_for(lambda: world.client({"all": True}).search("lockfile").hits)
    block = re.search(r"## First searches\n\n```sh\n(.*?)\n```", README, re.S).group(1)
    commands = [line.split("  #")[0].strip() for line in block.splitlines()]
    runnable = [c for c in commands if not re.search(r"\b[A-Z]{3,}\b", c) and c != "piwatch tui"]
    assert len(runnable) >= 4
    for command in runnable:
        argv = shlex.split(command)
        done = subprocess.run(
            [str(BIN / argv[0]), *argv[1:]], env=world.env, cwd=world.proj, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, command + done.stderr
        assert "s-doc" in done.stdout or "--since" in command, command + done.stdout
