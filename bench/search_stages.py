"""A query's CPU by stage, in-process: `python -m bench.search_stages --bytes 1G --query TEXT`.

Runs one query `--times` times on `bench.search`'s cached index with the
per-query caches emptied before each (a new question, as `bench.search_cpu
--caches cold`), and reports the calling thread's CPU in each stage of
`piwatchd.text.tantivy.search.TierSearch` (each tier's search, the
repairs' and weights' dictionary lookups, the page's evidence, labels and
snippets), with how many Tantivy searches each ran. What `bench.search_cpu
--profile` shows without cProfile's overhead, which inflates Python's
share several times over.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from bench.ingest import corpus, parse_bytes
from bench.search_cpu import ALL, Client, LocalTransport, TantivyText, drop_caches, register_text, text_dir
from piwatchd.text.tantivy import search, snippets, words
from piwatchd.text.tantivy.index import TantivyText as _Text

_cpu: dict[str, float] = defaultdict(float)
_searches: dict[str, int] = defaultdict(int)
_stack: list[str] = []


def _timed(owner: Any, name: str, stage: str | Callable[..., str]) -> None:
    """Wrap owner.name so its CPU (less its timed callees') counts for
    `stage` (or the stage it names from the call's arguments)."""
    inner: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        named = stage if isinstance(stage, str) else stage(*args, **kwargs)
        _stack.append(named)
        started = time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent = time.thread_time() - started
            _stack.pop()
            _cpu[named] += spent
            if _stack:
                _cpu[_stack[-1]] -= spent

    setattr(owner, name, wrapper)


def _count_searches() -> None:
    top = _Text.top

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        _searches[_stack[-1] if _stack else "?"] += 1
        return top(self, *args, **kwargs)

    _Text.top = counted  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", default="1G")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--query", required=True)
    ap.add_argument("--times", type=int, default=30)
    ns = ap.parse_args(argv)
    cdir, _ = corpus(parse_bytes(ns.bytes), ns.seed, "many-small")
    db = cdir / "search-index-tantivy.sqlite3"
    text = TantivyText(text_dir(db), writable=False)
    register_text(text)
    client = Client(transport=LocalTransport(db), caller=ALL)
    T = search.TierSearch
    _timed(T, "_run", lambda _self, tier: f"{tier.name} tier")
    for name in ("_add_spread", "page", "_lay_out", "_matched_counts"):
        _timed(T, name, name.strip("_"))
    _timed(search, "repairs", "repairs")
    _timed(search, "word_weights", "weights")
    _timed(search, "can_match", "can_match")
    _timed(search, "partial_word_query", "partial queries")
    _timed(search, "evidence_rows", "evidence (re-projection)")
    _timed(search, "evidence_snippet", "snippets")
    _timed(search, "matched_masks", "labels (masks)")
    _timed(words, "_fragment_masks", "labels (masks)")
    _timed(search, "ranked_page", "tiers, other")
    _count_searches()
    totals = []
    client.search(ns.query, limit=20)  # warm the process, not the caches
    _cpu.clear()
    _searches.clear()
    for _ in range(ns.times):
        drop_caches(text)
        started = time.thread_time()
        client.search(ns.query, limit=20)
        totals.append((time.thread_time() - started) * 1000)
    print(f"query {ns.query!r}: cpu p50 {statistics.median(totals):.2f} ms, mean {statistics.fmean(totals):.2f} ms")
    accounted = sum(_cpu.values())
    for stage, spent in sorted(_cpu.items(), key=lambda kv: -kv[1]):
        print(f"  {stage:28} {spent / ns.times * 1000:7.2f} ms  searches {_searches.get(stage, 0) / ns.times:.1f}")
    print(f"  {'outside ranked_page':28} {statistics.fmean(totals) - accounted / ns.times * 1000:7.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
