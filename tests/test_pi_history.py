"""`/history` end to end: the real Pi in a pseudo-terminal (1.6.0, and 0.73.1
for the main path; its own interactive UI, read through a VT emulator as a
person sees it), with the extension installed by `piwatch pi install`, against a real `piwatchd` over
sessions written by Pi's own SessionManager (the world of
tests/test_pi_extension.py: this project's sessions mention `zorblax`, and so
does one of another project, which must never show).

Typing searches as you type; Enter puts a reference into Pi's editor and
nothing is sent to the model; Escape closes the overlay; control, bidi and
zero-width characters in session text reach the screen escaped; a daemon that is down is said so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from helpers.pi_terminal import ENTER, ESCAPE, PiTerminal
from helpers.world import wait_for
from piwatch.client import Client
from test_pi_extension import WORD, _env, pitools, seeded, world

__all__ = ["world"]  # the module-scoped fixture, shared with tests/test_pi_extension.py

pytestmark = [pytest.mark.pi, pytest.mark.slow, pytest.mark.timeout(600)]

ESCAPED_SID = "hist-escape-0001"
UNIT = Path(__file__).resolve().parent / "pi_e2e" / "history_unit.mjs"


def _open_pi(world, version: str = "1.6.0", **env: str) -> PiTerminal:
    env = {"PI_CODING_AGENT_DIR": str(world.agent), "PIWATCH_SOCKET": str(world.sock), **env}
    pi = PiTerminal(world.proj, _env(**env), version=version)
    try:
        # The banner and the editor's frame.
        pi.wait_for(lambda s: f"v{version}" in s and s.count("─" * 20) >= 2, timeout=60, what="Pi's interactive screen")
    except BaseException:
        pi.close()
        raise
    return pi


def _open_history(pi: PiTerminal) -> str:
    pi.type("/history", per_key=0.02)
    pi.type(ESCAPE)  # close the command autocomplete, keep the text
    pi.pump(0.2)
    pi.type(ENTER)
    return pi.wait_for(lambda s: "/history ·" in s and "Esc close" in s, what="the /history overlay")


def _editor_text(pi: PiTerminal) -> str:
    """The editor's contents: the screen rows between its two frame lines, joined."""
    rows = pi.screen_text().splitlines()
    frames = [i for i, r in enumerate(rows) if r.startswith("─" * 20)]
    a, b = frames[-2], frames[-1]
    return "".join(r.strip() for r in rows[a + 1 : b])


@pytest.fixture(scope="module")
def escaped_session(world):
    """A hand-written session of this project whose text holds terminal escapes."""
    folder = next(Path(s["file"]).parent for s in seeded(world, world.proj))
    header = {
        "type": "session",
        "version": 3,
        "id": ESCAPED_SID,
        "timestamp": "2026-05-02T09:00:00.000Z",
        "cwd": str(world.proj),
    }
    user = {
        "type": "message",
        "id": "esc00001",
        "parentId": None,
        "timestamp": "2026-05-02T09:00:01.000Z",
        "message": {
            "role": "user",
            "content": "quaffle \u202ed\u202c\u200bw \x1b[2J\x1b]0;pwned\x07 cleared the screen",
            "timestamp": 1777712401000,
        },
    }
    path = folder / f"2026-05-02T09-00-00-000Z_{ESCAPED_SID}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in (header, user)))

    def found() -> bool:
        with Client(world.sock, timeout=5, caller={"all": True}) as c:
            return bool(c.search("quaffle").hits)

    wait_for(found, timeout=30)
    return path


