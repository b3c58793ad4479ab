"""The command line as a newcomer meets it (issue 30): session ids like git's,
filters that refuse unknown values, messages for people, and a scope that
explains itself. Through the real `piwatch` executable against a real
piwatchd (and its index file, with the daemon stopped, where that matters).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from helpers.world import BIN, World, wait_for, write

pytestmark = pytest.mark.timeout(120)

# Pi's ids are UUIDs; these share prefixes on purpose.
A1 = "0190aaaa-1111-7000-8000-000000000001"  # this project
A2 = "0190aaaa-2222-7000-8000-000000000002"  # this project
AX = "0190aaaa-9999-7000-8000-000000000009"  # the other project: shares A1's and A2's prefix
B1 = "0190bbbb-3333-7000-8000-000000000003"  # the other project only


@pytest.fixture
def ids_world(short_tmp):
    w = World(short_tmp)
    w.root.mkdir()
    write(w.root, "a", A1, str(w.proj), "walrus first question", "walrus first answer")
    write(w.root, "b", A2, str(w.proj), "walrus second question")
    write(w.root, "c", AX, str(w.base / "proj2"), "walrus hidden elsewhere")
    write(w.root, "d", B1, str(w.base / "proj2"), "narwhal only elsewhere", "narwhal reply")
    w.start()
    wait_for(lambda: w.client({"all": True}).status().sessions == 4)
    yield w
    w.stop()


def err_line(out) -> str:
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines and all(line.startswith("piwatch") for line in lines), out.stderr
    return out.stderr.strip()


# -- ids like git --------------------------------------------------------------------------------


def test_a_unique_prefix_names_a_session_everywhere(ids_world):
    w = ids_world
    here = str(w.proj)
    read = w.cli("read", A1[:10], f"{A1}-e0", "--json", cwd=here)
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["sessionId"] == A1
    trace = w.cli("trace", A1[:8] + "-1", f"{A1}-e1", cwd=here)
    assert trace.returncode == 0, trace.stderr
    assert A1 in trace.stdout
    found = w.cli("search", "walrus", "--session", A2[:12], "--json", cwd=here)
    assert found.returncode == 0, found.stderr
    assert {h["sessionId"] for h in json.loads(found.stdout)["hits"]} == {A2}
    queued = w.cli("reindex", B1[:8])  # reindex is the local user's: every project
    assert queued.returncode == 0, queued.stderr
    assert queued.stdout.strip() == f"queued: {B1}"


def test_an_ambiguous_prefix_is_a_usage_error_naming_only_visible_sessions(ids_world):
    w = ids_world
    for args in (["read", "0190aaaa", "x"], ["trace", "0190aaaa-", "x"], ["search", "walrus", "--session", "0190aaaa"]):
        out = w.cli(*args, cwd=str(w.proj))
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        line = err_line(out)
        assert "ambiguous" in line and A1 in line and A2 in line, line
        assert AX not in line  # the other project's session never shows, nor counts
        assert "2 sessions" in line
    everywhere = w.cli("read", "0190aaaa", "x", "--all")
    assert everywhere.returncode == 2 and "3 sessions" in everywhere.stderr and AX in everywhere.stderr


def test_a_short_id_is_a_usage_error_and_an_unknown_one_is_not_found(ids_world):
    w = ids_world
    for args in (["read", "0190aa", "e"], ["trace", "abc", "e"], ["reindex", "0190"]):
        out = w.cli(*args, cwd=str(w.proj))
        assert out.returncode == 2, (args, out.stderr)
        assert "at least 8 characters" in err_line(out)
    for args in (["read", "0190cccc", "e"], ["trace", "0190cccc-0000-7000", "e"], ["reindex", "0190cccc"]):
        out = w.cli(*args, cwd=str(w.proj))
        assert out.returncode == 1, (args, out.stderr)
        line = err_line(out)
        assert "no session" in line and "event" not in line and "not_found" not in line, line
    # A hidden session answers exactly as a missing one, by its whole id or a prefix.
    for hidden, missing in ((B1, "0190cccc-3333-7000-8000-000000000003"), (B1[:9], "0190cccc-")):
        answers = [w.cli("read", sid, "e", cwd=str(w.proj)) for sid in (hidden, missing)]
        assert [(a.returncode, a.stdout) for a in answers] == [(1, "")] * 2
        assert answers[0].stderr.splitlines()[0] == answers[1].stderr.splitlines()[0]
    # A session that exists but holds no such entry is still "no such event".
    out = w.cli("read", A1, "nope", cwd=str(w.proj))
    assert out.returncode == 1 and "no such event" in err_line(out)


# -- filters with closed vocabularies ------------------------------------------------------------

BAD_VALUES = [
    ("--kind", "garbage", "user.text"),
    ("--role", "nosuch", "toolResult"),
    ("--type", "nosuch", "branch_summary"),
    ("--branch", "chosen", "alternate"),
    ("--selection", "maybe", "not-applicable"),
]


@pytest.mark.parametrize(("flag", "value", "valid"), BAD_VALUES, ids=[f for f, _, _ in BAD_VALUES])
def test_an_unknown_filter_value_is_a_usage_error_listing_the_values(ids_world, flag, value, valid):
    w = ids_world
    for extra in ([], ["--db", str(w.db)], ["--follow"]):
        out = w.cli("search", "walrus", flag, "user.text" if flag == "--kind" else valid, flag, value, *extra)
        assert out.returncode == 2, (extra, out.stdout, out.stderr)
        line = err_line(out)
        assert value in line and valid in line, line


@pytest.mark.parametrize(
    ("name", "value", "valid"),
    [
        ("kind", "garbage", "tool.call"),
        ("role", "nosuch", "assistant"),
        ("eventType", "nosuch", "message"),
        ("branchState", "x", "selected"),
        ("selectionState", "x", "direct"),
    ],
)
def test_the_daemon_refuses_unknown_filter_values_for_every_caller(ids_world, name, value, valid):
    """The same vocabulary refuses the Pi tool's, the TUI's and the Python client's values."""
    from piwatch.client import RequestFailed

    with ids_world.client({"cwd": str(ids_world.proj)}) as c:
        with pytest.raises(RequestFailed) as refused:
            c.search("walrus", filters={name: [value]})
        assert refused.value.code == "bad_request"
        assert value in refused.value.message and valid in refused.value.message
        with pytest.raises(RequestFailed) as refused_follow:
            c.follow("walrus", filters={name: [value]})
        assert refused_follow.value.code == "bad_request" and valid in refused_follow.value.message
        assert "$" not in refused.value.message + refused_follow.value.message
        assert c.search("walrus", filters={name: [valid]}) is not None  # a valid value is taken


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("piwatch search x --kind ", {"user.text", "bash.command", "tool.call", "session.name"}),
        ("piwatch search x --kind bash.", {"bash.command", "bash.output"}),
        ("piwatch search x --role ", {"user", "assistant", "toolResult"}),
        ("piwatch search x --selection ", {"direct", "not-selected"}),
    ],
)
def test_completion_offers_filter_values_not_file_names(line, expected):
    env = {**os.environ, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line)), "_ARGCOMPLETE_IFS": "\n"}
    proc = subprocess.run(
        f"'{BIN / 'piwatch'}' 8>&1 9>/dev/null", shell=True, env=env, capture_output=True, text=True, timeout=30
    )
    words = {w.strip() for w in proc.stdout.split("\n")} - {""}
    assert proc.returncode == 0, proc.stderr
    assert expected <= words, words
    assert all("/" not in w for w in words), words


