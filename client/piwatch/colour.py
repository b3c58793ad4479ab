"""Terminal colour for the CLI's human output, the way rg does it (pure).

Matches are highlighted with ANSI colour when the output is a terminal, and
printed plain, with no markers at all, when it is piped or redirected, so
`piwatch search ... | grep` sees the text as it is. `--color always|never`
overrides the guess; `NO_COLOR` (https://no-color.org) turns the automatic
colour off; `TERM=dumb` does too. An explicit `--color always` wins over both,
as in rg.

Text from session files is untrusted: with colour on it goes to a terminal, so
control characters in it are shown as visible escapes (`\\x1b`), never sent
raw where they could move the cursor or retitle the window.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TextIO

__all__ = ["COLOR_CHOICES", "MATCH", "RESET", "use_colour", "highlight", "visible_controls"]

COLOR_CHOICES = ("auto", "always", "never")
MATCH = "\x1b[1;31m"  # bold red, rg's colour for matches
RESET = "\x1b[0m"
# C0 controls except tab and newline, DEL, and C1 controls.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def use_colour(mode: str, stream: TextIO, env: Mapping[str, str]) -> bool:
    """Whether to colour output written to `stream`, for `--color MODE`."""
    if mode == "always":
        return True
    if mode == "never":
        return False
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def visible_controls(text: str) -> str:
    """`text` with control characters written as `\\xNN` escapes."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def highlight(text: str, spans: Iterable[Iterable[int]], colour: bool) -> str:
    """`text` with the `[start, end)` character spans in the match colour, or
    `text` unchanged (no markers) when `colour` is off. Spans that are out of
    range, empty or overlap an earlier one are ignored."""
    if not colour:
        return text
    out, pos = [], 0
    for span in sorted(tuple(s) for s in spans):
        if len(span) != 2:
            continue
        start, end = span
        if not (pos <= start < end <= len(text)):
            continue
        out += [visible_controls(text[pos:start]), MATCH, visible_controls(text[start:end]), RESET]
        pos = end
    out.append(visible_controls(text[pos:]))
    return "".join(out)
