"""The result rows and the preview pane of `piwatch tui`, drawn line by line
with Textual's line API; the query line; the messages worker threads post.

Every keystroke replaces the rows (and, once the selection rests, the
preview), so these are the screen's hot path. New content repaints the
widget's own lines only: no layout pass (neither widget's size depends on
its content, and a layout pass re-arranges and repaints the whole screen:
~7 ms of CPU each) and no Rich rendering of cells (a row is a few styled
segments cut to the width by `tui_model.fit_row`; the preview is plain lines
from `tui_model.wrap_lines`). Moving the selection repaints two lines.
Control characters are escaped before anything reaches a line
(`tui_model.row_cells`, `marked_segments`, `wrap_lines`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Input

from .tui_model import COLUMNS, column_widths, fit_row, marked_segments, row_cells, wrap_lines

__all__ = ["Answered", "PreviewPane", "Previewed", "QueryInput", "ResultList", "Row", "hit_row"]

# (time, project, kind/tool) cells and the snippet as (piece, is_match), all escaped.
Row = tuple[tuple[str, str, str], list[tuple[str, bool]]]


def hit_row(hit: Any) -> Row:
    return row_cells(hit), marked_segments(hit.snippet, hit.spans)


class ResultList(Widget):
    """Rows with a cursor; rows past the bottom scroll into view as the cursor moves."""

    DEFAULT_CSS = """
    ResultList { height: 1fr; }
    ResultList > .results--cursor { background: $accent 50%; }
    ResultList > .results--match { color: $error; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"results--cursor", "results--match"}

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
        self.columns: tuple[int, ...] = COLUMNS  # as wide as the rows shown need
        self.cursor = 0
        self.top = 0  # the row shown on the first line
        # (plain, cursor, match, cursor+match) styles: looked up once, not per line (the lookup
        # walks the CSS); dropped when the styles change (theme, focus, CSS).
        self._styles: tuple[Style, Style, Style, Style] | None = None

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None

    def _line_styles(self) -> tuple[Style, Style, Style, Style]:
        if self._styles is None:
            base, cursor = self.rich_style, self.get_component_rich_style("results--cursor")
            match = self.get_component_rich_style("results--match")
            self._styles = (base, base + cursor, base + match, base + cursor + match)
        return self._styles

    @property
    def fits(self) -> int:
        """Rows the widget shows at its current size (0 before its first layout)."""
        return self.size.height

    def show(self, rows: list[Row]) -> None:
        """Replace the rows; the cursor goes to the first."""
        self.rows, self.cursor, self.top = rows, 0, 0
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
        plain, cursor, match, cursor_match = self._line_styles()
        n = self.top + y
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
    """Plain text, wrapped to the width; scrolls with the mouse wheel, or with
    the arrow and page keys when focused (tab)."""

    DEFAULT_CSS = """
    PreviewPane { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "scroll(1)", show=False),
        Binding("up", "scroll(-1)", show=False),
        Binding("pagedown", "scroll(10)", show=False),
        Binding("pageup", "scroll(-10)", show=False),
        Binding("home", "scroll(-1000000000)", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = ""
        self.top = 0
        self._wrapped: tuple[int, list[str]] = (-1, [])  # (width, lines)

    def show(self, text: str) -> None:
        self.text, self.top, self._wrapped = text, 0, (-1, [])
        self.refresh()

    def lines(self) -> list[str]:
        width = self.size.width
        if self._wrapped[0] != width:
            self._wrapped = (width, wrap_lines(self.text, width))
        return self._wrapped[1]

    def action_scroll(self, step: int) -> None:
        top = min(max(self.top + step, 0), max(0, len(self.lines()) - self.size.height))
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
        width, style = self.size.width, self.rich_style
        lines = self.lines()
        n = self.top + y
        if n >= len(lines):
            return Strip.blank(width, style)
        return Strip([Segment(lines[n], style)], cell_len(lines[n])).adjust_cell_length(width, style)


class QueryInput(Input):
    """The query line. Its size is fixed (one bordered line across the screen),
    yet Textual's Input asks for a layout pass whenever its text's width
    changes, i.e. on every keystroke: a pass that re-arranges an unchanged
    screen and cost about 7 ms of CPU per keystroke, most of the screen's
    share. Its own repaint and horizontal scroll happen without it."""

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False) -> Self:
        return super().refresh(*regions, repaint=repaint, layout=False, recompose=recompose)


class Answered(Message):
    """A search's answer, posted from the search thread (post_message is thread-safe)."""

    def __init__(self, ticket: int, line: str, result: Any, problems: list[str]) -> None:
        super().__init__()
        self.ticket, self.line, self.result, self.problems = ticket, line, result, problems


class Previewed(Message):
    """A preview's text, posted from the preview thread."""

    def __init__(self, ticket: int, text: str) -> None:
        super().__init__()
        self.ticket, self.text = ticket, text
