"""No control characters from session text in human output (issue 16, row 3).

Session files are written by agents running arbitrary tools: their text,
names, cwds and tool names may hold terminal escape sequences (set the
title, clear the screen, OSC 8 links, the one-character C1 CSI U+009B,
backspace, CR). `piwatch search`, `read`, `trace` and `sessions` against a
real piwatchd must show them escaped (`\\x1b`, `\\u009b`), on a terminal (a
real pty) and piped, with colour on and off; `--json` keeps the exact text,
JSON-escaped. So must bidi overrides and isolates, zero-width and tag
characters (issue 33, row 6: "Trojan Source"), there and in `--follow`.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess

import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import FOLDER, PIWATCH, poll, search_cli

pytestmark = pytest.mark.timeout(180)

EVIL = {
    "title": "\x1b]0;pwned\x07",
    "clear": "\x1b[2J\x1b[H",
    "link": "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "c1": "\x9b31m\x9d0;t\x9c",
    "bs": "abc\x08\x08\x08xyz",
    "cr": "shown\rhidden",
    "del": "x\x7fy",
    # Trojan Source: bidi overrides, isolates and marks, zero-width and tag characters.
    "bidi": "is \u202enimda\u202c \u2066iso\u2069 \u200e\u200f\u061c",
    "zw": "z\u200bw\u200c\u200dj\u2060\ufeffx",
    "tag": "tag\U000e0041\U000e007f",
}
EVIL_TEXT = " ".join(EVIL.values())
CWD = "/work/pro\x1b[31mj\u202e"
# Our own colour codes are the only escape sequences allowed in human output.
OURS = re.compile(r"\x1b\[(?:1;31|0|7|27)m")
# Anything else that is a control character, or a bidi, zero-width or tag character.
RAW = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\U000e0000-\U000e007f]"
)
BIDI_SHOWN = (
    "is \\u202enimda\\u202c \\u2066iso\\u2069 \\u200e\\u200f\\u061c",
    "z\\u200bw\\u200c\\u200dj\\u2060\\ufeffx",
)


def evil_session() -> bytes:
    call = {"type": "toolCall", "id": "t1", "name": "bash\x1b]0;tool\x07", "arguments": {"command": "ls"}}
    return jsonl(
        v3_header("s-evil", CWD),
        {
            "type": "session_info",
            "id": "n1",
            "parentId": None,
            "name": f"name {EVIL['title']} {EVIL['c1']} {EVIL['bidi']}",
        },
        msg("u1", "n1", "user", f"quokka says {EVIL_TEXT}"),
        msg("a1", "u1", "assistant", [{"type": "text", "text": f"quokka reply {EVIL_TEXT}"}, call]),
        msg(
            "r1",
            "a1",
            "toolResult",
            [{"type": "text", "text": f"quokka output {EVIL_TEXT}"}],
            toolCallId="t1",
            toolName="bash\x1b]0;tool\x07",
            isError=False,
        ),
    )


COMMANDS = {
    "search": ["search", "quokka"],
    "search-sessions": ["search", "quokka", "--sessions"],
    "read": ["read", "s-evil", "a1", "--before", "2", "--after", "1"],
    "trace": ["trace", "s-evil", "a1"],
    "sessions": ["sessions"],
}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    return {**env, "TERM": "xterm", **extra}


def piped(args: list[str], **env: str) -> str:
    out = subprocess.run([PIWATCH, *args], capture_output=True, text=True, env=_env(**env), timeout=60)
    assert out.returncode == 0, out.stderr
    assert not RAW.search(OURS.sub("", out.stderr)), out.stderr
    return out.stdout


def on_a_terminal(args: list[str], **env: str) -> str:
    """Run the CLI with stdout and stderr on a pseudo-terminal; what it wrote there."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([PIWATCH, *args], stdout=follower, stderr=follower, env=_env(**env))
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
    assert proc.wait(timeout=60) == 0
    # The pty turns \n into \r\n; that CR is the terminal's, not session text.
    return b"".join(chunks).decode().replace("\r\n", "\n")


def strings(value) -> list[str]:
    """Every string in a decoded JSON value."""
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [s for item in items for s in strings(item)]


