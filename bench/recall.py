"""Recall benchmark: `python -m bench.recall --engine tantivy` (from the repo root).

Does search find what the agent means when it does not ask in the words that
were written? 45 hand-written facts (bench/recall_facts.toml: decisions in
user messages, findings in assistant text, commands, compiler/test/tool
output with identifiers and paths) in five projects, among decoys that share
some of their words, beside a background corpus; both are written by the real
Pi SessionManager (tests/pi/gen.mjs `corpus` and `texts` modes). A real
`piwatchd` indexes them, and each query goes over its Unix socket from the
fact's project's workspace caller (`{"cwd": project}`, the Pi tool's caller).
Beside the five hand-written shapes, two of seeded random typos
(`GENERATED`) check the typo repair on misspellings nobody chose.

Every fact is asked in up to five shapes: its exact words, other
inflections, identifier parts (facts holding identifiers), an agent-style
question with extra words, and one typo. A query finds the fact when the
fact's event is among the top 10 hits. Reported per shape: found@1,
found@10, the share with no hits at all, the tier that found the fact
(`hit.tier`: exact, forms, repaired, partial; indexes without tiers report
every hit as exact) and the latency; and whether the same query with
`group: "session"` puts the fact's session among the top 3 sessions. 20
negative questions about things never said count the hits labelled exact or
forms (the goal is 0).

Writes bench/out/recall-<bytes>-<engine>.md and .json. `--bytes` sizes the
background corpus (default 20M, bench/ingest.py's many-small shape, cached
under bench/cache/).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

from piwatch.client import Client

from bench.ingest import CACHE, OUT, REPO, corpus, parse_bytes, pct
from bench.search import Daemon

FACTS = REPO / "bench" / "recall_facts.toml"
SHAPES = ("exact", "forms", "parts", "question", "typo")
# Typos nobody chose to suit the index: one seeded random edit (a deletion,
# insertion, substitution or transposition anywhere in the word, its first
# letters too) of one word of 5+ letters of the fact's exact or forms query.
GENERATED = {"typo, generated": "exact", "typo of a form, generated": "forms"}
ALL_SHAPES = (*SHAPES, *GENERATED)
TIERS = ("exact", "forms", "repaired", "partial")
K = 10
_ITEM_KEYS = ("role", "text", "command", "tool", "args", "isError", "exitCode", "say")


def load_facts(path: Path = FACTS) -> dict[str, Any]:
    """The sessions (gen.mjs `texts` spec) and the negatives of the facts file."""
    data = tomllib.loads(path.read_text())
    sessions = [
        {
            "cwd": s["cwd"],
            **({"name": s["name"]} if "name" in s else {}),
            "items": [{k: v for k, v in item.items() if k in _ITEM_KEYS} for item in s["item"]],
        }
        for s in data["session"]
    ]
    return {"raw": data, "spec": {"sessions": sessions}, "negatives": data.get("negative", [])}


def planted(facts: dict[str, Any]) -> tuple[Path, list[dict[str, Any]]]:
    """Write the fact sessions with the real Pi (cached by the facts' hash);
    return their sessions dir and one record per fact with its event's identity."""
    import pitools

    digest = hashlib.sha256(json.dumps(facts["spec"], sort_keys=True).encode()).hexdigest()[:16]
    out = CACHE / f"recall-facts-{digest}"
    manifest_path = out / "manifest.json"
    if not manifest_path.exists():
        shutil.rmtree(out, ignore_errors=True)
        manifest = pitools.texts(out / "agent", "1.6.0", facts["spec"])
        manifest_path.write_text(json.dumps(manifest))
    manifest = json.loads(manifest_path.read_text())
    records = []
    for s, f in zip(facts["raw"]["session"], manifest["files"], strict=True):
        for i, item in enumerate(s["item"]):
            if "queries" not in item:
                continue
            ids = f["callEntryIds"] if item.get("target") == "call" else f["entryIds"]
            records.append(
                {
                    "cwd": s["cwd"],
                    "role": item["role"],
                    "sessionId": f["sessionId"],
                    "entryId": ids[i],
                    "text": item["text"][:80] or item.get("args", {}).get("command", "")[:80],
                    "queries": item["queries"],
                }
            )
    return Path(manifest["sessionsDir"]), records


def random_edit(word: str, rng: random.Random) -> str:
    """`word` with one random edit that changes it."""
    while True:
        i = rng.randrange(len(word))
        kind = rng.choice(("delete", "insert", "substitute", "transpose"))
        c = rng.choice("abcdefghijklmnopqrstuvwxyz")
        typo = {
            "delete": word[:i] + word[i + 1 :],
            "insert": word[:i] + c + word[i:],
            "substitute": word[:i] + c + word[i + 1 :],
            "transpose": word[:i] + word[i + 1 : i + 2] + word[i] + word[i + 2 :],
        }[kind]
        if typo.lower() != word.lower():
            return typo


def add_generated_typos(records: list[dict[str, Any]], seed: int) -> None:
    """Give each record its GENERATED queries (seeded: the same every run)."""
    rng = random.Random(seed)
    for rec in records:
        for shape, base in GENERATED.items():
            query = rec["queries"].get(base) or ""
            words = re.findall(r"[A-Za-z]{5,}", query)
            if words:
                word = rng.choice(words)
                rec["queries"] = {**rec["queries"], shape: query.replace(word, random_edit(word, rng), 1)}


def tier_of(hit: Any) -> str:
    """The hit's tier label; an index without tiers answers exactly."""
    return getattr(hit, "tier", None) or "exact"


def ask(client: Client, query: str, cwd: str) -> tuple[list[Any], float, Any]:
    t = time.perf_counter()
    result = client.search(query, limit=K, caller={"cwd": cwd})
    return list(result.hits), (time.perf_counter() - t) * 1000, result


def run_facts(client: Client, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for rec in records:
        for shape in ALL_SHAPES:
            query = rec["queries"].get(shape)
            if not query:
                continue
            hits, ms, result = ask(client, query, rec["cwd"])
            session_at, session_ms = session_rank(client, query, rec)
            rank = next(
                (n for n, h in enumerate(hits, 1) if (h.session_id, h.entry_id) == (rec["sessionId"], rec["entryId"])),
                None,
            )
            rows.append(
                {
                    "shape": shape,
                    "query": query,
                    "cwd": rec["cwd"],
                    "rank": rank,
                    "hits": len(hits),
                    "tier": tier_of(hits[rank - 1]) if rank else None,
                    "topTier": tier_of(hits[0]) if hits else None,
                    "repairs": [[r.word, r.replacement] for r in getattr(result, "repairs", None) or []],
                    "relaxed": bool(getattr(result, "relaxed", False)),
                    "ms": round(ms, 3),
                    "sessionRank": session_at,
                    "sessionMs": session_ms,
                }
            )
    return rows


def session_rank(client: Client, query: str, rec: dict[str, Any]) -> tuple[int | None, float]:
    """Where the fact's session ranks when the same question asks for sessions
    (`group: "session"`, top 3): "which earlier session worked on this?"; and ms."""
    t = time.perf_counter()
    result = client.search(query, limit=3, caller={"cwd": rec["cwd"]}, group="session")
    ms = (time.perf_counter() - t) * 1000
    ids = [s.session_id for s in result.sessions or []]
    return (ids.index(rec["sessionId"]) + 1 if rec["sessionId"] in ids else None), round(ms, 3)


def run_negatives(client: Client, negatives: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for neg in negatives:
        hits, ms, result = ask(client, neg["query"], neg["cwd"])
        tiers = Counter(tier_of(h) for h in hits)
        rows.append(
            {
                "query": neg["query"],
                "cwd": neg["cwd"],
                "hits": len(hits),
                "tiers": dict(tiers),
                "relaxed": bool(getattr(result, "relaxed", False)),
                "ms": ms,
            }
        )
    return rows


def summarize(rows: list[dict[str, Any]], negatives: list[dict[str, Any]]) -> dict[str, Any]:
    shapes = {}
    for shape in ALL_SHAPES:
        sel = [r for r in rows if r["shape"] == shape]
        if not sel:
            continue
        n = len(sel)
        ms = [r["ms"] for r in sel]
        shapes[shape] = {
            "n": n,
            "foundAt1": round(sum(r["rank"] == 1 for r in sel) / n, 3),
            "foundAt10": round(sum(r["rank"] is not None for r in sel) / n, 3),
            "noHits": round(sum(r["hits"] == 0 for r in sel) / n, 3),
            "sessionAt3": round(sum(r["sessionRank"] is not None for r in sel) / n, 3),
            "foundBy": dict(Counter(r["tier"] for r in sel if r["tier"])),
            "p50ms": round(pct(ms, 50), 2),
            "p99ms": round(pct(ms, 99), 2),
            "sessionsP50ms": round(pct([r["sessionMs"] for r in sel], 50), 2),
            "sessionsP99ms": round(pct([r["sessionMs"] for r in sel], 99), 2),
        }
    strong = sum(n.get("tiers", {}).get(t, 0) for n in negatives for t in ("exact", "forms"))
    return {
        "shapes": shapes,
        "negatives": {
            "n": len(negatives),
            "withHits": sum(n["hits"] > 0 for n in negatives),
            "hitsExactOrForms": strong,
            "hitsByTier": dict(sum((Counter(n["tiers"]) for n in negatives), Counter())),
        },
    }


def markdown(report: dict[str, Any], argv: list[str]) -> str:
    c = report["corpus"]
    lines = [
        f"# Recall ({report['engine']}, {c['facts']} facts in {c['projects']} projects, "
        f"background {c['files']} files / {c['bytes'] / 1e6:.0f} MB)",
        "",
        f"`python -m bench.recall {' '.join(argv)}`, main at `{report['commit']}`: each fact asked by its "
        "project's workspace caller over the daemon's socket; found = the fact's event in the top "
        f"{K}. Tiers as labelled by `hit.tier`"
        + ("" if report["tiered"] else " (no tier below exact answered any query: this build has none)")
        + ".",
        "",
        "| shape | queries | found@1 | found@10 | no hits | found by tier | p50 / p99 ms "
        "| its session in the top 3 sessions | p50 / p99 ms by session |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for shape, s in report["summary"]["shapes"].items():
        by = ", ".join(f"{t} {s['foundBy'][t]}" for t in TIERS if t in s["foundBy"]) or "-"
        lines.append(
            f"| {shape} | {s['n']} | {s['foundAt1']:.0%} | {s['foundAt10']:.0%} | {s['noHits']:.0%} | {by} "
            f"| {s['p50ms']} / {s['p99ms']} | {s['sessionAt3']:.0%} | {s['sessionsP50ms']} / {s['sessionsP99ms']} |"
        )
    neg = report["summary"]["negatives"]
    by = ", ".join(f"{t} {n}" for t, n in neg["hitsByTier"].items()) or "none"
    lines += [
        "",
        f"Negatives ({neg['n']} questions about things never said): {neg['withHits']} returned hits "
        f"({by}); hits labelled exact or forms: **{neg['hitsExactOrForms']}** (goal 0).",
        "",
        "Misses (not in the top 10):",
        "",
    ]
    for r in report["rows"]:
        if r["rank"] is None:
            top = f"top hit {r['topTier']}" if r["hits"] else "no hits"
            lines.append(f"- {r['shape']}: `{r['query']}` ({r['cwd'].rsplit('/', 1)[-1]}; {top})")
    return "\n".join(lines) + "\n"


def index_and_ask(background: Path, facts_dir: Path, engine: str, facts: dict[str, Any], records: list) -> dict:
    work = CACHE / f"recall-index-{engine}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    daemon = Daemon(background, work / "index.sqlite3", engine)
    daemon.args += ["--sessions", str(facts_dir)]
    started = daemon.start()
    try:
        with Client(daemon.sock) as client:
            rows = run_facts(client, records)
            negatives = run_negatives(client, facts["negatives"])
    finally:
        daemon.stop()
    return {"rows": rows, "negatives": negatives, "daemon": started}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.recall", description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", choices=("tantivy", "fts5"), default="tantivy")
    ap.add_argument("--bytes", default="20M", help="background corpus size (default 20M)")
    ap.add_argument("--seed", type=int, default=1)
    ns = ap.parse_args(argv)
    args = list(sys.argv[1:] if argv is None else argv)
    facts = load_facts()
    cdir, m = corpus(parse_bytes(ns.bytes), ns.seed, "many-small")
    facts_dir, records = planted(facts)
    add_generated_typos(records, ns.seed)
    res = index_and_ask(cdir / "sessions", facts_dir, ns.engine, facts, records)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    report = {
        "engine": ns.engine,
        "commit": commit.stdout.strip(),
        # Whether any tier below exact answered (a build without tiers labels every hit exact).
        "tiered": any(r["relaxed"] or r.get("tier") not in (None, "exact") for r in [*res["rows"], *res["negatives"]]),
        "corpus": {
            "files": m["fileCount"],
            "bytes": m["totalBytes"],
            "facts": len(records),
            "projects": len({r["cwd"] for r in records}),
        },
        "summary": summarize(res["rows"], res["negatives"]),
        "rows": res["rows"],
        "negatives": res["negatives"],
    }
    OUT.mkdir(parents=True, exist_ok=True)
    name = f"recall-{ns.bytes}-{ns.engine}"
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=2))
    text = markdown(report, args)
    (OUT / f"{name}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
