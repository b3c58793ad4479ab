"""The wire's status result: sources, bytes, diagnostics, redactions, and the
ingest service's progress (`ServiceStatus`, its one shape)."""

from __future__ import annotations

from typing import Any

from .base import Wire
from .results import HelloResult

__all__ = [
    "BytesStatus",
    "DiagnosticCount",
    "DiagnosticItem",
    "DiagnosticsStatus",
    "IndexProgress",
    "RedactionStatus",
    "ScanInfo",
    "ServiceStatus",
    "SourceProblem",
    "SourcesStatus",
    "StatusResult",
]

# -- results: status ---------------------------------------------------------------


class ScanInfo(Wire):
    reason: str | None = None
    at_ms: int | None = None
    seconds: float | None = None
    files: int | None = None
    queued: int | None = None
    missed_by_events: int | None = None
    roots_unavailable: list[str] = []


class ServiceStatus(Wire):
    """The ingest service's progress (live from the daemon, or the row it last
    wrote to the index). Unknown fields from a newer service are ignored."""

    pid: int | None = None
    phase: str | None = None
    running: bool = False
    started_ms: int | None = None
    heartbeat_ms: int | None = None
    updated_age_s: float | None = None
    uptime_seconds: float | None = None
    socket: str | None = None
    requests_served: int | None = None
    db: str | None = None
    roots: list[dict[str, Any]] = []
    warnings: list[str] = []
    settle: float | None = None
    max_latency: float | None = None
    scan_interval: float | None = None
    files_known: int | None = None
    files_ingested: int | None = None  # distinct files ingested (read or verified) this run
    files_changed: int | None = None  # of files_ingested, those with new bytes (the rest only verified)
    bytes_ingested: int | None = None
    events_ingested: int | None = None
    batches: int | None = None
    backlog_files: int | None = None
    backlog_bytes: int | None = None
    rate_bytes_per_s: float | None = None  # recent ingest rate while there is a backlog (status: time left)
    scans: int | None = None
    last_scan: ScanInfo | None = None
    startup_seconds: float | None = None
    missed_by_events: int | None = None
    removals_vetoed: int | None = None
    retrying: int | None = None  # files waiting for a retry after a transient failure
    retries: int | None = None
    index_problem: str | None = None  # set while a lost or corrupt index is rebuilt: unhealthy
    # Sessions re-fed into the text index at start-up (a lost text index, or one of an older
    # layout after an upgrade: every session), of all owed, and the seconds so far; None after.
    refeed_done: int | None = None
    refeed_total: int | None = None
    refeed_seconds: float | None = None
    index_rebuilds: int | None = None
    errors: dict[str, str] = {}


class SourceProblem(Wire):
    path: str
    state: str
    error: str | None


class SourcesStatus(Wire):
    total: int
    by_state: dict[str, int]
    problems: list[SourceProblem]


class BytesStatus(Wire):
    files: int
    ingested: int
    backlog: int


class DiagnosticCount(Wire):
    count: int
    repaired: int


class DiagnosticItem(Wire):
    path: str
    byte_offset: int | None
    code: str
    message: str
    repaired: bool


class DiagnosticsStatus(Wire):
    by_code: dict[str, DiagnosticCount]
    recent: list[DiagnosticItem]


class IndexProgress(Wire):
    """The first index of the files the caller may see is still running."""

    files_done: int
    files_total: int


class RedactionStatus(Wire):
    """Secrets redacted from the indexed text, by kind (never values), and the rules in force."""

    total: int
    by_kind: dict[str, int]
    rules: str  # fingerprint of the built-in rules version + [redact] config
    extra_patterns: list[str]
    allowlisted: int


class StatusResult(Wire):
    """What `status` shows. A workspace caller sees only its own sessions'
    counts and problems; `all` (the local CLI) sees the whole index."""

    db: str | None = None
    ready: bool = True
    index_error: str | None = None  # why the index cannot be read (ready: false)
    index_bytes: int = 0
    sources: SourcesStatus | None = None
    sessions: int = 0
    events: int = 0
    fragments: int | None = None
    bytes: BytesStatus | None = None
    diagnostics: DiagnosticsStatus | None = None
    redactions: RedactionStatus | None = None
    service: ServiceStatus | None = None
    catch_up: IndexProgress | None = None
    running: bool = False  # set by the CLI: a daemon answered
    daemon: HelloResult | None = None
