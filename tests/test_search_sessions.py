"""Sessions as results (`group: "session"`), end to end on both text engines.

Sessions written by the real Pi 1.6.0 SessionManager, indexed by piwatchd as
a process; every request goes over its socket (the Python client and the
CLI). A grouped answer is defined by the event answer of the same query:
sessions in the order of their strongest event, that event as evidence
exactly as the event search returns it, and the number of the session's
events among the grouped ones. Visibility is the hits' visibility: a
workspace caller never sees another project's session, a caller with a
cutoff never sees its own session's later events, span or name.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers.world import World
from piwatch.client import RequestFailed
from piwatch.wire import GROUP_EVENTS_MAX, to_builtins, to_json

sys.path.insert(0, str(Path(__file__).resolve().parent / "pi"))
import pitools

pytestmark = [pytest.mark.pi, pytest.mark.timeout(600)]


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _spec(proj: Path, other: Path) -> dict:
    a, u = "assistant", "user"
    return {
        "sessions": [
            {
                "cwd": str(proj),
                "name": "walrus migration",
                "items": [
                    {"role": u, "text": "the walrus migration fails on the users table"},
                    {"role": a, "text": "walrus migration: the users table has a duplicate walrus column"},
                    {"role": "tool", "tool": "bash", "args": {"command": "make migrate"}, "text": "walrus ok"},
                ],
            },
            {
                "cwd": str(proj / "docs"),
                "name": "docs pass",
                "items": [{"role": u, "text": "mention the walrus in the docs"}, {"role": a, "text": "done"}],
            },
            {"cwd": str(other), "items": [{"role": u, "text": "walrus elsewhere"}, {"role": a, "text": "walrus"}]},
            {
                "cwd": str(proj),
                "items": [
                    {"role": u, "text": "walrus early"},
                    {"role": a, "text": "walrus invoking"},
                    {"role": "name", "text": "walrus renamed later"},
                    {"role": u, "text": "walrus later"},
                ],
            },
            {
                "cwd": str(proj),
                "items": [
                    {"role": u if i % 2 else a, "text": f"narwhal note {i}"} for i in range(GROUP_EVENTS_MAX + 5)
                ],
            },
        ]
    }


@pytest.fixture(scope="module", params=["tantivy", "fts5"])
def world(request):
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="pw-"))
    w = World(base)
    w.env["PIWATCH_ENGINE"] = request.param
    manifest = pitools.texts(base, "1.6.0", _spec(w.proj, base / "proj2"))
    w.ids = [(f["sessionId"], f["entryIds"]) for f in manifest["files"]]
    w.start()
    yield w
    w.stop()
    shutil.rmtree(base, ignore_errors=True)


def mine(w: World) -> dict:
    return {"cwd": str(w.proj)}


def test_sessions_follow_the_event_ranking_with_evidence_exactly_as_hits(world):
    with world.client(mine(world)) as c:
        events = c.search("walrus", limit=GROUP_EVENTS_MAX)
        grouped = c.search("walrus", limit=10, group="session")
        listed = {s.session_id: s for s in c.sessions(limit=50).sessions}
    assert grouped.hits == [] and not grouped.has_more and not grouped.grouping_capped
    assert grouped.grouped_events == len(events.hits)
    first: dict[str, object] = {}
    counts: dict[str, int] = {}
    for hit in events.hits:
        first.setdefault(hit.session_id, hit)
        counts[hit.session_id] = counts.get(hit.session_id, 0) + 1
    assert [s.session_id for s in grouped.sessions] == list(first)
    for s in grouped.sessions:
        assert to_builtins(s.evidence) == to_builtins(first[s.session_id])
        assert s.matching_events == counts[s.session_id]
        row = listed[s.session_id]
        assert (s.session_name, s.cwd) == (row.name, row.cwd)
        assert (s.first_timestamp, s.last_timestamp) == (_iso(row.first_ms), _iso(row.last_ms))
    names = {s.session_name for s in grouped.sessions}
    assert {"walrus migration", "docs pass"} <= names
    # Three items and the session's name (a session_info event) hold the word.
    assert {s.session_id: s.matching_events for s in grouped.sessions}[world.ids[0][0]] == 4


def test_a_workspace_caller_never_sees_another_projects_session(world):
    foreign = world.ids[2][0]
    with world.client(mine(world)) as c:
        grouped = c.search("walrus elsewhere", group="session")
        assert grouped.sessions == [] and foreign not in to_json(grouped)
        assert foreign not in to_json(c.search("walrus", group="session")) + to_json(c.last_freshness)
    with world.client({"cwd": str(world.base / "proj2")}) as c:
        assert [s.session_id for s in c.search("walrus", group="session").sessions] == [foreign]


def test_a_cutoff_hides_later_events_span_and_name(world):
    own, ids = world.ids[3]
    caller = {**mine(world), "sessionId": own, "cutoffEntryId": ids[1]}
    with world.client({"all": True}) as c:
        whole = c.search("walrus", filters={"sessionId": [own]}, group="session").sessions[0]
        assert whole.matching_events == 4 and whole.session_name == "walrus renamed later"
    with world.client(caller) as c:
        events = c.search("walrus", filters={"sessionId": [own]})
        grouped = c.search("walrus", filters={"sessionId": [own]}, group="session")
    assert [h.entry_id for h in events.hits] == [ids[0]]
    [s] = grouped.sessions
    assert s.matching_events == 1 and s.evidence.entry_id == ids[0]
    assert s.session_name is None and s.evidence.session_name is None and events.hits[0].session_name is None
    assert s.first_timestamp == s.last_timestamp == events.hits[0].timestamp
    assert "renamed later" not in to_json(grouped) + to_json(events)


def test_the_grouping_is_bounded_and_says_so(world):
    with world.client(mine(world)) as c:
        grouped = c.search("narwhal", group="session")
    [s] = grouped.sessions
    assert grouped.grouped_events == GROUP_EVENTS_MAX and grouped.grouping_capped
    assert s.matching_events == GROUP_EVENTS_MAX


def test_pages_of_sessions(world):
    with world.client(mine(world)) as c:
        whole = c.search("walrus", group="session", limit=10).sessions
        pages = [c.search("walrus", group="session", limit=1, offset=i) for i in range(len(whole) + 1)]
    assert len(whole) >= 3
    assert [p.sessions[0].session_id for p in pages[:-1]] == [s.session_id for s in whole]
    assert [p.has_more for p in pages[:-1]] == [True] * (len(whole) - 1) + [False]
    assert pages[-1].sessions == [] and pages[-1].hits == []


def test_a_bad_group_is_a_clear_bad_request(world):
    with world.client(mine(world)) as c, pytest.raises(RequestFailed) as exc:
        c.request("search", {"query": "walrus", "group": "sessions"})
    assert exc.value.code == "bad_request" and "group" in exc.value.message


def test_cli_sessions_text_and_json(world):
    text = world.cli("search", "walrus", "--sessions", "--color", "never", cwd=str(world.proj))
    assert text.returncode == 0, text.stderr
    assert '"walrus migration"' in text.stdout and "4 matching events; strongest:" in text.stdout
    assert world.ids[2][0] not in text.stdout
    out = world.cli("search", "walrus", "--sessions", "--json", cwd=str(world.proj))
    data = json.loads(out.stdout)
    assert data["hits"] == [] and data["sessions"][0]["evidence"]["sessionId"] == data["sessions"][0]["sessionId"]
    assert {"firstTimestamp", "lastTimestamp", "matchingEvents", "sessionName", "cwd"} <= set(data["sessions"][0])
    capped = world.cli("search", "narwhal", "--sessions", "--color", "never", cwd=str(world.proj))
    assert f"{GROUP_EVENTS_MAX}+ matching events" in capped.stdout and "more matched" in capped.stdout
