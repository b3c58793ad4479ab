"""Request slots shared fairly between clients.

The daemon runs at most `total` requests at once. Without more rules one
client opening 64 connections of expensive searches (deep pages: limit 200
at offset 10,000) takes every slot and starves everyone else: another
client's trivial search waited 10.7 s. So each client (the peer process of a
connection) may hold at most `per_client` slots, and expensive requests
(`heavy`: many rows to rank and render) share a smaller pool of `heavy`
slots, at most `heavy_per_client` of them per client. A client's expensive
work therefore queues behind its own, while a cheap request from anyone
else finds a free slot at once; the work in flight, and the memory it holds,
stay bounded whatever one client asks. A waiter that cannot get a slot by
its deadline is refused (`busy`) by the caller.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Hashable

__all__ = ["FairSlots"]


class FairSlots:
    def __init__(self, total: int, per_client: int, heavy: int, heavy_per_client: int) -> None:
        if min(total, per_client, heavy, heavy_per_client) < 1:
            raise ValueError("every slot count must be at least 1")
        # A share larger than the whole is the whole (a server configured with fewer slots).
        self.total, self.per_client = total, min(per_client, total)
        self.heavy = min(heavy, total)
        self.heavy_per_client = min(heavy_per_client, self.heavy, self.per_client)
        self._cond = threading.Condition()
        self._used = 0
        self._heavy_used = 0
        self._by_client: Counter[Hashable] = Counter()
        self._heavy_by_client: Counter[Hashable] = Counter()

    def _free(self, client: Hashable, heavy: bool) -> bool:
        if self._used >= self.total or self._by_client[client] >= self.per_client:
            return False
        return not heavy or (self._heavy_used < self.heavy and self._heavy_by_client[client] < self.heavy_per_client)

    def acquire(self, client: Hashable, heavy: bool, timeout: float) -> bool:
        """Take a slot for `client` within `timeout` seconds; False if none came free."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._free(client, heavy):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            self._used += 1
            self._by_client[client] += 1
            if heavy:
                self._heavy_used += 1
                self._heavy_by_client[client] += 1
            return True

    def release(self, client: Hashable, heavy: bool) -> None:
        with self._cond:
            self._used -= 1
            self._by_client[client] -= 1
            if not self._by_client[client]:
                del self._by_client[client]
            if heavy:
                self._heavy_used -= 1
                self._heavy_by_client[client] -= 1
                if not self._heavy_by_client[client]:
                    del self._heavy_by_client[client]
            # Waiters wait on different conditions (their client, heavy or not): wake them all to re-check.
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no request holds a slot, at most `timeout` seconds; whether none does."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._used:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def in_use(self) -> tuple[int, int]:
        """(slots, heavy slots) taken now."""
        with self._cond:
            return self._used, self._heavy_used
