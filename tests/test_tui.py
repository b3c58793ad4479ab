"""`piwatch tui` driven headless with Textual's pilot against piwatchd as a
subprocess: typing searches, late answers to older queries never show,
scope and filters, the preview's read and trace, control characters
escaped, and the read-only fallback when piwatchd is down. The pure parts
(filter words, tickets, row cells) are table-tested."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time

import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import poll
from helpers.world import wait_for
from piwatch.tui_model import (
    COLUMNS,
    NARROW,
    Latest,
    NewestOnly,
    ScreenState,
    around_match,
    first_marked,
    fit_columns,
    fit_row,
    marked_segments,
    match_terms,
    no_hits_lines,
    parse_line,
    search_request,
    wrap_lines,
    wrap_marked,
)
from rich.cells import cell_len

# A worker thread's exception (one printed after the screen is gone) fails the test.
pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning"),
]


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


@pytest.mark.parametrize("width", [200, 120, 80, 70, 65, 64, 20, 3, 0])
def test_a_result_row_fills_exactly_its_width(width):
    pieces = fit_row(CELLS, SNIPPET, width)
    text = "".join(p for p, _ in pieces)
    assert cell_len(text) == width
    columns = fit_columns(COLUMNS, width)
    fixed = sum(columns) + 2 * sum(1 for cols in columns if cols)
    if width >= fixed + len("before kraken"):
        time = CELLS[0][-columns[0] :]  # a narrow time column loses the year first
        cells = (time, *(cell[:cols] for cell, cols in zip(CELLS[1:], columns[1:], strict=True)))
        prefix = "".join(cell.ljust(cols) + "  " for cell, cols in zip(cells, columns, strict=True) if cols)
        assert text.startswith(prefix + "before kraken") and ("kraken", True) in pieces
    assert all(not match or piece in "kraken" for piece, match in pieces)


def test_narrow_rows_leave_the_snippet_at_least_half():
    assert fit_columns(COLUMNS, 200) == COLUMNS and fit_columns(COLUMNS, 123) == COLUMNS
    assert fit_columns(COLUMNS, 122) == NARROW[0]  # 62 fixed cells would leave 60 of 122
    assert fit_columns((16, 3, 9), 80) == (16, 3, 9)  # narrow cells need no narrowing
    assert [fit_columns(COLUMNS, w) for w in (60, 40, 20)] == [NARROW[1], NARROW[2], NARROW[2]]
    text = "".join(p for p, _ in fit_row(CELLS, SNIPPET, 80))
    assert text.startswith("05-01 10:00  proj" + " " * 7 + "tool.result ba  before kraken")
    assert "".join(p for p, _ in fit_row(CELLS, SNIPPET, 40)).startswith("05-01 10:00  before kraken")


# A snippet as piwatchd cuts it: its window starts about a quarter of the window before the match.
LONG = "x" * 100 + " and then compaction ran on the session " + "y" * 280


@pytest.mark.parametrize("width", [200, 140, 120, 100, 80, 60, 40, 30])
def test_a_row_shows_its_match_centred(width):
    """piwatchd's snippet puts the match ~105 characters in: at 140 columns
    the row used to end before it. Now the snippet is cut in front (marked …)
    so the match sits mid-way in the snippet's cells."""
    start = LONG.index("compaction")
    segments = marked_segments(LONG, [(start, start + len("compaction"))])
    pieces = fit_row(CELLS, segments, width)
    text = "".join(p for p, _ in pieces)
    assert cell_len(text) == width and ("compaction", True) in pieces
    shown = sum(1 for cols in fit_columns(COLUMNS, width) if cols)
    snippet_at = sum(cell_len(p) for p, _ in pieces[:shown])  # the cells come first
    room = width - snippet_at
    left = text.index("compaction") - snippet_at
    right = room - left - len("compaction")
    if start + len("compaction") > room:  # it would not have fitted: cut in front
        assert text[snippet_at] == "\u2026" and abs(left - right) <= 2, (left, right)
    else:
        assert text[snippet_at:].startswith("xxx")


