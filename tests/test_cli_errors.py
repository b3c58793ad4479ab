"""The CLI never prints a traceback for bad input (issue 10, item 9).

Each class with several variants, through the real `piwatch` executable:
usage and query errors exit 2 with one line; a database that cannot be used
exits 1 and names the file; both with piwatchd running and against `--db`.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from piwatch.cli import argument_problem

pytestmark = pytest.mark.timeout(120)

BAD_ARGS = [
    ["search", os.fsdecode(b"caf\xe9")],  # Latin-1 bytes in argv
    ["search", "x", "--tool", os.fsdecode(b"\xff\xfe")],
    ["search", "x", "--since", "9999999999999w"],
    ["search", "x", "--until", "99999999999999999999d"],
    ["search", "x", "--since", "2026-13-45"],
    ["search", "x", "--limit", "99999999999999999999999"],
    ["search", "x", "--offset", "-99999999999999999999999"],
    ["search", "x", "--wait", "1e999"],
    ["read", "s", "e", "--before", "99999999999999999999999"],
    ["read", os.fsdecode(b"s\x80"), "e"],
    ["sessions", "--limit", "nan"],
    ["search", "x", "--limit", "0"],
]


def one_line_error(out: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("piwatch"), out.stderr
    return lines[0]


@pytest.mark.parametrize("args", BAD_ARGS, ids=lambda a: " ".join(map(repr, a))[:40])
def test_bad_arguments_exit_2_with_one_line(world, args):
    for extra in ([], ["--db", str(world.db)]):
        out = world.cli(*args, *extra, cwd=str(world.proj))
        assert out.returncode == 2, (args, extra, out.stderr)
        one_line_error(out)
    assert world.proc.poll() is None


def test_bad_database_exits_1_naming_the_file(world, tmp_path):
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"this is not SQLite\n" * 100)
    empty_dir = tmp_path / "a-directory"
    empty_dir.mkdir()
    for db in (garbage, empty_dir, tmp_path / "missing.sqlite3"):
        for args in (
            ["search", "x"],
            ["status"],
            ["sessions"],
            ["read", "s", "e"],
            ["trace", "s", "e"],
            ["index", "--once", "--sessions", str(world.root)],
        ):
            out = world.cli(*args, "--db", str(db))
            if db.name == "missing.sqlite3" and args[0] == "index":
                assert out.returncode == 0, out.stderr  # a new index is created there
                continue
            assert out.returncode == 1, (args, db, out.stdout, out.stderr)
            assert str(db) in one_line_error(out)
    assert garbage.read_bytes().startswith(b"this is not SQLite")  # never overwritten


def test_index_once_names_a_missing_sessions_directory(world, tmp_path):
    for sessions in ([str(tmp_path / "nonexistent")], [str(world.root), "/nonexistent/either"]):
        args = [a for s in sessions for a in ("--sessions", s)]
        out = world.cli("index", "--once", *args, "--db", str(tmp_path / "x.sqlite3"))
        assert out.returncode == 2
        assert "no sessions directory at" in one_line_error(out)


@pytest.mark.parametrize(
    "values, problem",
    [
        ({"query": ["ok"], "limit": 20}, None),
        ({"query": ["a\udcff"]}, "query: b'a\\xff' is not valid UTF-8"),
        ({"db": "/tmp/\udcff.sqlite3", "query": ["x"]}, None),  # paths may hold any bytes
        ({"limit": 2**60}, "--limit: 1152921504606846976… is out of range"),
        ({"wait": float("inf")}, "--wait: inf is not a finite number"),
        ({"wait": float("nan")}, "--wait: nan is not a finite number"),
        ({"all": True, "json": False}, None),
    ],
)
def test_argument_problem_table(values, problem):
    assert argument_problem(values) == problem
