"""Terminal colour like rg: matches in colour on a terminal, plain when piped,
`--color auto|always|never`, `NO_COLOR` respected (piwatch.colour, and the real CLI
on a pty and on a pipe)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import unicodedata

import pytest
from conftest import jsonl, msg, v3_header
from hypothesis import given, strategies as st
from piwatch.colour import ESCAPED, ESCAPED_END, MATCH, RESET, SafeText, highlight, use_colour, visible_controls

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Stream:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    "mode, tty, env, want",
    [
        ("auto", True, {}, True),
        ("auto", False, {}, False),
        ("auto", True, {"NO_COLOR": "1"}, False),
        ("auto", True, {"NO_COLOR": ""}, True),  # no-color.org: set *and not empty*
        ("auto", True, {"TERM": "dumb"}, False),
        ("always", False, {}, True),
        ("always", True, {"NO_COLOR": "1"}, True),  # an explicit flag wins, as in rg
        ("never", True, {}, False),
        ("never", False, {}, False),
    ],
)
def test_when_to_colour(mode, tty, env, want):
    assert use_colour(mode, Stream(tty), env) is want


def test_highlight_marks_each_span_and_nothing_when_off():
    assert highlight("the flaky test", [[4, 9]], True) == f"the {MATCH}flaky{RESET} test"
    assert highlight("the flaky test", [[4, 9]], False) == "the flaky test"
    assert highlight("ab", [[0, 1], [1, 2]], True) == f"{MATCH}a{RESET}{MATCH}b{RESET}"
    assert highlight("ab", [[1, 5], [2, 1], [0, 0]], True) == "ab"  # out of range, reversed, empty: ignored


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("title \x1b]0;pwned\x07", "title \\x1b]0;pwned\\x07"),  # set the window title
        ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear the screen, cursor home
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "\\x1b]8;;http://x\\x1b\\link\\x1b]8;;\\x1b\\"),  # OSC 8
        ("c1 \x9b2J and \x9d", "c1 \\u009b2J and \\u009d"),  # C1 CSI and OSC, one character each
        ("bs\x08\x08 cr\rdel\x7f nul\x00", "bs\\x08\\x08 cr\\x0ddel\\x7f nul\\x00"),
        ("tab\there\nline ünïcode", "tab\there\nline ünïcode"),  # kept as they are
        # Trojan Source: reads "admin", displays otherwise; isolates, marks, the Arabic letter mark
        ("is \u202enimda\u202c \u2066x\u2069 \u200f\u061c", "is \\u202enimda\\u202c \\u2066x\\u2069 \\u200f\\u061c"),
        ("z\u200bw\u200c\u200dj\u2060\u2064\ufeff", "z\\u200bw\\u200c\\u200dj\\u2060\\u2064\\ufeff"),  # zero-width
        ("tag\U000e0041\U000e007f", "tag\\U000e0041\\U000e007f"),  # invisible tag characters
        ("ls\u2028rm", "ls\\u2028rm"),  # a line separator, not a newline to the terminal
        ("עברית 日本語 ❤️ e\u0301", "עברית 日本語 ❤️ e\u0301"),  # right-to-left letters, emoji, combining marks
    ],
)
def test_control_characters_are_shown_escaped(raw, shown):
    assert visible_controls(raw) == shown
    assert highlight(raw, [], False) == shown  # colour off: escaped, no markers
    coloured = visible_controls(raw, True)
    assert coloured.replace(ESCAPED, "").replace(ESCAPED_END, "") == shown


def test_every_format_character_is_escaped():
    """Every format (Cf), line and paragraph separator character this Python's
    Unicode database knows is escaped, and nothing visible is: the rest are
    controls, tags or code points assigned after that database."""
    unsafe = {c for c in range(0x110000) if visible_controls(chr(c)) != chr(c)}
    known = {c for c in range(0x110000) if unicodedata.category(chr(c)) in ("Cf", "Zl", "Zp", "Cc")} - {9, 10}
    assert known <= unsafe
    assert {unicodedata.category(chr(c)) for c in unsafe - known} <= {"Cn"}  # unassigned here (tags, newer Cf)


def test_control_characters_never_reach_the_terminal_raw():
    evil = "ok \x1b]0;pwned\x07 \x1b[2J done\x9b"
    shown = highlight(evil, [[0, 2]], True)
    assert not ANSI.sub("", shown).count("\x1b") and "\x07" not in shown and "\x9b" not in shown
    assert ANSI.sub("", shown) == "ok \\x1b]0;pwned\\x07 \\x1b[2J done\\u009b"


class Sink:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)


@given(st.text(max_size=60), st.booleans())
def test_safe_text_escapes_everything_written_but_its_raw_parts(text, colour):
    sink = Sink()
    out = SafeText(sink, colour)  # type: ignore[arg-type]
    print(text, file=out)
    out.raw(MATCH + "x" + RESET)
    written = "".join(sink.parts)
    assert ANSI.sub("", written) == visible_controls(text) + "\nx"


@given(st.text(max_size=60), st.lists(st.tuples(st.integers(0, 70), st.integers(0, 70)), max_size=6))
def test_colour_only_adds_escapes(text, spans):
    plain = visible_controls(text)
    assert ANSI.sub("", highlight(text, spans, True)) == plain
    assert highlight(text, spans, False) == plain
    valid = [(a, b) for a, b in spans if 0 <= a < b <= len(text)]
    assert highlight(text, spans, True).count(MATCH) <= len(valid)


# -- the real CLI ---------------------------------------------------------------------------------------


@pytest.fixture
def db(index_dir):
    index_dir.write(
        "a.jsonl",
        jsonl(
            v3_header("s-1", "/work/proj"),
            msg("u1", None, "user", [{"type": "text", "text": "the flaky websocket reconnect"}]),
        ),
    )
    index_dir.index()
    return index_dir.db


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    return {**env, "TERM": "xterm", **extra}


def piped(db, *args: str, **env: str) -> str:
    cmd = [sys.executable, "-m", "piwatch.cli", "search", "websocket", "--db", str(db), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(**env), check=True, timeout=60).stdout


def on_a_terminal(db, *args: str, **env: str) -> str:
    """Run the CLI with stdout on a pseudo-terminal; return what it wrote there."""
    leader, follower = pty.openpty()
    cmd = [sys.executable, "-m", "piwatch.cli", "search", "websocket", "--db", str(db), *args]
    proc = subprocess.Popen(cmd, stdout=follower, stderr=subprocess.PIPE, env=_env(**env))
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            proc.kill()
            raise AssertionError("the CLI wrote nothing to the terminal within 60 s")
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    return b"".join(chunks).decode()


def test_piped_output_has_no_markers(db):
    out = piped(db)
    assert "the flaky websocket reconnect" in out and "\x1b" not in out and "**" not in out
    assert piped(db, "--color", "never") == out


def test_color_always_colours_a_pipe(db):
    out = piped(db, "--color", "always")
    assert f"the flaky {MATCH}websocket{RESET} reconnect" in out
    assert f"{MATCH}websocket{RESET}" in piped(db, "--color=always", NO_COLOR="1")


def test_a_terminal_gets_colour_unless_told_otherwise(db):
    assert f"{MATCH}websocket{RESET}" in on_a_terminal(db)
    for args, env in [((), {"NO_COLOR": "1"}), (("--color", "never"), {}), ((), {"TERM": "dumb"})]:
        out = on_a_terminal(db, *args, **env)
        assert "websocket" in out and "\x1b" not in out, (args, env)
