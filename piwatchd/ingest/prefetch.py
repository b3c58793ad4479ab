"""Run a producer iterator on a helper thread, a bounded number of items ahead.

Ingest parses and projects (Python, holding the GIL) while SQLite tokenizes
and writes the previous chunk (C, with the GIL released), so the two halves
of a cold index overlap on two cores. The consumer sees items, and the
producer's exception, in order; closing early stops and joins the producer.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["prefetch"]

T = TypeVar("T")
_DONE = object()


def prefetch(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    q: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: tuple[bool, Any]) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            put((False, exc))
            return
        put((True, _DONE))

    thread = threading.Thread(target=produce, name="piwatchd-parse", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = q.get()
            if not ok:
                raise item
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        thread.join()
