"""The ingest worker processes (`piwatchd.workers`): the index they help build
is the index the writer builds alone; a worker that dies leaves its work to
the writer; no worker outlives a writer killed with -9."""

from __future__ import annotations

import gzip
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.live import poll

from piwatchd import workers
from piwatchd.text.tantivy.index import TantivyText, text_dir

FIXTURES = Path(__file__).parent / "fixtures" / "pi-mono-v1"


@pytest.fixture
def no_pool():
    yield
    workers.shutdown()
    workers.configure(None)


def _terms(db: Path, field: str) -> list[tuple[str, int]]:
    text = TantivyText(text_dir(db), writable=False)
    return sorted(text.index.searcher().terms_with_prefix(field, "", limit=10_000_000))


def _rows(db: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(db)
    try:
        return {
            "events": conn.execute(
                "SELECT s.session_id, e.entry_id, e.ordinal, e.parent_id, e.type, e.role, e.tool_names, e.ts_ms,"
                " e.fingerprint, e.branch_state, e.selection_state, e.meta FROM events e"
                " JOIN sessions s USING (session_key) ORDER BY 1, 3"
            ).fetchall(),
            "fragments": conn.execute(
                "SELECT e.entry_id, f.fragment_id, f.kind, f.tool_name, f.call_id, f.full_length FROM fragments f"
                " JOIN events e USING (event_rowid) ORDER BY 1, 2"
            ).fetchall(),
            **{
                table: sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
                for table in ("tree_facts", "relationships", "file_evidence")
            },
        }
    finally:
        conn.close()


def _fixture_sessions(tmp_path: Path) -> Path:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    for gz in FIXTURES.glob("*.jsonl.gz"):  # real Pi sessions, 3.3 MB in all, a few over a chunk
        (sessions / gz.name.removesuffix(".gz")).write_bytes(gzip.decompress(gz.read_bytes()))
    return sessions


def test_workers_build_the_same_index(tmp_path, monkeypatch, no_pool):
    """The rows a worker ships (whole files sent ahead, and a large file's
    chunks one after another) make the index the writer makes alone."""
    from piwatchd.ingest import pipeline
    from piwatchd.ingest.scan import index_once

    sessions = _fixture_sessions(tmp_path)
    sent = []  # (offset, state header or None) of each chunk a worker took
    real_submit = workers.submit

    def submit(fn, *args):
        future = real_submit(fn, *args)
        if future is not None and fn is pipeline.worker_rows:
            sent.append((args[0], args[2]["header"]))
        return future

    monkeypatch.setattr(workers, "submit", submit)
    alone = index_once(tmp_path / "alone.sqlite3", [str(sessions)], workers=0)
    assert alone["workers"] == 0 and not sent
    helped = index_once(tmp_path / "helped.sqlite3", [str(sessions)], workers=2)
    assert helped["workers"] == 2
    assert any(offset > 0 for offset, _ in sent), "a file's later chunk went to a worker"
    # Each file's first chunk went once, sent ahead of its turn and then used.
    assert sum(offset == 0 for offset, _ in sent) == len(list(sessions.iterdir()))
    assert alone["events"] == helped["events"] > 0
    assert _rows(tmp_path / "alone.sqlite3") == _rows(tmp_path / "helped.sqlite3")
    for field in ("forms", "text", "meta", "facets"):
        assert _terms(tmp_path / "alone.sqlite3", field) == _terms(tmp_path / "helped.sqlite3", field)


def _canonical(rows):
    """Rows as msgpack gives them back (lists for tuples), each `forms` value's
    words sorted (their order is a set's, which differs between processes;
    the field keeps no positions)."""
    from piwatchd.ingest.chunks import pack_rows, unpack_rows

    rows = unpack_rows(pack_rows(rows))
    events = [
        e._replace(fragments=[f._replace(forms=sorted(f.forms.split())) for f in e.fragments]) for e in rows.events
    ]
    return rows._replace(events=events)


def test_a_dead_worker_leaves_the_work_to_the_writer(tmp_path, no_pool):
    from piwatchd.ingest.pipeline import Pipeline
    from piwatchd.model.redact import DEFAULT_RULES
    from piwatchd.source.parser import ParserState
    from piwatchd.text.tantivy.forms import doc_forms

    path = max(_fixture_sessions(tmp_path).iterdir(), key=lambda p: p.stat().st_size)
    size = path.stat().st_size

    def rows(pipe: Pipeline) -> list:
        fd = os.open(path, os.O_RDONLY)
        try:
            return [_canonical(r) for _, r in pipe.rows(fd, str(path), 0, size, ParserState())]
        finally:
            os.close(fd)

    workers.configure(0)
    alone = rows(Pipeline(DEFAULT_RULES, doc_forms))
    assert len(alone) > 1 and all(r.events for r in alone)
    workers.configure(1)
    for dies in ("before its chunk", "after its chunk was sent"):
        pool = workers.pool()
        assert pool is not None
        assert workers.result(workers.submit(os.getpid)) != os.getpid()  # a worker runs
        pipe = Pipeline(DEFAULT_RULES, doc_forms)
        if dies == "after its chunk was sent":
            pipe.ahead([str(path)])
        for proc in list(pool._processes.values()):
            os.kill(proc.pid, signal.SIGKILL)
        poll(lambda pool=pool: pool._broken, message="the pool to see its worker die")
        assert rows(pipe) == alone
    # A broken pool is replaced: the next chunk runs in a new worker.
    assert workers.result(workers.submit(os.getpid)) not in (None, os.getpid())


def test_no_worker_outlives_a_killed_writer(tmp_path):
    script = textwrap.dedent(
        """
        import os, signal
        from piwatchd import workers
        workers.configure(2)
        pids = {workers.result(workers.submit(os.getpid)) for _ in range(8)}
        print(" ".join(map(str, workers.pool()._processes)), flush=True)
        signal.pause()  # until the test kills this writer
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert pids
    finally:
        proc.kill()
        proc.wait()
    poll(lambda: not any(_alive(p) for p in pids), 10, message=f"workers {pids} to end with their writer")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize(
    ("toml", "env", "expected"),
    [
        ("", None, None),
        ("ingest_workers = 3\n", None, 3),
        ("ingest_workers = 3\n", "0", 0),
        ("ingest_workers = -1\n", None, SystemExit),
        ("ingest_workers = true\n", None, SystemExit),
        ('ingest_workers = "two"\n', None, SystemExit),
    ],
)
def test_configured_workers(tmp_path, toml, env, expected):
    from piwatchd.config import load_settings

    (tmp_path / "config.toml").write_text(toml)
    environ = {"PIWATCH_CONFIG": str(tmp_path / "config.toml"), "PIWATCH_DB": str(tmp_path / "db")}
    if env is not None:
        environ["PIWATCH_INGEST_WORKERS"] = env
    if expected is SystemExit:
        with pytest.raises(SystemExit, match="ingest_workers"):
            load_settings(environ)
    else:
        assert load_settings(environ).ingest_workers == expected


def test_pool_size(no_pool):
    assert workers.configure(None) == workers.default_workers() >= 0
    assert workers.configure(0) == 0 and workers.pool() is None and workers.submit(os.getpid) is None
    assert workers.configure(1000) == workers.WORKERS_MAX


def test_cli_rejects_negative_workers(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "piwatch.cli", "index", "--once", "--workers", "-1", "--sessions", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "--workers" in proc.stderr


def test_a_pool_that_keeps_dying_is_given_up(no_pool):
    workers.configure(1)
    for _ in range(workers.MAX_BREAKS):
        pool = workers.pool()
        assert pool is not None
        assert workers.result(workers.submit(os.getpid)) != os.getpid()
        for proc in list(pool._processes.values()):
            os.kill(proc.pid, signal.SIGKILL)
        poll(lambda pool=pool: pool._broken, message="the pool to see its workers die")
        assert workers.result(workers.submit(os.getpid)) is None
    assert workers.pool() is None and workers.submit(os.getpid) is None
    workers.configure(1)  # configuring again starts afresh
    assert workers.result(workers.submit(os.getpid)) not in (None, os.getpid())


def test_workers_make_a_registered_custom_type_searchable(tmp_path, monkeypatch, no_pool):
    """The extractor registry travels with the chunks a worker takes: a
    registered type's field is found, another field of it is not."""
    from conftest import jsonl, msg, v3_header
    from piwatch.client import Client, LocalTransport

    from piwatchd.ingest import pipeline
    from piwatchd.ingest.scan import index_once

    config = tmp_path / "config.toml"
    config.write_text('[[extract]]\ncustom_type = "acme.notes"\nfields = ["data.summary"]\n')
    monkeypatch.setenv("PIWATCH_CONFIG", str(config))
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    note = {"type": "custom", "id": "c1", "parentId": "a1", "timestamp": "2026-05-01T10:00:02.000Z"}
    note |= {"customType": "acme.notes", "data": {"summary": "kestrelword", "private": "hiddenword"}}
    (sessions / "s.jsonl").write_bytes(jsonl(v3_header("s-1"), msg("a1", None, "user", "hello"), note))
    taken = []
    real_submit = workers.submit

    def submit(fn, *args):
        future = real_submit(fn, *args)
        taken.append(future is not None and fn is pipeline.worker_rows)
        return future

    monkeypatch.setattr(workers, "submit", submit)
    assert index_once(tmp_path / "index.sqlite3", [str(sessions)], workers=2)["workers"] == 2
    assert any(taken), "a worker took the file"
    with Client(transport=LocalTransport(tmp_path / "index.sqlite3"), caller={"all": True}) as client:
        assert [(h.entry_id, h.evidence.kind) for h in client.search("kestrelword").hits] == [("c1", "custom.message")]
        assert client.search("hiddenword").hits == []


def test_without_workers_nothing_is_looked_up_to_send_ahead(tmp_path, no_pool):
    """A cold index on 2 cores has no pool: `Ingestor.ahead` (called for
    every file) reads no source row; with a pool it reads each path's."""
    from piwatchd.ingest.ingestor import Ingestor
    from piwatchd.store.schema import open_writer
    from piwatchd.store.writer import IndexWriter

    sessions = _fixture_sessions(tmp_path)
    paths = sorted(str(p) for p in sessions.iterdir())[:2]
    writer = IndexWriter(open_writer(tmp_path / "index.sqlite3"))
    looked_up: list[str] = []
    real_source = writer.source
    writer.source = lambda path: looked_up.append(path) or real_source(path)  # type: ignore[method-assign]
    try:
        ingestor = Ingestor(writer)
        workers.configure(0)
        ingestor.ahead(paths)
        assert looked_up == []
        workers.configure(1)
        ingestor.ahead(paths)
        assert looked_up == paths
    finally:
        writer.close()
