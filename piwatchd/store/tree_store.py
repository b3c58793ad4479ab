"""Tree state, relationships and file evidence in the index.

`TreeBatch` is driven by the ingestor inside the transaction that inserts a
session's events: `add()` after each inserted batch records the per-entry
facts (tree facts, edges, file evidence), `finish()` brings branch and
selection state up to date. Both the rebuild and the append path use it, so
a reader never sees events without their tree state.

Cost of `finish()` for an append of k entries to a session of n entries:

* fast path, O(k) plus a few indexed lookups: the appended entries form a
  chain hanging off the previous materialized leaf and none of them is a
  compaction, context edit, branch summary, `leaf` pointer or omp `/clear`
  boundary. Then no earlier
  entry changes state; only the k new rows are written.
* otherwise (a new branch, a new root, a compaction, a context edit, a branch
  summary): the skeleton of the session is read (one indexed range scan of
  small columns, O(n)), classified in memory (O(n), `piwatchd.model.tree`), and only
  rows whose state differs are written: the entries between the old and the
  new path, the ones a new compaction summarizes, the target of an edit, the
  segment a branch summary covers. Writes are O(changed), never O(n) unless
  the change itself is that large.

`DbTreeView` is the read side: a `piwatchd.model.tree.TreeView` over the index that
loads single nodes and child lists by indexed lookups, never the session.
"""

from __future__ import annotations

import itertools
import sqlite3
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from ..model.events import BranchState, Header, SelectionState
from ..model.rows import TreeRow
from ..model.tree import Node, classify, make_node, yields_model_message
from .ids import IN_IDS, KEY, id_list, session_key

__all__ = ["TreeBatch", "TreeUpdate", "refresh_states", "load_nodes", "DbTreeView", "materialized_leaf_of"]

# Entries whose append changes earlier entries' states (omp's `/clear` boundary too).
_SLOW_TYPES = frozenset({"compaction", "context_edit", "branch_summary", "leaf", "reset_boundary"})


@dataclass(slots=True)
class TreeUpdate:
    session_id: str
    path: str  # "fast" | "full" | "none"
    rows_read: int = 0
    rows_updated: int = 0
    # Entries whose stored state changed (the text index re-feeds them).
    changed: list[str] = field(default_factory=list)
    # (branch, selection) of every entry of the session as now stored, or of
    # the appended ones on the fast path: the text documents' filter values,
    # known without reading the rows back.
    states: dict[str, tuple[str, str]] = field(default_factory=dict)


T = TypeVar("T")


@dataclass(slots=True)
class _Call:
    entry_id: str
    ordinal: int


@dataclass(slots=True)
class _Rows:
    """One batch's rows, written with one executemany per table."""

    facts: list[tuple[Any, ...]] = field(default_factory=list)
    edges: list[tuple[Any, ...]] = field(default_factory=list)
    files: list[tuple[Any, ...]] = field(default_factory=list)

    def write(self, conn: sqlite3.Connection) -> None:
        if self.facts:
            conn.executemany(
                "INSERT OR REPLACE INTO tree_facts(session_key, entry_id, facts) VALUES (?,?,?)", self.facts
            )
        if self.edges:
            conn.executemany(
                "INSERT INTO relationships(session_key, entry_id, kind, target_entry_id, target_ref, provenance, detail)"
                " VALUES (?,?,?,?,?,?,?)",
                self.edges,
            )
        if self.files:
            conn.executemany(
                "INSERT INTO file_evidence(session_key, entry_id, path, mode, source, provenance, raw_path, tool_name,"
                " call_id) VALUES (?,?,?,?,?,?,?,?,?)",
                self.files,
            )


