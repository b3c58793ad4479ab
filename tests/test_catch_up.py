"""Honest answers during the first index (issue 11): every response carries
an `indexing` warning with the progress, the CLI prints it as one stderr
line, and `--json` carries it in `warnings`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import jsonl, msg, v3_header
from piwatch.wire import ServiceStatus

from piwatchd.ingest.scan import index_once
from piwatchd.serve.api import Api
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
    got = [
        w.message for w in catch_up_warnings(ServiceStatus(**snapshot) if snapshot else None) if w.code == "indexing"
    ]
    assert got == ([] if message is None else [message])


@pytest.fixture
def catching_up(short_tmp):
    proj = short_tmp / "proj"
    (proj / ".git").mkdir(parents=True)
    root = short_tmp / "sessions" / "a"
    root.mkdir(parents=True)
    (root / "s.jsonl").write_bytes(jsonl(v3_header("s", str(proj)), msg("e", None, "user", "pelican note")))
    db = short_tmp / "db.sqlite3"
    index_once(db, [str(short_tmp / "sessions")])
    progress = {"phase": "ingesting", "startup_seconds": None, "files_known": 60, "backlog_files": 41}
    api = Api(db, service_snapshot=lambda: ServiceStatus(**progress))
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
    assert out.stderr.splitlines() == ["piwatch: indexing: 19 of 60 files, results may be incomplete"]
    data = json.loads(cli(server, proj, *args, "--json").stdout)
    assert {"code": "indexing", "message": "indexing: 19 of 60 files, results may be incomplete"} in data["warnings"]
    st = json.loads(cli(server, proj, "status", "--json").stdout)
    assert st["catchUp"] == {"filesDone": 19, "filesTotal": 60}
    assert "first index: 19 of 60 files" in cli(server, proj, "status").stdout
    progress.update(startup_seconds=2.0, backlog_files=0)  # caught up: silence
    done = cli(server, proj, *args)
    assert done.returncode == 0 and done.stderr == ""
    assert "catchUp" not in json.loads(cli(server, proj, "status", "--json").stdout)
