"""Index and search end to end: real files, real SQLite, the real CLI."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest
from conftest import jsonl, msg, v3_header

from piwatchd.ingest.ingestor import owner_rank
from piwatchd.model.project import HEAD_CHARS, MAX_FRAGMENT_CHARS


def session(sid, cwd, *entries, **hdr):
    return jsonl(v3_header(sid, cwd, **hdr), *entries)


def basic(sid="s-1", cwd="/work/proj"):
    return session(
        sid,
        cwd,
        msg("u1", None, "user", [{"type": "text", "text": "please fix the flaky websocket reconnect"}]),
        msg(
            "a1",
            "u1",
            "assistant",
            [
                {"type": "thinking", "thinking": "hidden websocket musing"},
                {"type": "text", "text": "Looking at the websocket code"},
                {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "grep -rn reconnect src/"}},
            ],
            stopReason="toolUse",
        ),
        msg(
            "r1",
            "a1",
            "toolResult",
            [{"type": "text", "text": "src/ws.ts:10: reconnect()"}],
            toolCallId="c1",
            toolName="bash",
            isError=True,
        ),
    )


def test_cli_index_and_search_human_and_json(index_dir):
    index_dir.write("a.jsonl", basic())
    env = {**os.environ, "PIWATCH_CONFIG": str(index_dir.root / "none.toml")}
    cli = [sys.executable, "-m", "piwatch.cli"]
    out = subprocess.run(
        cli + ["index", "--once", "--sessions", str(index_dir.root), "--db", str(index_dir.db)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert "indexed 1 files" in out and "3 events" in out
    human = subprocess.run(
        cli + ["search", "websocket reconnect", "--db", str(index_dir.db)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert "session s-1  entry u1" in human and "user.text" in human and "/work/proj" in human
    # Piped: the match is plain text, no markers (colour is for terminals: tests/test_colour.py).
    assert "please fix the flaky websocket reconnect" in human and "2026-05-01 10:00:01" in human
    assert "**" not in human and "\x1b" not in human
    data = json.loads(
        subprocess.run(
            cli + ["search", "websocket", "--db", str(index_dir.db), "--json"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
    )
    hit = data["hits"][0]
    assert {"sessionId", "entryId", "evidence", "timestamp", "cwd", "snippet", "spans"} <= set(hit)
    s, e = hit["spans"][0]
    assert hit["snippet"][s:e].lower() == "websocket"
    bad = subprocess.run(cli + ["search", '"', "--db", str(index_dir.db)], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "no searchable words" in bad.stderr and "Traceback" not in bad.stderr


def test_events_coalesce_fragments_and_thinking_is_not_searchable(index_dir):
    index_dir.write("a.jsonl", basic())
    index_dir.index()
    hits = index_dir.search("websocket").hits
    # a1 has a text fragment matching; thinking is never indexed.
    assert [(h.entry_id, h.evidence.kind) for h in hits if h.entry_id == "a1"] == [("a1", "assistant.text")]
    assert index_dir.hits("musing") == []
    both = [h for h in index_dir.search("reconnect").hits if h.entry_id == "a1"]
    assert len(both) == 1 and both[0].evidence.kind == "tool.call"


def test_filters(index_dir):
    index_dir.write("a.jsonl", basic("s-a", "/work/proj"))
    index_dir.write("b.jsonl", basic("s-b", "/work/proj2"), folder="--work-proj2--")
    index_dir.write("c.jsonl", basic("s-c", "/work/proj/sub"), folder="--work-proj-sub--")
    index_dir.index()

    def sessions(**kw):
        return sorted({h[0] for h in index_dir.hits("reconnect", **kw)})

    assert sessions() == ["s-a", "s-b", "s-c"]
    assert sessions(cwdUnder="/work/proj") == ["s-a", "s-c"]  # not /work/proj2
    assert sessions(cwd="/work/proj") == ["s-a"]
    assert sessions(sessionId=["s-b"]) == ["s-b"]

    def kinds(**kw):
        return sorted({h[2] for h in index_dir.hits("reconnect", sessionId=["s-a"], **kw)})

    assert kinds(kind=["tool.result"]) == ["tool.result"]
    assert kinds(role=["user"]) == ["user.text"]
    assert kinds(tool=["bash"]) == ["tool.call", "tool.result"]
    assert kinds(isError=True) == ["tool.result"]
    assert kinds(eventType=["compaction"]) == []
    assert kinds(sinceMs=1_800_000_000_000) == []
    assert kinds(untilMs=1_800_000_000_000) != []


def test_results_are_stable_and_paginated(index_dir):
    for i in range(12):
        index_dir.write(
            f"{i}.jsonl",
            session(
                f"s-{i:02d}",
                "/w",
                msg("u", None, "user", "same words here"),
                msg("a", "u", "assistant", [{"type": "text", "text": "ok"}]),
            ),
        )
    index_dir.index()
    first = index_dir.search("same words", limit=5)
    again = index_dir.search("same words", limit=5)
    assert first.hits == again.hits and first.has_more
    with index_dir.client() as c:
        pages = [c.search("same words", limit=5, offset=o).hits for o in (0, 5, 10)]
    ids = [h.session_id for page in pages for h in page]
    assert len(ids) == 12 and len(set(ids)) == 12
    assert len(index_dir.search("same words", limit=200).hits) == 12  # the maximum limit is usable


def test_phrase_never_matches_across_the_omission_marker(index_dir):
    filler = "filler " * ((MAX_FRAGMENT_CHARS // 7) + 2000)
    text = "start " + filler[: HEAD_CHARS - 20] + " alphaword " + filler + " betaword final status line"
    index_dir.write("a.jsonl", session("s", "/w", msg("u", None, "user", text)))
    index_dir.index()
    assert index_dir.hits("alphaword") == [("s", "u", "user.text")]  # in the head
    assert index_dir.hits("final status line") == [("s", "u", "user.text")]  # in the tail
    assert index_dir.hits('"alphaword betaword"') == []
    assert index_dir.hits('"filler betaword"') == [("s", "u", "user.text")]  # both inside the tail


def test_torn_last_line_waits_for_its_newline(index_dir):
    body = session("s", "/w", msg("u", None, "user", "first words"))
    torn = json.dumps(msg("a", "u", "assistant", [{"type": "text", "text": "completed later"}])).encode()
    path = index_dir.write("a.jsonl", body + torn[:30])
    index_dir.index()
    assert index_dir.hits("completed") == []
    path.write_bytes(body + torn + b"\n")
    index_dir.index()
    assert index_dir.hits("completed") == [("s", "a", "assistant.text")]


def test_bad_lines_are_reported_with_offsets_and_lose_nothing(index_dir):
    head = session("s", "/w", msg("u", None, "user", "before"))
    data = (
        head
        + b'{"type":"message","id":"x"\n'
        + b'{"type":"message","id":"y","parentId":"u","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"emoji \\ud83d cut"}}\n'
        + jsonl(msg("z", "y", "user", "after"))
    )
    index_dir.write("a.jsonl", data)
    summary = index_dir.index()
    assert summary["diagnostics"] == 2
    assert index_dir.hits("after") == [("s", "z", "user.text")] and index_dir.hits("emoji cut") == [
        ("s", "y", "user.text")
    ]
    conn = sqlite3.connect(index_dir.db)
    rows = conn.execute("SELECT code, byte_offset, repaired FROM diagnostics ORDER BY byte_offset").fetchall()
    assert rows == [("malformed-json", len(head), 0), ("lone-surrogate", len(head) + 27, 1)]


def test_unsupported_files_are_reported_not_indexed(index_dir):
    index_dir.write(
        "stream.jsonl",
        jsonl(
            v3_header("st"),
            {"type": "agent_start"},
            {"type": "message_end", "message": {"role": "user", "content": "streamword"}},
        ),
    )
    index_dir.write("f4.jsonl", jsonl({"kind": "header", "version": 4, "id": "x"}))
    index_dir.write("junk.jsonl", b"hello world\n")
    summary = index_dir.index()
    states = sorted((os.path.basename(p["path"]), p["state"]) for p in summary["problems"])
    assert states == [("f4.jsonl", "unsupported"), ("junk.jsonl", "unsupported"), ("stream.jsonl", "unsupported")]
    assert sqlite3.connect(index_dir.db).execute("SELECT count(*) FROM events").fetchone()[0] == 0


def test_rewrite_that_cannot_be_parsed_keeps_last_good_index(index_dir):
    path = index_dir.write("a.jsonl", basic())
    index_dir.index()
    path.write_bytes(b'{"type":"session", broken\n' + basic()[100:])
    summary = index_dir.index()
    assert [p["state"] for p in summary["problems"]] == ["stale"]
    assert index_dir.hits("websocket")  # the last good rows are still served
    path.write_bytes(basic().replace(b"websocket", b"socketweb"))
    index_dir.index()
    assert index_dir.hits("websocket") == [] and index_dir.hits("socketweb")


def test_rewrite_rebuilds_and_removal_needs_absence(index_dir):
    path = index_dir.write("a.jsonl", basic())
    # Another session keeps the root non-empty: a root whose every file vanished
    # looks unmounted, and the one scan (daemon and index --once) vetoes removals there.
    index_dir.write("other.jsonl", session("s-other", "/work/proj", msg("o1", None, "user", "other")))
    index_dir.index()
    path.write_bytes(session("s-1", "/work/proj", msg("n1", None, "user", "brand new content")))
    index_dir.index()
    assert index_dir.hits("websocket") == [] and index_dir.hits("brand new") == [("s-1", "n1", "user.text")]
    path.unlink()
    assert index_dir.index()["removed"] == 1
    assert index_dir.hits("brand new") == []


def test_same_session_id_in_two_files_keeps_the_first(index_dir):
    """The oldest header timestamp owns a session id, then the smaller path, in whatever
    order the files are found (issue 16: ownership was the first file indexed)."""
    index_dir.write("a.jsonl", basic())
    index_dir.index()
    # A later copy (newer header) under a smaller path, found second: still a duplicate.
    later = (
        basic().replace(b"websocket", b"archivecopy").replace(b"2026-05-01T10:00:00.000Z", b"2026-06-01T10:00:00.000Z")
    )
    index_dir.write("copy.jsonl", later, folder="--archive--")
    summary = index_dir.index()
    assert [(os.path.basename(p["path"]), p["state"]) for p in summary["problems"]] == [("copy.jsonl", "duplicate")]
    assert index_dir.hits("archivecopy") == [] and index_dir.hits("websocket")
    # An older copy found last takes the id over; the file indexed first becomes the duplicate.
    older = (
        basic().replace(b"websocket", b"originalcopy").replace(b"2026-05-01T10:00:00.000Z", b"2026-04-01T10:00:00.000Z")
    )
    index_dir.write("orig.jsonl", older, folder="--zzz--")
    summary = index_dir.index()
    assert sorted((os.path.basename(p["path"]), p["state"]) for p in summary["problems"]) == [
        ("a.jsonl", "duplicate"),
        ("copy.jsonl", "duplicate"),
    ]
    assert index_dir.hits("websocket") == [] and index_dir.hits("originalcopy")
    # Stable: indexing again changes nothing.
    again = index_dir.index()
    assert again["changed"] == 0 and index_dir.hits("originalcopy")


@pytest.mark.parametrize(
    ("a", "b", "winner"),
    [
        (("2026-05-01T10:00:00.000Z", "/z/a.jsonl"), ("2026-06-01T10:00:00.000Z", "/a/b.jsonl"), 0),
        (("2026-05-01T10:00:00.000Z", "/z/a.jsonl"), ("2026-05-01T10:00:00.000Z", "/a/b.jsonl"), 1),
        ((None, "/a/a.jsonl"), ("2026-05-01T10:00:00.000Z", "/z/b.jsonl"), 1),
        (("garbage", "/a/a.jsonl"), (None, "/b/b.jsonl"), 0),
        (("2026-05-01T12:00:00+02:00", "/z"), ("2026-05-01T11:00:00Z", "/a"), 0),
    ],
)
def test_owner_rank(a, b, winner):
    ranks = [owner_rank(*a), owner_rank(*b)]
    assert ranks.index(min(ranks)) == winner


def test_duplicate_entry_ids_keep_last_content_first_position(index_dir):
    data = session(
        "s",
        "/w",
        msg("u", None, "user", "version one"),
        msg("a", "u", "assistant", [{"type": "text", "text": "x"}]),
        msg("u", None, "user", "version two"),
    )
    index_dir.write("a.jsonl", data)
    index_dir.index()
    assert index_dir.hits("version one") == []
    assert index_dir.hits("version two") == [("s", "u", "user.text")]
    ordinal = sqlite3.connect(index_dir.db).execute("SELECT ordinal FROM events WHERE entry_id='u'").fetchone()[0]
    assert ordinal == 0
