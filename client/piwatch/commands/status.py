"""`piwatch status`: index health and the live service's progress, read from the database."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

__all__ = ["add_parser", "run", "format_status"]


def add_parser(sub) -> None:
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


def format_status(st: dict[str, Any]) -> str:
    out = []
    svc = st.get("service")
    if svc is None:
        out.append("piwatchd   never ran on this index")
    else:
        running = "running" if svc["running"] else "not running"
        out.append(f"piwatchd   {running} (pid {svc['pid']}, {svc['phase']}, state written {svc['updated_age_s']}s ago)")
        for root in svc.get("roots", []):
            how = root.get("backend") or "not watched"
            out.append(f"  root     {root['path']} ({how})")
        scan = svc.get("last_scan") or {}
        out.append(
            f"  scan     last {_ago(scan.get('at_ms'))} ({scan.get('reason', '-')}, {scan.get('files', 0)} files, "
            f"{scan.get('seconds', 0)}s); every {svc['scan_interval']:g}s; changes missed by events: {svc['missed_by_events']}"
        )
        out.append(
            f"  progress {svc['files_known']} files known, {svc['files_ingested']} ingested this run "
            f"({_mb(svc['bytes_ingested'])}, {svc['events_ingested']} events); backlog {svc['backlog_files']} files"
        )
        b = st["bytes"]
        if b["backlog"] > 0:
            out.append(f"  indexing {_bar(b['ingested'], b['ingested'] + b['backlog'])}")
        for w in svc.get("warnings", []):
            out.append(f"  warning  {w}")
        for path, err in list(svc.get("errors", {}).items())[:10]:
            out.append(f"  error    {path}: {err}")
    src = st["sources"]
    states = ", ".join(f"{n} {s}" for s, n in src["byState"].items() if n)
    out.append(f"database   {st['db']} ({_mb(st['indexBytes'])})")
    out.append(f"sources    {src['total']} files: {states or 'none'}")
    for p in src["problems"][:20]:
        out.append(f"  {p['state']:<11} {p['path']}: {p['error']}")
    out.append(f"index      {st['sessions']} sessions, {st['events']} events, {st['fragments']} fragments")
    b = st["bytes"]
    out.append(f"bytes      {_mb(b['ingested'])} ingested of {_mb(b['files'])} on disk (backlog {_mb(b['backlog'])})")
    diag = st["diagnostics"]
    if diag["byCode"]:
        summary = ", ".join(f"{code} {d['count']}" for code, d in diag["byCode"].items())
        out.append(f"lines      skipped or repaired: {summary}")
        for d in diag["recent"][:5]:
            verb = "repaired" if d["repaired"] else "skipped"
            out.append(f"  {verb} {d['path']} @ byte {d['byteOffset']}: {d['message']}")
    else:
        out.append("lines      none skipped or repaired")
    return "\n".join(out)


def _direct(db: str | None) -> dict[str, Any] | None:
    from piwatchd.direct import resolve_db  # lazy: the daemon package is optional for the client
    from piwatchd.status import collect_status

    path = resolve_db(db)
    return collect_status(path) if path.exists() else None


def run(ns: argparse.Namespace) -> int:
    """Exit 0: running and healthy; 1: not running; 2: running but unhealthy."""
    from piwatch.client import Client, DaemonNotRunning, PiwatchError

    if ns.db:
        st = _direct(ns.db)
        if st is None:
            print(f"piwatch: no index at {ns.db}", file=sys.stderr)
            return 1
        print(json.dumps(st, indent=2, ensure_ascii=False) if ns.json else format_status(st))
        return 2 if (st["service"] or {}).get("errors") else 0
    try:
        with Client(ns.socket, timeout=5.0) as client:
            hello = client.hello()
            st = client.status()
    except DaemonNotRunning as exc:
        st = _direct(None)
        if ns.json:
            print(json.dumps({"running": False, "error": str(exc), "index": st}, indent=2, ensure_ascii=False))
        else:
            print(f"piwatchd is not running ({exc})")
            if st is not None:
                print("last recorded state of the index file:")
                print(format_status(st))
        return 1
    except PiwatchError as exc:
        print(f"piwatch: piwatchd is running but not answering properly: {exc}", file=sys.stderr)
        return 2
    st["running"] = True
    st["daemon"] = hello
    service = st.get("service") or {}
    unhealthy = bool(service.get("errors")) or service.get("phase") in ("failed", "stopped")
    if ns.json:
        print(json.dumps(st, indent=2, ensure_ascii=False))
    else:
        up = service.get("uptimeSeconds")
        print(f"piwatchd {hello.get('version')} running, pid {hello.get('pid')}, up {up} s, socket {service.get('socket')}")
        print(format_status(st))
    return 2 if unhealthy else 0
