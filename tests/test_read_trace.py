"""event_read / event_trace end to end: session files -> index -> CLI and
the client's in-process transport; plus the incremental tree update's write bound."""

from __future__ import annotations

import json
import os

import pytest
from conftest import jsonl, msg, v3_header
from piwatch.client import NotFound
from piwatch.wire import to_builtins

SID = "tree-1"
BIG = "".join(f"line {i:05d} of a long tool result\n" for i in range(400))  # ~12 KB


def ts(i: int) -> str:
    return f"2026-05-01T10:{i // 60:02d}:{i % 60:02d}.000Z"


def seed_session() -> bytes:
    """The seed's A->B->C->D / B->E->F tree, with tool calls, a big result,
    thinking, an image, labels, a context edit and a compaction."""
    return jsonl(
        v3_header(SID, cwd="/work/proj"),
        msg("A", None, "user", [{"type": "text", "text": "alpha question"}], ts(1)),
        msg(
            "B",
            "A",
            "assistant",
            [
                {"type": "thinking", "thinking": "SECRET-THOUGHT", "thinkingSignature": "sig"},
                {"type": "text", "text": "bravo answer"},
                {"type": "toolCall", "id": "call-1", "name": "read", "arguments": {"path": "@src/app.py"}},
            ],
            ts(2),
            provider="p",
            model="m",
            stopReason="toolUse",
        ),
        msg(
            "C",
            "B",
            "toolResult",
            [{"type": "text", "text": BIG}],
            ts(3),
            toolCallId="call-1",
            toolName="read",
            isError=False,
        ),
        msg("D", "C", "assistant", [{"type": "text", "text": "delta old branch"}], ts(4)),
        msg(
            "E",
            "B",
            "user",
            [
                {"type": "text", "text": "echo new branch"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            ],
            ts(5),
        ),
        msg(
            "F",
            "E",
            "assistant",
            [
                {"type": "text", "text": "foxtrot edits"},
                {"type": "toolCall", "id": "call-2", "name": "edit", "arguments": {"path": "src/app.py", "edits": []}},
            ],
            ts(6),
        ),
        {"type": "label", "id": "L1", "parentId": "F", "timestamp": ts(7), "targetId": "E", "label": "first"},
        {"type": "label", "id": "L2", "parentId": "L1", "timestamp": ts(8), "targetId": "E", "label": "second"},
        {"type": "label", "id": "L3", "parentId": "L2", "timestamp": ts(9), "targetId": "B"},
        {
            "type": "context_edit",
            "id": "X1",
            "parentId": "L3",
            "timestamp": ts(10),
            "targetId": "A",
            "replacement": None,
        },
    )


@pytest.fixture
def env(index_dir):
    path = index_dir.write("seed.jsonl", seed_session())
    index_dir.index()
    index_dir.path = path
    return index_dir


def read(env, **args):
    """event_read through the daemon's own api (in-process transport), as plain wire data."""
    with env.client() as c:
        return to_builtins(c.read(SID, args.pop("entryId"), **args))


def trace(env, entry, session=SID):
    with env.client() as c:
        return to_builtins(c.trace(session, entry))


def ids(nodes):
    return [n["entryId"] for n in nodes]


def test_states_in_the_index(env):
    r = {e: read(env, entryId=e)["event"] for e in "ABCDEF"}
    assert {e for e in r if r[e]["branchState"] == "selected"} == {"A", "B", "E", "F"}
    assert r["A"]["selectionState"] == "omitted"  # context_edit replacement null
    assert r["C"]["selectionState"] == "not-selected"
    assert r["F"]["selectionState"] == "direct"


def test_read_neighbours_append_vs_branch(env):
    app = read(env, entryId="E", before=1, after=1, order="append")["neighbours"]
    assert ids(app["before"]) == ["D"] and ids(app["after"]) == ["F"]
    # Previews on every engine: from the index's text, or re-projected from the verified source line.
    assert [n["preview"] for n in app["before"] + app["after"]] == ["delta old branch", "foxtrot edits"]
    br = read(env, entryId="E", before=1, after=1, order="branch")["neighbours"]
    assert ids(br["before"]) == ["B"] and ids(br["after"]) == ["F"]
    # Reading B follows the materialized branch and reports C as the alternative.
    b = read(env, entryId="B", after=10, order="branch")["neighbours"]
    assert ids(b["after"])[:2] == ["E", "F"]
    assert b["alternatives"][0] == {"at": "B", "followed": "E", "alternatives": ["C"]}
    # Reading C continues to D on the old branch.
    c = read(env, entryId="C", after=10, order="branch")["neighbours"]
    assert ids(c["after"]) == ["D"] and c["stoppedAtFork"] is None


def test_read_content_comes_from_source_and_excludes_private_parts(env):
    r = read(env, entryId="B")
    assert r["source"]["status"] == "verified"
    texts = {c["fragmentId"]: c["text"] for c in r["content"]}
    assert texts["text.1"] == "bravo answer"
    assert "path: @src/app.py" in texts["call.2"]
    assert "SECRET-THOUGHT" not in json.dumps(r)
    kinds = {o["kind"] for o in r["omitted"]}
    assert {"thinking", "provider-private"} <= kinds
    e = read(env, entryId="E")
    assert any(o["kind"] == "image" for o in e["omitted"]) and "aGVsbG8=" not in json.dumps(e)


def test_large_fragment_is_previewed_and_paged(env):
    r = read(env, entryId="C")
    item = r["content"][0]
    assert item["truncated"] and item["length"] == len(BIG) and len(item["text"]) == 2000
    assert item["locator"]["path"] == str(env.path) and item["locator"]["byteLength"] > len(BIG)
    pieces, offset = [], 0
    while offset is not None:
        w = read(env, entryId="C", fragmentId="result", offset=offset, length=5000)["fragment"]
        pieces.append(w["text"])
        offset = w["nextOffset"]
    assert "".join(pieces) == BIG
    with pytest.raises(NotFound):
        read(env, entryId="C", fragmentId="nope")


def test_trace_matches_the_seed(env):
    t = trace(env, "E")
    assert t["parent"]["entryId"] == "B"
    assert ids(t["children"]) == ["F"]
    assert ids(t["siblings"]) == ["C"] and t["siblings"][0]["provenance"] == "derived"
    assert t["towardLeaf"] == {"entryId": "F", "via": "child"}
    tb = trace(env, "B")
    assert ids(tb["children"]) == ["C", "E"]
    td = trace(env, "D")
    assert td["towardLeaf"] == {"entryId": "C", "via": "parent"}
    assert trace(env, "X1")["materializedLeaf"] == {"entryId": "X1", "known": True, "isTarget": True}


def test_trace_relationships(env):
    rels = trace(env, "E")["relationships"]
    labels = [r for r in rels if r["kind"] == "labels"]
    assert [(r["target"]["entryId"], r["detail"]["label"], r["detail"]["current"]) for r in labels] == [
        ("L1", "first", False),
        ("L2", "second", True),
    ]
    b = trace(env, "B")["relationships"]
    cleared = [r for r in b if r["kind"] == "labels"]
    assert cleared[0]["detail"] == {"label": None, "current": True}
    assert any(r["kind"] == "tool-result-for" and r["direction"] == "in" and r["target"]["entryId"] == "C" for r in b)
    files = {(r["kind"], r["target"]["path"], r["provenance"]) for r in b if r["kind"].startswith("file-")}
    assert files == {("file-read", "/work/proj/src/app.py", "recorded")}
    c = trace(env, "C")["relationships"]
    assert {(r["kind"], r["provenance"]) for r in c if r["kind"] in ("tool-result-for", "file-read")} == {
        ("tool-result-for", "recorded"),
        ("file-read", "derived"),
    }
    a = trace(env, "A")["relationships"]
    assert any(r["kind"] == "context-edit" and r["direction"] == "in" and r["detail"]["omits"] for r in a)
    kinds = {r["kind"] for r in rels}
    assert {"parent", "child"} <= kinds


def test_search_file_filter(env):
    hits = env.search("foxtrot", files=["/work/proj/src/app.py"]).hits
    assert [h.entry_id for h in hits] == ["F"]
    assert env.search("foxtrot", files=["/work/proj/src/app.py"], fileMode="read").hits == []
    assert [h.entry_id for h in env.search("bravo", files=["/work/proj/src"], fileMode="read").hits] == ["B"]
    assert env.search("foxtrot", files=["/work/other.py"]).hits == []


def test_changed_source_is_reported_not_papered_over(env, capsys):
    from piwatch.cli import main

    data = env.path.read_bytes()
    env.path.write_bytes(data.replace(b"bravo answer", b"BRAVO ANSWER"))  # same length, new bytes
    r = read(env, entryId="B")
    assert r["source"]["status"] == "changed" and "content" not in r
    assert "no longer match" in r["source"]["detail"]
    assert r["event"]["type"] == "message"  # identity and metadata stay exact
    assert main(["read", SID, "B", "--db", str(env.db)]) == 3
    assert "no longer match" in capsys.readouterr().out
    # Entries whose bytes did not move still read fine.
    assert read(env, entryId="A")["source"]["status"] == "verified"
    os.unlink(env.path)
    assert read(env, entryId="A")["source"]["status"] == "missing"


def test_cli_read_and_trace(env, capsys):
    from piwatch.cli import main

    assert (
        main(["read", SID, "E", "--before", "1", "--after", "2", "--order", "branch", "--db", str(env.db), "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert ids(out["neighbours"]["before"]) == ["B"]
    assert (
        main(["read", SID, "C", "--fragment", "result", "--offset", "10", "--length", "20", "--db", str(env.db)]) == 0
    )
    assert BIG[10:30] in capsys.readouterr().out
    assert main(["trace", SID, "E", "--db", str(env.db)]) == 0
    text = capsys.readouterr().out
    assert "comes after B" in text and "beside      C" in text and "(another entry after the same one)" in text
    assert main(["trace", SID, "nope", "--db", str(env.db)]) == 1
    assert (
        main(
            [
                "search",
                "foxtrot",
                "--file",
                "/work/proj/src/app.py",
                "--file-mode",
                "changed",
                "--db",
                str(env.db),
                "--json",
            ]
        )
        == 0
    )
    assert [h["entryId"] for h in json.loads(capsys.readouterr().out)["hits"]] == ["F"]


def test_fork_anchor_is_derived_from_indexed_parent(index_dir):
    parent = index_dir.write(
        "p.jsonl",
        jsonl(
            v3_header("par"),
            msg("A", None, "user", "root q"),
            msg("B", "A", "assistant", [{"type": "text", "text": "x"}]),
        ),
    )
    index_dir.write(
        "c.jsonl",
        jsonl(
            v3_header("kid", parentSession=str(parent)), msg("A", None, "user", "root q"), msg("N", "A", "user", "new")
        ),
    )
    index_dir.index()
    rels = trace(index_dir, "A", session="kid")["relationships"]
    sp = [r for r in rels if r["kind"] == "session-parent"]
    assert {(r["provenance"], r["target"].get("sessionId"), r["target"].get("entryId")) for r in sp} == {
        ("recorded", "par", None),
        ("derived", "par", "A"),
    }
    rels_n = trace(index_dir, "N", session="kid")["relationships"]
    assert [r["provenance"] for r in rels_n if r["kind"] == "session-parent"] == ["recorded"]


# -- incremental update bound -------------------------------------------------


def _long_session(n: int) -> list[dict]:
    lines = [v3_header("long-1")]
    prev = None
    for i in range(n):
        eid = f"m{i:05d}"
        lines.append(msg(eid, prev, "user" if i % 2 == 0 else "assistant", [{"type": "text", "text": f"word{i}"}]))
        prev = eid
    return lines


def test_append_to_long_session_updates_a_bounded_number_of_rows(short_tmp):
    from piwatchd.ingest.ingestor import Ingestor
    from piwatchd.store.schema import open_writer
    from piwatchd.store.tree_store import refresh_states
    from piwatchd.store.writer import IndexWriter

    n = 3000
    path = short_tmp / "long.jsonl"
    path.write_bytes(jsonl(*_long_session(n)))
    conn = open_writer(short_tmp / "db.sqlite3")
    ingestor = Ingestor(IndexWriter(conn))
    ingestor.ingest(str(path))
    updates = []
    conn.set_trace_callback(
        lambda sql: updates.append(sql) if sql.startswith("UPDATE events SET branch_state") else None
    )

    def append(*objs) -> int:
        updates.clear()
        with open(path, "ab") as fh:
            fh.write(jsonl(*objs))
        assert ingestor.ingest(str(path)).events == len(objs)
        return len(updates)

    def states():
        return dict(
            conn.execute(
                "SELECT entry_id, branch_state || '/' || selection_state FROM events WHERE session_key=(SELECT session_key FROM sessions WHERE session_id='long-1')"
            )
        )

    # A plain continuation: only the new row is written.
    assert append(msg("n1", f"m{n - 1:05d}", "user", "next")) == 1
    # A branch near the end: the old leaf turns alternate, the new entry is selected.
    assert append(msg("n2", f"m{n - 1:05d}", "user", "other branch")) == 2
    # A context edit: the edit entry and its target.
    assert (
        append(
            {
                "type": "context_edit",
                "id": "x1",
                "parentId": "n2",
                "timestamp": ts(1),
                "targetId": "m02990",
                "replacement": None,
            }
        )
        == 2
    )
    assert states()["m02990"] == "selected/omitted"
    # A compaction keeping the last 10: exactly the entries it summarizes change, plus itself.
    before = states()
    k = append(
        {
            "type": "compaction",
            "id": "c1",
            "parentId": "x1",
            "timestamp": ts(2),
            "summary": "s",
            "firstKeptEntryId": f"m{n - 10:05d}",
            "tokensBefore": 1,
        }
    )
    after = states()
    changed = {e for e in after if before.get(e) != after[e]}
    assert k == len(changed) and "m00000" in changed and f"m{n - 10:05d}" not in changed
    # Whatever path the appends took, the result equals a full reclassification.
    conn.set_trace_callback(None)
    assert refresh_states(conn, "long-1").rows_updated == 0
    conn.close()


def test_cli_trace_speaks_plain_words_and_json_keeps_the_contracts_terms(env, capsys):
    """Issue 30: `trace` for people names no contract term (materialized leaf, tool-result-for,
    branch and selection states, provenance) and prints no raw JSON; `--json` keeps them all."""
    from piwatch.cli import main

    expected = {
        "C": ["the result of the tool call in entry B", "comes after B", "the session's file ends at entry X1"],
        "B": [
            "the result of its tool call is in entry C",
            "read the file /work/proj/src/app.py (by read)",
            "labelled by entry L3",
        ],
        "E": [
            'labelled by entry L1 (as "first"; a later label replaced it)',
            'labelled by entry L2 (as "second")',
            "beside      C",
        ],
        "A": ["its place in the context is edited by entry X1 (removing it)", "removed from the context"],
        "X1": ["edits the context at entry A (removing it)", "this is the last entry of the session's file"],
        "D": ["on an abandoned branch", "towards the end of the file: the entry before it, C"],
    }
    jargon = ("materialized", "tool-result-for", "context-edit", "[selected", "[alternate", "derived", "[recorded", "{")
    for entry, phrases in expected.items():
        assert main(["trace", SID, entry, "--db", str(env.db)]) == 0
        text = capsys.readouterr().out
        assert all(p in text for p in phrases), (entry, text)
        assert not [j for j in jargon if j in text], (entry, text)
    assert main(["trace", SID, "C", "--db", str(env.db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "materializedLeaf" in out and {r["kind"] for r in out["relationships"]} >= {"tool-result-for"}
    assert out["node"]["branchState"] == "alternate" and {r["provenance"] for r in out["relationships"]} == {
        "recorded",
        "derived",
    }