def test_help_says_how_a_bash_tool_call_is_found():
    out = subprocess.run([str(BIN / "piwatch"), "search", "--help"], capture_output=True, text=True, check=True)
    assert "tool.call with --tool bash" in " ".join(out.stdout.split())


# -- messages for people -------------------------------------------------------------------------

INTERNALS = ("Expected `", "$.", "not_found", "bad_request", "query_error", "Error)", "Error:")


def said_for_people(out) -> str:
    text = err_line(out)
    assert not [word for word in INTERNALS if word in text], text
    return text


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["search", "x", "--limit", "0"], "--limit: must be at least 1"),
        (["search", "x", "--limit", "201"], "--limit: must be at most 200"),
        (["search", "x", "--offset", "10001"], "--offset: must be at most 10,000"),
        (["search", "x", "--wait", "11"], "--wait: must be at most 10"),
        (["read", "s", "e", "--before", "51"], "--before: must be at most 50"),
        (["read", "s", "e", "--fragment", "f", "--length", "0"], "--length: must be at least 1"),
        (["sessions", "--limit", "501"], "--limit: must be at most 500"),
        (["read", "s", "e", "--offset", "5"], "--offset and --length page through one fragment: add --fragment"),
        (["search", "!!!"], "the query has no searchable words"),
        (["search", "!!!", "--follow"], "the query has no searchable words"),
    ],
)
def test_usage_errors_are_said_for_people(ids_world, args, said):
    out = ids_world.cli(*args, cwd=str(ids_world.proj))
    assert out.returncode == 2, (args, out.stderr)
    assert said in said_for_people(out)


