"""FTS5 engine: the two-phase search plan returns exactly what ranking every match does."""

from __future__ import annotations

import random

import pytest
from conftest import jsonl, msg, v3_header

import piwatchd.text.fts5.search as plans
import piwatchd.text.search as search_mod
from piwatchd.ingest.scan import index_once
from piwatchd.store.schema import open_reader
from piwatchd.text.fts5.sql import build_search_sql
from piwatchd.text.query import SearchFilters, SearchRequest

WORDS = ["alpha", "beta", "gamma", "delta", "error", "function", "return", "value", "kraken"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("PIWATCH_ENGINE", "fts5")  # these plans are the FTS5 provider's
    rnd = random.Random(7)
    root = tmp_path_factory.mktemp("plans") / "sessions"
    for s in range(12):
        d = root / f"--p{s % 3}--"
        d.mkdir(parents=True, exist_ok=True)
        entries, parent = [], None
        for i in range(40):
            text = " ".join(rnd.choice(WORDS[: 3 + (i % 6)]) for _ in range(rnd.randint(1, 12)))
            role = rnd.choice(["user", "assistant", "toolResult"])
            content = text if role == "user" else [{"type": "text", "text": text}]
            extra = (
                {"toolCallId": f"c{i}", "toolName": rnd.choice(["bash", "read"]), "isError": rnd.random() < 0.2}
                if role == "toolResult"
                else {}
            )
            entries.append(msg(f"e{i}", parent, role, content, ts=f"2026-01-0{1 + i % 9}T00:00:00Z", **extra))
            parent = f"e{i}"
        (d / f"s{s}.jsonl").write_bytes(jsonl(v3_header(f"s{s:02d}", f"/w/p{s % 3}"), *entries))
    db = root.parent / "db.sqlite3"
    index_once(db, [str(root)])
    conn = open_reader(db)
    yield conn
    conn.close()
    mp.undo()


def full_plan(conn, request):
    sql, params = build_search_sql(request, lookahead=1)
    return [(r[5], r[6], r[2], round(-r[1], 6), r[16]) for r in conn.execute(sql, params).fetchall()]


def two_phase(conn, request):
    out = search_mod.search(conn, SearchRequest(request.query, request.filters, request.limit, request.offset))
    return [(h.session_id, h.entry_id, h.evidence.fragment_id, h.score, h.matched_fragments) for h in out.hits]


FILTERS = [
    SearchFilters(),
    SearchFilters(kinds=("tool.result",)),
    SearchFilters(authorized_roots=("/w/p1",)),
    SearchFilters(session_ids=("s05",)),
    SearchFilters(is_error=True, tools=("bash",)),
]


@pytest.mark.parametrize("filter_first", [True, False])
@pytest.mark.parametrize("start", [1, 4, 64])
@pytest.mark.parametrize("query", ["alpha", "error", "kraken value", '"alpha beta"', "gamma"])
@pytest.mark.parametrize("filters", FILTERS, ids=range(len(FILTERS)))
def test_two_phase_equals_ranking_everything(corpus, monkeypatch, filter_first, start, query, filters):
    if not filter_first:
        monkeypatch.setattr(plans, "FILTER_FIRST_MAX_FRAGMENTS", -1)
    monkeypatch.setattr(plans, "PHASE1_START", start)
    monkeypatch.setattr(plans, "PHASE1_MAX", 16 if start == 1 else 4096)
    for limit, offset in [(5, 0), (20, 3), (200, 0)]:
        request = SearchRequest(query, filters, limit, offset)
        expected = full_plan(corpus, request)[:limit]
        if filters.authorized_roots is not None:  # a scoped caller is shown no score (whole-index BM25)
            expected = [(sid, eid, frag, None, n) for sid, eid, frag, _, n in expected]
        assert two_phase(corpus, request) == expected, (query, filters, limit, offset)
