"""`piwatch status`: index health and the live service's progress, read from the database."""

from __future__ import annotations

import argparse
import sys
import time

from ..colour import visible_controls
from ..rates import format_duration, format_rate, refeed_words, time_left
from ..wire import ScanInfo, ServiceStatus, StatusResult, to_builtins, to_json

__all__ = ["DIAGNOSTICS_SHOWN", "add_parser", "run", "format_status", "run_summary"]

DIAGNOSTICS_SHOWN = 5  # skipped or repaired lines listed; the counts are of them all


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="show index health, backlog and piwatchd progress")
    p.set_defaults(run=run)
    p.add_argument("--db", metavar="PATH", help="read this index file directly instead of asking piwatchd")
    p.add_argument("--socket", metavar="PATH", help="piwatchd socket (default: $PIWATCH_SOCKET or the runtime dir)")
    p.add_argument("--json", action="store_true", help="print the status as JSON")


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def _ago(ms: int | None) -> str:
    if not ms:
        return "never"
    s = max(0.0, time.time() - ms / 1000)
    return f"{s:.0f}s ago" if s < 120 else f"{s / 60:.0f}m ago" if s < 7200 else f"{s / 3600:.1f}h ago"


def _bar(done: int, total: int, width: int = 30) -> str:
    frac = 0.0 if total <= 0 else min(1.0, done / total)
    filled = int(frac * width)
    return f"[{'#' * filled}{'.' * (width - filled)}] {frac * 100:5.1f}% ({_mb(done)} of {_mb(total)})"


def run_summary(svc: ServiceStatus) -> str:
    """What this run of piwatchd did, in words a person expects. Pure."""
    files = svc.files_ingested or 0
    changed = svc.files_changed
    if files == 0:
        return "nothing ingested yet this run"
    if changed == 0 or (changed is None and not svc.events_ingested and not svc.bytes_ingested):
        return f"{files} files checked this run, nothing new since the last index"
    how_many = f"{changed} of {files}" if changed is not None else f"{files}"
    return f"{how_many} files had new data this run ({_mb(svc.bytes_ingested or 0)}, {svc.events_ingested or 0} events)"


def refeed_summary(svc: ServiceStatus) -> str | None:
    """The start-up re-feed of the text index, in words (None when none runs). Pure."""
    if not svc.refeed_total:
        return None
    figures = refeed_words(svc.refeed_done or 0, svc.refeed_total, svc.refeed_seconds)
    return (
        f"re-feeding the text index from the session files: {figures}; "
        "until then searches may miss the sessions not re-fed yet"
    )


def _service_lines(st: StatusResult, svc: ServiceStatus) -> list[str]:
    """The live service: roots, scans, progress, catch-up, problems."""
    running = "running" if svc.running else "not running"
    out = [f"piwatchd   {running} (pid {svc.pid}, {svc.phase}, state written {svc.updated_age_s}s ago)"]
    for root in svc.roots:
        how = root.get("backend") or "not watched"
        out.append(f"  root     {root.get('path')} ({how})")
    scan = svc.last_scan or ScanInfo()
    out.append(
        f"  scan     last {_ago(scan.at_ms)} ({scan.reason or '-'}, {scan.files or 0} files, "
        f"{scan.seconds or 0}s); every {svc.scan_interval or 0:g}s; changes missed by events: {svc.missed_by_events}"
    )
    # A workspace caller is shown no machine-wide file counts (its own files' progress is the first index's).
    known = "" if svc.files_known is None else f"{svc.files_known} files known; "
    queued = "" if svc.backlog_files is None else f"; backlog {svc.backlog_files} files"
    out.append(f"  progress {known}{run_summary(svc)}{queued}")
    if st.catch_up is not None:
        out.append(
            f"  first index: {st.catch_up.files_done} of {st.catch_up.files_total} files; "
            "answers may be incomplete until it finishes"
        )
    refeed = refeed_summary(svc)
    if refeed:
        out.append(f"  text     {refeed}")
    indexed, backlog = _bytes(st)
    if backlog > 0:
        rate = svc.rate_bytes_per_s
        pace = f", {format_rate(rate)}, {format_duration(time_left(backlog, rate))} left"
        out.append(f"  indexing {_bar(indexed, indexed + backlog)}{pace}")
    if svc.index_problem:
        out.append(f"  UNHEALTHY {svc.index_problem}")
    out.extend(f"  warning  {w}" for w in svc.warnings)
    out.extend(f"  error    {path}: {err}" for path, err in list(svc.errors.items())[:10])
    return out


