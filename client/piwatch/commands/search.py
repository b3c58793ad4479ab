"""`piwatch search`: ranked event hits with marked snippets, or (`--sessions`)
the sessions they belong to, each with its strongest event as evidence."""

from __future__ import annotations

import argparse
import os
import signal
from typing import Any, TextIO

from ..colour import SafeText, highlight, use_colour, write_raw
from ..timeparse import parse_time
from ..wire import (
    BRANCH_STATES,
    ENTRY_TYPES,
    KINDS,
    MAX_LIMIT,
    MAX_OFFSET,
    MIN_ID_PREFIX,
    ROLES,
    SELECTION_STATES,
    Hit,
    SearchResult,
    agent_label,
)
from ._common import add_colour_arg, add_scope_args, run_op, whole, widened

__all__ = [
    "add_parser",
    "elsewhere_args",
    "elsewhere_count",
    "run",
    "search_args",
    "print_hits",
    "print_sessions",
    "words_alone",
]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p_search = sub.add_parser("search", help='search indexed events (terms AND-ed, "quoted phrases")')
    p_search.set_defaults(run=run)
    p_search.add_argument("query", nargs="+", help="plain terms and quoted phrases; FTS syntax is treated as text")
    p_search.add_argument("--json", action="store_true", help="print the result as JSON")
    add_colour_arg(p_search, "matches and escaped control characters")
    add_scope_args(p_search)
    p_search.add_argument(
        "--sessions",
        dest="group",
        action="store_const",
        const="session",
        default="event",
        help="sessions as results: ranked by their strongest event, shown as evidence (limit/offset count sessions)",
    )
    p_search.add_argument(
        "--exact",
        action="store_true",
        help="only events holding every word as written: no word forms, repaired words or partial matches",
    )
    p_search.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="print each new hit as its event is indexed, until interrupted (like tail -f); needs piwatchd",
    )
    p_search.add_argument(
        "--limit",
        type=whole(1, MAX_LIMIT),
        default=20,
        help=f"hits (with --sessions: sessions) to return, 1-{MAX_LIMIT} (default 20)",
    )
    p_search.add_argument(
        "--offset", type=whole(0, MAX_OFFSET), default=0, help=f"skip this many, 0-{MAX_OFFSET:,} (pagination)"
    )
    _add_filter_args(p_search)


def _add_filter_args(p_search: argparse.ArgumentParser) -> None:
    """Which events may match: session, place, type, time, error, tree state and file filters."""
    p_search.add_argument(
        "--session",
        action="append",
        metavar="ID",
        help=f"only this session: its id or a unique prefix of {MIN_ID_PREFIX}+ characters (repeatable)",
    )
    p_search.add_argument("--cwd", metavar="PATH", help="only sessions whose recorded cwd is exactly PATH")
    p_search.add_argument("--under", metavar="PATH", help="only sessions whose cwd is PATH or below it")
    _add_value_filter(p_search, "--type", "TYPE", ENTRY_TYPES, "entry type")
    _add_value_filter(
        p_search,
        "--kind",
        "KIND",
        KINDS,
        "kind of the matched text (bash.command is a command the user ran with ! in Pi;"
        " the model's bash tool calls are tool.call with --tool bash)",
    )
    _add_value_filter(p_search, "--role", "ROLE", ROLES, "message role")
    p_search.add_argument("--tool", action="append", metavar="NAME", help="tool name of a call or result")
    p_search.add_argument("--since", type=parse_time, metavar="TIME", help="not before TIME (7d, 12h, ISO date)")
    p_search.add_argument("--until", type=parse_time, metavar="TIME", help="before TIME")
    err = p_search.add_mutually_exclusive_group()
    err.add_argument("--errors", dest="is_error", action="store_const", const=True, help="only errors")
    err.add_argument("--no-errors", dest="is_error", action="store_const", const=False, help="exclude errors")
    _add_value_filter(p_search, "--branch", "STATE", BRANCH_STATES, "branch state")
    _add_value_filter(p_search, "--selection", "STATE", SELECTION_STATES, "selection state")
    p_search.add_argument(
        "--file",
        action="append",
        metavar="PATH",
        help="only events that read or changed PATH (or a file below it); repeatable",
    )
    p_search.add_argument(
        "--file-mode",
        choices=("read", "changed", "any"),
        default=None,
        help="with --file: read, changed or any (default any)",
    )


def _add_value_filter(p: argparse.ArgumentParser, flag: str, metavar: str, values: tuple[str, ...], what: str) -> None:
    """A repeatable filter with a closed vocabulary: another value is a usage error naming
    them, and the shell completes them (argcomplete offers the choices)."""
    p.add_argument(
        flag, action="append", metavar=metavar, choices=values, help=f"{what}, repeatable: {', '.join(values)}"
    )


