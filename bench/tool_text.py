"""What the model reads: `python -m bench.tool_text [--before REV]` (from the repo root).

Renders the Pi tool's `event_search` text for a fixed set of agent-shaped
queries on bench.recall's history (its facts and a 20 MB background corpus,
all written by the real Pi SessionManager): the agent questions and the
exact words of every fact, plus four queries agents ask often. Each query
goes over a real piwatchd's socket from the fact project's workspace caller
(the Pi tool's caller), 20 hits a page; the extension's own `formatSearch`
(tests/pi_e2e/tool_text.mjs `format` mode) renders the same results with
this checkout's extension and, with `--before REV`, with the extension of a
git revision, so before and after see identical pages. A budget run renders
every page again with `budget: 1000` and reports how close to 4,000
characters it came.

Reported: characters per hit and per page (mean, p50, p90), the share of
pages within 10% of a budget, and one page of each text. Writes
bench/out/tool-text.md and .json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from typing import Any

from piwatch.client import Client
from piwatch.wire import to_builtins

from bench.ingest import OUT, REPO, corpus, parse_bytes, pct
from bench.recall import load_facts, planted
from bench.search import Daemon

COMMON = ["theme selector", "error", "compaction summary", "how did we fix the websocket reconnect error"]
LIMIT = 20
BUDGET = 1000


def _node_format(ext: Path, pages: list[dict[str, Any]]) -> list[str]:
    import pitools

    proc = subprocess.run(
        [pitools.find_node(), str(REPO / "tests" / "pi_e2e" / "tool_text.mjs"), "format", "--ext", str(ext)],
        input=json.dumps(pages),
        env=pitools.node_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    texts: list[str] = json.loads(proc.stdout)
    return texts


def _installed(source: Path, agent: Path) -> Path:
    """The extension as `piwatch pi install` lays it out (with its npm dependency), in a scratch agent dir."""
    from piwatch.commands.pi import install

    return Path(install(agent, source)["target"])


def _extension_at(rev: str, into: Path) -> Path:
    """The Pi extension's files as of a git revision (for the before side)."""
    tar = subprocess.run(["git", "archive", rev, "client/pi-extension"], cwd=REPO, capture_output=True, check=True)
    with tarfile.open(fileobj=BytesIO(tar.stdout)) as archive:
        archive.extractall(into, filter="data")
    return _installed(into / "client" / "pi-extension", into / "agent")


def _queries(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(query, workspace cwd): every fact's question and exact words, then the common ones in each project."""
    out = []
    for r in records:
        for shape in ("question", "exact"):
            if shape in r["queries"]:
                out.append((r["queries"][shape], r["cwd"]))
    for cwd in sorted({r["cwd"] for r in records}):
        out += [(q, cwd) for q in COMMON]
    return list(dict.fromkeys(out))


def _pages(client: Client, queries: list[tuple[str, str]]) -> list[dict[str, Any]]:
    pages = []
    for query, cwd in queries:
        result = client.search(query, limit=LIMIT, caller={"cwd": cwd})
        if result.hits:
            pages.append(
                {"op": "search", "query": query, "result": to_builtins(result), "warnings": [], "freshness": None}
            )
    return pages


def _figures(pages: list[dict[str, Any]], texts: list[str]) -> dict[str, Any]:
    per_page = [len(t) for t in texts]
    per_hit = [len(t) / len(p["result"]["hits"]) for p, t in zip(pages, texts, strict=True)]
    full = [c for p, c in zip(pages, per_hit, strict=True) if len(p["result"]["hits"]) == LIMIT]
    return {
        "pages": len(texts),
        "charsPerHitMean": round(sum(per_hit) / len(per_hit), 1),
        "charsPerHitFullPagesMean": round(sum(full) / len(full), 1) if full else None,
        "fullPages": len(full),
        "charsPerPageP50": pct(per_page, 50),
        "charsPerPageP90": pct(per_page, 90),
        "tokensPerPageMean": round(sum(per_page) / len(per_page) / 4),
    }


def _budget(pages: list[dict[str, Any]], ext: Path) -> dict[str, Any]:
    budgeted = [{**p, "params": {"budget": BUDGET}} for p in pages]
    sizes = [len(t) for t in _node_format(ext, budgeted)]
    limit = BUDGET * 4
    return {
        "budgetTokens": BUDGET,
        "within10pct": sum(1 for s in sizes if s <= limit * 1.1) / len(sizes),
        "maxChars": max(sizes),
        "p50Chars": pct(sizes, 50),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.tool_text", description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", metavar="REV", help="also render with the extension of this git revision")
    ap.add_argument("--bytes", default="20M", help="background corpus size (default 20M)")
    ns = ap.parse_args(argv)
    facts = load_facts()
    cdir, _ = corpus(parse_bytes(ns.bytes), 1, "many-small")
    facts_dir, records = planted(facts)
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        daemon = Daemon(cdir / "sessions", Path(tmp) / "index.sqlite3")
        daemon.args += ["--sessions", str(facts_dir)]
        daemon.start()
        try:
            with Client(daemon.sock) as client:
                pages = _pages(client, _queries(records))
        finally:
            daemon.stop()
        ext = _installed(REPO / "client" / "pi-extension", Path(tmp) / "agent")
        after = _node_format(ext, pages)
        report: dict[str, Any] = {"after": _figures(pages, after), "budget": _budget(pages, ext)}
        samples = {"after": after[0]}
        if ns.before:
            before = _node_format(_extension_at(ns.before, Path(tmp) / "before"), pages)
            report["before"] = {"rev": ns.before, **_figures(pages, before)}
            samples["before"] = before[0]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "tool-text.json").write_text(json.dumps(report, indent=2))
    md = [f"# event_search text, {report['after']['pages']} pages of up to {LIMIT} hits", "", "```json"]
    md += [json.dumps(report, indent=2), "```"]
    for side, text in samples.items():
        md += ["", f"## One page, {side}", "", "```text", text, "```"]
    (OUT / "tool-text.md").write_text("\n".join(md) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
