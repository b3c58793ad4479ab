"""The result rows and the preview pane of `piwatch tui`, drawn line by line
with Textual's line API; the query line; the help screen; the messages
worker threads post.

Every keystroke replaces the rows (and, once the selection rests, the
preview), so these are the screen's hot path. New content repaints the
widget's own lines only: no layout pass (neither widget's size depends on
its content, and a layout pass re-arranges and repaints the whole screen:
~7 ms of CPU each) and no Rich rendering of cells (a row is a few styled
segments cut to the width by `tui_model.fit_row`; the preview is lines of
plain and marked pieces from `tui_model.wrap_marked`). Moving the selection
repaints two lines.
Control characters are escaped before anything reaches a line
(`tui_model.row_cells`, `marked_segments`, `wrap_marked`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.message import Message
from textual.screen import ModalScreen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Input, Static

from .tui_model import COLUMNS, column_widths, first_marked, fit_row, marked_segments, row_cells, wrap_marked

__all__ = ["Answered", "HelpScreen", "PreviewPane", "Previewed", "QueryInput", "ResultList", "Row", "hit_row"]

# (time, project, kind/tool) cells and the snippet as (piece, is_match), all escaped.
Row = tuple[tuple[str, str, str], list[tuple[str, bool]]]


def hit_row(hit: Any) -> Row:
    return row_cells(hit), marked_segments(hit.snippet, hit.spans)


class ResultList(Widget):
    """Rows with a cursor; rows past the bottom scroll into view as the cursor
    moves. With no rows, a message says why (`tui_model.no_hits_lines`)."""

    DEFAULT_CSS = """
    ResultList { height: 1fr; }
    ResultList > .results--cursor { background: $accent 50%; }
    ResultList > .results--match { color: $error; text-style: bold; }
    ResultList > .results--message { color: $warning; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"results--cursor", "results--match", "results--message"}

    class Selected(Message):
        """A row was clicked."""

        def __init__(self, row: int) -> None:
            super().__init__()
            self.row = row

    class Resized(Message):
        """The widget's height (the rows it shows) changed."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[Row] = []
        self.message: list[str] = []  # shown while there are no rows
        self.columns: tuple[int, ...] = COLUMNS  # as wide as the rows shown need
        self.cursor = 0
        self.top = 0  # the row shown on the first line
        # (plain, cursor, match, cursor+match, message) styles: looked up once, not per line (the
        # lookup walks the CSS); dropped when the styles change (theme, focus, CSS).
        self._styles: tuple[Style, Style, Style, Style, Style] | None = None

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None

    def _line_styles(self) -> tuple[Style, Style, Style, Style, Style]:
        if self._styles is None:
            base, cursor = self.rich_style, self.get_component_rich_style("results--cursor")
            match = self.get_component_rich_style("results--match")
            message = self.get_component_rich_style("results--message")
            self._styles = (base, base + cursor, base + match, base + cursor + match, base + message)
        return self._styles

    @property
    def fits(self) -> int:
        """Rows the widget shows at its current size (0 before its first layout)."""
        return self.size.height

    def show(self, rows: list[Row], message: list[str] | None = None) -> None:
        """Replace the rows (or, with none, the message); the cursor goes to the first."""
        self.rows, self.cursor, self.top, self.message = rows, 0, 0, message or []
        self.columns = column_widths([cells for cells, _ in rows])
        self.refresh()

    def move_cursor(self, row: int) -> None:
        if not self.rows:
            return
        row = min(max(row, 0), len(self.rows) - 1)
        old, self.cursor = self.cursor, row
        height = max(self.fits, 1)
        top = min(max(self.top, row - height + 1), row)
        if top != self.top:
            self.top = top
            self.refresh()
        else:
            width = self.size.width
            self.refresh(Region(0, old - top, width, 1), Region(0, row - top, width, 1))

    def row_text(self, row: int) -> str:
        """A row's text as drawn at the current width (for tests and copying)."""
        cells, snippet = self.rows[row]
        return "".join(piece for piece, _ in fit_row(cells, snippet, max(self.size.width, 80), self.columns))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        plain, cursor, match, cursor_match, message = self._line_styles()
        n = self.top + y
        if not self.rows and y < len(self.message):
            return Strip([Segment(" " + self.message[y], message)]).adjust_cell_length(width, plain)
        if n >= len(self.rows):
            return Strip.blank(width, plain)
        base, marked = (cursor, cursor_match) if n == self.cursor else (plain, match)
        cells, snippet = self.rows[n]
        pieces = fit_row(cells, snippet, width, self.columns)
        segments = [Segment(piece, marked if is_match else base) for piece, is_match in pieces]
        return Strip(segments, width)

    def on_resize(self, event: events.Resize) -> None:
        self.post_message(self.Resized())

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and self.top + offset.y < len(self.rows):
            self.post_message(self.Selected(self.top + offset.y))