class TreeBatch:
    """Per-transaction bookkeeping of one source's ingest; see the module doc."""

    def __init__(self, conn: sqlite3.Connection, *, full: bool) -> None:
        self.conn = conn
        self.full = full  # the session's rows were all (re)inserted in this transaction
        self.session_id: str | None = None
        self.key = 0  # the session's integer key (`ids.session_key`), once `add` knows the session
        self.parent_session: str | None = None
        self.entries: list[TreeRow] = []  # this transaction's entries, for the fast path
        self._seen: set[str] = set()
        self._calls: dict[str, list[_Call]] = {}
        # Entries whose file evidence reached MAX_PATHS_PER_EVENT (reported as diagnostics).
        self.capped: list[TreeRow] = []

    def add(self, header: Header | None, entries: list[TreeRow]) -> None:
        if header is None or not entries:
            return
        sid = header.session_id
        if sid != self.session_id:
            key = session_key(self.conn, sid)
            if key is None:
                raise ValueError(f"tree rows of session {sid!r} before its session row")
            self.session_id, self.key = sid, key
        self.parent_session = header.parent_session
        key = self.key
        batch = self._replace_repeated(key, entries)
        rows = _Rows()
        for e in batch:
            self._entry_rows(key, e, rows)
            self._message_calls(key, e, rows)
        rows.write(self.conn)

    def _replace_repeated(self, key: int, entries: list[TreeRow]) -> list[TreeRow]:
        """The batch with one entry per id. The later line of a repeated id wins
        (as in Pi): forget what the earlier one said."""
        last: dict[str, TreeRow] = {}
        for e in entries:
            last[e.entry_id] = e
        batch = list(last.values())
        stale = [e.entry_id for e in batch if e.entry_id in self._seen] if self.full else [e.entry_id for e in batch]
        if stale:
            for table in ("relationships", "file_evidence", "tree_facts"):
                self.conn.execute(
                    f"DELETE FROM {table} WHERE session_key=? AND entry_id {IN_IDS}", (key, id_list(stale))
                )
        self._seen.update(last)
        self.entries.extend(batch)
        return batch

    def _entry_rows(self, key: int, e: TreeRow, rows: _Rows) -> None:
        """One entry's own facts, edges and file evidence."""
        if e.facts:
            rows.facts.append((key, e.entry_id, orjson.dumps(e.facts).decode()))
        rows.edges.extend((key, e.entry_id, *edge) for edge in e.edges)
        if e.capped:
            self.capped.append(e)
        rows.files.extend((key, e.entry_id, *f) for f in e.files)

    def _message_calls(self, key: int, e: TreeRow, rows: _Rows) -> None:
        """Tool calls pair with their results: an assistant message's calls are
        remembered, a tool result is linked to its call (and so shares its file
        evidence: the `event_files` view of store/schema.py)."""
        for call_id in e.calls:
            self._calls.setdefault(call_id, []).append(_Call(e.entry_id, e.ordinal))
        if e.result_of is not None:
            self._link_result(key, e, e.result_of, rows)

    def _link_result(self, key: int, e: TreeRow, call_id: str, rows: _Rows) -> None:
        found = self._find_call(key, call_id, e)
        if found is None:
            return
        call, single = found
        detail = {"toolCallId": call_id, **({} if single else {"chosenAmongCandidates": True})}
        provenance = "recorded" if single else "derived"
        rows.edges.append(
            (key, e.entry_id, "tool-result-for", call.entry_id, None, provenance, orjson.dumps(detail).decode())
        )

    def _find_call(self, key: int, call_id: str, result: TreeRow) -> tuple[_Call, bool] | None:
        candidates = list(self._calls.get(call_id, []))
        if not candidates and not self.full:
            # The call was ingested by an earlier transaction.
            for entry_id, ordinal in self.conn.execute(
                "SELECT e.entry_id, e.ordinal FROM fragments f JOIN events e ON e.event_rowid = f.event_rowid"
                " WHERE f.call_id = ? AND f.kind = 'tool.call' AND e.session_key = ?",
                (call_id, key),
            ):
                candidates.append(_Call(entry_id, ordinal))
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0], True
        # Ids are unique only per provider response: prefer the result's parent,
        # else the latest call written before the result.
        for c in candidates:
            if c.entry_id == result.parent_id:
                return c, False
        earlier = [c for c in candidates if c.ordinal < result.ordinal] or candidates
        return max(earlier, key=lambda c: c.ordinal), False

    def finish(self) -> TreeUpdate | None:
        sid = self.session_id
        if sid is None:
            return None
        self._session_edges(self.key)
        if not self.full:
            fast = _fast_append(self.conn, sid, self.entries)
            if fast is not None:
                return fast
        return refresh_states(self.conn, sid)

    def _session_edges(self, key: int) -> None:
        if not self.parent_session:
            return
        if (
            not self.full
            and self.conn.execute(
                "SELECT 1 FROM relationships WHERE session_key=? AND entry_id IS NULL AND kind='session-parent' LIMIT 1",
                (key,),
            ).fetchone()
        ):
            return
        # Resolved again when read: the parent may be indexed later, or move.
        self.conn.execute(
            "INSERT INTO relationships(session_key, entry_id, kind, target_entry_id, target_ref, provenance, detail)"
            " VALUES (?, NULL, 'session-parent', NULL, ?, 'recorded', NULL)",
            (key, self.parent_session),
        )