def test_around_match_keeps_the_row_full_and_wide_characters_whole():
    tail = [("a" * 30, False), ("hit", True), ("日本語", False)]  # the snippet ends soon after the match
    cut = around_match(tail, 20)
    assert cut[0] == ("\u2026", False) and ("hit", True) in cut
    assert sum(cell_len(p) for p, _ in cut) == 20  # moved left so no cell is blank
    wide = [("日本語日本語日本語日本語", False), ("hit", True), ("z" * 40, False)]
    for width in range(8, 30):  # every cut position through the wide characters
        cut = around_match(wide, width)
        shown = "".join(p for p, _ in cut)
        assert ("hit", True) in cut and cell_len(shown) >= width and "\ufffd" not in shown
    assert around_match(SNIPPET, 200) == SNIPPET and around_match([("a", False)], 1) == [("a", False)]
    assert around_match([("a" * 10, False), ("x" * 50, True)], 20) == [("\u2026", False), ("x" * 50, True)]


def test_the_preview_marks_matches_even_across_a_cut():
    lines = wrap_marked("one Kraken two\n" + "z" * 8 + "kraken", 10, ("kraken",))
    assert lines[0] == [("one ", False), ("Kraken", True)] and lines[1] == [(" two", False)]
    assert lines[2] == [("zzzzzzzz", False), ("kr", True)] and lines[3] == [("aken", True)]
    assert wrap_lines("one Kraken two", 10) == ["one Kraken", " two"]
    assert wrap_marked("a\x1b[2J kraken", 40, ("kraken",))[0][-1] == ("kraken", True)  # escaped first


def test_the_preview_opens_at_the_first_match_in_the_matched_fragment():
    text = "session s  entry e\n-- before\n  e0  kraken said before\n-- f1 (text, 9 chars)\nintro\nkraken\n"
    lines = wrap_marked(text, 80, ("kraken",))
    assert first_marked(lines, "-- f1 (") == 5  # not the neighbour's line 2
    assert first_marked(lines, "-- f9 (") == 2 and first_marked(lines) == 2
    assert first_marked(wrap_marked("a\n-- f1 (x)\nb", 80, ("kraken",)), "-- f1 (") == 1
    assert first_marked(wrap_marked("a\nb", 80, ("kraken",))) is None


def test_match_terms_are_the_snippet_words_as_matched():
    from types import SimpleNamespace

    hit = SimpleNamespace(
        snippet="Kraken and kraken, krakens and release", spans=[(0, 6), (11, 17), (19, 26), (31, 31)]
    )
    assert match_terms(hit) == ("krakens", "kraken")


def test_no_hits_says_where_the_hits_are_and_how_to_widen():
    assert no_hits_lines(True, None) == ["no hits in any project"]
    assert no_hits_lines(False, (0, False)) == ["no hits in this project or any other"]
    assert no_hits_lines(False, None) == ["no hits in this project"]
    assert no_hits_lines(False, (1, False))[1] == "1 hit in other projects: ctrl+o searches all projects"
    assert no_hits_lines(False, (50, True))[1].startswith("50+ hits in other projects")


def test_columns_are_as_wide_as_their_widest_cell_up_to_a_cap():
    from piwatch.tui_model import column_widths

    rows = [
        ("2026-05-01 10:00", "api", "user.text"),
        ("2026-05-01 10:01", "a-very-long-project-name", "tool.call bash"),
    ]
    assert column_widths(rows) == (16, COLUMNS[1], len("tool.call bash"))
    assert column_widths([]) == (0, 0, 0)
    text = "".join(p for p, _ in fit_row(rows[0], SNIPPET, 140, column_widths(rows)))
    assert text.startswith("2026-05-01 10:00  api" + " " * (COLUMNS[1] - 3) + "  user.text       before")
    assert cell_len(text) == 140


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
    poll(lambda: len(ran) == 2, 5, message="the newest job run")
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

    in_flight, release = threading.Event(), threading.Event()

    class SlowFirst(Backend):
        """The answer for "kra" waits until "kraken" was typed: it comes back late."""

        def call(self, op, args, caller):
            if op == "search" and args["query"] == "kra":
                in_flight.set()
                release.wait(15)
            return super().call(op, args, caller)

    shown = []

    class Recording(SearchApp):
        def _draw(self, ticket, line, *rest):
            super()._draw(ticket, line, *rest)
            shown.append(self.shown_query)

    async def go():
        app = Recording(SlowFirst(str(world.sock)), cwd=str(world.proj))
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press(*"kra")
            await _until(pilot, in_flight.is_set)
            await pilot.press(*"ken")
            release.set()
            # One search at a time: "kra"'s late answer came, and was handled, before "kraken"'s.
            await _until(pilot, lambda: app.shown_query == "kraken")
            assert "kra" not in shown, shown

    _run(go())