def search_args(ns: argparse.Namespace) -> dict[str, Any]:
    filters = {
        "sessionId": ns.session,
        "cwd": ns.cwd,
        "cwdUnder": ns.under,
        "eventType": ns.type,
        "kind": ns.kind,
        "role": ns.role,
        "tool": ns.tool,
        "sinceMs": ns.since,
        "untilMs": ns.until,
        "isError": ns.is_error,
        "branchState": ns.branch,
        "selectionState": ns.selection,
        # Resolved here: relative to the caller, not to whoever serves the request.
        "files": [os.path.abspath(os.path.expanduser(p)) for p in ns.file] if ns.file else None,
        "fileMode": ns.file_mode,
    }
    return {
        "query": " ".join(ns.query),
        "filters": {k: v for k, v in filters.items() if v is not None},
        "limit": ns.limit,
        "offset": ns.offset,
        **({"group": ns.group} if ns.group != "event" else {}),
        **({"exact": True} if ns.exact else {}),
    }


# What each tier below exact means, printed where the tier starts.
TIER_HEADINGS = {
    "forms": "every word matched, some by word form or identifier part (not as written)",
    "repaired": "every word matched after repairing a misspelled word",
    "partial": "only some of the words matched",
}


def tier_divider(tier: str) -> str:
    return f"── {tier}: {TIER_HEADINGS[tier]} ──"


def _repairs_line(result: SearchResult) -> str | None:
    if not result.repairs:
        return None
    return "did you mean: " + ", ".join(f"{r.word} → {r.replacement}" for r in result.repairs)


def words_alone(result: SearchResult) -> str | None:
    """A query that found nothing: how many events hold each of its words by itself."""
    if not result.words:
        return None
    counts = [f"{w.word} {_events(w.events, w.more)}" for w in result.words]
    return "no event holds enough of the words together; by itself: " + ", ".join(counts)


def _events(n: int, more: bool) -> str:
    if n == 0:
        return "in no event"
    return f"in {n}{'+' if more else ''} event{'' if n == 1 and not more else 's'}"


def _words_line(hit: Hit) -> str | None:
    if hit.tier == "exact" or hit.matched is None:
        return None
    matched, missing = hit.matched, hit.missing or []
    total = len(matched) + len(missing)
    line = f"matched {len(matched)} of {total} words: {', '.join(matched) or '-'}"
    return line + (f"; missing: {', '.join(missing)}" if missing else "")


def _colour_of(out: TextIO | SafeText, colour: bool | None) -> bool:
    if colour is not None:
        return colour
    return out.colour if isinstance(out, SafeText) else use_colour("auto", out, os.environ)


def elsewhere_args(args: dict[str, Any]) -> dict[str, Any]:
    """The search that counts what a project's search that found nothing would find in
    the other projects (asked as caller all): the same query and filters, one page of
    the most events a page holds. Only the local user's own CLI and TUI ask it."""
    same = {k: v for k, v in args.items() if k not in ("waitSeconds", "group", "offset")}
    return {**same, "limit": MAX_LIMIT}


def elsewhere_count(result: SearchResult) -> str | None:
    """How many hits the other projects hold (`elsewhere_args`' answer), in words; None for none."""
    n, more = len(result.hits), result.has_more
    return f"{n}{'+' if more else ''} hit{'' if n == 1 and not more else 's'} in other projects" if n else None


def _no_hits(result: SearchResult, elsewhere: SearchResult | None) -> str:
    roots = result.scope.roots if result.scope else None
    if not roots:
        return "no hits"
    where = f"no hits in the sessions of {', '.join(roots)}"
    if elsewhere is None:
        return f"{where} (--all searches every project)"
    count = elsewhere_count(elsewhere)
    return f"{where}; {count}: add --all to see them" if count else f"{where}, nor in other projects"


def print_hits(
    result: SearchResult, out: TextIO | SafeText, colour: bool | None = None, elsewhere: SearchResult | None = None
) -> None:
    """Hits as text; matches in colour when `colour` (default: `out`'s colour
    when it is a `SafeText`, else `--color auto` for `out`). Session text is
    written escaped (`highlight`, `SafeText`). An empty page of a project's
    search says what `elsewhere` (the other projects' answer) holds."""
    colour = _colour_of(out, colour)
    hits = result.hits
    if not hits:
        print(_no_hits(result, elsewhere), file=out)
        alone = words_alone(result)
        if alone:
            print(alone, file=out)
        return
    repairs = _repairs_line(result)
    if repairs:
        print(repairs, file=out)
    tier = "exact"
    for n, hit in enumerate(hits, start=result.offset + 1):
        if hit.tier != tier:
            tier = hit.tier
            print(tier_divider(tier), file=out)
        _print_hit(f"{n}. ", hit, out, colour)
    if result.has_more:
        print(f"(more: --offset {result.offset + len(hits)})", file=out)


def _when(ts: str | None) -> str:
    return (ts or "?")[:19].replace("T", " ")


def _print_hit(lead: str, hit: Hit, out: TextIO | SafeText, colour: bool) -> None:
    ev = hit.evidence
    tool = f" tool={ev.tool_name}" if ev.tool_name else ""
    err = " ERROR" if hit.is_error else ""
    state = f"  [{hit.branch_state}, {hit.selection_state}]"
    pad = " " * len(lead)
    print(
        f"{lead}{_when(hit.timestamp)}  {ev.kind}{tool}{err}{state}  {hit.cwd or '?'}{agent_label(hit.agent)}", file=out
    )
    print(f"{pad}session {hit.session_id}  entry {hit.entry_id}  fragment {ev.fragment_id}", file=out)
    words = _words_line(hit)
    if words:
        print(f"{pad}{words}", file=out)
    write_raw(out, f"{pad}{highlight(hit.snippet, hit.spans, colour)}\n")


