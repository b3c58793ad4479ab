"""Recorded values a response shows beside the indexed text, through the same
redaction rules as that text.

Text fragments are redacted when indexed, and `read`/`trace` pass their
whole payload through the rules (`redact_payload`). Search hits, `sessions`
listings, `status` and warnings also show values copied from session files
that are not indexed text: a cwd, a tool name, a session name, a parent
reference, a source path, a diagnostic or error message quoting an id. A
secret in any of them (a token pasted into a directory name, a tool named
after a key, a duplicated session id that is a token) is replaced by the same
`[redacted: kind]` marker, with the rules the index records (`index_rules`),
so the daemon and the daemon-less CLI show the same. Ids stay as recorded:
they are keys a caller sends back. Each distinct value is redacted once per
response.
"""

from __future__ import annotations

import sqlite3

from piwatch import wire

from ..model.redact import DEFAULT_RULES, Rules, redact
from ..store.redaction import index_rules

__all__ = ["Shown"]


class Shown:
    """One response's redaction of recorded values (cached per value)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._rules: Rules | None = None
        self._conn = conn
        self._cache: dict[str, str] = {}

    def __call__(self, value: str | None) -> str | None:
        if value is None:
            return None
        out = self._cache.get(value)
        if out is None:
            if self._rules is None:
                try:
                    self._rules = index_rules(self._conn)
                except sqlite3.Error:  # the index broke under this request: its built-in rules still apply
                    self._rules = DEFAULT_RULES
            out = self._cache[value] = redact(value, self._rules)[0]
        return out

    def hit(self, hit: wire.Hit) -> None:
        hit.cwd, hit.session_name = self(hit.cwd), self(hit.session_name)
        hit.evidence.tool_name = self(hit.evidence.tool_name)

    def search(self, result: wire.SearchResult) -> None:
        for hit in result.hits:
            self.hit(hit)
        for item in result.sessions or []:
            item.cwd, item.session_name = self(item.cwd), self(item.session_name)
            self.hit(item.evidence)

    def status(self, result: wire.StatusResult) -> None:
        if result.sources is not None:
            for p in result.sources.problems:
                p.path, p.error = self(p.path) or p.path, self(p.error)
        if result.diagnostics is not None:
            for d in result.diagnostics.recent:
                d.path, d.message = self(d.path) or d.path, self(d.message) or d.message
        if result.service is not None:
            service = result.service
            service.errors = {self(k) or k: self(v) or v for k, v in service.errors.items()}
            service.warnings = [self(w) or w for w in service.warnings]

    def notices(self, notices: list[wire.Notice]) -> None:
        for n in notices:
            n.message, n.path = self(n.message) or n.message, self(n.path)
