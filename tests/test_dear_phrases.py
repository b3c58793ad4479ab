"""A phrase of common words is searched in slices of fragments, newest
first (`TierSearch._slices`): its hits are exact phrase matches, every one
of them is found once, and pages neither overlap nor skip. The slices'
size is lowered so that a small index has many."""

from __future__ import annotations

import pytest
from conftest import jsonl, msg, v3_header

from piwatchd.text.tantivy import search

SENTENCES = {
    "phrase": "the lazy fox ran past the sleeping dog",  # holds "sleeping dog"
    "apart": "the dog was sleeping by the fire",  # both words, not the phrase
    "other": "nothing to see here",
}


def session(sid: str, kinds: list[str]) -> bytes:
    entries, parent = [], None
    for i, kind in enumerate(kinds):
        eid = f"{sid}-{i:02}"
        ts = f"2026-05-01T10:{i // 60:02}:{i % 60:02}.000Z"
        entries.append(msg(eid, parent, "user", f"{SENTENCES[kind]} #{i}", ts=ts))
        parent = eid
    return jsonl(v3_header(sid, "/work/proj"), *entries)


@pytest.fixture
def phrases(index_dir):
    want = set()
    for s in range(3):
        sid = f"s-{s}"
        kinds = [("phrase", "apart", "other")[(i + s) % 3] for i in range(40)]
        index_dir.write(f"{sid}.jsonl", session(sid, kinds))
        want |= {(sid, f"{sid}-{i:02}") for i, kind in enumerate(kinds) if kind == "phrase"}
    index_dir.index()
    return index_dir, want


def every_hit(env, limit: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    with env.client() as client:
        while True:
            page = client.search('"sleeping dog"', limit=limit, offset=len(out))
            out += [(h.session_id, h.entry_id) for h in page.hits]
            if not page.has_more:
                return out


@pytest.mark.parametrize("slice_docs", [1, 5, 1_000_000])
def test_a_dear_phrase_finds_every_match_once_in_slices(phrases, monkeypatch, slice_docs):
    env, want = phrases
    sliced = []
    real = search.TierSearch._slices

    def spy(self, tier):
        slices = real(self, tier)
        sliced.append(slices is not None)
        return slices

    monkeypatch.setattr(search, "PHRASE_SLICE_DOCS", slice_docs)
    monkeypatch.setattr(search.TierSearch, "_slices", spy)
    for limit in (7, 50):
        hits = every_hit(env, limit)
        assert len(hits) == len(set(hits)), "an event found twice"
        assert set(hits) == want
    assert any(sliced) == (slice_docs < len(want))


def test_a_dear_phrase_within_named_sessions_is_searched_whole(phrases, monkeypatch):
    """A session filter drives the search already: no slices, every match of those sessions."""
    env, want = phrases
    sliced = []
    real = search.TierSearch._slices
    monkeypatch.setattr(search, "PHRASE_SLICE_DOCS", 1)
    monkeypatch.setattr(search.TierSearch, "_slices", lambda self, tier: sliced.append(real(self, tier)) or sliced[-1])
    with env.client() as client:
        hits = client.search('"sleeping dog"', filters={"sessionId": ["s-1"]}, limit=50).hits
    assert {(h.session_id, h.entry_id) for h in hits} == {w for w in want if w[0] == "s-1"}
    assert sliced and all(s is None for s in sliced)
