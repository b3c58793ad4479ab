"""The tailer's pure decision (`classify`) and complete-line splitting.

The table names each case of the issue; the properties build checkpoints and
observations from real byte strings with the same hashing the reader uses, so
"any change before the checkpoint is detected" is tested on the real scheme.
"""

from __future__ import annotations

import json
import os
import tempfile

import pytest
from helpers.omp import title_slot
from hypothesis import assume, given, settings, strategies as st

from piwatchd.source.fingerprint import Window, checkpoint_digest, title_slot_len
from piwatchd.source.lines import RawLine, decode_line, split_complete_lines
from piwatchd.source.parser import slot_title
from piwatchd.source.reader import Overlong, read_chunks
from piwatchd.source.tailer import (
    FINGERPRINT_BYTES,
    Change,
    Checkpoint,
    Observation,
    classify,
)


def checkpoint_for(content: bytes, *, dev=1, ino=10, mtime=100) -> Checkpoint:
    """The checkpoint ingest would save after reading `content` (up to its last newline)."""
    consumed = content.rfind(b"\n") + 1
    window = Window()
    window.feed(content[:consumed])
    return Checkpoint(dev, ino, len(content), mtime, consumed, *window.hashes())


def observe_bytes(content: bytes, cp: Checkpoint | None, *, dev=1, ino=10, mtime=100) -> Observation:
    """What reader.observe reports for a file holding `content` (pure twin)."""
    prefix = tail = title = None
    slot = 0
    if cp is not None and (dev, ino) == (cp.dev, cp.ino) and len(content) >= cp.consumed:
        slot = title_slot_len(content[: cp.prefix_len])
        title = slot_title(content[:slot])
        prefix = checkpoint_digest(content[: cp.prefix_len], 0, slot) if len(content) >= cp.prefix_len else None
        start = cp.consumed - cp.tail_len
        tail = checkpoint_digest(content[start : cp.consumed], start, slot)
    return Observation(True, None, dev, ino, len(content), mtime, prefix, tail, titled=slot > 0, title=title)


OMP = title_slot("first") + b'{"type":"session","id":"s"}\n{"type":"message","id":"a"}\n'
OMP_CP = checkpoint_for(OMP)
RETITLED = title_slot("second") + OMP[256:]


OLD = b'{"type":"session","id":"s"}\n{"type":"message","id":"a"}\n'
CP = checkpoint_for(OLD)

CASES = [
    # (name, checkpoint, observation, expected)
    ("new file", None, observe_bytes(OLD, None), Change.NEW),
    ("unchanged", CP, observe_bytes(OLD, CP), Change.UNCHANGED),
    ("appended one line", CP, observe_bytes(OLD + b'{"id":"b"}\n', CP, mtime=101), Change.APPENDED),
    ("appended one byte (partial line)", CP, observe_bytes(OLD + b"{", CP, mtime=101), Change.APPENDED),
    ("truncated to empty", CP, observe_bytes(b"", CP, mtime=101), Change.REWRITTEN),
    ("truncated below checkpoint", CP, observe_bytes(OLD[:20], CP, mtime=101), Change.REWRITTEN),
    (
        "rewritten same size (v1->v3 style)",
        CP,
        observe_bytes(OLD.replace(b'"a"', b'"z"'), CP, mtime=101),
        Change.REWRITTEN,
    ),
    (
        "same size, same bytes checked, new mtime (touch or unsampled rewrite)",
        CP,
        observe_bytes(OLD, CP, mtime=101),
        Change.REWRITTEN,
    ),
    (
        "rewritten then grown past the checkpoint (Promtail's failure mode)",
        CP,
        observe_bytes(OLD.replace(b'"a"', b'"z"') + b'{"id":"b"}\n', CP, mtime=101),
        Change.REWRITTEN,
    ),
    ("replaced by rename (new inode)", CP, observe_bytes(OLD, CP, ino=11), Change.REPLACED),
    ("same inode number on another device", CP, observe_bytes(OLD, CP, dev=2), Change.REPLACED),
    # Unhashed: the shell trusted an exact stat match (size, mtime, inode) without reading the file.
    (
        "stat identical, not re-hashed",
        CP,
        Observation(True, None, 1, 10, CP.size, CP.mtime_ns, hashed=False),
        Change.UNCHANGED,
    ),
    (
        "not re-hashed yet the stat differs",
        CP,
        Observation(True, None, 1, 10, CP.size, CP.mtime_ns + 1, hashed=False),
        Change.REWRITTEN,
    ),
    # omp: a title slot rewritten in place is not a rewrite of the session.
    ("omp title slot rewritten in place", OMP_CP, observe_bytes(RETITLED, OMP_CP, mtime=101), Change.RETITLED),
    (
        "omp title slot rewritten as lines are appended",
        OMP_CP,
        observe_bytes(RETITLED + b"{}\n", OMP_CP, mtime=101),
        Change.APPENDED,
    ),
    (
        "omp file rewritten same size after its slot",
        OMP_CP,
        observe_bytes(OMP.replace(b'"a"', b'"z"'), OMP_CP, mtime=101),
        Change.REWRITTEN,
    ),
    (
        "omp title slot grown (the session's bytes moved)",
        OMP_CP,
        observe_bytes(title_slot("first", 300) + OMP[256:-44], OMP_CP, mtime=101),
        Change.REWRITTEN,
    ),
    ("omp title slot removed", OMP_CP, observe_bytes(b" " * 256 + OMP[256:], OMP_CP, mtime=101), Change.REWRITTEN),
    ("gone (ENOENT)", CP, Observation(False), Change.GONE),
    ("gone without checkpoint", None, Observation(False), Change.GONE),
    ("unreadable (EACCES)", CP, Observation(True, "EACCES"), Change.UNREADABLE),
    ("unreadable (EIO) is not gone", CP, Observation(True, "EIO"), Change.UNREADABLE),
]


