"""What `piwatch tui` decides, apart from drawing (pure): its keys' help,
the query line's filter words, the search request a screen state asks for,
which answer is current (stale ones are dropped), a result row's cells and
how they fit the width, the preview's marked lines, what no hits says.

The query line takes search's query language plus filter words:
`kind:tool.result`, `tool:bash`, `since:7d`, `until:2026-05-01`,
`branch:selected`, `is:error` (or `-is:error`). Other words are the query.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from argparse import ArgumentTypeError
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.cells import cell_len, chop_cells, set_cell_size

from .colour import visible_controls
from .timeparse import parse_time
from .wire import agent_label

__all__ = [
    "COLUMNS",
    "HELP",
    "HELP_KEYS",
    "FILTER_WORDS",
    "PAGE",
    "Latest",
    "NewestOnly",
    "ScreenState",
    "NARROW",
    "around_match",
    "column_widths",
    "first_marked",
    "fit_columns",
    "fit_row",
    "match_terms",
    "no_hits_lines",
    "wrap_lines",
    "wrap_marked",
    "parse_line",
    "row_cells",
    "marked_segments",
    "search_request",
]

FILTER_WORDS = ("kind", "tool", "since", "until", "branch", "is")
PAGE = 20  # results per request until the screen says how many rows it shows
COLUMNS = (16, 16, 24)  # at most these cells of time, project, kind/tool; the snippet takes the rest
# The caps, in turn, while the columns would leave the snippet less than half the row (80
# columns: 40 cells of snippet, not 18): the time without its year, shorter project and kind;
# then no project (in one project's scope it hardly changes); then the time alone.
NARROW = ((11, 9, 14), (11, 0, 14), (11, 0, 0))
ELLIPSIS = "\u2026"  # marks a snippet cut in front


# The keys and what they do, as F1 shows them (`tui.SearchApp` binds them; test_tui presses
# each one and checks it).
HELP_KEYS: list[tuple[str, str]] = [
    ("down / up", "select a result; off the last / first row: next / prev page"),
    ("pgdn / pgup", "next / previous page (a screenful)"),
    ("enter", 'print "sessionId entryId" of the selection and exit'),
    ("ctrl+o", "scope: this project / all projects"),
    ("ctrl+s", "errors only on / off (as is:error in the query)"),
    ("tab", "to the preview and back (there up/down/pgup/pgdn scroll)"),
    ("ctrl+t", "trace of the selected event in the preview"),
    ("ctrl+r", "read of the selected event in the preview (after a trace)"),
    ("ctrl+f", "pin the query: new matches show live above (again: unpin)"),
    ("ctrl+y", 'copy "sessionId entryId" of the selection'),
    ("ctrl+g", "open the session file in $EDITOR at the entry's line"),
    ("f1", "this help (? too, outside the query line; escape closes it)"),
    ("ctrl+q", "quit, printing nothing"),
]

HELP = "\n".join(
    [
        'Type to search (every keystroke; "quoted phrases"). Filter words:',
        "  kind:tool.result  tool:bash  since:7d  until:2026-05-01",
        "  branch:selected  is:error  -is:error",
        "",
        *(f"  {keys:<12} {does}" for keys, does in HELP_KEYS),
    ]
)


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

    def close(self, wait: float = 0.0) -> None:
        """Run no more jobs; wait up to `wait` seconds for the one running to end."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if wait > 0 and self._thread is not threading.current_thread():
            self._thread.join(wait)

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
    project = (os.path.basename((hit.cwd or "?").rstrip("/")) or "/") + agent_label(hit.agent)
    kind = hit.evidence.kind + (f" {hit.evidence.tool_name}" if hit.evidence.tool_name else "")
    if hit.is_error:
        kind += " ERROR"
    return visible_controls(when), visible_controls(project), visible_controls(kind)


