"""Relationships and file evidence of single entries (pure).

Edges that one entry records about others: `compacts`, `branch-summary-from`,
`labels`, `context-edit`, and the tool calls whose `toolCallId` a result
names (resolved to entries by the store, which can see the whole session).
`parent`/`child` are not repeated here: `events.parent_id` is that record.

File evidence follows Pi's own compaction bookkeeping
(`extractFileOpsFromMessage`): `read` reads, `write` and `edit` change, from
the assistant's tool-call `arguments.path` (and codemode `nestedCalls` on a
tool result), plus `details.readFiles` / `details.modifiedFiles` of
compaction and branch-summary entries. Paths are resolved the way Pi's tools
resolve them: strip one leading `@`, expand `~`, join relative paths to the
session cwd, normalize. A tool result shares its call's evidence through its
`tool-result-for` edge (the store's `event_files` view), never as a copy.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_PATHS_PER_EVENT",
    "Edge",
    "FileEvidence",
    "ToolCall",
    "resolve_path",
    "tool_calls",
    "entry_edges",
    "entry_file_evidence",
    "FILE_TOOLS",
]

# File evidence kept per entry. Each of an entry's text documents carries its paths (with their
# ancestors) as filter values, so the count must be bounded for an entry's cost to stay linear.
MAX_PATHS_PER_EVENT = 256

FILE_TOOLS = {"read": "read", "write": "changed", "edit": "changed"}

# Pi's normalizeUnicodeSpaces: odd spaces typed into paths become plain spaces.
_UNICODE_SPACES = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")


@dataclass(frozen=True, slots=True)
class Edge:
    kind: str
    target_entry_id: str | None  # within the same session
    target_ref: str | None = None  # as recorded when not an entry id ("root", a path)
    provenance: str = "recorded"  # recorded | derived
    detail: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class FileEvidence:
    path: str  # resolved, normalized
    mode: str  # read | changed
    source: str  # tool-call | tool-result | compaction | branch-summary
    provenance: str
    raw_path: str
    tool_name: str | None = None
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    call_id: str | None
    name: str
    path: str | None  # arguments.path, when a string


def resolve_path(raw: str, cwd: str | None, home: str | None = None) -> str:
    """Resolve a tool path as Pi does (no filesystem access)."""
    p = _UNICODE_SPACES.sub(" ", raw)
    if p.startswith("@"):
        p = p[1:]
    home = home if home is not None else os.path.expanduser("~")
    if p == "~":
        p = home
    elif p.startswith("~/"):
        p = posixpath.join(home, p[2:])
    elif p.startswith("file://"):
        p = p[len("file://") :]
    if not posixpath.isabs(p):
        p = posixpath.join(cwd or "/", p)
    norm = posixpath.normpath(p)
    return "/" + norm.lstrip("/") if norm.startswith("//") else norm


def tool_calls(data: Mapping[str, Any]) -> list[ToolCall]:
    """Tool-call blocks of an assistant message entry."""
    msg = data.get("message") if data.get("type") == "message" else None
    if not isinstance(msg, dict) or msg.get("role") != "assistant" or not isinstance(msg.get("content"), list):
        return []
    out = []
    for block in msg["content"]:
        if isinstance(block, dict) and block.get("type") == "toolCall" and isinstance(block.get("name"), str):
            args = block.get("arguments")
            path = args.get("path") if isinstance(args, dict) and isinstance(args.get("path"), str) else None
            cid = block.get("id") if isinstance(block.get("id"), str) and block.get("id") else None
            out.append(ToolCall(cid, block["name"], path or None))
    return out


def entry_edges(data: Mapping[str, Any]) -> list[Edge]:
    """Edges one raw entry records (excluding parent and tool-result joins)."""
    etype = data.get("type")
    edges: list[Edge] = []
    if etype == "compaction":
        kept = data.get("firstKeptEntryId")
        if isinstance(kept, str) and kept:
            own = kept == data.get("id")
            edges.append(Edge("compacts", kept, detail={"boundary": "first-kept", "retainsNone": own}))
        elif isinstance(data.get("firstKeptEntryIndex"), int):
            from ..source.parser import v1_entry_id

            edges.append(
                Edge(
                    "compacts",
                    v1_entry_id(data["firstKeptEntryIndex"]),
                    provenance="derived",
                    detail={"boundary": "first-kept", "fromIndex": data["firstKeptEntryIndex"]},
                )
            )
        else:
            edges.append(Edge("compacts", None, detail={"boundary": "unknown", "retainedTail": "retainedTail" in data}))
    elif etype == "branch_summary":
        from_id = data.get("fromId")
        if isinstance(from_id, str) and from_id:
            if from_id == "root":
                edges.append(Edge("branch-summary-from", None, target_ref="root", detail={"fromRoot": True}))
            else:
                edges.append(Edge("branch-summary-from", from_id))
    elif etype == "label":
        target = data.get("targetId")
        if isinstance(target, str) and target:
            label = data.get("label")
            edges.append(Edge("labels", target, detail={"label": label if isinstance(label, str) and label else None}))
    elif etype == "context_edit":
        target = data.get("targetId")
        if isinstance(target, str) and target:
            edges.append(Edge("context-edit", target, detail={"omits": data.get("replacement") is None}))
    return edges


def entry_file_evidence(data: Mapping[str, Any], cwd: str | None, home: str | None = None) -> list[FileEvidence]:
    """File evidence recorded by the entry itself."""
    out: list[FileEvidence] = []
    etype = data.get("type")

    def add(raw: Any, mode: str, source: str, tool: str | None = None, call_id: str | None = None) -> None:
        if isinstance(raw, str) and raw:
            out.append(FileEvidence(resolve_path(raw, cwd, home), mode, source, "recorded", raw, tool, call_id))

    if etype == "message":
        for call in tool_calls(data):
            mode = FILE_TOOLS.get(call.name)
            if mode and call.path:
                add(call.path, mode, "tool-call", call.name, call.call_id)
        msg = data.get("message")
        if isinstance(msg, dict) and msg.get("role") == "toolResult":
            nested = msg.get("nestedCalls")
            calls = nested.get("calls") if isinstance(nested, dict) else None
            for c in calls if isinstance(calls, list) else []:
                if isinstance(c, dict) and FILE_TOOLS.get(str(c.get("name"))) and isinstance(c.get("arguments"), dict):
                    add(
                        c["arguments"].get("path"), FILE_TOOLS[c["name"]], "tool-call", c["name"], msg.get("toolCallId")
                    )
    elif etype in ("compaction", "branch_summary"):
        details = data.get("details")
        if isinstance(details, dict):
            source = "compaction" if etype == "compaction" else "branch-summary"
            for key, mode in (("readFiles", "read"), ("modifiedFiles", "changed")):
                vals = details.get(key)
                for raw in vals if isinstance(vals, list) else []:
                    add(raw, mode, source)
    # One row per (path, mode, source, call): a call that reads a file twice is one fact.
    seen: set[tuple[str, str, str, str | None]] = set()
    unique = []
    for ev in out:
        fact = (ev.path, ev.mode, ev.source, ev.call_id)
        if fact not in seen:
            seen.add(fact)
            unique.append(ev)
            if len(unique) == MAX_PATHS_PER_EVENT:
                break
    return unique
