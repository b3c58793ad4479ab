"""Lint and type checks, as `.ci/run` runs them, so a plain pytest run catches them too.

Configuration lives in pyproject.toml ([tool.ruff], [tool.mypy]). To see and fix:
`ruff check .` (`ruff check --fix .` for the safe fixes) and `mypy` from the repository root.
"""

from __future__ import annotations

import ast
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


# The sleeps a test may take: paces that decide no outcome, each with its reason. Any other wait
# polls for its condition with a deadline (`helpers.live.poll`): a fixed sleep guesses how long the
# machine takes, and a loaded machine takes longer (issue 33: the suite flaked under load).
PACES = {
    ("helpers/live.py", "poll"): "the one wait: the interval between its checks",
    ("test_tui.py", "_until"): "`poll` for a Textual pilot: the app runs in the interval between checks",
    ("test_live.py", "test_append_byte_by_byte_and_mid_line"): "a slow writer's pace, a byte at a time",
    ("test_live.py", "test_continuous_appends_are_ingested_within_max_latency"): "appends quicker than settle",
    ("test_live.py", "test_kill9_at_random_points_converges_to_a_clean_build"): "the random moment of a kill",
    ("test_follow.py", "test_a_slow_reader_is_dropped_and_the_others_go_on"): "the flood's waves",
    ("test_fairness.py", "test_deep_pages_from_one_client_never_starve_another"): "the trivial client's pace",
    ("test_hostile_ingest.py", "_run"): "the period of a memory sampler",
}


def _waits(tree: ast.AST) -> list[tuple[str, int]]:
    """(innermost function, line) of each `sleep(...)` and pilot `pause(seconds)` call."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call):
                f = child.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if name == "sleep" or (name == "pause" and child.args):
                    found.append((where, child.lineno))
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_no_test_decides_by_a_fixed_sleep():
    tests = REPO / "tests"
    unexplained, used = [], set()
    for path in sorted(tests.rglob("*.py")):
        if "node_modules" in path.parts:
            continue
        rel = path.relative_to(tests).as_posix()
        for where, line in _waits(ast.parse(path.read_text(), str(path))):
            if (rel, where) in PACES:
                used.add((rel, where))
            else:
                unexplained.append(f"tests/{rel}:{line} in {where}")
    assert not unexplained, (
        "a fixed sleep decides these tests: wait for the condition instead (helpers.live.poll), "
        f"or add a pace that decides nothing to PACES with its reason: {unexplained}"
    )
    assert set(PACES) == used, f"PACES names waits that are gone: {sorted(set(PACES) - used)}"
