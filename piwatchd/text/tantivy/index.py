"""The Tantivy text index: one document per fragment, filters inside the index.

Why Tantivy: FTS5's bm25 scores every match of a query, so one very common
word costs hundreds of milliseconds on a large history; Tantivy's block-max
WAND skips most of them (measured 100x faster on common words, see README).

The index lives in a directory beside the SQLite read model
(`<db>.tantivy/`). It stores no text: snippets re-project the event from its
source file (`piwatchd.store.source_events`). SQLite's transaction stays the commit
point; this index is derived and re-fed after a crash (`text_debt`).

User text never reaches Tantivy's query parser: queries are built from term,
phrase and boolean queries, with the query's words analyzed by the same
analyzer as the indexed text (Unicode words, lower-cased, diacritics folded).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Callable, Collection, Hashable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import orjson
import tantivy
from tantivy import Occur, Query, SchemaBuilder

from ..query import SearchFilters, Term
from .disk_commit import DiskCommit
from .doc import FACETS, KEY_FIELDS, Clause, TextDoc, doc_json, event_fields, field_term, filter_clauses
from .forms import analyzer, doc_forms
from .memo import MEMO_MAX, lasts
from .overlay import Overlay, View, masked

__all__ = [
    "FORMS_FIELD",
    "Scored",
    "TantivyText",
    "text_dir",
    "db_file_of",
    "TEXT_LAYOUT",
    "within_docs",
]

# Bumped when the document layout changes: a mismatch rebuilds the text index.
TEXT_LAYOUT = 6
_ANALYZER = "folded"
# Word forms: the text's words English-stemmed, plus the case parts of its
# camelCase words; searched by the forms tier only (no positions: no phrase
# ever runs on it, and positions would double its size).
_FORMS = FORMS_FIELD = "forms"
# Meta words (tool name, error, custom type) count less than the text itself, as in FTS5.
META_WEIGHT = 0.25
T = TypeVar("T")
# A document found: (score, fragment rowid, event rowid, text length, event
# time in ms or None); the length and time break score ties as SQLite's order does.
Scored = tuple[float, int, int, int, int | None]
WRITER_HEAP = 32 * 1024 * 1024  # a larger heap measured no faster here and cost ~30 MB more RSS
# Writer operations queued while a disk commit runs in its own thread; past
# this many, the next one waits for the commit (memory stays bounded).
QUEUE_MAX = 20_000


def text_dir(db_path: str | Path) -> Path:
    return Path(str(db_path) + ".tantivy")


def db_file_of(conn: sqlite3.Connection) -> Path:
    return Path(_db_file_name(conn))


def _db_file_name(conn: sqlite3.Connection) -> str:
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main" and file:
            return str(file)
    raise ValueError("the text index needs an index file, not an in-memory database")


def _schema() -> tantivy.Schema:
    b = SchemaBuilder()
    # `text` holds the head and, for oversized fragments, the tail as two
    # values: Tantivy never matches a phrase across two values of a field,
    # so no phrase spans the omitted middle.
    for name in ("text", "meta"):
        b.add_text_field(name, stored=False, tokenizer_name=_ANALYZER, index_option="position")
    b.add_text_field(_FORMS, stored=False, tokenizer_name=_FORMS, index_option="freq")
    for name in (*KEY_FIELDS, FACETS):
        b.add_text_field(name, stored=False, tokenizer_name="raw", index_option="basic")
    b.add_unsigned_field("frag", stored=False, indexed=False, fast=True)
    b.add_unsigned_field("event_n", stored=False, indexed=False, fast=True)
    # Characters indexed: breaks ties between equal scores (Tantivy keeps
    # document lengths as one byte, so texts of similar length score alike;
    # the shorter one wins, as in bm25 with exact lengths).
    b.add_unsigned_field("len", stored=False, indexed=False, fast=True)
    b.add_integer_field("ordinal", stored=False, indexed=True, fast=True)
    b.add_integer_field("ts", stored=False, indexed=True, fast=True)
    return b.build()


class TantivyText:
    """One open text index. Writable in the ingest thread only (one writer per
    directory, guarded by Tantivy's lock file); readable from any thread."""

    def __init__(self, path: str | Path, *, writable: bool) -> None:
        self.path = Path(path)
        self.schema = _schema()
        self.analyzer = analyzer()
        self.forms_analyzer = analyzer(stem=True)
        if writable:
            self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        elif not (self.path / "meta.json").exists():
            raise FileNotFoundError(f"no text index at {self.path}: run `piwatch index --once` or start piwatchd")
        self.index = tantivy.Index(self.schema, path=str(self.path), reuse=True)
        self._register(self.index)
        self._writer = self.index.writer(WRITER_HEAP, 1) if writable else None
        # The writer's newest changes, searchable before the disk commit (`overlay`).
        self.overlay = Overlay(self.schema, self._register) if writable else None
        self._dirty = False
        # A reload (commit or refresh) starts a new searcher generation.
        self.generation = 0
        self._meta_seen: tuple[int, ...] | None = None  # meta.json when last reloaded (`refresh`)
        # Documents added or deleted by this process's disk commits so far,
        # and the reloads of changes of unknown size (`refresh`): how old a
        # remembered value is (`memo`).
        self.churn = 0
        self._epoch = 0
        self._added = 0  # documents added since the last disk commit
        self._running: DiskCommit | None = None  # a disk commit in its own thread
        self._queued: list[tuple[str, str, str]] = []  # writer operations made meanwhile, in order
        # Per-word analysis (forms, document frequencies, derivations,
        # repairs): key -> (value, churn, epoch) when it was computed.
        self._memo: dict[tuple[Hashable, ...], tuple[Any, int, int]] = {}

    def _register(self, index: tantivy.Index) -> None:
        """Analyzers are registered each time an index is opened, before use."""
        index.register_tokenizer(_ANALYZER, self.analyzer)
        index.register_tokenizer(_FORMS, self.forms_analyzer)

    # -- writing (ingest thread) ---------------------------------------------

    def add(self, docs: Iterable[TextDoc]) -> int:
        assert self._writer is not None
        n = 0
        shared: dict[int, dict[str, Any]] = {}
        for doc in docs:
            base = shared.get(doc.facts.event_rowid)
            if base is None:
                base = shared[doc.facts.event_rowid] = event_fields(doc.facts)
            d = doc_json(doc, base)
            # Computed by the ingest pipeline for new events; here for re-fed ones.
            forms = doc.forms if doc.forms is not None else doc_forms(v for v in (doc.body, doc.tail, doc.meta) if v)
            if forms:
                d[_FORMS] = forms
            line = orjson.dumps(d).decode()
            self._write("add", "", line)
            if self.overlay is not None:
                self.overlay.add(line, doc.facts.session_id, doc.facts.event_rowid)
            n += 1
        self._dirty = self._dirty or n > 0
        self._added += n
        return n

    def delete_session(self, session_id: str) -> None:
        assert self._writer is not None
        # A raw text field: `delete_documents_by_term` on a u64 field deletes nothing.
        self._write("delete", "session", session_id)
        self._dirty = True
        if self.overlay is not None:
            self.overlay.delete_session(session_id)

    def delete_events(self, event_rowids: Iterable[int]) -> None:
        assert self._writer is not None
        keys = [str(rowid) for rowid in event_rowids]
        for key in keys:
            self._write("delete", "event", key)
            self._dirty = True
        if self.overlay is not None:
            self.overlay.delete_events(keys)

    def _write(self, op: str, field: str, value: str) -> None:
        """One writer operation; queued while a disk commit runs (`start_commit`)."""
        running = self._running
        if running is not None and not running.done.is_set():
            if len(self._queued) < QUEUE_MAX:
                self._queued.append((op, field, value))
                return
            running.done.wait()
        self._drain()
        self._apply(op, field, value)

    def _apply(self, op: str, field: str, value: str) -> None:
        assert self._writer is not None
        if op == "add":
            self._writer.add_json(value)
        else:
            self._writer.delete_documents_by_term(field, value)

    def _drain(self) -> None:
        """The operations queued during a disk commit that has ended, in order."""
        queued, self._queued = self._queued, []
        for op in queued:
            self._apply(*op)

    @property
    def dirty(self) -> bool:
        return self._dirty

    @property
    def committing(self) -> bool:
        """A disk commit runs (or ended, not yet finished by `finish_commit`)."""
        return self._running is not None

    def start_commit(self) -> None:
        """Begin the disk commit of every change so far in its own thread; the
        overlay keeps mirroring (and showing) what changes meanwhile, and the
        writer's operations queue until `finish_commit`."""
        assert self._writer is not None and self._running is None and self.overlay is not None
        self.overlay.seal()
        self._running = DiskCommit(self._writer, self.index, self._added)
        self._dirty, self._added = False, 0

    def finish_commit(self, *, wait: bool) -> bool:
        """Account for the disk commit once it has ended (at once, or after
        waiting for it when `wait`); False when none ended. A failed commit
        is raised here, its changes owed again."""
        running = self._running
        if running is None or not (running.done.is_set() or wait):
            return False
        running.done.wait()
        self._running = None
        self._drain()
        assert self.overlay is not None
        if running.error is not None:
            self._dirty, self._added = True, self._added + running.added
            self.overlay.unseal()
            raise running.error
        self._committed(running.before, running.added, running.after)
        self.overlay.sealed_committed()
        return True

    def _committed(self, before: int, added: int, after: int) -> None:
        # Deleted: what the commit's additions do not account for.
        self.churn += added + max(0, before + added - after)  # after the reload: `memo` reads it first
        self.generation += 1

    def commit(self, *, idle: bool = True) -> None:
        """Make every add and delete so far durable and visible to new
        searchers, here and now; the overlay empties (and mirrors again when `idle`)."""
        assert self._writer is not None
        self.finish_commit(wait=True)
        if self._dirty:
            before = self.index.searcher().num_docs
            self._writer.commit()
            self._dirty = False
            self.index.reload()
            self._committed(before, self._added, self.index.searcher().num_docs)
            self._added = 0
        if self.overlay is not None:
            self.overlay.disk_committed(idle=idle)

    def publish(self) -> bool:
        """Make the changes so far searchable without the disk commit (the
        overlay); False when the overlay does not hold them all."""
        return self.overlay is not None and self.overlay.publish()

    def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):  # closing must not fail shutdown
                self.finish_commit(wait=True)
                self._writer.rollback()
            self._writer = None

    # -- reading -------------------------------------------------------------

    def refresh(self) -> None:
        """See commits made by another process (the CLI's read-only use). A
        commit replaces meta.json (a new file): unchanged, there is nothing to
        reload, and a reload costs ~0.5 ms and can wait 100 ms for the meta
        lock that the writer's file garbage collection holds right after a commit."""
        try:
            st = os.stat(self.path / "meta.json")
            seen: tuple[int, ...] | None = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
        except OSError:
            seen = None  # let the reload say what is wrong
        if seen is not None and seen == self._meta_seen:
            return
        self.index.reload()
        self._meta_seen = seen
        self._epoch += 1
        self.generation += 1

    def memo(self, key: tuple[Hashable, ...], compute: Callable[[], T]) -> T:
        """`compute()`, remembered while the disk commits since cannot have
        changed it meaningfully (`_lasts`, by the kind `key[0]` names; at
        most MEMO_MAX keys): a query's words are analyzed once, not per tier,
        count and label search, nor again by the next keystroke's query,
        nor after every commit of a live session (once a second)."""
        # Read before computing: a commit meanwhile makes the value look older, never newer.
        churn, epoch = self.churn, self._epoch
        memo = self._memo
        entry = memo.get(key)
        if entry is not None and lasts(key[0], entry[0], churn - entry[1], epoch != entry[2]):
            return entry[0]  # type: ignore[no-any-return]
        value = compute()
        if len(memo) >= MEMO_MAX:
            memo = self._memo = {}
        memo[key] = (value, churn, epoch)
        return value

    def tokens(self, text: str) -> list[str]:
        return self.analyzer.analyze(text)

    def term_query(self, term: Term, within: Query | None = None) -> Query:
        """One query word (or phrase) as written, in text or meta; only in
        the documents of `within` (`events_query`) when given."""
        words = self.tokens(term.text)
        if not words:
            return Query.empty_query()
        per_field = []
        for name in ("text", "meta"):
            if len(words) == 1:
                q = Query.term_query(self.schema, name, words[0])
            else:
                q = Query.phrase_query(self.schema, name, list[str | tuple[int, str]](words))
            q = within_docs(q, within)
            if name == "meta":
                q = Query.boost_query(q, META_WEIGHT)
            per_field.append((Occur.Should, q))
        return Query.boolean_query(per_field)

    def _clause_query(self, clause: Clause) -> Query:
        parts: list[tuple[Occur, Query]] = []
        if clause.terms:
            alts = [Query.term_query(self.schema, *field_term(f, v)) for f, v in clause.terms]
            parts.append(
                (Occur.Must, alts[0] if len(alts) == 1 else Query.boolean_query([(Occur.Should, q) for q in alts]))
            )
        if clause.range is not None:
            field, low, high = clause.range
            parts.append(
                (
                    Occur.Must,
                    Query.range_query(
                        self.schema,
                        field,
                        tantivy.FieldType.Integer,
                        low,
                        high,
                        include_upper=high is None,
                    ),
                )
            )
        return parts[0][1] if len(parts) == 1 else Query.boolean_query(parts)

    def query(self, terms: list[Term], filters: SearchFilters, events: Iterable[int] = ()) -> Query:
        """Every term must match (in text or meta); every clause admits."""
        return self.combine([self.term_query(t) for t in terms], filters, events)

    def combine(
        self,
        words: list[Query],
        filters: SearchFilters,
        events: Iterable[int] = (),
        *,
        exclude: Iterable[int] = (),
        min_match: int | None = None,
    ) -> Query:
        """Every word query must match (at least `min_match` of them when
        given), every filter clause admits, only `events` (when given) and
        none of `exclude`."""
        if min_match is not None and min_match > len(words):
            return Query.empty_query()
        if min_match is None or min_match == len(words):
            # All of them: a conjunction, same matches and scores (a sum
            # either way), but it seeks from its rarest word where a
            # minimum-match disjunction walks every word's postings.
            parts: list[tuple[Occur, Query]] = [(Occur.Must, w) for w in words]
        else:
            some = Query.boolean_query([(Occur.Should, w) for w in words], minimum_number_should_match=min_match)
            parts = [(Occur.Must, some)]
        for clause in filter_clauses(filters):
            if clause.op == "nothing":
                return Query.empty_query()
            occur = Occur.Must if clause.op == "must" else Occur.MustNot
            # Filters admit; they must not change the score.
            q = self._clause_query(clause)
            parts.append((occur, Query.const_score_query(q, 0.0) if occur == Occur.Must else q))
        only = self.events_query(events)
        if only is not None:
            parts.append((Occur.Must, only))
        excluded = [str(e) for e in exclude]
        if excluded:
            parts.append((Occur.MustNot, Query.term_set_query(self.schema, "event", excluded)))
        if len(parts) == 1:
            return parts[0][1]  # a nested boolean costs ~30% on a common word
        return Query.boolean_query(parts)

    def events_query(self, events: Iterable[int]) -> Query | None:
        """The documents of `events` (scoring 0), for `within_docs`; None for none."""
        keys = [str(e) for e in events]
        if not keys:
            return None
        if len(keys) <= EVENT_TERMS_MAX:
            q = Query.boolean_query([(Occur.Should, Query.term_query(self.schema, "event", k)) for k in keys])
        else:
            q = Query.term_set_query(self.schema, "event", keys)
        return Query.const_score_query(q, 0.0)

    def _view(self) -> View:
        return self.overlay.view if self.overlay is not None else _NO_OVERLAY

    def top(self, query: Query, k: int, within: Collection[int] = (), *, times: bool = False) -> list[Scored]:
        """The k best documents (`Scored`; the event times only with `times`,
        else None): of the on-disk index and the overlay, one per fragment.
        `within`: the events `query` is limited to, if it is; when the overlay
        holds all of them (a follow's new events), the disk is not searched."""
        view = self._view()  # one snapshot: the overlay may be swapped meanwhile
        if within and view.ram is not None and view.events.issuperset(within):
            return _top(view.ram, query, k, times)
        disk = _top(self.index.searcher(), masked(self.schema, query, view), k, times)
        if view.ram is None:
            return disk
        ram = _top(view.ram, query, k, times)
        if not ram:
            return disk
        # A fragment in both (the disk committed after this snapshot was taken): the overlay's.
        fresh = {hit[1] for hit in ram}
        merged = ram + [hit for hit in disk if hit[1] not in fresh]
        merged.sort(key=lambda hit: -hit[0])
        return merged[:k]

    def count(self, query: Query | None = None) -> int:
        """Documents in the index (disk and overlay), or those matching
        `query`: every match visited, so its cost grows with the matches."""
        view = self._view()
        if query is None:
            return self.index.searcher().num_docs + (view.ram.num_docs if view.ram is not None else 0)
        ram = _count(view.ram, query) if view.ram is not None else 0
        return _count(self.index.searcher(), masked(self.schema, query, view)) + ram


