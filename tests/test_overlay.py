"""The text index's overlay: live changes searchable before the disk commit
(`piwatchd.text.tantivy.overlay`), on the real Tantivy, the real SQLite
writer and a real piwatchd killed before its disk commit."""

from __future__ import annotations

import signal

import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import poll, q

from piwatchd.text.query import SearchFilters, Term
from piwatchd.text.tantivy import overlay as overlay_mod
from piwatchd.text.tantivy.doc import EventFacts, TextDoc
from piwatchd.text.tantivy.index import TantivyText
from piwatchd.text.tantivy.words import word_weights


def doc(frag: int, event: int, body: str, session: str = "s-1") -> TextDoc:
    facts = EventFacts(event, session, event, "message", "user", 1, False, "active", "selected", "/w", "/w", False)
    return TextDoc(frag, facts, "user.text", None, body, None, "")


def frags(text: TantivyText, word: str, k: int = 100) -> list[int]:
    return sorted(f for _, f, _, _, _ in text.top(text.query([Term(word, False)], SearchFilters()), k))


@pytest.fixture
def text(short_tmp):
    t = TantivyText(short_tmp / "ix", writable=True)
    t.commit()  # a disk commit made while idle: the overlay mirrors from now on
    yield t
    t.close()


def test_live_changes_are_searchable_before_the_disk_commit(text):
    text.add([doc(1, 1, "alpha walrus")])
    assert frags(text, "walrus") == []  # nothing committed, nothing published
    assert text.publish()
    assert frags(text, "walrus") == [1]
    elsewhere = TantivyText(text.path, writable=False)  # another process sees the disk only
    assert elsewhere.count() == 0
    text.commit()
    elsewhere.refresh()
    assert elsewhere.count() == 1
    assert text.overlay is not None and text.overlay.view.ram is None
    assert frags(text, "walrus") == [1]  # once, from the disk


def test_a_rewritten_session_is_found_only_in_its_new_form(text):
    text.add([doc(1, 1, "alpha walrus"), doc(2, 2, "other", session="s-2")])
    text.commit()
    text.delete_session("s-1")
    text.add([doc(3, 3, "alpha heron")])
    text.publish()
    assert frags(text, "walrus") == []  # masked on disk until the commit
    assert frags(text, "alpha") == [3]
    assert frags(text, "other") == [2]  # another session is untouched
    text.commit()
    assert (frags(text, "walrus"), frags(text, "alpha")) == ([], [3])


def test_a_refed_event_is_found_only_in_its_new_form(text):
    text.add([doc(10, 1, "alpha one"), doc(20, 2, "alpha two")])
    text.commit()
    text.delete_events([1])
    text.add([doc(11, 1, "alpha uno")])
    text.publish()
    assert frags(text, "alpha") == [11, 20]
    assert frags(text, "one") == []
    assert text.count() >= 2


def test_the_best_k_of_both_indexes_one_per_fragment(text):
    text.add([doc(i, i, f"walrus {'filler ' * i}") for i in range(1, 6)])
    text.commit()
    text.add([doc(i, i, "walrus") for i in range(6, 9)])
    text.publish()
    assert frags(text, "walrus") == list(range(1, 9))
    assert len(frags(text, "walrus", k=4)) == 4


def test_a_catch_up_is_not_mirrored(text):
    text.add([doc(1, 1, "walrus")])
    text.commit(idle=False)  # catching up: no overlay until a commit made while idle
    text.add([doc(2, 2, "walrus")])
    assert not text.publish()
    assert frags(text, "walrus") == [1]
    text.commit()
    assert frags(text, "walrus") == [1, 2]


def test_an_overflowing_overlay_stops_and_keeps_what_it_published(text, monkeypatch):
    monkeypatch.setattr(overlay_mod, "OVERLAY_MAX_DOCS", 2)
    text.add([doc(1, 1, "walrus")])
    text.publish()
    assert text.overlay is not None and text.overlay.view.sessions == {"s-1"}
    text.add([doc(i, i, "walrus") for i in range(2, 6)])
    assert not text.publish()
    assert text.overlay.view.sessions == frozenset()  # no session is wholly searchable there now
    assert frags(text, "walrus") == [1]
    text.commit()
    assert frags(text, "walrus") == [1, 2, 3, 4, 5]
    text.add([doc(6, 6, "walrus")])  # and it mirrors again
    assert text.publish() and frags(text, "walrus") == [1, 2, 3, 4, 5, 6]


