"""Filter values inside the Tantivy index (`piwatchd.text.tantivy.doc`): every
filter but the delete keys shares one raw field as `name:value` terms. A value
holding the separator, a prefix of another value, or another filter's
`name:value` spelling must still admit exactly the documents that hold it."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from piwatchd.text.query import SearchFilters, Term
from piwatchd.text.tantivy.doc import FACETS, KEY_FIELDS, EventFacts, TextDoc, facet, field_term
from piwatchd.text.tantivy.index import TantivyText


@pytest.mark.parametrize(
    ("name", "value", "want"),
    [
        ("event", "12", ("event", "12")),
        ("session", "s-1", ("session", "s-1")),
        ("tool", "bash", (FACETS, "tool:bash")),
        ("cwd_up", "/a:b", (FACETS, "cwd_up:/a:b")),
        ("kind", "", (FACETS, "kind:")),
    ],
)
def test_a_filter_names_its_field_and_term(name, value, want):
    assert field_term(name, value) == want
    if want[0] == FACETS:
        assert facet(name, value) == want[1]  # documents are written with the spelling queries look up
    assert (name in KEY_FIELDS) == (want[0] != FACETS)


def _doc(frag: int, tool: str, cwd: str) -> TextDoc:
    facts = EventFacts(frag, "s-1", frag, "message", "assistant", 1, False, "active", "selected", cwd, cwd, False)
    return TextDoc(frag, facts, "tool.call", tool, "needle", None, "")


def _hits(text: TantivyText, filters: SearchFilters) -> set[int]:
    return {f for _, f, _, _, _ in text.top(text.query([Term("needle", False)], filters), 100)}


# Normalized paths (as the read model records a cwd) whose components hold the
# characters that could confuse `name:value` terms; tool names likewise.
_PART = st.text(alphabet=st.sampled_from("ab:-_ é"), min_size=1, max_size=4)
_VALUES = st.builds(lambda parts: "/".join(parts), st.lists(_PART, min_size=1, max_size=3))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tools=st.lists(_VALUES, min_size=1, max_size=4), cwds=st.lists(_VALUES, min_size=1, max_size=4))
def test_filters_admit_exactly_the_documents_holding_the_value(short_tmp, tools, cwds):
    # A fresh index per example: hypothesis replays examples, and a reused
    # directory would hold the documents of an earlier one.
    text = TantivyText(Path(tempfile.mkdtemp(dir=short_tmp)) / "ix", writable=True)
    try:
        docs = [
            _doc(i + 1, tools[i % len(tools)], "/" + cwds[i % len(cwds)]) for i in range(max(len(tools), len(cwds)))
        ]
        text.add(docs)
        text.commit()
        for tool in set(tools):
            want = {d.frag_rowid for d in docs if d.tool_name == tool}
            assert _hits(text, SearchFilters(tools=(tool,))) == want
        for cwd in {d.facts.cwd_norm for d in docs}:
            want = {d.frag_rowid for d in docs if d.facts.cwd_norm == cwd}
            assert _hits(text, SearchFilters(cwd=cwd)) == want
            # "this directory or below" on component boundaries: `/a` admits `/a/b`, never `/ab`.
            under = {d.frag_rowid for d in docs if d.facts.cwd_norm == cwd or d.facts.cwd_norm.startswith(cwd + "/")}
            assert _hits(text, SearchFilters(cwd_under=cwd)) == under
    finally:
        text.close()
