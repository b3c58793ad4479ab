"""prefetch: order, exceptions and early close."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, strategies as st

from piwatchd.ingest.prefetch import prefetch


@given(st.lists(st.integers(), max_size=50), st.integers(1, 4))
def test_items_arrive_in_order(items, depth):
    assert list(prefetch(iter(items), depth)) == items


def test_producer_exception_is_raised_after_earlier_items():
    def gen():
        yield 1
        yield 2
        raise ValueError("bad line")

    seen = []
    with pytest.raises(ValueError, match="bad line"):
        for x in prefetch(gen()):
            seen.append(x)
    assert seen == [1, 2]


def test_closing_early_stops_and_joins_the_producer():
    produced = []

    def gen():
        for i in range(10_000):
            produced.append(i)
            yield i

    it = prefetch(gen(), depth=2)
    assert next(it) == 0
    it.close()
    assert len(produced) < 10 and not [t for t in threading.enumerate() if t.name == "piwatchd-parse"]
