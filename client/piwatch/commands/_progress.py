"""Progress of `piwatch index --once`: a live bar on a terminal (rich), plain
periodic lines when stderr is piped, nothing with `--json` or `--quiet`.
The rate and time left are `piwatch.rates`' (the figures `status` shows)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import IO, Any

from ..colour import visible_controls
from ..rates import RateMeter, format_duration, format_rate, refeed_words, time_left

__all__ = ["IndexProgress", "PLAIN_EVERY_SECONDS"]

PLAIN_EVERY_SECONDS = 5.0


class IndexProgress:
    """`planned(files, bytes)` once the scan is done, `done(outcome)` per file;
    use as a context manager (the bar is removed when it ends)."""

    def __init__(
        self,
        out: IO[str],
        *,
        mode: str,
        clock: Callable[[], float] = time.monotonic,
        every: float = PLAIN_EVERY_SECONDS,
    ) -> None:
        self.out, self.mode, self.clock, self.every = out, mode, clock, every  # mode: bar | lines | off
        self.files = self.files_total = self.bytes = self.bytes_total = 0
        self.meter = RateMeter()
        self._last_line = clock()
        self._bar: Any = None
        self._task: Any = None
        self._refeed_started: float | None = None

    def __enter__(self) -> IndexProgress:
        if self.mode == "bar":
            from rich.console import Console  # lazy: only a terminal needs it
            from rich.progress import BarColumn, Progress, TextColumn

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[files]}"),
                TextColumn("{task.fields[mb]}"),
                TextColumn("{task.fields[rate]}"),
                TextColumn("{task.fields[left]}"),
                console=Console(file=self.out),
                transient=True,
                auto_refresh=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(
                "indexing", total=None, files="0/? files", mb="", rate=format_rate(None), left="? left"
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)

    def note(self, line: str) -> None:
        """A line of its own above the bar (a file's problem); paths may hold control characters."""
        line = visible_controls(line)
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            print(line, file=self.out)

    def planned(self, files: int, nbytes: int) -> None:
        self.files_total, self.bytes_total = files, nbytes
        self.meter.add(self.clock(), 0)
        self._show(force=True)

    def refed(self, done: int, total: int) -> None:
        """The text index's re-feed before the scan (an upgrade's new layout, a lost text
        index): sessions done of total; a line at its start and end, and every `every` s."""
        now = self.clock()
        if self._refeed_started is None:
            self._refeed_started = now
        line = f"re-feeding the text index: {refeed_words(done, total, now - self._refeed_started)}"
        if self.mode == "bar":
            words = line.split(": ", 1)[1]
            self._bar.update(
                self._task,
                description="re-feeding text",
                completed=done,
                total=total,
                files=words,
                mb="",
                rate="",
                left="",
            )
            if done in (1, total):
                self._bar.refresh()  # its start and end are drawn however fast it goes
        elif self.mode == "lines" and (done in (1, total) or now - self._last_line >= self.every):
            self._last_line = now
            print(line, file=self.out, flush=True)

    def done(self, bytes_read: int) -> None:
        self.files += 1
        self.bytes += bytes_read
        self.meter.add(self.clock(), self.bytes)
        self._show()

    def figures(self) -> dict[str, str]:
        """The progress in words: files, MB, rate, time left."""
        rate = self.meter.rate(self.clock())
        total = max(self.bytes_total, self.bytes)
        return {
            "files": f"{self.files}/{self.files_total}",
            "mb": f"{self.bytes / 1e6:.1f} of {total / 1e6:.1f} MB",
            "rate": format_rate(rate),
            "left": format_duration(time_left(total - self.bytes, rate)),
        }

    def _show(self, force: bool = False) -> None:
        if self.mode == "bar":
            f = self.figures()
            total = max(self.bytes_total, self.bytes)
            self._bar.update(
                self._task,
                description="indexing",
                completed=self.bytes,
                total=total,
                files=f"{f['files']} files",
                mb=f["mb"],
                rate=f["rate"],
                left=f"{f['left']} left",
            )
        elif self.mode == "lines":
            now = self.clock()
            if force or now - self._last_line >= self.every:
                self._last_line = now
                f = self.figures()
                print(
                    f"indexing: {f['files']} files, {f['mb']}, {f['rate']}, {f['left']} left", file=self.out, flush=True
                )
