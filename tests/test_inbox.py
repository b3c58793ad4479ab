"""The pure scheduling rules: which hinted paths are due (settle + max
latency) and what one `take()` drains (the backlog and the retry backoff:
`tests/test_schedule.py`)."""

from __future__ import annotations

import time

from helpers.live import stretched
from hypothesis import given, strategies as st

from piwatchd.ingest.inbox import Inbox, due_paths


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_due_paths_table():
    marks = {"quiet": (0.0, 1.0), "busy": (0.0, 9.9), "new": (9.95, 9.95)}
    # Each was read just before its first mark. settle 0.5: "quiet" settled;
    # "busy" never settles but reached max latency 5; "new" waits.
    taken = {path: first - 0.1 for path, (first, _) in marks.items()}
    due, next_due = due_paths(marks, 10.0, 0.5, 5.0, taken)
    assert sorted(due) == ["busy", "quiet"] and next_due == 10.45


def test_a_path_marked_after_a_quiet_spell_is_due_at_once():
    marks = {"isolated": (9.9, 9.9), "never": (9.9, 9.9), "again": (9.9, 9.95), "burst": (9.9, 9.95)}
    # "isolated" was last taken 1 s ago, "never" never: due at their first mark.
    # "again" was taken 0.2 s before its first mark: it coalesces (settle 0.5 after its last mark).
    taken = {"isolated": 9.0, "again": 9.7, "burst": 9.8}
    due, next_due = due_paths(marks, 10.0, 0.5, 5.0, taken)
    assert sorted(due) == ["isolated", "never"] and next_due == 10.45


def test_an_isolated_mark_is_taken_at_once_and_a_burst_coalesces():
    clock = Clock()
    inbox = Inbox(clock)
    inbox.mark("/a.jsonl")
    assert inbox.take(0.05, 1.0).due == ["/a.jsonl"]  # no settle wait
    clock.now += 0.01
    inbox.mark("/a.jsonl")  # right after it was read: waits for the burst to settle
    work = inbox.take(0.05, 1.0)
    assert work.due == [] and work.next_due == clock.now + 0.05
    clock.now += 0.05
    assert inbox.take(0.05, 1.0).due == ["/a.jsonl"]
    clock.now += 0.2
    inbox.mark("/a.jsonl")  # quiet again: at once
    assert inbox.take(0.05, 1.0).due == ["/a.jsonl"]


@given(st.floats(0, 10), st.floats(0.01, 10), st.lists(st.floats(0, 100), min_size=1, max_size=20))
def test_a_continuously_marked_path_is_due_within_max_latency(settle, max_latency, gaps):
    first = 0.0
    last = first + sum(g for g in gaps if g < settle)  # marks never quiet for `settle`
    due, next_due = due_paths({"p": (first, last)}, first + max_latency, settle, max_latency)
    assert due == ["p"] or (next_due is not None and next_due <= first + max_latency)


def test_one_take_drains_every_command_kind():
    clock = Clock()
    inbox = Inbox(clock)
    inbox.mark("/a.jsonl")
    inbox.mark_dir("/d")
    inbox.request_reconcile("SIGHUP")
    inbox.request_reconcile("SIGHUP")  # coalesced
    inbox.request_rebuild(None)
    inbox.request_index_check("malformed")
    inbox.request_index_check("malformed again")  # one check answers both
    clock.now += 1.0
    work = inbox.take(0.1, 1.0)
    assert (work.rebuilds, work.reconcile, work.dirs, work.due) == ([None], ["SIGHUP"], ["/d"], ["/a.jsonl"])
    assert work.index_check == "malformed"
    empty = inbox.take(0.1, 1.0)
    assert (empty.rebuilds, empty.reconcile, empty.dirs, empty.due, empty.next_due) == ([], [], [], [], None)
    assert empty.index_check is None
    assert inbox.pending() == 0


def test_a_post_between_take_and_wait_is_not_lost():
    """The ingest thread takes, works, then waits: a hint posted while it worked found nobody
    waiting on the condition, so `wait()` must return at once instead of sleeping to the
    heartbeat (a new folder's file was once found only 5 s later, by the next event)."""
    for post in (
        lambda i: i.mark("/s.jsonl"),
        lambda i: i.mark_dir("/d"),
        lambda i: i.request_reconcile("why"),
        lambda i: i.request_rebuild(None),
        lambda i: i.request_index_check("damaged"),
    ):
        inbox = Inbox()
        inbox.take(0.05, 0.3)
        post(inbox)
        started = time.monotonic()
        inbox.wait(5.0)
        assert time.monotonic() - started < min(stretched(1.0), 4.0)
        inbox.take(0.0, 0.0)  # drained: the next wait sleeps its timeout
        started = time.monotonic()
        inbox.wait(0.2)
        assert time.monotonic() - started >= 0.15


def test_take_due_takes_due_paths_only():
    """The ingest thread reads appends that arrived while it read others
    (`Service._ingest_arrivals`); commands wait for the next full `take`."""
    clock = Clock()
    inbox = Inbox(clock)
    inbox.mark("/a.jsonl")
    inbox.request_reconcile("SIGHUP")
    assert inbox.take_due(0.05, 1.0) == ["/a.jsonl"]
    clock.now += 0.01
    inbox.mark("/a.jsonl")  # right after it was read: not due yet
    assert inbox.take_due(0.05, 1.0) == []
    work = inbox.take(0.05, 1.0)
    assert work.reconcile == ["SIGHUP"] and work.due == [] and work.next_due == clock.now + 0.05
