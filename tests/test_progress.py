"""Progress people expect (issue 17): `index --once` shows files and bytes
done of the total, MB/s and time left (a live bar on a terminal, plain lines
when piped, nothing with --json), and `status` shows the rate and time left
while piwatchd catches up. The rate is one definition (piwatch.rates)."""

from __future__ import annotations

import json
import os
import pty
import random
import re
import select
import subprocess

import pytest
from conftest import jsonl, msg, v3_header
from helpers.world import BIN, World, wait_for
from hypothesis import given, strategies as st
from piwatch.commands._progress import IndexProgress
from piwatch.commands.status import format_status
from piwatch.rates import RateMeter, format_duration, time_left
from piwatch.wire import BytesStatus, ServiceStatus, StatusResult

pytestmark = pytest.mark.timeout(300)


def test_rate_over_the_recent_window():
    m = RateMeter(window=10.0)
    assert m.rate(0.0) is None
    m.add(0.0, 0)
    assert m.rate(0.0) is None  # one reading is no rate
    for t in range(1, 31):  # 1 MB/s for 30 s...
        m.add(float(t), t * 1_000_000)
    assert m.rate(30.0) == pytest.approx(1e6, rel=0.05)
    for t in range(31, 51):  # ...then 5 MB/s: the recent rate follows within the window
        m.add(float(t), 30_000_000 + (t - 30) * 5_000_000)
    assert m.rate(50.0) == pytest.approx(5e6, rel=0.1)


@given(st.lists(st.tuples(st.floats(0.0, 0.5), st.integers(0, 10**7)), max_size=2000))
def test_rate_meter_is_bounded_and_never_negative(steps):
    m = RateMeter(window=10.0, samples=64)
    now, total = 0.0, 0
    for dt, more in steps:
        now += dt
        total += more
        m.add(now, total)
        assert len(m._samples) <= 66
        rate = m.rate(now)
        assert rate is None or rate >= 0


@pytest.mark.parametrize(
    ("remaining", "rate", "left", "shown"),
    [
        (0, None, 0.0, "0s"),
        (10_000_000, None, None, "unknown"),
        (10_000_000, 0.0, None, "unknown"),
        (10_000_000, 1e6, 10.0, "10s"),
        (90_000_000, 1e6, 90.0, "1m30s"),
        (7_500_000_000, 1e6, 7500.0, "2h05m"),
    ],
)
def test_time_left(remaining, rate, left, shown):
    assert time_left(remaining, rate) == left
    assert format_duration(left) == shown


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_plain_lines_are_periodic(capsys):
    import sys

    clock = Clock()
    with IndexProgress(sys.stdout, mode="lines", clock=clock, every=5.0) as view:
        view.planned(100, 100_000_000)
        for i in range(100):
            clock.t += 0.125  # exact in binary: the 5 s marks fall on files 40 and 80
            view.done(1_000_000)
            assert i < 99 or view.figures()["files"] == "100/100"
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "indexing: 0/100 files, 0.0 of 100.0 MB, -- MB/s, unknown left"
    assert len(lines) == 3  # at the start, then every 5 s of a 12.5 s run
    assert lines[1].startswith("indexing: 40/100 files, 40.0 of 100.0 MB, 8.0 MB/s, 8s left"), lines


def test_refeed_lines_at_its_start_end_and_every_interval(capsys):
    import sys

    clock = Clock()
    with IndexProgress(sys.stdout, mode="lines", clock=clock, every=5.0) as view:
        for done in range(1, 101):
            clock.t += 0.125
            view.refed(done, 100)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "re-feeding the text index: 1 of 100 sessions (1.0%)"  # no rate from one reading
    assert lines[1] == "re-feeding the text index: 41 of 100 sessions (41.0%), 8.2 sessions/s, 7s left", lines
    assert lines[-1].startswith("re-feeding the text index: 100 of 100 sessions (100.0%)") and len(lines) == 4


def test_status_shows_rate_and_time_left():
    st_ = StatusResult(
        service=ServiceStatus(phase="ingesting", files_ingested=10, rate_bytes_per_s=20e6),
        bytes=BytesStatus(files=1_000_000_000, ingested=400_000_000, backlog=600_000_000),
    )
    text = format_status(st_)
    assert "40.0%" in text and "20.0 MB/s, 30s left" in text


