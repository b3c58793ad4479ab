"""A new event's text document is built from the rows in memory and the tree
state the writer settled (`feed._new_docs`), not read back after COMMIT: it
must be the document the rows read back give (`feed._docs`, the re-feed's
path), for cold builds and for appends (the tree's fast and full paths)."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

from piwatchd.ingest.scan import index_once
from piwatchd.store.writer import IndexWriter
from piwatchd.text.tantivy.index import TantivyText

FIXTURES = Path(__file__).parent / "fixtures"


def _sessions(tmp_path: Path) -> dict[Path, bytes]:
    """Real Pi sessions (v1 and v3, with branches, compactions and tool results)."""
    out = {}
    for f in sorted(FIXTURES.rglob("*.jsonl*")):
        data = f.read_bytes()
        out[tmp_path / "sessions" / f.name.removesuffix(".gz")] = gzip.decompress(data) if f.suffix == ".gz" else data
    (tmp_path / "sessions").mkdir()
    return out


def _fed(monkeypatch) -> dict[int, tuple]:
    """{fragment rowid: what its last fed document said} of every add."""
    fed: dict[int, tuple] = {}
    real = TantivyText.add

    def add(self, docs):
        docs = list(docs)
        for d in docs:
            fed[d.frag_rowid] = (d.facts, d.kind, d.tool_name, d.body, d.tail, d.meta)
        return real(self, docs)

    monkeypatch.setattr(TantivyText, "add", add)
    return fed


def test_new_documents_from_memory_are_the_documents_read_back(tmp_path, monkeypatch):
    files = _sessions(tmp_path)
    assert len(files) >= 3
    fed = _fed(monkeypatch)
    db = tmp_path / "index.sqlite3"
    for part in (0.3, 0.6, 1.0):  # a cold build of the first lines, then two appends
        for path, data in files.items():
            lines = data.splitlines(keepends=True)
            path.write_bytes(b"".join(lines[: max(1, int(len(lines) * part))]))
        index_once(db, [str(tmp_path / "sessions")], workers=0)
    conn = sqlite3.connect(db, isolation_level=None)
    writer = IndexWriter(conn)
    try:
        assert writer.feed is not None
        rowids = [r[0] for r in conn.execute("SELECT event_rowid FROM events ORDER BY event_rowid")]
        read_back = {
            d.frag_rowid: (d.facts, d.kind, d.tool_name, d.body, d.tail, d.meta) for d in writer.feed._docs(rowids, {})
        }
        assert len(read_back) > 1000
        assert fed == read_back
        states = {f[0].branch_state for f in fed.values()} | {f[0].selection_state for f in fed.values()}
        assert {"selected", "alternate", "direct", "summarized"} <= states  # the tree's states all met
        assert any(f[0].files_read for f in fed.values()) and any(f[0].files_changed for f in fed.values())
    finally:
        writer.close()
