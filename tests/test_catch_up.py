"""Honest answers during the first index (issue 11): every response carries
an `indexing` warning with the progress, the CLI prints it as one stderr
line, and `--json` carries it in `warnings`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import jsonl, msg, v3_header
from piwatch.wire import ServiceStatus

from piwatchd.ingest.scan import index_once
from piwatchd.serve.api import Api, Live
from piwatchd.serve.ops.status import catch_up_warnings
from piwatchd.serve.server import Server

BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "snapshot, message",
    [
        ({}, None),  # no service (the CLI's in-process fallback)
        ({"phase": "idle", "startup_seconds": 1.5, "files_known": 60, "backlog_files": 0}, None),  # caught up
        ({"phase": "stopped", "startup_seconds": None}, None),
        (
            {"phase": "scanning", "startup_seconds": None, "files_known": 0, "backlog_files": 0},
            "indexing: listing the session files, results may be incomplete",
        ),
        (
            {"phase": "ingesting", "startup_seconds": None, "files_known": 60, "backlog_files": 41},
            "indexing: 19 of 60 files, results may be incomplete",
        ),
        (
            {"phase": "idle", "startup_seconds": None, "files_known": 5, "backlog_files": 9},
            "indexing: 0 of 5 files, results may be incomplete",
        ),
    ],
)
def test_catch_up_warning_table(snapshot, message):
    whole = SimpleNamespace(scope=SimpleNamespace(roots=None))  # the `all` caller's visibility
    service = ServiceStatus(**snapshot) if snapshot else None
    got = [w.message for w in catch_up_warnings(service, whole) if w.code == "indexing"]  # type: ignore[arg-type]
    assert got == ([] if message is None else [message])
    # Before the caller is known (an error answered before its visibility): no counts at all.
    unknown = [w.message for w in catch_up_warnings(service, None) if w.code == "indexing"]
    assert unknown == ([] if message is None else ["indexing: results may be incomplete"])


@pytest.fixture
def catching_up(short_tmp):
    proj = short_tmp / "proj"
    (proj / ".git").mkdir(parents=True)
    root = short_tmp / "sessions" / "a"
    root.mkdir(parents=True)
    (root / "s.jsonl").write_bytes(jsonl(v3_header("s", str(proj)), msg("e", None, "user", "pelican note")))
    for i in range(3):  # another project's sessions: never in this workspace's counts
        (root / f"o{i}.jsonl").write_bytes(jsonl(v3_header(f"o{i}", "/elsewhere"), msg("e", None, "user", "ibis")))
    db = short_tmp / "db.sqlite3"
    index_once(db, [str(short_tmp / "sessions")])
    progress = {"phase": "ingesting", "startup_seconds": None, "files_known": 60, "backlog_files": 41}
    api = Api(db, live=Live(service_snapshot=lambda: ServiceStatus(**progress)))
    server = Server(short_tmp / "run" / "s.sock", api.handle, hello=api.hello, on_connection_end=api.readers.reset)
    server.start()
    yield server, proj, progress
    server.stop()


def cli(server, proj, *args):
    env = {**os.environ, "PIWATCH_SOCKET": str(server.path)}
    return subprocess.run(
        [str(BIN / "piwatch"), *args], env=env, cwd=str(proj), capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "args", [["search", "pelican"], ["search", "nothingmatches"], ["sessions"], ["read", "s", "e"]]
)
def test_cli_prints_one_stderr_line_and_json_carries_it(catching_up, args):
    server, proj, progress = catching_up
    out = cli(server, proj, *args)
    assert out.returncode == 0, out.stderr
    # The query commands ask for this workspace: its own files, never the machine's 60.
    mine = "indexing: 1 of 1 files of this workspace found so far, results may be incomplete"
    assert out.stderr.splitlines() == [f"piwatch: {mine}"]
    data = json.loads(cli(server, proj, *args, "--json").stdout)
    assert {"code": "indexing", "message": mine} in data["warnings"]
    every = json.loads(cli(server, proj, *args, "--all", "--json").stdout)
    assert {"code": "indexing", "message": "indexing: 19 of 60 files, results may be incomplete"} in every["warnings"]
    st = json.loads(cli(server, proj, "status", "--json").stdout)  # the local CLI's status: the whole index
    assert st["catchUp"] == {"filesDone": 19, "filesTotal": 60}
    assert "first index: 19 of 60 files" in cli(server, proj, "status").stdout
    progress.update(startup_seconds=2.0, backlog_files=0)  # caught up: silence
    done = cli(server, proj, *args)
    assert done.returncode == 0 and done.stderr == ""
    assert "catchUp" not in json.loads(cli(server, proj, "status", "--json").stdout)


def test_a_workspace_caller_sees_no_machine_wide_file_counts(catching_up):
    """Issue 33, row 7: while the first index runs, a workspace caller's status
    and answers count its own files only (the service's counts are the whole
    machine's: 60 known, 41 to go, 3 of another project indexed)."""
    from piwatch.client import Client

    server, proj, _progress = catching_up
    with Client(server.path, caller={"cwd": str(proj)}) as c:
        st = c.status()
        assert st.catch_up is not None and (st.catch_up.files_done, st.catch_up.files_total) == (1, 1)
        assert st.service is not None and st.service.files_known is None and st.service.backlog_files is None
        assert (st.sources.total if st.sources else None) == 1
        c.search("pelican")
        assert c.last_freshness.backlog == 0  # its one file is read to the end
        assert [w.message for w in c.last_warnings] == [
            "indexing: 1 of 1 files of this workspace found so far, results may be incomplete"
        ]
    with Client(server.path, caller={"all": True}) as c:
        st = c.status()
        assert st.catch_up is not None and (st.catch_up.files_done, st.catch_up.files_total) == (19, 60)
        assert st.service is not None and st.service.files_known == 60
        c.search("pelican")
        assert c.last_freshness.backlog == 41


def _other_projects(root: Path, files: int, kb: int) -> None:
    """`files` sessions of other projects, about `kb` KB each, older than anything written after."""
    words = [f"w{n}" for n in range(3000)]
    for i in range(files):
        folder = root / f"--other{i % 5}--"
        folder.mkdir(parents=True, exist_ok=True)
        entries, parent = [], None
        for j in range(kb // 4):
            text = " ".join(words[(i * 31 + j * 7 + k) % len(words)] for k in range(600))
            entries.append(msg(f"o{i}-{j}", parent, "user", text))
            parent = f"o{i}-{j}"
        path = folder / f"o{i}.jsonl"
        path.write_bytes(jsonl(v3_header(f"o{i}", f"/elsewhere{i % 5}"), *entries))
        os.utime(path, (1_000_000_000, 1_000_000_000))  # the scan's backlog is drained newest first


def test_a_workspace_caller_counts_its_own_files_while_piwatchd_catches_up(short_tmp):
    """Issue 33, row 7, against a real piwatchd's first index: a workspace caller
    is never shown the machine's file counts (in `status`, the warning every
    answer carries, the envelope's backlog): only its own files, read first here."""
    from helpers.live import Daemon
    from helpers.world import wait_for
    from piwatch.client import Client

    proj = short_tmp / "proj"
    (proj / ".git").mkdir(parents=True)
    root = short_tmp / "sessions"
    _other_projects(root, 60, 400)
    for sid in ("mine-1", "mine-2"):  # the newest files: indexed first
        (root / "--proj--").mkdir(parents=True, exist_ok=True)
        (root / "--proj--" / f"{sid}.jsonl").write_bytes(
            jsonl(v3_header(sid, str(proj)), msg("e", None, "user", "pelican"))
        )
    d = Daemon(root, short_tmp / "index.sqlite3", scan_interval=300).start(wait=False)
    try:

        def mid_catch_up():
            with Client(d.socket, caller={"cwd": str(proj)}, timeout=5) as c:
                st = c.status()
                c.search("pelican")
                answer = (c.last_warnings, c.last_freshness.backlog)
            with Client(d.socket, caller={"all": True}, timeout=5) as c:
                every = c.status()
            if st.catch_up is None or every.catch_up is None or st.catch_up.files_total < 2:
                return None  # not both of mine read yet (or, wrongly, no catch-up seen: times out)
            return st, answer, every

        st, (warnings, backlog), every = wait_for(mid_catch_up, timeout=120)
    finally:
        d.stop()
    assert every.catch_up is not None and every.catch_up.files_total > 2  # the machine's: 62 files once listed
    assert st.catch_up is not None and (st.catch_up.files_done, st.catch_up.files_total) == (2, 2)
    assert st.service is not None and st.service.files_known is None and st.service.backlog_files is None
    assert [w.message for w in warnings if w.code == "indexing"] == [
        "indexing: 2 of 2 files of this workspace found so far, results may be incomplete"
    ]
    assert backlog == 0
