"""No control characters from session text in human output (issue 16, row 3).

Session files are written by agents running arbitrary tools: their text,
names, cwds and tool names may hold terminal escape sequences (set the
title, clear the screen, OSC 8 links, the one-character C1 CSI U+009B,
backspace, CR). `piwatch search`, `read`, `trace` and `sessions` against a
real piwatchd must show them escaped (`\\x1b`, `\\u009b`), on a terminal (a
real pty) and piped, with colour on and off; `--json` keeps the exact text,
JSON-escaped.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
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
}
EVIL_TEXT = " ".join(EVIL.values())
CWD = "/work/pro\x1b[31mj"
# Our own colour codes are the only escape sequences allowed in human output.
OURS = re.compile(r"\x1b\[(?:1;31|0|7|27)m")
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # anything else that is a control character


def evil_session() -> bytes:
    call = {"type": "toolCall", "id": "t1", "name": "bash\x1b]0;tool\x07", "arguments": {"command": "ls"}}
    return jsonl(
        v3_header("s-evil", CWD),
        {"type": "session_info", "id": "n1", "parentId": None, "name": f"name {EVIL['title']} {EVIL['c1']}"},
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
        assert "\\x1b]0;pwned\\x07" in plain and "\\u009b31m" in plain and "/work/pro\\x1b[31mj" in plain
    else:
        assert "\\x1b[2J\\x1b[H" in plain and "\\u009b31m\\u009d0;t\\u009c" in plain, plain
        assert "abc\\x08\\x08\\x08xyz" in plain and "x\\x7fy" in plain
        assert re.search(r"shown(\\x0d| )hidden", plain)  # snippets and previews fold a CR to a space


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
    else:
        assert EVIL["c1"] in text and EVIL["link"] in text
        assert EVIL["cr"] in text or (command != "read" and "shown hidden" in text)  # snippets fold a CR
