"""The pure parts of tiered search: identifier parts, repair candidates and
choice, the partial probe's words, matched/missing labels."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from piwatchd.text.identifiers import case_parts, identifier_parts, split_segment
from piwatchd.text.query import Term, parse_query
from piwatchd.text.tiers import (
    STOP_WORDS,
    choose_repair,
    content_terms,
    edit_distance,
    edits1,
    edits1_changing_prefix,
    label,
    partial_plan,
    rank_repairs,
    repair_distance,
)


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        ("loadSessionCache", ["load", "session", "cache"]),
        ("LoadSessionCache", ["load", "session", "cache"]),
        ("load_session_cache", ["load", "session", "cache"]),
        ("load-session-cache", ["load", "session", "cache"]),
        ("session.cache.load", ["session", "cache", "load"]),
        ("src/session/cache.ts", ["src", "session", "cache", "ts"]),
        ("HTTPServerError", ["http", "server", "error"]),
        ("parseHTTPResponse2", ["parse", "http", "response2"]),
        ("utf8Decode", ["utf8", "decode"]),
        ("IOError", ["io", "error"]),
        ("plain", ["plain"]),
        ("ÉtatCivil", ["état", "civil"]),
        ("__init__", ["init"]),
    ],
)
def test_identifier_parts(name, parts):
    assert identifier_parts(name) == parts


@pytest.mark.parametrize(
    ("word", "parts"),
    [
        ("loadSessionCache", ("load", "session", "cache")),
        ("HTTPServerError", ("http", "server", "error")),
        ("parseHTTPResponse2", ("parse", "http", "response2")),
        ("iPhone", ("i", "phone")),
        ("foo2Bar", ("foo2", "bar")),
        ("ÉtatCivil", ("état", "civil")),
        ("donnéesBrutes", ("données", "brutes")),
        # no case change: nothing to add (snake/kebab/paths are cut by the word tokenizer)
        ("load", ()),
        ("Plain", ()),
        ("HTTP2", ()),
        ("foo2bar", ()),
        ("", ()),
        # a long mixed-case run is a token or base64, not a name
        ("aGVsbG8gV29ybGQhIFRoaXMgaXMgYSBsb25nIGJhc2U2NCBzdHJpbmcgZm9yIGEgdGVzdA", ()),
    ],
)
def test_case_parts(word, parts):
    assert case_parts(word) == parts


_word = st.text(
    st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=2, max_size=8
)  # one-letter parts are ambiguous (aAA)


@given(st.lists(_word, min_size=1, max_size=5))
def test_camel_case_round_trip(words):
    """A camelCase name made of lower-case words splits back into them, in
    identifier_parts (a query word) and in case_parts (an indexed word)."""
    name = words[0] + "".join(w.capitalize() for w in words[1:])
    assert identifier_parts(name) == words
    assert identifier_parts("_".join(words)) == words
    assert identifier_parts("-".join(w.upper() if i % 2 else w for i, w in enumerate(words))) == words
    assert case_parts(name) == (tuple(words) if len(words) > 1 else ())


@given(st.text(st.characters(max_codepoint=127), max_size=60))
def test_ascii_kinds_fast_path_is_the_definition(text):
    from piwatchd.text.identifiers import _ASCII_KINDS, _kind

    assert text.translate(_ASCII_KINDS) == "".join(map(_kind, text))


@given(st.text(st.sampled_from("aBz0Z9_-é"), max_size=40) | st.text(st.characters(max_codepoint=127), max_size=70))
def test_ascii_case_parts_are_the_definition(word):
    """case_parts splits an ASCII word with one regex on its characters; the
    parts are those of the definition (`_split`, on the characters' kinds)."""
    from piwatchd.text.identifiers import MAX_NAME_BYTES, _split

    if word.islower() or word.isupper() or len(word.encode()) > MAX_NAME_BYTES:
        want: tuple[str, ...] = ()
    else:
        parts = _split(word)
        want = parts if len(parts) > 1 else ()
    assert case_parts(word) == want


@given(st.text(max_size=200))
def test_splitting_never_fails_and_keeps_letters(text):
    for part in case_parts(text):
        assert part
    joined = "".join(split_segment(text)).lower()
    assert joined == text.lower() or len(joined) == len(text.lower())


@pytest.mark.parametrize(
    ("word", "distance"),
    [
        ("abc", 0),
        ("abcd", 1),
        ("migraton", 2),
        ("seven77", 1),
        ("a-b-c-d", 0),
        ("x" * 33, 0),
        ("during", 0),
        ("Where", 0),
    ],
)
def test_repair_distance(word, distance):
    assert repair_distance(word) == distance


@pytest.mark.parametrize(
    ("a", "b", "d"),
    [
        ("migraton", "migration", 1),
        ("migration", "migraiton", 1),  # a transposition costs 1
        ("scirpt", "script", 1),
        ("abcd", "abcd", 0),
        ("kitten", "sitting", 3),
        ("timeout", "tmieuot", 2),
    ],
)
def test_edit_distance(a, b, d):
    assert edit_distance(a, b, 5) == d
    assert edit_distance(a, b, 1) == min(d, 2)


@settings(max_examples=60)
@given(st.text("abcdefgh", min_size=1, max_size=7))
def test_edits1_are_exactly_distance_one(word):
    neighbours = edits1(word)
    assert word not in neighbours
    assert all(edit_distance(word, n, 2) == 1 for n in neighbours)


@settings(max_examples=80)
@given(st.text("abcdefgh", min_size=1, max_size=10), st.integers(0, 4))
def test_edits_changing_a_prefix_and_those_keeping_it_are_all_edits(word, n):
    """A repair looks up only the edits within the first n characters; the
    rest keep that prefix, so the walk over the prefix's words holds them."""
    changing = edits1_changing_prefix(word, n)
    assert not any(w.startswith(word[:n]) for w in changing)
    assert changing | {w for w in edits1(word) if w.startswith(word[:n])} == edits1(word)


@pytest.mark.parametrize(
    ("word", "vocabulary", "choice"),
    [
        ("migraton", {"migration": 5, "migrations": 9}, "migration"),  # closest first
        ("scrpt", {"script": 2, "scrap": 40}, "script"),
        ("scrpt", {"script": 1, "scripts": 3}, "script"),  # scripts is 2 away from a 5-letter word
        ("deploi", {"deploy": 1, "deploys": 8}, "deploy"),  # a one-off is used when nothing else is close
        ("deployd", {"deploy": 1, "deployed": 8}, "deployed"),  # df >= 2 first at equal distance
        ("deployd", {"deploys": 3, "deployed": 8}, "deployed"),  # then the most frequent
        ("configuraton", {"configurations": 4}, "configurations"),  # 2 edits for 8+ chars
        ("abc", {"abd": 10}, None),  # too short to repair
        ("tenant", {"tenant": 3}, None),
    ],
)
def test_choose_repair(word, vocabulary, choice):
    assert choose_repair(word, vocabulary) == choice


def test_partial_plan_drops_stop_words_and_needs_two():
    plan = partial_plan(parse_query("why did the migration script fail"))
    assert plan is not None
    assert [t.text for t in plan.terms] == ["migration", "script", "fail"]
    assert plan.min_match == 2
    two = partial_plan(parse_query("what is the cache eviction"))
    assert two is not None and [t.text for t in two.terms] == ["cache", "eviction"] and two.min_match == 2
    assert partial_plan(parse_query("why did the cache")) is None
    assert partial_plan(parse_query("Cache cache CACHE")) is None  # one distinct word


def test_content_terms_keep_phrases():
    terms = [Term("the end", True), Term("the", False), Term("end", False)]
    assert [t.text for t in content_terms(terms)] == ["the end", "end"]
    assert "why" in STOP_WORDS and "fail" not in STOP_WORDS


def test_label_in_query_order():
    terms = parse_query("alpha beta gamma beta")
    assert label(terms, {"gamma", "alpha"}) == (["alpha", "gamma"], ["beta"])


def test_rank_repairs_orders_every_candidate():
    vocabulary = {"future": 90, "feature": 12, "fixture": 40, "fetus": 1}
    assert rank_repairs("feture", vocabulary) == ["future", "feature"]
    assert rank_repairs("feture", vocabulary, 1) == ["future"]
    assert rank_repairs("abc", vocabulary) == []


@settings(max_examples=80)
@given(st.text("abcde", min_size=4, max_size=9), st.lists(st.text("abcde", min_size=2, max_size=11), max_size=12))
def test_rank_repairs_bound_never_drops_a_close_term(word, terms):
    """The letter-count bound before the distance table only skips terms too far away."""
    vocabulary = dict.fromkeys(terms, 3)
    limit = repair_distance(word)
    brute = sorted((edit_distance(word, t, limit), t) for t in vocabulary if t != word)
    expected = [t for d, t in brute if d <= limit][:3]
    assert rank_repairs(word, vocabulary) == expected
    near = {t: 1 for t in vocabulary if edit_distance(word, t, 1) == 1}
    assert rank_repairs(word, vocabulary, 3, near) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="abAB_- .\nxéÉİ1", max_size=60),
    st.sets(st.sampled_from(["a", "ab", "ba", "abab", "x1", "é"]), min_size=1, max_size=3),
)
def test_snippet_word_finder_is_the_regex(body, tokens):
    """Snippet marks find whole words by `str.find` on the lower-cased text
    and a boundary check: the same spans as the case-insensitive regex with
    word-boundary look-arounds (the definition)."""
    from piwatchd.text.tantivy.snippets import _lower, _match_pattern, _whole_words

    words = frozenset(tokens)
    expected = [m.span() for m in _match_pattern(words).finditer(body)]
    assert _whole_words(body, _lower(body), words, 0, len(body)) == expected
    lo, hi = len(body) // 3, 2 * len(body) // 3
    # A window's words are words of the whole text (a cut word is not one).
    assert _whole_words(body, _lower(body), words, lo, hi) == [(s, e) for s, e in expected if lo <= s and e <= hi]


def test_a_repair_is_never_a_stop_word():
    assert rank_repairs("thme", {"the": 5000, "them": 40, "theme": 1}) == ["theme"]
    assert rank_repairs("thsi", {"this": 900}) == []
    assert choose_repair("thsi", {"this": 900, "thai": 2}) == "thai"
