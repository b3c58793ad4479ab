"""What the Pi tool tells the model, checked against a real piwatchd.

Sessions are written by Pi 1.6.0's own SessionManager (tests/pi_e2e/tool_text.mjs
seed); a `piwatchd` subprocess indexes them; every call goes through the
extension installed by `piwatch pi install` (tools.ts -> daemon-client.ts ->
format.ts), so the text checked here is the text the model reads.

- The query language: every form the `event_search` description names is run
  against the daemon and must behave as described.
- The formatting: every field of search, read (append and branch order, with
  fork alternatives and a stop at a fork, a fragment window) and trace results
  appears in the text, or is listed in NOT_SHOWN with the reason.
- The catch-up notice: a response that says the history is still being
  indexed makes the text say so first.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "pi"))
import pitools
from helpers.live import poll
from piwatch.client import Client, PiwatchError

pytestmark = [pytest.mark.pi, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tests" / "pi_e2e" / "tool_text.mjs"


def node(mode: str, *args: str, stdin: Any = None, env: dict[str, str] | None = None) -> Any:
    proc = subprocess.run(
        [pitools.find_node(), str(SCRIPT), mode, *args],
        input=None if stdin is None else json.dumps(stdin),
        env=env or pitools.node_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"tool_text.mjs {mode} failed:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout)


class World:
    engine: str
    tmp: Path
    proj: Path
    agent: Path
    ext: Path
    sock: Path
    daemon: subprocess.Popen
    seeded: dict

    def calls(self, *calls: tuple[str, dict]) -> list[dict]:
        env = {**pitools.node_env(), "PIWATCH_SOCKET": str(self.sock)}
        stdin = {"caller": {"cwd": str(self.proj)}, "calls": [{"op": op, "params": p} for op, p in calls]}
        out = node("call", "--ext", str(self.ext), stdin=stdin, env=env)
        for (op, params), r in zip(calls, out):
            assert "error" not in r, (op, params, r)
        return out

    def ids(self, session: str) -> dict[str, str]:
        return self.seeded["sessions"][session]["ids"]


@pytest.fixture(scope="module", params=["tantivy", "fts5"])
def world(request):
    """Both text engines: the description must be true whichever one the user configured."""
    pitools.ensure_installed()
    w = World()
    w.tmp = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwt-"))
    w.proj, w.agent = w.tmp / "proj", w.tmp / "agent"
    (w.proj / ".git").mkdir(parents=True)
    w.seeded = node("seed", "--agent-dir", str(w.agent), "--cwd", str(w.proj))
    installed = subprocess.run(
        [sys.executable, "-m", "piwatch.cli", "pi", "install", "--agent-dir", str(w.agent)],
        env=pitools.node_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr
    w.ext = w.agent / "extensions" / "piwatch"
    w.sock = w.tmp / "run" / "d.sock"
    w.sock.parent.mkdir(mode=0o700)
    os.chmod(w.sock.parent, 0o700)
    w.engine = request.param
    w.daemon = subprocess.Popen(
        [
            shutil.which("piwatchd", path=str(Path(sys.executable).parent)) or "piwatchd",
            "--sessions",
            str(w.agent / "sessions"),
            "--db",
            str(w.tmp / "index.sqlite3"),
            "--log-level",
            "warning",
        ],
        env={**os.environ, "PIWATCH_SOCKET": str(w.sock), "PIWATCH_ENGINE": request.param},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_indexed(w, len(w.seeded["sessions"]))
        with sqlite3.connect(w.tmp / "index.sqlite3") as conn:
            assert conn.execute("SELECT value FROM index_meta WHERE key='engine'").fetchone() == (request.param,)
        yield w
    finally:
        w.daemon.send_signal(signal.SIGTERM)
        try:
            w.daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            w.daemon.kill()
            w.daemon.wait()
        shutil.rmtree(w.tmp, ignore_errors=True)


def _wait_indexed(w: World, sessions: int, timeout: float = 60) -> None:
    def indexed() -> bool:
        if w.daemon.poll() is not None:
            raise AssertionError(f"piwatchd exited {w.daemon.returncode}:\n{w.daemon.stderr.read()[-4000:]}")
        with Client(w.sock, timeout=5, caller={"all": True}) as c:
            return len(c.sessions().sessions) >= sessions

    poll(indexed, timeout, interval=0.2, errors=(PiwatchError,), message=f"piwatchd to index {sessions} sessions")


# -- the query language -----------------------------------------------------------------------------

# Every form the description names, with queries over the "forms" session:
#   websocket: "The flaky websocket test is not fixed yet"    parser: "The flaky parser test passes now"
# For the operators, the result an operator would give differs from the plain-words result checked here.
QUERY_CASES: dict[str, list[tuple[str, set[str]]]] = {
    "words": [
        ("flaky test", {"websocket", "parser"}),
        ("flaky websocket", {"websocket"}),
        ("websocket flaky", {"websocket"}),
        ("FLAKY Websocket", {"websocket"}),
        ("websocket passes", set()),
    ],
    '"quoted phrase"': [
        ('"websocket test"', {"websocket"}),
        ('"test websocket"', set()),
        ('"flaky parser test"', {"parser"}),
    ],
    "OR": [("websocket OR parser", set())],  # a union would be both
    "AND": [("flaky AND parser", set())],  # an operator would give parser
    "NOT": [("NOT websocket", {"websocket"}), ("flaky NOT websocket", {"websocket"})],  # exclusion: parser
    "-word": [("flaky -websocket", {"websocket"})],  # exclusion: parser
    "prefix*": [("websock*", set()), ("pars*", set())],  # a prefix would find them
    "field:value": [("role:user flaky", set()), ("text:parser", set())],  # fields would find them
    "(parentheses)": [("(flaky parser)", {"parser"}), ("(websocket OR parser)", set())],
}


# The tiers below exact the description names (Tantivy; the FTS5 engine has the
# exact tier only, README: engines): (query, tier, the events, their missing words).
#   identifier: "loadSessionCache() threw on a cold start"
RELAXED_CASES = {
    "word forms": [("websockets tests", "forms", {"websocket"}, [])],
    "identifier parts": [("session cache", "forms", {"identifier"}, [])],
    "misspelled word": [("flaky websokcet", "repaired", {"websocket"}, [])],
    "some of the words": [("why is the flaky parser broken", "partial", {"parser"}, ["broken"])],
}


@pytest.fixture(scope="module")
def tool_spec(world):
    src = world.ext / "tools.ts"
    script = (
        f"import({json.dumps(str(src))}).then(m => console.log(JSON.stringify("
        "{forms: m.QUERY_FORMS, description: m.QUERY_DESCRIPTION, schema: m.SEARCH_SCHEMA})))"
    )
    proc = subprocess.run(
        [pitools.find_node(), "-e", script], env=pitools.node_env(), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_description_names_exactly_the_checked_forms(tool_spec):
    forms = tool_spec["forms"]
    description = tool_spec["description"]
    assert tool_spec["schema"]["properties"]["query"]["description"] == description
    assert set(forms["works"]) | set(forms["plainWords"]) == set(QUERY_CASES)
    assert set(forms["relaxed"]) == set(RELAXED_CASES)
    for form in forms["works"] + forms["plainWords"] + forms["relaxed"]:
        assert form in description, form
    assert "exact: true" in description and tool_spec["schema"]["properties"]["exact"]["type"] == "boolean"
    assert "distinctive words" in description and "quoted phrase" in description


@pytest.fixture(scope="module")
def registered(world):
    """The tools as index.ts registers them with Pi (name, description, prompt snippet and guidelines)."""
    src = world.ext / "index.ts"
    script = (
        f"import({json.dumps(str(src))}).then(m => {{ const tools = []; "
        "m.default({on() {}, registerTool(t) { tools.push(t); }}); "
        "console.log(JSON.stringify(tools.map(t => ({name: t.name, text: [t.description, t.promptSnippet, "
        "...(t.promptGuidelines ?? []), JSON.stringify(t.parameters)].join('\\n')})))); })"
    )
    proc = subprocess.run(
        [pitools.find_node(), "-e", script], env=pitools.node_env(), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return {t["name"]: t["text"] for t in json.loads(proc.stdout)}


def test_no_tool_text_names_an_operator_the_checks_do_not_cover(registered, tool_spec):
    """Everything the model reads about the tools (descriptions, guidelines, parameter schemas): any
    operator-like form it names is one of QUERY_FORMS, which the test below runs against the daemon."""
    assert set(registered) == {"event_search", "event_read", "event_trace"}
    forms = set(tool_spec["forms"]["works"]) | set(tool_spec["forms"]["plainWords"])
    for name, text in registered.items():
        named = set(re.findall(r"\b(?:OR|AND|NOT|NEAR)\b|\w*\*|\b[a-z]+:[a-z]+\b", text))
        assert named <= forms, f"{name} names {sorted(named - forms)}, which no check covers"
    assert "distinctive words" in registered["event_search"] and "plain words" in registered["event_search"]


def test_every_named_form_behaves_as_described(world):
    ids = {v: k for k, v in world.ids("forms").items()}
    cases = [(form, q, want) for form, qs in QUERY_CASES.items() for q, want in qs]
    results = world.calls(*[("search", {"query": q, "limit": 50}) for _, q, _ in cases])
    wrong = []
    for (form, query, want), r in zip(cases, results):
        # "every word as written" is the exact tier; weaker tiers below it are checked next.
        got = {ids.get(h["entryId"], h["entryId"]) for h in r["result"]["hits"] if h.get("tier", "exact") == "exact"}
        if got != want:
            wrong.append(f"{form}: {query!r} found {sorted(got)}, the description promises {sorted(want)}")
    assert not wrong, "\n".join(wrong)


def test_every_relaxed_form_is_labelled_as_described(world):
    """Each weaker tier the description names finds what it says, labelled in
    the model's text (tier, "n of m words matched", missing words, did you
    mean); `exact: true` turns them off; a query about something never said
    gets no hit labelled exact or forms."""
    ids = {v: k for k, v in world.ids("forms").items()}
    cases = [(form, *case) for form, cs in RELAXED_CASES.items() for case in cs]
    calls = [("search", {"query": q, "limit": 10}) for _, q, *_ in cases]
    calls += [("search", {"query": q, "limit": 10, "exact": True}) for _, q, *_ in cases]
    calls += [("search", {"query": "kubernetes ingress certificate rotation", "limit": 10})]
    results = world.calls(*calls)
    for (form, query, tier, want, missing), r, strict in zip(cases, results, results[len(cases) :]):
        assert strict["result"]["hits"] == [], (form, query)
        hits, text = r["result"]["hits"], r["text"]
        if world.engine == "fts5":
            assert hits == [] and not r["result"].get("relaxed"), (form, query)
            continue
        assert {ids.get(h["entryId"], h["entryId"]) for h in hits} == want, (form, query, hits)
        assert {h["tier"] for h in hits} == {tier}, (form, query)
        assert r["result"]["relaxed"] is True
        assert hits[0]["missing"] == missing
        assert f" · {tier}" in text, text  # every hit below exact says its tier on its own line
        assert f"── {tier} (weaker" in text or f"── {tier} (weakest" in text, text
        if missing:
            assert f"missing: {', '.join(missing)}" in text
        if tier == "repaired":
            assert r["result"]["repairs"] and "Did you mean: " in text, text
    negative = results[-1]["result"]["hits"]
    assert not [h for h in negative if h.get("tier", "exact") in ("exact", "forms")], negative


def test_no_hits_advice_names_only_forms_that_work(world):
    (r,) = world.calls(("search", {"query": "zzqqxx nonexistent", "limit": 5}))
    assert r["result"]["hits"] == []
    text = r["text"]
    assert "No hits" in text and "*" not in text.split("No hits", 1)[1]  # no prefix* advice


def test_no_hits_counts_each_word_by_itself(world):
    """No event holds both words: the text gives each word's events by
    itself and asks the model to search again with the ones held."""
    (r,) = world.calls(("search", {"query": "quarzite zzqqxx", "limit": 5}))
    result, text = r["result"], r["text"]
    if world.engine == "fts5":  # it counts no words (README: engines)
        assert result["hits"] == [] and not result.get("words") and "by itself" not in text
        return
    assert result["hits"] == [] and [w["word"] for w in result["words"]] == ["quarzite", "zzqqxx"]
    assert result["words"][0]["events"] > 0 and result["words"][1]["events"] == 0
    check_fields("search", result, text)
    assert "Search again with fewer of the words these sessions hold (quarzite)" in text, text
    (none,) = world.calls(("search", {"query": "zzqqxx nonexistent", "limit": 5}))
    assert "None of the words occurs in these sessions." in none["text"], none["text"]


# -- every field in the text ------------------------------------------------------------------------


def _short_json(v: str) -> str:
    return json.dumps(v if len(v) <= 200 else v[:200] + "…", ensure_ascii=False)


def _marked(snippet: str, spans: list) -> list[str]:
    return [f"«{snippet[a:b]}»" for a, b in spans]


def _kv(meta: dict | None) -> list[str]:
    return [
        f"{k}={v if isinstance(v, str) else json.dumps(v, separators=(',', ':'))}"
        for k, v in (meta or {}).items()
        if v is not None
    ]


# A rule gets (value, the object holding it, the whole result) and returns the text expected
# somewhere in the tool's output (a string or a list of strings), or None when nothing is due.
def _node_rules(prefix: str) -> dict:
    return {
        f"{prefix}.sessionId": lambda v, o, r: None if v == r.get("sessionId") else f"session {v}",
        f"{prefix}.entryId": lambda v, o, r: f"entry {v}",
        f"{prefix}.type": lambda v, o, r: v,
        f"{prefix}.role": lambda v, o, r: v,
        f"{prefix}.timestamp": lambda v, o, r: v,
        f"{prefix}.toolNames": lambda v, o, r: f"[{', '.join(v)}]" if v else None,
        f"{prefix}.isError": lambda v, o, r: "error" if v else None,
        f"{prefix}.contextRole": lambda v, o, r: None if v == "conversation" else f"role in context: {v}",
        f"{prefix}.branchState": lambda v, o, r: f"branch {v}",
        f"{prefix}.selectionState": lambda v, o, r: f"context {v}",
        f"{prefix}.preview": lambda v, o, r: _short_json(v),
        f"{prefix}.provenance": lambda v, o, r: f"({v})",
    }


def _minute(ts: str | None) -> str | None:
    """An ISO time as the search text gives it: to the minute, UTC."""
    return ts[:16].replace("T", " ") if ts else None


def _locator_rules(prefix: str) -> dict:
    return {
        f"{prefix}.path": lambda v, o, r: v,
        f"{prefix}.byteOffset": lambda v, o, r: f"at byte {v}",
        f"{prefix}.byteLength": lambda v, o, r: f"({v} bytes)",
    }


SEARCH_RULES = {
    "query": lambda v, o, r: json.dumps(v),
    "limit": lambda v, o, r: f"page size {v}",
    "offset": lambda v, o, r: f"\n{v + 1}. " if r["hits"] or r.get("sessions") else None,
    "hasMore": lambda v, o, r: "(more available)" if v else None,
    "scope.roots": lambda v, o, r: ", ".join(v) if v else None,
    # a hit's identity as the tools take it: a unique prefix of the session id (>= 8 chars), then the entry id
    "hits[].sessionId": lambda v, o, r: f"{v[:8]}",
    "hits[].entryId": lambda v, o, r: f" {v} · ",
    "hits[].timestamp": lambda v, o, r: _minute(v),
    # a session's cwd once, where it is not the searched root; its name once
    "hits[].cwd": lambda v, o, r: None if v in ((r.get("scope") or {}).get("roots") or []) else f"cwd {v}",
    "hits[].sessionName": lambda v, o, r: f'"{v[:80]}"',
    "hits[].evidence.kind": lambda v, o, r: v,
    "hits[].evidence.toolName": lambda v, o, r: f"[{v}]",
    "hits[].matchedFragments": lambda v, o, r: f"{v} parts matched" if v > 1 else None,
    "hits[].isError": lambda v, o, r: "error" if v else None,
    "hits[].contextRole": lambda v, o, r: None if v == "conversation" else f"role in context: {v}",
    "hits[].branchState": lambda v, o, r: f"branch {v}",
    "hits[].selectionState": lambda v, o, r: f"context {v}",
    "hits[].snippet": lambda v, o, r: _marked(v, o["spans"]) or v,
    "hits[].spans": lambda v, o, r: _marked(o["snippet"], v),
    # group "session"
    "sessions[].sessionId": lambda v, o, r: f"session {v[:8]}",
    "sessions[].sessionName": lambda v, o, r: f'"{v[:80]}"',
    "sessions[].cwd": lambda v, o, r: f"cwd {v}",
    "sessions[].firstTimestamp": lambda v, o, r: f"from {_minute(v)}",
    "sessions[].lastTimestamp": lambda v, o, r: f"to {_minute(v)}",
    "sessions[].matchingEvents": lambda v, o, r: f"{v} matching event",
    "groupedEvents": lambda v, o, r: f"best {v} matching event",
    "groupingCapped": lambda v, o, r: "counts are lower bounds" if v else None,
    "hits[].tier": lambda v, o, r: None if v == "exact" else f" · {v}",
    "hits[].missing": lambda v, o, r: f"{o['tier']}, missing: {', '.join(v)}" if v else None,
    "repairs[].word": lambda v, o, r: f"{v} → ",
    "repairs[].replacement": lambda v, o, r: f" → {v}",
    "relaxed": lambda v, o, r: "every query word as written; " if v else None,
    # a query that found nothing: each word by itself
    "words[].word": lambda v, o, r: f"{v} (",
    "words[].events": lambda v, o, r: f"({v} event" if v else "(no event)",
    "words[].more": lambda v, o, r: "or more)" if v else None,
}
SEARCH_RULES |= {
    f"sessions[].evidence.{k[len('hits[].') :]}": rule for k, rule in SEARCH_RULES.items() if k.startswith("hits[].")
}

READ_RULES = {
    "sessionId": lambda v, o, r: f"session {v}",
    "entryId": lambda v, o, r: f"entry {v}",
    "event.type": lambda v, o, r: v,
    "event.role": lambda v, o, r: v,
    "event.parentId": lambda v, o, r: f"parent {v}",
    "event.idRecorded": lambda v, o, r: None if v else "derived from the line's position",
    "event.timestamp": lambda v, o, r: v,
    "event.toolNames": lambda v, o, r: f"[{', '.join(v)}]" if v else None,
    "event.isError": lambda v, o, r: "error" if v else None,
    "event.contextRole": lambda v, o, r: None if v == "conversation" else f"role in context: {v}",
    "event.branchState": lambda v, o, r: f"branch {v}",
    "event.selectionState": lambda v, o, r: f"context {v}",
    "event.meta": lambda v, o, r: _kv(v),
    "session.cwd": lambda v, o, r: f"cwd {v}",
    "session.sourcePath": lambda v, o, r: v,
    **_locator_rules("source"),
    "source.status": lambda v, o, r: "verified unchanged" if v == "verified" else v,
    "source.detail": lambda v, o, r: v,
    "content[].fragmentId": lambda v, o, r: f"--- {v} (",
    "content[].kind": lambda v, o, r: v,
    "content[].toolName": lambda v, o, r: f"tool {v}",
    "content[].callId": lambda v, o, r: f"call {v}",
    "content[].length": lambda v, o, r: f"{v} chars",
    "content[].text": lambda v, o, r: v,
    "content[].truncated": lambda v, o, r: "preview ends at" if v else None,
    "content[].next.fragmentId": lambda v, o, r: f'fragmentId="{v}"',
    "content[].next.offset": lambda v, o, r: f"offset={v}",
    **_locator_rules("content[].locator"),
    "fragment.fragmentId": lambda v, o, r: f"window of {v}",
    "fragment.kind": lambda v, o, r: f"({v})",
    "fragment.offset": lambda v, o, r: f"chars {v}-",
    "fragment.length": lambda v, o, r: f"-{o['offset'] + v} of",
    "fragment.totalLength": lambda v, o, r: f"of {v} ---",
    "fragment.text": lambda v, o, r: v,
    "fragment.hasMore": lambda v, o, r: "[… more" if v else "[end of this fragment]",
    "fragment.nextOffset": lambda v, o, r: f"offset={v}",
    **_locator_rules("fragment.locator"),
    "omitted[].field": lambda v, o, r: v,
    "omitted[].kind": lambda v, o, r: v,
    "omitted[].reason": lambda v, o, r: v,
    "omitted[].mimeType": lambda v, o, r: v,
    "omitted[].base64Chars": lambda v, o, r: f"{v} base64 chars",
    "omitted[].counts": lambda v, o, r: [f"{n} {kind}" for kind, n in v.items()],
    "neighbours.order": lambda v, o, r: f"neighbours in {v} order",
    **_node_rules("neighbours.before[]"),
    **_node_rules("neighbours.after[]"),
    "neighbours.alternatives[].at": lambda v, o, r: f"fork at entry {v}",
    "neighbours.alternatives[].followed": lambda v, o, r: f"continues with {v}",
    "neighbours.alternatives[].alternatives": lambda v, o, r: f"other branches start at {', '.join(v)}",
    "neighbours.stoppedAtFork.at": lambda v, o, r: f"stopped at a fork after entry {v}",
    "neighbours.stoppedAtFork.candidates": lambda v, o, r: f"continues at one of {', '.join(v)}",
    "neighbours.reachedRoot": lambda v, o, r: "first entry is reached" if v else None,
}

TRACE_RULES = {
    "sessionId": lambda v, o, r: f"session {v}",
    "entryId": lambda v, o, r: f"entry {v}",
    **_node_rules("node"),
    **_node_rules("parent"),
    **_node_rules("children[]"),
    **_node_rules("siblings[]"),
    "parentMissing": lambda v, o, r: f"{v} (recorded but not in the index)",
    "materializedLeaf.entryId": lambda v, o, r: (
        None if o.get("isTarget") else f"session leaf (last written entry): {v}"
    ),
    "materializedLeaf.known": lambda v, o, r: None if v else "(uncertain)",
    "materializedLeaf.isTarget": lambda v, o, r: "session leaf (last written entry): this entry" if v else None,
    "towardLeaf.entryId": lambda v, o, r: f"toward the leaf: entry {v}",
    "towardLeaf.via": lambda v, o, r: f"(via its {v})",
    "towardLeafKnown": lambda v, o, r: None if v else "toward the leaf: unknown",
    # parent/child edges are the parent:/child: lines above; the others are listed one per line.
    "relationships[].kind": lambda v, o, r: None if v in ("parent", "child") else f"  {v} ",
    "relationships[].direction": lambda v, o, r: (
        None if o["kind"] in ("parent", "child") else ("<-" if v == "in" else "->")
    ),
    "relationships[].provenance": lambda v, o, r: None if o["kind"] in ("parent", "child") else f"({v}",
    "relationships[].target.sessionId": lambda v, o, r: f"session {v}",
    "relationships[].target.entryId": lambda v, o, r: f"entry {v}",
    "relationships[].target.indexed": lambda v, o, r: None if v else "(not indexed)",
    "relationships[].target.ref": lambda v, o, r: None if o.get("entryId") or o.get("path") else f"ref {v}",
    "relationships[].target.path": lambda v, o, r: f"file {v}",
    "relationships[].detail": lambda v, o, r: None if o["kind"] in ("parent", "child") else _kv(v),
    "omitted[].field": lambda v, o, r: v,
    "omitted[].kind": lambda v, o, r: v,
    "omitted[].reason": lambda v, o, r: v,
    "omitted[].counts": lambda v, o, r: [f"{n} {kind}" for kind, n in v.items()],
}

# Fields the text leaves out on purpose (they stay in the tool result's `details`).
NOT_SHOWN = {
    "search": {
        "hits[].score": "the order of the hits is the ranking; raw scores mean nothing across queries",
        "sessions[].evidence.score": "as above: the order of the sessions is the ranking",
        "fts": "the engine's internal query string (older daemons only)",
        "hits[].eventType": "implied by the evidence kind (user.text is a user message, tool.result a tool result)",
        "hits[].role": "as above: the evidence kind names the role",
        "hits[].matched": "the query's words less the missing ones the hit names",
        "sessions[].evidence.matched": "as for hits",
        "hits[].evidence.fragmentId": "event_read returns every fragment with its id; a window is asked by the id it shows",
        "sessions[].evidence.eventType": "as for hits",
        "sessions[].evidence.role": "as for hits",
        "sessions[].evidence.evidence.fragmentId": "as for hits",
    },
    "read": {
        "source.fingerprint": "an internal proof that the line is the indexed one; its status is shown",
        "neighbours.before[].previewSource": "where the preview was taken from; the preview itself is shown",
        "neighbours.after[].previewSource": "as above",
    },
    "trace": {
        f"{p}.previewSource": "where the preview was taken from; the preview itself is shown"
        for p in ("node", "parent", "children[]", "siblings[]")
    },
}
RULES = {"search": SEARCH_RULES, "read": READ_RULES, "trace": TRACE_RULES}
OPAQUE = {"event.meta", "relationships[].detail", "omitted[].counts"}  # free-form maps: checked as a whole


def leaves(value: Any, path: str = "", parent: Any = None):
    """(path, value, the object holding it) for every leaf; lists of scalars are leaves."""
    if isinstance(value, dict) and path not in OPAQUE:
        for k, v in value.items():
            yield from leaves(v, f"{path}.{k}" if path else k, value)
    elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        for x in value:
            yield from leaves(x, f"{path}[]", parent)
    else:
        yield path, value, parent


def check_fields(op: str, result: dict, text: str) -> set[str]:
    rules, skip = RULES[op], NOT_SHOWN[op]
    problems, seen = [], set()
    for path, value, holder in leaves(result):
        if path in skip or value == []:
            continue  # (an empty list has no element paths to check)
        if value is None and any(k.startswith((f"{path}.", f"{path}[]")) for k in rules):
            continue  # an absent object whose fields have rules
        if path not in rules:
            # A new field of the contract: show it in format.ts (and add its rule here), or add it to NOT_SHOWN.
            problems.append(
                f"{op}: field {path} has no rule: show it in format.ts or list it in NOT_SHOWN with a reason"
            )
            continue
        seen.add(path)
        if value is None or value == [] or value == {}:
            continue
        want = rules[path](value, holder, result)
        for w in [want] if isinstance(want, str) else (want or []):
            if w not in text:
                problems.append(f"{op}: {path}={value!r}: expected {w!r} in the text")
    assert not problems, "\n".join(problems) + "\n--- text ---\n" + text
    return seen


@pytest.fixture(scope="module")
def formatted(world):
    b = world.ids("branches")
    calls = [
        ("search", {"query": "quarzite", "limit": 3}),
        ("search", {"query": "quarzite", "limit": 50, "offset": 1}),
        ("search", {"query": "quarzite", "group": "session"}),
        ("search", {"query": "quarzite", "group": "session", "limit": 1}),
        *(
            [("search", {"query": "flaky websokcet", "limit": 5}), ("search", {"query": "flaky parser broken"})]
            if world.engine == "tantivy"
            else []
        ),
        (
            "read",
            {"sessionId": world.seeded["sessions"]["branches"]["id"], "entryId": b["result"], "before": 2, "after": 2},
        ),
        (
            "read",
            {
                "sessionId": world.seeded["sessions"]["branches"]["id"],
                "entryId": b["result"],
                "before": 5,
                "after": 5,
                "order": "branch",
            },
        ),
        (
            "read",
            {
                "sessionId": world.seeded["sessions"]["branches"]["id"],
                "entryId": b["first"],
                "after": 5,
                "order": "branch",
            },
        ),
        (
            "read",
            {
                "sessionId": world.seeded["sessions"]["branches"]["id"],
                "entryId": b["call"],
                "fragmentId": "call.1",
                "offset": 3,
                "length": 10,
            },
        ),
        ("read", {"sessionId": world.seeded["sessions"]["branches"]["id"], "entryId": b["secret"]}),
        ("trace", {"sessionId": world.seeded["sessions"]["branches"]["id"], "entryId": b["result"]}),
        ("trace", {"sessionId": world.seeded["sessions"]["branches"]["id"], "entryId": b["first"]}),
        ("trace", {"sessionId": world.seeded["sessions"]["branches"]["id"], "entryId": b["call"]}),
        ("trace", {"sessionId": world.seeded["sessions"]["branches"]["id"], "entryId": b["second"]}),
        ("trace", {"sessionId": world.seeded["sessions"]["branches"]["id"], "entryId": b["ask"]}),
    ]
    return [(op, r) for (op, _), r in zip(calls, world.calls(*calls))]


def test_every_search_field_is_in_the_text(formatted):
    seen = set()
    for op, r in formatted:
        if op == "search":
            assert r["result"]["hits"] or r["result"]["sessions"]
            seen |= check_fields(op, r["result"], r["text"])
    assert {"hits[].snippet", "hits[].evidence.toolName", "hits[].sessionName", "hasMore"} <= seen
    assert {"sessions[].matchingEvents", "sessions[].evidence.snippet", "sessions[].lastTimestamp"} <= seen


def test_every_read_field_is_in_the_text_in_both_orders(world, formatted):
    b = world.ids("branches")
    reads = [r for op, r in formatted if op == "read"]
    seen = set()
    for r in reads:
        seen |= check_fields("read", r["result"], r["text"])
    append, branch, off_path, window, secret = reads
    assert append["result"]["neighbours"]["order"] == "append"
    # Branch order from the tool result: the walk follows the path to the leaf and names the fork's other branch.
    alternatives = branch["result"]["neighbours"]["alternatives"]
    assert alternatives == [{"at": b["result"], "followed": b["second"], "alternatives": [b["first"]]}]
    assert f"other branches start at {b['first']}" in branch["text"] and "[object Object]" not in branch["text"]
    stop = off_path["result"]["neighbours"]["stoppedAtFork"]
    assert stop["at"] == b["first"] and set(stop["candidates"]) == {b["variantOne"], b["variantTwo"]}
    assert window["result"]["fragment"]["offset"] == 3
    assert "AKIAQ3QUARZITEX7WY4M" not in secret["text"] and secret["result"]["omitted"][0]["counts"]
    assert {
        "neighbours.alternatives[].alternatives",
        "neighbours.stoppedAtFork.candidates",
        "fragment.text",
        "content[].callId",
        "event.meta",
        "omitted[].counts",
    } <= seen


def test_every_trace_field_is_in_the_text(formatted):
    seen = set()
    for op, r in formatted:
        if op == "trace":
            seen |= check_fields(op, r["result"], r["text"])
    assert {
        "siblings[].provenance",
        "relationships[].target.path",
        "towardLeaf.via",
        "children[].entryId",
        "materializedLeaf.entryId",
    } <= seen


# -- catch-up -----------------------------------------------------------------------------------------


def test_catch_up_warning_tells_the_model_the_history_is_still_being_indexed(world, formatted):
    """The daemon's own Api on this index, with its service in the first index (41 of 60 files to go):
    the responses carry its catch-up notice, and the text says so first; an empty page is not
    "no such event"."""
    from piwatch.wire import ServiceStatus, to_builtins

    from piwatchd.serve.api import Api, Live

    snapshot = {"phase": "ingesting", "files_known": 60, "backlog_files": 41, "startup_seconds": None}
    api = Api(world.tmp / "index.sqlite3", live=Live(service_snapshot=lambda: ServiceStatus(**snapshot)))
    caller = {"cwd": str(world.proj)}
    b, sid = world.ids("branches"), world.seeded["sessions"]["branches"]["id"]
    try:
        answers = [
            to_builtins(api.handle(op, args, caller))
            for op, args in [
                ("search", {"query": "quarzite", "limit": 3}),
                ("search", {"query": "nowhere to be found", "limit": 3}),
                ("read", {"sessionId": sid, "entryId": b["result"]}),
                ("trace", {"sessionId": sid, "entryId": b["result"]}),
            ]
        ]
    finally:
        api.readers.reset()
    assert all(a["ok"] for a in answers), answers
    assert [w["code"] for w in answers[0]["warnings"]] == ["indexing"]
    texts = node(
        "format",
        "--ext",
        str(world.ext),
        stdin=[
            {"op": op, "query": q, "result": a["result"], "warnings": a["warnings"], "freshness": a.get("freshness")}
            for (op, q), a in zip(
                [("search", "quarzite"), ("search", "nowhere to be found"), ("read", None), ("trace", None)], answers
            )
        ],
    )
    for text in texts:
        first = text.splitlines()[0]
        # The tool's caller is a workspace: its own files, never the machine's 60.
        assert "still being indexed" in first and "files of this workspace found so far" in first, first
        assert "of 60 files" not in first, first
    assert "No hits so far, but the history is still being indexed" in texts[1]
    # Without the notice (the live daemon has finished its first index), nothing claims it.
    assert all("still being indexed" not in r["text"] for _, r in formatted)


def test_install_ships_every_module_of_the_extension(world):
    src = REPO / "client" / "pi-extension"
    listed = {n for n in json.loads((src / "package.json").read_text())["files"] if n.endswith(".ts")}
    assert listed == {p.name for p in src.glob("*.ts")}  # `piwatch pi install` copies package.json's files
    assert all((world.ext / n).read_bytes() == (src / n).read_bytes() for n in listed)
