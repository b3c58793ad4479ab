"""Format detection and entry parsing for every Pi version (pure)."""

from __future__ import annotations

import pytest
from conftest import jsonl, msg, v3_header

from piwatchd.model.events import SourceFormat
from piwatchd.source.lines import split_complete_lines
from piwatchd.source.parser import ParserState, UnsupportedSource, parse_lines, v1_entry_id


def parse(data: bytes, state: ParserState | None = None):
    lines, _ = split_complete_lines(data, 0)
    return parse_lines(state or ParserState(), lines)


@pytest.mark.parametrize(
    "header, fmt",
    [
        ({"type": "session", "id": "a", "timestamp": "t", "cwd": "/x"}, SourceFormat.V1),
        ({"type": "session", "version": 2, "id": "a", "cwd": "/x"}, SourceFormat.V2),
        ({"type": "session", "version": 3, "id": "a", "cwd": "/x"}, SourceFormat.V3),
    ],
)
def test_header_versions(header, fmt):
    assert parse(jsonl(header)).state.header.format is fmt


@pytest.mark.parametrize(
    "lines, reason",
    [
        ([{"type": "session", "id": "a"}, {"type": "agent_start"}], "--mode json"),
        ([{"kind": "header", "version": 4, "id": "a"}], "format 4"),
        ([{"v": 4, "kind": "header", "id": "a"}], "format 4"),
        ([{"type": "message", "id": "x"}], "not a Pi session header"),
        ([[1, 2]], "not a JSON object"),
        ([{"type": "session", "version": 9, "id": "a"}], "version 9"),
        ([{"type": "session", "version": 3}], "no string id"),
    ],
)
def test_unsupported_sources_are_rejected_whole(lines, reason):
    with pytest.raises(UnsupportedSource, match=reason):
        parse(jsonl(*lines))


def test_v1_ids_are_positional_and_deterministic():
    data = jsonl(
        {"type": "session", "id": "s", "timestamp": "t", "cwd": "/x"},
        {"type": "message", "timestamp": "t", "message": {"role": "user", "content": "hi"}},
        {"type": "model_change", "timestamp": "t", "provider": "p", "modelId": "m"},
    )
    a, b = parse(data), parse(data)
    assert [e.entry_id for e in a.entries] == [v1_entry_id(1), v1_entry_id(2)] == [e.entry_id for e in b.entries]
    assert a.entries[1].parent_id == a.entries[0].entry_id and a.entries[0].parent_id is None
    assert not a.entries[0].id_recorded


def test_incremental_parse_equals_whole_parse():
    objs = [v3_header()] + [msg(f"e{i}", f"e{i - 1}" if i else None, "user", f"text {i}") for i in range(6)]
    data = jsonl(*objs)
    whole = parse(data)
    cut = len(jsonl(*objs[:3]))
    first = parse(data[:cut])
    lines, _ = split_complete_lines(data[cut:], cut)
    second = parse_lines(ParserState.from_json(first.state.to_json()), lines)
    got = [(e.entry_id, e.ordinal, e.byte_offset) for e in first.entries + second.entries]
    assert got == [(e.entry_id, e.ordinal, e.byte_offset) for e in whole.entries]


def test_duplicate_header_and_duplicate_id_are_reported():
    r = parse(jsonl(v3_header(), msg("a", None, "user", "x"), v3_header(), msg("a", None, "user", "y")))
    codes = [d.code for d in r.diagnostics]
    assert "duplicate-header" in codes and "duplicate-id" in codes
    assert [e.entry_id for e in r.entries] == ["a", "a"]


def test_omp_title_slot_is_skipped():
    title = {"type": "title", "v": 1, "title": "x", "pad": " " * 10}
    r = parse(jsonl(title, v3_header(), msg("a", None, "user", "x")))
    assert r.state.header.session_id == "s-1" and len(r.entries) == 1


def test_legacy_branched_from_is_the_parent_session():
    r = parse(jsonl({"type": "session", "id": "s", "timestamp": "t", "cwd": "/x", "branchedFrom": "/p/a.jsonl"}))
    assert r.state.header.parent_session == "/p/a.jsonl"


def test_malformed_lines_are_skipped_with_offsets():
    good = jsonl(v3_header())
    data = good + b'{"type":"mess\n' + jsonl(msg("a", None, "user", "x"))
    r = parse(data)
    assert [e.entry_id for e in r.entries] == ["a"]
    assert r.diagnostics[0].code == "malformed-json" and r.diagnostics[0].byte_offset == len(good)


def test_omp_title_slot_names_the_header():
    title = {"type": "title", "v": 1, "title": " Fix the  parser ", "updatedAt": "x", "pad": " " * 10}
    assert parse(jsonl(title, v3_header())).state.header.title == "Fix the  parser"
    assert parse(jsonl({**title, "title": ""}, v3_header())).state.header.title is None
    assert parse(jsonl(v3_header())).state.header.title is None
