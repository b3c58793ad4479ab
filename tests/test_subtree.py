"""piwatchd.model.subtree: one rule for "at or under a path on a component boundary",
the same in Python (auth), SQL (filters) and the text index's ancestor terms."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, strategies as st

from piwatchd.model.subtree import ancestors, is_under, under_sql

PART = st.sampled_from(["a", "b", "proj", "proj2", "proj-x", "x"])
PATH = st.lists(PART, min_size=0, max_size=4).map(lambda parts: "/" + "/".join(parts))


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/a/b", ("/a/b", "/a", "/")),
        ("/a/b/", ("/a/b", "/a", "/")),
        ("/a", ("/a", "/")),
        ("/", ("/",)),
        ("rel/x", ("rel/x", "rel")),
    ],
)
def test_ancestors_table(path, expected):
    assert ancestors(path) == expected


@given(PATH, PATH)
def test_under_is_being_a_descendant_of_an_ancestor(path, root):
    assert is_under(path, root) == ((root.rstrip("/") or "/") in ancestors(path))


@given(st.lists(PATH, min_size=1, max_size=8), PATH)
def test_sql_agrees_with_python(paths, root):
    if root.rstrip("/") == "":
        return  # the root holds everything; callers say so without SQL
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t(p TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [(p,) for p in paths])
    clause, params = under_sql("p", root)
    got = sorted(p for (p,) in conn.execute(f"SELECT p FROM t WHERE {clause}", params))
    assert got == sorted(p for p in paths if is_under(p, root))
