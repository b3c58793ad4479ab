"""Entry -> event + fragments (pure): the seed's semantic projection table.

What is searchable is decided here and only here. Private reasoning
(thinking blocks and their signatures), images, `details` payloads (including
`details.truncation.content`, a duplicate of the visible text), system and
developer prompts, `partialJson` scratch and custom entries of types the
user has not registered (`piwatchd.model.extractors`) produce no searchable
text. Control entries (model/thinking changes, labels, usage,
context edits, custom state) become typed events without fragments.

This is the one projection: indexing bounds each fragment into head/tail,
`event_read` asks for the full texts (`bounded=False`). Both redact secrets
(`piwatchd.model.redact`) from the full text first, so no secret reaches the text
index, a stored copy or a read. A search hit's snippet takes its evidence
fragment's text unredacted (`project_evidence`) and redacts only the lines
it shows, exactly as the whole text's redaction has them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import orjson

from ..source.parser import v1_entry_id
from .controls import CONTROLS, nonempty as _str
from .events import ContextRole, Entry, Event, Fragment, FragmentKind
from .extractors import NO_EXTRACTORS, Registry
from .redact import DEFAULT_RULES, Rules, redact

__all__ = [
    "Evidence",
    "project_entry",
    "session_name",
    "project_evidence",
    "iso_to_ms",
    "context_role_of",
    "bound_text",
    "unmarked",
    "normalize_arguments",
    "MAX_FRAGMENT_CHARS",
    "MAX_FRAGMENTS_PER_EVENT",
    "MAX_TOOL_NAMES_PER_EVENT",
    "HEAD_CHARS",
    "TAIL_CHARS",
]

MAX_FRAGMENT_CHARS = 32 * 1024
HEAD_CHARS = 24 * 1024
TAIL_CHARS = 8 * 1024
# One entry may hold thousands of tool calls (a hostile or runaway assistant message). Every
# fragment's document carries its event's filter values (file evidence included), so an
# unbounded fragment count makes one entry cost its calls times its paths: quadratic. The
# index keeps the first fragments; `read` still shows all of them and says which are not searchable.
MAX_FRAGMENTS_PER_EVENT = 256
MAX_TOOL_NAMES_PER_EVENT = 64

# \x02/\x03 mark matches in snippets; the source may not contain them.
_MARKERS = str.maketrans({"\x02": " ", "\x03": " ", "\x00": " "})
_WHITESPACE = re.compile(r"\s+")


def unmarked(text: str) -> str:
    """`text` with the characters that mark matches in snippets (and NUL) as spaces."""
    if "\x02" in text or "\x03" in text or "\x00" in text:
        return text.translate(_MARKERS)
    return text


def bound_text(text: str) -> tuple[str, str | None, int]:
    """Keep a bounded head and tail of oversized text: (head, tail or None, full length).

    The tail keeps final errors and status lines searchable.
    """
    text = unmarked(text)
    n = len(text)
    if n <= MAX_FRAGMENT_CHARS:
        return text, None, n
    return text[:HEAD_CHARS], text[n - TAIL_CHARS :], n


class _Projection:
    """Per-entry settings and the redaction tally (kind -> count)."""

    __slots__ = ("bounded", "counts", "extractors", "redacting", "rules")

    def __init__(
        self, rules: Rules, bounded: bool, *, redacting: bool = True, extractors: Registry = NO_EXTRACTORS
    ) -> None:
        self.rules = rules
        self.extractors = extractors
        self.bounded = bounded
        # False: fragments keep the source's text (`project_evidence` only).
        self.redacting = redacting
        self.counts: dict[str, int] = {}

    def redact(self, text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
        text, counts = redact(text, self.rules)
        for kind, n in counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + n
        return text, tuple(sorted(counts.items()))

    def fragment(
        self,
        fragment_id: str,
        kind: FragmentKind,
        text: str,
        *,
        meta: str = "",
        tool_name: str | None = None,
        call_id: str | None = None,
        keep_empty: bool = False,
    ) -> Fragment | None:
        """A fragment, or None for blank text unless `keep_empty` (a tool call or
        result with no text is still evidence, searchable by its meta words).

        Redaction runs on the full text, before bounding: a secret that spans
        the head/tail cut is still found whole.
        """
        if not text or not text.strip():
            if not keep_empty:
                return None
            text = ""
        if not self.redacting:
            return Fragment(fragment_id, kind, text, None, meta, tool_name, call_id, len(text))
        text, redactions = self.redact(text)
        if not self.bounded:
            return Fragment(fragment_id, kind, text, None, meta, tool_name, call_id, len(text), redactions)
        head, tail, full = bound_text(text)
        return Fragment(fragment_id, kind, head, tail, meta, tool_name, call_id, full, redactions)


def normalize_arguments(arguments: Any) -> str:
    """Tool-call arguments as searchable text: `key: value` lines, strings unescaped.

    Deterministic for unchanged arguments (source key order is kept).
    """
    if isinstance(arguments, str):
        return arguments
    if not isinstance(arguments, dict):
        return "" if arguments is None else orjson.dumps(arguments).decode()
    lines = []
    for key, value in arguments.items():
        if isinstance(value, str):
            lines.append(f"{key}: {value}")
        else:
            lines.append(f"{key}: {orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()}")
    return "\n".join(lines)


def iso_to_ms(value: Any) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if not isinstance(value, str):
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _text_blocks(content: Any) -> list[tuple[int, str]]:
    """Visible text blocks as (block index, text); a plain string is block 0."""
    if isinstance(content, str):
        return [(0, content)]
    if not isinstance(content, list):
        return []
    out = []
    for index, block in enumerate(content):
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            out.append((index, block["text"]))
    return out


_Fragments = list[Fragment | None]
# A message role's projection: (fragments, is_error, tool names); it adds its meta to `meta`.
_Message = tuple[_Fragments, bool, list[str]]


def _user(p: _Projection, msg: dict[str, Any], meta: dict[str, Any]) -> _Message:
    return [p.fragment(f"text.{i}", FragmentKind.USER_TEXT, t) for i, t in _text_blocks(msg.get("content"))], False, []


def _assistant(p: _Projection, msg: dict[str, Any], meta: dict[str, Any]) -> _Message:
    for key in ("provider", "model", "stopReason", "api", "thinkingLevel", "errorMessage"):
        if _str(msg.get(key)):
            meta[key] = msg[key]
    if "errorMessage" in meta:  # provider errors quote request headers and keys
        meta["errorMessage"] = p.redact(meta["errorMessage"])[0]
    frags: _Fragments = []
    tools: list[str] = []
    content = msg.get("content")
    for index, block in enumerate(content if isinstance(content, list) else []):
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "text" and isinstance(block.get("text"), str):
            frags.append(p.fragment(f"text.{index}", FragmentKind.ASSISTANT_TEXT, block["text"]))
        elif btype == "toolCall":
            name = _str(block.get("name")) or "unknown"
            tools.append(name)
            frags.append(
                p.fragment(
                    f"call.{index}",
                    FragmentKind.TOOL_CALL,
                    normalize_arguments(block.get("arguments")),
                    meta=name,
                    tool_name=name,
                    call_id=_str(block.get("id")),
                    keep_empty=True,
                )
            )
    return frags, msg.get("stopReason") == "error", tools


def _tool_result(p: _Projection, msg: dict[str, Any], meta: dict[str, Any]) -> _Message:
    name = _str(msg.get("toolName")) or "unknown"
    is_error = msg.get("isError") is True
    meta["toolCallId"] = msg.get("toolCallId")
    details = msg.get("details")
    if isinstance(details, dict) and "piwatch" in details:
        meta["piwatch"] = True  # our own Pi tool's output: searchable, hidden by default
    text = "\n".join(t for _, t in _text_blocks(msg.get("content")))
    fragment = p.fragment(
        "result",
        FragmentKind.TOOL_RESULT,
        text,
        meta=f"{name} error" if is_error else name,
        tool_name=name,
        call_id=_str(msg.get("toolCallId")),
        keep_empty=True,
    )
    return [fragment], is_error, [name]


def _bash_execution(p: _Projection, msg: dict[str, Any], meta: dict[str, Any]) -> _Message:
    exit_code = msg.get("exitCode")
    meta["exitCode"] = exit_code
    for key in ("cancelled", "truncated", "excludeFromContext"):
        if msg.get(key) is True:
            meta[key] = True
    is_error = msg.get("cancelled") is True or (isinstance(exit_code, int) and exit_code != 0)
    command = _str(msg.get("command")) or ""
    output = _str(msg.get("output")) or ""
    return (
        [
            p.fragment("command", FragmentKind.BASH_COMMAND, command, meta="bash"),
            p.fragment("output", FragmentKind.BASH_OUTPUT, output, meta="bash error" if is_error else "bash"),
        ],
        is_error,
        [],
    )


def _custom_role(p: _Projection, msg: dict[str, Any], meta: dict[str, Any]) -> _Message:
    custom_type = _str(msg.get("customType")) or ""
    meta["customType"] = custom_type
    text = "\n".join(t for _, t in _text_blocks(msg.get("content")))
    return [p.fragment("custom", FragmentKind.CUSTOM_MESSAGE, text, meta=custom_type)], False, []


# system, developer, synthesized summaries and unknown roles: no searchable text.
_ROLES: dict[str, Callable[[_Projection, dict[str, Any], dict[str, Any]], _Message]] = {
    "user": _user,
    "assistant": _assistant,
    "toolResult": _tool_result,
    "bashExecution": _bash_execution,
    "custom": _custom_role,
    "hookMessage": _custom_role,
}


def _message_fragments(p: _Projection, msg: dict[str, Any], meta: dict[str, Any]) -> _Message:
    role = msg.get("role")
    project = _ROLES.get(role) if isinstance(role, str) else None
    return project(p, msg, meta) if project is not None else ([], False, [])


_CONVERSATION_ROLES = frozenset({"user", "assistant", "toolResult", "bashExecution", "custom", "hookMessage"})
_CONTROL_TYPES = frozenset(
    {
        "model_change",
        "thinking_level_change",
        "context_edit",
        "leaf",
        "active_tools_change",
        # oh-my-pi's
        "mode_change",
        "reset_boundary",
        "ttsr_injection",
        "service_tier_change",
    }
)


def context_role_of(entry_type: str, role: str | None) -> ContextRole:
    if entry_type == "message":
        return ContextRole.CONVERSATION if role in _CONVERSATION_ROLES else ContextRole.CONTROL
    if entry_type == "custom_message":
        return ContextRole.CONVERSATION
    if entry_type in ("compaction", "branch_summary"):
        return ContextRole.SUMMARY
    if entry_type in _CONTROL_TYPES:
        return ContextRole.CONTROL
    return ContextRole.METADATA


def _capped(p: _Projection, fragments: list[Fragment], meta: dict[str, Any]) -> tuple[Fragment, ...]:
    """The fragments the index keeps: at most MAX_FRAGMENTS_PER_EVENT, the count of the rest in meta."""
    if not p.bounded or len(fragments) <= MAX_FRAGMENTS_PER_EVENT:
        return tuple(fragments)
    meta["fragmentsNotIndexed"] = len(fragments) - MAX_FRAGMENTS_PER_EVENT
    return tuple(fragments[:MAX_FRAGMENTS_PER_EVENT])


def _custom_message(p: _Projection, data: dict[str, Any], meta: dict[str, Any]) -> _Fragments:
    custom_type = _str(data.get("customType")) or ""
    meta["customType"] = custom_type
    meta["display"] = data.get("display")
    text = "\n".join(t for _, t in _text_blocks(data.get("content")))
    return [p.fragment("custom", FragmentKind.CUSTOM_MESSAGE, text, meta=custom_type)]


def _compaction(p: _Projection, data: dict[str, Any], meta: dict[str, Any]) -> _Fragments:
    frags = [p.fragment("summary", FragmentKind.SUMMARY_COMPACTION, _str(data.get("summary")) or "")]
    kept = data.get("firstKeptEntryId")
    if not isinstance(kept, str) and isinstance(data.get("firstKeptEntryIndex"), int):
        kept = v1_entry_id(data["firstKeptEntryIndex"])
    if isinstance(kept, str):
        meta["firstKeptEntryId"] = kept
    if isinstance(data.get("tokensBefore"), int):
        meta["tokensBefore"] = data["tokensBefore"]
    for key in ("fromHook", "fromExtension"):
        if data.get(key) is True:
            meta[key] = True
    return frags


def _branch_summary(p: _Projection, data: dict[str, Any], meta: dict[str, Any]) -> _Fragments:
    frags = [p.fragment("summary", FragmentKind.SUMMARY_BRANCH, _str(data.get("summary")) or "")]
    if isinstance(data.get("fromId"), str):
        meta["fromId"] = data["fromId"]
    return frags


def session_name(name: str, rules: Rules = DEFAULT_RULES) -> str:
    """A session's name as shown and indexed: whitespace runs made one space, secrets redacted."""
    return redact(_one_line(name), rules)[0]