# "Trojan Source": bidi override and isolate, a right-to-left mark, zero-width and tag characters.
TROJAN = "\u202enimda\u202c \u2066i\u2069\u200f z\u200bw\u2060\ufeff\U000e0041"
TROJAN_SHOWN = "\\u202enimda\\u202c \\u2066i\\u2069\\u200f z\\u200bw\\u2060\\ufeff\\U000e0041"
RAW = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\U000e0000-\U000e007f]"
)


def test_control_characters_are_escaped(world):
    d = world.root / "g"
    d.mkdir()
    (d / "s-evil.jsonl").write_bytes(
        jsonl(
            v3_header("s-evil", str(world.proj)),
            msg("s-evil-e0", None, "user", f"kraken \x1b]0;pwned\x07 \x1b[2J {TROJAN}"),
        )
    )

    async def go():
        app = _app(world)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press(*"pwned")
            await _until(pilot, lambda: app.shown_query == "pwned" and app.hits, timeout=30)
            row = app.table.row_text(0)
            assert not RAW.search(row) and "\\x1b" in row and TROJAN_SHOWN in row
            drawn = [str(app.table.render_line(y).text) for y in range(app.table.fits)]
            assert any("\\x1b" in line for line in drawn) and not any(RAW.search(line) for line in drawn)
            assert any(TROJAN_SHOWN in line for line in drawn)
            await _until(pilot, lambda: "s-evil" in app.preview_text)
            assert not RAW.search(app.preview_text)
            shown = [str(app.preview_w.render_line(y).text) for y in range(app.preview_w.size.height)]
            assert not any(RAW.search(line) for line in shown)
            assert any("\\x1b" in line for line in shown) and any(TROJAN_SHOWN in line for line in shown)

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
            with world.client({"all": True}) as everyone:  # committed before ours: heard in the same round or earlier
                poll(lambda: everyone.search("elsewhere").hits, 30, message="the other project's append indexed")
            append(f"narwhal \x1b[5m live {TROJAN}")
            await _until(pilot, lambda: app.pinned_count >= 1, timeout=30)
            text = str(app.pinned_w.render())
            assert app.pinned_count == 1 and "narwhal" in text and not RAW.search(text) and "\\x1b" in text
            assert TROJAN_SHOWN in text
            assert "elsewhere" not in text
            await pilot.press("ctrl+f")  # unpin
            assert app.pin_stop is None and not app.pinned

    _run(go())


def test_a_search_never_waits_behind_a_slow_preview(world):
    from piwatch.tui import Backend, SearchApp

    reading, release, read = threading.Event(), threading.Event(), threading.Event()

    class SlowRead(Backend):
        def call(self, op, args, caller):
            if op != "read":
                return super().call(op, args, caller)
            reading.set()
            release.wait(30)
            try:
                return super().call(op, args, caller)
            finally:
                read.set()

    async def go():
        app = SearchApp(SlowRead(str(world.sock)), cwd=str(world.proj))
        async with app.run_test(size=(160, 48)) as pilot:
            try:
                await pilot.press(*"kraken")
                await _until(pilot, reading.is_set)  # the preview's read is out until the end
                await pilot.press("ctrl+u", *"answer")
                # Answered while the read still waits: searched on its own connection and thread.
                await _until(pilot, lambda: app.shown_query == "answer" and app.hits)
            finally:
                release.set()
                await _until(pilot, read.is_set)  # answered before the app closes its connections

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
            await _until(pilot, lambda: app.shown_query == line and query.scroll_offset.x > 0)
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


