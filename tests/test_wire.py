"""The typed wire contract (piwatch.wire): one schema, strict request
validation with documented codes, camelCase everywhere."""

from __future__ import annotations

import re

import pytest
from piwatch import wire
from piwatch.protocol import ErrorCode, ProtocolError

DOCUMENTED = {
    "slow_consumer",
    "bad_request",
    "unsupported_protocol",
    "hello_required",
    "query_error",
    "not_found",
    "timeout",
    "too_large",
    "busy",
    "unavailable",
    "internal",
}


def test_schema_file_is_the_contract():
    # The Pi extension's types are checked against this file; regenerate with
    # `python -m piwatch.wire > client/piwatch/wire_schema.json`.
    assert wire.SCHEMA_PATH.read_text() == wire.schema_text()


def test_schema_names_every_op_and_the_error_codes():
    s = wire.schema()
    ops = {"hello", "status", "search", "read", "trace", "sessions", "reindex", "follow", "unfollow"}
    assert set(s["ops"]) == ops
    assert set(s["pushed"]) == {"follow"}  # frames sent unasked: a follow's updates
    assert set(s["errorCodes"]) == DOCUMENTED


def _keys(schema_defs):
    for name, d in schema_defs.items():
        for key in d.get("properties", {}):
            yield name, key


def test_every_field_is_camel_case():
    snake = [(n, k) for n, k in _keys(wire.schema()["$defs"]) if "_" in k]
    assert snake == []


@pytest.mark.parametrize(
    "op, args, field",
    [
        ("search", {"query": 1}, "$.query"),
        ("search", {"query": "x", "limit": 0}, "$.limit"),
        ("search", {"query": "x", "limit": 201}, "$.limit"),
        ("search", {"query": "x", "offset": -1}, "$.offset"),
        ("search", {"query": "x", "filters": {"sinceMs": 2**64}}, "$.filters.sinceMs"),
        ("search", {"query": "x", "filters": {"isError": "yes"}}, "$.filters.isError"),
        ("search", {"query": "x", "filters": {"fileMode": "write"}}, "$.filters.fileMode"),
        ("search", {"query": "x", "filters": {"kind": "user.text"}}, "$.filters.kind"),
        ("search", {"query": "x", "filters": []}, "$.filters"),
        ("search", {"query": "x", "waitSeconds": -1}, "$.waitSeconds"),
        ("search", {"query": "x", "typo": 1}, "typo"),
        ("read", {"sessionId": "s"}, "entryId"),
        ("read", {"sessionId": "s", "entryId": "e", "before": 51}, "$.before"),
        ("read", {"sessionId": "s", "entryId": "e", "order": "random"}, "$.order"),
        ("read", {"sessionId": "s", "entryId": 7}, "$.entryId"),
        ("trace", {"sessionId": None, "entryId": "e"}, "$.sessionId"),
        ("sessions", {"limit": 501}, "$.limit"),
        ("reindex", {"sessionId": 3}, "$.sessionId"),
        ("status", {"x": 1}, "x"),
    ],
)
def test_bad_args_are_bad_request_naming_the_field(op, args, field):
    with pytest.raises(ProtocolError) as err:
        wire.decode_args(op, args)
    # Named as a caller writes it (`limit`, `filters.sinceMs`), not as a JSON path.
    assert err.value.code == ErrorCode.BAD_REQUEST and field.removeprefix("$.") in err.value.message
    assert "$." not in err.value.message and "Expected `" not in err.value.message


@pytest.mark.parametrize(
    "args, said",
    [
        ({"query": "x", "limit": 0}, "`limit` must be at least 1"),
        ({"query": "x", "offset": 10_001}, "`offset` must be at most 10,000"),
        ({"query": "x", "waitSeconds": -1}, "`waitSeconds` must be at least 0"),
        ({"query": 1}, "`query` must be text, not a whole number"),
        ({"query": "x", "filters": {"isError": "yes"}}, "`filters.isError` must be true or false or null, not text"),
        ({"query": "x", "filters": {"cwd": "/" + "a" * 5000}}, "`filters.cwd` must be at most 4,096 characters long"),
        ({"query": "x", "filters": {"tool": ["t"] * 101}}, "`filters.tool` must hold at most 100 values"),
        ({"query": "x", "group": "z"}, "`group` has no value 'z'"),
        ({"query": "x", "typo": 1}, "no field `typo`"),
        ({"query": "x", "filters": {"typo": 1}}, "no field `typo` in `filters`"),
        ({}, "`query` is required"),
        ({"query": "x", "filters": {"role": ["nosuch"]}}, "`filters.role`: no such value 'nosuch'; one of: user,"),
    ],
)
def test_bad_args_are_said_in_words(args, said):
    with pytest.raises(ProtocolError) as err:
        wire.decode_args("search", args)
    assert err.value.message.startswith(f"bad search arguments: {said}"), err.value.message


def test_good_args_decode_to_typed_structs():
    a = wire.decode_args("search", {"query": "q", "filters": {"sessionId": ["s"], "sinceMs": 5}, "limit": 3})
    assert isinstance(a, wire.SearchArgs) and a.filters.session_id == ["s"] and a.filters.since_ms == 5 and a.limit == 3
    r = wire.decode_args("read", {"sessionId": "s", "entryId": "e"})
    assert isinstance(r, wire.ReadArgs) and (r.before, r.after, r.order) == (0, 0, "append")


def test_huge_values_are_quoted_only_as_a_bounded_prefix():
    with pytest.raises(ProtocolError) as err:
        wire.decode_args("search", {"query": "x", "k" * 1_000_000: 1})
    assert len(err.value.message) < 400
    assert len(wire.quote("x" * 10**7)) <= wire.MAX_QUOTE_CHARS + 30


def test_reads_are_by_attribute_and_camel_case_is_only_on_the_wire():
    hit = wire.Evidence(fragment_id="f", kind="user.text", tool_name=None)
    assert hit.fragment_id == "f" and hit.tool_name is None
    with pytest.raises(TypeError):  # no mapping shim: a typed value is not a dict
        hit["fragmentId"]  # type: ignore[index]
    assert re.fullmatch(
        r'\{"fragmentId":"f","kind":"user.text","toolName":null\}', wire.to_json(hit, indent=None).replace(" ", "")
    )
