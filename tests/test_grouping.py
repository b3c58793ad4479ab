"""The pure grouping of ranked events into sessions (piwatchd/text/grouping.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from piwatchd.text.grouping import SessionGroup, SessionPager, group_sessions

G = SessionGroup


@pytest.mark.parametrize(
    ("ranked", "offset", "limit", "page", "more"),
    [
        ([], 0, 10, [], False),
        (["a"], 0, 10, [G("a", 0, 1)], False),
        (["a", "b", "a", "c", "b", "a"], 0, 10, [G("a", 0, 3), G("b", 1, 2), G("c", 3, 1)], False),
        (["a", "b", "a", "c", "b", "a"], 0, 2, [G("a", 0, 3), G("b", 1, 2)], True),
        (["a", "b", "a", "c", "b", "a"], 2, 2, [G("c", 3, 1)], False),
        (["a", "b", "a", "c"], 5, 2, [], False),
        (["b", "b", "a"], 0, 1, [G("b", 0, 2)], True),
    ],
)
def test_sessions_by_their_strongest_event(ranked, offset, limit, page, more):
    assert group_sessions(ranked, offset, limit) == (page, more)


@given(st.lists(st.sampled_from("abcdef"), max_size=60), st.integers(0, 8), st.integers(1, 8))
def test_grouping_invariants(ranked, offset, limit):
    whole, _ = group_sessions(ranked, 0, len(ranked) + 1)
    page, more = group_sessions(ranked, offset, limit)
    assert page == whole[offset : offset + limit] and more == (len(whole) > offset + limit)
    assert sum(g.matching_events for g in whole) == len(ranked)
    for g in whole:
        assert ranked[g.evidence] == g.session_id and g.session_id not in ranked[: g.evidence]
        assert g.matching_events == ranked.count(g.session_id)
    assert [g.evidence for g in whole] == sorted(g.evidence for g in whole)


def test_the_pager_groups_at_most_its_bound():
    pager = SessionPager(0, 10, bound=3)
    assert pager(["a", "b", "a", "c", "c"]) == [0, 1]
    assert (pager.grouped, pager.capped, pager.has_more) == (3, True, False)
    assert pager.page == [G("a", 0, 2), G("b", 1, 1)]
    exact = SessionPager(0, 1, bound=3)
    assert exact(["a", "b", "a"]) == [0]
    assert (exact.grouped, exact.capped, exact.has_more) == (3, False, True)