def print_sessions(
    result: SearchResult, out: TextIO | SafeText, colour: bool | None = None, elsewhere: SearchResult | None = None
) -> None:
    """Sessions as text (`--sessions`), each with its strongest event as evidence."""
    colour = _colour_of(out, colour)
    sessions = result.sessions or []
    if not sessions:
        print_hits(result, out, colour, elsewhere)  # the same "no hits" line
        return
    more = "+" if result.grouping_capped else ""
    repairs = _repairs_line(result)
    if repairs:
        print(repairs, file=out)
    for n, s in enumerate(sessions, start=result.offset + 1):
        name = f'"{s.session_name}"' if s.session_name else "(unnamed)"
        span = f"{_when(s.first_timestamp)} .. {_when(s.last_timestamp)}"
        events = f"{s.matching_events}{more} matching event{'' if s.matching_events == 1 else 's'}"
        print(f"{n}. session {s.session_id}  {name}  {s.cwd or '?'}{agent_label(s.evidence.agent)}", file=out)
        tier = s.evidence.tier
        print(f"   {span}  {events}; strongest{'' if tier == 'exact' else f' ({tier})'}:", file=out)
        _print_hit("     ", s.evidence, out, colour)
    if result.grouping_capped:
        print(f"(grouped the best {result.grouped_events} matching events; more matched)", file=out)
    if result.has_more:
        print(f"(more sessions: --offset {result.offset + len(sessions)})", file=out)


def follow(ns: argparse.Namespace) -> int:
    """`--follow`: a standing query on piwatchd; one hit (or one JSON line) at a time, flushed."""
    import sys

    from piwatch.client import Client, PiwatchError
    from piwatch.wire import to_json

    from ..colour import visible_controls
    from ._common import caller_from, failed

    if ns.db or ns.group == "session" or ns.offset:
        print("piwatch: --follow takes no --db, --sessions or --offset (it follows piwatchd live)", file=sys.stderr)
        return 2
    args = search_args(ns)
    out = SafeText(sys.stdout, use_colour(ns.color, sys.stdout, os.environ))
    # SIGINT is how a follow ends. A process started in the background by a
    # non-interactive shell inherits SIGINT ignored, and Python then keeps it
    # ignored: `kill -INT` (or Ctrl-C after `fg`) would never stop it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with (
            Client(ns.socket) as client,
            client.follow(args["query"], filters=args["filters"], caller=caller_from(ns)) as stream,
        ):
            scope, elsewhere = _follow_scope(ns, args)
            print(
                f"piwatch: following {args['query']!r} in {scope}; new hits appear as they are indexed (Ctrl-C stops)",
                file=sys.stderr,
            )
            if elsewhere:
                print(f"piwatch: no hits there yet; {elsewhere}: add --all to follow every project", file=sys.stderr)
            for hit in stream:
                if ns.json:
                    print(to_json(hit, indent=None))
                else:
                    _print_hit("", hit, out, out.colour)
                sys.stdout.flush()
    except PiwatchError as exc:
        problem = failed(exc)
        print(f"piwatch: {visible_controls(str(problem))}", file=sys.stderr)
        return problem.exit_code
    return 0


def _follow_scope(ns: argparse.Namespace, args: dict[str, Any]) -> tuple[str, str | None]:
    """Where a follow looks, in words, and (when its project holds no hit yet) how many hits
    the other projects hold: a follow of one project that matches only elsewhere would
    otherwise wait in silence. Two searches of the words as written, as the follow matches."""
    from ._common import CommandFailed, call, caller_from

    if "all" in caller_from(ns):
        return "every project", None
    probe = {"query": args["query"], "filters": args["filters"], "exact": True}
    try:
        here: SearchResult = call(ns, "search", {**probe, "limit": 1}, quiet=True)[0]
    except CommandFailed:
        return "this project (--all follows every project)", None
    roots = here.scope.roots if here.scope else None
    scope = f"the sessions of {', '.join(roots or ['this project'])} (--all follows every project)"
    if here.hits:
        return scope, None
    others = widened(ns, "search", elsewhere_args(probe))
    return scope, None if others is None else elsewhere_count(others)


def run(ns: argparse.Namespace) -> int:
    if ns.follow:
        return follow(ns)
    args = search_args(ns)
    if ns.wait:
        args["waitSeconds"] = ns.wait
    printer = print_sessions if ns.group == "session" else print_hits

    def show(result: SearchResult, out: SafeText) -> None:
        empty = not result.hits and not result.sessions and not result.offset
        elsewhere = widened(ns, "search", elsewhere_args(args)) if empty else None
        printer(result, out, None, elsewhere)

    return run_op(ns, "search", args, show)
