"""Query escaping: user text is never executed as FTS5 syntax."""

from __future__ import annotations

import re
import sqlite3

import pytest
from hypothesis import given, settings, strategies as st

from piwatchd.model.subtree import bounds
from piwatchd.text.fts5.sql import build_search_sql, fts_expression
from piwatchd.text.hits import make_snippet
from piwatchd.text.query import (
    QueryError,
    SearchFilters,
    SearchRequest,
    parse_query,
)


@pytest.fixture(scope="module")
def fts():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61 remove_diacritics 2')")
    conn.executemany(
        "INSERT INTO t(body) VALUES (?)", [("NEAR a b col x",), ("alpha beta gamma",), ('say "hi" OR bye',)]
    )
    return conn


@pytest.mark.parametrize(
    "query, expected",
    [
        ("NEAR(a b)", 1),
        ("col:x", 1),
        ("alpha OR zzz", 0),  # OR is a word, not an operator
        ('"alpha beta"', 1),
        ('"beta alpha"', 0),
        ('say "hi', 1),  # a lone quote runs to the end
        ("alp*", 0),  # no prefix operator
        ("^alpha", 1),
        ("NOT gamma", 0),
    ],
)
def test_operators_are_inert(fts, query, expected):
    expr = fts_expression(parse_query(query))
    assert len(fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,)).fetchall()) == expected


@pytest.mark.parametrize("query", ['"', "", "   ", "::: --- ***", '""'])
def test_no_searchable_words_is_a_clear_error(query):
    with pytest.raises(QueryError, match="no searchable words"):
        parse_query(query)


@settings(max_examples=300)
@given(st.text(max_size=60))
def test_any_text_is_error_or_valid_fts(text):
    try:
        expr = fts_expression(parse_query(text))
    except QueryError:
        return
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61 remove_diacritics 2')")
    conn.execute("INSERT INTO t(body) VALUES (?)", (text,))
    # Never an SQLite error; a query built from a document's own text finds it.
    rows = conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,)).fetchall()
    if '"' not in text:
        assert rows == [(1,)]


def test_subtree_bounds_respect_component_boundary():
    low, high = bounds("/a/proj")
    assert low <= "/a/proj/x" < high
    assert not (low <= "/a/proj2" < high) and not (low <= "/a/proj-x" < high)


def test_limits_are_enforced():
    with pytest.raises(QueryError):
        build_search_sql(SearchRequest("x", SearchFilters(), limit=0))
    with pytest.raises(QueryError):
        build_search_sql(SearchRequest("x", SearchFilters(), limit=10_000))


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from(list("ab \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2003\u3000\x02\x03é")), max_size=60))
def test_snippet_whitespace_is_collapsed_as_the_regex_did(raw):
    """make_snippet collapses whitespace with str.split: the same characters
    as re's \\s (every Unicode space), runs to one space, ends stripped."""
    expected = re.sub(r"\s+", " ", raw).strip()
    text, _ = make_snippet(raw)
    assert text == expected.replace("\x02", "").replace("\x03", "")