def _fast_append(conn: sqlite3.Connection, sid: str, entries: list[TreeRow]) -> TreeUpdate | None:
    """States for a plain continuation of the materialized path, or None."""
    if not entries or any(e.type in _SLOW_TYPES for e in entries):
        return None
    first = entries[0]
    if first.parent_id is None:
        return None
    for prev, e in itertools.pairwise(entries):
        if e.parent_id != prev.entry_id:
            return None
    row = conn.execute(
        f"SELECT branch_state FROM events WHERE session_key={KEY} AND entry_id=?", (sid, first.parent_id)
    ).fetchone()
    if row is None or row[0] != BranchState.SELECTED.value:
        return None
    # A selected entry without a selected child is the previous leaf.
    if conn.execute(
        f"SELECT 1 FROM events WHERE session_key={KEY} AND parent_id=? AND branch_state='selected' LIMIT 1",
        (sid, first.parent_id),
    ).fetchone():
        return None
    ids = [e.entry_id for e in entries]
    # Repeated ids keep their old rows (and states): not a plain continuation.
    if ids:
        n = conn.execute(
            f"SELECT count(*) FROM events WHERE session_key={KEY} AND entry_id {IN_IDS} AND branch_state != 'unknown'",
            (sid, id_list(ids)),
        ).fetchone()[0]
        if n:
            return None
    leaf = conn.execute("SELECT leaf_id FROM sessions WHERE session_id=?", (sid,)).fetchone()
    if leaf is None or leaf[0] != entries[-1].entry_id:
        return None
    rows = []
    for e in entries:
        node = make_node(e.entry_id, e.parent_id, e.type, e.role, e.ordinal, e.facts)
        # Everything after the latest compaction (or with none) is in context;
        # none of these entries is an edit, so none is omitted.
        sel = SelectionState.DIRECT if yields_model_message(node) else SelectionState.NOT_APPLICABLE
        rows.append((BranchState.SELECTED.value, sel.value, sid, e.entry_id))
    conn.executemany(
        f"UPDATE events SET branch_state=?, selection_state=? WHERE session_key={KEY} AND entry_id=?", rows
    )
    states = {r[3]: (r[0], r[1]) for r in rows}
    return TreeUpdate(sid, "fast", rows_read=2, rows_updated=len(rows), states=states)


def load_nodes(conn: sqlite3.Connection, session_id: str) -> tuple[list[Node], dict[str, tuple[str, str]], str | None]:
    """The session skeleton: nodes, stored (branch, selection) per id, last appended id."""
    facts = {
        eid: orjson.loads(f)
        for eid, f in conn.execute(f"SELECT entry_id, facts FROM tree_facts WHERE session_key={KEY}", (session_id,))
    }
    nodes: list[Node] = []
    stored: dict[str, tuple[str, str]] = {}
    for eid, parent, etype, role, ordinal, b, s in conn.execute(
        "SELECT entry_id, parent_id, type, role, ordinal, branch_state, selection_state FROM events"
        f" WHERE session_key={KEY}",
        (session_id,),
    ):
        nodes.append(make_node(eid, parent, etype, role, ordinal, facts.get(eid)))
        stored[eid] = (b, s)
    row = conn.execute("SELECT leaf_id FROM sessions WHERE session_id=?", (session_id,)).fetchone()
    return nodes, stored, row[0] if row else None


def refresh_states(conn: sqlite3.Connection, session_id: str) -> TreeUpdate:
    """Reclassify the whole session; write only rows whose state changed."""
    nodes, stored, last_id = load_nodes(conn, session_id)
    state = classify(nodes, last_id)
    rows = []
    branch, selection = state.branch, state.selection
    for eid, (b, s) in stored.items():
        # str-valued enums compare equal to their stored text; `.value` only for the few that changed
        if branch[eid] != b or selection[eid] != s:
            rows.append((branch[eid].value, selection[eid].value, session_id, eid))
    if rows:
        conn.executemany(
            f"UPDATE events SET branch_state=?, selection_state=? WHERE session_key={KEY} AND entry_id=?", rows
        )
    states = {eid: (branch[eid].value, selection[eid].value) for eid in stored}
    return TreeUpdate(
        session_id, "full", rows_read=len(nodes), rows_updated=len(rows), changed=[r[3] for r in rows], states=states
    )


def materialized_leaf_of(conn: sqlite3.Connection, session_id: str) -> tuple[str | None, bool]:
    """(leaf id, known) from the last appended line, honouring a `leaf` entry."""
    row = conn.execute(
        "SELECT s.leaf_id, e.type, tf.facts FROM sessions s LEFT JOIN events e ON e.session_key = s.session_key"
        " AND e.entry_id = s.leaf_id LEFT JOIN tree_facts tf ON tf.session_key = s.session_key AND tf.entry_id = s.leaf_id"
        " WHERE s.session_id=?",
        (session_id,),
    ).fetchone()
    if row is None or row[0] is None:
        return None, True
    if row[1] != "leaf":
        return row[0], True
    target = orjson.loads(row[2]).get("target_id") if row[2] else None
    if target is None:
        return None, True
    exists = conn.execute(
        f"SELECT 1 FROM events WHERE session_key={KEY} AND entry_id=?", (session_id, target)
    ).fetchone()
    return (target, True) if exists else (None, False)


