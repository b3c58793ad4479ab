"""A request that does not fit the contract, said in words: msgspec names a type
and a JSON path (``Expected `int` >= 1 - at `$.limit` ``); a caller, person or
model, reads `` `limit` must be at least 1``. Pure."""

from __future__ import annotations

import re

__all__ = ["plain_problem"]

_AT = re.compile(r"^(?P<problem>.*) - at `\$(?P<path>[^`]*)`$", re.DOTALL)
_TYPES = {
    "int": "a whole number",
    "float": "a number",
    "str": "text",
    "bool": "true or false",
    "array": "a list",
    "object": "a map",
    "null": "null",
}
_BOUND = re.compile(r"^Expected `(?P<type>\w+)`(?: of length)? (?P<op>>=|<=|>|<) (?P<n>-?\d+(?:\.\d+)?)$")
_WRONG_TYPE = re.compile(r"^Expected `(?P<want>[^`]+)`, got `(?P<got>\w+)`$")
_ENUM = re.compile(r"^Invalid enum value (?P<value>.+)$")
_UNKNOWN = re.compile(r"^Object contains unknown field (?P<name>`[^`]*`)$")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]*)`$")
_OWN_FIELD = re.compile(r"^`(?P<name>[^`]+)`(?P<rest>.*)$", re.DOTALL)
_WORDS = {">=": "at least", "<=": "at most", ">": "more than", "<": "less than"}


def _kind(name: str) -> str:
    return " or ".join(_TYPES.get(part.strip(), part.strip()) for part in name.split("|"))


def _field(path: str) -> str:
    return path.lstrip(".") or "the request"


def _bound(m: re.Match[str]) -> str:
    kind, n = m["type"], f"{float(m['n']):,g}" if "." in m["n"] else f"{int(m['n']):,}"
    if kind == "str":
        return f"must be {_WORDS[m['op']]} {n} characters long"
    if kind == "array":
        return f"must hold {_WORDS[m['op']]} {n} values"
    return f"must be {_WORDS[m['op']]} {n}"


def plain_problem(message: str) -> str:
    """msgspec's validation message in words, naming the field (unchanged when it has no known shape)."""
    at = _AT.match(message)
    problem, field = (message, "") if at is None else (at["problem"], _field(at["path"]))
    if (m := _UNKNOWN.match(problem)) is not None:
        return f"no field {m['name']}" + (f" in `{field}`" if field else "")
    if (m := _MISSING.match(problem)) is not None:
        return f"`{field + '.' if field else ''}{m['name']}` is required"
    if at is None:
        return message
    own = _OWN_FIELD.match(problem)
    if own is not None:  # a check of ours (`__post_init__`) names its field inside the path's object
        name = own["name"] if field == "the request" else f"{field}.{own['name']}"
        return f"`{name}`{own['rest']}"
    if (m := _BOUND.match(problem)) is not None:
        return f"`{field}` {_bound(m)}"
    if (m := _WRONG_TYPE.match(problem)) is not None:
        return f"`{field}` must be {_kind(m['want'])}, not {_kind(m['got'])}"
    if (m := _ENUM.match(problem)) is not None:
        return f"`{field}` has no value {m['value']}"
    return f"`{field}`: {problem}"
