"""Tree semantics of one session (pure): materialized leaf, branch and
selection state, branch-order neighbours and the local trace.

Selection state mirrors Pi 1.6.0's own `buildSessionProjection(entries,
leafId)` for the materialized leaf, followed by `convertToLlm`:

* the selected path is the walk from the leaf through `parentId` to a root
  (an unknown parent ends the walk, as in Pi: that entry acts as a root);
* with a compaction on the path, only the LATEST one counts: path entries from
  its `firstKeptEntryId` up to it (minus system messages) are kept, earlier
  ones are summarized; a `firstKeptEntryId` not on the path before the
  compaction (retain-none stores the compaction's own id) keeps nothing;
* an older compaction inside the kept range is listed by Pi but contributes
  nothing: it is `summarized` (its summary is superseded by the newer one);
* among the kept entries, the latest `context_edit` per target wins; a null
  replacement removes the target (`omitted`), a non-null one still sends it;
* an entry reaches the model only if Pi turns it into a message that
  `convertToLlm` keeps: `direct`. Entries that never become model messages
  (labels, model/thinking changes, custom state, usage, context edits,
  `!!` bash runs, empty branch summaries, unknown roles) are `not-applicable`
  wherever they are.

Beyond Pi (which only answers "direct or not"): entries of an abandoned branch
that a `branch_summary` on the selected path summarized (from its `fromId`
back to the common ancestor, as Pi collects them) are `summarized`;
`unknown` is used when the leaf cannot be resolved (a `leaf` entry naming an
absent id, a parent cycle) and before a compaction that records no kept
boundary at all (forks store `retainedTail` instead).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..source.parser import v1_entry_id
from .events import BranchState, SelectionState

__all__ = [
    "Node",
    "node_facts",
    "make_node",
    "yields_model_message",
    "TreeState",
    "materialized_leaf",
    "selected_path",
    "classify",
    "TreeView",
    "Tree",
    "BranchAfter",
    "branch_before",
    "branch_after",
    "append_neighbours",
    "LocalTrace",
    "local_trace",
    "abandoned_segment",
]

# Roles Pi keeps in the model context (`convertToLlm`). `hookMessage` is the
# v2 name of `custom`; Pi renames it when it loads a v2 file.
_LLM_ROLES = frozenset(
    {
        "system",
        "user",
        "assistant",
        "toolResult",
        "custom",
        "hookMessage",
        "bashExecution",
        "branchSummary",
        "compactionSummary",
    }
)


@dataclass(frozen=True, slots=True)
class Node:
    """What the tree needs to know about one entry."""

    entry_id: str
    parent_id: str | None
    type: str
    role: str | None = None
    ordinal: int = 0
    first_kept: str | None = None  # compaction: where the kept context starts
    kept_unknown: bool = False  # compaction recording no usable kept boundary
    target_id: str | None = None  # context_edit / label / leaf
    from_id: str | None = None  # branch_summary: the old leaf
    omits: bool = False  # context_edit with replacement null
    silent: bool = False  # would be a message, but Pi sends nothing (`!!` bash, empty summary)


def node_facts(entry_type: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """The tree facts of a raw entry that its type and role do not imply.

    Small and usually empty, so the store keeps a row only for entries that
    have some. Keys mirror `Node` fields.
    """
    facts: dict[str, Any] = {}
    if entry_type == "compaction":
        kept = data.get("firstKeptEntryId")
        if isinstance(kept, str) and kept:
            facts["first_kept"] = kept
        elif isinstance(data.get("firstKeptEntryIndex"), int) and not isinstance(data.get("firstKeptEntryIndex"), bool):
            facts["first_kept"] = v1_entry_id(data["firstKeptEntryIndex"])
        else:
            facts["kept_unknown"] = True
    elif entry_type == "branch_summary":
        if isinstance(data.get("fromId"), str):
            facts["from_id"] = data["fromId"]
        if not data.get("summary"):  # Pi: `entry.summary` falsy -> no message
            facts["silent"] = True
    elif entry_type in ("context_edit", "label", "leaf"):
        target = data.get("targetId")
        facts["target_id"] = target if isinstance(target, str) else None
        if entry_type == "context_edit" and data.get("replacement") is None:
            facts["omits"] = True
    elif entry_type == "message":
        msg = data.get("message")
        if isinstance(msg, dict) and msg.get("role") == "bashExecution" and msg.get("excludeFromContext"):
            facts["silent"] = True
    return facts


def make_node(
    entry_id: str,
    parent_id: str | None,
    entry_type: str,
    role: str | None,
    ordinal: int,
    facts: Mapping[str, Any] | None = None,
) -> Node:
    facts = facts or {}
    return Node(
        entry_id,
        parent_id if parent_id != entry_id else None,  # Pi's tree builder treats a self-parent as a root
        entry_type,
        role,
        ordinal,
        first_kept=facts.get("first_kept"),
        kept_unknown=bool(facts.get("kept_unknown")),
        target_id=facts.get("target_id"),
        from_id=facts.get("from_id"),
        omits=bool(facts.get("omits")),
        silent=bool(facts.get("silent")),
    )


def yields_model_message(node: Node) -> bool:
    """Would Pi send this entry to the model if it were in the context?"""
    if node.silent:
        return False
    if node.type == "message":
        return node.role in _LLM_ROLES
    return node.type in ("custom_message", "branch_summary", "compaction")


@dataclass(frozen=True, slots=True)
class TreeState:
    leaf_id: str | None
    path: tuple[str, ...]  # root -> materialized leaf
    branch: dict[str, BranchState]
    selection: dict[str, SelectionState]
    latest_compaction: str | None = None


def materialized_leaf(by_id: Mapping[str, Node], last_id: str | None) -> tuple[str | None, bool]:
    """(leaf id, known). The last appended entry, or what a `leaf` entry names."""
    if last_id is None:
        return None, True
    last = by_id.get(last_id)
    if last is None:
        return None, False
    if last.type != "leaf":
        return last_id, True
    if last.target_id is None:
        return None, True  # an explicit reset before the first entry: nothing selected
    if last.target_id in by_id:
        return last.target_id, True
    return None, False


def selected_path(by_id: Mapping[str, Node], leaf_id: str | None) -> tuple[list[str], bool]:
    """Root-first path to `leaf_id` and whether it is sound (no parent cycle)."""
    path: list[str] = []
    seen: set[str] = set()
    current = leaf_id
    while current is not None:
        node = by_id.get(current)
        if node is None:
            break  # unknown parent: Pi ends the walk here too
        if current in seen:
            return [], False  # Pi would loop forever; nothing can be said
        seen.add(current)
        path.append(current)
        current = node.parent_id
    path.reverse()
    return path, True


def abandoned_segment(by_id: Mapping[str, Node], from_id: str | None, target_id: str | None) -> list[str]:
    """What Pi's `collectEntriesForBranchSummary(oldLeaf, target)` collects:
    from the old leaf back to (excluding) the deepest common ancestor."""
    if not from_id or from_id not in by_id:
        return []
    target_path, ok = selected_path(by_id, target_id) if target_id else ([], True)
    on_target = set(target_path) if ok else set()
    out: list[str] = []
    seen: set[str] = set()
    current: str | None = from_id
    while current is not None and current not in on_target and current not in seen:
        node = by_id.get(current)
        if node is None:
            break
        seen.add(current)
        out.append(current)
        current = node.parent_id
    return out


def classify(nodes: Iterable[Node], last_id: str | None = None) -> TreeState:
    """Branch and selection state of every node for the materialized leaf.

    `last_id` is the id of the last appended line (default: the node with the
    highest ordinal). Pure and O(n).
    """
    by_id: dict[str, Node] = {}
    for n in nodes:
        by_id[n.entry_id] = n
    if last_id is None and by_id:
        last_id = max(by_id.values(), key=lambda n: n.ordinal).entry_id
    leaf_id, known = materialized_leaf(by_id, last_id)
    path: list[str] = []
    if known:
        path, known = selected_path(by_id, leaf_id)
    if not known:
        return _unknown_state(by_id)
    branch: dict[str, BranchState] = {}
    selection: dict[str, SelectionState] = {}
    on_path = set(path)
    for eid, n in by_id.items():
        branch[eid] = BranchState.SELECTED if eid in on_path else BranchState.ALTERNATE
        selection[eid] = SelectionState.NOT_SELECTED if yields_model_message(n) else SelectionState.NOT_APPLICABLE
    context, comp_idx = _context_range(by_id, path, selection)
    _mark_context(by_id, context, selection)
    _mark_summarized_branches(by_id, path, on_path, selection)
    return TreeState(leaf_id, tuple(path), branch, selection, path[comp_idx] if comp_idx is not None else None)


def _unknown_state(by_id: Mapping[str, Node]) -> TreeState:
    """The leaf or its path cannot be known: every state is unknown."""
    branch: dict[str, BranchState] = {}
    selection: dict[str, SelectionState] = {}
    for eid, n in by_id.items():
        branch[eid] = BranchState.UNKNOWN
        selection[eid] = SelectionState.UNKNOWN if yields_model_message(n) else SelectionState.NOT_APPLICABLE
    return TreeState(None, (), branch, selection)


def _context_range(
    by_id: Mapping[str, Node], path: list[str], selection: dict[str, SelectionState]
) -> tuple[list[str], int | None]:
    """The context range of the selected path (Pi's buildContextEntries) and the
    index of its last compaction; marks what that compaction summarized.

    oh-my-pi's `/clear` (a `reset_boundary` entry) starts the context after it
    when it is the later of the two (omp's `buildSessionContext`): what lies
    before, the compaction too, is omitted (on the path, never sent, not
    summarized); an earlier one is superseded by the compaction."""
    comp_idx = reset_idx = None
    for i, eid in enumerate(path):
        if by_id[eid].type == "compaction":
            comp_idx = i
        elif by_id[eid].type == "reset_boundary":
            reset_idx = i
    if reset_idx is not None and (comp_idx is None or reset_idx > comp_idx):
        for eid in path[:reset_idx]:
            if yields_model_message(by_id[eid]):
                selection[eid] = SelectionState.OMITTED
        return path[reset_idx + 1 :], None
    if comp_idx is None:
        return path, None
    comp = by_id[path[comp_idx]]
    before_state = SelectionState.UNKNOWN if comp.kept_unknown else SelectionState.SUMMARIZED
    kept_from = comp_idx
    if not comp.kept_unknown:
        for i in range(comp_idx):
            if path[i] == comp.first_kept:
                kept_from = i
                break
    context = [comp.entry_id]
    for i in range(comp_idx):
        n = by_id[path[i]]
        if i < kept_from:
            if yields_model_message(n):
                selection[n.entry_id] = before_state
        elif n.type == "message" and n.role == "system":
            selection[n.entry_id] = SelectionState.SUMMARIZED  # Pi drops it; the compaction's checkpoint replaces it
        elif n.type == "compaction":
            selection[n.entry_id] = SelectionState.SUMMARIZED  # listed by Pi, but superseded
        else:
            context.append(n.entry_id)
    context.extend(path[comp_idx + 1 :])
    return context, comp_idx


def _mark_context(by_id: Mapping[str, Node], context: list[str], selection: dict[str, SelectionState]) -> None:
    """What the model sees of the context: direct, or omitted by a context edit."""
    omitted: dict[str, bool] = {}
    for eid in context:
        n = by_id[eid]
        if n.type == "context_edit" and n.target_id is not None:
            omitted[n.target_id] = n.omits  # latest edit per target wins
    for eid in context:
        n = by_id[eid]
        if yields_model_message(n):
            selection[eid] = SelectionState.OMITTED if omitted.get(eid) else SelectionState.DIRECT
        else:
            selection[eid] = SelectionState.NOT_APPLICABLE


def _mark_summarized_branches(
    by_id: Mapping[str, Node], path: list[str], on_path: set[str], selection: dict[str, SelectionState]
) -> None:
    """Abandoned branches represented by a branch summary on the selected path."""
    for eid in path:
        n = by_id[eid]
        if n.type == "branch_summary" and not n.silent:
            for other in abandoned_segment(by_id, n.from_id, n.parent_id):
                if other not in on_path and selection[other] is SelectionState.NOT_SELECTED:
                    selection[other] = SelectionState.SUMMARIZED


# -- navigation -------------------------------------------------------------


class TreeView(Protocol):
    """Read access to one session's tree; in memory (`Tree`) or over the index."""

    def node(self, entry_id: str) -> Node | None: ...

    def children(self, entry_id: str) -> list[Node]: ...  # in append order

    def is_selected(self, entry_id: str) -> bool | None: ...  # None: unknown


@dataclass(slots=True)
class Tree:
    """An in-memory `TreeView` over classified nodes."""

    nodes: list[Node]
    last_id: str | None = None
    state: TreeState = field(init=False)
    by_id: dict[str, Node] = field(init=False)
    by_ordinal: list[Node] = field(init=False)
    _children: dict[str | None, list[Node]] = field(init=False)

    def __post_init__(self) -> None:
        self.by_id = {n.entry_id: n for n in self.nodes}
        self.by_ordinal = sorted(self.by_id.values(), key=lambda n: n.ordinal)
        self._children = {}
        for n in self.by_ordinal:
            self._children.setdefault(n.parent_id, []).append(n)
        self.state = classify(self.nodes, self.last_id)

    def node(self, entry_id: str) -> Node | None:
        return self.by_id.get(entry_id)

    def children(self, entry_id: str) -> list[Node]:
        return list(self._children.get(entry_id, []))

    def is_selected(self, entry_id: str) -> bool | None:
        b = self.state.branch.get(entry_id)
        return None if b is None or b is BranchState.UNKNOWN else b is BranchState.SELECTED


def branch_before(view: TreeView, entry_id: str, count: int) -> list[Node]:
    """Up to `count` ancestors, oldest first: the conversation that led here."""
    out: list[Node] = []
    node = view.node(entry_id)
    seen = {entry_id}
    while node is not None and node.parent_id is not None and len(out) < count:
        if node.parent_id in seen:
            break
        seen.add(node.parent_id)
        parent = view.node(node.parent_id)
        if parent is None:
            break
        out.append(parent)
        node = parent
    out.reverse()
    return out


@dataclass(frozen=True, slots=True)
class BranchAfter:
    nodes: list[Node]
    # Forks passed on the materialized path: {"at": id, "followed": id, "alternatives": [ids]}.
    alternatives: list[dict[str, Any]]
    # The unresolved fork where the walk stopped: {"at": id, "candidates": [ids]}, else None.
    stopped_at_fork: dict[str, Any] | None


def branch_after(view: TreeView, entry_id: str, count: int) -> BranchAfter:
    """Branch successors by the seed's rules: follow the materialized path,
    else a single child; stop at an unresolved fork naming every candidate."""
    out: list[Node] = []
    alternatives: list[dict[str, Any]] = []
    stopped: dict[str, Any] | None = None
    current = entry_id
    seen = {entry_id}
    while len(out) < count:
        kids = [k for k in view.children(current) if k.entry_id not in seen]
        if not kids:
            break
        chosen: Node | None = None
        if view.is_selected(current):
            on_path = [k for k in kids if view.is_selected(k.entry_id)]
            if len(on_path) == 1:
                chosen = on_path[0]
                others = [k.entry_id for k in kids if k is not chosen]
                if others:
                    alternatives.append({"at": current, "followed": chosen.entry_id, "alternatives": others})
        if chosen is None:
            if len(kids) == 1:
                chosen = kids[0]
            else:
                stopped = {"at": current, "candidates": [k.entry_id for k in kids]}
                break
        out.append(chosen)
        seen.add(chosen.entry_id)
        current = chosen.entry_id
    return BranchAfter(out, alternatives, stopped)


def append_neighbours(ordered: Sequence[Node], entry_id: str, before: int, after: int) -> tuple[list[Node], list[Node]]:
    """Neighbours in append (file) order from an ordinal-sorted sequence."""
    for i, n in enumerate(ordered):
        if n.entry_id == entry_id:
            return list(ordered[max(0, i - before) : i]), list(ordered[i + 1 : i + 1 + after])
    return [], []


@dataclass(frozen=True, slots=True)
class LocalTrace:
    node: Node
    parent: Node | None
    parent_recorded: str | None  # the recorded parent id, whether or not that node exists
    children: list[Node]
    siblings: list[Node]  # derived: they share the parent
    toward_leaf: Node | None
    toward_leaf_known: bool


def local_trace(view: TreeView, entry_id: str) -> LocalTrace:
    """Parent, children, siblings (derived) and the neighbour toward the leaf.

    `toward_leaf` is the selected child for an entry on the materialized path,
    the parent for an entry off it whose ancestry joins the path, None for the
    leaf itself or a tree the leaf is not in; `toward_leaf_known` is False when
    the leaf is unknown.
    """
    node = view.node(entry_id)
    if node is None:
        raise KeyError(entry_id)
    parent = view.node(node.parent_id) if node.parent_id is not None else None
    children = view.children(entry_id)
    siblings = [s for s in view.children(parent.entry_id) if s.entry_id != entry_id] if parent is not None else []
    selected = view.is_selected(entry_id)
    toward: Node | None = None
    known = selected is not None
    if selected:
        toward = next((k for k in children if view.is_selected(k.entry_id)), None)
    elif selected is False:
        # Off the path: the way to the leaf goes up, if this tree holds the leaf at all.
        prefetch = getattr(view, "prefetch_ancestors", None)
        if prefetch is not None:
            prefetch(entry_id)
        cur: Node | None = node
        seen = {entry_id}
        while cur is not None and cur.parent_id is not None and cur.parent_id not in seen:
            seen.add(cur.parent_id)
            cur = view.node(cur.parent_id)
            if cur is not None and view.is_selected(cur.entry_id):
                toward = parent
                break
    return LocalTrace(node, parent, node.parent_id, children, siblings, toward, known)