def test_every_bound_is_in_the_help():
    from piwatch import wire

    def helps(*cmd: str) -> str:
        out = subprocess.run([str(BIN / "piwatch"), *cmd, "--help"], capture_output=True, text=True, check=True)
        return " ".join(out.stdout.split())

    search = helps("search")
    assert f"1-{wire.MAX_LIMIT}" in search and f"0-{wire.MAX_OFFSET:,}" in search
    assert f"at most {wire.MAX_WAIT_SECONDS:g}" in search
    read = helps("read")
    assert f"0-{wire.NEIGHBOURS_MAX}" in read and f"1-{wire.WINDOW_MAX:,}" in read
    assert f"1-{wire.MAX_SESSIONS_LIMIT}" in helps("sessions")


def test_json_keeps_the_code_and_people_get_the_words(ids_world):
    w = ids_world
    out = w.cli("read", A1, "nope", "--json", cwd=str(w.proj))
    assert out.returncode == 1
    assert json.loads(out.stdout)["error"]["code"] == "not_found"
    assert "no such event" in said_for_people(out)
    out = w.cli("read", "0190aaaa", "e", "--json", cwd=str(w.proj))
    assert out.returncode == 2 and json.loads(out.stdout)["error"]["code"] == "bad_request"


def test_a_stopped_daemon_is_said_in_words(ids_world):
    w = ids_world
    w.stop()
    status = w.cli("status")
    assert status.returncode == 1
    first = status.stdout.splitlines()[0]
    assert first.startswith(f"piwatchd is not running at {w.sock} (no socket there)"), first
    assert "Error" not in status.stdout + status.stderr
    search = w.cli("search", "walrus", "--all")
    assert search.returncode == 0 and A1 in search.stdout  # answered from the index file
    assert "(no socket there)" in search.stderr and "Error" not in search.stderr


# -- a scope that explains itself ----------------------------------------------------------------


def test_read_and_trace_of_another_projects_event_say_how_to_widen(ids_world):
    w = ids_world
    for op in ("read", "trace"):
        out = w.cli(op, B1, f"{B1}-e0", cwd=str(w.proj))
        assert out.returncode == 1
        assert f"a session of another project holds it: add --all to {op} it" in said_for_people(out)
        prefixed = w.cli(op, B1[:8], f"{B1}-e0", cwd=str(w.proj))
        assert prefixed.returncode == 1 and "add --all" in prefixed.stderr
        missing = w.cli(op, A1, "nope", cwd=str(w.proj))
        assert missing.returncode == 1 and "another project" not in missing.stderr
        assert w.cli(op, B1, f"{B1}-e0", "--all").returncode == 0


def test_a_search_that_finds_nothing_here_counts_the_other_projects_hits(ids_world):
    w = ids_world
    here = str(w.proj.resolve())
    out = w.cli("search", "narwhal", cwd=str(w.proj))
    assert out.returncode == 0, out.stderr
    assert (
        out.stdout.splitlines()[0]
        == f"no hits in the sessions of {here}; 2 hits in other projects: add --all to see them"
    )
    grouped = w.cli("search", "narwhal", "--sessions", cwd=str(w.proj))
    assert "2 hits in other projects" in grouped.stdout
    nowhere = w.cli("search", "zzqqxx", cwd=str(w.proj))
    assert nowhere.stdout.splitlines()[0] == f"no hits in the sessions of {here}, nor in other projects"
    # --json stays the answer as piwatchd gave it, and asks nothing more.
    js = json.loads(w.cli("search", "narwhal", "--json", cwd=str(w.proj)).stdout)
    assert js["hits"] == [] and "other projects" not in json.dumps(js)


def test_the_pi_tools_caller_learns_nothing_of_other_projects(ids_world):
    """The count is the command line's own second request as the local user; a workspace
    caller's answer (what the Pi tool gets) holds nothing about other projects."""
    from piwatch.wire import to_json

    with ids_world.client({"cwd": str(ids_world.proj)}) as c:
        result = c.search("narwhal")
        warnings = c.last_warnings
    text = to_json(result) + to_json(warnings)
    assert result.hits == [] and B1 not in text and "proj2" not in text and "other project" not in text


