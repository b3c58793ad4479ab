"""Where the pure pipeline (`chunks.chunk_rows`) runs: in the ingest workers
when there are any, else in the writer's process; the writer only inserts
the rows it yields.

With workers, a file's chunks go one at a time (each needs the parser state
the one before ended in): chunk k+1 is handed to a worker as soon as chunk
k's rows are back, so the worker computes while the writer inserts. A file
this small (most sessions) is one chunk, so the files queued next are
started ahead (`ahead`): their first chunk is read and sent before their
turn, and used only if the writer, reading the same range when their turn
comes, finds the same bytes (the rows are a pure function of them).

Without workers the same function runs on a helper thread (`prefetch`) one
chunk ahead of the writer, as before. A worker that fails or dies costs
only its speed-up: the writer computes that chunk itself (and so raises, in
its own process, whatever made the file unreadable).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from functools import cache
from typing import Any

from .. import workers
from ..model.extractors import NO_EXTRACTORS, Registry
from ..model.redact import BUILTIN_RULES, Rules
from ..source.parser import ParserState
from ..source.reader import Overlong, open_source, read_chunks
from .chunks import PIPELINE_CHUNK, Forms, Rows, chunk_rows, pack_rows, skipped_rows, unpack_rows
from .prefetch import prefetch

__all__ = ["Pipeline", "worker_rows"]

_RulesSpec = tuple[bool, tuple[tuple[str, str], ...], tuple[str, ...]]
# The bytes read ahead for a file and the worker computing their rows.
_Ahead = tuple[bytes, "Future[bytes | None]"]


def _spec(rules: Rules) -> _RulesSpec:
    """The rules as plain values (a worker rebuilds them once, `_rules_of`)."""
    return (rules.builtin, tuple(rules.extra), tuple(sorted(rules.allow)))


@cache
def _rules_of(spec: _RulesSpec) -> Rules:
    builtin, extra, allow = spec
    return Rules(BUILTIN_RULES if builtin else (), extra=extra, allow=frozenset(allow))


def worker_rows(
    offset: int, data: bytes, state: dict[str, Any], spec: _RulesSpec, forms: Forms | None, extractors: Registry
) -> bytes | None:
    """In an ingest worker: a chunk's rows as msgpack; None when the chunk
    fails (the writer computes it again, so the error is raised where the
    file's errors are contained)."""
    try:
        return pack_rows(chunk_rows(offset, data, ParserState.from_json(state), _rules_of(spec), forms, extractors))
    except Exception:  # noqa: BLE001 - reported by the writer's own run of the same chunk
        return None


class Pipeline:
    def __init__(self, rules: Rules, forms: Forms | None, extractors: Registry = NO_EXTRACTORS) -> None:
        self.rules = rules
        self.extractors = extractors
        self.forms = forms  # the text engine's `forms` values, when it has that field
        self._spec = _spec(rules)
        self._ahead: dict[str, _Ahead] = {}

    def rows(
        self, fd: int, path: str, start: int, size: int, state: ParserState
    ) -> Iterator[tuple[bytes | None, Rows]]:
        """Each chunk of [start, size)'s complete lines: its bytes (None for an
        over-long line's range) and its rows."""
        ahead = self._ahead.pop(path, None)
        reads = read_chunks(fd, start, size, PIPELINE_CHUNK, overlong_at=state.overlong_at)
        if workers.pool() is not None:
            return self._in_workers(reads, state, ahead if start == 0 and state == ParserState() else None)
        local = self._here(reads, state)
        # Worth a helper thread only when there is a next chunk to parse.
        return prefetch(local) if size - start > PIPELINE_CHUNK else local

    def _here(
        self, reads: Iterable[tuple[int, bytes] | Overlong], state: ParserState
    ) -> Iterator[tuple[bytes | None, Rows]]:
        for item in reads:
            if isinstance(item, Overlong):
                rows = skipped_rows(item, state)
                yield None, rows
            else:
                rows = chunk_rows(item[0], item[1], state, self.rules, self.forms, self.extractors)
                yield item[1], rows
            state = rows.state

    def _in_workers(
        self, reads: Iterable[tuple[int, bytes] | Overlong], state: ParserState, ahead: _Ahead | None
    ) -> Iterator[tuple[bytes | None, Rows]]:
        sent: tuple[int, bytes, Future[bytes | None] | None] | None = None
        for item in reads:
            if isinstance(item, Overlong):
                if sent is not None:
                    rows = self._taken(sent, state)
                    yield sent[1], rows
                    state, sent = rows.state, None
                rows = skipped_rows(item, state)
                yield None, rows
                state = rows.state
                continue
            offset, data = item
            if sent is None:
                future = ahead[1] if ahead is not None and ahead[0] == data else self._send(offset, data, state)
                sent = (offset, data, future)
                continue
            rows = self._taken(sent, state)
            state = rows.state
            # The next chunk's work starts before this chunk's rows are inserted.
            following = (offset, data, self._send(offset, data, state))
            yield sent[1], rows
            sent = following
        if sent is not None:
            yield sent[1], self._taken(sent, state)

    def _send(self, offset: int, data: bytes, state: ParserState) -> Future[bytes | None] | None:
        return workers.submit(worker_rows, offset, data, state.to_json(), self._spec, self.forms, self.extractors)

    def _taken(self, sent: tuple[int, bytes, Future[bytes | None] | None], state: ParserState) -> Rows:
        """A chunk's rows from its worker, else computed here."""
        packed = workers.result(sent[2])
        if packed is None:
            return chunk_rows(sent[0], sent[1], state, self.rules, self.forms, self.extractors)
        return unpack_rows(packed)

    def ahead(self, paths: list[str]) -> None:
        """The files the writer takes now and next (those not yet indexed at
        all), in order: their first chunk goes to the workers now. What was
        sent ahead for other files is dropped."""
        for path in [p for p in self._ahead if p not in paths]:
            del self._ahead[path]
        if workers.pool() is None:
            return
        for path in paths:
            if path not in self._ahead:
                data = _first_chunk(path)
                future = self._send(0, data, ParserState()) if data else None
                if future is not None:
                    self._ahead[path] = (data, future)


def _first_chunk(path: str) -> bytes:
    """The first chunk the writer will read of `path` (b'' when it cannot)."""
    try:
        fd = open_source(path)
    except OSError:
        return b""
    try:
        first = next(read_chunks(fd, 0, os.fstat(fd).st_size, PIPELINE_CHUNK), None)
    except OSError:
        return b""
    finally:
        os.close(fd)
    return first[1] if isinstance(first, tuple) else b""