def marked_segments(text: str, spans: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    """`text` as (piece, is_match) on one line: newlines and tabs as spaces,
    control characters escaped per piece (so the match spans stay aligned)."""
    flat = text.replace("\n", " ").replace("\t", " ").replace("\r", " ")
    return [(visible_controls(piece), match) for piece, match in _cut(flat, spans)]


def _cut(text: str, spans: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    """`text` as (piece, is_match) at the `[start, end)` spans (out of range,
    empty or overlapping ones ignored)."""
    out: list[tuple[str, bool]] = []
    pos = 0
    for start, end in sorted(tuple(s) for s in spans):
        if not (pos <= start < end <= len(text)):
            continue
        if start > pos:
            out.append((text[pos:start], False))
        out.append((text[start:end], True))
        pos = end
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def around_match(snippet: list[tuple[str, bool]], width: int) -> list[tuple[str, bool]]:
    """`snippet` cut in front so that its first match shows whole in `width`
    cells: unchanged when the match already ends inside them; otherwise the
    match sits mid-width (further left when the snippet ends sooner, so no
    cell is left blank), after an ellipsis that marks the cut."""
    before, total, size = 0, 0, None  # cells before the first match, in all, of the match
    for piece, match in snippet:
        cells = cell_len(piece)
        if match and size is None:
            size = cells
        elif size is None:
            before += cells
        total += cells
    if size is None or before + size <= width:
        return snippet
    room = width - cell_len(ELLIPSIS)
    drop = min(before - max(0, (room - size) // 2), total - room)
    if drop <= 0:
        return snippet  # it starts the snippet, wider than the row
    out: list[tuple[str, bool]] = [(ELLIPSIS, False)]
    for piece, match in snippet:
        if drop > 0:
            cells = cell_len(piece)
            piece, drop = (_drop_cells(piece, drop), 0) if cells > drop else ("", drop - cells)
        if piece:
            out.append((piece, match))
    return out


def _drop_cells(text: str, cells: int) -> str:
    """`text` without its first `cells` cells (a wide character cut in two leaves a space)."""
    i, dropped = 0, 0
    while i < len(text) and dropped < cells:
        dropped += cell_len(text[i])
        i += 1
    return " " * (dropped - cells) + text[i:]


def column_widths(rows: list[tuple[str, str, str]]) -> tuple[int, ...]:
    """Each column as wide as its widest cell among `rows`, at most `COLUMNS`."""
    return tuple(min(cap, max((cell_len(cells[i]) for cells in rows), default=0)) for i, cap in enumerate(COLUMNS))


def fit_columns(columns: tuple[int, ...], width: int) -> tuple[int, ...]:
    """`columns` capped by the first of NARROW's steps that leaves the snippet
    at least half of `width` (0: a column left out), else by the last."""
    for caps in (columns, *NARROW):
        fitted = tuple(min(cols, cap) for cols, cap in zip(columns, caps, strict=True))
        if width - sum(fitted) - 2 * sum(1 for cols in fitted if cols) >= width // 2:
            break
    return fitted


def fit_row(
    cells: tuple[str, str, str], snippet: list[tuple[str, bool]], width: int, columns: tuple[int, ...] = COLUMNS
) -> list[tuple[str, bool]]:
    """A result row as (piece, is_match) filling exactly `width` cells: the
    cells in columns `columns` wide (narrowed or left out by `fit_columns`; cut or padded,
    the time losing its year first), then the snippet around its first match
    (`around_match`), cut at the edge (wide characters counted as two cells)."""
    out: list[tuple[str, bool]] = []
    left = width
    for i, (text, cols) in enumerate(zip(cells, fit_columns(columns, width), strict=True)):
        if not cols:
            continue  # left out at this width
        if i == 0 and cell_len(text) > cols:
            text = text[-cols:] if cols else ""  # "2026-05-01 10:00" -> "05-01 10:00" (ASCII)
        piece = set_cell_size(text, min(cols, left)) + " " * min(2, max(0, left - cols))
        out.append((piece, False))
        left -= cell_len(piece)
    for text, match in around_match(snippet, left):
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
    return ["".join(piece for piece, _ in line) for line in wrap_marked(text, width)]


def wrap_marked(text: str, width: int, terms: tuple[str, ...] = ()) -> list[list[tuple[str, bool]]]:
    """`wrap_lines` with every occurrence of `terms` (any case) marked: each
    screen line as (piece, is_match). A match is found on the whole line,
    before it is cut, so one cut in two is marked on both screen lines."""
    pattern = re.compile("|".join(map(re.escape, terms)), re.IGNORECASE) if terms else None
    out: list[list[tuple[str, bool]]] = []
    for line in visible_controls(text).split("\n"):
        line = line.expandtabs(8)
        spans = [m.span() for m in pattern.finditer(line)] if pattern else []
        pos = 0
        for piece in [line] if cell_len(line) <= width or width < 1 else chop_cells(line, width):
            end = pos + len(piece)
            mine = [(max(s, pos) - pos, min(e, end) - pos) for s, e in spans if s < end and e > pos]
            out.append(_cut(piece, mine) or [("", False)])
            pos = end
    return out


def match_terms(hit: Any) -> tuple[str, ...]:
    """The text a hit matched, as its snippet spells it, escaped as the
    preview shows it (longest first, so a longer term wins where both fit)."""
    terms = {visible_controls(hit.snippet[start:end]).lower() for start, end in hit.spans}
    return tuple(sorted((t for t in terms if t.strip()), key=len, reverse=True))


def first_marked(lines: list[list[tuple[str, bool]]], anchor: str | None = None) -> int | None:
    """The screen line to show first: the first marked one from the line that
    starts with `anchor` on (the matched fragment's heading in a read), else
    the first marked one, else the anchor's; None when there is neither."""
    at = next((i for i, line in enumerate(lines) if anchor and line[0][0].startswith(anchor)), None)
    marked = [i for i, line in enumerate(lines) if any(match for _, match in line)]
    after = [i for i in marked if at is not None and i >= at]
    return (after or marked)[0] if marked else at


def no_hits_lines(all_projects: bool, elsewhere: tuple[int, bool] | None) -> list[str]:
    """What the result list says when a query found nothing: in all projects,
    or in this one, with how many hits the others hold (`elsewhere`: (count,
    more than that); None: not counted) and the key that widens the scope."""
    if all_projects:
        return ["no hits in any project"]
    if elsewhere is None or elsewhere[0] == 0:
        return ["no hits in this project" + (" or any other" if elsewhere else "")]
    count, more = elsewhere
    hits = f"{count}{'+' if more else ''} hit{'' if count == 1 and not more else 's'}"
    return ["no hits in this project", f"{hits} in other projects: ctrl+o searches all projects"]
