"""`piwatch tui`: a full-screen search (Textual). Imported only by the `tui`
command: the `piwatch` package never imports Textual at import time.

Every keystroke searches (piwatchd answers in milliseconds); each request
takes a ticket (`tui_model.Latest`) and an answer is drawn only if its ticket
is still the newest, so a late answer to an older query never flashes. The
preview pane shows `read` of the selected event with its branch neighbours
(the CLI's own text of it), `trace` on a key. When piwatchd is down the
screen says so and answers from the index file read-only, as the CLI does.
Session text is shown with control characters escaped, never raw.
"""

from __future__ import annotations

import io
import os
import subprocess
import threading
import time
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
from textual import on
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static

from .client import Client, DaemonNotRunning, Follow, LocalTransport, PiwatchError
from .colour import SafeText, visible_controls
from .rates import format_duration, format_rate, time_left
from .tui_model import PAGE, Latest, NewestOnly, ScreenState, marked_segments, row_cells, search_request
from .tui_widgets import Answered, Previewed, PreviewPane, QueryInput, ResultList, hit_row

__all__ = ["Backend", "SearchApp", "HELP", "FRAMES_PER_SECOND"]

# A preview waits this long for the selection to settle: reads of rows passed
# over, or of results a keystroke already replaced, never take the connection from a search.
PREVIEW_SETTLE = 0.08
# After an answer to typing it waits longer, past the gap between a typist's keystrokes
# (~0.1-0.2 s): the preview reads (and repaints) once the typing pauses, not between keys.
PREVIEW_AFTER_TYPING = 0.3

HELP = """\
Type to search (every keystroke; "quoted phrases"). Filter words in the query line:
  kind:tool.result  tool:bash  since:7d  until:2026-05-01  branch:selected  is:error  -is:error

  ctrl+o  scope: this project / all projects     ctrl+e  errors only on/off
  down/up select a result (the preview shows `read` with branch neighbours); pgdn/pgup page
  tab     to the preview and back (there, up/down/pgup/pgdn scroll it; so does the mouse wheel)
  ctrl+t  trace of the selected event            ctrl+r  back to read
  ctrl+f  pin the query: its new matches appear live above the results (again: unpin)
  ctrl+n / ctrl+p  next / previous page          ctrl+y  copy "sessionId entryId"
  ctrl+g  open the session file in $EDITOR at the entry's line
  f1      this help                              ctrl+q  quit
"""


class Backend:
    """piwatchd over its socket, or (when it is not running) the index file
    read-only through the same api in-process. Searches have a connection of
    their own, so a keystroke's search never waits behind a preview's read or
    the status poll; calls on one connection are serialized."""

    def __init__(self, socket: str | None = None, db: str | None = None) -> None:
        self._lock = threading.Lock()
        self.read_only = False
        self.down_reason: str | None = None
        if db:
            self.client = Client(transport=LocalTransport(db))
            self.read_only = True
        else:
            self.socket = socket
            self.client = Client(socket)
            try:
                self.client.hello()
            except DaemonNotRunning as exc:
                from .commands._common import _db_path

                self.down_reason = str(exc)
                self.client = Client(transport=LocalTransport(_db_path(None)))
                self.read_only = True
        # The index file read in-process is one connection for everything.
        self._searches = (self.client, self._lock) if self.read_only else (Client(socket), threading.Lock())

    def call(self, op: str, args: dict[str, Any], caller: dict[str, Any]) -> Any:
        client, lock = self._searches if op == "search" else (self.client, self._lock)
        with lock:
            return client.request(op, args, caller)

    def follow(self, query: str, filters: dict[str, Any], caller: dict[str, Any]) -> Follow:
        """A standing query on a connection of its own (never serialized with the searches)."""
        if self.read_only:
            raise PiwatchError("pinning a query needs piwatchd running (an index file never changes)")
        return Client(self.socket).follow(query, filters=filters, caller=caller)

    def status(self) -> Any:
        with self._lock:
            return self.client.status()

    def close(self) -> None:
        self.client.close()
        if self._searches[0] is not self.client:
            self._searches[0].close()


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [
        Binding("escape,f1,q", "dismiss", "close")
    ]

    def compose(self) -> ComposeResult:
        yield Static(HELP, id="help")