@pytest.mark.parametrize("name,cp,obs,expected", CASES, ids=[c[0] for c in CASES])
def test_classify_table(name, cp, obs, expected):
    assert classify(cp, obs) is expected


def test_partial_tail_shrunk_but_past_checkpoint_is_rewrite():
    # A partial last line that got shorter: its bytes were replaced, not appended to.
    content = OLD + b'{"type":"mess'
    cp = checkpoint_for(content)
    assert classify(cp, observe_bytes(OLD + b'{"ty', cp, mtime=101)) is Change.REWRITTEN


lines_st = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), min_size=1, max_size=30)


@given(lines=lines_st, extra=st.binary(min_size=1, max_size=200))
def test_any_append_is_appended(lines, extra):
    old = b"\n".join(lines) + b"\n"
    cp = checkpoint_for(old)
    assert classify(cp, observe_bytes(old + extra, cp, mtime=101)) is Change.APPENDED


@given(lines=lines_st, data=st.data())
def test_any_change_before_a_small_checkpoint_is_a_rewrite(lines, data):
    old = b"\n".join(lines) + b"\n"
    cp = checkpoint_for(old)
    assume(cp.consumed <= FINGERPRINT_BYTES)  # fully covered by the fingerprints
    pos = data.draw(st.integers(0, cp.consumed - 1))
    byte = data.draw(st.integers(0, 255))
    assume(old[pos] != byte)
    new = old[:pos] + bytes([byte]) + old[pos + 1 :] + data.draw(st.binary(max_size=50))
    assert classify(cp, observe_bytes(new, cp, mtime=101)) is Change.REWRITTEN


@given(lines=lines_st, cut=st.integers(0, 10_000))
def test_truncation_below_checkpoint_is_a_rewrite(lines, cut):
    old = b"\n".join(lines) + b"\n"
    cp = checkpoint_for(old)
    cut %= cp.consumed
    assert classify(cp, observe_bytes(old[:cut], cp, mtime=101)) is Change.REWRITTEN


# -- complete-line splitting ------------------------------------------------------


def _feed(data: bytes, cuts: list[int]) -> tuple[list[RawLine], int]:
    """Split `data` arriving in pieces, as the tailer sees a growing file."""
    out: list[RawLine] = []
    consumed = 0
    for end in sorted(set(cuts)) + [len(data)]:
        lines, consumed_now = split_complete_lines(data[consumed:end], consumed)
        out.extend(lines)
        consumed = consumed_now
    return out, consumed


@given(
    records=st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    tail=st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")),
    cuts=st.lists(st.integers(0, 1000), max_size=10),
)
def test_split_in_pieces_equals_split_whole(records, tail, cuts):
    data = b"".join(r + b"\n" for r in records) + tail
    cuts = [c % (len(data) + 1) for c in cuts]
    whole, consumed_whole = split_complete_lines(data, 0)
    pieces, consumed = _feed(data, cuts)
    assert pieces == whole
    assert consumed == consumed_whole == len(data) - len(tail)
    # Every line is exactly the bytes at its offset, never a partial one.
    for line in whole:
        end = line.offset + len(line.data)
        assert data[line.offset : end] == line.data
        assert data[end : end + 1] == b"\n" or data[end : end + 2] == b"\r\n"
    assert [w.data for w in whole] == [r[:-1] if r.endswith(b"\r") else r for r in records if r.strip()]


