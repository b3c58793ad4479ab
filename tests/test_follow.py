"""Standing queries (`follow`, issue 18) end to end against piwatchd as a
subprocess: appends arrive about when a search could first find them, other
projects never arrive, a slow reader is dropped without holding up the
others, and a thousand idle follows cost bounded memory."""

from __future__ import annotations

import socket
import threading
import time

import psutil
import pytest
from helpers.live import poll, stretched, waiting_on
from helpers.world import Appender
from piwatch import wire
from piwatch.client import RequestFailed
from piwatch.protocol import PROTOCOL_VERSION, ErrorCode, recv_frame, send_frame

pytestmark = pytest.mark.timeout(240)


def _collect(follow, into: list, stop: threading.Event):
    try:
        while not stop.is_set():
            for update in follow.updates(timeout=0.2):
                into.extend((time.monotonic(), h) for h in update.hits)
    except Exception as exc:  # recorded for the assertion
        into.append((time.monotonic(), exc))


def test_appends_arrive_as_soon_as_search_finds_them(world):
    append = Appender(world.root / "a" / "s-proj.jsonl", "s-proj", "s-proj-e1")
    with world.client({"cwd": str(world.proj)}) as c:
        follow = c.follow("narwhal")
        got: list = []
        stop = threading.Event()
        t = threading.Thread(target=_collect, args=(follow, got, stop))
        t.start()
        try:
            lags = []
            for i in range(5):
                start = time.monotonic()
                (eid,) = append(f"narwhal sighting {i}")
                # Each returns the moment it first saw the append: a search polling, the follow's update.
                found = poll(
                    lambda eid=eid: (
                        any(h.entry_id == eid for h in c.search("narwhal", limit=50).hits) and time.monotonic()
                    ),
                    10,
                    interval=0.005,
                    message="a search to find the append",
                )
                arrived = poll(
                    lambda eid=eid: next(
                        (at for at, h in got if not isinstance(h, Exception) and h.entry_id == eid), None
                    ),
                    10,
                    interval=0.002,
                    message="the follow to deliver the append",
                )
                lags.append((found - start, arrived - start))
            # The follow hears each commit: no later than a polling search (+ its poll and a busy machine's slack).
            assert all(follow_s <= search_s + stretched(0.25) for search_s, follow_s in lags), lags
            hits = [h for _, h in got]
            assert [h.entry_id for h in hits] == [f"s-proj-f{i}" for i in range(1, 6)]
            assert all(h.snippet and h.spans for h in hits)
        finally:
            stop.set()
            t.join(5)
            follow.close()


def test_other_projects_never_arrive(world):
    mine = Appender(world.root / "a" / "s-proj.jsonl", "s-proj", "s-proj-e1")
    theirs = Appender(world.root / "c" / "s-prefix.jsonl", "s-prefix", "s-prefix-e0")
    with world.client({"cwd": str(world.proj)}) as c, world.client({"all": True}) as everyone:
        ours, every = c.follow("okapi"), everyone.follow("okapi")
        theirs("okapi in the other project")
        mine("okapi here")
        theirs("okapi again elsewhere")
        (last,) = mine("okapi last")  # after theirs': once ours hears of it, it has heard of every earlier one
        seen_all, seen_ours = [], []
        for update in every.updates(timeout=30):
            seen_all += [h.session_id for h in update.hits]
            if len(seen_all) >= 4:
                break
        for update in ours.updates(timeout=30):
            seen_ours += [(h.session_id, h.entry_id) for h in update.hits]
            if ("s-proj", last) in seen_ours:
                break
        assert sorted(seen_all) == ["s-prefix", "s-prefix", "s-proj", "s-proj"]
        assert [sid for sid, _ in seen_ours] == ["s-proj", "s-proj"], seen_ours
        ours.close()
        every.close()


