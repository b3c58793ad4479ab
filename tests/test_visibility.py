"""One visibility per request, end to end against piwatchd as a process (issue 10, items 3-4).

Each leak class with several variants: the response envelope (freshness and
warnings of a foreign or missing session), warnings about other projects'
broken files, `status` counts and problem paths, `reindex` of a foreign id,
`sessions` past the caller's own cutoff, read/trace nodes. For every class an
unauthorized target must answer exactly like a missing one (content, shape
and, loosely, timing), and a huge first-line value of a broken file must
never reach a response in full.
"""

from __future__ import annotations

import json
import statistics
import time

import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import stretched
from helpers.world import World, wait_for, write
from piwatch.client import Client, RequestFailed
from piwatch.wire import to_builtins, to_json

pytestmark = pytest.mark.timeout(120)

HUGE = "Z" * 3_000_000  # a first-line value far beyond any frame a client accepts


@pytest.fixture
def vworld(short_tmp):
    w = World(short_tmp)
    w.root.mkdir()
    write(w.root, "a", "s-mine", str(w.proj), "zebra mine", "zebra reply", "zebra third")
    write(w.root, "b", "s-mine2", str(w.proj / "sub"), "zebra nested")
    write(w.root, "c", "s-other", str(w.base / "proj2"), "zebra other project", "zebra other reply")
    write(w.root, "d", "s-now", str(w.proj), "zebra early", "zebra invoking", "zebra later")
    # Broken files in the other project's folder: not a session (huge first line), and unreadable JSON.
    (w.root / "c" / "broken.jsonl").write_text(json.dumps({"type": "not-a-header", "value": HUGE}) + "\n")
    (w.root / "c" / "garbage.jsonl").write_bytes(b"\x00\x01 not json at all\n")
    w.start()
    wait_for(lambda: w.client({"all": True}).status().sources.total >= 6)
    yield w
    w.stop()


def mine(w):
    return {"cwd": str(w.proj)}


def outcome(c: Client, fn):
    """(error or result, warnings, freshness) of one call, as plain data."""
    try:
        value = to_builtins(fn(c))
    except RequestFailed as exc:
        value = {"error": exc.code, "message": exc.message}
    return value, to_builtins(c.last_warnings), to_builtins(c.last_freshness)


@pytest.mark.parametrize("op", ["read", "trace", "read-neighbours", "reindex"])
def test_foreign_id_answers_exactly_like_a_missing_one(vworld, op):
    calls = {
        "read": lambda sid, eid: lambda c: c.read(sid, eid),
        "trace": lambda sid, eid: lambda c: c.trace(sid, eid),
        "read-neighbours": lambda sid, eid: lambda c: c.read(sid, eid, before=3, after=3, order="branch"),
        "reindex": lambda sid, eid: lambda c: c.reindex(sid),
    }[op]
    with vworld.client(mine(vworld)) as c:
        foreign = outcome(c, calls("s-other", "s-other-e0"))
        missing = outcome(c, calls("s-nope", "s-nope-e0"))
    # Both ids are shorter than a session id prefix may be (wire.MIN_ID_PREFIX) and name no
    # visible session: "too short" for the hidden one exactly as for the missing one.
    assert foreign[0]["error"] == "bad_request"
    assert foreign == missing
    assert "s-other" not in json.dumps(foreign)


def test_search_envelope_names_only_visible_sessions(vworld):
    with vworld.client(mine(vworld)) as c:
        for filters in ({"sessionId": ["s-other"]}, {"sessionId": ["s-other", "s-mine"]}, {}):
            result = c.search("zebra", filters=filters, wait=1)
            named = {f.session_id for f in c.last_freshness.sessions}
            assert named <= {"s-mine", "s-mine2", "s-now"}, filters
            assert "s-other" not in to_json(result) + to_json(c.last_warnings) + to_json(c.last_freshness)
        # Waiting on a foreign session takes no longer than waiting on a missing one: nothing to wait for.
        t = time.monotonic()
        c.search("zebra", filters={"sessionId": ["s-other"]}, wait=3)
        assert time.monotonic() - t < min(stretched(1.5), 2.5)