@settings(max_examples=50, deadline=None)
@given(
    records=st.lists(st.binary(min_size=0, max_size=300).map(lambda b: b.replace(b"\n", b"")), max_size=15),
    tail=st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")),
    chunk=st.integers(1, 64),
)
def test_read_chunks_never_splits_a_record(records, tail, chunk):
    data = b"".join(r + b"\n" for r in records) + tail
    fd, path = tempfile.mkstemp(dir="/tmp")
    try:
        os.write(fd, data)
        got = []
        for offset, piece in read_chunks(fd, 0, len(data), chunk=chunk):
            assert piece.endswith(b"\n")
            lines, _ = split_complete_lines(piece, offset)
            got.extend(lines)
        assert got == split_complete_lines(data, 0)[0]
    finally:
        os.close(fd)
        os.unlink(path)


@given(
    torn=st.integers(1, 60),
    payload=st.text(max_size=40),
)
def test_torn_record_followed_by_a_record_keeps_the_record(torn, payload):
    first = json.dumps({"type": "message", "id": "a", "text": "x" * 80}, separators=(",", ":")).encode()
    second = json.dumps({"type": "message", "id": "b", "text": payload}, separators=(",", ":")).encode()
    torn = min(torn, len(first) - 1)
    decoded = decode_line(RawLine(7, first[:torn] + second))
    assert decoded.value == json.loads(second)
    assert decoded.skipped == torn
    assert [d.code for d in decoded.diagnostics] == ["torn-line"]
    assert decoded.diagnostics[0].byte_offset == 7


def _read_all(fd: int, size: int, chunk: int, max_line: int, stops: list[int]):
    """read_chunks over [0, size) in reads that stop at `stops`, resuming as ingest does
    (from the last consumed offset, inside an over-long line when one was being skipped)."""
    lines, overlong = [], []
    start, inside = 0, None
    for stop in [*sorted(stops), size]:
        if stop <= start:
            continue
        consumed = start
        for item in read_chunks(fd, start, stop, chunk=chunk, max_line=max_line, overlong_at=inside):
            if isinstance(item, Overlong):
                assert item.start == consumed and item.end > item.start
                overlong.append(item)
                consumed = item.end
                inside = None if item.complete else item.line_at
            else:
                offset, piece = item
                assert offset == consumed and piece.endswith(b"\n")
                got, consumed = split_complete_lines(piece, offset)
                lines.extend(got)
        start = consumed
    return lines, overlong


@settings(max_examples=80, deadline=None)
@given(
    records=st.lists(st.integers(0, 40), max_size=12),
    chunk=st.integers(1, 24),
    max_line=st.integers(4, 24),
    stops=st.lists(st.integers(0, 400), max_size=4),
)
def test_overlong_lines_are_skipped_in_bounded_reads_and_resumed(records, chunk, max_line, stops):
    """Lines up to max_line come whole; longer ones only as Overlong ranges that cover
    exactly their bytes (newline included), however the reads are cut."""
    data = b"".join(bytes([65 + i % 26]) * n + b"\n" for i, n in enumerate(records))
    fd, path = tempfile.mkstemp(dir="/tmp")
    try:
        os.write(fd, data)
        lines, overlong = _read_all(fd, len(data), chunk, max_line, stops)
        offsets, expect_short, expect_long = 0, [], []
        for i, n in enumerate(records):
            if n > max_line:
                expect_long.append((offsets, offsets + n + 1))
            elif n:
                expect_short.append(RawLine(offsets, bytes([65 + i % 26]) * n))
            offsets += n + 1
        assert lines == expect_short
        # Consecutive ranges of one line join into exactly that line's bytes.
        joined: dict[int, tuple[int, int, bool]] = {}
        for o in overlong:
            first = joined.get(o.line_at, (o.start, o.start, False))
            assert first[1] == o.start
            joined[o.line_at] = (first[0], o.end, o.complete)
        assert [(s, e) for s, e, complete in joined.values() if complete] == expect_long
        assert all(complete for _, _, complete in joined.values())
    finally:
        os.close(fd)
        os.unlink(path)


def test_observe_trusts_an_identical_stat_without_reading(short_tmp):
    # The restart shortcut: a file whose inode, size and mtime match its checkpoint is not read;
    # the same bytes rewritten (a new mtime) are read, hashed and caught.
    import os

    from piwatchd.source.reader import observe

    path = short_tmp / "s.jsonl"
    path.write_bytes(OLD)
    st = os.stat(path)
    cp = checkpoint_for(OLD, dev=st.st_dev, ino=st.st_ino, mtime=st.st_mtime_ns)
    obs = observe(str(path), cp)
    assert (obs.hashed, classify(cp, obs)) == (False, Change.UNCHANGED)
    path.write_bytes(OLD.replace(b'"a"', b'"z"'))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    obs = observe(str(path), cp)
    assert (obs.hashed, classify(cp, obs)) == (True, Change.REWRITTEN)
