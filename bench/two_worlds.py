"""Two worlds that differ only in other projects' words: `python -m bench.two_worlds --bytes 200M`.

World A is bench/ingest.py's corpus; world B is the same corpus with every
word of the other projects' sessions rot13'd: the same sessions, events,
fragments and word counts, but none of the caller's words among theirs (an
upper bound on how much other projects' statistics can differ). A workspace
caller of the largest project asks both worlds the same queries, built from
its own sessions (phrases, their words, misspelt words, questions, word
forms), in-process on the daemon's one request path (`LocalTransport`).

Reported per query class: how many answers differ in their hits (as a set),
their top-10 order, the tier and matched/missing labels of an event both
hold, repairs, word counts and scores; and the search CPU (thread time) per query in each world.
With piwatch's scoped statistics only the order may differ: BM25 inside a
tier weighs words by the whole index's frequencies (docs/concepts.md, "Who
may see what"). Writes bench/out/two-worlds-<bytes>-<engine>.json and .md.
"""

from __future__ import annotations

import argparse
import codecs
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from piwatch.client import Client, PiwatchError
from piwatch.transports import LocalTransport

from bench.ingest import BIN, OUT, corpus, parse_bytes, pct
from bench.search import (
    COMMON_WORDS,
    _typo,
    corpus_identifiers,
    corpus_phrases,
    forms_queries,
    q,
    relaxed_queries,
    revision,
)
from piwatchd.text.tantivy.index import TantivyText, text_dir
from piwatchd.text.tantivy.readers import register_text

# Fields of a message that name things rather than say them: kept in world B.
KEEP = {"role", "type", "id", "toolCallId", "toolName", "name", "model", "provider", "api", "stopReason"}


def _rot(value: Any, key: str = "") -> Any:
    if key in KEEP:
        return value
    if isinstance(value, str):
        return codecs.encode(value, "rot13")
    if isinstance(value, list):
        return [_rot(v) for v in value]
    if isinstance(value, dict):
        return {k: _rot(v, k) for k, v in value.items()}
    return value


def other_words(line: bytes) -> bytes:
    """One session line with its text's words rot13'd (ids, types, names kept)."""
    if not line.strip():
        return line
    entry = json.loads(line)
    if entry.get("type") == "message" and isinstance(entry.get("message"), dict):
        entry["message"] = _rot(entry["message"])
    elif entry.get("type") in ("compaction", "branch_summary") and isinstance(entry.get("summary"), str):
        entry["summary"] = _rot(entry["summary"])
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()


def world_b(cdir: Path, m: dict, cwd: str) -> Path:
    """The corpus with the other projects' words rot13'd (built once)."""
    out = cdir / "two-worlds" / "b-sessions"
    done = out.parent / "b-sessions.done"
    if done.exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    for f in m["files"]:
        src = Path(f["path"])
        dest = out / src.relative_to(cdir / "sessions")
        dest.parent.mkdir(parents=True, exist_ok=True)
        data = src.read_bytes()
        if f["cwd"] != cwd:
            data = b"\n".join(other_words(line) for line in data.split(b"\n"))
        dest.write_bytes(data)
    done.touch()
    return out


def indexed(sessions: Path, db: Path, engine: str) -> Path:
    """`piwatch index --once` of a world (kept while its index file exists)."""
    if not db.exists():
        env = {**os.environ, "PIWATCH_ENGINE": engine}
        cmd = [str(BIN / "piwatch"), "index", "--once", "--sessions", str(sessions), "--db", str(db), "--quiet"]
        subprocess.run(cmd, check=True, env=env, timeout=4 * 3600)
    return db


def build_queries(files: list[dict], paths: list[str], cwd: str, n: int, rng: random.Random) -> dict[str, list]:
    """Queries from the caller's own sessions, as a workspace caller asks them."""
    phrases = corpus_phrases(files, n, rng)
    caller = {"cwd": cwd}
    long = [w for p in phrases for w in p.split() if len(w) >= 5 and w.isalpha()][:n]
    classes = {
        "phrase": [q("phrase", f'"{p}"', paths) for p in phrases],
        "words": [q("words", p, paths) for p in phrases],
        "common word": [q("common word", COMMON_WORDS[i % len(COMMON_WORDS)], paths) for i in range(n)],
        "misspelt word": [q("misspelt word", _typo(w, rng), paths) for w in long],
        **relaxed_queries(phrases, paths, rng),
        **forms_queries(phrases, corpus_identifiers(files, n, rng), paths),
    }
    return {k: [{**x, "caller": caller} for x in v] for k, v in classes.items()}


