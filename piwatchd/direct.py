"""`piwatch index --once`: reconcile an index file with the session files, without a daemon.

Queries never run from here: every search/read/trace/status goes through
`piwatchd.api.Api`, over the socket or in-process via
`piwatch.transports.LocalTransport`, with the same authorization. The pass
itself is `indexer.index_once`: the daemon's own reconciliation scan, under
the same index lock.
"""

from __future__ import annotations

from .indexer import index_once

__all__ = ["index_once"]