class SearchApp(App[None]):
    CSS = """
    #scope { height: 1; color: $text-muted; }
    #pinned { height: auto; max-height: 6; color: $success; }
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
        Binding("ctrl+e", "toggle_errors", "errors"),
        Binding("ctrl+f", "pin", "pin"),
        Binding("ctrl+t", "trace", "trace"),
        Binding("ctrl+r", "read", "read", show=False),
        Binding("ctrl+n", "page(1)", "next page"),
        Binding("ctrl+p", "page(-1)", "prev page"),
        Binding("ctrl+y", "copy", "copy id"),
        Binding("ctrl+g", "edit", "editor"),
        Binding("f1,question_mark", "help", "help"),
        Binding("ctrl+q", "quit", "quit"),
    ]

    def __init__(self, backend: Backend, *, cwd: str | None = None, status_every: float = 2.0) -> None:
        super().__init__()
        self.backend = backend
        self.state = ScreenState(cwd=cwd or os.getcwd())
        self.searches = Latest()
        self.previews = Latest()
        self.hits: list[Any] = []
        self.has_more = False
        self.shown_query: str | None = None  # the query line whose answer is on screen
        self.preview_text = ""
        self.previewing: tuple[str, str, str] | None = None  # (op, sessionId, entryId) shown or asked for
        self.scope_text = ""
        # One thread each runs the newest search and the newest preview only (tui_model.NewestOnly).
        self.searcher = NewestOnly(lambda job: self._search_worker(*job), "piwatch-tui-search")
        self.previewer = NewestOnly(lambda job: self._preview_worker(*job), "piwatch-tui-preview")
        self.status_every = status_every
        self.pin_stop: threading.Event | None = None
        self.pinned: deque[str] = deque(maxlen=5)  # the newest live matches of the pinned query
        self.pinned_count = 0
        self.pinned_query = ""

    def compose(self) -> ComposeResult:
        yield QueryInput(placeholder="search (F1: help)", id="query")
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

    def search(self) -> None:
        """Ask for one screenful of the current line's results (the newest ask wins)."""
        ticket = self.searches.next()
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
        try:
            result: Any = self.backend.call("search", args, caller)
        except PiwatchError as exc:
            result, problems = None, [*problems, str(exc)]
        self.post_message(Answered(ticket, line, result, problems))

    @on(Answered)
    def _answered(self, msg: Answered) -> None:
        self._draw(msg.ticket, msg.line, msg.result, msg.problems)

    def _draw(self, ticket: int, line: str, result: Any, problems: list[str]) -> None:
        if not self.searches.is_current(ticket):
            return  # stale: an answer to an older query
        self.shown_query = line
        self.hits = list(result.hits) if result is not None else []
        self.has_more = bool(result is not None and result.has_more)
        self.table.show([hit_row(hit) for hit in self.hits])
        self._show_scope(result, problems)
        if self.hits:
            self._preview(0, settle=PREVIEW_AFTER_TYPING)
        else:
            from .commands.search import words_alone

            # Nothing found: which of the words the history holds by themselves.
            self._set_preview(visible_controls(words_alone(result) or "") if result is not None else "")

    def _show_scope(self, result: Any = None, problems: list[str] | None = None) -> None:
        parts = [f"scope: {self.state.scope_label()}"]
        if self.state.errors_only:
            parts.append("errors only")
        if result is not None:
            first = self.state.offset + 1 if result.hits else 0
            more = "+" if result.has_more else ""
            parts.append(f"hits {first}-{self.state.offset + len(result.hits)}{more}")
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
        self.previewer.submit((ticket, op, args, self.state.caller(), settle))

    def _preview_worker(
        self, ticket: int, op: str, args: dict[str, Any], caller: dict[str, Any], settle: float
    ) -> None:
        from .commands.read import print_read
        from .commands.trace import print_trace

        time.sleep(settle)
        if not self.previews.is_current(ticket):
            return  # the selection moved on (or more was typed) before this one's turn
        out = io.StringIO()
        try:
            result = self.backend.call(op, args, caller)
            (print_read if op == "read" else print_trace)(result, SafeText(out, False))
            text = out.getvalue()
        except PiwatchError as exc:
            text = f"{op}: {exc}"
        self.post_message(Previewed(ticket, text))

    @on(Previewed)
    def _show_preview(self, msg: Previewed) -> None:
        if self.previews.is_current(msg.ticket):
            self._set_preview(msg.text)

    def _set_preview(self, text: str) -> None:
        if not text:
            self.previewing = None
        if text != self.preview_text:  # its layout pass (the text's height) only when it changed
            self.preview_text = text
            self.preview_w.show(text)

    # -- status footer ----------------------------------------------------------------------

    def _poll_status(self) -> None:
        self.run_worker(self._status_worker, thread=True, group="status", exclusive=True)

    def _status_worker(self) -> None:
        try:
            self.call_from_thread(self._show_status, status_line(self.backend, self.backend.status()))
        except PiwatchError as exc:
            self.call_from_thread(self._show_status, f"status: {exc}")

    def _show_status(self, line: str) -> None:
        self.status_w.update(Text(visible_controls(line)), layout=False)  # one line of fixed height

    # -- keys -------------------------------------------------------------------------------

    def action_move(self, step: int) -> None:
        """Up/down move through the results while typing in the query line."""
        if self.hits:
            row = min(max(self.table.cursor + step, 0), len(self.hits) - 1)
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
        """The next or previous screenful of results."""
        if step > 0 and not self.has_more:
            return
        offset = max(0, self.state.offset + step * self.state.limit)
        if offset != self.state.offset:
            self.state.offset = offset
            self.search()

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
        self.push_screen(HelpScreen())

    @on(ResultList.Resized)
    def _refit(self) -> None:
        """A taller or shorter list asks for a screenful again (the same first result)."""
        if self.shown_query and self.table.fits and self.table.fits != self.state.limit:
            self.search()

    def on_unmount(self) -> None:
        if self.pin_stop is not None:
            self.pin_stop.set()
        self.searcher.close()
        self.previewer.close()
        self.backend.close()


