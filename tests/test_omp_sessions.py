"""oh-my-pi (omp) sessions in the index: which agent wrote each (its root, or
omp's title slot wherever the file lies), and the slot's title as its name."""

from __future__ import annotations

import pytest
from conftest import jsonl, msg, v3_header
from helpers.omp import title_slot

from piwatchd.ingest.ingestor import Ingestor
from piwatchd.store.schema import open_writer
from piwatchd.store.writer import IndexWriter


@pytest.fixture
def index(short_tmp):
    conn = open_writer(short_tmp / "db.sqlite3")
    yield conn
    conn.close()


def _session(conn, sid: str) -> tuple[str, str | None]:
    return conn.execute("SELECT agent, name FROM sessions WHERE session_id=?", (sid,)).fetchone()


@pytest.mark.parametrize(
    ("slot", "in_omp_root", "agent", "name"),
    [
        (b"", False, "pi", None),  # Pi's
        (b"", True, "omp", None),  # omp's before the title slot (legacy): its root says so
        (title_slot("Fix the   parser"), False, "omp", "Fix the parser"),  # the slot says so anywhere
        (title_slot("key sk-ant-api03-" + "a" * 93), True, "omp", "key [redacted: anthropic-key]"),
        (title_slot(""), True, "omp", None),  # no title yet
    ],
)
def test_agent_and_name_of_a_session(index, short_tmp, slot, in_omp_root, agent, name):
    omp_root = short_tmp / "omp"
    path = (omp_root if in_omp_root else short_tmp / "pi") / "--w--" / "s.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(slot + jsonl(v3_header(), msg("a", None, "user", "hello")))
    Ingestor(IndexWriter(index), omp_roots=[str(omp_root)]).ingest(str(path))
    index.commit()
    assert _session(index, "s-1") == (agent, name)
