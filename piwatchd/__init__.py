"""piwatchd: a live, exact index of Pi coding-agent sessions.

The package's layers, one folder per stage (ARCHITECTURE.md maps them):
`source` (the session files: discovery, byte ranges, the tailer's pure
decision, the Pi format parser, the watcher), `model` (pure: entry -> event
+ fragments, redaction, tree, relations), `store` (the SQLite read model and
its writer), `text` (the engine protocol and the two engines, query
planning, search), `ingest` (the I/O that keeps the index converged with the
files: one file, the scan, the service's schedule), `serve` (the socket and
the one request path: validation against `piwatch.wire`, visibility,
operations, envelope); `daemon.py` puts them together. Also the version.
"""

from .ingest.scan import index_once
from .model.events import Event, Fragment, FragmentKind
from .model.project import project_entry
from .text.query import QueryError, SearchFilters, SearchRequest

__all__ = [
    "__version__",
    "index_once",
    "QueryError",
    "SearchFilters",
    "SearchRequest",
    "Event",
    "Fragment",
    "FragmentKind",
    "project_entry",
]

__version__ = "0.1.0"