# -- the keys, as a person expects them ------------------------------------------------------


def _textual_keys(*classes):
    """key -> the actions Textual's own classes among `classes` (and their bases) bind it to."""
    from textual.binding import BindingsMap

    out: dict[str, set[str]] = {}
    for cls in classes:
        for klass in cls.__mro__:
            if klass.__module__.startswith("textual.") and "BINDINGS" in vars(klass):
                for key, bindings in BindingsMap(vars(klass)["BINDINGS"]).key_to_bindings.items():
                    out.setdefault(key, set()).update(b.action for b in bindings)
    return out


def _own_keys(cls):
    from textual.binding import BindingsMap

    return {key: {b.action for b in bs} for key, bs in BindingsMap(vars(cls)["BINDINGS"]).key_to_bindings.items()}


# Input binds these to scrolling, which it skips (SkipAction) while it cannot scroll
# vertically, as a one-line Input never can: the key goes on to the app's binding.
SKIPPED_ON_ONE_LINE = {"up": "scroll_up", "down": "scroll_down", "pageup": "page_up", "pagedown": "page_down"}


def test_no_key_collides_with_textuals_own():
    """ctrl+p was the previous page, but Textual's App opens its command palette
    on it; ctrl+e was errors-only, but the query line (focused from the start)
    takes it as end-of-line. Every key of the TUI is checked against the
    installed Textual's App, Screen and Input bindings and the palette key:
    the bindings a key meets on its way from the focused widget (the query
    line or the preview, children of the screen) up to the app."""
    from piwatch.tui import SearchApp
    from piwatch.tui_widgets import HelpScreen, PreviewPane, QueryInput
    from textual.keys import Keys
    from textual.screen import Screen

    screen = _textual_keys(SearchApp, Screen, HelpScreen)  # App's, Screen's, ModalScreen's
    screen.setdefault(SearchApp.COMMAND_PALETTE_BINDING, set()).add("command_palette")
    query = _textual_keys(QueryInput)
    special = {key.value for key in Keys}
    for key, actions in _own_keys(SearchApp).items():
        # Focus starts in the query line: every app key must get past it.
        assert "ctrl+" in key or key in special, f"{key}: the query line types it"
        taken = screen.get(key, set()) - actions  # the same action as Textual's (ctrl+q quit) is no collision
        assert not taken, f"{key}: Textual binds it to {taken}"
        if key in query:
            assert query[key] == {SKIPPED_ON_ONE_LINE.get(key)}, f"{key}: the query line binds it to {query[key]}"
    for cls in (PreviewPane, HelpScreen):  # bound only while they have focus (or are on top)
        for key, actions in _own_keys(cls).items():
            assert not screen.get(key, set()) - actions, f"{cls.__name__} {key}: Textual binds it"
    assert "enter" in query and "tab" in screen  # the help's enter and tab are Textual's own keys


def test_every_key_in_the_help_is_bound():
    from piwatch.tui import HELP, HELP_KEYS, SearchApp
    from piwatch.tui_widgets import PreviewPane

    names = {"pgdn": "pagedown", "pgup": "pageup"}
    bound = set(_own_keys(SearchApp)) | {"enter", "tab"}  # enter: the query line's submit; tab: Textual's focus
    for keys, does in HELP_KEYS:
        for key in keys.split(" / "):
            assert names.get(key, key) in bound, key
        assert f"{keys:<12} {does}" in HELP
    shown = {b.key for b in SearchApp.BINDINGS if b.show}  # the footer's
    assert shown <= {k for keys, _ in HELP_KEYS for k in keys.split(" / ")}
    assert {"enter", "question_mark"} <= set(_own_keys(PreviewPane))
    assert max(cell_len(line) for line in HELP.splitlines()) <= 80 - 6  # in its border and padding at 80 columns


async def _search(pilot, app, query):
    await pilot.press("ctrl+u", *query)
    await _until(pilot, lambda: app.shown_query == query and app.hits, timeout=30)