def test_a_follow_says_where_it_looks_and_what_other_projects_hold(ids_world):
    import signal

    w = ids_world
    proc = subprocess.Popen(
        [str(BIN / "piwatch"), "search", "narwhal", "--follow"],
        cwd=str(w.proj),
        env=w.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first, second = proc.stderr.readline(), proc.stderr.readline()
        assert f"following 'narwhal' in the sessions of {w.proj.resolve()} (--all follows every project)" in first
        assert "no hits there yet; 2 hits in other projects: add --all to follow every project" in second
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 130
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_default_scope_for_the_command_line_only(ids_world):
    w = ids_world
    here = {"cwd": str(w.proj)}
    env_all = {**w.env, "PIWATCH_SCOPE": "all"}

    def cli(*args, env=w.env):
        return subprocess.run([str(BIN / "piwatch"), *args], env=env, cwd=here["cwd"], capture_output=True, text=True)

    assert B1 in cli("search", "narwhal", env=env_all).stdout
    assert B1 not in cli("search", "narwhal", "--project", env=env_all).stdout
    assert cli("read", B1, f"{B1}-e0", env=env_all).returncode == 0
    bad = cli("search", "narwhal", env={**w.env, "PIWATCH_SCOPE": "everything"})
    assert bad.returncode == 2 and 'PIWATCH_SCOPE must be "project" or "all"' in said_for_people(bad)
    # config.toml's [cli] table, which piwatchd itself never reads: restarted on it, the Pi tool's
    # caller (its project) still sees its project only.
    config = w.base / "none.toml"
    config.write_text('[cli]\nscope = "all"\n')
    assert B1 in cli("search", "narwhal").stdout
    w.stop()
    w.start()
    with w.client(here) as c:
        assert c.search("narwhal").hits == []
    config.write_text('[cli]\nscope = "some"\n')
    bad = cli("search", "narwhal")
    assert bad.returncode == 2 and "scope under [cli]" in said_for_people(bad)


# -- status counts that agree --------------------------------------------------------------------


def test_status_counts_each_file_once_however_often_it_changes(world):
    """A file appended to again and again (or read in slices) is one file that had new data."""
    from helpers.world import Appender

    append = Appender(world.root / "a" / "s-proj.jsonl", "s-proj", "s-proj-e1")
    with world.client({"all": True}) as c:
        for n in range(3):
            (eid,) = append(f"pangolin {n}")
            wait_for(lambda eid=eid: any(h.entry_id == eid for h in c.search("pangolin", limit=10).hits))
        svc = c.status().service
    assert svc.files_known == 6 and svc.files_ingested == 6 and svc.files_changed == 6, svc
    out = world.cli("status")
    assert "6 files known; 6 of 6 files had new data this run" in out.stdout, out.stdout


def _status(**fields):
    from piwatch.wire import (
        BytesStatus,
        DiagnosticCount,
        DiagnosticItem,
        DiagnosticsStatus,
        ServiceStatus,
        StatusResult,
    )

    diag = fields.pop("diagnostics", 0)
    items = [
        DiagnosticItem(path=f"/s/{i}.jsonl", byte_offset=i, code="lone-surrogate", message="x", repaired=True)
        for i in range(diag)
    ]
    return StatusResult(
        bytes=BytesStatus(files=13_900_000, ingested=13_900_000, backlog=0),
        diagnostics=DiagnosticsStatus(
            by_code={"lone-surrogate": DiagnosticCount(count=diag, repaired=diag)}, recent=items
        )
        if diag
        else None,
        service=ServiceStatus(phase="ingesting", backlog_bytes=21_200_000, **fields),
    )


def test_status_bytes_line_and_bar_agree():
    from piwatch.commands.status import format_status

    text = format_status(_status())
    assert "13.9 MB ingested of 35.1 MB on disk (backlog 21.2 MB)" in text, text
    assert "(13.9 MB of 35.1 MB)" in text, text


@pytest.mark.parametrize(("count", "more"), [(5, None), (6, "… 1 more line"), (9, "… 4 more lines")])
def test_status_says_how_many_skipped_lines_it_does_not_list(count, more):
    from piwatch.commands.status import format_status

    text = format_status(_status(diagnostics=count))
    assert f"lone-surrogate {count}" in text
    assert text.count("  repaired /s/") == 5
    assert (more in text) if more else "more line" not in text, text