def answer(client: Client, x: dict) -> tuple[dict, float]:
    c = time.thread_time()
    try:
        r = client.search(x["query"], caller=x["caller"], limit=20)
    except PiwatchError as exc:
        return {"error": exc.code}, time.thread_time() - c
    spent = time.thread_time() - c
    hits = [(h.session_id, h.entry_id) for h in r.hits]
    return {
        "set": sorted(hits),
        "order": hits[:10],
        "labels": {f"{h.session_id}/{h.entry_id}": (h.tier, h.matched, h.missing) for h in r.hits},
        "repairs": [(p.word, p.replacement) for p in r.repairs],
        "words": [(w.word, w.events, w.more) for w in r.words or []],
        "scores": [h.score for h in r.hits],
    }, spent


ASPECTS = ("set", "order", "labels", "repairs", "words", "scores")


def _differs(aspect: str, a: dict, b: dict) -> bool:
    """Whether two answers differ in `aspect`; labels are compared for the
    events both hold (a page of other events is the order's doing)."""
    if aspect != "labels":
        return a.get(aspect) != b.get(aspect)
    la, lb = a.get("labels") or {}, b.get("labels") or {}
    return any(la[k] != lb[k] for k in la.keys() & lb.keys())


def compare(clients: dict[str, Client], queries: dict[str, list]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for name, qs in queries.items():
        differ = dict.fromkeys(ASPECTS, 0)
        cpu: dict[str, list[float]] = {"a": [], "b": []}
        examples = []
        for x in qs:
            (a, ta), (b, tb) = answer(clients["a"], x), answer(clients["b"], x)
            cpu["a"].append(ta)
            cpu["b"].append(tb)
            for aspect in ASPECTS:
                differ[aspect] += _differs(aspect, a, b)
            if a != b and len(examples) < 3:
                examples.append({"query": x["query"], "a": a, "b": b})
        report[name] = {
            "n": len(qs),
            "differ": differ,
            "cpuP50msA": round(pct(cpu["a"], 50) * 1000, 2),
            "cpuP50msB": round(pct(cpu["b"], 50) * 1000, 2),
            "examples": examples,
        }
    return report


def markdown(r: dict, command: str) -> str:
    lines = [
        f"# Two worlds, {r['bytes']} ({r['engine']}), caller {r['caller']}",
        "",
        f"`{command}` at {r['revision']}. World B: the other projects' words rot13'd. Queries answered"
        " differently (of n): by hit set, top-10 order, tier and labels of an event both hold, repairs,"
        " word counts, scores;"
        " search CPU p50 (ms) in each world.",
        "",
        "| class | n | set | order | labels | repairs | words | scores | cpu A | cpu B |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in r["classes"].items():
        d = s["differ"]
        row = [name, s["n"], *(d[a] for a in ASPECTS), s["cpuP50msA"], s["cpuP50msB"]]
        lines.append("| " + " | ".join(str(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.two_worlds", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", default="200M")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shape", default="many-small")
    ap.add_argument("--engine", default="tantivy", choices=("tantivy", "fts5"))
    ap.add_argument("--per-class", type=int, default=100)
    ns = ap.parse_args(argv)
    cdir, m = corpus(parse_bytes(ns.bytes), ns.seed, ns.shape)
    cwd = max(m["cwds"], key=lambda c: sum(f["bytes"] for f in m["files"] if f["cwd"] == c))
    worlds = {"a": cdir / "sessions", "b": world_b(cdir, m, cwd)}
    clients = {}
    for name, sessions in worlds.items():
        db = indexed(sessions, cdir / "two-worlds" / f"{name}-{ns.engine}.sqlite3", ns.engine)
        if ns.engine == "tantivy":
            register_text(TantivyText(text_dir(db), writable=False))  # shared, as in the daemon
        clients[name] = Client(transport=LocalTransport(db), caller={"all": True})
    files = [f for f in m["files"] if f["cwd"] == cwd]
    paths = sorted({str(Path(f["path"]).parent) for f in files})
    queries = build_queries(files, paths, cwd, ns.per_class, random.Random(ns.seed))
    report = {
        "bytes": ns.bytes,
        "engine": ns.engine,
        "caller": cwd,
        "revision": revision(),
        "classes": compare(clients, queries),
    }
    stem = f"two-worlds-{ns.bytes}-{ns.engine}"
    (OUT / f"{stem}.json").write_text(json.dumps(report, indent=1))
    md = markdown(report, "python -m bench.two_worlds " + " ".join(argv if argv is not None else sys.argv[1:]))
    (OUT / f"{stem}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