def _expected_preview(world, op, hit):
    """The preview's text for `op` of `hit`, as the CLI prints it, asked straight of piwatchd."""
    import io

    from piwatch.colour import SafeText
    from piwatch.commands.read import print_read
    from piwatch.commands.trace import print_trace

    args = {"sessionId": hit.session_id, "entryId": hit.entry_id}
    if op == "read":
        args.update(before=2, after=2, order="branch")
    out = io.StringIO()
    result = world.client().request(op, args, {"cwd": str(world.proj)})
    (print_read if op == "read" else print_trace)(result, SafeText(out, False))
    return out.getvalue()


def _wombats(world):
    """75 hits in this project: more than one screenful."""
    for i in range(3):
        entries = [
            msg(f"s-w{i}-e{j}", None if j == 0 else f"s-w{i}-e{j - 1}", "user", f"wombat {j}") for j in range(25)
        ]
        d = world.root / f"w{i}"
        d.mkdir()
        (d / f"s-w{i}.jsonl").write_bytes(jsonl(v3_header(f"s-w{i}", str(world.proj)), *entries))


def _an_error(world):
    d = world.root / "err"
    d.mkdir()
    call = {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "kraken --go"}}
    result = msg("s-err-e2", "s-err-e1", "toolResult", [{"type": "text", "text": "kraken failed"}], isError=True)
    result["message"].update(toolCallId="c1", toolName="bash")
    entries = [msg("s-err-e0", None, "user", "run it"), msg("s-err-e1", "s-err-e0", "assistant", [call]), result]
    (d / "s-err.jsonl").write_bytes(jsonl(v3_header("s-err", str(world.proj)), *entries))


async def _key_moves(world, app, pilot):
    await _search(pilot, app, "kraken")
    await pilot.press("down")
    assert app.table.cursor == 1
    await _until(pilot, lambda: f"entry {app.hits[1].entry_id}" in app.preview_text)
    await pilot.press("up")
    assert app.table.cursor == 0
    await _search(pilot, app, "wombat")
    page = len(app.hits)
    assert app.has_more and page > 2
    await pilot.press(*["down"] * (page - 1))
    assert app.table.cursor == page - 1 and app.state.offset == 0
    await pilot.press("down")  # past the last row: the next page, at its first
    await _until(pilot, lambda: app.state.offset == page and app.searches.is_current(app.drawn))
    assert app.table.cursor == 0
    await pilot.press("up")  # before the first: the previous page, at its last
    await _until(pilot, lambda: app.state.offset == 0 and app.searches.is_current(app.drawn))
    assert app.table.cursor == page - 1


async def _key_pages(world, app, pilot):
    await _search(pilot, app, "wombat")
    first = [(h.session_id, h.entry_id) for h in app.hits]
    await pilot.press("pagedown")
    await _until(pilot, lambda: app.state.offset == len(first) and app.searches.is_current(app.drawn))
    assert not set(first) & {(h.session_id, h.entry_id) for h in app.hits}
    await pilot.press("pageup")
    await _until(pilot, lambda: app.state.offset == 0 and app.searches.is_current(app.drawn))
    assert [(h.session_id, h.entry_id) for h in app.hits] == first


async def _key_enter(world, app, pilot):
    await _search(pilot, app, "kraken")
    await pilot.press("down", "enter")
    await _until(pilot, lambda: app.return_value is not None)
    assert app.return_value == f"{app.hits[1].session_id} {app.hits[1].entry_id}"


async def _key_scope(world, app, pilot):
    await _search(pilot, app, "kraken")
    assert "s-prefix" not in {h.session_id for h in app.hits}
    await pilot.press("ctrl+o")
    await _until(pilot, lambda: "s-prefix" in {h.session_id for h in app.hits})
    assert "scope: all projects" in app.scope_text


async def _key_errors(world, app, pilot):
    await _search(pilot, app, "kraken")
    assert not all(h.is_error for h in app.hits)
    await pilot.press("ctrl+s")
    await _until(pilot, lambda: app.hits and all(h.is_error for h in app.hits))
    assert "errors only" in app.scope_text and app.query_one("#query").value == "kraken"
    await pilot.press("ctrl+s")
    await _until(pilot, lambda: not all(h.is_error for h in app.hits))