@pytest.mark.parametrize("version", ["1.6.0", "0.73.1"])
def test_typing_searches_this_project_and_enter_inserts_a_reference(world, version):
    ours = {s["id"] for s in seeded(world, world.proj)}
    theirs = {s["id"] for s in seeded(world, world.other)}
    with _open_pi(world, version) as pi:
        _open_history(pi)
        pi.type(WORD, per_key=0.03)
        text = pi.wait_for(lambda s: re.search(r"\d+\+? hits", s) is not None, what="hits for the typed word")
        capture = os.environ.get("PIWATCH_HISTORY_CAPTURE")  # the README's pictures come from here
        assert "websocket reconnect keeps timing out" in text
        assert "vault path" not in text and "Other project" not in text  # the other project's session
        assert "4 hits" in text

        pi.type(ENTER)
        pi.wait_for(lambda s: "Esc close" not in s, what="the overlay to close")
        edited = pi.wait_for(
            lambda s: "[history:" in _editor_text(pi), what="the reference in the editor"
        ) and _editor_text(pi)
        if capture and version == "1.6.0":
            Path(capture).write_text(f"{text}\n\n-- after Enter --\n\n{pi.screen_text()}\n")
        m = re.search(r"\[history: ([0-9a-f-]+)/([0-9a-f]+)\] (.+)", edited)
        assert m, edited
        sid, eid = m.group(1), m.group(2)
        assert sid in ours and sid not in theirs
        seeded_ids = next(s["ids"] for s in seeded(world, world.proj) if s["id"] == sid)
        assert eid in seeded_ids.values()
        assert WORD in m.group(3)

    # Nothing was sent to the model: Pi wrote no message to any new session file.
    sessions = world.agent / "sessions"
    known = {s["file"] for s in world.seeded["sessions"]}
    for f in sessions.rglob("*.jsonl"):
        if str(f) in known or ESCAPED_SID in f.name:
            continue
        assert '"role":"user"' not in f.read_text().replace(" ", ""), f


def test_escape_closes_and_each_keystroke_updates(world):
    with _open_pi(world) as pi:
        _open_history(pi)
        pi.type("changelog", per_key=0.03)
        pi.wait_for(lambda s: "Unrelated: update the changelog" in s, what="the changelog hit")
        for _ in "changelog":
            pi.type("\x7f", per_key=0.03)
        pi.type(WORD[:4], per_key=0.03)  # a prefix: not a whole word, so nothing or other hits
        pi.type(WORD[4:], per_key=0.03)
        text = pi.wait_for(lambda s: "websocket reconnect" in s, what="hits for the new query")
        assert "Unrelated: update the changelog" not in text  # the old answer is gone
        pi.type(ESCAPE)
        after = pi.wait_for(lambda s: "Esc close" not in s, what="the overlay to close")
        assert "websocket reconnect" not in after
        assert "[history:" not in _editor_text(pi)


def test_control_characters_reach_the_screen_escaped(world, escaped_session):
    with _open_pi(world) as pi:
        _open_history(pi)
        pi.type("quaffle", per_key=0.03)
        text = pi.wait_for(lambda s: "cleared the screen" in s, what="the escaped hit")
        assert "\\x1b[2J" in text and "\\x07" in text  # shown as text, not obeyed
        assert "\\u202ed\\u202c\\u200bw" in text  # bidi and zero-width characters shown, not obeyed
        assert "/history ·" in text  # the screen was not cleared
        assert pi.screen.title != "pwned"  # the OSC title sequence was not obeyed either


def test_a_daemon_that_is_down_is_said_so(world):
    gone = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwh-")) / "none.sock"
    try:
        with _open_pi(world, PIWATCH_SOCKET=str(gone)) as pi:
            _open_history(pi)
            pi.type(WORD, per_key=0.02)
            text = pi.wait_for(lambda s: "piwatchd is not running" in s, what="the daemon-down message")
            assert "Esc close" in text  # still the overlay, not a crash
    finally:
        shutil.rmtree(gone.parent, ignore_errors=True)


def test_the_overlay_component(world):
    """history.ts with Pi's own pi-tui and a search whose answers the script orders
    (out of order, failing), over the copy `piwatch pi install` put in place."""
    proc = subprocess.run(
        [pitools.find_node(), str(UNIT), "--ext", str(world.agent / "extensions" / "piwatch")],
        cwd=UNIT.parent,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    cases = json.loads(proc.stdout)["cases"]
    assert len(cases) == 7
    failed = {name: c["detail"] for name, c in cases.items() if not c["ok"]}
    assert not failed, failed