def _bytes(st: StatusResult) -> tuple[int, int]:
    """(bytes ingested, bytes still to read), the one reckoning of the bytes line and the bar.
    Files the index has not met yet are in the service's backlog only, not in the index's bytes."""
    indexed = st.bytes.ingested if st.bytes is not None else 0
    backlog = max(st.bytes.backlog if st.bytes is not None else 0, (st.service and st.service.backlog_bytes) or 0)
    return indexed, backlog


def _index_lines(st: StatusResult) -> list[str]:
    """The index file: sources, counts, bytes, skipped lines, redactions."""
    out = []
    src = st.sources
    if st.db is not None:
        out.append(f"database   {st.db} ({_mb(st.index_bytes)})")
    if src is not None:
        states = ", ".join(f"{n} {s}" for s, n in src.by_state.items() if n)
        out.append(f"sources    {src.total} files: {states or 'none'}")
        out.extend(f"  {p.state:<11} {p.path}: {p.error}" for p in src.problems[:20])
    fragments = f", {st.fragments} fragments" if st.fragments is not None else ""
    out.append(f"index      {st.sessions} sessions, {st.events} events{fragments}")
    if st.bytes is not None:
        indexed, backlog = _bytes(st)
        out.append(f"bytes      {_mb(indexed)} ingested of {_mb(indexed + backlog)} on disk (backlog {_mb(backlog)})")
    diag = st.diagnostics
    if diag is not None and diag.by_code:
        summary = ", ".join(f"{code} {d.count}" for code, d in diag.by_code.items())
        out.append(f"lines      skipped or repaired: {summary}")
        shown = diag.recent[:DIAGNOSTICS_SHOWN]
        for d in shown:
            verb = "repaired" if d.repaired else "skipped"
            out.append(f"  {verb} {d.path} @ byte {d.byte_offset}: {d.message}")
        left = sum(d.count for d in diag.by_code.values()) - len(shown)
        if left > 0:
            out.append(f"  … {left} more line{'' if left == 1 else 's'} (--json lists the {len(diag.recent)} newest)")
    elif diag is not None:
        out.append("lines      none skipped or repaired")
    red = st.redactions
    if red is not None:
        kinds = ", ".join(f"{kind} {n}" for kind, n in red.by_kind.items())
        extra = f"; extra patterns: {', '.join(red.extra_patterns)}" if red.extra_patterns else ""
        out.append(f"redacted   {red.total} secrets{f' ({kinds})' if kinds else ''}{extra}")
    return out


def format_status(st: StatusResult) -> str:
    out = ["piwatchd   never ran on this index"] if st.service is None else _service_lines(st, st.service)
    if not st.ready:
        out.append(f"database   not ready: {st.index_error}")
        return "\n".join(out)
    return "\n".join(out + _index_lines(st))


def _local(db: str | None) -> StatusResult | None:
    """The index file's status through the same api, without a daemon."""
    from piwatch.client import Client, LocalTransport, PiwatchError

    from ._common import _db_path

    try:
        with Client(transport=LocalTransport(_db_path(db))) as client:
            return client.status()
    except PiwatchError:
        return None


def _unhealthy(st: StatusResult) -> bool:
    service = st.service
    return (not st.ready) or (
        service is not None
        and (bool(service.errors or service.index_problem) or service.phase in ("failed", "stopped", "rebuilding"))
    )


def run(ns: argparse.Namespace) -> int:
    """Exit 0: running and healthy; 1: not running; 2: running but unhealthy."""
    from piwatch.client import Client, DaemonNotRunning, PiwatchError

    if ns.db:
        st = _local(ns.db)
        if st is None or not st.ready:
            why = f": {st.index_error}" if st is not None else ""
            print(f"piwatch: no usable index at {ns.db}{why}", file=sys.stderr)
            return 1
        print(to_json(st) if ns.json else visible_controls(format_status(st)))
        return 2 if st.service is not None and st.service.errors else 0
    try:
        with Client(ns.socket, timeout=5.0) as client:
            hello = client.hello()
            st = client.status()
    except DaemonNotRunning as exc:
        local = _local(None)
        if ns.json:
            print(
                to_json({"running": False, "error": str(exc), "index": None if local is None else to_builtins(local)})
            )
        else:
            print(exc)  # says where it looked, why it is not running and how to start it
            if local is not None:
                print("last recorded state of the index file:")
                print(visible_controls(format_status(local)))
        return 1
    except PiwatchError as exc:
        print(f"piwatch: piwatchd is running but not answering properly: {exc}", file=sys.stderr)
        return 2
    st.running = True
    st.daemon = hello
    if ns.json:
        print(to_json(st))
    else:
        service = st.service or ServiceStatus()
        print(
            f"piwatchd {hello.version} running, pid {hello.pid}, up {service.uptime_seconds} s, socket {service.socket}"
        )
        print(visible_controls(format_status(st)))  # paths and diagnostics quote session files
    return 2 if _unhealthy(st) else 0
