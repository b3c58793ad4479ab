"""piwatchd: a live, exact index of Pi coding-agent sessions.

Layers: `source` (discovery, byte ranges, the tailer's pure decision, the Pi
format parser), `project` (entry -> event + fragments, pure), `index`
(schema, writer, query planning, search), `ingest`/`indexer` (I/O that keeps
the index converged with the files), `api` (the one request path: validation
against `piwatch.wire`, visibility, operations, envelope).
"""

from .direct import index_once
from .index.query import QueryError, SearchFilters, SearchRequest
from .model import Event, Fragment, FragmentKind
from .project import project_entry

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