# -- the feed: debt, freshness, the deferred disk commit ------------------------------


def test_debt_is_cleared_only_by_the_disk_commit(short_tmp, monkeypatch):
    from piwatchd.ingest.ingestor import Ingestor
    from piwatchd.store.schema import open_writer, searchable_bytes
    from piwatchd.store.writer import IndexWriter
    from piwatchd.text.query import SearchRequest
    from piwatchd.text.search import search
    from piwatchd.text.tantivy import feed

    monkeypatch.setattr(feed, "QUIET_SECONDS", 3600.0)
    monkeypatch.setattr(feed, "COMMIT_INTERVAL", 3600.0)
    path = short_tmp / "s1.jsonl"
    path.write_bytes(jsonl(v3_header(), msg("a", None, "user", "alpha walrus")))
    db = short_tmp / "index.sqlite3"
    writer = IndexWriter(open_writer(db))
    ingestor = Ingestor(writer)
    try:
        ingestor.ingest(str(path))
        assert writer.flush_text(idle=True)  # not live yet: the disk commit itself
        with open(path, "ab") as fh:
            fh.write(jsonl(msg("b", "a", "user", "beta heron")))
        ingestor.ingest(str(path))
        assert writer.flush_text(idle=True)  # published
        conn = writer.conn
        assert q(db, "SELECT session_id FROM text_debt") == [("s-1",)]  # not durable yet
        assert searchable_bytes(conn, str(path)) == path.stat().st_size  # but searchable here
        assert [h.entry_id for h in search(conn, SearchRequest("heron")).hits] == ["b"]
        with open(path, "ab") as fh:
            fh.write(jsonl(msg("c", "b", "user", "gamma okapi")))
        ingestor.ingest(str(path))  # rows committed, the overlay not yet published
        assert searchable_bytes(conn, str(path)) == 0  # the session is not wholly searchable
        assert writer.flush_text(idle=True)
        assert searchable_bytes(conn, str(path)) == path.stat().st_size
        assert 0 < (writer.text_due() or 0) <= 3600
        monkeypatch.setattr(feed, "QUIET_SECONDS", 0.0)
        writer.maintain_text()  # the deferred disk commit, now due: it runs in its own thread
        assert q(db, "SELECT session_id FROM text_debt") == [("s-1",)]  # not durable before it ends
        assert searchable_bytes(conn, str(path)) == path.stat().st_size  # searchable all along
        poll(lambda: writer.maintain_text() or writer.text_due() is None, message="the disk commit's end")
        assert q(db, "SELECT session_id FROM text_debt") == []
        assert writer.text_due() is None
        assert TantivyText(db.parent / "index.sqlite3.tantivy", writable=False).count() == 3
    finally:
        writer.close()


@pytest.mark.timeout(120)
def test_kill9_after_an_append_was_found_converges(live):
    from piwatch import Client

    live.path.write_bytes(jsonl(v3_header(), msg("a", None, "user", "alpha walrus")))
    d = live.daemon()
    with Client(d.socket, caller={"all": True}) as client:
        poll(lambda: client.search("walrus").hits, message="the first entry")
        for i, eid in enumerate(("b", "c", "d")):
            with open(live.path, "ab") as fh:
                fh.write(jsonl(msg(eid, "abc"[i], "user", f"probe{eid} heron")))
            poll(lambda eid=eid: client.search(f"probe{eid}").hits, message="the append, through the socket")
    d.proc.send_signal(signal.SIGKILL)  # most likely before the disk commit (QUIET_SECONDS)
    d.proc.wait(20)
    d._log_fh.close()
    d2 = live.daemon()
    with Client(d2.socket, caller={"all": True}) as client:
        assert sorted(h.entry_id for h in client.search("heron", limit=10).hits) == ["b", "c", "d"]
    assert d2.stop() == 0
    assert q(live.db, "SELECT count(*) FROM text_debt") == [(0,)]
    assert TantivyText(live.db.parent / "index.sqlite3.tantivy", writable=False).count() == 4