def _one_line(name: str) -> str:
    return _WHITESPACE.sub(" ", name).strip()


def _session_info(p: _Projection, data: dict[str, Any], meta: dict[str, Any]) -> _Fragments:
    # Pi's `session_info.name`; omp's rename audit entry `title_change.title`.
    name = data.get("name") if "name" in data else data.get("title")
    if not isinstance(name, str):
        return []
    normalized = p.redact(_one_line(name))[0]
    meta["name"] = normalized
    return [p.fragment("name", FragmentKind.SESSION_NAME, normalized)]


def _label(p: _Projection, data: dict[str, Any], meta: dict[str, Any]) -> _Fragments:
    meta["targetId"] = data.get("targetId")
    meta["label"] = p.redact(data["label"])[0] if isinstance(data.get("label"), str) else None
    return []


# Each entry type's projection (messages have their own table, `_ROLES`; control entries,
# `CONTROLS`): it returns the fragments and adds its meta. Types not listed are kept as
# events without text or meta.
_ENTRY_TYPES: dict[str, Callable[[_Projection, dict[str, Any], dict[str, Any]], _Fragments]] = {
    "custom_message": _custom_message,
    "compaction": _compaction,
    "branch_summary": _branch_summary,
    "session_info": _session_info,
    "title_change": _session_info,
    "label": _label,
}


