"""What a caller is shown, decided once for each wire type that shows recorded values.

A response's values come from two places: the indexed text (redacted when
indexed; `read` and `trace` pass their whole payload through the rules,
`redact_payload`) and values copied from session files that are not indexed
text: a cwd, a tool name, a session name, a parent reference, a source path,
a diagnostic or error message quoting an id. For each wire type that shows
the latter, one builder here decides everything about it at once, from the
request's `Visibility`:

- what the caller may see: a session capped by the cutoff is described by
  its visible events only (name, time span, event count); the service shows a
  workspace caller no paths or machine-wide counts;
- redaction: a secret in a recorded value is the same `[redacted: kind]`
  marker as in the text, with the rules the index records (`index_rules`),
  so the daemon and the daemon-less CLI show the same;
- bounds: a name or cwd repeated on every hit or listed row is cut
  (`short`), after redaction, so a marker is never cut in half.

A new field of one of these types is added in its builder, beside every
decision about it. Ids stay as recorded: they are keys a caller sends back.
Each distinct value is redacted once per response.
"""

from __future__ import annotations

import sqlite3

import msgspec
from piwatch import wire

from ..model.redact import DEFAULT_RULES, Rules, redact
from ..store.catalog import SessionRow
from ..store.redaction import index_rules
from ..text.search import iso_time
from .auth import CallerScope
from .visibility import Visibility

__all__ = ["SHORT_VALUE_CHARS", "Shown", "short"]

SHORT_VALUE_CHARS = 1000  # a recorded name or cwd in a listing; the full value is in the source file
replace = msgspec.structs.replace


def short(value: str | None) -> str | None:
    """A recorded value shown in a listing, cut so one huge header or name
    (Pi writes what it is given) cannot inflate every answer naming its session."""
    return value if value is None or len(value) <= SHORT_VALUE_CHARS else wire.clip(value, SHORT_VALUE_CHARS)


