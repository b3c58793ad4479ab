"""Fuzz the request handlers (issue 10): random msgpack values of every type
as the args and caller of every op, through the one request path
(`Api.handle`, after a msgpack round trip as on the socket). Only documented
error codes may come back, never `internal`, and no exception escapes."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import jsonl, msg, v3_header
from hypothesis import HealthCheck, given, settings, strategies as st
from piwatch import wire
from piwatch.protocol import decode_body, encode_frame

from piwatchd.ingest.scan import index_once
from piwatchd.serve.api import Api

DOCUMENTED = set(wire.schema()["errorCodes"]) - {"internal"}
FIELDS = {op: list(cls.__struct_encode_fields__) for op, cls in wire.ARGS.items()}
FILTER_FIELDS = list(wire.SearchFilters.__struct_encode_fields__)
CALLER_FIELDS = list(wire.Caller.__struct_encode_fields__)


@pytest.fixture(scope="module")
def api():
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="pw-fz-"))
    (base / "proj" / ".git").mkdir(parents=True)
    root = base / "sessions" / "a"
    root.mkdir(parents=True)
    (root / "s1.jsonl").write_bytes(
        jsonl(
            v3_header("s1", str(base / "proj")),
            msg("e0", None, "user", "fuzzy words here"),
            msg("e1", "e0", "assistant", [{"type": "text", "text": "fuzzy answer"}]),
        )
    )
    db = base / "db.sqlite3"
    index_once(db, [str(base / "sessions")])
    yield Api(db, session_roots=(str(base / "sessions"),), request_budget=2.0), base
    shutil.rmtree(base, ignore_errors=True)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, -(2**63), 2**53 + 1, -1, 0]),  # the edges, often
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.binary(max_size=20),
    st.sampled_from(["", "/", "/tmp", "s1", "e0", "\x00", "/a\x00b", "x" * 3000, "fuzzy", '"', "*", "NOT"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def maps(fields):
    """Maps using the op's real field names (and some others) with values of every type."""
    keys = st.sampled_from(fields) | st.text(max_size=6) if fields else st.text(max_size=6)
    return st.dictionaries(keys, values, max_size=6)


callers = st.one_of(
    values,
    maps(CALLER_FIELDS),
    st.fixed_dictionaries(
        {"cwd": st.sampled_from(["/tmp", "/", "relative", "/a\x00"])},
        optional={"sessionId": values, "cutoffEntryId": values, "sessionFile": values, "extraRoots": values},
    ),
    st.just({"all": True}),
)


def args_for(op):
    fields = FIELDS[op]
    # Every real field, each present or not, with a value of any type.
    base = st.one_of(values, maps(fields), st.fixed_dictionaries({}, optional=dict.fromkeys(fields, values)))
    if op == "search":
        base = base | st.fixed_dictionaries(
            {"query": st.text(max_size=30) | values},
            optional={
                "filters": maps(FILTER_FIELDS) | values,
                "limit": values,
                "offset": values,
                "waitSeconds": values,
            },
        )
    if op in ("read", "trace"):
        base = base | st.fixed_dictionaries(
            {"sessionId": st.sampled_from(["s1", "nope"]) | values, "entryId": st.sampled_from(["e0", "e1"]) | values},
            optional={k: values for k in fields if k not in ("sessionId", "entryId")},
        )
    return base


OPS = ["status", "search", "read", "trace", "sessions", "reindex"]


@pytest.mark.parametrize("op", OPS)
def test_random_args_only_get_documented_errors(api, op):
    handler, _ = api

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(args=args_for(op), caller=callers)
    def check(args, caller):
        message = decode_body(encode_frame({"args": args, "caller": caller})[4:])  # as the socket delivers it
        response = handler.handle(op, message["args"], message["caller"])
        assert isinstance(response, wire.Response)
        if not response.ok:
            assert response.error.code in DOCUMENTED, (op, args, caller, response.error)
            assert len(response.error.message) <= 2100
        encode_frame(response)  # always encodable

    check()


@given(op=values)
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
def test_unknown_ops_are_bad_requests(op):
    api = Api(Path("/nonexistent/db.sqlite3"))
    response = api.handle(op, {}, {"all": True})
    assert not response.ok and response.error.code in ("bad_request", "unavailable")


EDGE_INTS = [2**63 - 1, 2**63, 2**64 - 1, -(2**63), 2**53 + 1]
VALID = {
    "status": {},
    "search": {"query": "fuzzy"},
    "read": {"sessionId": "s1", "entryId": "e0", "fragmentId": "text.0"},
    "trace": {"sessionId": "s1", "entryId": "e0"},
    "sessions": {},
    "reindex": {},
}


@pytest.mark.parametrize("op", OPS)
def test_every_field_at_the_integer_edges(api, op):
    """Deterministic companion of the fuzz: each field of each op (and each
    search filter) at the 64-bit edges, on an otherwise valid request."""
    handler, _ = api
    fields = [("args", f) for f in FIELDS[op]] + ([("filters", f) for f in FILTER_FIELDS] if op == "search" else [])
    for where, field in fields:
        for value in EDGE_INTS:
            args = dict(VALID[op])
            if where == "filters":
                args["filters"] = {field: value}
            else:
                args[field] = value
            message = decode_body(encode_frame({"args": args})[4:])
            response = handler.handle(op, message["args"], {"all": True})
            assert response.ok or response.error.code in DOCUMENTED, (op, field, value, response.error)
