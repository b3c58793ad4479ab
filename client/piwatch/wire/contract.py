"""The wire contract as tables: each op's argument and result shape (`ARGS`,
`RESULTS`, `OPS`), decoding with clear `bad_request` errors, JSON output safe
on a terminal, and the JSON Schema the TypeScript types are checked against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from ..colour import UNSAFE
from ..protocol import ErrorCode, ProtocolError
from .base import Wire, clip, quote
from .envelope import ErrorBody, Freshness, Notice, Response
from .problems import plain_problem
from .requests import (
    Caller,
    FollowArgs,
    HelloArgs,
    ReadArgs,
    ReindexArgs,
    SearchArgs,
    SessionsArgs,
    StatusArgs,
    TraceArgs,
    UnfollowArgs,
)
from .results import (
    FollowResult,
    FollowUpdate,
    HelloResult,
    ReadResult,
    ReindexResult,
    SearchResult,
    SessionsResult,
    TraceResult,
    UnfollowResult,
)
from .status import StatusResult

T = TypeVar("T")

__all__ = [
    "ARGS",
    "STREAM_OPS",
    "OPS",
    "RESULTS",
    "SCHEMA_PATH",
    "decode_args",
    "decode_caller",
    "decode_result",
    "schema",
    "schema_text",
    "to_builtins",
    "to_json",
]

ARGS: dict[str, type[Wire]] = {
    "hello": HelloArgs,
    "status": StatusArgs,
    "search": SearchArgs,
    "read": ReadArgs,
    "trace": TraceArgs,
    "sessions": SessionsArgs,
    "reindex": ReindexArgs,
    "follow": FollowArgs,
    "unfollow": UnfollowArgs,
}

# Every op of the contract, in one place: the daemon's dispatcher and `hello`'s capabilities derive from it.
OPS: tuple[str, ...] = tuple(ARGS)
# Ops that need a connection able to push (piwatchd's socket; an index file alone never changes):
# answered on the request path like every other op, with the connection's streams.
STREAM_OPS: tuple[str, ...] = ("follow", "unfollow")

RESULTS: dict[str, type[Wire]] = {
    "hello": HelloResult,
    "status": StatusResult,
    "search": SearchResult,
    "read": ReadResult,
    "trace": TraceResult,
    "sessions": SessionsResult,
    "reindex": ReindexResult,
    "follow": FollowResult,
    "unfollow": UnfollowResult,
}


def _convert(value: Any, cls: type[T], what: str) -> T:
    try:
        return msgspec.convert({} if value is None else value, cls)
    except msgspec.ValidationError as exc:
        # msgspec's message names the field path (`$.filters.sinceMs`); values are not quoted.
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"{what}: {clip(plain_problem(str(exc)))}") from None


def decode_args(op: str, args: Any) -> Wire:
    """Validate a request's `args` map; raises ProtocolError(bad_request)."""
    cls = ARGS.get(op)
    if cls is None:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"unknown op {quote(op)}; known: {sorted(ARGS)}")
    return _convert(args, cls, f"bad {op} arguments")


def decode_caller(caller: Any) -> Caller | None:
    return None if caller is None else _convert(caller, Caller, "bad caller")


def decode_result(op: str, result: Any) -> Any:
    """A response's `result` as the op's typed Struct (clients)."""
    cls = RESULTS.get(op)
    return result if cls is None else msgspec.convert(result, cls)


def to_builtins(value: Any) -> Any:
    """Plain dicts/lists with wire (camelCase) names, as JSON or msgpack carry them."""
    return msgspec.to_builtins(value)


def _json_escape(char: str) -> str:
    """`char` as JSON's `\\uXXXX` escapes (a surrogate pair above U+FFFF)."""
    units = char.encode("utf-16-be")
    return "".join(f"\\u{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2))


def to_json(value: Any, *, indent: int | None = 2) -> str:
    """Pretty JSON of any wire value (one line with `indent=None`), camelCase, as `--json` prints it: the
    exact text, with every character the terminal must not get raw (`colour.UNSAFE`: controls, bidi and
    zero-width format characters) JSON-escaped (`\\u001b`, `\\u009b`, `\\u202e`), so the output is safe
    on a terminal and decodes to the same values. JSON escapes C0 itself; DEL, C1 and the format
    characters it would carry raw (a U+009B is a CSI on many terminals)."""
    text = json.dumps(to_builtins(value), indent=indent, ensure_ascii=False)
    return UNSAFE.sub(lambda m: _json_escape(m.group()), text)


# Beside the package (`client/piwatch/wire_schema.json`), where the TypeScript check reads it.
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "wire_schema.json"


def schema() -> dict[str, Any]:
    """JSON Schema of the whole contract: `{"ops": {op: {"args", "result"}},
    "envelope", "$defs"}`. The Pi extension's TypeScript types are checked
    against this; `python -m piwatch.wire` prints it."""
    types = [*ARGS.values(), *RESULTS.values(), FollowUpdate, Caller, Response, Notice, Freshness, ErrorBody]
    refs, defs = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    by_type = dict(zip(types, refs))
    return {
        "title": "piwatch wire contract",
        "ops": {op: {"args": by_type[ARGS[op]], "result": by_type[RESULTS[op]]} for op in ARGS},
        # Pushed after a follow's result, with its request id, until unfollow.
        "pushed": {"follow": by_type[FollowUpdate]},
        "caller": by_type[Caller],
        "response": by_type[Response],
        "errorCodes": sorted(v for k, v in vars(ErrorCode).items() if k.isupper()),
        "$defs": defs,
    }


def schema_text() -> str:
    return json.dumps(schema(), indent=1, sort_keys=True) + "\n"
