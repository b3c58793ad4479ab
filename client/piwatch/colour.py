"""Terminal colour for the CLI's human output, the way rg does it (pure).

Matches are highlighted with ANSI colour when the output is a terminal, and
printed plain, with no markers at all, when it is piped or redirected, so
`piwatch search ... | grep` sees the text as it is. `--color always|never`
overrides the guess; `NO_COLOR` (https://no-color.org) turns the automatic
colour off; `TERM=dumb` does too. An explicit `--color always` wins over both,
as in rg.

Text from session files is untrusted: on a terminal or piped (a pipe often
ends on a terminal: `| less -R`, `| tail`), with colour on or off, control
characters in it are shown as visible escapes (`\\x1b`, `\\u009b`), never sent
raw where they could move the cursor, clear the screen, retitle the window or
hide a link; so are the invisible format characters (bidi overrides and
isolates, zero-width spaces and joiners, tags: `\\u202e`, `\\u200b`,
`\\U000e0041`), which make text display other than it reads ("Trojan
Source"). Human output is written through `SafeText`, which escapes
everything but the colour codes this module adds itself; with colour on the
escapes are shown in reverse video so they stand out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TextIO

__all__ = [
    "COLOR_CHOICES",
    "ESCAPED",
    "ESCAPED_END",
    "MATCH",
    "RESET",
    "UNSAFE",
    "SafeText",
    "highlight",
    "use_colour",
    "visible_controls",
    "write_raw",
]

COLOR_CHOICES = ("auto", "always", "never")
MATCH = "\x1b[1;31m"  # bold red, rg's colour for matches
RESET = "\x1b[0m"
ESCAPED = "\x1b[7m"  # reverse video around a shown escape (colour on); does not end a match colour
ESCAPED_END = "\x1b[27m"
# What session text may never send to a terminal raw, the one definition (the Pi extension's
# history-view.ts mirrors it; tests/test_pi_extension.py compares the two): C0 controls except tab
# and newline, DEL and C1 controls, which move the cursor, clear, retitle; and every format
# character (Unicode 17's Cf: bidi embeddings, overrides, isolates and marks, zero-width spaces and
# joiners, word joiner, BOM, tags, soft hyphen) with the line and paragraph separators and the
# whole tag block, invisible or reordering, so text displays other than it reads (CVE-2021-42574).
UNSAFE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    r"\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    r"\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f]"
)


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


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"  # as Python writes them


def visible_controls(text: str, colour: bool = False) -> str:
    """`text` with the `UNSAFE` characters written as `\\xNN` (C0, DEL),
    `\\uNNNN` (C1, format characters) or `\\UNNNNNNNN` (tags) escapes; in
    reverse video when `colour`."""
    if colour:
        return UNSAFE.sub(lambda m: ESCAPED + _escape(m.group()) + ESCAPED_END, text)
    return UNSAFE.sub(lambda m: _escape(m.group()), text)


def highlight(text: str, spans: Iterable[Iterable[int]], colour: bool) -> str:
    """`text` with control characters escaped and, when `colour`, the
    `[start, end)` character spans in the match colour (no markers at all
    when off). Spans that are out of range, empty or overlap an earlier one
    are ignored."""
    if not colour:
        return visible_controls(text)
    out, pos = [], 0
    for span in sorted(tuple(s) for s in spans):
        if len(span) != 2:
            continue
        start, end = span
        if not (pos <= start < end <= len(text)):
            continue
        out += [visible_controls(text[pos:start], True), MATCH, visible_controls(text[start:end], True), RESET]
        pos = end
    out.append(visible_controls(text[pos:], True))
    return "".join(out)


class SafeText:
    """A text stream for human output: everything written is escaped with
    `visible_controls`, except what goes through `raw` (text this program
    escaped itself, with its own colour codes). `print(..., file=SafeText(...))`
    works as with the stream it wraps."""

    def __init__(self, stream: TextIO, colour: bool) -> None:
        self.stream = stream
        self.colour = colour

    def write(self, text: str) -> int:
        return self.stream.write(visible_controls(text, self.colour))

    def raw(self, text: str) -> int:
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()


def write_raw(out: TextIO | SafeText, text: str) -> None:
    """Write already-escaped `text` (say, from `highlight`) as it is: through
    `SafeText.raw`, or to a plain stream."""
    (out.raw if isinstance(out, SafeText) else out.write)(text)