@dataclass(slots=True)
class DbTreeView:
    """`TreeView` over the index by indexed lookups (node, children)."""

    conn: sqlite3.Connection
    session_id: str
    _nodes: dict[str, Node | None] = field(default_factory=dict)
    _rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    _children: dict[str, list[Node]] = field(default_factory=dict)

    _COLS = (
        "e.entry_id, e.parent_id, e.type, e.role, e.ordinal, e.branch_state, e.selection_state, e.context_role,"
        " e.ts_ms, e.byte_offset, e.byte_len, e.fingerprint, e.is_error, e.tool_names, e.meta, e.id_recorded, tf.facts"
    )
    _FROM = "events e LEFT JOIN tree_facts tf ON tf.session_key = e.session_key AND tf.entry_id = e.entry_id"

    def _remember(self, r: tuple[Any, ...]) -> Node:
        node = make_node(r[0], r[1], r[2], r[3], r[4], orjson.loads(r[16]) if r[16] else None)
        self._nodes[r[0]] = node
        self._rows[r[0]] = {
            "entryId": r[0],
            "parentId": r[1],
            "type": r[2],
            "role": r[3],
            "ordinal": r[4],
            "branchState": r[5],
            "selectionState": r[6],
            "contextRole": r[7],
            "tsMs": r[8],
            "byteOffset": r[9],
            "byteLength": r[10],
            "fingerprint": r[11],
            "isError": bool(r[12]),
            "toolNames": r[13].split(",") if r[13] else [],
            "meta": orjson.loads(r[14]) if r[14] else {},
            "idRecorded": bool(r[15]),
        }
        return node

    def node(self, entry_id: str) -> Node | None:
        if entry_id not in self._nodes:
            r = self.conn.execute(
                f"SELECT {self._COLS} FROM {self._FROM} WHERE e.session_key={KEY} AND e.entry_id=?",
                (self.session_id, entry_id),
            ).fetchone()
            if r is None:
                self._nodes[entry_id] = None
            else:
                self._remember(r)
        return self._nodes[entry_id]

    def row(self, entry_id: str) -> dict[str, Any] | None:
        return self._rows.get(entry_id) if self.node(entry_id) is not None else None

    def prefetch_ancestors(self, entry_id: str, limit: int = 20_000) -> None:
        """Load the whole ancestry in one recursive query: walking up an
        alternate branch one lookup per ancestor cost hundreds of queries."""
        for r in self.conn.execute(
            "WITH RECURSIVE up(id, depth) AS ("
            f" SELECT parent_id, 1 FROM events WHERE session_key={KEY} AND entry_id=?"
            " UNION ALL SELECT e.parent_id, up.depth + 1 FROM up JOIN events e"
            f" ON e.session_key={KEY} AND e.entry_id = up.id WHERE up.id IS NOT NULL AND up.depth < ?)"
            f" SELECT {self._COLS} FROM up JOIN events e ON e.session_key={KEY} AND e.entry_id = up.id"
            " LEFT JOIN tree_facts tf ON tf.session_key = e.session_key AND tf.entry_id = e.entry_id",
            (self.session_id, entry_id, self.session_id, limit, self.session_id),
        ):
            if r[0] not in self._nodes:
                self._remember(r)

    def children(self, entry_id: str) -> list[Node]:
        if entry_id not in self._children:
            self._children[entry_id] = [
                self._remember(r)
                for r in self.conn.execute(
                    f"SELECT {self._COLS} FROM {self._FROM} WHERE e.session_key={KEY} AND e.parent_id=? ORDER BY e.ordinal",
                    (self.session_id, entry_id),
                )
            ]
        return list(self._children[entry_id])

    def is_selected(self, entry_id: str) -> bool | None:
        row = self.row(entry_id)
        if row is None or row["branchState"] == BranchState.UNKNOWN.value:
            return None
        return bool(row["branchState"] == BranchState.SELECTED.value)

    def by_ordinal(self, ordinal: int, before: int, after: int) -> tuple[list[Node], list[Node]]:
        """Append-order neighbours: up to `before` earlier and `after` later entries."""
        prev = [
            self._remember(r)
            for r in self.conn.execute(
                f"SELECT {self._COLS} FROM {self._FROM} WHERE e.session_key={KEY} AND e.ordinal < ?"
                " ORDER BY e.ordinal DESC LIMIT ?",
                (self.session_id, ordinal, before),
            )
        ]
        nxt = [
            self._remember(r)
            for r in self.conn.execute(
                f"SELECT {self._COLS} FROM {self._FROM} WHERE e.session_key={KEY} AND e.ordinal > ? ORDER BY e.ordinal LIMIT ?",
                (self.session_id, ordinal, after),
            )
        ]
        prev.reverse()
        return prev, nxt
