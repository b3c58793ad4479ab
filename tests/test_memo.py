"""What the Tantivy index remembers of its words across disk commits
(`TantivyText.memo`): a live session commits once a second, and a word's
analysis or a common word's statistics must not be computed again each
time; a count that a commit may have changed meaningfully must be."""

from __future__ import annotations

import pytest

from piwatchd.text.query import SearchFilters, Term
from piwatchd.text.tantivy.doc import EventFacts, TextDoc
from piwatchd.text.tantivy.index import TantivyText
from piwatchd.text.tantivy.memo import COUNT_DRIFT, COUNT_FIELDS
from piwatchd.text.tantivy.scope import scope_docs
from piwatchd.text.tantivy.words import has_postings, word_weights


def doc(frag: int, body: str, session: str = "s-1") -> TextDoc:
    facts = EventFacts(frag, session, frag, "message", "user", 1, False, "active", "selected", "/w", "/w", False)
    return TextDoc(frag, facts, "user.text", None, body, None, "")


@pytest.fixture
def text(short_tmp):
    t = TantivyText(short_tmp / "ix", writable=True)
    yield t
    t.close()


class Calls:
    def __init__(self, value: object) -> None:
        self.value, self.n = value, 0

    def __call__(self) -> object:
        self.n += 1
        return self.value


def test_an_analysis_outlives_every_commit(text):
    forms = Calls(["walrus"])
    text.memo(("forms", "walruses"), forms)
    for i in range(3):
        text.add([doc(i + 1, "walrus")])
        text.commit()
        text.memo(("forms", "walruses"), forms)
    assert forms.n == 1


# A word's documents, and all the documents of a caller's scope (`scope_docs`).
COUNT_KEYS = [("df", "heron", False), ("docs", SearchFilters(authorized_roots=("/w",)))]


@pytest.mark.parametrize("key", COUNT_KEYS, ids=["word", "scope"])
def test_a_count_outlives_commits_that_cannot_move_it_much(text, key):
    """A count of `need` documents survives `need // (COUNT_FIELDS *
    COUNT_DRIFT)` documents changed; one more and it is counted again."""
    need = COUNT_FIELDS * COUNT_DRIFT * 2
    count = Calls(need)
    text.memo(key, count)
    text.add([doc(1, "heron"), doc(2, "egret")])
    text.commit()
    assert text.memo(key, count) == need and count.n == 1
    text.delete_events([2])  # a deletion is a change too: 3 documents changed in all
    text.commit()
    assert text.churn == 3
    text.memo(key, count)
    assert count.n == 2


def test_a_scope_is_counted_among_its_documents_after_commits(text):
    """The remembered size of a scope is the count a fresh search gives, once
    the changes since could have moved it: never a stale value past the bound."""
    scope = SearchFilters(authorized_roots=("/w",))
    text.add([doc(i + 1, "heron") for i in range(3)])
    text.commit()
    assert scope_docs(text, scope) == 3
    text.add([doc(i + 4, "heron") for i in range(3)])
    text.commit()
    assert scope_docs(text, scope) == 6  # 3 changes against a count of 3: counted again


def test_no_word_is_absent_for_longer_than_a_commit(text):
    """A word with no postings is looked up again after any commit (a
    repair or a missing label turns on it)."""
    text.add([doc(1, "heron")])
    text.commit()
    assert not has_postings(text, Term("walrus", False))
    text.add([doc(2, "walrus")])
    text.commit()
    assert has_postings(text, Term("walrus", False))


def test_a_rare_word_is_weighed_again_after_a_commit_that_holds_it(text):
    text.add([doc(1, "walrus heron"), doc(2, "heron")])
    text.commit()
    first = word_weights(text, [Term("walrus", False)])
    text.add([doc(3, "walrus"), doc(4, "walrus")])
    text.commit()
    assert word_weights(text, [Term("walrus", False)]) != first


def test_other_values_and_another_process_commits_start_again(text):
    """Derivations and repairs read which words the index holds: any change
    recomputes them. A read-only index reloading another process's commit
    cannot tell how much changed: only analyses are kept."""
    text.add([doc(1, "heron")])
    text.commit()
    derived, forms, count = Calls(["herons"]), Calls(["heron"]), Calls(10_000)
    text.memo(("derived", "heron"), derived)
    text.add([doc(2, "herons")])
    text.commit()
    text.memo(("derived", "heron"), derived)
    assert derived.n == 2
    reader = TantivyText(text.path, writable=False)
    reader.refresh()
    for key, calls in ((("forms", "heron"), forms), (("df", "heron", False), count)):
        reader.memo(key, calls)
    text.add([doc(3, "heron")])
    text.commit()
    reader.refresh()
    for key, calls in ((("forms", "heron"), forms), (("df", "heron", False), count)):
        reader.memo(key, calls)
    assert (forms.n, count.n) == (1, 2)