def _corpus(root, files: int, kb: int):
    rng = random.Random(7)
    words = [f"w{n}" for n in range(5000)]
    paragraphs = [" ".join(rng.choice(words) for _ in range(600)) for _ in range(50)]
    for i in range(files):
        d = root / f"--p{i % 7}--"
        d.mkdir(parents=True, exist_ok=True)
        entries, parent = [], None
        for j in range(kb // 4):
            text = f"{rng.choice(paragraphs)} u{i}x{j}"
            entries.append(msg(f"s{i}-e{j}", parent, "user", text))
            parent = f"s{i}-e{j}"
        (d / f"s{i}.jsonl").write_bytes(jsonl(v3_header(f"s{i}", f"/p{i % 7}"), *entries))


@pytest.fixture
def corpus(short_tmp):
    root = short_tmp / "sessions"
    _corpus(root, 40, 200)
    return root


def _cli(*args, env=None, **kw):
    env = {**os.environ, "PIWATCH_CONFIG": "/nonexistent/none.toml", **(env or {})}
    return subprocess.run([str(BIN / "piwatch"), *args], env=env, capture_output=True, text=True, timeout=240, **kw)


def test_index_once_piped_prints_plain_lines_and_json_nothing_extra(corpus, short_tmp):
    out = _cli("index", "--once", "--sessions", str(corpus), "--db", str(short_tmp / "a.sqlite3"))
    assert out.returncode == 0, out.stderr
    first = out.stderr.splitlines()[0]
    assert first.startswith("indexing: 0/40 files, 0.0 of ") and "MB/s" in first and "left" in first
    assert "\x1b" not in out.stderr  # no terminal codes into a pipe
    out = _cli("index", "--once", "--json", "--sessions", str(corpus), "--db", str(short_tmp / "b.sqlite3"))
    assert out.returncode == 0 and out.stderr == ""
    assert json.loads(out.stdout)["files"] == 40


def test_index_once_says_how_far_the_text_index_is_refed(corpus, short_tmp):
    from piwatchd.text.tantivy.index import text_dir

    db = short_tmp / "r.sqlite3"
    assert _cli("index", "--once", "--sessions", str(corpus), "--db", str(db)).returncode == 0
    (text_dir(db) / "piwatch-layout").write_text("1 an-older-piwatch\n")  # as after an upgrade
    out = _cli("index", "--once", "--sessions", str(corpus), "--db", str(db))
    assert out.returncode == 0, out.stderr
    lines = [x for x in out.stderr.splitlines() if x.startswith("re-feeding the text index: ")]
    assert lines[0].startswith("re-feeding the text index: 1 of 40 sessions (2.5%)"), out.stderr
    assert lines[-1].startswith("re-feeding the text index: 40 of 40 sessions (100.0%)")


def _on_a_terminal(*args: str) -> tuple[int, str, str]:
    """Run `piwatch` with stderr on a pseudo-terminal: (status, what the terminal got, stdout)."""
    main, sub = pty.openpty()
    env = {**os.environ, "PIWATCH_CONFIG": "/nonexistent/none.toml", "COLUMNS": "160", "TERM": "xterm"}
    proc = subprocess.Popen([str(BIN / "piwatch"), *args], env=env, stdout=subprocess.PIPE, stderr=sub)
    os.close(sub)
    seen = b""
    while True:
        ready, _, _ = select.select([main], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.wait(60)
    os.close(main)
    return proc.returncode, seen.decode("utf-8", "replace"), proc.stdout.read().decode()


def test_index_once_on_a_terminal_shows_a_live_bar(corpus, short_tmp):
    from piwatchd.text.tantivy.index import text_dir

    db = short_tmp / "t.sqlite3"
    code, text, out = _on_a_terminal("index", "--once", "--sessions", str(corpus), "--db", str(db))
    assert code == 0
    assert "/40 files" in text and "MB/s" in text and " left" in text and "━" in text, text[-2000:]
    assert "indexed 40 files" in out
    (text_dir(db) / "piwatch-layout").write_text("1 an-older-piwatch\n")  # as after an upgrade
    code, text, out = _on_a_terminal("index", "--once", "--sessions", str(corpus), "--db", str(db))
    assert code == 0 and "re-feeding text" in text and "of 40 sessions" in text, text[-2000:]
    assert "indexed 40 files" in out


def test_status_shows_rate_while_the_daemon_catches_up(short_tmp):
    w = World(short_tmp)
    w.root.mkdir()
    _corpus(w.root, 120, 400)
    w.proc = w.start(wait=False)
    try:
        seen = []

        def catching_up():
            out = subprocess.run(
                [str(BIN / "piwatch"), "status"], env=w.env, capture_output=True, text=True, timeout=30
            )
            seen.append(out.stdout)
            lines = [line for line in out.stdout.splitlines() if line.startswith("  indexing [")]
            # A known rate and time left (the first moment of a catch-up has neither).
            return lines and re.search(r", \d+\.\d MB/s, \d+(s|m\d\ds) left$", lines[0])

        wait_for(catching_up, timeout=120)
    finally:
        w.stop()
