"""SQLite's planner statistics follow the index's growth: taken when a full
index pass ends, and refreshed by the writer once the events table has
doubled since, so statistics of a young, tiny index never steer queries on
a big one (a lookup of fragments by event planned as a scan of them all)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from conftest import jsonl, msg, v3_header

from piwatchd.ingest.scan import index_once
from piwatchd.store.schema import open_writer
from piwatchd.store.writer import STATS_MIN_EVENTS, IndexWriter, analyzed_events


def _session(folder: Path, name: str, n: int) -> None:
    entries = [msg(f"{name}-{i}", f"{name}-{i - 1}" if i else None, "user", f"word{i} text") for i in range(n)]
    (folder / f"{name}.jsonl").write_bytes(jsonl(v3_header(name, "/work/p"), *entries))


def _events(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM events").fetchone()[0]


def _stats_rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return analyzed_events(conn)


def _close_to(estimate: int, n: int) -> bool:
    """ANALYZE under an analysis_limit estimates a big table's rows from its b-tree."""
    return abs(estimate - n) <= n // 4


def test_statistics_are_taken_at_the_end_of_a_pass_and_refreshed_when_the_index_doubled(tmp_path):
    sessions, db = tmp_path / "sessions" / "--work-p--", tmp_path / "index.sqlite3"
    sessions.mkdir(parents=True)
    _session(sessions, "s-small", 20)
    index_once(str(db), [str(sessions.parent)], workers=0)
    assert _stats_rows(db) == _events(db) == 20

    # Grown far past twice the statistics' size, with statistics still those of the tiny index.
    _session(sessions, "s-big", 2 * STATS_MIN_EVENTS + 100)
    index_once(str(db), [str(sessions.parent)], workers=0)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sqlite_stat1 SET stat = '20' || substr(stat, instr(stat, ' ')) WHERE tbl = 'events'")
    assert _stats_rows(db) == 20

    writer = IndexWriter(open_writer(db))
    try:
        assert writer.refresh_statistics()  # 1,120 events against statistics of 20
        assert _close_to(_stats_rows(db), _events(db))
        assert not writer.refresh_statistics()  # not doubled since
    finally:
        writer.close()
    assert _close_to(_stats_rows(db), _events(db))