async def _key_tab(world, app, pilot):
    await _search(pilot, app, "kraken")
    query = app.query_one("#query")
    await pilot.press("tab")
    assert app.focused is app.preview_w
    await pilot.press("tab")
    assert app.focused is query
    await pilot.press("s")  # adds to the query: tab back selected none of it
    assert query.value == "krakens"


async def _key_trace(world, app, pilot):
    await _search(pilot, app, "kraken")
    await pilot.press("ctrl+t")
    await _until(pilot, lambda: app.preview_text == _expected_preview(world, "trace", app.hits[0]))


async def _key_read(world, app, pilot):
    await _key_trace(world, app, pilot)
    await pilot.press("ctrl+r")
    await _until(pilot, lambda: app.preview_text == _expected_preview(world, "read", app.hits[0]))


async def _key_pin(world, app, pilot):
    await _search(pilot, app, "kraken")
    await pilot.press("ctrl+f")
    assert app.pin_stop is not None and app.pinned_w.display and "pinned" in str(app.pinned_w.render())
    await pilot.press("ctrl+f")
    assert app.pin_stop is None and not app.pinned_w.display


async def _key_copy(world, app, pilot):
    await _search(pilot, app, "kraken")
    await pilot.press("down", "ctrl+y")
    assert app.clipboard == f"{app.hits[1].session_id} {app.hits[1].entry_id}"


async def _key_edit(world, app, pilot):
    notes = []
    app.notify = lambda message, **kw: notes.append(message)
    await _search(pilot, app, "kraken")
    await pilot.press("ctrl+g")  # a headless screen cannot be left: it says where the entry is
    await _until(pilot, lambda: notes)
    path = world.root / "a" / "s-proj.jsonl" if app.hits[0].session_id == "s-proj" else None
    assert "at line " in notes[0] and (path is None or str(path) in notes[0]), notes


async def _key_help(world, app, pilot):
    from piwatch.tui import HELP
    from piwatch.tui_widgets import HelpScreen

    await pilot.press("f1")
    assert isinstance(app.screen, HelpScreen) and str(app.screen.query_one("#help").render()) == HELP
    await pilot.press("escape")
    assert not isinstance(app.screen, HelpScreen)
    await pilot.press("tab", "question_mark")  # ? outside the query line
    assert isinstance(app.screen, HelpScreen)
    await pilot.press("q")
    assert not isinstance(app.screen, HelpScreen)


async def _key_quit(world, app, pilot):
    await _search(pilot, app, "kraken")
    await pilot.press("ctrl+q")
    await _until(pilot, lambda: not app.is_running)
    assert app.return_value is None


KEY_CHECKS = {
    "down / up": _key_moves,
    "pgdn / pgup": _key_pages,
    "enter": _key_enter,
    "ctrl+o": _key_scope,
    "ctrl+s": _key_errors,
    "tab": _key_tab,
    "ctrl+t": _key_trace,
    "ctrl+r": _key_read,
    "ctrl+f": _key_pin,
    "ctrl+y": _key_copy,
    "ctrl+g": _key_edit,
    "f1": _key_help,
    "ctrl+q": _key_quit,
}


@pytest.mark.timeout(600)  # thirteen screens, one after another
def test_every_key_in_the_help_does_what_it_says(world):
    """Each key the help (F1) lists, pressed in a fresh screen, does what the help says."""
    from piwatch.tui import HELP_KEYS

    assert [keys for keys, _ in HELP_KEYS] == list(KEY_CHECKS)
    _wombats(world)
    _an_error(world)
    with world.client({"all": True}) as c:
        wait_for(lambda: c.search("wombat", limit=1, offset=74).hits and c.search('"kraken failed"').hits)

    async def go():
        for keys, check in KEY_CHECKS.items():
            app = _app(world)
            async with app.run_test(size=(120, 40)) as pilot:
                try:
                    await check(world, app, pilot)
                except AssertionError as exc:
                    raise AssertionError(f"{keys}: {exc}") from exc

    _run(go())


