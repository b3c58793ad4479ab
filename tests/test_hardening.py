"""Hostile sources against piwatchd as a real process (issue 10, items 1-2).

Each class is tested with several variants: non-regular files named
`*.jsonl` (FIFO, socket, device, directory; new and replacing a known
session), entries the projection cannot store (deep nesting in several
entry types, a NUL in the header cwd, huge ids and values), and SIGTERM
while all of that is present. The daemon must keep indexing the other
files and the entries after a bad one, report each problem against its file
(with the byte offset) in `status`, quote source values only in short
excerpts, and stop promptly.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import FOLDER, PIWATCH, poll, q, search_cli, stretched
from hypothesis import given, strategies as st

from piwatchd.model.events import EXCERPT_CHARS, excerpt

pytestmark = pytest.mark.timeout(90)


def deep(n: int) -> dict:
    out: dict = {}
    cur = out
    for _ in range(n):
        cur["a"] = {}
        cur = cur["a"]
    return out


def session(sid: str, *entries, cwd: str = "/work/proj") -> bytes:
    return jsonl(v3_header(sid, cwd), msg(f"{sid}-a", None, "user", f"opening {sid}"), *entries)


def after(sid: str, parent: str, word: str) -> bytes:
    return jsonl(msg(f"{sid}-z", parent, "user", f"{word} arrives after the bad entry"))


def status_db(db) -> dict:
    out = subprocess.run([PIWATCH, "status", "--db", str(db), "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 2), out.stderr
    return json.loads(out.stdout)


def test_non_regular_files_never_block_and_are_reported(live):
    folder = live.root / FOLDER
    live.path.write_bytes(session("s-1"))
    known = folder / "known.jsonl"
    known.write_bytes(session("s-known"))
    d = live.daemon()
    poll(lambda: search_cli(live.db, "opening") and len(search_cli(live.db, "opening")) == 2)
    # New non-regular files, one of each kind, all named like sessions.
    os.mkfifo(folder / "fifo.jsonl")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "sock.jsonl"))
    os.symlink("/dev/zero", folder / "device.jsonl")
    (folder / "dir.jsonl").mkdir()
    # A known session replaced by a FIFO: never read, and its index is kept.
    known.unlink()
    os.mkfifo(known)
    d.sighup_and_wait_scan()  # whatever the watcher reported, a scan sees them too
    with open(live.path, "ab") as fh:
        fh.write(after("s-1", "s-1-a", "kestrel"))
    poll(lambda: search_cli(live.db, "kestrel") == [("s-1", "s-1-z")], message="append beside FIFOs")

    def reported():
        problems = {os.path.basename(p["path"]): p for p in status_db(live.db)["sources"]["problems"]}
        return problems if {"fifo.jsonl", "known.jsonl", "device.jsonl", "sock.jsonl"} <= set(problems) else None

    problems = poll(reported, 15, message="non-regular files reported in status")
    assert "FIFO, not a regular file" in problems["fifo.jsonl"]["error"]
    assert "device, not a regular file" in problems["device.jsonl"]["error"]
    assert problems["known.jsonl"]["state"] == "unreadable"
    assert ("s-known", "s-known-a") in search_cli(live.db, "opening")  # kept, not removed
    # The daemon's own status says so too, and SIGTERM is prompt.
    assert d.proc.poll() is None
    started = time.monotonic()
    assert d.stop() == 0
    assert time.monotonic() - started < stretched(10)
    sock.close()


@pytest.mark.parametrize(
    "name, bad",
    [
        (
            "tool-args",
            lambda p: msg(
                "s-b", p, "assistant", [{"type": "toolCall", "id": "t1", "name": "bash", "arguments": deep(300)}]
            ),
        ),
        (
            "display",
            lambda p: {
                "type": "custom_message",
                "id": "s-b",
                "parentId": p,
                "customType": "k",
                "display": deep(300),
                "content": "shown",
            },
        ),
        ("label-target", lambda p: {"type": "label", "id": "s-b", "parentId": p, "targetId": deep(300), "label": "x"}),
        (
            "tool-result",
            lambda p: msg(
                "s-b", p, "toolResult", [{"type": "text", "text": "r"}], toolCallId=deep(300), toolName=["x"]
            ),
        ),
        ("model", lambda p: {"type": "model_change", "id": "s-b", "parentId": p, "provider": deep(300)}),
    ],
)
def test_unstorable_entry_never_blocks_the_entries_after_it(live, name, bad):
    live.path.write_bytes(session("s-1"))
    d = live.daemon()
    poll(lambda: search_cli(live.db, "opening") == [("s-1", "s-1-a")])
    offset = live.path.stat().st_size
    with open(live.path, "ab") as fh:
        fh.write(jsonl(bad("s-1-a")))
    with open(live.path, "ab") as fh:
        fh.write(jsonl(msg("s-1-z", "s-b", "user", "osprey arrives after the bad entry")))
    poll(lambda: search_cli(live.db, "osprey") == [("s-1", "s-1-z")], message=f"entry after a bad {name}")
    ids = [
        r[0]
        for r in q(
            live.db,
            "SELECT entry_id FROM events WHERE session_key=(SELECT session_key FROM sessions WHERE session_id='s-1') ORDER BY ordinal",
        )
    ]
    assert ids == ["s-1-a", "s-b", "s-1-z"]  # the bad entry keeps its place in the tree
    st = status_db(live.db)
    recent = [r for r in st["diagnostics"]["recent"] if r["code"] == "unprojectable"]
    assert [r["byteOffset"] for r in recent] == [offset]
    assert st["sources"]["byState"]["ok"] == 1 and not st["sources"]["problems"]
    assert d.stop() == 0


def test_bad_headers_and_huge_values_stay_contained(live):
    folder = live.root / FOLDER
    # A NUL in the recorded cwd; a huge session id; an unsupported first line with a huge value.
    (folder / "nul.jsonl").write_bytes(session("s-nul", cwd="/work/pr\x00oj"))
    huge = "h" * 200_000
    (folder / "huge.jsonl").write_bytes(
        jsonl(v3_header("s-huge"), msg(huge, None, "user", "hugeid heron"), msg(huge, None, "user", "hugeid repeated"))
    )
    (folder / "other.jsonl").write_bytes(jsonl({"type": "x" * 1_000_000}))
    live.path.write_bytes(session("s-1"))
    d = live.daemon()
    poll(lambda: len(search_cli(live.db, "opening")) == 2, message="sessions beside bad headers")
    assert ("s-nul", "s-nul-a") in search_cli(live.db, "opening")
    with open(folder / "nul.jsonl", "ab") as fh:
        fh.write(after("s-nul", "s-nul-a", "pelican"))
    poll(lambda: search_cli(live.db, "pelican") == [("s-nul", "s-nul-z")], message="append after a NUL cwd")
    assert search_cli(live.db, "repeated") and not search_cli(live.db, "heron")  # the later copy wins, as in Pi
    out = subprocess.run(
        [PIWATCH, "status", "--db", str(live.db), "--json"], capture_output=True, text=True, timeout=60
    )
    # Every quoted source value is an excerpt: the whole status stays small.
    assert len(out.stdout) < 20_000, len(out.stdout)
    problems = json.loads(out.stdout)["sources"]["problems"]
    assert [os.path.basename(p["path"]) for p in problems] == ["other.jsonl"]
    assert "1000010 characters" in problems[0]["error"] or "characters)" in problems[0]["error"]
    assert d.stop() == 0
    assert "Traceback" not in d.log.read_text()


def test_an_unexpected_error_is_recorded_against_its_file(index_dir, monkeypatch):
    """The last line of defence: an error no rule foresaw (simulated in the
    projection) marks that file with the byte offset reached; the other files
    are indexed, and the file is retried only when it changes."""
    import piwatchd.ingest.chunks as ingest

    index_dir.write("good.jsonl", session("s-good"))
    bad = index_dir.write("bad.jsonl", session("s-bad") + jsonl(msg("s-bad-b", "s-bad-a", "user", "boom")))
    real = ingest.project_contained

    def explode(sid, result, *rules):
        if sid == "s-bad":
            raise KeyError("simulated")
        return real(sid, result, *rules)

    monkeypatch.setattr(ingest, "project_contained", explode)
    summary = index_dir.index()
    assert [p["path"] for p in summary["problems"]] == [str(bad)]
    assert "cannot index from byte 0: KeyError" in summary["problems"][0]["error"]
    assert index_dir.hits("opening") == [("s-good", "s-good-a", "user.text")]
    again = index_dir.index()  # unchanged: not retried, still reported
    assert again["changed"] == 0 and [p["path"] for p in again["problems"]] == [str(bad)]
    monkeypatch.setattr(ingest, "project_contained", real)
    with open(bad, "ab") as fh:
        fh.write(jsonl(msg("s-bad-c", "s-bad-b", "user", "recovered")))
    assert index_dir.index()["problems"] == []
    assert ("s-bad", "s-bad-c", "user.text") in index_dir.hits("recovered")


def _mode(path) -> int:
    return os.stat(path).st_mode & 0o777


def test_index_files_are_private(live):
    """Item 8: the index and everything beside it 0600, its new directory 0700;
    an older 0644 index is tightened at start; `index --once` alike."""
    live.path.write_bytes(session("s-1"))
    old_umask = os.umask(0o022)  # what a user's shell usually has
    try:
        d = live.daemon()
        poll(lambda: search_cli(live.db, "opening") == [("s-1", "s-1-a")])
        files = [live.db, *(live.db.with_name(live.db.name + s) for s in ("-wal", "-shm", ".lock"))]
        assert {str(p): _mode(p) for p in files} == {str(p): 0o600 for p in files}
        assert d.stop() == 0
        os.chmod(live.db, 0o644)
        d = live.daemon()
        assert _mode(live.db) == 0o600
        assert d.stop() == 0
        fresh = live.base / "fresh" / "nested" / "index.sqlite3"
        out = subprocess.run(
            [PIWATCH, "index", "--once", "--sessions", str(live.root), "--db", str(fresh)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert _mode(fresh) == 0o600 and _mode(fresh.parent) == 0o700
        assert not [p for p in fresh.parent.iterdir() if _mode(p) & 0o077]
    finally:
        os.umask(old_umask)


def test_a_caller_naming_a_fifo_as_its_session_file_blocks_nothing(live):
    """Item 1's client variant: `caller.sessionFile` makes the daemon look at
    that file (freshness wait, ingest hint); a FIFO there is refused, the
    request answers within its wait, and indexing goes on."""
    from piwatch.client import Client

    folder = live.root / FOLDER
    live.path.write_bytes(session("s-1"))
    d = live.daemon()
    poll(lambda: search_cli(live.db, "opening") == [("s-1", "s-1-a")])
    fifo = folder / "mine.jsonl"
    os.mkfifo(fifo)
    caller = {"cwd": "/work/proj", "sessionId": "s-fifo", "sessionFile": str(fifo)}
    with Client(live.db.parent / "d.sock", caller=caller, timeout=20) as c:
        started = time.monotonic()
        c.search("opening", wait=2)
        assert time.monotonic() - started < min(stretched(5), 15)  # blocked on the FIFO: the client's 20 s
    with open(live.path, "ab") as fh:
        fh.write(after("s-1", "s-1-a", "grebe"))
    poll(lambda: search_cli(live.db, "grebe") == [("s-1", "s-1-z")], message="append after a FIFO caller")
    poll(
        lambda: q(live.db, "SELECT state FROM sources WHERE path=?", str(fifo)) == [("unreadable",)],
        message="the FIFO recorded as unreadable",
    )
    started = time.monotonic()
    assert d.stop() == 0 and time.monotonic() - started < stretched(10)


@given(st.one_of(st.text(), st.binary(), st.integers(), st.lists(st.text()), st.dictionaries(st.text(), st.text())))
def test_excerpt_is_bounded_and_says_the_length(value):
    out = excerpt(value)
    assert len(out) <= EXCERPT_CHARS + 30
    if len(repr(value)) <= EXCERPT_CHARS:
        assert out == repr(value)
    else:
        assert out.endswith(" characters)")


def problems_by_name(db) -> dict[str, dict]:
    return {os.path.basename(p["path"]): p for p in status_db(db)["sources"]["problems"]}


def test_a_directory_named_like_a_session_is_reported_and_never_read(live):
    """Issue 33, row 7: a directory named `*.jsonl` (directly in a root, or in a
    project folder; there at start or made while piwatchd runs) is a source
    refused as not a regular file and shown in `status`; the files inside it
    are never indexed as sessions."""
    folder = live.root / FOLDER
    inner = session("s-inner", msg("s-inner-b", "s-inner-a", "user", "aardvark hides inside"))
    for d in (live.root / "flat.jsonl", folder / "nested.jsonl"):
        d.mkdir()
        (d / "inner.jsonl").write_bytes(inner)
    live.path.write_bytes(session("s-1"))
    live.daemon()
    late = folder / "late.jsonl"
    late.mkdir()
    (late / "inner.jsonl").write_bytes(inner)
    with open(live.path, "ab") as fh:  # hinted after the inner file: ingested no sooner than it would be
        fh.write(after("s-1", "s-1-a", "bittern"))
    poll(lambda: search_cli(live.db, "bittern") == [("s-1", "s-1-z")], message="the append after the directories")
    names = {"flat.jsonl", "nested.jsonl", "late.jsonl"}

    def reported():
        problems = problems_by_name(live.db)
        return problems if names <= set(problems) else None

    problems = poll(reported, 15, message="the directories reported")
    for name in names:
        assert problems[name]["state"] == "unreadable" and "a directory, not a regular file" in problems[name]["error"]
    assert search_cli(live.db, "aardvark") == []
    assert not q(live.db, "SELECT path FROM sources WHERE path LIKE '%inner.jsonl'")


def _without_dac_override(live, monkeypatch) -> None:
    """Root reads a chmod-000 file anyway: run piwatchd as root without the
    capabilities that bypass file permissions (its own files are root's)."""
    import shutil

    import helpers.live

    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv(1) is not installed: chmod 000 does not stop root")
    wrapper = live.base / "piwatchd-no-dac"
    wrapper.write_text(
        f'#!/bin/sh\nexec {setpriv} --bounding-set -dac_override,-dac_read_search -- {helpers.live.PIWATCHD} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setattr(helpers.live, "PIWATCHD", str(wrapper))


def test_a_session_made_readable_is_indexed_without_waiting_for_a_scan(live, monkeypatch):
    """Issue 33, row 7: `chmod` on an unreadable session file (an attribute
    change, IN_ATTRIB) is a hint: it is indexed within seconds, not at the next
    scan (60 s here), and no scan ran meanwhile."""
    if os.geteuid() == 0:
        _without_dac_override(live, monkeypatch)
    live.path.write_bytes(session("s-1"))
    d = live.daemon()
    hidden = live.root / FOLDER / "hidden.jsonl"
    fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0)  # unreadable from its first byte
    os.write(fd, session("s-hidden", msg("s-hidden-b", "s-hidden-a", "user", "quagga behind a lock")))
    os.close(fd)
    poll(lambda: problems_by_name(live.db).get("hidden.jsonl"), 15, message="the unreadable file reported")
    assert search_cli(live.db, "quagga") == []
    scans = d.state().scans
    os.chmod(hidden, 0o644)
    poll(lambda: search_cli(live.db, "quagga") == [("s-hidden", "s-hidden-b")], 15, message="indexed once readable")
    assert d.state().scans == scans  # the hint did it, not a scan
    assert "hidden.jsonl" not in problems_by_name(live.db)


@pytest.mark.parametrize(
    "path, session, folder",
    [
        ("/s/a.jsonl", True, False),  # a flat custom dir
        ("/s/--p--/a.jsonl", True, False),  # Pi's default layout
        ("/s/--p--", False, True),
        ("/s/x.jsonl/a.jsonl", False, False),  # inside a directory with a session's name
        ("/s/--p--/x.jsonl/a.jsonl", False, False),
        ("/s/--p--/deep/a.jsonl", False, False),  # deeper than Pi keeps sessions
        ("/s/--p--/.a.jsonl", False, False),
        ("/s/--p--/a.json", False, False),
        ("/s", False, False),
        ("/sx/a.jsonl", False, False),  # beside the root, not in it
        ("/other/a.jsonl", False, False),
    ],
)
def test_where_pi_keeps_sessions(path, session, folder):
    from piwatchd.source.discovery import in_layout, is_sessions_folder

    for root in ("/s", "/s/"):
        assert in_layout(root, path) is session
        assert is_sessions_folder(root, path) is folder