@pytest.fixture(scope="module")
def daemon():
    import shutil
    import tempfile
    from pathlib import Path

    from helpers.live import Daemon

    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwt-"))
    (base / "sessions" / FOLDER).mkdir(parents=True)
    (base / "sessions" / FOLDER / "evil.jsonl").write_bytes(evil_session())
    d = Daemon(base / "sessions", base / "index.sqlite3").start()
    try:
        poll(lambda: len(search_cli(d.db, "quokka")) == 3, 30, message="the evil session indexed")
        yield d
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    "where, colour",
    [
        ("pty", ()),
        ("pty", ("--color", "never")),
        ("pty", ("--color", "always")),
        ("pipe", ()),
        ("pipe", ("--color", "always")),
    ],
)
def test_human_output_never_carries_raw_control_characters(daemon, command, where, colour):
    args = [*COMMANDS[command], "--all", "--socket", str(daemon.socket), *colour]
    out = on_a_terminal(args) if where == "pty" else piped(args)
    assert not RAW.search(OURS.sub("", out)), (command, where, colour, out)
    coloured = bool(OURS.search(out))
    assert coloured == (colour != ("--color", "never") and (where == "pty" or colour == ("--color", "always")))
    plain = OURS.sub("", out)
    # The escapes are visible, not dropped: the reader sees that something was there.
    if command == "sessions":
        assert "\\x1b]0;pwned\\x07" in plain and "\\u009b31m" in plain and "/work/pro\\x1b[31mj\\u202e" in plain
        assert BIDI_SHOWN[0] in plain
    else:
        assert "\\x1b[2J\\x1b[H" in plain and "\\u009b31m\\u009d0;t\\u009c" in plain, plain
        assert "abc\\x08\\x08\\x08xyz" in plain and "x\\x7fy" in plain
        assert re.search(r"shown(\\x0d| )hidden", plain)  # snippets and previews fold a CR to a space
        assert all(shown in plain for shown in BIDI_SHOWN) and "tag\\U000e0041\\U000e007f" in plain, plain


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("where", ["pty", "pipe"])
def test_json_keeps_the_exact_text_escaped(daemon, command, where):
    args = [*COMMANDS[command], "--all", "--socket", str(daemon.socket), "--json"]
    out = on_a_terminal(args) if where == "pty" else piped(args)
    assert not RAW.search(out), out  # JSON-escaped: \u001b, \u009b
    result = json.loads(out)
    text = "\n".join(strings(result))
    if command == "sessions":
        (item,) = result["sessions"]
        assert item["cwd"] == CWD and EVIL["title"] in item["name"] and EVIL["c1"] in item["name"]
        assert EVIL["bidi"] in item["name"]
    else:
        assert EVIL["c1"] in text and EVIL["link"] in text
        assert EVIL["bidi"] in text and EVIL["zw"] in text and EVIL["tag"] in text
        assert EVIL["cr"] in text or (command != "read" and "shown hidden" in text)  # snippets fold a CR


class Following:
    """`piwatch search --follow` with stdout and stderr on a pty or a pipe; `until`
    reads what it writes until a condition holds, `stop` ends it with SIGINT."""

    def __init__(self, args: list[str], where: str) -> None:
        self.fd, follower = pty.openpty() if where == "pty" else os.pipe()
        self.proc = subprocess.Popen([PIWATCH, *args], stdout=follower, stderr=follower, env=_env())
        os.close(follower)
        self.chunks: list[bytes] = []

    def text(self) -> str:
        return b"".join(self.chunks).decode().replace("\r\n", "\n")  # the pty's CR, not session text

    def until(self, done, what: str) -> None:
        def step() -> bool:
            if select.select([self.fd], [], [], 0.1)[0]:
                self.chunks.append(os.read(self.fd, 65536))
            return done(self.text())

        poll(step, 60, message=what)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(timeout=20) == 130

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=20)
        os.close(self.fd)


@pytest.mark.parametrize("where", ["pty", "pipe"])
@pytest.mark.parametrize("colour", [("--color", "always"), ("--color", "never")])
def test_follow_shows_new_hits_escaped(daemon, where, colour):
    eid = f"f-{where}-{colour[1]}"
    text = f"quokka follows {eid} {EVIL['bidi']} {EVIL['zw']} {EVIL['tag']} {EVIL['title']}"
    follow = Following(["search", "quokka", "--follow", "--all", "--socket", str(daemon.socket), *colour], where)
    try:
        follow.until(lambda out: "following" in out, "the follow to start")
        with (daemon.root / FOLDER / "evil.jsonl").open("ab") as f:
            f.write(jsonl(msg(eid, "r1", "user", text)))
        follow.until(lambda out: "\\U000e007f" in OURS.sub("", out).partition(eid)[2], "the followed hit")
        follow.stop()
    finally:
        follow.close()
    out = follow.text()
    plain = OURS.sub("", out)
    assert not RAW.search(plain), out
    assert all(shown in plain for shown in BIDI_SHOWN) and "\\x1b]0;pwned\\x07" in plain, out
    assert bool(OURS.search(out)) == (colour[1] == "always")
