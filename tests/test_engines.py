"""The text-engine contract: Tantivy (the default) and FTS5 index the same
sessions written by the real Pi 1.6.0 and must return the same set of
matching events for every query and every filter (the order may differ where
scores differ or tie). Filters run inside Tantivy and as SQL over FTS5, so
this proves the pushed-down filters exact, including authorization roots on
path-component boundaries, invocation cutoffs and branch/selection states.
"""

from __future__ import annotations

import random
import re
import sqlite3
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "pi"))
import pitools

from piwatchd.ingest.scan import index_once
from piwatchd.store.schema import open_reader
from piwatchd.text.engine import index_engine
from piwatchd.text.query import QueryError, SearchFilters, SearchRequest
from piwatchd.text.search import search
from piwatchd.text.tantivy import search as tantivy_search

pytestmark = [pytest.mark.pi, pytest.mark.timeout(900)]

ENGINES = ("tantivy", "fts5")
_WORD = re.compile(r"[a-z]{3,12}")


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    out = tmp_path_factory.mktemp("engines")
    pitools.random_sessions(out / "random", "1.6.0", "engines", 40)
    pitools.corpus(out / "corpus", "1.6.0", "1500000", "engines")
    roots = [str(out / "random" / "sessions"), str(out / "corpus" / "sessions")]
    conns = {}
    mp = pytest.MonkeyPatch()
    for engine in ENGINES:
        mp.setenv("PIWATCH_ENGINE", engine)
        summary = index_once(out / f"{engine}.sqlite3", roots)
        assert summary["problems"] == [], summary["problems"]
        conns[engine] = open_reader(out / f"{engine}.sqlite3")
        assert index_engine(conns[engine]) == engine
    mp.undo()
    yield conns
    for c in conns.values():
        c.close()


def matching(conn: sqlite3.Connection, query: str, filters: SearchFilters) -> set[tuple[str, str]]:
    """Every event of the exact tier, paging through the results."""
    out: set[tuple[str, str]] = set()
    offset = 0
    while True:
        result = search(conn, SearchRequest(query, filters, limit=200, offset=offset, exact=True))
        out.update((h.session_id, h.entry_id) for h in result.hits)
        if not result.has_more or offset >= 2000:
            return out
        offset += 200


def vocabulary(conn: sqlite3.Connection) -> Counter:
    """Words of the indexed text (FTS5 keeps it in SQLite), by fragment frequency."""
    counts: Counter = Counter()
    for (body,) in conn.execute("SELECT body FROM fragments"):
        counts.update(set(_WORD.findall((body or "").lower())))
    return counts


def phrases(conn: sqlite3.Connection, rng: random.Random, n: int) -> list[str]:
    bodies = [b for (b,) in conn.execute("SELECT body FROM fragments WHERE length(body) > 40")]
    out = []
    while len(out) < n:
        words = _WORD.findall(rng.choice(bodies).lower())
        if len(words) >= 3:
            i = rng.randrange(len(words) - 2)
            out.append('"' + " ".join(words[i : i + rng.choice((2, 3))]) + '"')
    return out