def _long_session(world, word, n=12):
    """A session in this project whose messages hold `word` ~160 characters in (past a row's end)."""
    from helpers.world import write

    filler = "lorem ipsum dolor sit amet " * 6
    write(world.root, "long", "s-long", str(world.proj), *[f"{filler}then {word} {i} ran {filler}" for i in range(n)])
    with world.client({"all": True}) as c:
        wait_for(lambda: len(c.search(word, limit=n).hits) == n)


def test_usable_at_80x24(world):
    """At 80x24 the rows show the matched word (piwatchd's snippet has it ~105
    characters in: past the row's end at 80 and even 140 columns before), and
    the query line, scope, status and footer leave most rows to the results
    and the preview."""

    _long_session(world, "compaction")

    async def go():
        app = _app(world)
        async with app.run_test(size=(80, 24)) as pilot:
            await _search(pilot, app, "compaction")
            rows = app.table.fits
            assert rows >= 9 and rows + app.preview_w.size.height >= 18, (rows, app.preview_w.size)
            drawn = [str(app.table.render_line(y).text) for y in range(rows)]
            assert all("compaction" in line and len(line) == 80 for line in drawn), drawn
            await pilot.resize_terminal(140, 40)  # a taller screen gets the query line's border back
            await _until(pilot, lambda: app.table.fits > rows)
            assert not app.query_one("#query").compact
            assert all("compaction" in str(app.table.render_line(y).text) for y in range(len(app.hits)))

    _run(go())


def test_no_hits_says_so_and_how_many_other_projects_hold(world):
    from helpers.world import write

    write(world.root, "other", "s-other", str(world.base / "proj2"), "a platypus elsewhere")
    with world.client({"all": True}) as c:
        wait_for(lambda: c.search("platypus").hits)

    async def go():
        app = _app(world)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press(*"platypus")  # only in the other project
            await _until(pilot, lambda: app.shown_query == "platypus" and app.table.message)
            assert app.table.message == [
                "no hits in this project",
                "1 hit in other projects: ctrl+o searches all projects",
            ]
            assert str(app.table.render_line(1).text).strip() == app.table.message[1]
            assert "no hits" in app.scope_text and "hits 0-0" not in app.scope_text
            await pilot.press("ctrl+o")
            await _until(pilot, lambda: [h.session_id for h in app.hits] == ["s-other"])
            assert not app.table.message
            await pilot.press("ctrl+u", *"zzqqxx")
            await _until(pilot, lambda: app.shown_query == "zzqqxx" and app.table.message)
            assert app.table.message == ["no hits in any project"]
            await pilot.press("ctrl+o")
            await _until(pilot, lambda: app.table.message == ["no hits in this project or any other"])

    _run(go())


def test_the_preview_marks_the_matches_and_opens_at_the_first(world):
    """The event before is shown too (its first line mentions the word): the
    preview opens at the match in the selected event's own text, far below."""
    from helpers.world import write
    from piwatch.tui_widgets import PreviewPane

    body = "\n".join([*(f"line {i}" for i in range(60)), "then the Zeppelin landed", *("tail" for _ in range(30))])
    write(world.root, "deep", "s-deep", str(world.proj), "a zeppelin overview", body)
    with world.client({"all": True}) as c:
        wait_for(lambda: len(c.search("zeppelin").hits) == 2)

    async def go():
        app = _app(world)
        async with app.run_test(size=(120, 40)) as pilot:
            await _search(pilot, app, "zeppelin")
            row = [h.entry_id for h in app.hits].index("s-deep-e1")
            await pilot.press(*["down"] * row)
            pane = app.preview_w
            await _until(
                pilot, lambda: "entry s-deep-e1" in app.preview_text and pane.text == app.preview_text and pane.top > 60
            )
            line = pane.render_line(PreviewPane.CONTEXT)
            marked = [seg.text for seg in line if seg.style and seg.style.reverse]
            assert "Zeppelin landed" in line.text and marked == ["Zeppelin"], list(line)
            await pilot.press("tab", "home")  # the user scrolls: the top is theirs
            assert pane.top == 0 and "session s-deep" in pane.render_line(0).text
            assert any(seg.style and seg.style.reverse for y in range(pane.size.height) for seg in pane.render_line(y))

    _run(go())