def test_warnings_never_carry_other_projects_files_or_huge_values(vworld):
    with vworld.client(mine(vworld)) as c:
        c.search("zebra")
        assert all("/c/" not in (w.path or "") and "broken" not in w.message for w in c.last_warnings)
    with vworld.client({"all": True}) as c:
        st = c.status()
        problems = {p.path.rsplit("/", 1)[-1]: p for p in st.sources.problems}
        assert {"broken.jsonl", "garbage.jsonl"} <= set(problems)
        assert all(len(p.error or "") < 1000 for p in st.sources.problems)
        assert len(to_json(st)) < 100_000


def test_status_of_a_workspace_caller_counts_only_its_sessions(vworld):
    with vworld.client(mine(vworld)) as c:
        st = c.status()
    text = to_json(st)
    assert st.sessions == 3 and st.sources.total == 3  # s-mine, s-mine2, s-now
    assert st.sources.problems == [] and "proj2" not in text and "broken" not in text
    assert st.db is None and st.service is not None and st.service.errors == {} and st.service.roots == []
    with vworld.client({"cwd": str(vworld.base / "proj2")}) as c:
        other = c.status()
    assert other.sessions == 1 and "s-mine" not in to_json(other)
    with vworld.client({"all": True}) as c:
        everything = c.status()
    assert everything.sessions == 4 and everything.sources.total == 6


def test_status_json_is_camel_case_everywhere(vworld):
    out = vworld.cli("status", "--json")
    assert out.returncode in (0, 2), out.stderr
    data = json.loads(out.stdout)

    def keys(v, path=""):
        if isinstance(v, dict):
            for k, x in v.items():
                if path.endswith((".errors", ".byState", ".byCode")):
                    continue  # maps keyed by data (paths, states, codes), not field names
                yield k
                yield from keys(x, f"{path}.{k}")
        elif isinstance(v, list):
            for x in v:
                yield from keys(x, path)

    snake = sorted({k for k in keys(data) if "_" in k})
    assert snake == [], snake
    assert data["service"]["filesKnown"] >= 6 and "uptimeSeconds" in data["service"]
    assert data["service"]["lastScan"]["atMs"] > 0


def test_last_scan_reaches_the_freshness_watermark(vworld):
    # Latent bug: lastScanMs read `finished_ms` while the service writes `at_ms`.
    with vworld.client(mine(vworld)) as c:
        c.search("zebra")
        assert c.last_freshness.last_scan_ms and c.last_freshness.last_scan_ms <= time.time() * 1000


def test_sessions_and_search_stop_at_the_cutoff(vworld):
    caller = {**mine(vworld), "sessionId": "s-now", "cutoffEntryId": "s-now-e1"}
    with vworld.client(caller) as c:
        listed = c.sessions(limit=2)
        assert {s.session_id for s in listed.sessions} == {"s-mine", "s-mine2"} and not listed.has_more
        assert "s-now" not in to_json(c.sessions())
        own = c.search("zebra", filters={"sessionId": ["s-now"]})
        assert [h.entry_id for h in own.hits] == ["s-now-e0"]
        t = c.trace("s-now", "s-now-e0")
        assert not t.materialized_leaf.known and "s-now-e1" not in to_json(t) and "s-now-e2" not in to_json(t)
        r = c.read("s-now", "s-now-e0", after=5, order="branch")
        assert r.neighbours.after == [] and "s-now-e2" not in to_json(r)
        f = {x.session_id: x for x in c.last_freshness.sessions}
        assert set(f) == {"s-now"}


def test_unauthorized_and_missing_take_about_the_same_time(vworld):
    def once(c, sid):
        t = time.perf_counter()
        with pytest.raises(RequestFailed):
            c.read(sid, f"{sid}-e0")
        return time.perf_counter() - t

    with vworld.client(mine(vworld)) as c:
        once(c, "s-nope")  # warm up
        # Interleaved, so a busy machine slows both alike.
        pairs = [(once(c, "s-other"), once(c, "s-nope")) for _ in range(40)]
    foreign, missing = (statistics.median(x) for x in zip(*pairs, strict=True))
    assert abs(foreign - missing) < 0.003 + 0.5 * max(foreign, missing), (foreign, missing)


