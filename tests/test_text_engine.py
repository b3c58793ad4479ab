"""The text-engine registry and what each engine object owns (schema, idle
maintenance, side files); `tests/test_engines.py` holds their results equal."""

from __future__ import annotations

import os
import sqlite3

import pytest
from conftest import jsonl, msg, v3_header

import piwatchd.text.fts5.engine as fts5_engine
from piwatchd.ingest.scan import index_once
from piwatchd.store.indexfile import discard_index
from piwatchd.store.schema import open_reader, open_writer
from piwatchd.store.writer import IndexWriter
from piwatchd.text.engine import (
    DEFAULT_ENGINE,
    ENGINE_NAMES,
    TextEngine,
    TextWriter,
    all_engines,
    engine_named,
    engine_of,
    index_bytes,
    index_engine,
)
from piwatchd.text.query import SearchRequest
from piwatchd.text.search import search


def test_one_registry_names_every_engine():
    assert DEFAULT_ENGINE in ENGINE_NAMES
    for name in ENGINE_NAMES:
        assert engine_named(name).name == name
        assert engine_named(name) is engine_named(name)  # one object per engine
    with pytest.raises(ValueError, match="unknown text engine 'lucene'"):
        engine_named("lucene")


def test_an_empty_or_foreign_file_uses_the_default_engine(tmp_path):
    conn = sqlite3.connect(tmp_path / "x.sqlite3")
    assert index_engine(conn) is None and engine_of(conn).name == DEFAULT_ENGINE


@pytest.mark.parametrize("name", ENGINE_NAMES)
def test_the_engine_decides_whether_sqlite_keeps_the_text(tmp_path, monkeypatch, name):
    monkeypatch.setenv("PIWATCH_ENGINE", name)
    db = _index(tmp_path, 1)
    conn = open_reader(db)
    engine = engine_of(conn)
    assert engine is engine_named(name)
    bodies = [r[0] for r in conn.execute("SELECT body FROM fragments")]
    assert bodies and all((b is not None) == engine.keeps_text for b in bodies)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert set(engine.tables) <= tables
    assert _hits(db) == [("s00", "u")]
    conn.close()


def test_a_rebuild_with_another_engine_drops_the_old_engines_tables(tmp_path):
    open_writer(tmp_path / "db.sqlite3", engine="fts5").close()
    conn = open_writer(tmp_path / "db.sqlite3", engine="tantivy")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "fragments_fts" not in tables and index_engine(conn) == "tantivy"


def test_discarding_an_index_removes_every_engines_side_files(tmp_path):
    db = tmp_path / "db.sqlite3"
    IndexWriter(open_writer(db, engine="tantivy")).close()
    sides = [p for name in ENGINE_NAMES for p in engine_named(name).side_paths(db)]
    assert sides and any(p.exists() for p in sides)
    discard_index(db)
    assert not db.exists() and not any(p.exists() for p in sides)


def test_fts5_idle_merging_runs_to_the_end_and_keeps_results(tmp_path, monkeypatch):
    monkeypatch.setenv("PIWATCH_ENGINE", "fts5")
    monkeypatch.setattr(fts5_engine, "MERGE_AFTER_FRAGMENTS", 0)  # due at once
    monkeypatch.setattr(fts5_engine, "MERGE_STEP_PAGES", 1)
    db = _index(tmp_path, 20)
    before = _hits(db)
    writer = IndexWriter(open_writer(db, engine="fts5"))
    steps = 0
    while writer.maintain_text():
        steps += 1
        assert steps < 10_000, "merging must end"
    assert steps >= 1  # 20 commits left segments to merge
    writer.close()
    assert _hits(db) == before and len(before) == 20


def _index(tmp_path, sessions):
    """`sessions` sessions, one commit each (each one an FTS segment)."""
    root = tmp_path / "sessions" / "--p--"
    root.mkdir(parents=True)
    db = tmp_path / "db.sqlite3"
    for s in range(sessions):
        (root / f"s{s}.jsonl").write_bytes(
            jsonl(v3_header(f"s{s:02d}", "/w/p"), msg("u", None, "user", f"merging word{s} common"))
        )
        index_once(db, [str(tmp_path / "sessions")])
    return db


def _hits(db):
    conn = open_reader(db)
    try:
        out = search(conn, SearchRequest("common", limit=50))
        return sorted((h.session_id, h.entry_id) for h in out.hits)
    finally:
        conn.close()


def test_tantivy_index_bytes_survive_files_vanishing(tmp_path, monkeypatch):
    """Tantivy deletes temporary and merged files while status lists them."""
    engine = engine_named("tantivy")
    db = tmp_path / "db.sqlite3"
    assert index_bytes(engine, db) == 0  # no text index yet
    d = engine.side_paths(db)[0]
    d.mkdir()
    (d / "seg").write_bytes(b"x" * 10)
    (d / ".tmp").write_bytes(b"y" * 5)
    assert index_bytes(engine, db) == 15
    real_scandir = os.scandir

    def scandir_then_delete(path):
        entries = list(real_scandir(path))
        (d / ".tmp").unlink()  # gone between the listing and its stat
        return iter(entries)

    monkeypatch.setattr(os, "scandir", scandir_then_delete)
    assert index_bytes(engine, db) == 10


def _members(protocol: type) -> set[str]:
    return {n for n in [*vars(protocol), *protocol.__annotations__] if not n.startswith("_")}


def test_the_seam_is_what_every_engine_does(tmp_path):
    """The seam holds what both engines do, in at most 10 members; what only
    one has is its own capability (`AfterCommitFeed`, `Tuned`, ...)."""
    seam = _members(TextEngine) | _members(TextWriter)
    assert len(seam) <= 10, sorted(seam)
    for engine in all_engines():
        assert all(hasattr(engine, m) for m in _members(TextEngine)), engine.name
        conn = open_writer(tmp_path / f"{engine.name}.sqlite3", engine=engine.name)
        try:
            assert all(hasattr(engine.open_writer(conn), m) for m in _members(TextWriter)), engine.name
        finally:
            conn.close()


@pytest.mark.parametrize("name", ENGINE_NAMES)
def test_a_repeated_entry_id_is_indexed_once_with_its_last_text(tmp_path, monkeypatch, name):
    """The writer hands the engine each step of a batch in turn: an id repeated
    within one batch and again in a later append replaces its text each time
    (FTS5 deletes by trigger, so each step's rows must be indexed before the next)."""
    monkeypatch.setenv("PIWATCH_ENGINE", name)
    root = tmp_path / "sessions" / "--p--"
    root.mkdir(parents=True)
    db = tmp_path / "db.sqlite3"
    path = root / "s.jsonl"
    path.write_bytes(
        jsonl(v3_header("s1", "/w/p"), msg("u", None, "user", "first otter"), msg("u", None, "user", "second heron"))
    )
    index_once(db, [str(tmp_path / "sessions")])
    with open(path, "ab") as fh:
        fh.write(jsonl(msg("u", None, "user", "third walrus")))
    index_once(db, [str(tmp_path / "sessions")])
    conn = open_reader(db)
    try:
        found = {w: len(search(conn, SearchRequest(w, limit=5)).hits) for w in ("otter", "heron", "walrus")}
        assert found == {"otter": 0, "heron": 0, "walrus": 1}
    finally:
        conn.close()
    if name == "fts5":  # raises on an index that lost track of its rows
        with sqlite3.connect(db) as check:
            check.execute("INSERT INTO fragments_fts(fragments_fts) VALUES ('integrity-check')")
