"""Search tiers end to end: a real piwatchd (Tantivy, and FTS5 for its exact
tier), the Python client over the socket, and the CLI's text.

Tiers: exact (every word as written) first, then forms (English stems,
camelCase parts), repaired (a word with no postings replaced by a close index
word, "did you mean"), partial (at least 2 content words; labelled with the
matched and missing words). A lower tier never repeats a higher tier's event.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import PIWATCH, Daemon
from hypothesis import given, settings, strategies as st
from piwatch.client import Client

TEXTS = {
    "retry": "the upload retried twice, then the retry loop gave up",
    "retry_exact": "retrying uploads until the gateway answers",
    "camel": "fixed loadSessionCache() so that it stops leaking handles",
    "snake": "renamed flush_write_buffer in the storage layer",
    "migration": "the migration script failed on the invoices table",
    "migration2": "migration notes for the billing service",
    "migration3": "another migration ran on staging",
    "script": "a script to rotate the logs",
    "lunch": "unrelated chatter about lunch plans",
    "tokens": "ran rotate_access_tokens in the nightly job",
    "future1": "plans for the future",
    "future2": "the future of the billing service",
    "feature": "turned on the feature flags for beta",
    "backup": "the backup failure left stale snapshots",
    "migrations": "two migrations were merged into one",
    "airflow": "granted the airflow-worker role read access",
    "queue": "the work queue drained by noon",
    "theme": "switched the editor to a dark theme",
    # One event, two fragments: its text and its tool call.
    "spread": [
        {"type": "text", "text": "reran the flaky suite overnight"},
        {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "pytest -k quorum_lease"}},
    ],
}


def _session(sid: str, cwd: Path, texts: dict[str, str | list]) -> bytes:
    entries = []
    prev = None
    for i, (key, text) in enumerate(texts.items()):
        role = "user" if isinstance(text, str) else "assistant"
        entries.append(msg(key, prev, role, text, ts=f"2026-05-01T10:00:{i:02d}.000Z"))
        prev = key
    return jsonl(v3_header(sid, str(cwd)), *entries)


@pytest.fixture(scope="module", params=["tantivy", "fts5"])
def served(request):
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwtier-"))
    root = base / "sessions"
    (root / "--work-proj--").mkdir(parents=True)
    proj, other = base / "proj", base / "other"
    for d in (proj, other):
        (d / ".git").mkdir(parents=True)
    (root / "--work-proj--" / "s1.jsonl").write_bytes(_session("s-1", proj, TEXTS))
    # Another project's words: never suggested to a caller of this one.
    (root / "--work-proj--" / "s2.jsonl").write_bytes(_session("s-2", other, {"o1": "the zanzibarian gateway"}))
    db = base / "index.sqlite3"
    old = os.environ.get("PIWATCH_ENGINE")
    os.environ["PIWATCH_ENGINE"] = request.param
    daemon = Daemon(root, db)
    try:
        daemon.start()
    finally:
        if old is None:
            os.environ.pop("PIWATCH_ENGINE", None)
        else:
            os.environ["PIWATCH_ENGINE"] = old

    def search(query: str, caller=None, **kw):
        with Client(daemon.socket, timeout=10, caller=caller or {"all": True}) as c:
            return c.search(query, **kw)

    daemon.engine = request.param
    daemon.proj = proj
    daemon.search = search
    yield daemon
    daemon.stop()
    shutil.rmtree(base, ignore_errors=True)


def hits(result) -> list[tuple[str, str]]:
    return [(h.entry_id, h.tier) for h in result.hits]


def test_exact_tier_first_and_forms_below(served):
    r = served.search("retrying uploads")
    if served.engine == "fts5":
        assert hits(r) == [("retry_exact", "exact")] and not r.relaxed
        return
    assert hits(r) == [("retry_exact", "exact"), ("retry", "forms")]
    assert r.relaxed and r.repairs == []
    forms = r.hits[1]
    assert forms.matched == ["retrying", "uploads"] and forms.missing == []
    marked = {forms.snippet[a:b] for a, b in forms.spans}
    assert {"retried", "upload"} <= marked, forms.snippet


@pytest.mark.parametrize(
    ("query", "entry"),
    [
        ("session cache", "camel"),
        ("load_session_cache", "camel"),
        ("flushWriteBuffer", "snake"),
        ("write buffers", "snake"),
    ],
)
def test_identifier_parts(served, query, entry):
    r = served.search(query)
    if served.engine == "fts5":
        assert all(h.tier == "exact" for h in r.hits)
        return
    assert hits(r) == [(entry, "forms")], hits(r)


@pytest.mark.parametrize(
    ("query", "entry"),
    # `loop` is its own stem (found as a word of the text); `retried` is not (found in the forms field)
    [("upload loops", "retry"), ("retries loops", "retry"), ("gateways answering", "retry_exact")],
)
def test_word_forms(served, query, entry):
    r = served.search(query)
    if served.engine == "fts5":
        assert all(h.tier == "exact" for h in r.hits)
        return
    assert hits(r) == [(entry, "forms")], hits(r)


def test_repaired_word_says_did_you_mean(served):
    r = served.search("migraton script")
    if served.engine == "fts5":
        assert hits(r) == [] and r.repairs == []
        return
    assert [(x.word, x.replacement) for x in r.repairs] == [("migraton", "migration")]
    assert hits(r) == [("migration", "repaired")]
    assert r.hits[0].matched == ["migraton", "script"] and r.hits[0].missing == []


def test_a_repaired_spelling_as_written_comes_before_its_forms(served):
    """`migraton` -> migration: the events holding the repaired word as
    written, then (the page not full) the one holding only an inflection,
    every one labelled repaired, none twice."""
    r = served.search("migraton", limit=10)
    if served.engine == "fts5":
        assert hits(r) == [] and r.repairs == []
        return
    assert [(x.word, x.replacement) for x in r.repairs] == [("migraton", "migration")]
    got = hits(r)
    assert sorted(e for e, _ in got[:-1]) == ["migration", "migration2", "migration3"], got
    assert got[-1] == ("migrations", "repaired") and {t for _, t in got} == {"repaired"}
    assert hits(served.search("migraton", limit=2)) == hits(r)[:2]


@pytest.mark.parametrize(
    ("query", "repair", "entry"),
    [
        # a compound name is repaired token by token, its joiners kept
        ("rotate_acess_tokens", ("rotate_acess_tokens", "rotate_access_tokens"), "tokens"),
        # `future` (2 documents) is the best repair of `feture`, but finds nothing with `flags`: the next one does
        ("feture flags", ("feture", "feature"), "feature"),
    ],
)
def test_repairs_of_compounds_and_the_next_candidate(served, query, repair, entry):
    r = served.search(query)
    if served.engine == "fts5":
        assert hits(r) == []
        return
    assert [(x.word, x.replacement) for x in r.repairs] == [repair]
    assert hits(r)[0] == (entry, "repaired")


def test_a_misspelt_inflection_is_repaired_by_its_stem(served):
    """`uplaoding`: no index word is within 2 edits of it (the text says
    `upload`, `uploads`), but its stem `uplaod` is one edit from `upload`;
    the repaired stem finds its words as written, then its forms."""
    r = served.search("uplaoding retried")
    if served.engine == "fts5":
        assert hits(r) == []
        return
    assert [(x.word, x.replacement) for x in r.repairs] == [("uplaoding", "upload")]
    assert hits(r) == [("retry", "repaired"), ("retry_exact", "repaired")]
    assert r.hits[0].matched == ["uplaoding", "retried"]


def test_a_repair_is_never_a_stop_word(served):
    """`thme` is one edit from `the` (in nearly every event), `them` and `theme` (in one):
    the repair is `theme`."""
    r = served.search("thme")
    if served.engine == "fts5":
        assert hits(r) == [] and r.repairs == []
        return
    assert [(x.word, x.replacement) for x in r.repairs] == [("thme", "theme")]
    assert hits(r) == [("theme", "repaired")]


def test_a_compound_words_parts_match_by_derivations_in_the_partial_tier(served):
    """`worke` has postings by its stem (`work`, another event's), so it is
    not repaired, and `airflow-worker` stems to airflow, worker: the part
    matches by a derivation of its stem, as a one-part word would."""
    r = served.search("airflow-worke role")
    if served.engine == "fts5":
        assert hits(r) == []
        return
    assert hits(r) == [("airflow", "partial")]
    assert r.hits[0].matched == ["airflow-worke", "role"] and r.hits[0].missing == []


def test_a_repair_never_names_a_word_the_caller_cannot_see(served):
    hidden = served.search("zanzibarin gateway", caller={"cwd": str(served.proj)})
    assert hidden.repairs == [] and hidden.hits == []
    if served.engine == "tantivy":
        seen = served.search("zanzibarin gateway")
        assert [(x.word, x.replacement) for x in seen.repairs] == [("zanzibarin", "zanzibarian")]


def test_partial_names_matched_and_missing_words(served):
    r = served.search("why did the migration script crash", limit=5)
    if served.engine == "fts5":
        assert hits(r) == []
        return
    assert hits(r) == [("migration", "partial")]
    assert r.hits[0].matched == ["migration", "script"] and r.hits[0].missing == ["crash"]


def test_partial_finds_words_spread_over_an_events_fragments(served):
    """Each fragment holds one word; the event holds both: a partial hit
    (never exact: no fragment holds every word), missing nothing."""
    r = served.search("quorum_lease flaky", limit=5)
    if served.engine == "fts5":
        assert hits(r) == []
        return
    assert hits(r) == [("spread", "partial")]
    assert r.hits[0].matched == ["quorum_lease", "flaky"] and r.hits[0].missing == []
    assert hits(served.search("quorum_lease flaky", exact=True)) == []
    # A misspelled word the repaired tier could not place: the partial tier
    # tries the repair, and reports it because the hit holds it.
    r = served.search("quorum_lease flakey", limit=5)
    assert hits(r) == [("spread", "partial")]
    assert [(x.word, x.replacement) for x in r.repairs] == [("flakey", "flaky")]
    assert r.hits[0].matched == ["quorum_lease", "flakey"]
    # ... and says nothing of it when no hit holds it.
    r = served.search("migration flakey", limit=5)
    assert r.repairs == [] and hits(r) == []


def test_partial_matches_derivations_the_stemmer_keeps_apart(served):
    """`fail` (stem fail) finds `failure` (stem failur) in the partial tier
    only: the forms tier means the English stem."""
    r = served.search("why did backups fail", limit=5)
    if served.engine == "fts5":
        assert hits(r) == []
        return
    assert hits(r) == [("backup", "partial")]
    assert r.hits[0].matched == ["backups", "fail"] and r.hits[0].missing == []


def test_tiers_never_repeat_an_event_and_exact_turns_them_off(served):
    r = served.search("migration script", limit=20)
    keys = [h.entry_id for h in r.hits]
    assert len(keys) == len(set(keys))
    assert hits(r)[0] == ("migration", "exact")
    strict = served.search("migration script", exact=True)
    assert hits(strict) == [("migration", "exact")] and not strict.relaxed
    for query in ("migraton script", "retrying upload", "session cache", "why did the migration script crash"):
        assert all(h.tier == "exact" for h in served.search(query, exact=True).hits)


def test_partial_needs_two_words_and_stops_at_the_limit(served):
    # One content word: no partial tier.
    assert hits(served.search("why did the lunch")) == []
    # Exact fills the page: no tier below runs.
    r = served.search("migration", limit=2)
    assert [t for _, t in hits(r)] == ["exact", "exact"] and not r.relaxed


@pytest.mark.parametrize(
    "query",
    ["kubernetes ingress certificate", "why did the kubernetes deployment crash", "quantum chromodynamics lattice"],
)
def test_never_said_gets_no_exact_or_forms_hit(served, query):
    r = served.search(query)
    assert not [h for h in r.hits if h.tier in ("exact", "forms")]


def test_a_query_that_finds_nothing_counts_each_word_by_itself(served):
    """No event holds both words: the result says how many events hold
    each, among those the caller may see only (another project's word
    counts 0 for this project's caller) (the Tantivy engine)."""
    cwd = {"cwd": str(served.proj)}
    mine = served.search("lunch zanzibarian", caller=cwd)
    assert mine.hits == []
    if served.engine == "fts5":
        assert mine.words is None  # the FTS5 engine does not count words (README)
        return
    assert [(w.word, w.events, w.more) for w in mine.words] == [("lunch", 1, False), ("zanzibarian", 0, False)]
    every = served.search("lunch zanzibarian")
    assert [(w.word, w.events) for w in every.words] == [("lunch", 1), ("zanzibarian", 1)]
    # A word's own matches: its repair (zanzibarian) is another word.
    typo = served.search("lunch zanzibarin")
    assert typo.hits == [] and [(w.word, w.events) for w in typo.words] == [("lunch", 1), ("zanzibarin", 0)]
    grouped = served.search("lunch zanzibarian", caller=cwd, group="session")
    assert grouped.sessions == [] and [w.events for w in grouped.words] == [1, 0]
    # Not for a later page, a one-word query (its result is its count), nor a query with hits.
    assert served.search("lunch zanzibarian", caller=cwd, offset=5).words is None
    assert served.search("zanzibarian", caller=cwd).words is None
    assert served.search("lunch plans", caller=cwd).words is None
    env = {**os.environ, "PIWATCH_SOCKET": str(served.socket)}
    out = subprocess.run(
        [PIWATCH, "search", "--color", "never", "lunch", "zanzibarian"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=served.proj,  # the CLI searches its workspace's sessions
    )
    assert "by itself: lunch in 1 event, zanzibarian in no event" in out.stdout, out.stdout + out.stderr


def test_cli_shows_dividers_labels_and_did_you_mean(served):
    if served.engine == "fts5":
        pytest.skip("the FTS5 engine has the exact tier only")
    env = {**os.environ, "PIWATCH_SOCKET": str(served.socket)}

    def cli(*args: str) -> str:
        out = subprocess.run(
            [PIWATCH, "search", "--all", "--color", "never", *args], capture_output=True, text=True, timeout=60, env=env
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    text = cli("retrying", "uploads")
    assert "── forms:" in text and "matched 2 of 2 words: retrying, uploads" in text
    assert text.index("retrying uploads until") < text.index("── forms:")
    text = cli("migraton", "script")
    assert "did you mean: migraton → migration" in text and "── repaired:" in text
    text = cli("why", "did", "the", "migration", "script", "crash")
    assert "── partial:" in text and "matched 2 of 3 words: migration, script; missing: crash" in text
    assert "no hits" in cli("--exact", "migraton", "script")


_WORDS = ["retry", "retried", "retrying", "loop", "loops", "loadSessionCache", "session", "cache", "the", "runs"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([*_WORDS, "_", "-", ".", " ", "\n"]), max_size=30),
    st.lists(st.sampled_from(_WORDS + ["load_session", '"the loop"', '"retry loop"']), min_size=1, max_size=4),
)
def test_label_masks_are_each_words_own_search(tmp_path_factory, body, query):
    """A partial hit's matched words come from one index search whose score
    sums 2^i for each word i a fragment holds: the same words, one by one,
    as each word's own partial-tier query finds in that fragment."""
    from piwatchd.text.query import SearchFilters, parse_query
    from piwatchd.text.tantivy.doc import EventFacts, TextDoc
    from piwatchd.text.tantivy.index import TantivyText
    from piwatchd.text.tantivy.words import matched_masks, partial_match_query

    text = _TEXT.get("t") or _TEXT.setdefault("t", TantivyText(tmp_path_factory.mktemp("tt") / "ix", writable=True))
    n = _TEXT["n"] = _TEXT.get("n", 0) + 1
    joined = "".join(w if w in "_-. \n" else f" {w}" for w in body)
    facts = EventFacts(n, "s", n, "message", "user", None, False, "active", "selected", None, None, False)
    text.add([TextDoc(n, facts, "user.text", None, joined, None, "")])
    text.commit()
    terms = parse_query(" ".join(query))
    mask = matched_masks(text, terms, [n], SearchFilters())[0].get(n, 0)
    for i, term in enumerate(terms):
        one = text.top(text.combine([partial_match_query(text, term)], SearchFilters(), [n]), 10)
        assert bool(mask >> i & 1) == bool(one), (joined, term)


_TEXT: dict = {}


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from([*_WORDS, "failure", "_", " ", "\n"]), max_size=30),
    st.lists(st.sampled_from(_WORDS + ["fail", "zorblax", "qqqqzz", '"the loop"']), min_size=2, max_size=4),
)
def test_partial_probe_leaves_out_only_words_that_cannot_match(tmp_path_factory, body, query):
    """The partial probe searches only words that `can_match`: a word left
    out finds no document by its own partial-tier query, and a minimum-match
    disjunction of every remaining word is run as a conjunction (`combine`)
    with the same documents and scores."""
    from tantivy import Occur, Query

    from piwatchd.text.query import SearchFilters, parse_query
    from piwatchd.text.tantivy.doc import EventFacts, TextDoc
    from piwatchd.text.tantivy.index import TantivyText
    from piwatchd.text.tantivy.words import can_match, partial_match_query, partial_word_query

    text = _TEXT.get("p") or _TEXT.setdefault("p", TantivyText(tmp_path_factory.mktemp("tp") / "ix", writable=True))
    n = _TEXT["pn"] = _TEXT.get("pn", 0) + 1
    joined = "".join(w if w in "_ \n" else f" {w}" for w in body)
    facts = EventFacts(n, "s", n, "message", "user", None, False, "active", "selected", None, None, False)
    text.add([TextDoc(n, facts, "user.text", None, joined, None, "")])
    text.commit()
    terms = parse_query(" ".join(query))
    for term in terms:
        if not can_match(text, term):
            assert text.top(text.combine([partial_match_query(text, term)], SearchFilters()), 10) == []
    words = [partial_word_query(text, t, 1.0 + i) for i, t in enumerate(terms)]
    some = Query.boolean_query([(Occur.Should, w) for w in words], minimum_number_should_match=len(words))
    want = sorted((f, round(s, 4)) for s, f, _, _, _ in text.top(some, 1000))
    got = sorted(
        (f, round(s, 4)) for s, f, _, _, _ in text.top(text.combine(words, SearchFilters(), min_match=len(words)), 1000)
    )
    assert got == want
    assert text.top(text.combine(words, SearchFilters(), min_match=len(words) + 1), 1000) == []