def test_word_analyses_are_remembered_until_the_disk_commit(text):
    """A word's document frequency is remembered for a searcher generation:
    the same query's tiers ask once, a commit asks again."""
    text.add([doc(1, 1, "walrus heron"), doc(2, 2, "heron")])
    text.commit()
    first = word_weights(text, [Term("walrus", False)])
    text.add([doc(3, 3, "walrus"), doc(4, 4, "walrus")])
    text.publish()
    assert word_weights(text, [Term("walrus", False)]) == first  # the disk's generation is unchanged
    text.commit()
    assert word_weights(text, [Term("walrus", False)]) != first  # rarer no more


def test_the_placeholder_that_warms_the_next_segment_is_never_searchable(text):
    """After each RAM commit the overlay hands its writer a placeholder document
    (the next segment is set up while nothing waits); every commit deletes it first."""
    import tantivy

    ov = text.overlay
    assert ov is not None
    warm = tantivy.Query.term_query(text.schema, "event", overlay_mod.WARM)
    everything = tantivy.Query.all_query()
    for round_ in range(3):
        for i in range(3):
            n = round_ * 10 + i + 1
            text.add([doc(n, n, "walrus")])
            assert text.publish()
            searcher = ov.view.ram
            assert searcher is not None
            assert searcher.search(warm, 10).count == 0
            assert searcher.search(everything, 100).count == searcher.num_docs == i + 1
            assert ov._warm  # handed over for the next append
        text.delete_events([round_ * 10 + 1])
        assert text.publish()
        assert ov.view.ram is not None and ov.view.ram.search(everything, 100).count == 2
        text.commit()  # the disk holds everything: the overlay empties, placeholder and all
        ov.index.reload()
        assert ov.index.searcher().search(everything, 100).count == 0
        assert ov._warm
    assert frags(text, "walrus") == sorted(r * 10 + i for r in range(3) for i in (2, 3))


def test_a_search_within_events_the_overlay_holds_skips_the_disk_and_finds_the_same(text, monkeypatch):
    """A follow's search is limited to the newly committed events: when the overlay
    holds every one of them, only the overlay is searched, and the hits are those
    of searching both (an older form of a re-fed event is masked on disk anyway)."""
    from piwatchd.text.tantivy import index as index_mod

    text.add([doc(1, 1, "walrus old"), doc(2, 2, "walrus disk only")])
    text.commit()
    text.delete_events([1])
    text.add([doc(3, 1, "walrus new"), doc(4, 3, "walrus fresh"), doc(5, 3, "walrus again")])
    assert text.publish()
    searched: list[int] = []
    real_top = index_mod._top

    def counting(searcher, query, k, times):
        searched.append(searcher.num_docs)
        return real_top(searcher, query, k, times)

    monkeypatch.setattr(index_mod, "_top", counting)

    def hits(events: tuple[int, ...], within: tuple[int, ...]) -> list[int]:
        searched.clear()
        filters = SearchFilters(event_rowids=events)
        return sorted(f for _, f, _, _, _ in text.top(text.query([Term("walrus", False)], filters), 100, within))

    for events in [(1,), (3,), (1, 3)]:  # all in the overlay: one search, the same hits
        full = hits(events, ())
        assert len(searched) == 2
        assert hits(events, events) == full
        assert len(searched) == 1
    assert hits((1,), (1,)) == [3] and hits((3,), (3,)) == [4, 5]
    assert hits((1, 2), (1, 2)) == hits((1, 2), ()) == [2, 3]  # event 2 is on disk only: both searched
    assert len(searched) == 2
    text.commit()  # the overlay empties: the disk answers
    assert hits((1, 3), (1, 3)) == [3, 4, 5]