class Shown:
    """One response's presentation: a builder per wire type (redactions cached per value).
    Without a visibility (the caller is not known yet, or the index cannot be read: `scope`
    says who asks, if known) only the service and notices are shown, through the rules of
    the index on `conn` if it can be read, else the built-in ones."""

    def __init__(
        self, vis: Visibility | None, scope: CallerScope | None = None, conn: sqlite3.Connection | None = None
    ) -> None:
        self.vis = vis
        self._conn = vis.conn if vis is not None else conn
        scope = vis.scope if vis is not None else scope
        self.scoped = scope is None or scope.roots is not None  # a workspace caller (or none known)
        self._rules: Rules | None = None
        self._cache: dict[str, str] = {}

    def __call__(self, value: str | None) -> str | None:
        """A recorded value through the index's redaction rules."""
        if value is None:
            return None
        out = self._cache.get(value)
        if out is None:
            out = self._cache[value] = redact(value, self._rules or self._load_rules())[0]
        return out

    def _load_rules(self) -> Rules:
        try:
            self._rules = DEFAULT_RULES if self._conn is None else index_rules(self._conn)
        except sqlite3.Error:  # the index broke under this request: its built-in rules still apply
            self._rules = DEFAULT_RULES
        return self._rules

    def listed(self, value: str | None) -> str | None:
        """A recorded value repeated on every hit or row: redacted, then bounded."""
        return short(self(value))

    def _view(self) -> Visibility:
        assert self.vis is not None, "only the service and notices are shown without an index"
        return self.vis

    # -- search ---------------------------------------------------------------------

    def search(self, result: wire.SearchResult) -> wire.SearchResult:
        """A search page as the caller is shown it: each hit and session through its builder."""
        vis = self._view()
        grouped = result.sessions or []
        vis.load([*(h.session_id for h in result.hits), *(s.session_id for s in grouped)])  # one query
        scope = wire.SearchScope(roots=None if vis.scope.roots is None else list(vis.scope.roots))
        return replace(
            result,
            hits=[self.hit(h) for h in result.hits],
            sessions=None if result.sessions is None else [self.session_hit(s) for s in grouped],
            scope=scope,
        )

    def hit(self, hit: wire.Hit) -> wire.Hit:
        """A hit: its session's writer; its session's name as far as the caller may see
        it (a capped session's later names withheld); recorded values redacted and bounded."""
        vis = self._view()
        row = vis.session(hit.session_id)
        name = hit.session_name
        if vis.has_cutoff and vis.cap(hit.session_id) is not None and (view := vis.session_view(hit.session_id)):
            name = view.name
        return replace(
            hit,
            cwd=self.listed(hit.cwd),
            session_name=self.listed(name),
            evidence=replace(hit.evidence, tool_name=self(hit.evidence.tool_name)),
            agent="omp" if row is not None and row.agent == "omp" else hit.agent,
        )

    def session_hit(self, item: wire.SessionHit) -> wire.SessionHit:
        """A grouped session: name and time span as far as the caller may see them."""
        view = self._view().session_view(item.session_id)
        name, first, last = item.session_name, item.first_timestamp, item.last_timestamp
        if view is not None:
            name, first, last = view.name, iso_time(view.first_ms), iso_time(view.last_ms)
        return replace(
            item,
            session_name=self.listed(name),
            cwd=self.listed(item.cwd),
            first_timestamp=first,
            last_timestamp=last,
            evidence=self.hit(item.evidence),
        )

    # -- sessions ----------------------------------------------------------------------

    def session_item(self, row: SessionRow) -> wire.SessionItem:
        """A listed session; one capped by the cutoff (a fork that copied the caller's
        session) by the name, time span and event count of its visible events only."""
        vis = self._view()
        name, first, last, events = row.name, row.first_ms, row.last_ms, row.entry_count
        if vis.has_cutoff and vis.cap(row.session_id) is not None and (view := vis.session_view(row.session_id)):
            name, first, last, events = view.name, view.first_ms, view.last_ms, view.events
        return wire.SessionItem(
            session_id=row.session_id,
            name=self.listed(name),
            cwd=self.listed(row.cwd),
            created=self.listed(row.created),
            first_ms=first,
            last_ms=last,
            events=events,
            parent_session=self.listed(row.parent_session),
            format=row.format,
            path=self(row.path) or row.path,
            state=row.state,
            agent="omp" if row.agent == "omp" else "pi",
        )

    # -- status and the envelope ------------------------------------------------------------

    def status(self, result: wire.StatusResult) -> wire.StatusResult:
        """Status as the caller is shown it: problems and diagnostics quote session
        files; the service through its own builder, whichever source it came from."""
        if result.sources is not None:
            for p in result.sources.problems:
                p.path, p.error = self(p.path) or p.path, self(p.error)
        if result.diagnostics is not None:
            for d in result.diagnostics.recent:
                d.path, d.message = self(d.path) or d.path, self(d.message) or d.message
        if result.service is not None:
            result.service = self.service(result.service)
        return result

    def service(self, svc: wire.ServiceStatus) -> wire.ServiceStatus:
        """The ingest service: for a workspace caller its phase and times only, no paths
        of other projects' files and no machine-wide counts (its own files' progress is
        `catchUp` and the index's counts); for the local CLI all of it, its per-file
        errors and watch warnings redacted."""
        if self.scoped:
            return public_service(svc)
        return replace(
            svc,
            errors={self(k) or k: self(v) or v for k, v in svc.errors.items()},
            warnings=[self(w) or w for w in svc.warnings],
        )

    def notice(self, notice: wire.Notice) -> wire.Notice:
        return replace(notice, message=self(notice.message) or notice.message, path=self(notice.path))


def public_service(svc: wire.ServiceStatus) -> wire.ServiceStatus:
    """What a workspace caller may see of the service (`Shown.service`)."""
    return wire.ServiceStatus(
        pid=svc.pid,
        phase=svc.phase,
        running=svc.running,
        started_ms=svc.started_ms,
        heartbeat_ms=svc.heartbeat_ms,
        updated_age_s=svc.updated_age_s,
        uptime_seconds=svc.uptime_seconds,
        startup_seconds=svc.startup_seconds,
        last_scan=wire.ScanInfo(at_ms=svc.last_scan.at_ms) if svc.last_scan else None,
    )
