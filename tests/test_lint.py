"""Lint and type checks, as `.ci/run` runs them, so a plain pytest run catches them too.

Configuration lives in pyproject.toml ([tool.ruff], [tool.mypy]). To see and fix:
`ruff check .` (`ruff check --fix .` for the safe fixes) and `mypy` from the repository root.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    try:
        __import__(module)
    except ImportError:
        pytest.fail(f"{module} is not installed: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_ruff_check_passes():
    out = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert out.returncode == 0, f"`ruff check .` found problems:\n{out.stdout}{out.stderr}"


def test_ruff_format_is_clean():
    out = _run("ruff", "format", "--no-cache", "--check", ".")
    assert out.returncode == 0, (
        f"`ruff format --check .` would reformat (run `ruff format .`):\n{out.stdout}{out.stderr}"
    )


def test_mypy_passes():
    # The repository's own cache dir keeps repeated runs at a fraction of a second.
    out = _run("mypy")
    assert out.returncode == 0, f"`mypy` found problems:\n{out.stdout}{out.stderr}"


def test_ci_runs_lint_and_types_before_the_tests():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    order = [
        line.strip()
        for line in ci
        if line.strip() in ("ruff format --check .", "ruff check .", "mypy", "python -m pytest -q -p no:cacheprovider")
    ]
    assert order == ["ruff format --check .", "ruff check .", "mypy", "python -m pytest -q -p no:cacheprovider"]
