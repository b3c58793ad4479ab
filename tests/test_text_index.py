"""The Tantivy text index heals itself from the read model and the session
files: deleted, corrupt, or from another build, it is rebuilt on the next
start (here: `index_once`, which opens the writer the same way the daemon
does), and searches then find exactly what a clean build finds."""

from __future__ import annotations

import shutil

import pytest
from conftest import jsonl, msg, v3_header

from piwatchd.text.tantivy.index import text_dir

SESSIONS = {
    "a.jsonl": jsonl(
        v3_header("s-a"),
        msg("a1", None, "user", "the narwhal migrates north"),
        msg("a2", "a1", "assistant", [{"type": "text", "text": "narwhal sightings logged"}]),
    ),
    "b.jsonl": jsonl(v3_header("s-b", cwd="/work/other"), msg("b1", None, "user", "a quiet narwhal day")),
}


def _damage_delete(d):
    shutil.rmtree(d)


def _damage_corrupt(d):
    (d / "meta.json").write_text("{ not json")


def _damage_foreign(d):
    (d / "piwatch-layout").write_text("0 someone-else\n")


def _damage_empty_dir(d):
    shutil.rmtree(d)
    d.mkdir()


@pytest.mark.parametrize("damage", [_damage_delete, _damage_corrupt, _damage_foreign, _damage_empty_dir])
def test_text_index_is_rebuilt_from_the_sources(index_dir, damage):
    for name, data in SESSIONS.items():
        index_dir.write(name, data)
    index_dir.index()
    want = sorted(index_dir.hits("narwhal"))
    assert len(want) == 3
    damage(text_dir(index_dir.db))
    index_dir.index()  # nothing changed in the sources: only the text index is re-fed
    assert sorted(index_dir.hits("narwhal")) == want
    assert index_dir.hits("sightings") == [("s-a", "a2", "assistant.text")]


def test_a_text_index_of_another_build_is_refed_session_by_session_with_progress(index_dir):
    """What `status` shows while an upgrade re-feeds the text index: every session is owed, and the
    re-feed tells (done, total) after each one."""
    from piwatchd.store.indexfile import open_or_rebuild
    from piwatchd.store.writer import IndexWriter

    for name, data in SESSIONS.items():
        index_dir.write(name, data)
    index_dir.index()
    _damage_foreign(text_dir(index_dir.db))
    conn, problem = open_or_rebuild(index_dir.db)
    assert problem is None
    writer = IndexWriter(conn)  # adopts the text index: another build's is replaced, every session owed
    told: list[tuple[int, int]] = []
    repaid = writer.repay_text_debt(progress=lambda done, total: told.append((done, total)))
    writer.close()
    assert sorted(repaid.done) == ["s-a", "s-b"] and told == [(1, 2), (2, 2)]
    assert len(index_dir.hits("narwhal")) == 3
