"""Known-item ranking benchmark: `python -m bench.known_item --bytes 1G`.

Picks random conversation messages (user or assistant text) from a corpus
written by the real Pi (bench/ingest.py's cache), queries each by 3 of its
mid-frequency words, and counts a success when the message, or a copy of it
(a fork keeps entry ids), is among the top 10 hits. Reports Recall@1,
Recall@10 and MRR for each text engine on the same queries, for the strict
tier (`exact`: the words as written) and for the default search with its
labelled tiers below exact. The indexes are
the ones bench.search builds (`bench/cache/corpus-*/search-index-<engine>.sqlite3`),
brought up to date (or built) with `piwatch index --once`.

Writes bench/out/known-item-<bytes>-<shape>.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.ingest import BIN, OUT, corpus, parse_bytes
from piwatchd.store.schema import open_reader
from piwatchd.text.query import SearchRequest
from piwatchd.text.search import search
from piwatchd.text.tantivy.index import TantivyText, text_dir

_WORD = re.compile(r"[A-Za-z]{4,}")
ENGINES = ("tantivy", "fts5")


def messages(files: list[dict], n: int, rng: random.Random) -> list[dict]:
    """Random user/assistant text messages with at least 12 distinct words."""
    out: list[dict] = []
    while len(out) < n:
        f = rng.choice(files)
        lines = Path(f["path"]).read_bytes().splitlines()
        header = json.loads(lines[0])
        for line in rng.sample(lines[1:], min(20, len(lines) - 1)):
            entry = json.loads(line)
            msg = entry.get("message") or {}
            if entry.get("type") != "message" or msg.get("role") not in ("user", "assistant"):
                continue
            content = msg.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            text = " ".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
            words = sorted({w.lower() for w in _WORD.findall(text)})
            if len(words) >= 12:
                out.append({"sessionId": header["id"], "entryId": entry["id"], "words": words})
                break
    return out


def pick_query(words: list[str], df, total: int, rng: random.Random) -> str | None:
    """3 words of middling document frequency (0.01% to 1% of fragments)."""
    mid = [w for w in words if total * 0.0001 <= df(w) <= total * 0.01]
    if len(mid) < 3:
        return None
    return " ".join(rng.sample(mid, 3))


def ensure_index(cdir: Path, engine: str) -> Path:
    """The corpus's index for `engine`, brought up to date by `piwatch index
    --once` (cheap when nothing changed; it rebuilds what an older schema or
    text-index layout built)."""
    db = cdir / f"search-index-{engine}.sqlite3"
    env = {**os.environ, "PIWATCH_ENGINE": engine}
    subprocess.run(
        [str(BIN / "piwatch"), "index", "--once", "--sessions", str(cdir / "sessions"), "--db", str(db)],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    return db


def evaluate(db: Path, queries: list[dict], exact: bool = True) -> dict:
    """Ranking of the strict tier (`exact`: the words as written, all of
    them), or of the default search with its labelled tiers below exact."""
    conn = open_reader(db)
    r1 = r10 = 0
    mrr = 0.0
    t0 = time.perf_counter()
    for q in queries:
        hits = search(conn, SearchRequest(q["query"], limit=10, exact=exact)).hits
        for rank, h in enumerate(hits, 1):
            if h.entry_id == q["entryId"]:  # the message or a fork's copy of it
                r1 += rank == 1
                r10 += 1
                mrr += 1 / rank
                break
    conn.close()
    n = len(queries)
    return {
        "n": n,
        "recallAt1": round(r1 / n, 3),
        "recallAt10": round(r10 / n, 3),
        "mrr": round(mrr / n, 3),
        "secondsTotal": round(time.perf_counter() - t0, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.known_item", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", default="1G")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shape", choices=("few-large", "many-small"), default="many-small")
    ap.add_argument("--n", type=int, default=300, help="messages to look for (default 300)")
    ns = ap.parse_args(argv)
    cdir, m = corpus(parse_bytes(ns.bytes), ns.seed, ns.shape)
    dbs = {e: ensure_index(cdir, e) for e in ENGINES}
    text = TantivyText(text_dir(dbs["tantivy"]), writable=False)
    searcher = text.index.searcher()
    total = searcher.num_docs
    rng = random.Random(ns.seed)
    queries = []
    for msg in messages(m["files"], ns.n * 3, rng):
        query = pick_query(msg["words"], lambda w: searcher.doc_freq("text", w), total, rng)
        if query:
            queries.append({**msg, "query": query})
        if len(queries) == ns.n:
            break
    report = {
        "corpus": {"files": len(m["files"]), "bytes": m["totalBytes"], "shape": ns.shape},
        "engines": {e: evaluate(db, queries) for e, db in dbs.items()},
        "defaultTiers": {e: evaluate(db, queries, exact=False) for e, db in dbs.items()},
        "sample": [q["query"] for q in queries[:10]],
    }
    lines = [
        f"# Known-item ranking ({report['corpus']['files']} files, {m['totalBytes'] / 1e6:.0f} MB, {ns.shape})",
        "",
        f"`python -m bench.known_item {' '.join(argv or sys.argv[1:])}`: {len(queries)} random user/assistant "
        "messages, each queried by 3 of its words with document frequency 0.01-1%; success = the message "
        "(or a fork's copy) in the top 10; the strict tier (`exact`) and the default search with its tiers.",
        "",
        "| engine | search | Recall@1 | Recall@10 | MRR | queries | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode, label in (("engines", "strict tier (exact)"), ("defaultTiers", "default (with tiers)")):
        for e, r in report[mode].items():
            lines.append(
                f"| {e} | {label} | {r['recallAt1']} | {r['recallAt10']} | {r['mrr']} | {r['n']} | {r['secondsTotal']} |"
            )
    lines += ["", "Sample queries: " + ", ".join(f"`{q}`" for q in report["sample"]), ""]
    OUT.mkdir(parents=True, exist_ok=True)
    name = f"known-item-{ns.bytes}-{ns.shape}"
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=2))
    (OUT / f"{name}.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
