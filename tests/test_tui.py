"""`piwatch tui` driven headless with Textual's pilot against piwatchd as a
subprocess: typing searches, late answers to older queries never show,
scope and filters, the preview's read and trace, control characters
escaped, and the read-only fallback when piwatchd is down. The pure parts
(filter words, tickets, row cells) are table-tested."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import pytest
from conftest import jsonl, msg, v3_header
from piwatch.tui_model import (
    COLUMNS,
    Latest,
    NewestOnly,
    ScreenState,
    fit_row,
    marked_segments,
    parse_line,
    search_request,
    wrap_lines,
)
from rich.cells import cell_len

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize(
    ("line", "query", "filters"),
    [
        ("kraken", "kraken", {}),
        ("kraken kind:tool.result tool:bash", "kraken", {"kind": ["tool.result"], "tool": ["bash"]}),
        ('"release notes" is:error', '"release notes"', {"isError": True}),
        ("x -is:error branch:selected", "x", {"isError": False, "branchState": ["selected"]}),
        ("url:http://a b", "url:http://a b", {}),  # not a filter word: part of the query
        ("kind: x", "kind: x", {}),  # an empty value is text
    ],
)
def test_filter_words(line, query, filters):
    got_query, got_filters, problems = parse_line(line)
    assert (got_query, got_filters, problems) == (query, filters, [])


def test_filter_word_problems_and_time():
    _, filters, problems = parse_line("x since:7d until:2026-13-45")
    assert filters["sinceMs"] > 0 and "untilMs" not in filters and problems and "until" in problems[0]
    state = ScreenState(line="kraken", errors_only=True, offset=50, limit=17, cwd="/p")
    args, _ = search_request(state)
    assert args == {"query": "kraken", "filters": {"isError": True}, "limit": 17, "offset": 50}
    assert state.caller() == {"cwd": "/p"}
    assert search_request(ScreenState(line="kind:x ", cwd="/p"))[0] is None  # filters alone search nothing


def test_latest_ticket_wins():
    latest = Latest()
    a, b = latest.next(), latest.next()
    assert not latest.is_current(a) and latest.is_current(b)


def test_marked_segments_escape_and_keep_spans():
    segs = marked_segments("a\x1b[2Jkraken\nb", [(5, 11)])
    assert segs == [("a\\x1b[2J", False), ("kraken", True), (" b", False)]


CELLS = ("2026-05-01 10:00", "proj", "tool.result bash ERROR")
SNIPPET = [("before ", False), ("kraken", True), (" after 日本語 tail", False)]


@pytest.mark.parametrize("width", [200, 80, 70, 65, 64, 20, 3, 0])
def test_a_result_row_fills_exactly_its_width(width):
    pieces = fit_row(CELLS, SNIPPET, width)
    text = "".join(p for p, _ in pieces)
    assert cell_len(text) == width
    fixed = sum(COLUMNS) + 2 * len(COLUMNS)
    if width >= fixed + len("before kraken"):
        assert text.startswith("2026-05-01 10:00  proj") and ("kraken", True) in pieces
        columns = "".join(cell.ljust(cols) + "  " for cell, cols in zip(CELLS, COLUMNS, strict=True))
        assert text.startswith(columns + "before kraken")
    assert all(not match or piece in "kraken" for piece, match in pieces)


def test_columns_are_as_wide_as_their_widest_cell_up_to_a_cap():
    from piwatch.tui_model import column_widths

    rows = [
        ("2026-05-01 10:00", "api", "user.text"),
        ("2026-05-01 10:01", "a-very-long-project-name", "tool.call bash"),
    ]
    assert column_widths(rows) == (16, COLUMNS[1], len("tool.call bash"))
    assert column_widths([]) == (0, 0, 0)
    text = "".join(p for p, _ in fit_row(rows[0], SNIPPET, 60, column_widths(rows)))
    assert text.startswith("2026-05-01 10:00  api" + " " * (COLUMNS[1] - 3) + "  user.text       before")
    assert cell_len(text) == 60


def test_a_cut_wide_character_never_overflows():
    for width in range(60, 90):  # every cut position through the wide characters
        assert cell_len("".join(p for p, _ in fit_row(CELLS, SNIPPET, width))) == width


def test_preview_lines_are_escaped_expanded_and_cut():
    lines = wrap_lines("a\tb\x1b[2J\x07\n" + "x" * 25, 10)
    assert lines[:2] == ["a       b\\", "x1b[2J\\x07"]
    assert all(cell_len(line) <= 10 for line in lines) and "".join(lines).count("x") >= 25
    assert not any(c in "".join(lines) for c in "\t\x1b\x07")
    assert wrap_lines("日本語日本語", 5) == ["日本", "語日", "本語"]


def test_newest_only_skips_replaced_jobs_and_never_overlaps():
    started, running, ran = threading.Event(), [], []
    release = threading.Event()

    def work(job):
        running.append(job)
        assert len(running) == 1, "two jobs at once"
        started.set()
        if job == 1:
            release.wait(5)
        ran.append(job)
        running.remove(job)

    runner = NewestOnly(work, "test-newest")
    runner.submit(1)
    assert started.wait(5)
    for job in (2, 3, 4):  # while 1 runs: only the newest is kept
        runner.submit(job)
    release.set()
    deadline = time.monotonic() + 5
    while ran != [1, 4] and time.monotonic() < deadline:
        time.sleep(0.01)
    runner.close()
    assert ran == [1, 4]


def _app(world, **kw):
    from piwatch.tui import Backend, SearchApp

    return SearchApp(Backend(str(world.sock)), cwd=str(world.proj), **kw)


async def _until(pilot, cond, timeout=15.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "the screen did not settle"
        await pilot.pause(0.05)


def _run(coro):
    return asyncio.run(coro)


def test_typing_searches_scope_filters_preview_and_trace(world):
    async def go():
        app = _app(world)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press(*"kraken")
            await _until(pilot, lambda: app.shown_query == "kraken" and app.hits)
            ours = {h.session_id for h in app.hits}
            assert "s-prefix" not in ours and "s-proj" in ours
            await _until(pilot, lambda: "session " in app.preview_text)
            first = app.hits[0]
            assert f"entry {first.entry_id}" in app.preview_text and "source " in app.preview_text
            await pilot.press("ctrl+o")  # all projects
            await _until(pilot, lambda: "s-prefix" in {h.session_id for h in app.hits})
            await pilot.press(*" kind:user.text")
            await _until(pilot, lambda: app.shown_query == "kraken kind:user.text")
            assert app.hits and all(h.evidence.kind == "user.text" for h in app.hits)
            await pilot.press("down")
            await pilot.press("ctrl+t")
            await _until(pilot, lambda: "the session's file" in app.preview_text)  # the trace, in words
            await pilot.press("f1")
            assert "HelpScreen" in type(app.screen).__name__
            await pilot.press("escape")

    _run(go())


def test_nothing_found_shows_each_word_by_itself(world):
    """No event holds both words: the preview says which the history holds by itself."""

    async def go():
        app = _app(world)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press(*"release zzqqxx")
            await _until(pilot, lambda: app.shown_query == "release zzqqxx")
            assert app.hits == []
            await _until(pilot, lambda: "by itself:" in app.preview_text)
            assert "release in 1 event, zzqqxx in no event" in app.preview_text

    _run(go())


def test_late_answers_to_older_queries_never_show(world):
    from piwatch.tui import Backend, SearchApp

    class SlowFirst(Backend):
        """The answer for "kra" takes a second: it arrives after "kraken"'s."""

        def call(self, op, args, caller):
            if op == "search" and args["query"] == "kra":
                time.sleep(1.0)
            return super().call(op, args, caller)

    drawn = []

    class Recording(SearchApp):
        def _draw(self, ticket, line, result, problems):
            if self.searches.is_current(ticket):
                drawn.append(line)
            super()._draw(ticket, line, result, problems)

    async def go():
        app = Recording(SlowFirst(str(world.sock)), cwd=str(world.proj))
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press(*"kra")
            await pilot.pause(0.2)  # "kra" is in flight
            await pilot.press(*"ken")
            await _until(pilot, lambda: app.shown_query == "kraken")
            await pilot.pause(1.5)  # the slow answer has come back by now
            assert app.shown_query == "kraken" and drawn[-1] == "kraken", drawn
            assert "kra" not in drawn[drawn.index("kraken") :]

    _run(go())


