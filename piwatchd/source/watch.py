"""watchdog adapter: file-system events become dirty-path hints, nothing more.

Events are never trusted for *what* happened (watchdog drops inotify overflow
silently, coalesces, and reports renames as pairs or as create/delete); they
only say *where* to look. The ingest thread classifies each path itself, and a
reconciliation scan converges whatever the events missed.

Handlers run on watchdog's threads, so they only post to the `Inbox`.
`refresh()` (called periodically by the main thread) re-establishes watches
on roots that appeared, were recreated, or whose emitter died, and asks for a
reconciliation whenever a watch had to be (re)started: events may have been
lost in between.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

import watchdog.events
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

from ..ingest.inbox import Inbox
from .discovery import in_layout, is_sessions_folder

__all__ = ["Watcher", "EventRouter"]

log = logging.getLogger("piwatchd.watch")

# Asking only for these keeps IN_OPEN / IN_CLOSE_NOWRITE out of the kernel
# queue: our own reads would otherwise mark every file dirty again. An
# attribute change (IN_ATTRIB: a `chmod` that makes an unreadable session
# readable) is its own event in newer watchdog (a modification in older ones);
# without it such a file would wait for the next scan.
_EVENT_FILTER = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    *[cls for cls in (getattr(watchdog.events, "FileAttribEvent", None),) if cls is not None],
]


def _text(path: Any) -> str:
    return os.fsdecode(path) if path else ""


class EventRouter(FileSystemEventHandler):
    """Maps one watchdog event to inbox marks (no I/O, O(1)).

    A root that is a symlink is watched at its resolved directory (`watched`);
    event paths are mapped back under the root as configured (`shown`), the
    names the index knows its files by.
    """

    def __init__(self, inbox: Inbox, watched: str, shown: str) -> None:
        super().__init__()
        self.inbox = inbox
        self.watched = watched
        self.shown = shown

    def _shown(self, path: str) -> str:
        if self.watched == self.shown or not path:
            return path
        if path == self.watched:
            return self.shown
        if path.startswith(self.watched + os.sep):
            return self.shown + path[len(self.watched) :]
        return path

    def on_any_event(self, event: FileSystemEvent) -> None:
        src = self._shown(_text(event.src_path))
        dest = self._shown(_text(getattr(event, "dest_path", "")))
        # Only where Pi keeps sessions (a directory with a session's name too: the ingest
        # reports it); an attribute change (chmod) may have made an unreadable file readable.
        for path in (src, dest):
            if path and in_layout(self.shown, path):
                self.inbox.mark(path)
        if event.is_directory:
            if event.event_type in ("created", "moved") and is_sessions_folder(self.shown, dest or src):
                # Files may land in a new folder before its watch exists.
                self.inbox.mark_dir(dest or src)
            if event.event_type in ("deleted", "moved"):
                # Sessions under it are absent now, or moved elsewhere.
                self.inbox.request_reconcile(f"directory {event.event_type}: {src}")


@dataclass(slots=True)
class _RootWatch:
    watch: Any
    ino: int
    backend: str
    target: str  # the directory watched: the root resolved through symlinks


class Watcher:
    """One observer for all roots (each observer costs an inotify instance),
    plus a polling observer for roots the kernel refuses to watch."""

    def __init__(self, roots: list[str], inbox: Inbox, *, polling_interval: float = 2.0) -> None:
        self.roots = [os.path.normpath(r) for r in roots]
        self.inbox = inbox
        self._observer = Observer()
        self._poller: PollingObserver | None = None
        self._polling_interval = polling_interval
        self._watches: dict[str, _RootWatch] = {}
        self._lock = threading.Lock()
        self.warnings: list[str] = []

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Register watches, then start the observer threads. Call before the
        first scan so nothing written during the scan goes unnoticed."""
        with self._lock:
            for root in self.roots:
                self._ensure(root)
            self._observer.start()

    def stop(self) -> None:
        with self._lock:
            for obs in (self._observer, self._poller):
                if obs is not None and obs.is_alive():
                    obs.stop()
            for obs in (self._observer, self._poller):
                if obs is not None and obs.ident is not None:
                    obs.join(timeout=10)

    def threads(self) -> list[threading.Thread]:
        out: list[threading.Thread] = []
        for obs in (self._observer, self._poller):
            if obs is not None:
                out.append(obs)
                out.extend(obs.emitters)
        return out

    # -- upkeep ----------------------------------------------------------------

    def refresh(self) -> None:
        """Re-establish watches that cannot be working; cheap (a stat per root)."""
        with self._lock:
            if not self._observer.is_alive():
                log.warning("watch observer stopped; restarting it")
                self._observer = Observer()
                self._watches = {r: w for r, w in self._watches.items() if w.backend == "polling"}
                for root in self.roots:
                    self._ensure(root)
                self._observer.start()
                self.inbox.request_reconcile("watch observer restarted")
                return
            for root in self.roots:
                self._ensure(root)

    def status(self) -> list[dict[str, Any]]:
        with self._lock:
            out = []
            for root in self.roots:
                w = self._watches.get(root)
                out.append({"path": root, "watched": w is not None, "backend": w.backend if w else None})
            return out

    # -- internals (hold self._lock) ---------------------------------------------

    def _emitter_alive(self, rw: _RootWatch) -> bool:
        observer = self._poller if rw.backend == "polling" else self._observer
        if observer is None:
            return False
        return any(e.watch == rw.watch and e.is_alive() for e in observer.emitters)

    def _ensure(self, root: str) -> None:
        # inotify on a symlinked root misses new folders below it: watch what it points to,
        # and notice when the link is re-pointed (the target changes).
        target = os.path.realpath(root)
        try:
            st = os.stat(target)
        except (OSError, ValueError):
            st = None
        current = self._watches.get(root)
        if st is None or not os.path.isdir(target):
            if current is not None:
                log.warning("sessions root %s disappeared; watching it again when it returns", root)
                self._drop(root, current)
            return
        if (
            current is not None
            and current.ino == st.st_ino
            and current.target == target
            and (not self._observer.is_alive() or self._emitter_alive(current))
        ):
            return
        if current is not None:
            self._drop(root, current)
        router = EventRouter(self.inbox, watched=target, shown=root)
        try:
            watch = self._observer.schedule(router, target, recursive=True, event_filter=_EVENT_FILTER)
            self._watches[root] = _RootWatch(watch, st.st_ino, "native", target)
        except OSError as exc:
            # inotify watch/instance limits: degrade to polling this root.
            message = f"cannot watch {root} natively ({exc}); polling it every {self._polling_interval:g}s"
            log.warning("%s", message)
            if message not in self.warnings:
                self.warnings.append(message)
            if self._poller is None:
                self._poller = PollingObserver(timeout=self._polling_interval)
                self._poller.start()
            watch = self._poller.schedule(router, target, recursive=True)
            self._watches[root] = _RootWatch(watch, st.st_ino, "polling", target)
        if current is not None or self._observer.is_alive():
            # Whatever happened while the root was unwatched (or pointed elsewhere) is unknown.
            self.inbox.request_reconcile(f"watch started on {root}")

    def _drop(self, root: str, rw: _RootWatch) -> None:
        observer = self._poller if rw.backend == "polling" else self._observer
        try:
            if observer is not None:
                observer.unschedule(rw.watch)
        except (KeyError, OSError, RuntimeError):
            pass
        self._watches.pop(root, None)
