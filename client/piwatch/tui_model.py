"""What `piwatch tui` decides, apart from drawing (pure): the query line's
filter words, the search request a screen state asks for, which answer is
current (stale ones are dropped), and a result row's cells.

The query line takes search's query language plus filter words:
`kind:tool.result`, `tool:bash`, `since:7d`, `until:2026-05-01`,
`branch:selected`, `is:error` (or `-is:error`). Other words are the query.
"""

from __future__ import annotations

import itertools
import os
import threading
from argparse import ArgumentTypeError
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.cells import cell_len, chop_cells, set_cell_size

from .colour import visible_controls
from .timeparse import parse_time

__all__ = [
    "COLUMNS",
    "FILTER_WORDS",
    "PAGE",
    "Latest",
    "NewestOnly",
    "ScreenState",
    "column_widths",
    "fit_row",
    "wrap_lines",
    "parse_line",
    "row_cells",
    "marked_segments",
    "search_request",
]

FILTER_WORDS = ("kind", "tool", "since", "until", "branch", "is")
PAGE = 20  # results per request until the screen says how many rows it shows
COLUMNS = (16, 16, 24)  # at most these cells of time, project, kind/tool; the snippet takes the rest


def parse_line(line: str) -> tuple[str, dict[str, Any], list[str]]:
    """(query text, search filters, problems) of a query line."""
    words: list[str] = []
    filters: dict[str, Any] = {}
    problems: list[str] = []
    for word in _split(line):
        key, sep, value = word.partition(":")
        negated = key.startswith("-")
        key = key.lstrip("-")
        if not sep or key not in FILTER_WORDS or not value:
            words.append(word)
            continue
        if key in ("kind", "tool", "branch"):
            name = {"kind": "kind", "tool": "tool", "branch": "branchState"}[key]
            filters.setdefault(name, []).append(value)
        elif key == "is" and value == "error":
            filters["isError"] = not negated
        elif key in ("since", "until"):
            try:
                filters["sinceMs" if key == "since" else "untilMs"] = parse_time(value)
            except (ValueError, ArgumentTypeError) as exc:
                problems.append(f"{key}: {exc}")
        else:
            problems.append(f"unknown filter {word!r}")
    return " ".join(words), filters, problems


def _split(line: str) -> list[str]:
    """Words, keeping a "quoted phrase" whole (search's own syntax)."""
    out: list[str] = []
    cur: list[str] = []
    quoted = False
    for ch in line:
        if ch == '"':
            quoted = not quoted
        if ch.isspace() and not quoted:
            if cur:
                out.append("".join(cur))
                cur = []
            continue
        cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


@dataclass(slots=True)
class ScreenState:
    line: str = ""
    all_projects: bool = False
    errors_only: bool = False
    offset: int = 0
    limit: int = PAGE  # one screenful: the rows the result list shows
    cwd: str = field(default_factory=os.getcwd)

    def caller(self) -> dict[str, Any]:
        return {"all": True} if self.all_projects else {"cwd": self.cwd}

    def scope_label(self) -> str:
        return "all projects" if self.all_projects else f"this project ({self.cwd})"


def search_request(state: ScreenState) -> tuple[dict[str, Any] | None, list[str]]:
    """The search args for the screen (None: nothing to search), and problems to show."""
    query, filters, problems = parse_line(state.line)
    if state.errors_only:
        filters["isError"] = True
    if not query.strip():
        return None, problems
    return {"query": query, "filters": filters, "limit": state.limit, "offset": state.offset}, problems


class Latest:
    """Tickets for requests; only the newest one's answer may be shown, so an
    answer that arrives after a newer request was made never flashes."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)
        self._current = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            self._current = next(self._counter)
            return self._current

    def is_current(self, ticket: int) -> bool:
        with self._lock:
            return ticket == self._current


class NewestOnly:
    """Runs `work(job)` in one thread for the newest job submitted: a job
    replaced before its turn is never run (the keystrokes typed over while a
    search was out never send theirs), and jobs never overlap."""

    def __init__(self, work: Callable[[Any], None], name: str) -> None:
        self._work = work
        self._cond = threading.Condition()
        self._job: Any = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Any) -> None:
        with self._cond:
            self._job = job
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._job is None and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                job, self._job = self._job, None
            self._work(job)


def row_cells(hit: Any) -> tuple[str, str, str]:
    """(time, project, kind/tool) of a hit, control characters escaped."""
    when = (hit.timestamp or "?")[:16].replace("T", " ")
    project = os.path.basename((hit.cwd or "?").rstrip("/")) or "/"
    kind = hit.evidence.kind + (f" {hit.evidence.tool_name}" if hit.evidence.tool_name else "")
    if hit.is_error:
        kind += " ERROR"
    return visible_controls(when), visible_controls(project), visible_controls(kind)


def marked_segments(text: str, spans: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    """`text` as (piece, is_match) on one line: newlines and tabs as spaces,
    control characters escaped per piece (so the match spans stay aligned)."""
    flat = text.replace("\n", " ").replace("\t", " ").replace("\r", " ")
    out: list[tuple[str, bool]] = []
    pos = 0
    for start, end in sorted(tuple(s) for s in spans):
        if not (pos <= start < end <= len(flat)):
            continue
        if start > pos:
            out.append((visible_controls(flat[pos:start]), False))
        out.append((visible_controls(flat[start:end]), True))
        pos = end
    if pos < len(flat):
        out.append((visible_controls(flat[pos:]), False))
    return out


def column_widths(rows: list[tuple[str, str, str]]) -> tuple[int, ...]:
    """Each column as wide as its widest cell among `rows`, at most `COLUMNS`."""
    return tuple(min(cap, max((cell_len(cells[i]) for cells in rows), default=0)) for i, cap in enumerate(COLUMNS))


def fit_row(
    cells: tuple[str, str, str], snippet: list[tuple[str, bool]], width: int, columns: tuple[int, ...] = COLUMNS
) -> list[tuple[str, bool]]:
    """A result row as (piece, is_match) filling exactly `width` cells: the
    cells in columns `columns` wide (cut or padded), then the snippet, cut at
    the edge (wide characters counted as two cells)."""
    out: list[tuple[str, bool]] = []
    left = width
    for text, cols in zip(cells, columns, strict=True):
        piece = set_cell_size(text, min(cols, left)) + " " * min(2, max(0, left - cols))
        out.append((piece, False))
        left -= cell_len(piece)
    for text, match in snippet:
        if left <= 0:
            break
        piece = text if cell_len(text) <= left else set_cell_size(text, left)
        out.append((piece, match))
        left -= cell_len(piece)
    if left > 0:
        out.append((" " * left, False))
    return [(piece, match) for piece, match in out if piece]


def wrap_lines(text: str, width: int) -> list[str]:
    """`text` as screen lines of at most `width` cells: control characters
    escaped, tabs expanded, a longer line cut into pieces."""
    out: list[str] = []
    for line in visible_controls(text).split("\n"):
        line = line.expandtabs(8)
        if cell_len(line) <= width or width < 1:
            out.append(line)
        else:
            out.extend(chop_cells(line, width))
    return out