def _raw_follow(world, query: str, caller: dict) -> tuple[socket.socket, dict]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(world.sock))
    sock.settimeout(10)
    send_frame(sock, {"v": PROTOCOL_VERSION, "id": 0, "op": "hello", "args": {"proto": PROTOCOL_VERSION}})
    assert recv_frame(sock, 1 << 24)["ok"]
    send_frame(sock, {"v": PROTOCOL_VERSION, "id": 7, "op": "follow", "args": {"query": query}, "caller": caller})
    return sock, recv_frame(sock, 1 << 24)


def test_a_slow_reader_is_dropped_and_the_others_go_on(world):
    flood = Appender(world.root / "a" / "s-proj.jsonl", "s-proj", "s-proj-e1")
    slow, ack = _raw_follow(world, "deluge", {"cwd": str(world.proj)})
    assert ack["ok"], ack
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # it reads nothing from here on
    with world.client({"cwd": str(world.proj)}) as c:
        fast = c.follow("deluge")
        got: list = []
        stop = threading.Event()
        t = threading.Thread(target=_collect, args=(fast, got, stop))
        t.start()
        try:
            for _ in range(6):
                flood(*[f"deluge wave {i} " + "x" * 200 for i in range(400)])
                time.sleep(0.3)  # paces the flood in waves (one commit each); decides nothing
            poll(lambda: len(got) >= 2400, 60, interval=0.05, message="the fast follow to hear every wave")
            assert not [h for _, h in got if isinstance(h, Exception)]
            assert len({h.entry_id for _, h in got}) == 2400
            # Others' searches still answer promptly while the slow reader sits there.
            start = time.monotonic()
            assert c.search("deluge", limit=5).hits
            assert time.monotonic() - start < stretched(2.0)
        finally:
            stop.set()
            t.join(5)
            fast.close()
    # The slow reader, reading at last: the updates that fit its buffers, then the drop.
    slow.settimeout(10)
    codes = []
    while True:
        frame = recv_frame(slow, 1 << 24)
        if not frame["ok"]:
            codes.append(frame["error"]["code"])
            assert frame["id"] == 7 and "behind" in frame["error"]["message"]
            break
    assert codes == [ErrorCode.SLOW_CONSUMER]
    slow.close()


def test_follow_limits_and_errors(world):
    with world.client({"cwd": str(world.proj)}) as c:
        follows = [c.follow(f"q{i}") for i in range(wire.MAX_FOLLOWS_PER_CONNECTION)]
        for f in follows:
            f.close()
    sock, ack = _raw_follow(world, "a", {"cwd": str(world.proj)})
    ids = [ack["result"]["subscription"]]
    for i in range(wire.MAX_FOLLOWS_PER_CONNECTION):
        send_frame(sock, {"v": 1, "id": 10 + i, "op": "follow", "args": {"query": f"w{i}"}, "caller": {"all": True}})
        reply = recv_frame(sock, 1 << 24)
        if i < wire.MAX_FOLLOWS_PER_CONNECTION - 1:
            ids.append(reply["result"]["subscription"])
        else:
            assert reply["error"]["code"] == ErrorCode.BUSY and "at most" in reply["error"]["message"]
    send_frame(sock, {"v": 1, "id": 99, "op": "unfollow", "args": {"subscription": ids[0]}})
    assert recv_frame(sock, 1 << 24)["result"] == {"subscription": ids[0], "stopped": True}
    send_frame(sock, {"v": 1, "id": 100, "op": "follow", "args": {"query": "again"}, "caller": {"all": True}})
    assert recv_frame(sock, 1 << 24)["ok"]
    send_frame(sock, {"v": 1, "id": 101, "op": "follow", "args": {"query": "x", "bogus": 1}, "caller": {"all": True}})
    assert recv_frame(sock, 1 << 24)["error"]["code"] == ErrorCode.BAD_REQUEST
    send_frame(sock, {"v": 1, "id": 102, "op": "follow", "args": {"query": "x"}})  # no caller
    assert recv_frame(sock, 1 << 24)["error"]["code"] == ErrorCode.BAD_REQUEST
    sock.close()
    with world.client({"cwd": str(world.proj)}) as c, pytest.raises(RequestFailed):
        c.follow("x", filters={"nonsense": 1})