def test_caller_named_files_outside_the_session_roots_are_never_indexed(vworld):
    outside = vworld.base / "elsewhere.jsonl"
    outside.write_bytes(jsonl(v3_header("s-outside", str(vworld.proj)), msg("x", None, "user", "zebra smuggled")))
    fifo_like = vworld.base / "proj" / "notes.jsonl"
    fifo_like.write_text("plain text\n")
    for path in (outside, fifo_like, vworld.base / "missing.jsonl"):
        caller = {**mine(vworld), "sessionId": "s-outside", "sessionFile": str(path), "cutoffEntryId": "zz"}
        with vworld.client(caller) as c:
            c.search("zebra", filters={"sessionId": ["s-outside"]}, wait=0.5)
    # A session written after those requests, inside the roots: once it is searchable, the
    # ingest thread has handled every hint the requests could have posted before it.
    write(vworld.root, "g", "s-later", str(vworld.proj), "zebra afterwards")

    def later_indexed():
        with vworld.client({"all": True}) as c:
            return c.search("afterwards", filters={"sessionId": ["s-later"]}).hits

    wait_for(later_indexed)
    with vworld.client({"all": True}) as c:
        paths = [p.path for p in c.status().sources.problems]
        assert "s-outside" not in {s.session_id for s in c.sessions(limit=500).sessions}
        assert not any(str(vworld.base / "proj") in p or "elsewhere" in p for p in paths)


def test_configured_workspace_roots_apply(short_tmp):
    # Latent bug: the daemon read `settings.workspace_roots`, which did not exist, so configured
    # roots never applied. A monorepo root authorizes every package below it, ahead of Git roots.
    w = World(short_tmp)
    w.root.mkdir()
    mono = w.base / "mono"
    for pkg in ("a", "b"):
        (mono / pkg / ".git").mkdir(parents=True)
    write(w.root, "a", "s-a", str(mono / "a"), "heron in package a")
    write(w.root, "b", "s-b", str(mono / "b"), "heron in package b")
    write(w.root, "c", "s-c", str(w.proj), "heron elsewhere")
    (w.base / "none.toml").write_text(f'workspace_roots = ["{mono}"]\n')
    w.start()
    try:
        for cwd in (mono / "a", mono / "b" / "deep"):
            (cwd).mkdir(parents=True, exist_ok=True)
            with w.client({"cwd": str(cwd)}) as c:
                assert {h.session_id for h in c.search("heron").hits} == {"s-a", "s-b"}
        with w.client({"cwd": str(w.proj)}) as c:  # outside the configured root: its Git root
            assert {h.session_id for h in c.search("heron").hits} == {"s-c"}
    finally:
        w.stop()


def test_huge_recorded_values_are_bounded_in_every_listing(short_tmp):
    # One huge session name or cwd repeats on every hit and listing row of its session.
    w = World(short_tmp)
    w.root.mkdir()
    big = "N" * 2_000_000
    d = w.root / "a"
    d.mkdir()
    (d / "s-big.jsonl").write_bytes(
        jsonl(
            v3_header("s-big", str(w.proj)),
            {
                "type": "session_info",
                "id": "i1",
                "parentId": None,
                "timestamp": "2026-05-01T10:00:00.500Z",
                "name": big,
            },
            *[msg(f"m{i}", "i1" if i == 0 else f"m{i - 1}", "user", f"ibis message {i}") for i in range(30)],
        )
    )
    w.start()
    try:
        with w.client({"cwd": str(w.proj)}) as c:
            hits = c.search("ibis", limit=30).hits
            assert len(hits) == 30 and all(len(h.session_name or "") <= 1100 for h in hits)
            assert len(to_json(c.sessions())) < 10_000
    finally:
        w.stop()


def test_status_counts_follow_every_commit_on_one_connection(vworld):
    """Status's aggregates are remembered per connection until the index
    changes: a new session shows at once, and callers asking on the same
    connection never see each other's counts."""
    with vworld.client({"all": True}) as c:
        before = c.status()
        assert c.status(caller=mine(vworld)).sessions == 3
        assert c.status().sessions == before.sessions == 4
        write(vworld.root, "a", "s-late", str(vworld.proj), "zebra late arrival")
        wait_for(lambda: c.search("arrival").hits)
        after = c.status()
        assert after.sessions == 5 and after.events == before.events + 1
        assert after.sources.total == before.sources.total + 1 and after.bytes.files > before.bytes.files
        assert c.status(caller=mine(vworld)).sessions == 4
        assert c.status(caller={"cwd": str(vworld.base / "proj2")}).sessions == 1
