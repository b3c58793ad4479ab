"""What one Tantivy search costs through tantivy-py, by how many documents
hold the word and how many are asked for: `python -m bench.topk --bytes 1G`.

On `bench.search`'s cached index (build it with `python -m bench.search
--bytes 1G --index-only`), the `text` field's term query for each common
word of the query classes and for some rare ones, best of `--repeat` runs
each, for limit 1, 64 and 4096. Tantivy skips blocks of postings that cannot
reach the top k (block-max WAND) only when its own top-docs collector runs
alone; tantivy-py's `Searcher.search` always wraps that collector in a
multi-collector (with `count=False` too), so every posting of the word is
scored whatever the limit: a top-1 costs what a top-64 does, and the cost
grows with the word's document frequency. That is the floor of a common
word's search here, below everything piwatch does with the hits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import tantivy

from bench.ingest import corpus, parse_bytes
from bench.search import COMMON_WORDS
from piwatchd.text.tantivy.index import TantivyText, text_dir

LIMITS = (1, 64, 4096)


def best_ms(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(min(times) * 1000, 3)


def measure(text: TantivyText, words: list[str], repeat: int) -> list[dict]:
    searcher = text.index.searcher()
    rows = []
    for word in words:
        query = tantivy.Query.term_query(text.schema, "text", word)
        row: dict = {"word": word, "docFreq": searcher.doc_freq("text", word)}
        for k in LIMITS:
            row[f"top{k}Ms"] = best_ms(lambda k=k, q=query: searcher.search(q, limit=k, count=False), repeat)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.topk", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", default="1G")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shape", default="many-small")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="also write the figures to this file")
    ns = ap.parse_args(argv)
    cdir, m = corpus(parse_bytes(ns.bytes), ns.seed, ns.shape)
    db = cdir / "search-index-tantivy.sqlite3"
    if not db.exists():
        print(f"no index at {db}: run python -m bench.search --bytes {ns.bytes} --index-only", file=sys.stderr)
        return 2
    text = TantivyText(text_dir(db), writable=False)
    rare = [x["token"].lower() for x in m["needles"][:5]]
    rows = measure(text, [*COMMON_WORDS, *rare], ns.repeat)
    print(f"{text.index.searcher().num_docs:,} documents; best of {ns.repeat} ms")
    print(f"{'word':24} {'doc freq':>9} " + " ".join(f"{'top ' + str(k):>9}" for k in LIMITS))
    for r in rows:
        print(f"{r['word']:24} {r['docFreq']:>9} " + " ".join(f"{r[f'top{k}Ms']:>9}" for k in LIMITS))
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
