"""The piwatch extension inside oh-my-pi: the real omp 18 agent (run by Bun; SDK,
omp's scripted mock model, no network) discovers the extension where
`piwatch pi install` put it for omp, and its model calls event_search and
event_read against a real piwatchd indexing sessions omp itself wrote.
Assertions read the session file omp recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.live import poll, searchable

sys.path.insert(0, str(Path(__file__).resolve().parent / "omp"))
import omptools

WORD = "usertoken0"  # in the first earlier session of each project (tests/omp/write.ts)


def _install(home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_", "OMP_"))}
    env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "piwatch.cli", "pi", "install", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _messages(path: str) -> list[dict]:
    lines = (json.loads(line) for line in Path(path).read_text().splitlines() if line.strip())
    return [e["message"] for e in lines if e.get("type") == "message"]


@pytest.mark.timeout(900)
def test_omp_runs_the_extension_piwatch_installed_for_it(live):
    home, proj, other = live.base / "home", live.base / "proj", live.base / "other"
    for d in (home / ".omp" / "agent", proj / ".git", other / ".git"):
        d.mkdir(parents=True)
    ours = omptools.write_sessions(live.root / "--proj--", str(proj), 2, home)
    theirs = omptools.write_sessions(live.root / "--other--", str(other), 1, home)
    installed = _install(home)  # omp alone on this machine: installed for omp
    assert installed.returncode == 0, installed.stderr
    target = home / ".omp" / "agent" / "extensions" / "piwatch"
    assert json.loads(installed.stdout)["target"] == str(target)

    d = live.daemon()
    poll(lambda: all(searchable(live.db, f) for f in ours + theirs), 60, message="the earlier sessions searchable")
    out = omptools.run_agent(home / ".omp" / "agent", proj, live.root / "--proj--", WORD, home, live.base / "d.sock")
    assert out["errors"] == []
    assert str(target / "index.ts") in out["extensions"]
    assert out["calls"] == 5  # search, read, trace, search itself, the answer: the model got through its script

    messages = _messages(out["sessionFile"])
    results = {m["toolCallId"]: m for m in messages if m["role"] == "toolResult"}
    search = results["call_search_1"]
    assert search["isError"] is False, search["content"]
    pw = search["details"]["piwatch"]
    assert pw["op"] == "search" and pw["args"]["query"] == WORD
    sessions = {h["sessionId"] for h in pw["result"]["hits"]}
    first = json.loads(ours[0].read_text().splitlines()[1])["id"]  # the header after omp's title slot
    assert sessions == {first}  # this project's, never the other project's (it holds the word too)
    assert all(h["cwd"] == str(proj) and h["agent"] == "omp" for h in pw["result"]["hits"])
    read = results["call_read_1"]
    assert read["isError"] is False, read["content"]
    assert read["details"]["piwatch"]["op"] == "read"
    assert f"{WORD} please" in read["content"][0]["text"]
    trace = results["call_trace_1"]
    assert trace["isError"] is False, trace["content"]
    t = trace["details"]["piwatch"]
    assert t["op"] == "trace" and t["result"]["sessionId"] == first
    assert t["result"]["node"]["entryId"] == read["details"]["piwatch"]["args"]["entryId"]
    _the_running_session_is_cut_at_the_invoking_entry(out, results)
    assert messages[-1]["role"] == "assistant" and messages[-1]["content"][0]["text"] == "Done: found it."
    assert d.stop() == 0


def _the_running_session_is_cut_at_the_invoking_entry(out: dict, results: dict) -> None:
    """Every call's cutoff is the entry holding it; asked for its own session,
    the agent sees its prompt but not the invoking entry (whose tool call
    holds the word too), nothing later, and no tool result of its own."""
    entries = [json.loads(line) for line in Path(out["sessionFile"]).read_text().splitlines() if line.strip()]
    order = [e["id"] for e in entries if "id" in e]
    holder = {
        block["id"]: e["id"]
        for e in entries
        if (e.get("message") or {}).get("role") == "assistant"
        for block in e["message"].get("content") or []
        if block.get("type") == "toolCall"
    }
    for call_id, res in results.items():
        pw = res["details"]["piwatch"]
        assert pw["cutoffEntryId"] == holder[call_id], call_id
    own = out["sessionId"]
    hits = results["call_search_self"]["details"]["piwatch"]["result"]["hits"]
    assert hits and {h["sessionId"] for h in hits} == {own}
    prompt = next(e["id"] for e in entries if (e.get("message") or {}).get("role") == "user")
    cut = order.index(holder["call_search_self"])
    assert prompt in {h["entryId"] for h in hits}
    assert all(order.index(h["entryId"]) < cut for h in hits)
    tool_results = {e["id"] for e in entries if (e.get("message") or {}).get("role") == "toolResult"}
    assert not tool_results & {h["entryId"] for h in hits}
