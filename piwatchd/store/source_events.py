"""Indexed events re-projected from their source lines.

With the Tantivy engine the read model keeps no fragment text: snippets and
re-fed documents come from the source file through each event's locator
(byte offset, length, fingerprint), projected by the same table that
indexing uses (`project_entry`; a search page's evidence fragments by
`project_evidence`, redacted only where their snippets cut them). A line
whose bytes no longer match its fingerprint is skipped: the file was
rewritten, and its rebuild re-feeds the session.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Generic, NamedTuple, TypeVar

from ..model.events import Entry, Event
from ..model.project import Evidence, project_entry, project_evidence
from ..model.redact import Rules
from ..source.lines import RawLine, decode_line
from ..source.parser import line_fingerprint
from ..source.reader import open_source
from .extractors import index_extractors
from .ids import IN_IDS, id_list
from .redaction import index_rules

__all__ = ["evidence_rows", "line_entry", "project_rows", "verified_line"]


def verified_line(fd: int, offset: int, length: int, fingerprint: str) -> bytes | None:
    """The line at [offset, offset+length) without its newline, or None when
    the bytes there are not the indexed line any more. A read error raises."""
    data = os.pread(fd, length, offset)
    line = data[:-1] if data.endswith(b"\n") else data
    if line.endswith(b"\r"):
        line = line[:-1]
    if len(data) != length or line_fingerprint(line) != fingerprint:
        return None
    return line


def line_entry(indexed: Entry, line: bytes) -> Entry:
    """The indexed entry (its columns, no data) rebuilt from its verified source
    line (`verified_line`), ready for `project_entry`: the one re-projection, for
    snippets, re-feeds and `read`."""
    value = decode_line(RawLine(indexed.byte_offset, line)).value
    return replace(indexed, data=value if isinstance(value, dict) else {})


# Re-projecting a hit costs a read, a JSON parse and the projection; searches
# keep returning the same popular events, so the last few hundred stay here,
# keyed by the file's identity and state (any write to the file changes its
# size or mtime), the redaction rules and what was projected.
_CACHE_SIZE = 512
# Events vary from a few bytes to hundreds of fragments of 32K characters each:
# the cache is bounded by the characters it holds as well as by its count.
_CACHE_CHARS = 16 * 1024 * 1024
_cache: OrderedDict[tuple[Any, ...], tuple[Any, int]] = OrderedDict()
_cache_chars = 0
_cache_lock = threading.Lock()
T = TypeVar("T")


def _cached(key: tuple[Any, ...]) -> Any:
    with _cache_lock:
        item = _cache.get(key)
        if item is None:
            return None
        _cache.move_to_end(key)
        return item[0]


def _event_chars(event: Event) -> int:
    return sum(len(f.text) + len(f.tail or "") + len(f.meta) for f in event.fragments) + 256


def _evidence_chars(evidence: Evidence) -> int:
    f = evidence.unredacted
    return (len(f.text) + len(f.meta) if f is not None else 0) + 256


def _remember(key: tuple[Any, ...], value: Any, size: int) -> None:
    global _cache_chars
    if size > _CACHE_CHARS // 8:
        return  # one huge event would evict everything else
    with _cache_lock:
        old = _cache.pop(key, None)
        if old is not None:
            _cache_chars -= old[1]
        _cache[key] = (value, size)
        _cache_chars += size
        while len(_cache) > _CACHE_SIZE or _cache_chars > _CACHE_CHARS:
            _cache_chars -= _cache.popitem(last=False)[1][1]


class _Projection(NamedTuple, Generic[T]):
    """How one verified row is projected: what its cache key adds, the
    projection of its session id and entry, the characters the result holds."""

    key: tuple[Any, ...]
    project: Callable[[str, Entry], T]
    size: Callable[[T], int]


def project_rows(conn: sqlite3.Connection, event_rowids: list[int]) -> dict[int, Event]:
    """{event rowid: Event} for the rows whose source line still verifies."""
    extractors = index_extractors(conn)
    return _reprojected(
        conn,
        event_rowids,
        lambda _, rules: _Projection(
            (), lambda sid, entry: project_entry(sid, entry, rules, extractors=extractors), _event_chars
        ),
    )


def evidence_rows(conn: sqlite3.Connection, fragments: dict[int, str]) -> dict[int, Evidence]:
    """{event rowid: its `Evidence` for the fragment id given} for the rows
    whose source line still verifies: a search page's snippets, each
    redacted only where it is cut (`project_evidence`)."""
    extractors = index_extractors(conn)
    return _reprojected(
        conn,
        list(fragments),
        lambda rowid, rules: _Projection(
            ("evidence", fragments[rowid]),
            lambda _, entry: project_evidence(entry, fragments[rowid], rules, extractors),
            _evidence_chars,
        ),
    )


def _reprojected(
    conn: sqlite3.Connection, event_rowids: list[int], how: Callable[[int, Rules], _Projection[T]]
) -> dict[int, T]:
    """{event rowid: its projection by `how`} for the rows whose source line still verifies."""
    if not event_rowids:
        return {}
    by_path: dict[str, list[tuple[Any, ...]]] = {}
    for row in conn.execute(
        "SELECT e.event_rowid, s.session_id, e.entry_id, e.parent_id, e.type, e.ordinal, e.byte_offset, e.byte_len,"
        " e.fingerprint, e.id_recorded, src.path FROM events e JOIN sessions s ON s.session_key = e.session_key"
        " JOIN sources src ON src.source_id = s.source_id"
        f" WHERE e.event_rowid {IN_IDS}",
        (id_list(event_rowids),),
    ):
        by_path.setdefault(row[10], []).append(row)
    out: dict[int, T] = {}
    rules = index_rules(conn)  # the rules that redacted the indexed text
    extractors = index_extractors(conn)
    for path, rows in by_path.items():
        try:
            fd = open_source(path)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            # The cache is good for these bytes projected by these rules and this registry.
            state = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, rules.fingerprint, extractors.fingerprint)
            for row in sorted(rows, key=lambda r: r[6]):
                try:
                    value = _project_row(fd, row, state, how(row[0], rules))
                except OSError:
                    break  # the file cannot be read now: its rows get no text this time
                if value is not None:
                    out[row[0]] = value
        finally:
            os.close(fd)
    return out


def _project_row(fd: int, row: tuple[Any, ...], state: tuple[Any, ...], projection: _Projection[T]) -> T | None:
    _, sid, eid, parent, etype, ordinal, offset, length, fp, id_recorded, _ = row
    key = (*state, offset, length, fp, *projection.key)
    value: T | None = _cached(key)
    if value is not None:
        return value
    line = verified_line(fd, offset, length, fp)
    if line is None:
        return None
    indexed = Entry(eid, parent, etype, ordinal, offset, length, fp, {}, bool(id_recorded))
    value = projection.project(sid, line_entry(indexed, line))
    _remember(key, value, projection.size(value))
    return value