def test_a_thousand_idle_follows_cost_bounded_memory(world):
    proc = psutil.Process(world.proc.pid)
    before = proc.memory_info().rss
    socks = []
    try:
        for _ in range(1000 // wire.MAX_FOLLOWS_PER_CONNECTION):
            sock, ack = _raw_follow(world, "idle0", {"cwd": str(world.proj)})
            assert ack["ok"], ack
            for i in range(1, wire.MAX_FOLLOWS_PER_CONNECTION):
                send_frame(
                    sock, {"v": 1, "id": i, "op": "follow", "args": {"query": f"idle{i}"}, "caller": {"all": True}}
                )
                assert recv_frame(sock, 1 << 24)["ok"]
            socks.append(sock)
        grown = proc.memory_info().rss - before
        assert grown < 64 * 2**20, f"1000 follows grew RSS by {grown / 2**20:.1f} MiB"
        # Still answering, and a commit with 1000 follows to evaluate does not stall others.
        Appender(world.root / "a" / "s-proj.jsonl", "s-proj", "s-proj-e1")("idle3 idle5 after")
        with world.client({"cwd": str(world.proj)}) as c:
            assert c.search("idle3", wait=5, filters={"sessionId": ["s-proj"]}).hits
        got = 0
        for sock in socks:
            sock.settimeout(10)
            frame = recv_frame(sock, 1 << 24)  # each connection follows idle3 and idle5: one update first
            assert frame["ok"] and frame["result"]["hits"][0]["snippet"]
            got += 1
        assert got == len(socks)
    finally:
        for sock in socks:
            sock.close()


def test_cli_search_follow_prints_hits_as_they_arrive(world):
    import json
    import signal
    import subprocess

    from helpers.world import BIN

    append = Appender(world.root / "a" / "s-proj.jsonl", "s-proj", "s-proj-e1")
    for args, parse in (
        (["--json"], lambda line: json.loads(line)["entryId"]),
        (["--color", "never"], lambda line: line),
    ):
        proc = subprocess.Popen(
            [str(BIN / "piwatch"), "search", "quokka", "--follow", *args],
            cwd=str(world.proj),
            env=world.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # Started as a non-interactive shell starts a background job: SIGINT ignored.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
        try:
            assert "following" in proc.stderr.readline()
            (eid,) = append("quokka \x1b[31mred\x1b[0m spotted")
            lines = [proc.stdout.readline() for _ in range(1 if "--json" in args else 3)]
            assert eid in parse(lines[0]) if "--json" in args else eid in lines[1]
            assert "\x1b" not in "".join(lines)  # session text never reaches the terminal raw
            proc.send_signal(signal.SIGINT)  # stops it although it started with SIGINT ignored
            assert proc.wait(10) == 130
            assert "Traceback" not in proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
    out = world.cli("search", "quokka", "--follow", "--db", str(world.db))
    assert out.returncode == 2 and "--follow" in out.stderr


class _Events:
    """A stand-in event log for the hub's unit tests (the e2e tests use the real one)."""

    def __init__(self):
        self.rowids: list[int] = []

    def newest(self):
        return self.rowids[-1] if self.rowids else 0

    def after(self, rowid, limit):
        return [r for r in self.rowids if r > rowid][:limit]


def _hit(n):
    return wire.Hit(
        session_id="s",
        entry_id=f"e{n}",
        event_type="message",
        role="user",
        timestamp=None,
        cwd="/p",
        session_name=None,
        evidence=wire.Evidence(fragment_id="text.0", kind="user.text", tool_name=None),
        matched_fragments=1,
        score=1.0,
        is_error=False,
        context_role="conversation",
        branch_state="selected",
        selection_state="direct",
        snippet=f"e{n}",
        spans=[],
    )


class _Outlet:
    """A reader as the pusher sees it (`follow.Outlet`): always room, frames to `send`."""

    write_timeout = 10.0

    def __init__(self, send) -> None:
        self.send = send
        self.last: list | None = None

    def room(self) -> bool:
        return True

    def hang_up(self, frames: list) -> None:
        self.last = frames


def test_hub_rounds_only_news_each_follow_once_and_drops_a_full_queue():
    from piwatchd.ingest.commits import CommitSignal
    from piwatchd.serve.follow import ConnectionFollows, FollowHub

    events = _Events()
    events.rowids = [1, 2, 3]
    hub = FollowHub(CommitSignal(), events.newest, events.after)
    evaluated: list = []
    hub.evaluate = lambda asks, pace: [evaluated.append((s.id, list(r))) or [_hit(x) for x in r] for s, r in asks]
    blocked, in_send = threading.Event(), threading.Event()
    sent: list = []

    def send(frame):
        in_send.set()
        blocked.wait()  # the reader takes nothing until released
        sent.append(frame)
        return True

    conn = ConnectionFollows(_Outlet(send))
    first = hub.subscribe(conn, 1, wire.FollowArgs(query="x"), scope=None)
    events.rowids += [4, 5]
    second = hub.subscribe(conn, 2, wire.FollowArgs(query="x"), scope=None)  # after 5: 4 and 5 are old to it
    events.rowids += [6]
    hub.round()
    assert evaluated == [(first.id, [4, 5, 6]), (second.id, [6])]
    assert in_send.wait(10)  # the pusher took one update and is stuck writing it
    hub.round()  # nothing new: nothing repeated
    assert len(evaluated) == 2 and len(first.queue) + len(second.queue) <= 2
    events.rowids += list(range(7, 7 + wire.FOLLOW_QUEUE_HITS + 10))
    hub.round()
    assert first.dropped and second.dropped and hub.count() == 0
    blocked.set()
    poll(lambda: len([f for f in sent if not f.ok]) >= 2, message="both drops sent")
    errors = [f for f in sent if not f.ok]
    assert sorted(f.id for f in errors) == [1, 2] and {f.error.code for f in errors} == {ErrorCode.SLOW_CONSUMER}
    hub.end_connection(conn)


def test_a_round_searches_once_for_follows_asking_the_same():
    from piwatchd.ingest.commits import CommitSignal
    from piwatchd.serve.auth import CallerScope
    from piwatchd.serve.follow import ConnectionFollows, FollowHub

    events = _Events()
    events.rowids = [1]
    hub = FollowHub(CommitSignal(), events.newest, events.after)
    asked: list = []

    def evaluate(asks, pace):
        asked.append(sorted((s.args.query, s.args.exact, s.scope.roots, tuple(r)) for s, r in asks))
        return [[_hit(x) for x in r] for _, r in asks]

    hub.evaluate = evaluate
    sent: list[list] = [[], [], []]
    conns = [ConnectionFollows(_Outlet(lambda frame, out=out: out.append(frame) or True)) for out in sent]
    here, there = CallerScope(roots=("/p",)), CallerScope(roots=("/q",))
    for c in conns:
        hub.subscribe(c, 1, wire.FollowArgs(query="x"), scope=here)
    hub.subscribe(conns[0], 2, wire.FollowArgs(query="x"), scope=CallerScope(roots=("/p",)))  # equal scope
    hub.subscribe(conns[1], 3, wire.FollowArgs(query="x"), scope=there)
    hub.subscribe(conns[2], 4, wire.FollowArgs(query="x", exact=False), scope=here)
    events.rowids += [2, 3]
    hub.round()
    # Four follows asking the same share one search; another scope or other args search apart.
    assert asked == [[("x", False, ("/p",), (2, 3)), ("x", True, ("/p",), (2, 3)), ("x", True, ("/q",), (2, 3))]]
    want = {(0, 1), (0, 2), (1, 1), (1, 3), (2, 1), (2, 4)}  # (connection, request id): each gets its hits

    def got() -> set:
        return {
            (n, f.id)
            for n, out in enumerate(sent)
            for f in list(out)
            if [h.snippet for h in f.result.hits] == ["e2", "e3"]
        }

    poll(lambda: got() == want, message=f"the updates {want}")
    for c in conns:
        hub.end_connection(c)


def test_a_round_hears_each_event_once_however_the_ranking_moves(monkeypatch):
    """450 new events all match, and each search orders their tied scores the
    other way from the last (as a commit between two searches may: ties go by
    where the documents sit): each event is heard exactly once. Pages of one
    search (offsets 0, 200, 400) heard 51-200 twice and 201-250 never."""
    from piwatchd.serve.ops import follow as ops_follow

    searches: list[tuple[int, ...]] = []

    def search(query, req, *, only_events, slot):
        searches.append(only_events)
        ranked = sorted(only_events, reverse=len(searches) % 2 == 0)
        page = ranked[query.offset : query.offset + query.limit]
        more = query.offset + query.limit < len(ranked)
        return wire.SearchResult(
            query=query.query, limit=query.limit, offset=query.offset, has_more=more, hits=[_hit(e) for e in page]
        )

    monkeypatch.setattr(ops_follow, "search", search)
    events = list(range(1, 451))
    hits = ops_follow.follow_hits(wire.FollowArgs(query="deluge"), None, events)
    assert sorted(h.entry_id for h in hits) == sorted(f"e{e}" for e in events)
    assert ops_follow.follow_hits(wire.FollowArgs(query="deluge"), None, []) == []  # no events: no search at all
    assert len(searches) == 3


@pytest.mark.parametrize(
    ("query_words", "present", "could"),
    [
        ([["kraken"]], {"kraken", "answer"}, True),
        ([["kraken"], ["answer"]], {"kraken"}, False),  # every term's words are needed
        ([["release", "notes"]], {"release", "notes"}, True),  # a phrase: its words at least
        ([["release", "notes"]], {"release"}, False),
        ([[]], set(), True),  # a term with no words of its own rules nothing out
    ],
)
def test_could_match(query_words, present, could):
    from piwatchd.serve.ops.follow import could_match

    assert could_match(query_words, present) is could


def test_a_follows_query_is_analyzed_once_for_every_round(monkeypatch):
    """The words of a follow's query are kept between rounds (one analysis per query,
    not per round and follow); the cache is bounded and starts again when full."""
    from piwatchd.serve.ops import follow as ops_follow

    analyzed: list[str] = []

    def words_of(text: str) -> list[str]:
        analyzed.append(text)
        return text.lower().split()

    keep = ops_follow.QueryWords("tantivy")
    present = frozenset({"kraken", "answer"})
    for _ in range(3):  # three rounds, each with its own NewWords
        new = ops_follow.NewWords(None, words_of, keep)  # type: ignore[arg-type]
        monkeypatch.setattr(new, "_words", lambda events: present)
        assert not new.rules_out(wire.FollowArgs(query="Kraken"), [1])
        assert new.rules_out(wire.FollowArgs(query="kraken zebra"), [1])
        assert not new.rules_out(wire.FollowArgs(query="kraken zebra", exact=False), [1])  # forms: never ruled out
    assert sorted(analyzed) == ["Kraken", "kraken", "zebra"]
    monkeypatch.setattr(ops_follow, "QUERY_WORDS_MAX", 2)
    keep.remember("third", [["third"]])
    assert list(keep) == ["third"]


def test_words_ruled_out_before_searching_lose_no_hit(world, monkeypatch):
    """A round searches only follows whose words are among the new events'; the hits are
    those of searching every follow. And a follow of words only in a tool result's meta
    still hears of it, through piwatchd's own rounds."""
    from conftest import jsonl, msg, v3_header

    from piwatchd.serve.api import Api
    from piwatchd.serve.auth import resolve_scope
    from piwatchd.serve.ops import follow as ops_follow

    api = Api(world.db)
    # Every event, once its text is on disk for this reader (the daemon may still hold it in memory).
    events = poll(
        lambda: (e := api.events_after(0, 500)) and e[-1] == api.newest_event() and e,
        30,
        interval=0.1,
        message="the world's text on the disk index",
    )
    queries = ["kraken", '"release notes"', "kraken answer", "nested", "zebraquux", "kraken zebraquux"]
    asks = []
    for q in queries:
        asks.append((wire.FollowArgs(query=q), resolve_scope({"all": True}), events))
    searched: list = []
    real_search = ops_follow.search

    def counting(query, req, **kw):
        searched.append(query.query)
        return real_search(query, req, **kw)

    monkeypatch.setattr(ops_follow, "search", counting)
    try:
        got = api.follow_round(asks)
        ruled = set(queries) - set(searched)
        # The reference: every follow searched.
        monkeypatch.setattr(ops_follow.NewWords, "rules_out", lambda self, args, events: False)
        want = api.follow_round(asks)
    finally:
        api.readers.reset()
    assert ruled == {"zebraquux", "kraken zebraquux"}
    ids = [sorted((h.session_id, h.entry_id) for h in hits) for hits in got]
    assert ids == [sorted((h.session_id, h.entry_id) for h in hits) for hits in want]
    assert ids[0] and ids[1] and ids[3]

    call = {"type": "toolCall", "id": "c1", "name": "widgetgrep", "arguments": {"pattern": "x"}}
    result = [{"type": "text", "text": "no such file"}]
    with world.client({"all": True}) as c, c.follow("widgetgrep error") as follow:
        d = world.root / "t"
        d.mkdir()
        (d / "s-tool.jsonl").write_bytes(
            jsonl(
                v3_header("s-tool", str(world.proj)),
                msg("s-tool-e0", None, "assistant", [call], stopReason="toolUse"),
                msg(
                    "s-tool-e1", "s-tool-e0", "toolResult", result, toolCallId="c1", toolName="widgetgrep", isError=True
                ),
            )
        )
        got_hits: list = []
        for update in follow.updates(timeout=30):
            got_hits += update.hits
            break
        assert [(h.session_id, h.entry_id) for h in got_hits] == [("s-tool", "s-tool-e1")]  # meta words count


def test_a_round_gives_way_to_running_requests_within_its_budget():
    """Before each follow's search a round waits while requests run, twice as
    long as it worked since its last wait (at least a step), until its budget
    is spent; with nothing running it never waits."""
    from piwatchd.serve.follow import Pacer

    now = [0.0]
    waits: list[float] = []

    def busy(timeout: float) -> bool:  # requests keep running: every wait takes its whole timeout
        waits.append(timeout)
        now[0] += timeout
        return False

    pace = Pacer(busy, budget=0.25, step=0.01, share=2.0, clock=lambda: now[0])
    pace()  # nothing worked yet: one step
    for worked in (0.002, 0.03, 0.04, 0.5, 0.01):
        now[0] += worked  # a follow's search
        pace()
    assert waits == pytest.approx([0.01, 0.01, 0.06, 0.08, 0.09]) and sum(waits) == pytest.approx(0.25)

    idle_waits: list[float] = []
    pace = Pacer(lambda timeout: idle_waits.append(timeout) or True, budget=0.25, step=0.1, clock=lambda: 0.0)
    for _ in range(100):
        pace()
    assert len(idle_waits) == 100  # asked every time, never charged: nothing ran


def test_slots_wait_idle_returns_when_the_last_request_ends():
    from piwatchd.serve.slots import FairSlots

    slots = FairSlots(4, 4, 2, 1)
    assert slots.wait_idle(0)
    assert slots.acquire("a", False, 1) and slots.acquire("b", True, 1)
    assert not slots.wait_idle(0.01)
    released = threading.Event()

    def release_later():
        slots.release("a", False)
        # The waiter woke, saw b's slot still held and waits again: only b's release may end its wait.
        poll(lambda: waiting_on(slots._cond), message="wait_idle waiting")
        released.set()
        slots.release("b", True)

    threading.Thread(target=release_later).start()
    assert slots.wait_idle(10) and released.is_set()
