"""Where an index's bytes are: `python -m bench.disk INDEX.sqlite3 [SESSIONS_DIR]`.

Prints every SQLite table and index (pages from the `dbstat` virtual table,
so unused space inside pages counts: it is on disk) and the Tantivy text
index by file kind (`.idx` postings, `.pos` positions, `.term` term
dictionaries, `.fieldnorm`, `.fast` fast fields, `.store` the document store),
each also as a ratio of the session files when SESSIONS_DIR is given (every
`*.jsonl` under it). The index is opened read-only.
"""

from __future__ import annotations

import argparse
import sqlite3
from collections import Counter
from pathlib import Path


def sqlite_parts(db: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(f"file:{db.resolve()}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    finally:
        conn.close()
    return [(str(name), int(size)) for name, size in rows]


def text_parts(db: Path) -> list[tuple[str, int]]:
    sizes: Counter[str] = Counter()
    for f in Path(str(db) + ".tantivy").glob("*"):
        if f.is_file():
            sizes["." + f.name.rsplit(".", 1)[-1] if "." in f.name else f.name] += f.stat().st_size
    return sizes.most_common()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.disk", description=__doc__.split("\n\n")[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("sessions", type=Path, nargs="?")
    ns = ap.parse_args(argv)
    corpus = sum(f.stat().st_size for f in ns.sessions.rglob("*.jsonl")) if ns.sessions else 0

    def line(name: str, size: int) -> str:
        ratio = f"  {size / corpus:.4f}x" if corpus else ""
        return f"  {name:34} {size / 1e6:9.2f} MB{ratio}"

    totals = {}
    for title, parts in (("SQLite", sqlite_parts(ns.db)), ("text index", text_parts(ns.db))):
        totals[title] = sum(size for _, size in parts)
        print(title)
        for name, size in parts:
            if size >= 10_000:
                print(line(name, size))
        print(line("= " + title, totals[title]))
    print(line("= everything", sum(totals.values())))
    if corpus:
        print(f"session files: {corpus / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