_NO_OVERLAY = View()


# Up to this many events are matched as a union of their terms, more as a
# term set (a bitset built per segment): the union is cheaper for a page.
EVENT_TERMS_MAX = 64


def within_docs(leaf: Query, within: Query | None) -> Query:
    """`leaf` only in the documents of `within`. A search limited to a few
    events (a page's counts and labels) puts the limit on every leaf term:
    a union of word forms intersected with a few documents seeks through
    dense posting windows (measured 3-4x the cost on 1 GB), while each term
    intersected first stays a few documents."""
    if within is None:
        return leaf
    return Query.boolean_query([(Occur.Must, leaf), (Occur.Must, within)])


def _count(searcher: tantivy.Searcher, query: Query) -> int:
    result = searcher.search(query, limit=1, count=True)
    return int(result.count or 0)  # type: ignore[attr-defined]  # tantivy-py's stub omits `count`


def _top(searcher: tantivy.Searcher, query: Query, k: int, times: bool) -> list[Scored]:
    hits = searcher.search(query, limit=k, count=False).hits
    if not hits:
        return []
    addrs = [a for _, a in hits]
    # Every document has frag, event_n and len (ts is None where the event has no time).
    # A column read costs ~70 us however few the documents: the times only when asked.
    columns = [searcher.fast_field_values(name, addrs) for name in ("frag", "event_n", "len")]
    stamps = searcher.fast_field_values("ts", addrs) if times else [None] * len(addrs)
    return list(zip([score for score, _ in hits], *columns, stamps, strict=True))


def remove_text_dir(path: Path) -> None:
    """Delete a text index directory (a layout change or a corrupt index)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