def status_line(backend: Backend, st: Any) -> str:
    """The footer: daemon down, catch-up progress with rate and time left, or idle."""
    if backend.read_only:
        why = "piwatchd is not running" if backend.down_reason else "reading an index file"
        return f"{why}: answers from the index file, read-only (may lag)"
    svc = st.service
    backlog = max(st.bytes.backlog if st.bytes is not None else 0, (svc.backlog_bytes or 0) if svc else 0)
    if st.catch_up is not None or backlog > 0:
        rate = svc.rate_bytes_per_s if svc else None
        files = f"{st.catch_up.files_done} of {st.catch_up.files_total} files, " if st.catch_up else ""
        return f"indexing: {files}{format_rate(rate)}, {format_duration(time_left(backlog, rate))} left"
    return f"piwatchd: {st.sessions} sessions, {st.events} events indexed"


def line_of(path: str, byte_offset: int) -> int:
    """The 1-based line at `byte_offset` of `path` (counted in 1 MiB reads)."""
    line, left = 1, byte_offset
    try:
        with open(path, "rb") as fh:
            while left > 0:
                chunk = fh.read(min(left, 1 << 20))
                if not chunk:
                    break
                line += chunk.count(b"\n")
                left -= len(chunk)
    except OSError:
        pass
    return line


def run(socket: str | None = None, db: str | None = None) -> int:
    SearchApp(Backend(socket, db)).run()
    return 0
