"""What people expect of a command line (issue 18): `--version`, shell
completion, a quiet end when the reader of stdout goes away (`| head`),
`sessions` with a query and search's scope flags, and a `status` that says
what a run did. Through the real executables against piwatchd."""

from __future__ import annotations

import os
import subprocess

import pytest
from helpers.live import poll
from helpers.world import BIN, write
from piwatch import __version__
from piwatch.commands.status import refeed_summary, run_summary
from piwatch.wire import ServiceStatus

pytestmark = pytest.mark.timeout(120)


def test_version():
    out = subprocess.run([str(BIN / "piwatch"), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"piwatch {__version__}"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_code_for_each_shell(shell):
    out = subprocess.run([str(BIN / "piwatch"), "completion", shell], capture_output=True, text=True, check=True)
    assert "_ARGCOMPLETE" in out.stdout and "piwatch" in out.stdout


@pytest.mark.parametrize(
    ("line", "expected", "absent"),
    [
        ("piwatch se", {"search", "sessions", "service"}, {"status"}),
        ("piwatch sessions --un", {"--under", "--until"}, {"--limit"}),
        ("piwatch completion ", {"bash", "zsh", "fish"}, set()),
    ],
)
def test_completion_answers_from_the_parser(line, expected, absent):
    """What the shell code asks: the parser itself completes commands and options."""
    env = {**os.environ, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line)), "_ARGCOMPLETE_IFS": "\n"}
    # argcomplete answers on fd 8 (and may log to fd 9), as the shell code sets them up.
    proc = subprocess.run(
        f"'{BIN / 'piwatch'}' 8>&1 9>/dev/null", shell=True, env=env, capture_output=True, text=True, timeout=30
    )
    words = {w.strip() for w in proc.stdout.split("\n")} - {""}
    assert proc.returncode == 0, proc.stderr
    assert expected <= words, words
    assert not absent & words


def test_every_command_piped_into_head_exits_quietly(world):
    for i in range(40):
        write(world.root, f"z{i}", f"s-many-{i}", str(world.proj), f"kraken many {i}", "kraken reply")
    with world.client({"all": True}) as c:
        poll(lambda: len(c.sessions(limit=100).sessions) >= 45, 30, interval=0.1, message="the 40 new sessions")
    for args in (["sessions", "--all"], ["search", "kraken", "--all", "--limit", "100"], ["status"]):
        # `head -n 0` is gone before piwatch writes: every write meets a closed pipe.
        for head, lines in (("head -1", 1), ("head -n 0", 0)):
            out = subprocess.run(
                f"'{BIN / 'piwatch'}' {' '.join(args)} | {head}",
                shell=True,
                env=world.env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.stderr == "", (args, out.stderr)
            assert len(out.stdout.splitlines()) == lines


def test_sessions_query_and_scope_flags(world):
    all_ = world.cli("sessions", "--all", "--json")
    assert all_.returncode == 0, all_.stderr
    out = world.cli("sessions", "release", "notes", "--all")
    assert out.returncode == 0, out.stderr
    assert "s-proj" in out.stdout and "s-nested" not in out.stdout
    # The query goes through search's authorization: another project's session is never listed.
    # (s-fork, in this project, copies s-prefix's first entry: that copy is this project's.)
    out = world.cli("sessions", "sibling", cwd=str(world.proj))
    assert [line.split()[2] for line in out.stdout.splitlines()] == ["s-fork"]
    out = world.cli("sessions", "sibling", "--all")
    assert "s-prefix" in out.stdout
    under = world.cli("sessions", "--all", "--under", str(world.proj / "pkg"))
    assert "s-nested" in under.stdout and "s-proj" not in under.stdout
    exact = world.cli("sessions", "--all", "--cwd", str(world.base / "proj2"))
    assert [line.split()[2] for line in exact.stdout.splitlines()] == ["s-prefix"]
    # The fixture's entries are from 2026-05-01.
    assert "no sessions visible" in world.cli("sessions", "--all", "--since", "2026-06-01").stdout
    assert "s-proj" in world.cli("sessions", "--all", "--until", "2026-06-01").stdout
    assert "no sessions visible" in world.cli("sessions", "--all", "--until", "2026-04-01").stdout
    with world.client({"all": True}) as c:
        assert {s.session_id for s in c.sessions("kraken answer").sessions} == {"s-proj"}
        assert c.sessions("nothing-matches-this").sessions == []


def test_status_after_index_once_says_nothing_was_new(world):
    world.stop()
    out = world.cli("index", "--once", "--sessions", str(world.root))
    assert out.returncode == 0, out.stderr
    world.start()
    status = world.cli("status")
    assert "nothing new since the last index" in status.stdout, status.stdout


@pytest.mark.parametrize(
    ("svc", "expected"),
    [
        (ServiceStatus(files_ingested=0), "nothing ingested yet this run"),
        (ServiceStatus(files_ingested=60, files_changed=0, bytes_ingested=0, events_ingested=0), "60 files checked"),
        (ServiceStatus(files_ingested=60, bytes_ingested=0, events_ingested=0), "nothing new since the last index"),
        (ServiceStatus(files_ingested=60, files_changed=3, bytes_ingested=2_000_000, events_ingested=40), "3 of 60"),
        (ServiceStatus(files_ingested=5, bytes_ingested=10, events_ingested=1), "5 files had new data"),
    ],
)
def test_run_summary(svc, expected):
    assert expected in run_summary(svc)


@pytest.mark.parametrize(
    ("svc", "expected"),
    [
        (ServiceStatus(), None),
        (ServiceStatus(refeed_done=0, refeed_total=0), None),
        (ServiceStatus(refeed_done=0, refeed_total=11281, refeed_seconds=0.0), "0 of 11,281 sessions (0.0%); until"),
        (
            ServiceStatus(refeed_done=2000, refeed_total=11281, refeed_seconds=400.0),
            "2,000 of 11,281 sessions (17.7%), 5.0 sessions/s, 30m56s left;",
        ),
        (
            ServiceStatus(refeed_done=11281, refeed_total=11281, refeed_seconds=10.0),
            "(100.0%), 1128.1 sessions/s, 0s left",
        ),
    ],
)
def test_refeed_summary(svc, expected):
    got = refeed_summary(svc)
    assert got == expected if expected is None else expected in got