class _Projected(NamedTuple):
    role: str | None
    timestamp_ms: int | None
    is_error: bool
    tools: list[str]
    fragments: tuple[Fragment, ...]


def _project(p: _Projection, entry: Entry, meta: dict[str, Any]) -> _Projected:
    """The projection table applied to one entry; it adds the event's meta to `meta`."""
    data = entry.data
    frags: _Fragments = []
    role: str | None = None
    is_error = False
    tools: list[str] = []
    timestamp_ms = iso_to_ms(data.get("timestamp"))
    if entry.type == "message":
        msg = data.get("message")
        if isinstance(msg, dict):
            role = _str(msg.get("role"))
            if timestamp_ms is None:
                timestamp_ms = iso_to_ms(msg.get("timestamp"))
            frags, is_error, tools = _message_fragments(p, msg, meta)
    elif entry.type in CONTROLS:
        CONTROLS[entry.type](data, meta)
        if entry.type == "custom":  # searchable only when its type is registered
            frags = [p.fragment(fid, kind, text, meta=ct) for fid, kind, text, ct in p.extractors.texts(data)]
    else:
        project = _ENTRY_TYPES.get(entry.type)
        if project is not None:
            frags = project(p, data, meta)
    return _Projected(role, timestamp_ms, is_error, tools, _capped(p, [f for f in frags if f is not None], meta))


