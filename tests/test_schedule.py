"""The ingest service's pure schedule parts: the backlog (newest first,
requeued paths, unread bytes) and the retries of transient failures."""

from __future__ import annotations

from hypothesis import given, strategies as st

from piwatchd.ingest.backlog import Backlog
from piwatchd.ingest.retries import RETRY_MAX_SECONDS, Retries, retry_delay


@given(st.integers(1, 10_000))
def test_retry_delay_grows_and_is_capped(attempt):
    assert 0.5 <= retry_delay(attempt) <= RETRY_MAX_SECONDS
    assert retry_delay(attempt + 1) >= retry_delay(attempt)


def test_retry_delay_table():
    assert [retry_delay(n) for n in (1, 2, 3, 4, 6, 8, 50)] == [0.5, 1.0, 2.0, 4.0, 16.0, 60.0, 60.0]


def drain(backlog: Backlog) -> list[str]:
    out = []
    while (path := backlog.next()) is not None:
        backlog.remove(path)
        out.append(path)
    return out


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 50)), max_size=40))
def test_backlog_drains_each_path_once_newest_first_at_its_last_mtime(adds):
    backlog = Backlog()
    for path, mtime in adds:
        backlog.add(path, float(mtime))
    last = dict(adds)  # a path queued again takes its latest mtime
    order = drain(backlog)
    assert sorted(order) == sorted(last)
    assert [last[p] for p in order] == sorted((last[p] for p in order), reverse=True)
    assert not backlog and len(backlog) == 0 and backlog.next() is None


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 50)), max_size=40), st.integers(0, 10))
def test_backlog_upcoming_is_what_next_gives_and_leaves_it_queued(adds, n):
    backlog, twin = Backlog(), Backlog()
    for path, mtime in adds:
        backlog.add(path, float(mtime))
        twin.add(path, float(mtime))
    upcoming = backlog.upcoming(n)
    assert upcoming == drain(twin)[:n]
    assert backlog.upcoming(n) == upcoming  # asking again changes nothing
    assert drain(backlog)[:n] == upcoming


def test_backlog_requeue_and_removal():
    backlog = Backlog()
    for path, mtime in [("old", 1.0), ("mid", 5.0), ("new", 9.0)]:
        backlog.add(path, mtime)
    backlog.add("old", 10.0)  # touched again: now the newest
    backlog.remove("mid")  # a hint took it first
    assert "mid" not in backlog and "old" in backlog
    assert drain(backlog) == ["old", "new"]
    # A file with more work left is queued again after its slice, at the same mtime.
    backlog.add("big", 3.0)
    assert backlog.next() == "big"
    backlog.remove("big")
    backlog.add("big", 3.0)
    assert drain(backlog) == ["big"]


def test_backlog_unread_bytes_are_owed_until_read_or_drained():
    backlog = Backlog()
    backlog.add("a", 1.0, unread=100)
    backlog.add("b", 2.0, unread=50)
    backlog.add("c", 3.0, unread=70)
    backlog.remove("a")
    backlog.read("a", 30)  # a file read in full is no longer queued: it owes nothing more
    assert backlog.unread_bytes == 120
    backlog.remove("b")
    backlog.add("b", 2.0)  # a large file's rest waits its turn: it keeps owing what was not read
    backlog.read("b", 20)
    assert backlog.unread_bytes == 100
    backlog.read("hinted", 1000)  # a file the scans never queued owes nothing
    assert backlog.unread_bytes == 100
    drain(backlog)
    assert backlog.unread_bytes == 0  # an empty backlog owes nothing
    backlog.add("d", 1.0, unread=5)
    backlog.clear()
    assert not backlog and backlog.unread_bytes == 0


def test_backlog_requeued_by_a_scan_counts_its_bytes_once():
    # A periodic scan during a long catch-up re-queues every file still behind:
    # each path's owed bytes are replaced, not added (status said 13.7 GB of a 10 GB history).
    backlog = Backlog()
    for _scan in range(3):
        for i in range(100):
            backlog.add(f"f{i}", float(i), unread=1000)
    assert backlog.unread_bytes == 100 * 1000
    assert len(backlog._heap) <= 2 * len(backlog) + 1024  # stale re-queues do not pile up


_PATHS = st.sampled_from(["a", "b", "c", "d"])
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), _PATHS, st.floats(0, 9), st.one_of(st.none(), st.integers(0, 500))),
        st.tuples(st.just("ingest"), _PATHS, st.integers(0, 600), st.booleans()),
    ),
    max_size=60,
)


@given(_OPS)
def test_backlog_owed_bytes_follow_a_per_path_model(ops):
    """Owed bytes are per path: the latest scan's count, less what was read
    while the path stayed queued; a path read and not re-queued owes nothing."""
    backlog, owed = Backlog(), {}
    for op in ops:
        if op[0] == "add":
            _, path, mtime, unread = op
            backlog.add(path, mtime, unread)
            if unread is not None:
                owed[path] = unread
        else:
            _, path, nbytes, more = op
            backlog.remove(path)
            if not backlog:
                owed.clear()
            if more:
                backlog.add(path, 5.0)
            backlog.read(path, nbytes)
            if path in owed:
                owed[path] = max(0, owed[path] - nbytes) if more else 0
        assert backlog.unread_bytes == sum(owed.values()) >= 0


# (event, path, time) -> (due at that time, next retry time)
RETRY_TABLE = [
    (("fail", "a", 0.0), ([], 0.5)),
    (("fail", "b", 0.1), ([], 0.5)),
    (("due", None, 0.5), (["a"], 0.5)),  # due paths stay scheduled until they succeed or fail again
    (("fail", "a", 0.5), ([], 0.6)),  # second failure of a: 1 s from now; b is due at 0.6
    (("due", None, 0.6), (["b"], 0.6)),
    (("ok", "b", 0.7), (["a"], 0.7)),  # b worked again: a need not wait out its backoff (1.5)
    (("ok", "a", 0.7), ([], None)),
]


def test_retries_follow_the_table():
    retries = Retries()
    for (event, path, now), (due, next_time) in RETRY_TABLE:
        if event == "fail":
            retries.failed(path, now)
        elif event == "ok":
            retries.succeeded(path, now)
        assert retries.due(now) == due, (event, path, now)
        assert retries.next_time() == next_time, (event, path, now)
    assert len(retries) == 0


def test_retry_attempts_count_up_and_reset_on_success():
    retries = Retries()
    assert [retries.failed("x", 0.0) for _ in range(4)] == [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0)]
    retries.succeeded("x", 1.0)
    assert retries.failed("x", 1.0) == (1, 0.5) and len(retries) == 1
    retries.succeeded("never-failed", 2.0)  # a path that was not failing changes nothing
    assert retries.next_time() == 1.5
    retries.clear()
    assert len(retries) == 0 and retries.next_time() is None