class PreviewPane(Widget, can_focus=True):
    """Plain text, wrapped to the width, with the hit's matched words marked;
    it opens at the first match (in the matched fragment, for a read) until
    scrolled. Scrolls with the mouse wheel, or with the arrow and page keys
    when focused (tab); enter there chooses the selected result, as in the
    query line."""

    DEFAULT_CSS = """
    PreviewPane { height: 1fr; }
    PreviewPane > .preview--match { color: $error; text-style: bold reverse; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"preview--match"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "scroll(1)", show=False),
        Binding("up", "scroll(-1)", show=False),
        Binding("pagedown", "scroll(10)", show=False),
        Binding("pageup", "scroll(-10)", show=False),
        Binding("home", "scroll(-1000000000)", show=False),
        Binding("enter", "app.choose", show=False),
        Binding("question_mark", "app.help", show=False),
    ]
    CONTEXT = 2  # lines shown above the first match

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = ""
        self.terms: tuple[str, ...] = ()
        self.anchor_line: str | None = None  # (`anchor` is a Widget method)
        self.top = 0
        self.at_match = True  # top follows the first match (at any width) until the user scrolls
        self._styles: tuple[Style, Style] | None = None  # (plain, match), as ResultList keeps them
        self._wrapped: tuple[int, list[list[tuple[str, bool]]]] = (-1, [])  # (width, lines)

    def show(self, text: str, terms: tuple[str, ...] = (), anchor: str | None = None) -> None:
        """New text with `terms` marked, opened at the first match at or after the `anchor` line."""
        self.text, self.terms, self.anchor_line, self.top, self.at_match = text, terms, anchor, 0, True
        self._wrapped = (-1, [])
        self.refresh()

    def lines(self) -> list[list[tuple[str, bool]]]:
        width = self.size.width
        if self._wrapped[0] != width:
            self._wrapped = (width, wrap_marked(self.text, width, self.terms))
            if self.at_match:
                first = first_marked(self._wrapped[1], self.anchor_line)
                self.top = self._clamp(0 if first is None else first - self.CONTEXT)
        return self._wrapped[1]

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None

    def _clamp(self, top: int) -> int:
        return min(max(top, 0), max(0, len(self._wrapped[1]) - self.size.height))

    def action_scroll(self, step: int) -> None:
        self.lines()
        top = self._clamp(self.top + step)
        self.at_match = False
        if top != self.top:
            self.top = top
            self.refresh()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self.action_scroll(3)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        self.action_scroll(-3)

    def render_line(self, y: int) -> Strip:
        if self._styles is None:
            self._styles = (self.rich_style, self.rich_style + self.get_component_rich_style("preview--match"))
        (style, match), width = self._styles, self.size.width
        lines = self.lines()
        n = self.top + y
        if n >= len(lines):
            return Strip.blank(width, style)
        segments = [Segment(piece, match if marked else style) for piece, marked in lines[n]]
        return Strip(segments).adjust_cell_length(width, style)


class QueryInput(Input):
    """The query line. Its size is fixed (one bordered line across the screen),
    yet Textual's Input asks for a layout pass whenever its text's width
    changes, i.e. on every keystroke: a pass that re-arranges an unchanged
    screen and cost about 7 ms of CPU per keystroke, most of the screen's
    share. Its own repaint and horizontal scroll happen without it.

    Focus coming back (tab from the preview) leaves the text unselected, so
    the next keystroke adds to the query instead of replacing it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(select_on_focus=False, **kwargs)

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False) -> Self:
        return super().refresh(*regions, repaint=repaint, layout=False, recompose=recompose)


class HelpScreen(ModalScreen[None]):
    """The keys (F1), over the search screen until closed."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,f1,q", "dismiss", "close")]

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        yield Static(self.text, id="help")


class Answered(Message):
    """A search's answer, posted from the search thread (post_message is thread-safe)."""

    def __init__(
        self, ticket: int, line: str, result: Any, problems: list[str], elsewhere: tuple[int, bool] | None = None
    ) -> None:
        super().__init__()
        self.ticket, self.line, self.result, self.problems = ticket, line, result, problems
        self.elsewhere = elsewhere  # (hits in other projects, more), when this one has none


class Previewed(Message):
    """A preview's text and its marks ((terms, anchor): `PreviewPane.show`), posted from the preview thread."""

    def __init__(self, ticket: int, text: str, marks: tuple[tuple[str, ...], str | None] = ((), None)) -> None:
        super().__init__()
        self.ticket, self.text, self.marks = ticket, text, marks
