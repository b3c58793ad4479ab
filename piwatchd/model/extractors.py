"""The extractor registry (pure): custom entry types a user opts into search.

A `custom` entry is an extension's state: its `data` is unsearchable, as the
contract says, unless the configuration names its `customType` here, with the
fields whose strings become one fragment each and the fragment's kind:

    [[extract]]
    custom_type = "acme.notes"
    fields = ["data.summary", "data.items"]   # dotted paths in the entry
    kind = "custom.message"                   # the default

A field that holds a string gives that string; a list or an object gives every
string inside it, in order, one a line (numbers, booleans and keys are not
text). The projection (`piwatchd.model.project`) redacts and bounds each
fragment exactly as it does every other text. The index records the registry
it was built with (`piwatchd.store.extractors`); a change re-feeds only the
sessions holding a type whose entry changed (`changed_types`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from .events import FragmentKind

__all__ = ["Extractor", "ExtractorError", "Registry", "NO_EXTRACTORS", "registry_from_config", "changed_types"]

# Kinds a registered field may take: texts without a tool's or a name's structure.
KINDS = (
    FragmentKind.CUSTOM_MESSAGE,
    FragmentKind.SUMMARY_BRANCH,
    FragmentKind.SUMMARY_COMPACTION,
    FragmentKind.USER_TEXT,
    FragmentKind.ASSISTANT_TEXT,
)
MAX_TYPES = 256
MAX_FIELDS = 16
MAX_DEPTH = 8  # path components, and how deep strings are collected below a field
MAX_STRINGS = 10_000  # strings collected under one field: a hostile payload stays linear and bounded


class ExtractorError(ValueError):
    """A registry entry that does not fit, in words."""


@dataclass(frozen=True, slots=True)
class Extractor:
    custom_type: str
    fields: tuple[str, ...]  # dotted paths, as configured
    kind: FragmentKind


@dataclass(frozen=True, slots=True)
class Registry:
    """The registered custom types, by `customType`."""

    by_type: Mapping[str, Extractor]

    def doc(self) -> dict[str, dict[str, Any]]:
        """The registry as the index records it (and compares it)."""
        return {t: {"fields": list(x.fields), "kind": x.kind.value} for t, x in sorted(self.by_type.items())}

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(orjson.dumps(self.doc(), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]

    def texts(self, entry: Mapping[str, Any]) -> list[tuple[str, FragmentKind, str, str]]:
        """A custom entry's registered texts: (fragment id, kind, text, custom type), one per
        field that holds a string; none for a type not registered."""
        custom_type = entry.get("customType")
        x = self.by_type.get(custom_type) if isinstance(custom_type, str) else None
        if x is None:
            return []
        out = []
        for field in x.fields:
            text = "\n".join(_strings(_at(entry, field)))
            if text:
                out.append((field, x.kind, text, x.custom_type))
        return out


NO_EXTRACTORS = Registry({})


def _at(entry: Mapping[str, Any], field: str) -> Any:
    value: Any = entry
    for key in field.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _strings(value: Any) -> Iterator[str]:
    """The strings in `value`, depth first, at most MAX_STRINGS, never deeper than MAX_DEPTH."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    n = 0
    while stack and n < MAX_STRINGS:
        item, depth = stack.pop()
        if isinstance(item, str):
            if item.strip():
                n += 1
                yield item
        elif depth < MAX_DEPTH and isinstance(item, (list, dict)):
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in reversed(list(children)))


def registry_from_config(tables: Any) -> Registry:
    """The `[[extract]]` tables of config.toml (None: none) as a Registry; ExtractorError names what is wrong."""
    if tables is None:
        return NO_EXTRACTORS
    if not isinstance(tables, list):
        raise ExtractorError("`extract` must be a list of tables ([[extract]])")
    if len(tables) > MAX_TYPES:
        raise ExtractorError(f"`extract` may register at most {MAX_TYPES} custom types, not {len(tables)}")
    by_type: dict[str, Extractor] = {}
    for n, table in enumerate(tables, 1):
        x = _extractor(table, f"extract #{n}")
        if x.custom_type in by_type:
            raise ExtractorError(f"extract #{n}: custom_type {x.custom_type!r} is registered twice")
        by_type[x.custom_type] = x
    return Registry(by_type)


def _extractor(table: Any, where: str) -> Extractor:
    if not isinstance(table, dict):
        raise ExtractorError(f"{where} must be a table")
    unknown = sorted(set(table) - {"custom_type", "fields", "kind"})
    if unknown:
        raise ExtractorError(f"{where}: unknown key {unknown[0]!r} (custom_type, fields, kind)")
    custom_type = table.get("custom_type")
    if not isinstance(custom_type, str) or not custom_type:
        raise ExtractorError(f"{where}: custom_type must be the entries' customType, a non-empty string")
    fields = table.get("fields")
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) for f in fields):
        raise ExtractorError(f"{where} ({custom_type}): fields must be a non-empty list of dotted paths")
    if len(fields) > MAX_FIELDS:
        raise ExtractorError(f"{where} ({custom_type}): at most {MAX_FIELDS} fields, not {len(fields)}")
    for field in fields:
        parts = field.split(".")
        if "" in parts or len(parts) > MAX_DEPTH:
            raise ExtractorError(
                f"{where} ({custom_type}): field {field!r} must be keys joined by dots"
                f" (like data.summary), at most {MAX_DEPTH} deep"
            )
    return Extractor(custom_type, tuple(dict.fromkeys(fields)), _kind(table.get("kind"), f"{where} ({custom_type})"))


def _kind(value: Any, where: str) -> FragmentKind:
    if value is None:
        return FragmentKind.CUSTOM_MESSAGE
    for kind in KINDS:
        if value == kind.value:
            return kind
    names = ", ".join(k.value for k in KINDS)
    raise ExtractorError(f"{where}: kind must be one of {names}, not {value!r}")


def changed_types(recorded: Mapping[str, Any], registry: Registry) -> frozenset[str]:
    """The custom types whose entries project differently under `registry` than under the
    `recorded` registry (`Registry.doc`): registered, dropped or changed."""
    now = registry.doc()
    return frozenset(t for t in set(recorded) | set(now) if recorded.get(t) != now.get(t))
