"""The redaction rules an index was built with, and its redaction counts.

The rules in force are stored in the index (`index_meta`), so every reader,
the daemon's and the daemon-less CLI's alike, redacts reads with exactly the
rules that redacted the indexed text. A different fingerprint (built-in rules
version or `[redact]` config) makes `ensure_schema` rebuild the index: it is
disposable, and text indexed under the old rules may hold what the new ones
remove. Counts are kept per session (one session per source file), by kind,
never with values.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping

import orjson

from ..model.redact import DEFAULT_RULES, Rules, rules_from_config

__all__ = ["add_counts", "index_rules", "record_rules", "redaction_totals", "stored_fingerprint"]

_KEY = "redact_rules"
_CACHE: dict[str, Rules] = {}


def stored_fingerprint(conn: sqlite3.Connection) -> str | None:
    try:
        row = conn.execute("SELECT value FROM index_meta WHERE key=?", (_KEY,)).fetchone()
    except sqlite3.OperationalError:  # no such table: an index from before redaction
        return None
    return orjson.loads(row[0])["fingerprint"] if row else None


def record_rules(conn: sqlite3.Connection, rules: Rules) -> None:
    doc = {
        "fingerprint": rules.fingerprint,
        "builtin": rules.builtin,
        "allow": sorted(rules.allow),
        "patterns": [{"name": n, "regex": r} for n, r in rules.extra],
    }
    conn.execute("INSERT OR REPLACE INTO index_meta(key, value) VALUES (?, ?)", (_KEY, orjson.dumps(doc).decode()))


def index_rules(conn: sqlite3.Connection) -> Rules:
    """The rules this index was built with (built-ins when none are recorded)."""
    try:
        row = conn.execute("SELECT value FROM index_meta WHERE key=?", (_KEY,)).fetchone()
    except sqlite3.OperationalError:
        return DEFAULT_RULES
    if row is None:
        return DEFAULT_RULES
    doc = orjson.loads(row[0])
    rules = _CACHE.get(doc["fingerprint"])
    if rules is None:
        rules = rules_from_config({"allow": doc["allow"], "patterns": doc["patterns"]})
        if doc.get("builtin") is False:  # built without the built-in rules (the bench's baseline)
            rules = Rules((), extra=rules.extra, allow=rules.allow)
        _CACHE[doc["fingerprint"]] = rules
    return rules


def add_counts(conn: sqlite3.Connection, session_id: str, counts: Mapping[str, int]) -> None:
    """Add one batch's redaction counts to the session's tally (in the caller's transaction)."""
    if not counts:
        return
    row = conn.execute("SELECT redactions FROM sessions WHERE session_id=?", (session_id,)).fetchone()
    total = orjson.loads(row[0]) if row and row[0] else {}
    for kind, n in counts.items():
        total[kind] = total.get(kind, 0) + n
    conn.execute(
        "UPDATE sessions SET redactions=? WHERE session_id=?",
        (orjson.dumps(total, option=orjson.OPT_SORT_KEYS).decode(), session_id),
    )


def redaction_totals(conn: sqlite3.Connection, where: str = "1", params: Iterable[object] = ()) -> dict[str, int]:
    """Redactions by kind over the sessions `s` that `where` selects (default: all)."""
    total: dict[str, int] = {}
    for (value,) in conn.execute(
        f"SELECT s.redactions FROM sessions s WHERE s.redactions IS NOT NULL AND ({where})", list(params)
    ):
        for kind, n in orjson.loads(value).items():
            total[kind] = total.get(kind, 0) + n
    return dict(sorted(total.items()))