def test_a_read_only_index_reloads_only_after_another_process_commits(text, monkeypatch):
    """The CLI's read-only index (another process writes) reloads when the
    writer's commit replaced meta.json, and not on every search."""
    reader = TantivyText(text.path, writable=False)
    reloads: list[int] = []
    real = type(reader.index).reload
    monkeypatch.setattr(reader, "index", _Counting(reader.index, reloads, real))
    reader.refresh()
    reader.refresh()
    assert len(reloads) == 1 and frags(reader, "narwhal") == []
    text.add([doc(7, 7, "a narwhal surfaced")])
    text.commit()
    reader.refresh()
    assert len(reloads) == 2 and frags(reader, "narwhal") == [7]
    generation = reader.generation
    for _ in range(5):
        reader.refresh()
    assert len(reloads) == 2 and reader.generation == generation


class _Counting:
    """A tantivy.Index whose reloads are counted (its other methods pass through)."""

    def __init__(self, index, reloads, real):
        self._index, self._reloads, self._real = index, reloads, real

    def reload(self):
        self._reloads.append(1)
        self._real(self._index)

    def __getattr__(self, name):
        return getattr(self._index, name)


# -- the disk commit in its own thread ----------------------------------------------


def test_an_append_during_the_disk_commit_is_searchable_before_it_ends(text, monkeypatch):
    """While the disk commit runs (held here), changes go on: new documents and a
    re-fed event are searchable from the overlay at once; once the commit ends,
    the overlay keeps only what the disk lacks, and each fragment is found once."""
    import threading

    from piwatchd.text.tantivy.disk_commit import DiskCommit

    gate = threading.Event()
    real_run = DiskCommit._run

    def held(self, writer, index):
        gate.wait(30)
        real_run(self, writer, index)

    monkeypatch.setattr(DiskCommit, "_run", held)
    text.add([doc(1, 1, "walrus one"), doc(2, 2, "walrus two")])
    assert text.publish()
    text.start_commit()
    text.delete_events([1])  # re-fed while the commit runs: only its new form may be found
    text.add([doc(3, 1, "walrus uno"), doc(4, 3, "walrus three")])
    assert text.publish()
    assert frags(text, "walrus") == [2, 3, 4] and frags(text, "one") == []
    assert not text.finish_commit(wait=False)  # still running
    elsewhere = TantivyText(text.path, writable=False)
    assert elsewhere.count() == 0
    gate.set()
    assert text.finish_commit(wait=True)
    elsewhere.refresh()
    assert sorted(
        f for _, f, _, _, _ in elsewhere.top(elsewhere.query([Term("walrus", False)], SearchFilters()), 10)
    ) == [1, 2]
    assert frags(text, "walrus") == [2, 3, 4] and frags(text, "one") == []
    ov = text.overlay
    assert ov is not None and ov.view.ram is not None
    assert ov.view.ram.num_docs == 2  # the commit's documents left the overlay
    text.commit()
    elsewhere.refresh()
    assert elsewhere.count() == 3 and frags(text, "walrus") == [2, 3, 4]


def test_appends_arriving_together_share_one_publish(short_tmp):
    """A file hinted while another is read is read too before the text is
    published: one RAM commit shows both (the ingest service's schedule)."""
    from piwatchd.ingest.service import Service
    from piwatchd.ingest.service_config import ServiceConfig

    one, two = short_tmp / "one.jsonl", short_tmp / "two.jsonl"
    one.write_bytes(jsonl(v3_header("s-1"), msg("a", None, "user", "alpha walrus")))
    two.write_bytes(jsonl(v3_header("s-2"), msg("b", None, "user", "beta heron")))
    service = Service(ServiceConfig(str(short_tmp / "index.sqlite3"), [str(short_tmp)]))
    service._open_index()
    steps: list[str] = []
    ingest, flush = service.ingestor.ingest, service.writer.flush_text

    def ingesting(path: str):
        steps.append(f"ingest {path}")
        if path == str(one):
            service.inbox.mark(str(two))  # arrives while `one` is read
        return ingest(path)

    def flushing(*, idle: bool = True) -> bool:
        steps.append("publish")
        return flush(idle=idle)

    service.ingestor.ingest = ingesting  # type: ignore[method-assign]
    service.writer.flush_text = flushing  # type: ignore[method-assign]
    try:
        service._batch([str(one)], deadline=None)
    finally:
        service._close_index()
    assert steps == [f"ingest {one}", f"ingest {two}", "publish"]