def test_control_characters_are_escaped(world):
    d = world.root / "g"
    d.mkdir()
    (d / "s-evil.jsonl").write_bytes(
        jsonl(v3_header("s-evil", str(world.proj)), msg("s-evil-e0", None, "user", "kraken \x1b]0;pwned\x07 \x1b[2J"))
    )

    async def go():
        app = _app(world)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press(*"pwned")
            await _until(pilot, lambda: app.shown_query == "pwned" and app.hits, timeout=30)
            row = app.table.row_text(0)
            assert "\x1b" not in row and "\x07" not in row and "\\x1b" in row
            drawn = [str(app.table.render_line(y).text) for y in range(app.table.fits)]
            assert any("\\x1b" in line for line in drawn) and not any("\x1b" in line for line in drawn)
            await _until(pilot, lambda: "s-evil" in app.preview_text)
            assert "\x1b" not in app.preview_text
            shown = [str(app.preview_w.render_line(y).text) for y in range(app.preview_w.size.height)]
            assert not any("\x1b" in line or "\x07" in line for line in shown)
            assert any("\\x1b" in line for line in shown)

    _run(go())


def test_daemon_down_falls_back_to_the_index_file(world, monkeypatch):
    world.stop()
    monkeypatch.setenv("PIWATCH_DB", str(world.db))
    monkeypatch.setenv("PIWATCH_CONFIG", str(world.base / "none.toml"))

    async def go():
        app = _app(world, status_every=0.2)
        assert app.backend.read_only
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press(*"kraken")
            await _until(pilot, lambda: app.shown_query == "kraken" and app.hits)
            status = app.query_one("#status")
            await _until(pilot, lambda: "not running" in str(status.render()))

    _run(go())


