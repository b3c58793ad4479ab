"""The `forms` field's value (`FormsCache`): inflected words and camelCase
parts, each distinct word decided once, the same as deciding every word of
every document afresh; with Tantivy's real analyzers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from piwatchd.text.tantivy import forms as forms_mod
from piwatchd.text.tantivy.doc import word_forms
from piwatchd.text.tantivy.forms import FormsCache, analyzer

WORDS, FOLDED, STEMMED = analyzer(fold=False), analyzer(), analyzer(stem=True)


def _cache() -> FormsCache:
    return FormsCache()


def _reference(text: str) -> set[str]:
    """Every word decided afresh, as the field's analyzer indexes them."""
    out: list[str] = []
    for word in WORDS.analyze(text):
        out += word_forms(word, " ".join(FOLDED.analyze(word)), " ".join(STEMMED.analyze(word)))
    return set(STEMMED.analyze(" ".join(out)))


def _indexed(cache: FormsCache, text: str) -> set[str]:
    value = cache.value([text]).split()
    assert len(value) == len(set(value)), "each form once: the field counts a term's frequency"
    return set(STEMMED.analyze(" ".join(value)))


@pytest.mark.parametrize(
    ("text", "has", "lacks"),
    [
        ("then loadSessionCache() failed", {"load", "session", "cach", "fail"}, {"then"}),
        ("raised HTTPServerError twice", {"http", "server", "error", "rais"}, {"twice"}),
        ("Retrying timed-out websockets", {"retri", "time", "websocket"}, {"out"}),
        ("Café déjà vu", set(), {"cafe", "deja", "vu"}),  # their own stems: found in `text`
        ("load_session_cache and my-kebab src/a/b.py", set(), {"load", "session", "and"}),
        ("", set(), set()),
    ],
)
def test_forms_value(text, has, lacks):
    got = _indexed(_cache(), text)
    assert has <= got
    assert not (lacks & got)


_pieces = st.sampled_from([*"abcdeRSTxyz _-.éÉ\n", "ing", "ed", "Cache", "HTTP", "Server", "ies"])
_texts = st.lists(_pieces, max_size=30).map("".join)


@settings(max_examples=200)
@given(st.lists(_texts, min_size=1, max_size=8), st.sampled_from([0, 1, 1000]))
def test_cache_equals_deciding_every_word_afresh(texts, skip_step):
    """Also while the tokenizer leaves out the words learnt to add nothing
    (`skip_step` 0: rebuilt after every new word)."""
    forms_mod.SKIP_STEP = skip_step
    try:
        cache = _cache()
        for text in texts:
            assert _indexed(cache, text) == _reference(text)
    finally:
        forms_mod.SKIP_STEP = 1000


def test_known_words_never_reach_python(monkeypatch):
    monkeypatch.setattr(forms_mod, "SKIP_STEP", 1)
    cache = _cache()
    first = "the cache failed while loadSessionCache retried the cache"
    assert _indexed(cache, first) == _reference(first)
    left = set(cache._words.analyze(first + " newword"))
    assert left == {
        "cache",
        "failed",
        "loadSessionCache",
        "retried",
        "newword",
    }  # the inflected (cache: cach) and the new
    assert _indexed(cache, first + " newword") == _reference(first + " newword")


def test_bounded_memory_starts_again(monkeypatch):
    monkeypatch.setattr(forms_mod, "MAX_WORDS", 5)
    cache = _cache()
    letters = "abcdefghijklmnopqrst"
    texts = [f"running jumped loadSessionCache word{c} other{c}s" for c in letters]
    for text in texts:
        assert _indexed(cache, text) == _reference(text)
        assert len(cache._seen) <= 5 + len(set(WORDS.analyze(text)))


def test_words_with_a_digit_are_kept_apart_and_forgotten_together(monkeypatch):
    monkeypatch.setattr(forms_mod, "DIGIT_WORDS", 6)
    cache = _cache()
    # Unique ids, hashes and markers beside a vocabulary in use: the ids never fill the cache.
    texts = [f"running{i} jumped loadSessionCache deadBeef{i} mk{i}n{i * 7} retried" for i in range(40)]
    for text in texts:
        assert _indexed(cache, text) == _reference(text)
        assert len(cache._digits) <= 6 + 3 and len(cache._seen) <= 4 + 6 + 3
    assert {"jumped", "loadSessionCache", "retried"} <= cache._seen  # the vocabulary in use stays known