def project_entry(
    session_id: str,
    entry: Entry,
    rules: Rules = DEFAULT_RULES,
    *,
    bounded: bool = True,
    extractors: Registry = NO_EXTRACTORS,
) -> Event:
    """Project one entry into its event. Never raises on odd shapes.

    `bounded=False` keeps each fragment's full text (for `event_read`);
    `rules` are the redaction rules the index was built with, `extractors`
    the custom types it made searchable.
    """
    p = _Projection(rules, bounded, extractors=extractors)
    meta: dict[str, Any] = {}
    x = _project(p, entry, meta)
    return Event(
        session_id=session_id,
        entry_id=entry.entry_id,
        parent_id=entry.parent_id,
        type=entry.type,
        role=x.role,
        ordinal=entry.ordinal,
        timestamp_ms=x.timestamp_ms,
        byte_offset=entry.byte_offset,
        byte_len=entry.byte_len,
        fingerprint=entry.fingerprint,
        is_error=x.is_error,
        tool_names=tuple(dict.fromkeys(x.tools))[:MAX_TOOL_NAMES_PER_EVENT],
        meta=meta,
        fragments=x.fragments,
        context_role=context_role_of(entry.type, x.role),
        id_recorded=entry.id_recorded,
        redactions=tuple(sorted(p.counts.items())),
    )


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a search hit shows of its event: how many fragments the event
    has as indexed, and its evidence fragment as the source holds it
    (`unredacted`: its whole text, not redacted, never shown as it is; None
    when the event has no such fragment). A snippet redacts only the lines
    it cuts from it (`piwatchd.model.redact.line_secrets`); `indexed()` is
    the fragment exactly as indexed, redacted whole."""

    fragments: int
    unredacted: Fragment | None
    rules: Rules

    def indexed(self) -> Fragment | None:
        """The fragment as the index holds it: redacted whole, then bounded."""
        f = self.unredacted
        if f is None:
            return None
        p = _Projection(self.rules, bounded=True)
        return p.fragment(
            f.fragment_id, f.kind, f.text, meta=f.meta, tool_name=f.tool_name, call_id=f.call_id, keep_empty=True
        )


def project_evidence(
    entry: Entry, fragment_id: str, rules: Rules = DEFAULT_RULES, extractors: Registry = NO_EXTRACTORS
) -> Evidence:
    """The `Evidence` of one entry's event for its fragment `fragment_id`,
    by the one projection table: the fragments as indexed, none of their
    texts redacted (the event's meta is; nothing here returns it)."""
    x = _project(_Projection(rules, bounded=True, redacting=False, extractors=extractors), entry, {})
    return Evidence(len(x.fragments), next((f for f in x.fragments if f.fragment_id == fragment_id), None), rules)