def test_the_package_never_imports_textual_at_import_time():
    code = "import sys, piwatch, piwatch.cli; piwatch.cli.build_parser(); print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(("env", "fps"), [({}, "240"), ({"TEXTUAL_FPS": "30"}, "30")])
def test_the_tui_paints_at_its_frame_cap_unless_the_user_sets_one(env, fps):
    """An answer waits for Textual's next frame: the TUI raises the cap (read
    once, at Textual's import) unless the user set TEXTUAL_FPS."""
    import os

    code = (
        "import piwatch.tui, textual.constants as c, textual.screen as s; print(c.MAX_FPS, round(1 / s.UPDATE_PERIOD))"
    )
    base = {k: v for k, v in os.environ.items() if k != "TEXTUAL_FPS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=base | env)
    assert out.stdout.split() == [fps, fps]


def test_status_footer_lines():
    from piwatch.tui import status_line
    from piwatch.wire import BytesStatus, IndexProgress, ServiceStatus, StatusResult

    class B:
        read_only, down_reason = False, None

    catching = StatusResult(
        service=ServiceStatus(rate_bytes_per_s=10e6, backlog_bytes=50_000_000),
        catch_up=IndexProgress(files_done=19, files_total=60),
        bytes=BytesStatus(files=100, ingested=50, backlog=50),
    )
    assert status_line(B(), catching) == "indexing: 19 of 60 files, 10.0 MB/s, 5s left"
    idle = StatusResult(service=ServiceStatus(), sessions=6, events=12)
    assert status_line(B(), idle) == "piwatchd: 6 sessions, 12 events indexed"
    down = B()
    down.read_only, down.down_reason = True, "gone"
    assert "piwatchd is not running" in status_line(down, idle)


def test_copy_paging_and_the_entry_line(world, tmp_path):
    from piwatch.tui import line_of

    for i in range(3):  # enough hits for two pages in this project
        d = world.root / f"p{i}"
        d.mkdir()
        entries = [
            msg(f"s-p{i}-e{j}", None if j == 0 else f"s-p{i}-e{j - 1}", "user", f"wombat {j}") for j in range(25)
        ]
        (d / f"s-p{i}.jsonl").write_bytes(jsonl(v3_header(f"s-p{i}", str(world.proj)), *entries))

    async def go():
        app = _app(world)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press(*"wombat")
            await _until(pilot, lambda: app.shown_query == "wombat" and app.hits, timeout=30)
            page = app.state.limit  # one screenful: the rows the result list shows
            assert page == app.table.fits and 2 < page < 75 - page and len(app.hits) == page and app.has_more
            await pilot.press("down", "down")
            await pilot.press("ctrl+y")
            hit = app.hits[2]
            assert app.clipboard == f"{hit.session_id} {hit.entry_id}"
            first_page = {(h.session_id, h.entry_id) for h in app.hits}
            await pilot.press("pagedown")
            await _until(pilot, lambda: (app.hits[0].session_id, app.hits[0].entry_id) not in first_page)
            assert app.state.offset == page and len(app.hits) == page
            assert not first_page & {(h.session_id, h.entry_id) for h in app.hits}
            await pilot.press("pageup")
            await _until(pilot, lambda: (app.hits[0].session_id, app.hits[0].entry_id) in first_page)
            assert app.state.offset == 0 and {(h.session_id, h.entry_id) for h in app.hits} == first_page

    _run(go())
    f = tmp_path / "f.jsonl"
    f.write_bytes(b"a\nbb\nccc\n")
    assert [line_of(str(f), off) for off in (0, 2, 5, 9)] == [1, 2, 3, 4]


def test_a_pinned_query_shows_new_matches_live(world):
    from helpers.world import Appender

    append = Appender(world.root / "a" / "s-proj.jsonl", "s-proj", "s-proj-e1")
    theirs = Appender(world.root / "c" / "s-prefix.jsonl", "s-prefix", "s-prefix-e0")

    async def go():
        app = _app(world)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press(*"narwhal")
            await _until(pilot, lambda: app.shown_query == "narwhal")
            await pilot.press("ctrl+f")
            assert app.pin_stop is not None
            theirs("narwhal elsewhere")  # another project: never shown here
            append("narwhal \x1b[5m live")
            await _until(pilot, lambda: app.pinned_count >= 1, timeout=30)
            await pilot.pause(0.5)
            text = str(app.pinned_w.render())
            assert app.pinned_count == 1 and "narwhal" in text and "\x1b" not in text and "\\x1b" in text
            assert "elsewhere" not in text
            await pilot.press("ctrl+f")  # unpin
            assert app.pin_stop is None and not app.pinned

    _run(go())


def test_a_search_never_waits_behind_a_slow_preview(world):
    from piwatch.tui import Backend, SearchApp

    reading = threading.Event()

    class SlowRead(Backend):
        def call(self, op, args, caller):
            if op == "read":
                reading.set()
                time.sleep(3.0)
            return super().call(op, args, caller)

    async def go():
        app = SearchApp(SlowRead(str(world.sock)), cwd=str(world.proj))
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press(*"kraken")
            await _until(pilot, lambda: reading.is_set())  # the preview's read is out for 3 s
            await pilot.press("ctrl+u", *"answer")
            start = time.monotonic()
            await _until(pilot, lambda: app.shown_query == "answer" and app.hits)
            assert time.monotonic() - start < 2.0  # searched on its own connection

    _run(go())


def test_long_queries_scroll_and_the_page_follows_the_screen(world):
    from piwatch.tui import QueryInput

    async def go():
        app = _app(world)
        async with app.run_test(size=(80, 40)) as pilot:
            await pilot.press(*"kraken")
            await _until(pilot, lambda: app.shown_query == "kraken" and app.hits)
            rows = app.state.limit
            assert rows == app.table.fits > 0
            await pilot.resize_terminal(80, 60)  # a taller list asks for a taller screenful
            await _until(pilot, lambda: app.state.limit == app.table.fits and app.table.fits > rows)
            line = "kraken " + "z" * 120  # longer than the query line: it scrolls to the cursor
            query = app.query_one(QueryInput)
            query.value = line
            query.cursor_position = len(line)
            await _until(pilot, lambda: app.shown_query == line)
            await pilot.pause(0.1)
            assert query.scroll_offset.x > 0
            shown = "".join(str(query.render_line(y).text) for y in range(query.size.height))
            assert "zzzz" in shown and "kraken" not in shown
            app._set_preview("\n".join(f"line {i}" for i in range(200)))  # longer than the pane
            await pilot.press("tab", "down", "pagedown")  # tab: to the preview; its keys scroll it
            assert app.focused is app.preview_w and app.preview_w.top == 11
            assert str(app.preview_w.render_line(0).text).startswith("line 11")
            await pilot.press("tab")
            assert app.focused is query

    _run(go())


def test_the_preview_reads_once_typing_pauses(world):
    from piwatch.tui import PREVIEW_AFTER_TYPING, PREVIEW_SETTLE, Backend, SearchApp

    calls: list = []

    class Timed(Backend):
        def call(self, op, args, caller):
            out = super().call(op, args, caller)
            calls.append((op, args.get("query"), time.monotonic()))
            return out

    async def go():
        app = SearchApp(Timed(str(world.sock)), cwd=str(world.proj))
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press(*"kraken")
            await _until(pilot, lambda: any(op == "read" for op, _, _ in calls))
            answered = max(t for op, q, t in calls if op == "search" and q == "kraken")
            (read_at,) = [t for op, _, t in calls if op == "read"]  # none between keystrokes
            assert read_at - answered >= PREVIEW_AFTER_TYPING - 0.02  # once typing paused
            calls.clear()
            await pilot.press("down")  # a moved selection previews sooner
            await _until(pilot, lambda: any(op == "read" for op, _, _ in calls))
            assert PREVIEW_SETTLE < PREVIEW_AFTER_TYPING

    _run(go())
