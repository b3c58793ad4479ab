"""What the ingest service is told when it starts (`ServiceConfig`, from
the daemon's options and config.toml) and what it asks of the file
watcher for status (`WatchReport`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..model.extractors import NO_EXTRACTORS, Registry
from ..text.engine import DEFAULT_ENGINE

__all__ = ["ServiceConfig", "WatchReport"]


@dataclass(slots=True)
class ServiceConfig:
    db_path: str
    roots: list[str]
    omp_roots: tuple[str, ...] = ()  # the roots omp writes to (`config.omp_roots`)
    settle: float = 0.1
    max_latency: float = 1.0
    scan_interval: float = 300.0
    batch_seconds: float = 0.25  # backlog work per commit, so hints wait at most this long
    gone_recheck_delay: float = 0.1
    state_interval: float = 1.0  # how often progress is written while busy
    heartbeat_interval: float = 5.0
    engine: str = DEFAULT_ENGINE  # the text engine's name (piwatchd.text.engine)
    extractors: Registry = NO_EXTRACTORS  # the custom types made searchable (config's `[[extract]]`)


class WatchReport(Protocol):
    """What the file watcher tells status (`piwatchd.source.watch.Watcher`)."""

    warnings: list[str]

    def status(self) -> list[dict[str, Any]]: ...