def test_the_daemon_stopping_mid_session_falls_back_to_the_index_file(world, monkeypatch):
    monkeypatch.setenv("PIWATCH_DB", str(world.db))
    monkeypatch.setenv("PIWATCH_CONFIG", str(world.base / "none.toml"))

    async def go():
        app = _app(world, status_every=0.2)
        async with app.run_test(size=(120, 40)) as pilot:
            await _search(pilot, app, "kraken")
            assert not app.backend.read_only
            world.stop()
            await _search(pilot, app, "answer")  # answered from the index file
            assert app.backend.read_only and app.backend.down_reason
            await _until(pilot, lambda: "not running" in str(app.status_w.render()))
            await pilot.press("ctrl+t")
            await _until(
                pilot, lambda: app.previewing and app.previewing[0] == "trace" and "trace:" not in app.preview_text
            )
            world.start()  # back: the status poll moves the screen back to piwatchd
            await _until(pilot, lambda: not app.backend.read_only, timeout=30)
            await _search(pilot, app, "release")
            await _until(pilot, lambda: "piwatchd:" in str(app.status_w.render()))

    _run(go())


def _tui_in_a_terminal(world, keys_after_hits: bytes):
    """`piwatch tui` as a person runs it in a pipeline: the keyboard and the
    screen on a terminal (stdin, stderr: a pty), stdout a pipe. Types
    `kraken`, then `keys_after_hits` once the results are drawn; (exit code,
    stdout, what the terminal got)."""
    import fcntl
    import os
    import struct
    import termios

    from helpers.world import BIN

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = {**world.env, "TERM": "xterm-256color"}
    proc = subprocess.Popen(
        [str(BIN / "piwatch"), "tui"], stdin=slave, stderr=slave, stdout=subprocess.PIPE, cwd=world.proj, env=env
    )
    os.close(slave)
    screen = bytearray()

    def read():  # the terminal's side: keep reading, or the app blocks on a full pty
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for(lambda: b"F1: help" in screen)  # the query line's placeholder: the app is up
        os.write(master, b"kraken")
        wait_for(lambda: b"hits 1-" in screen)
        os.write(master, keys_after_hits)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        reader.join(5)
    return proc.returncode, out, bytes(screen)


def test_enter_prints_the_selected_reference_on_stdout_for_a_pipe(world):
    """As fzf: the screen is drawn on the terminal, and stdout gets only
    `sessionId entryId` of the selected result, once the screen is gone."""
    code, out, screen = _tui_in_a_terminal(world, b"\r")
    with world.client({"cwd": str(world.proj)}) as c:
        refs = {f"{h.session_id} {h.entry_id}\n".encode() for h in c.search("kraken", limit=50).hits}
    assert code == 0 and out in refs, (code, out)
    assert b"scope: this project" in screen  # drawn on the terminal, none of it on stdout

    code, out, _ = _tui_in_a_terminal(world, b"\x11")  # ctrl+q: quit choosing nothing
    assert (code, out) == (130, b"")


def test_the_default_scope_can_be_every_project(world):
    # PIWATCH_SCOPE / [cli] scope = "all" (or `piwatch tui --all`) opens on every project;
    # ctrl+o still switches back to this one.
    from piwatch.commands._common import default_scope

    assert default_scope({"PIWATCH_SCOPE": "all", "PIWATCH_CONFIG": "/nonexistent.toml"}) == "all"

    async def go():
        app = _app(world, all_projects=True)
        async with app.run_test() as pilot:
            await _search(pilot, app, "kraken")
            assert "s-prefix" in {h.session_id for h in app.hits}
            assert "scope: all projects" in app.scope_text
            await pilot.press("ctrl+o")
            await _until(pilot, lambda: "s-prefix" not in {h.session_id for h in app.hits})

    _run(go())