@pytest.fixture(scope="module")
def queries(indexes):
    conn = indexes["fts5"]
    rng = random.Random(11)
    vocab = vocabulary(conn)
    ranked = [w for w, _ in vocab.most_common()]
    common, middle, rare = ranked[:15], ranked[len(ranked) // 4 : len(ranked) // 2], ranked[-200:]
    picked = common[:6] + rng.sample(middle, 8) + rng.sample(rare, 6)
    picked += [f"{rng.choice(middle)} {rng.choice(common)}" for _ in range(4)]
    picked += phrases(conn, rng, 6)
    return picked


def _session_facts(conn):
    rows = conn.execute("SELECT session_id, cwd_norm, entry_count FROM sessions ORDER BY session_id").fetchall()
    return rows


def filter_cases(conn: sqlite3.Connection) -> list[tuple[str, SearchFilters]]:
    sessions = _session_facts(conn)
    sid, _, count = max(sessions, key=lambda r: r[2])
    low = max(1, min(r[2] for r in sessions) // 2)
    ts = sorted(r[0] for r in conn.execute("SELECT ts_ms FROM events WHERE ts_ms IS NOT NULL"))
    mid = ts[len(ts) // 2]
    path = conn.execute("SELECT path FROM file_evidence ORDER BY path LIMIT 1 OFFSET 3").fetchone()[0]
    read = conn.execute(
        "SELECT path FROM file_evidence WHERE mode='read' GROUP BY path ORDER BY count(*) DESC"
    ).fetchone()[0]
    changed = conn.execute(
        "SELECT path FROM file_evidence WHERE mode='changed' GROUP BY path ORDER BY count(*) DESC"
    ).fetchone()[0]
    tool = conn.execute(
        "SELECT tool_name FROM fragments WHERE tool_name IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC"
    ).fetchone()[0]
    return [
        ("none", SearchFilters()),
        ("kind", SearchFilters(kinds=("tool.result", "bash.output"))),
        ("role", SearchFilters(roles=("user",))),
        ("type", SearchFilters(event_types=("compaction", "branch_summary"))),
        ("tool", SearchFilters(tools=(tool,))),
        ("error", SearchFilters(is_error=True)),
        ("no error", SearchFilters(is_error=False)),
        ("since/until", SearchFilters(since_ms=ts[len(ts) // 4], until_ms=mid)),
        ("alternate", SearchFilters(branch_states=("alternate",))),
        ("summarized/omitted", SearchFilters(selection_states=("summarized", "omitted"))),
        ("session", SearchFilters(session_ids=(sid,))),
        ("exclude session", SearchFilters(exclude_sessions=(sid,))),
        ("cwd exact", SearchFilters(cwd="/work/proj")),
        ("cwd under", SearchFilters(cwd_under="/work/proj")),
        ("roots: prefix sibling never", SearchFilters(authorized_roots=("/work/proj",))),
        ("roots: two", SearchFilters(authorized_roots=("/work/proj2", "/work/other-repo"))),
        ("roots: none", SearchFilters(authorized_roots=())),
        ("roots: /", SearchFilters(authorized_roots=("/",))),
        ("cutoff", SearchFilters(ordinal_caps=((sid, count // 2),))),
        # Caps are grouped by value (one filter per value): every session at one, the largest at another.
        ("cutoffs", SearchFilters(ordinal_caps=tuple((s, count // 2 if s == sid else low) for s, *_ in sessions))),
        ("own results hidden", SearchFilters(exclude_own_results=True)),
        ("files any", SearchFilters(files=(path,))),
        ("files dir read", SearchFilters(files=(read.rsplit("/", 1)[0],), file_mode="read")),
        ("files changed", SearchFilters(files=(changed,), file_mode="changed")),
        (
            "combined",
            SearchFilters(
                kinds=("assistant.text", "user.text"),
                authorized_roots=("/work",),
                branch_states=("selected",),
                since_ms=ts[0],
            ),
        ),
    ]


def test_both_engines_match_the_same_events(indexes, queries):
    cases = filter_cases(indexes["fts5"])
    compared = 0
    nonempty: Counter = Counter()
    differences = []
    for query in queries:
        for name, filters in cases:
            results = {}
            for engine, conn in indexes.items():
                try:
                    results[engine] = matching(conn, query, filters)
                except QueryError as exc:
                    results[engine] = {("error", str(exc))}
            compared += 1
            nonempty[name] += bool(results["fts5"])
            if results["tantivy"] != results["fts5"]:
                only_t = sorted(results["tantivy"] - results["fts5"])[:3]
                only_f = sorted(results["fts5"] - results["tantivy"])[:3]
                differences.append(f"{query!r} [{name}]: only tantivy {only_t}, only fts5 {only_f}")
    assert not differences, f"{len(differences)} of {compared} differ:\n" + "\n".join(differences[:20])
    # The comparison must have had something to compare: every filter admits
    # some hits for some query (except the one that admits nothing).
    empty = [name for name, _ in cases if not nonempty[name] and name != "roots: none"]
    assert not empty, empty
    assert not nonempty["roots: none"]


def test_relaxed_search_keeps_the_exact_tier_first(indexes, queries):
    """Without `exact`, the exact tier is unchanged and ranked first: the
    hits labelled exact are the exact search's hits, in its order, before any
    other tier; each lower tier holds only events no higher tier returned."""
    order = ("exact", "forms", "repaired", "partial")
    for engine, conn in indexes.items():
        for query in queries[:12]:
            strict = search(conn, SearchRequest(query, limit=50, exact=True)).hits
            relaxed = search(conn, SearchRequest(query, limit=50)).hits
            assert [(h.session_id, h.entry_id) for h in relaxed if h.tier == "exact"] == [
                (h.session_id, h.entry_id) for h in strict
            ], (engine, query)
            tiers = [order.index(h.tier) for h in relaxed]
            assert tiers == sorted(tiers), (engine, query)
            keys = [(h.session_id, h.entry_id) for h in relaxed]
            assert len(keys) == len(set(keys)), (engine, query)
            if engine == "fts5":  # the FTS5 engine has the exact tier only (README: engines)
                assert {h.tier for h in relaxed} <= {"exact"}


def test_filters_admit_what_they_say(indexes, queries):
    """Independent of the other engine: hits honour their filters."""
    conn = indexes["tantivy"]
    for query in queries[:8]:
        for h in search(conn, SearchRequest(query, SearchFilters(authorized_roots=("/work/proj",)), limit=200)).hits:
            assert h.cwd == "/work/proj" or h.cwd.startswith("/work/proj/"), h.cwd
        for h in search(conn, SearchRequest(query, SearchFilters(kinds=("tool.result",)), limit=200)).hits:
            assert h.evidence.kind == "tool.result"
        for h in search(conn, SearchRequest(query, SearchFilters(branch_states=("alternate",)), limit=200)).hits:
            assert h.branch_state == "alternate"


def test_tantivy_keeps_no_text_in_sqlite(indexes):
    conn = indexes["tantivy"]
    assert conn.execute("SELECT count(*) FROM fragments WHERE body IS NOT NULL OR tail IS NOT NULL").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM fragments").fetchone()[0] > 1000
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'fragments_fts'").fetchone()[0] == 0


def test_snippets_mark_the_matched_words(indexes, queries):
    conn = indexes["tantivy"]
    for query in queries[6:14]:
        words = set(query.strip('"').lower().split())
        for h in search(conn, SearchRequest(query, limit=20, exact=True)).hits:
            assert h.spans, (query, h.snippet)
            marked = {h.snippet[s:e].lower() for s, e in h.spans}
            assert marked & words, (query, marked)


@pytest.fixture(scope="module")
def grown(indexes, tmp_path_factory):
    """The random sessions grown in steps through the append path, so tree
    states change after their documents were written (branches, compactions)."""
    from piwatchd.ingest.ingestor import Ingestor
    from piwatchd.store.schema import open_writer
    from piwatchd.store.writer import IndexWriter

    fts5 = indexes["fts5"]
    sources = [Path(p) for (p,) in fts5.execute("SELECT path FROM sources WHERE path LIKE '%/random/%' ORDER BY path")]
    out = tmp_path_factory.mktemp("grown")
    db = out / "grown.sqlite3"
    writer = IndexWriter(open_writer(db, engine="tantivy"))
    ingestor = Ingestor(writer)
    for src in sources:
        lines = src.read_bytes().splitlines(keepends=True)
        dest = out / "sessions" / src.parent.name / src.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        step = max(1, len(lines) // 5)
        for end in [*range(step, len(lines), step), len(lines)]:
            dest.write_bytes(b"".join(lines[:end]))
            outcome = ingestor.ingest(str(dest))
            assert outcome.state == "ok", outcome
    writer.close()
    conn = open_reader(db)
    yield conn
    conn.close()


def test_state_changes_reach_the_text_index(indexes, grown, queries):
    """Filters on branch and selection state over the grown index equal a
    clean FTS5 build of the same sessions (states changed after indexing)."""
    roots = SearchFilters(cwd_under="/work")
    changed = grown.execute("SELECT count(*) FROM events WHERE branch_state='alternate'").fetchone()[0]
    assert changed > 0
    differences = []
    for query in queries[:20]:
        for states in (
            {"branch_states": ("alternate",)},
            {"branch_states": ("selected",)},
            {"selection_states": ("summarized",)},
            {"selection_states": ("direct",)},
        ):
            f = replace(roots, **states)
            want = matching(indexes["fts5"], query, f)
            got = matching(grown, query, f)
            # The FTS5 build also holds the corpus sessions: compare on the grown sessions only.
            grown_ids = {r[0] for r in grown.execute("SELECT session_id FROM sessions")}
            want = {x for x in want if x[0] in grown_ids}
            if got != want:
                differences.append((query, states, sorted(got ^ want)[:3]))
    assert not differences, differences[:10]


@pytest.mark.parametrize("dear_fetch_s", [1e9, 0.0], ids=["fetches-grow-4x", "fetches-grow-16x"])
def test_tied_scores_order_newest_first_alike(tmp_path, monkeypatch, dear_fetch_s):
    """Hundreds of events score exactly alike (the same text): both engines
    order them newest first, then by session and position, page after page,
    with the higher-scoring events before them all. More ties than Tantivy's
    first fetch, so its tie fetching and its rows-read cut are both exercised,
    with fetches growing by 4 (cheap ones) and by 16 (dear ones)."""
    monkeypatch.setattr(tantivy_search, "DEAR_FETCH_S", dear_fetch_s)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from conftest import jsonl, msg, v3_header

    rng = random.Random(5)
    root = tmp_path / "sessions" / "--w--"
    root.mkdir(parents=True)
    for n in range(160):
        minute = rng.randrange(40)  # repeated times: the session then the ordinal break those ties
        ts = f"2026-05-01T10:{minute:02d}:00.000Z"
        text = "tiedword tiedword" if n % 37 == 0 else "tiedword"
        entries = [msg(f"u{i}", f"u{i - 1}" if i else None, "user", f"{text} {i}", ts=ts) for i in range(2)]
        (root / f"{n}.jsonl").write_bytes(jsonl(v3_header(f"s-{n:03d}", "/w"), *entries))
    orders = {}
    for engine in ENGINES:
        monkeypatch.setenv("PIWATCH_ENGINE", engine)
        db = tmp_path / f"{engine}.sqlite3"
        assert index_once(db, [str(tmp_path / "sessions")])["problems"] == []
        conn = open_reader(db)
        pages = []
        for offset in range(0, 400, 30):
            result = search(conn, SearchRequest("tiedword", SearchFilters(), limit=30, offset=offset, exact=True))
            pages += [(h.session_id, h.entry_id, h.timestamp) for h in result.hits]
        conn.close()
        orders[engine] = pages
    assert len(orders["tantivy"]) == 320
    strong = [p for p in orders["tantivy"] if int(p[0][2:]) % 37 == 0]
    assert orders["tantivy"][: len(strong)] == strong  # the word twice scores higher
    rest = orders["tantivy"][len(strong) :]
    assert rest == sorted(rest, key=lambda p: (-_ms(p[2]), p[0], p[1]))
    assert orders["tantivy"] == orders["fts5"]


def _ms(timestamp: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
