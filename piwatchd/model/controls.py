"""Control entries -> their typed event's meta (pure): model and thinking
changes, context edits, custom state, usage, leaves, and oh-my-pi's mode
changes, rule injections, `/clear` boundaries and session set-up. They carry
no searchable text: `session_init`'s system prompt and task are never
indexed, nor a custom entry's `data` unless its type is registered
(`extractors.py`; `project.py` applies both tables).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["CONTROLS", "MAX_NAMES", "nonempty"]

# Rule and tool names kept in an event's meta: enough to filter by, bounded for a hostile entry.
MAX_NAMES = 64

_Meta = dict[str, Any]


def nonempty(value: Any) -> str | None:
    """`value` when it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)][:MAX_NAMES] if isinstance(value, list) else []


def _model_change(data: _Meta, meta: _Meta) -> None:
    meta["provider"] = data.get("provider")
    meta["modelId"] = data.get("modelId") or data.get("model")


def _thinking_level_change(data: _Meta, meta: _Meta) -> None:
    meta["thinkingLevel"] = data.get("thinkingLevel")


def _context_edit(data: _Meta, meta: _Meta) -> None:
    meta["targetId"] = data.get("targetId")
    meta["omits"] = data.get("replacement") is None


def _custom(data: _Meta, meta: _Meta) -> None:
    meta["customType"] = data.get("customType")


def _usage(data: _Meta, meta: _Meta) -> None:
    for key in ("kind", "provider", "model"):
        if nonempty(data.get(key)):
            meta[key] = data[key]


def _leaf(data: _Meta, meta: _Meta) -> None:
    meta["targetId"] = data.get("targetId")


def _mode_change(data: _Meta, meta: _Meta) -> None:
    # omp's mode (`plan`, ...); its `data` (a plan file's path, ...) is state, not content.
    meta["mode"] = nonempty(data.get("mode"))


def _ttsr_injection(data: _Meta, meta: _Meta) -> None:
    meta["injectedRules"] = _names(data.get("injectedRules"))


def _session_init(data: _Meta, meta: _Meta) -> None:
    # The system prompt and the task are prompts, never event content: only the tool names.
    meta["tools"] = _names(data.get("tools"))


def _reset_boundary(data: _Meta, meta: _Meta) -> None:
    # omp's `/clear`: the model's context starts after it; the payload-free marker is the event.
    meta["reset"] = True


CONTROLS: dict[str, Callable[[_Meta, _Meta], None]] = {
    "model_change": _model_change,
    "thinking_level_change": _thinking_level_change,
    "context_edit": _context_edit,
    "custom": _custom,
    "usage": _usage,
    "leaf": _leaf,
    "mode_change": _mode_change,
    "ttsr_injection": _ttsr_injection,
    "session_init": _session_init,
    "reset_boundary": _reset_boundary,
}
