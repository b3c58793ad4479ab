"""The wire's response envelope: freshness, notices, the error body and `Response`."""

from __future__ import annotations

from typing import Any

from .base import Wire

__all__ = ["ErrorBody", "Freshness", "Notice", "Response", "SessionFreshness"]

# -- envelope ----------------------------------------------------------------------


class SessionFreshness(Wire):
    session_id: str
    indexed_bytes: int
    file_bytes: int | None
    complete: bool
    ms_since_ingest: int | None


class Freshness(Wire):
    sessions: list[SessionFreshness] = []
    backlog: int | None = None
    last_scan_ms: int | None = None


class Notice(Wire):
    """Something the caller should know about the answer (catch-up, a file of
    the answer's sessions that could not be read). `code` is stable."""

    code: str
    message: str
    path: str | None = None


class ErrorBody(Wire):
    code: str
    message: str


class Response(Wire):
    id: int | str | None
    ok: bool
    result: Any = None
    error: ErrorBody | None = None
    warnings: list[Notice] = []
    freshness: Freshness | None = None
