"""Complete-line splitting and lenient JSON decoding (pure).

Pi writes `JSON.stringify(entry) + "\\n"` with no fsync, so the last line of a
file can be partial while Pi is writing, or torn forever after a crash. Only
newline-terminated lines are ever decoded; the unterminated remainder is left
for the next read. Bad bytes never raise: each problem becomes a `Diagnostic`
with its byte offset, and the line is repaired when its meaning is clear
(invalid UTF-8, a lone surrogate from JavaScript's UTF-16 truncation) or
skipped when it is not JSON at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ..model.events import Diagnostic

__all__ = ["DecodedLine", "LineCutter", "Overlong", "RawLine", "decode_line", "split_complete_lines"]

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class RawLine:
    offset: int  # absolute byte offset of the first byte of the line
    data: bytes  # without the trailing newline

    @property
    def length(self) -> int:
        """Bytes in the source including the newline."""
        return len(self.data) + 1


def split_complete_lines(buffer: bytes, base_offset: int) -> tuple[list[RawLine], int]:
    """Split `buffer` (read from `base_offset`) into newline-terminated lines.

    Returns the lines and the absolute offset just past the last newline: the
    next read starts there. Blank lines are dropped (Pi skips them too) but
    still consumed.
    """
    lines: list[RawLine] = []
    start = 0
    end = buffer.rfind(b"\n")
    if end < 0:
        return lines, base_offset
    view = buffer[: end + 1]
    for chunk in view.split(b"\n")[:-1]:
        if chunk.strip():
            lines.append(RawLine(base_offset + start, chunk.rstrip(b"\r") if chunk.endswith(b"\r") else chunk))
        start += len(chunk) + 1
    return lines, base_offset + end + 1


@dataclass(frozen=True, slots=True)
class Overlong:
    """Bytes [start, end) of a line longer than the line cap, read past without being buffered.

    `line_at` is where that line begins; `complete` once its newline has been read. A line not
    complete when the read stops is resumed from `end` by the next read (`overlong_at`).
    """

    line_at: int
    start: int
    end: int
    complete: bool


class LineCutter:
    """Cuts consecutive chunks of a file into newline-ending pieces and
    `Overlong` ranges (pure: the reader does the I/O).

    Pending bytes are kept as a list of pieces and joined once per piece
    yielded, so a long line costs linear copying, not a copy per chunk; a line
    past `max_line` is dropped and skipped to its newline, so memory stays
    bounded by `max_line` plus a chunk. Chunks must not exceed `max_line`.
    """

    def __init__(self, start: int, max_line: int, overlong_at: int | None = None) -> None:
        self.max_line = max_line
        self.pieces: list[bytes] = []
        self.pending = 0  # bytes in pieces
        self.line_at = start if overlong_at is None else overlong_at  # where the pending or skipped line begins
        self.skipping = overlong_at is not None

    def feed(self, at: int, data: bytes) -> Iterator[tuple[int, bytes] | Overlong]:
        """The pieces and ranges that the chunk `data`, read at offset `at`, completes."""
        if self.skipping:
            newline = data.find(b"\n")
            if newline < 0:
                yield Overlong(self.line_at, at, at + len(data), False)
                return
            yield Overlong(self.line_at, at, at + newline + 1, True)
            self.skipping = False
            data, at = data[newline + 1 :], at + newline + 1
            self.line_at = at
        yield from self._cut(at, data)

    def _cut(self, at: int, data: bytes) -> Iterator[tuple[int, bytes] | Overlong]:
        first = data.find(b"\n")
        if first < 0:
            self._keep(data)
            if self.pending > self.max_line:
                yield Overlong(self.line_at, self.line_at, at + len(data), False)
                self.pieces, self.pending, self.skipping = [], 0, True
            return
        if self.pending + first > self.max_line:
            yield Overlong(self.line_at, self.line_at, at + first + 1, True)
            self.pieces, self.pending = [], 0
            data, at = data[first + 1 :], at + first + 1
            self.line_at = at
        cut = data.rfind(b"\n")
        if cut >= 0:
            yield self.line_at, b"".join([*self.pieces, data[: cut + 1]])
            self.pieces, self.pending = [], 0
            data, at = data[cut + 1 :], at + cut + 1
            self.line_at = at
        self._keep(data)

    def _keep(self, data: bytes) -> None:
        if data:
            self.pieces.append(data)
            self.pending += len(data)


@dataclass(frozen=True, slots=True)
class DecodedLine:
    value: Any | None  # None when the line could not be decoded at all
    diagnostics: tuple[Diagnostic, ...]
    # Bytes of a torn record skipped before `value` (see `_salvage_torn`).
    skipped: int = 0


# Pi serializes every entry with `type` as its first key.
_RECORD_START = b'{"type"'
_MAX_SALVAGE_TRIES = 32


def _salvage_torn(line: RawLine) -> DecodedLine | None:
    """A writer that died mid-line leaves a partial record with no newline; the
    next append is then glued to it. Keep the complete record that follows the
    torn bytes (the last line's tail that parses on its own), skip the rest."""
    data = line.data
    pos = data.find(_RECORD_START, 1)
    tries = 0
    while pos > 0 and tries < _MAX_SALVAGE_TRIES:
        tries += 1
        try:
            value = orjson.loads(data[pos:])
        except orjson.JSONDecodeError:
            pos = data.find(_RECORD_START, pos + 1)
            continue
        if not isinstance(value, dict):
            return None
        return DecodedLine(
            value,
            (
                Diagnostic(
                    "torn-line", f"{pos} bytes of a torn record skipped; the record after them kept", line.offset
                ),
            ),
            skipped=pos,
        )
    return None


def _strip_surrogates(value: Any) -> tuple[Any, bool]:
    """Replace lone surrogates (which cannot be encoded as UTF-8) with U+FFFD."""
    if isinstance(value, str):
        if _LONE_SURROGATE.search(value):
            return _LONE_SURROGATE.sub("\ufffd", value), True
        return value, False
    if isinstance(value, list):
        changed = False
        out = []
        for item in value:
            fixed, c = _strip_surrogates(item)
            changed |= c
            out.append(fixed)
        return (out, True) if changed else (value, False)
    if isinstance(value, dict):
        changed = False
        out_d = {}
        for key, item in value.items():
            fixed_key, ck = _strip_surrogates(key)
            fixed, c = _strip_surrogates(item)
            changed |= c or ck
            out_d[fixed_key] = fixed
        return (out_d, True) if changed else (value, False)
    return value, False


def decode_line(line: RawLine) -> DecodedLine:
    """Decode one JSONL line, repairing what can be repaired safely."""
    try:
        return DecodedLine(orjson.loads(line.data), ())
    except orjson.JSONDecodeError:
        pass
    salvaged = _salvage_torn(line)
    if salvaged is not None:
        return salvaged
    diagnostics: list[Diagnostic] = []
    try:
        text = line.data.decode("utf-8")
    except UnicodeDecodeError:
        text = line.data.decode("utf-8", errors="replace")
        diagnostics.append(Diagnostic("invalid-utf8", "invalid UTF-8 replaced with U+FFFD", line.offset, repaired=True))
    try:
        # The stdlib accepts `\udXXX` escapes that orjson (rightly) refuses.
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return DecodedLine(
            None,
            tuple(diagnostics) + (Diagnostic("malformed-json", f"line is not valid JSON: {exc}", line.offset),),
        )
    value, had_surrogates = _strip_surrogates(value)
    if had_surrogates:
        diagnostics.append(
            Diagnostic("lone-surrogate", "lone UTF-16 surrogate replaced with U+FFFD", line.offset, repaired=True)
        )
    return DecodedLine(value, tuple(diagnostics))
