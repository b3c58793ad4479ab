"""`piwatch tui`: a full-screen search (Textual). Imported only by the `tui`
command: the `piwatch` package never imports Textual at import time.

Every keystroke searches (piwatchd answers in milliseconds); each request
takes a ticket (`tui_model.Latest`) and an answer is drawn only if its ticket
is still the newest, so a late answer to an older query never flashes. Rows
show the snippet around its first match. The preview pane shows `read` of
the selected event with its branch neighbours (the CLI's own text of it),
the matched words marked and opened at the first; `trace` on a key. Enter
ends the screen and prints `sessionId entryId` of the selected result on
stdout, for a pipe, as fzf does (Textual draws on stderr). A query that
finds nothing in this project says how many hits the other projects hold.
When piwatchd is down, at start or mid-session, the screen says so and
answers from the index file read-only, as the CLI does (`tui_backend`).
Session text is shown with control characters escaped, never raw.

Keys are chosen clear of Textual's own (App, Screen, Input: ctrl+p opens its
command palette; the query line, where focus starts, takes ctrl+a/e/k/u/w/
d/x/c/v and enter): test_tui checks them against the installed Textual.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from collections import deque
from typing import Any, ClassVar

# Textual paints at most TEXTUAL_FPS frames a second (read once, when Textual is
# imported): an answer that arrives just after the frame that echoed its
# keystroke waits for the next one, 0-17 ms at Textual's default of 60, about
# a third of the keystroke goal. Frames are painted only when something
# changed, so a higher cap costs nothing while the screen rests. A value the
# user sets (a slow ssh link: fewer) wins.
FRAMES_PER_SECOND = 240
os.environ.setdefault("TEXTUAL_FPS", str(FRAMES_PER_SECOND))

from rich.text import Text
from textual import events, on
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.widgets import Footer, Input, Static

from .client import Follow, PiwatchError
from .colour import SafeText, visible_controls
from .tui_backend import Backend, line_of, status_line
from .tui_model import (
    HELP,
    HELP_KEYS,
    PAGE,
    Latest,
    NewestOnly,
    ScreenState,
    marked_segments,
    match_terms,
    no_hits_lines,
    row_cells,
    search_request,
)
from .tui_widgets import Answered, HelpScreen, Previewed, PreviewPane, QueryInput, ResultList, hit_row

__all__ = ["Backend", "SearchApp", "HELP", "HELP_KEYS", "FRAMES_PER_SECOND", "status_line"]

# A preview waits this long for the selection to settle: reads of rows passed
# over, or of results a keystroke already replaced, never take the connection from a search.
PREVIEW_SETTLE = 0.08
# After an answer to typing it waits longer, past the gap between a typist's keystrokes
# (~0.1-0.2 s): the preview reads (and repaints) once the typing pauses, not between keys.
PREVIEW_AFTER_TYPING = 0.3

# On exit, the longest wait for a search or preview under way to end before its connection closes.
UNMOUNT_WAIT = 2.0

# Screens with fewer rows than this get the query line without its border.
COMPACT_BELOW = 30

# Hits counted in the other projects when this one has none: up to this many ("50+").
ELSEWHERE_MAX = 50


class SearchApp(App[str]):
    CSS = """
    #scope { height: 1; color: $text-muted; }
    #pinned { height: auto; max-height: 6; color: $success; display: none; }
    #results { height: 1fr; }
    #preview { height: 1fr; border-top: solid $primary; }
    #status { height: 1; color: $warning; }
    #help { padding: 1 2; border: round $primary; background: $panel; width: auto; height: auto; }
    HelpScreen { align: center middle; }
    """
    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [
        Binding("down", "move(1)", "next", show=False),
        Binding("up", "move(-1)", "previous", show=False),
        Binding("pagedown", "page(1)", "next page", show=False),
        Binding("pageup", "page(-1)", "previous page", show=False),
        Binding("ctrl+o", "toggle_scope", "scope"),
        Binding("ctrl+s", "toggle_errors", "errors"),
        Binding("ctrl+f", "pin", "pin"),
        Binding("ctrl+t", "trace", "trace"),
        Binding("ctrl+r", "read", "read", show=False),
        Binding("ctrl+y", "copy", "copy id", show=False),
        Binding("ctrl+g", "edit", "editor", show=False),
        Binding("f1", "help", "help"),
        Binding("ctrl+q", "quit", "quit"),  # Textual's own, shown in the footer
    ]

    def __init__(
        self, backend: Backend, *, cwd: str | None = None, status_every: float = 2.0, all_projects: bool = False
    ) -> None:
        super().__init__()
        self.backend = backend
        self.state = ScreenState(cwd=cwd or os.getcwd(), all_projects=all_projects)
        self.searches = Latest()
        self.previews = Latest()
        self.hits: list[Any] = []
        self.has_more = False
        self.shown_query: str | None = None  # the query line whose answer is on screen
        self.preview_text = ""
        self.preview_marks: tuple[tuple[str, ...], str | None] = ((), None)  # (terms, anchor) shown
        self.land = (0, 0)  # (search ticket, row): where the cursor goes when that answer is drawn
        self.drawn = 0  # the ticket of the answer on screen
        self.previewing: tuple[str, str, str] | None = None  # (op, sessionId, entryId) shown or asked for
        self.scope_text = ""
        # One thread each runs the newest search and the newest preview only (tui_model.NewestOnly).
        self.searcher = NewestOnly(lambda job: self._search_worker(*job), "piwatch-tui-search")
        self.previewer = NewestOnly(lambda job: self._preview_worker(*job), "piwatch-tui-preview")
        self.status_every = status_every
        self.closing = threading.Event()  # set when the screen goes
        self.pin_stop: threading.Event | None = None
        self.pinned: deque[str] = deque(maxlen=5)  # the newest live matches of the pinned query
        self.pinned_count = 0
        self.pinned_query = ""

    def compose(self) -> ComposeResult:
        yield QueryInput(placeholder="search (enter: print the selected id and exit; F1: help)", id="query")
        yield Static(id="scope")
        yield Static(id="pinned")
        yield ResultList(id="results")
        yield PreviewPane(id="preview")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        # Kept: queries search the active screen, and the help screen may be on top.
        self.table = self.query_one(ResultList)
        self.scope_w = self.query_one("#scope", Static)
        self.preview_w = self.query_one(PreviewPane)
        self.status_w = self.query_one("#status", Static)
        self.pinned_w = self.query_one("#pinned", Static)
        self._show_scope()
        self.query_one(Input).focus()
        self._poll_status()
        self.set_interval(self.status_every, self._poll_status)

    # -- searching -----------------------------------------------------------------------

    @on(Input.Changed, "#query")
    def _typed(self, event: Input.Changed) -> None:
        self.state.line = event.value
        self.state.offset = 0
        self.previews.next()  # a preview still waiting to settle is for results being replaced
        self.previewing = None
        self.search()

    def search(self, land: int = 0) -> None:
        """Ask for one screenful of the current line's results (the newest ask
        wins); the cursor lands on row `land` of it (-1: the last)."""
        ticket = self.searches.next()
        self.land = (ticket, land)
        self.state.limit = self.table.fits or PAGE
        args, problems = search_request(self.state)
        if args is None:
            self._draw(ticket, self.state.line, None, problems)
            return
        self.searcher.submit((ticket, self.state.line, args, self.state.caller(), problems))

    def _search_worker(
        self, ticket: int, line: str, args: dict[str, Any], caller: dict[str, Any], problems: list[str]
    ) -> None:
        if not self.searches.is_current(ticket):
            return  # a newer keystroke came before this one started
        elsewhere = None
        try:
            result: Any = self.backend.call("search", args, caller)
            elsewhere = self._elsewhere(ticket, args, caller, result)
        except PiwatchError as exc:
            result, problems = None, [*problems, str(exc)]
        self.post_message(Answered(ticket, line, result, problems, elsewhere))

    def _elsewhere(
        self, ticket: int, args: dict[str, Any], caller: dict[str, Any], result: Any
    ) -> tuple[int, bool] | None:
        """When this project's first page is empty: how many hits the other
        projects hold (count, more than that), by the user's own all-projects search."""
        if result.hits or args["offset"] or caller.get("all") or not self.searches.is_current(ticket):
            return None
        wider = self.backend.call("search", {**args, "limit": ELSEWHERE_MAX}, {"all": True})
        return len(wider.hits), wider.has_more

    @on(Answered)
    def _answered(self, msg: Answered) -> None:
        self._draw(msg.ticket, msg.line, msg.result, msg.problems, msg.elsewhere)

    def _draw(
        self, ticket: int, line: str, result: Any, problems: list[str], elsewhere: tuple[int, bool] | None = None
    ) -> None:
        if not self.searches.is_current(ticket):
            return  # stale: an answer to an older query
        self.shown_query, self.drawn = line, ticket
        self.hits = list(result.hits) if result is not None else []
        self.has_more = bool(result is not None and result.has_more)
        empty = no_hits_lines(self.state.all_projects, elsewhere) if result is not None and not self.hits else None
        self.table.show([hit_row(hit) for hit in self.hits], empty)
        if self.land[0] == ticket and self.hits:
            self.table.move_cursor(self.land[1] % len(self.hits))
        self._show_scope(result, problems)
        if self.hits:
            self._preview(self.table.cursor, settle=PREVIEW_AFTER_TYPING)
        else:
            from .commands.search import words_alone

            # Nothing found: which of the words the history holds by themselves.
            self._set_preview(visible_controls(words_alone(result) or "") if result is not None else "")

    def _show_scope(self, result: Any = None, problems: list[str] | None = None) -> None:
        parts = [f"scope: {self.state.scope_label()}"]
        if self.state.errors_only:
            parts.append("errors only")
        if result is not None and result.hits:
            more = "+" if result.has_more else ""
            parts.append(f"hits {self.state.offset + 1}-{self.state.offset + len(result.hits)}{more}")
        elif result is not None:
            parts.append("no hits")
        parts += problems or []
        text = visible_controls("  |  ".join(parts))
        if text != self.scope_text:  # one line of fixed height: no layout pass
            self.scope_text = text
            self.scope_w.update(Text(text), layout=False)

    # -- preview: read and trace ------------------------------------------------------------

    @on(ResultList.Selected)
    def _clicked(self, event: ResultList.Selected) -> None:
        self.table.move_cursor(event.row)
        self._preview(event.row)

    def selected(self) -> Any | None:
        row = self.table.cursor
        return self.hits[row] if 0 <= row < len(self.hits) else None

    def _preview(self, row: int, op: str = "read", settle: float = PREVIEW_SETTLE) -> None:
        """Show `op` of the row's event once the selection rests (unless it is already shown)."""
        hit = self.hits[row]
        wanted = (op, hit.session_id, hit.entry_id)
        if wanted == self.previewing:
            return  # already shown, or on its way (its ticket is still the newest)
        self.previewing = wanted
        ticket = self.previews.next()
        args: dict[str, Any] = {"sessionId": hit.session_id, "entryId": hit.entry_id}
        if op == "read":
            args.update(before=2, after=2, order="branch")
        # Its matched words are marked; a read opens at the first in the matched fragment's text.
        marks = (match_terms(hit), f"-- {hit.evidence.fragment_id} (" if op == "read" else None)
        self.previewer.submit((ticket, op, args, self.state.caller(), settle, marks))

    def _preview_worker(
        self,
        ticket: int,
        op: str,
        args: dict[str, Any],
        caller: dict[str, Any],
        settle: float,
        marks: tuple[tuple[str, ...], str | None],
    ) -> None:
        from .commands.read import print_read
        from .commands.trace import print_trace

        if self.closing.wait(settle) or not self.previews.is_current(ticket):
            return  # the selection moved on (or more was typed) before this one's turn
        out = io.StringIO()
        try:
            result = self.backend.call(op, args, caller)
            (print_read if op == "read" else print_trace)(result, SafeText(out, False))
            text = out.getvalue()
        except PiwatchError as exc:
            text = f"{op}: {exc}"
        self.post_message(Previewed(ticket, text, marks))

    @on(Previewed)
    def _show_preview(self, msg: Previewed) -> None:
        if self.previews.is_current(msg.ticket):
            self._set_preview(msg.text, msg.marks)

    def _set_preview(self, text: str, marks: tuple[tuple[str, ...], str | None] = ((), None)) -> None:
        if not text:
            self.previewing = None
        if (text, marks) != (self.preview_text, self.preview_marks):  # repainted only when it changed
            self.preview_text, self.preview_marks = text, marks
            self.preview_w.show(text, *marks)

    # -- status footer ----------------------------------------------------------------------

    def _poll_status(self) -> None:
        self.run_worker(self._status_worker, thread=True, group="status", exclusive=True)

    def _status_worker(self) -> None:
        try:
            self.backend.reconnect()  # after a fall back to the index file: piwatchd may be back
            self.call_from_thread(self._show_status, status_line(self.backend, self.backend.status()))
        except PiwatchError as exc:
            self.call_from_thread(self._show_status, f"status: {exc}")

    def _show_status(self, line: str) -> None:
        self.status_w.update(Text(visible_controls(line)), layout=False)  # one line of fixed height

    # -- keys -------------------------------------------------------------------------------

    def action_move(self, step: int) -> None:
        """Up/down move through the results while typing in the query line;
        past the last (first) row to the next (previous) page's first (last)."""
        if not self.hits:
            return
        row = self.table.cursor + step
        if not 0 <= row < len(self.hits):
            if self.searches.is_current(self.drawn):  # not while a page is on its way: one step, one page
                self.action_page(1 if row > 0 else -1)
            return
        self.table.move_cursor(row)
        self._preview(row)

    def action_toggle_scope(self) -> None:
        self.state.all_projects = not self.state.all_projects
        self.state.offset = 0
        self.search()

    def action_toggle_errors(self) -> None:
        self.state.errors_only = not self.state.errors_only
        self.state.offset = 0
        self.search()

    def action_page(self, step: int) -> None:
        """The next or previous screenful of results (back: at its last row)."""
        if step > 0 and not self.has_more:
            return
        offset = max(0, self.state.offset + step * self.state.limit)
        if offset != self.state.offset:
            self.state.offset = offset
            self.search(0 if step > 0 else -1)

    @on(Input.Submitted, "#query")
    def action_choose(self) -> None:
        """Enter: end the screen with "sessionId entryId" of the selected result (`run` prints it)."""
        hit = self.selected()
        if hit is None:
            self.notify("no result selected", severity="warning")
            return
        self.exit(visible_controls(f"{hit.session_id} {hit.entry_id}"))

    def action_trace(self) -> None:
        row = self.table.cursor
        if 0 <= row < len(self.hits):
            self._preview(row, "trace")

    def action_read(self) -> None:
        row = self.table.cursor
        if 0 <= row < len(self.hits):
            self._preview(row, "read")

    def action_copy(self) -> None:
        hit = self.selected()
        if hit is not None:
            ref = f"{hit.session_id} {hit.entry_id}"
            self.copy_to_clipboard(ref)
            self.notify(f"copied: {visible_controls(ref)}")

    def action_edit(self) -> None:
        hit = self.selected()
        if hit is None:
            return
        try:
            read = self.backend.call(
                "read", {"sessionId": hit.session_id, "entryId": hit.entry_id}, self.state.caller()
            )
        except PiwatchError as exc:
            self.notify(str(exc), severity="error")
            return
        path, line = read.source.path, line_of(read.source.path, read.source.byte_offset)
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        try:
            with self.suspend():
                subprocess.run([*editor.split(), f"+{line}", path], check=False)
        except SuspendNotSupported:
            self.notify(f"cannot leave the screen here; open {visible_controls(path)} at line {line}")

    def action_pin(self) -> None:
        if self.pin_stop is not None:
            self.pin_stop.set()
            self.pin_stop = None
            self.pinned.clear()
            self.pinned_w.update("")
            self.pinned_w.display = False  # its line goes back to the results
            return
        args, _ = search_request(self.state)
        if args is None:
            self.notify("type a query to pin", severity="warning")
            return
        try:
            follow = self.backend.follow(args["query"], args["filters"], self.state.caller())
        except PiwatchError as exc:
            self.notify(str(exc), severity="error")
            return
        self.pin_stop = stop = threading.Event()
        self.pinned_query, self.pinned_count = self.state.line, 0
        self.pinned_w.update(Text(visible_controls(f"pinned {self.pinned_query!r}: waiting for new matches")))
        self.pinned_w.display = True
        threading.Thread(target=self._pin_loop, args=(follow, stop), name="piwatch-tui-pin", daemon=True).start()

    def _pin_loop(self, follow: Follow, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                for update in follow.updates(timeout=0.5):
                    if stop.is_set():
                        break
                    self.call_from_thread(self._pinned_hits, stop, update.hits)
        except PiwatchError as exc:
            if not stop.is_set():
                self.call_from_thread(self.notify, f"pin ended: {exc}", severity="error")
        except RuntimeError:
            pass  # the app is gone (call_from_thread after exit)
        finally:
            follow.close()

    def _pinned_hits(self, stop: threading.Event, hits: list[Any]) -> None:
        if stop is not self.pin_stop:
            return  # an unpinned (or replaced) pin's last update
        for hit in hits:
            when, project, kind = row_cells(hit)
            snippet = "".join(piece for piece, _ in marked_segments(hit.snippet, hit.spans))
            self.pinned.append(f"+ {when}  {project}  {kind}  {snippet[:200]}")
        self.pinned_count += len(hits)
        head = f"pinned {visible_controls(repr(self.pinned_query))}: {self.pinned_count} new (ctrl+f unpins)"
        self.pinned_w.update(Text("\n".join([head, *self.pinned])))
        self.notify(f"{len(hits)} new match{'es' if len(hits) != 1 else ''} for the pinned query")

    def action_help(self) -> None:
        self.push_screen(HelpScreen(HELP))

    def on_resize(self, event: events.Resize) -> None:
        """On a short screen (80x24) the query line drops its border: two more rows of results."""
        self.query_one(QueryInput).compact = event.size.height < COMPACT_BELOW

    @on(ResultList.Resized)
    def _refit(self) -> None:
        """A taller or shorter list asks for a screenful again (the same first result)."""
        if self.shown_query and self.table.fits and self.table.fits != self.state.limit:
            self.search()

    def on_unmount(self) -> None:
        """Let the workers finish (a call takes milliseconds) before their
        connections close under them: a call on a closed socket ended in a
        thread's traceback printed after the screen was gone."""
        if self.pin_stop is not None:
            self.pin_stop.set()
        self.closing.set()  # a preview still settling is dropped at once
        for runner in (self.searcher, self.previewer):
            runner.close(wait=UNMOUNT_WAIT)
        self.backend.close()


def run(socket: str | None = None, db: str | None = None, *, all_projects: bool = False) -> int:
    """The screen, then the chosen "sessionId entryId" on stdout (exit 0), or
    nothing when quit without choosing (exit 130, as fzf). Textual draws on
    stderr, so `piwatch tui | xargs piwatch read` gets the id alone."""
    chosen = SearchApp(Backend(socket, db), all_projects=all_projects).run()
    if chosen is None:
        return 130
    print(chosen, file=sys.stdout, flush=True)  # after Textual gave stdout back
    return 0
