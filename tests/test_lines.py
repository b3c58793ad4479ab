"""Complete-line splitting and lenient decoding (pure)."""

from __future__ import annotations

import json

from hypothesis import given, strategies as st

from piwatchd.source.lines import RawLine, decode_line, split_complete_lines


@given(
    st.lists(st.binary(max_size=40).filter(lambda b: b"\n" not in b), max_size=20),
    st.binary(max_size=30),
    st.integers(0, 10**9),
)
def test_split_keeps_only_complete_lines_and_offsets(lines, partial, base):
    partial = partial.replace(b"\n", b"")
    buf = b"".join(line + b"\n" for line in lines) + partial
    out, end = split_complete_lines(buf, base)
    assert end == base + len(buf) - len(partial)
    # Every non-blank complete line comes back, at its exact offset.
    expected = []
    pos = base
    for line in lines:
        if line.strip():
            expected.append((pos, line.rstrip(b"\r") if line.endswith(b"\r") else line))
        pos += len(line) + 1
    assert [(r.offset, r.data) for r in out] == expected


def test_partial_line_is_not_consumed():
    out, end = split_complete_lines(b'{"a":1}\n{"b":', 100)
    assert [r.data for r in out] == [b'{"a":1}']
    assert end == 108


def test_lone_surrogate_is_repaired_and_reported():
    raw = RawLine(7, b'{"t":"emoji cut \\ud83d here"}')
    d = decode_line(raw)
    assert d.value == {"t": "emoji cut \ufffd here"}
    assert [x.code for x in d.diagnostics] == ["lone-surrogate"]
    assert d.diagnostics[0].byte_offset == 7 and d.diagnostics[0].repaired


def test_invalid_utf8_is_repaired_and_reported():
    d = decode_line(RawLine(0, b'{"t":"caf\xe9"}'))
    assert d.value == {"t": "caf\ufffd"}
    assert d.diagnostics[0].code == "invalid-utf8"


def test_malformed_line_is_reported_not_raised():
    d = decode_line(RawLine(42, b'{"type":"mess{"typ'))
    assert d.value is None
    assert d.diagnostics[0].code == "malformed-json" and d.diagnostics[0].byte_offset == 42


def test_torn_record_is_skipped_not_glued_to_the_next():
    # A writer died mid-line; the next append landed on the same line.
    d = decode_line(RawLine(42, b'{"type":"mess{"type":"message","id":"b"}'))
    assert d.value == {"type": "message", "id": "b"}
    assert d.skipped == len(b'{"type":"mess')
    assert [x.code for x in d.diagnostics] == ["torn-line"] and d.diagnostics[0].byte_offset == 42


@given(st.binary(max_size=200))
def test_decode_never_raises(data):
    d = decode_line(RawLine(0, data))
    if d.value is not None:
        json.dumps(d.value)  # always encodable: no lone surrogates survive
