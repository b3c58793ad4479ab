"""The pure tree module: states, neighbours and trace (piwatchd.model.tree)."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings, strategies as st

from piwatchd.model.relations import entry_edges, entry_file_evidence, resolve_path
from piwatchd.model.tree import (
    Node,
    Tree,
    abandoned_segment,
    append_neighbours,
    branch_after,
    branch_before,
    classify,
    local_trace,
    make_node,
    node_facts,
)


def msg(eid, parent, role="user", ordinal=0, **facts):
    return make_node(eid, parent, "message", role, ordinal, facts)


def seq(*specs):
    """Nodes in append order from (id, parent, type, role, facts) tuples."""
    out = []
    for i, spec in enumerate(specs):
        eid, parent, etype, role, facts = (spec + (None, None, None))[:5]
        out.append(make_node(eid, parent, etype or "message", role if role is not None else "user", i, facts or {}))
    return out


def states(nodes, last=None):
    s = classify(nodes, last)
    return {k: (s.branch[k].value, s.selection[k].value) for k in s.branch}


# -- the seed's worked example ------------------------------------------------

# A -> B -> C -> D     old branch
#       \
#        E -> F        later materialized branch
SEED = seq(("A", None), ("B", "A"), ("C", "B"), ("D", "C"), ("E", "B"), ("F", "E"))


def test_seed_example_states():
    s = states(SEED)
    assert {k for k, (b, _) in s.items() if b == "selected"} == {"A", "B", "E", "F"}
    assert s["C"] == s["D"] == ("alternate", "not-selected")
    assert s["F"] == ("selected", "direct")


def test_seed_example_append_order_of_e_is_d_but_branch_order_is_b():
    tree = Tree(SEED)
    before, after = append_neighbours(tree.by_ordinal, "E", 1, 1)
    assert [n.entry_id for n in before] == ["D"] and [n.entry_id for n in after] == ["F"]
    assert [n.entry_id for n in branch_before(tree, "E", 1)] == ["B"]
    assert [n.entry_id for n in branch_before(tree, "E", 5)] == ["A", "B"]


def test_seed_example_reading_c_continues_to_d():
    walk = branch_after(Tree(SEED), "C", 5)
    assert [n.entry_id for n in walk.nodes] == ["D"]
    assert walk.stopped_at_fork is None and walk.alternatives == []


def test_seed_example_reading_b_follows_materialized_branch_and_reports_c():
    walk = branch_after(Tree(SEED), "B", 5)
    assert [n.entry_id for n in walk.nodes] == ["E", "F"]
    assert walk.alternatives == [{"at": "B", "followed": "E", "alternatives": ["C"]}]
    assert walk.stopped_at_fork is None


def test_unresolved_fork_stops_and_reports_every_candidate():
    # X is off the materialized path and has two children: no silent choice.
    nodes = list(SEED) + [
        make_node("X", "D", "message", "user", 6),
        make_node("Y", "X", "message", "assistant", 7),
        make_node("Z", "X", "message", "assistant", 8),
        make_node("G", "F", "message", "user", 9),  # keeps F's branch materialized
    ]
    walk = branch_after(Tree(nodes), "C", 10)
    assert [n.entry_id for n in walk.nodes] == ["D", "X"]
    assert walk.stopped_at_fork == {"at": "X", "candidates": ["Y", "Z"]}


def test_seed_example_trace_of_e_and_b():
    tree = Tree(SEED)
    t = local_trace(tree, "E")
    assert t.parent.entry_id == "B"
    assert [c.entry_id for c in t.children] == ["F"]
    assert [s.entry_id for s in t.siblings] == ["C"]
    assert t.toward_leaf.entry_id == "F"
    tb = local_trace(tree, "B")
    assert [c.entry_id for c in tb.children] == ["C", "E"]
    assert tb.toward_leaf.entry_id == "E"
    # Off the path, the way to the leaf is up.
    assert local_trace(tree, "D").toward_leaf.entry_id == "C"
    assert local_trace(tree, "F").toward_leaf is None  # F is the leaf


# -- selection state, table-driven ----------------------------------------------

CASES = [
    (
        "no compaction: every message on the path is direct; metadata is not-applicable",
        seq(
            ("m", None, "model_change", None),
            ("u", "m"),
            ("a", "u", None, "assistant"),
            ("l", "a", "label", None, {"target_id": "u"}),
        ),
        None,
        {
            "m": ("selected", "not-applicable"),
            "u": ("selected", "direct"),
            "a": ("selected", "direct"),
            "l": ("selected", "not-applicable"),
        },
    ),
    (
        "latest compaction: before firstKept summarized, kept and after direct",
        seq(
            ("u1", None),
            ("a1", "u1", None, "assistant"),
            ("u2", "a1"),
            ("a2", "u2", None, "assistant"),
            ("c", "a2", "compaction", None, {"first_kept": "u2"}),
            ("u3", "c"),
        ),
        None,
        {
            "u1": ("selected", "summarized"),
            "a1": ("selected", "summarized"),
            "u2": ("selected", "direct"),
            "a2": ("selected", "direct"),
            "c": ("selected", "direct"),
            "u3": ("selected", "direct"),
        },
    ),
    (
        "two compactions: only the latest counts; the older one inside the kept range is superseded",
        seq(
            ("u1", None),
            ("c1", "u1", "compaction", None, {"first_kept": "u1"}),
            ("u2", "c1"),
            ("c2", "u2", "compaction", None, {"first_kept": "u1"}),
            ("u3", "c2"),
        ),
        None,
        {
            "u1": ("selected", "direct"),
            "c1": ("selected", "summarized"),
            "u2": ("selected", "direct"),
            "c2": ("selected", "direct"),
            "u3": ("selected", "direct"),
        },
    ),
    (
        "retain-none compaction stores its own id: nothing before it is kept",
        seq(("u1", None), ("a1", "u1", None, "assistant"), ("c", "a1", "compaction", None, {"first_kept": "c"})),
        None,
        {"u1": ("selected", "summarized"), "a1": ("selected", "summarized"), "c": ("selected", "direct")},
    ),
    (
        "system message inside the kept range is dropped by Pi",
        seq(
            ("s", None, None, "system"),
            ("u1", "s"),
            ("c", "u1", "compaction", None, {"first_kept": "s"}),
            ("s2", "c", None, "system"),
        ),
        None,
        {
            "s": ("selected", "summarized"),
            "u1": ("selected", "direct"),
            "c": ("selected", "direct"),
            "s2": ("selected", "direct"),
        },
    ),
    (
        "context edits: latest per target wins; null omits, non-null keeps",
        seq(
            ("u1", None),
            ("u2", "u1"),
            ("e1", "u2", "context_edit", None, {"target_id": "u1", "omits": True}),
            ("e2", "e1", "context_edit", None, {"target_id": "u2", "omits": True}),
            ("e3", "e2", "context_edit", None, {"target_id": "u2"}),
        ),
        None,
        {
            "u1": ("selected", "omitted"),
            "u2": ("selected", "direct"),
            "e1": ("selected", "not-applicable"),
            "e2": ("selected", "not-applicable"),
            "e3": ("selected", "not-applicable"),
        },
    ),
    (
        "an edit on another branch does not apply",
        seq(("u1", None), ("e1", "u1", "context_edit", None, {"target_id": "u1", "omits": True}), ("u2", "u1")),
        None,
        {"u1": ("selected", "direct"), "e1": ("alternate", "not-applicable"), "u2": ("selected", "direct")},
    ),
    (
        "an edit summarized away by a later compaction no longer applies",
        seq(
            ("u1", None),
            ("e1", "u1", "context_edit", None, {"target_id": "u1", "omits": True}),
            ("u2", "e1"),
            ("c", "u2", "compaction", None, {"first_kept": "u2"}),
        ),
        None,
        {
            "u1": ("selected", "summarized"),
            "e1": ("selected", "not-applicable"),
            "u2": ("selected", "direct"),
            "c": ("selected", "direct"),
        },
    ),
    (
        "several roots: only the leaf's tree is selected",
        seq(("u1", None), ("a1", "u1", None, "assistant"), ("u2", None), ("a2", "u2", None, "assistant")),
        None,
        {
            "u1": ("alternate", "not-selected"),
            "a1": ("alternate", "not-selected"),
            "u2": ("selected", "direct"),
            "a2": ("selected", "direct"),
        },
    ),
    (
        "branch summary on the path: the abandoned segment is summarized; empty summaries summarize nothing",
        seq(
            ("u1", None),
            ("a1", "u1", None, "assistant"),
            ("u2", "a1"),
            ("a2", "u2", None, "assistant"),
            ("bs", "a1", "branch_summary", None, {"from_id": "a2"}),
            ("u3", "bs"),
        ),
        None,
        {
            "u1": ("selected", "direct"),
            "a1": ("selected", "direct"),
            "u2": ("alternate", "summarized"),
            "a2": ("alternate", "summarized"),
            "bs": ("selected", "direct"),
            "u3": ("selected", "direct"),
        },
    ),
    (
        "empty branch summary sends nothing",
        seq(("u1", None), ("u2", "u1"), ("bs", "u1", "branch_summary", None, {"from_id": "u2", "silent": True})),
        None,
        {"u1": ("selected", "direct"), "u2": ("alternate", "not-selected"), "bs": ("selected", "not-applicable")},
    ),
    (
        "!! bash runs and unknown roles never reach the model",
        seq(
            ("b", None, None, "bashExecution", {"silent": True}),
            ("d", "b", None, "developer"),
            ("x", "d", None, "bashExecution"),
        ),
        None,
        {"b": ("selected", "not-applicable"), "d": ("selected", "not-applicable"), "x": ("selected", "direct")},
    ),
    (
        "a leaf entry selects its target",
        seq(("u1", None), ("u2", "u1"), ("u3", "u1"), ("lf", "u3", "leaf", None, {"target_id": "u2"})),
        None,
        {
            "u1": ("selected", "direct"),
            "u2": ("selected", "direct"),
            "u3": ("alternate", "not-selected"),
            "lf": ("alternate", "not-applicable"),
        },
    ),
    (
        "a leaf entry naming an absent id: unknown, not a guess",
        seq(("u1", None), ("lf", "u1", "leaf", None, {"target_id": "gone"})),
        None,
        {"u1": ("unknown", "unknown"), "lf": ("unknown", "not-applicable")},
    ),
    (
        "a parent cycle: unknown",
        [make_node("a", "b", "message", "user", 0), make_node("b", "a", "message", "user", 1)],
        None,
        {"a": ("unknown", "unknown"), "b": ("unknown", "unknown")},
    ),
    (
        "a compaction with no kept boundary recorded: what precedes it is unknown",
        seq(("u1", None), ("c", "u1", "compaction", None, {"kept_unknown": True}), ("u2", "c")),
        None,
        {"u1": ("selected", "unknown"), "c": ("selected", "direct"), "u2": ("selected", "direct")},
    ),
    (
        "omp's /clear after the latest compaction: the context starts after it, the compaction too is gone",
        seq(
            ("u1", None),
            ("c", "u1", "compaction", None, {"first_kept": "u1"}),
            ("u2", "c"),
            ("r", "u2", "reset_boundary", None),
            ("u3", "r"),
        ),
        None,
        {
            "u1": ("selected", "omitted"),
            "c": ("selected", "omitted"),
            "u2": ("selected", "omitted"),
            "r": ("selected", "not-applicable"),
            "u3": ("selected", "direct"),
        },
    ),
    (
        "omp's /clear before the latest compaction: superseded by it",
        seq(
            ("u1", None),
            ("r", "u1", "reset_boundary", None),
            ("u2", "r"),
            ("c", "u2", "compaction", None, {"first_kept": "u2"}),
            ("u3", "c"),
        ),
        None,
        {
            "u1": ("selected", "summarized"),
            "r": ("selected", "not-applicable"),
            "u2": ("selected", "direct"),
            "c": ("selected", "direct"),
            "u3": ("selected", "direct"),
        },
    ),
    (
        "an unknown parent ends the walk, as in Pi",
        seq(("u1", "missing"), ("u2", "u1")),
        None,
        {"u1": ("selected", "direct"), "u2": ("selected", "direct")},
    ),
]


@pytest.mark.parametrize("name,nodes,last,expected", CASES, ids=[c[0] for c in CASES])
def test_states(name, nodes, last, expected):
    assert states(nodes, last) == expected


def test_node_facts_from_raw_entries():
    assert node_facts("compaction", {"firstKeptEntryId": "x"}) == {"first_kept": "x"}
    assert node_facts("compaction", {"firstKeptEntryIndex": 3}) == {"first_kept": "v1-000003"}
    assert node_facts("compaction", {"retainedTail": []}) == {"kept_unknown": True}
    assert node_facts("branch_summary", {"fromId": "a", "summary": ""}) == {"from_id": "a", "silent": True}
    assert node_facts("context_edit", {"targetId": "t", "replacement": None}) == {"target_id": "t", "omits": True}
    assert node_facts("context_edit", {"targetId": "t", "replacement": {"content": "x"}}) == {"target_id": "t"}
    assert node_facts("message", {"message": {"role": "bashExecution", "excludeFromContext": True}}) == {"silent": True}
    assert node_facts("message", {"message": {"role": "user"}}) == {}


def test_abandoned_segment_stops_at_common_ancestor():
    by_id = {n.entry_id: n for n in SEED}
    assert abandoned_segment(by_id, "D", "B") == ["D", "C"]
    assert abandoned_segment(by_id, "root", "B") == []


# -- relationships (pure) ------------------------------------------------------


def test_resolve_path_like_pi():
    assert resolve_path("@src/a.py", "/w/p", "/home/u") == "/w/p/src/a.py"
    assert resolve_path("~/x/../y", "/w/p", "/home/u") == "/home/u/y"
    assert resolve_path("/abs//b", "/w/p", "/home/u") == "/abs/b"
    assert resolve_path("../q", "/w/p", "/home/u") == "/w/q"


def test_entry_edges_and_file_evidence():
    assert [e.kind for e in entry_edges({"type": "label", "targetId": "t", "label": "x"})] == ["labels"]
    cleared = entry_edges({"type": "label", "targetId": "t"})[0]
    assert cleared.detail == {"label": None}
    bs = entry_edges({"type": "branch_summary", "fromId": "root"})[0]
    assert bs.target_entry_id is None and bs.target_ref == "root"
    data = {
        "type": "message",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "@a.py"}},
                {"type": "toolCall", "id": "c2", "name": "edit", "arguments": {"path": "b.py", "edits": []}},
                {"type": "toolCall", "id": "c3", "name": "bash", "arguments": {"command": "cat c.py"}},
            ],
        },
    }
    ev = entry_file_evidence(data, "/w")
    assert [(e.path, e.mode, e.call_id) for e in ev] == [("/w/a.py", "read", "c1"), ("/w/b.py", "changed", "c2")]
    comp = entry_file_evidence(
        {"type": "compaction", "details": {"readFiles": ["r.py"], "modifiedFiles": ["m.py"]}}, "/w"
    )
    assert [(e.path, e.mode, e.source) for e in comp] == [
        ("/w/r.py", "read", "compaction"),
        ("/w/m.py", "changed", "compaction"),
    ]


# -- properties ----------------------------------------------------------------


def pi_projection(nodes: list[Node], leaf_id: str | None) -> set[str]:
    """A line-by-line port of Pi 1.6.0 buildSessionProjection + convertToLlm
    (session-manager.js), used as a second oracle on arbitrary trees."""
    by_id = {n.entry_id: n for n in nodes}
    path, cur = [], by_id.get(leaf_id) if leaf_id else None
    while cur is not None:
        path.append(cur)
        cur = by_id.get(cur.parent_id) if cur.parent_id else None
    path.reverse()
    comp = None
    for e in path:
        if e.type == "compaction":
            comp = e
    # omp's buildSessionContext: the latest /clear boundary, when after the latest compaction, starts the context.
    reset = max((i for i, e in enumerate(path) if e.type == "reset_boundary"), default=-1)
    comp_at = next((i for i, e in enumerate(path) if comp is not None and e.entry_id == comp.entry_id), -1)
    if reset >= 0 and reset > comp_at:
        ctx = path[reset + 1 :]
    elif comp is None:
        ctx = path
    else:
        ci = next(i for i, e in enumerate(path) if e.entry_id == comp.entry_id)
        ctx, found = [comp], False
        for e in path[:ci]:
            if e.entry_id == comp.first_kept:
                found = True
            if found and not (e.type == "message" and e.role == "system"):
                ctx.append(e)
        ctx += path[ci + 1 :]
    edits = {}
    for e in ctx:
        if e.type == "context_edit":
            edits[e.target_id] = e
    out = set()
    for i, e in enumerate(ctx):
        if e.type == "compaction" and i > 0:
            continue
        edit = edits.get(e.entry_id)
        if edit is not None and edit.omits:
            continue
        if e.type == "message":
            if e.role in (
                "system",
                "user",
                "assistant",
                "toolResult",
                "custom",
                "branchSummary",
                "compactionSummary",
                "hookMessage",
            ) or (e.role == "bashExecution" and not e.silent):
                out.add(e.entry_id)
        elif e.type == "custom_message" or e.type == "compaction" or (e.type == "branch_summary" and not e.silent):
            out.add(e.entry_id)
    return out


TYPES = ["message"] * 6 + [
    "compaction",
    "context_edit",
    "branch_summary",
    "label",
    "custom",
    "custom_message",
    "model_change",
    "reset_boundary",  # oh-my-pi's /clear
]
ROLES = ["user", "assistant", "toolResult", "system", "bashExecution", "custom", "developer"]


@st.composite
def trees(draw):
    n = draw(st.integers(1, 30))
    rnd = random.Random(draw(st.integers(0, 2**32)))
    nodes: list[Node] = []
    for i in range(n):
        eid = f"e{i}"
        parent = None if i == 0 or rnd.random() < 0.08 else rnd.choice(nodes).entry_id
        etype = rnd.choice(TYPES)
        role = rnd.choice(ROLES) if etype == "message" else None
        facts: dict = {}
        if etype == "compaction":
            facts["first_kept"] = rnd.choice([eid] + [x.entry_id for x in nodes]) if nodes else eid
        elif etype in ("context_edit", "label"):
            facts["target_id"] = rnd.choice(nodes).entry_id if nodes else "none"
            facts["omits"] = etype == "context_edit" and rnd.random() < 0.6
        elif etype == "branch_summary":
            facts["from_id"] = rnd.choice(nodes).entry_id if nodes else "root"
            facts["silent"] = rnd.random() < 0.2
        elif role == "bashExecution":
            facts["silent"] = rnd.random() < 0.4
        nodes.append(make_node(eid, parent, etype, role, i, facts))
    return nodes


@settings(max_examples=400, deadline=None)
@given(trees())
def test_direct_iff_in_pi_projection(nodes):
    s = classify(nodes)
    expected = pi_projection(nodes, nodes[-1].entry_id)
    got = {k for k, v in s.selection.items() if v.value == "direct"}
    assert got == expected


@settings(max_examples=200, deadline=None)
@given(trees(), st.randoms())
def test_states_do_not_depend_on_input_order(nodes, rnd):
    shuffled = list(nodes)
    rnd.shuffle(shuffled)
    assert classify(shuffled, nodes[-1].entry_id) == classify(nodes, nodes[-1].entry_id)


@settings(max_examples=200, deadline=None)
@given(trees())
def test_selected_set_is_one_root_to_leaf_path(nodes):
    tree = Tree(nodes)
    selected = {k for k, v in tree.state.branch.items() if v.value == "selected"}
    assert selected == set(tree.state.path)
    leaf = nodes[-1].entry_id
    # Walking branch order from the root of the path reaches exactly the leaf.
    root = tree.state.path[0]
    walk = branch_after(tree, root, len(nodes))
    assert [root] + [n.entry_id for n in walk.nodes][: len(tree.state.path) - 1] == list(tree.state.path)
    assert tree.state.path[-1] == leaf
    # direct entries are always selected; not-selected ones never are.
    for k, v in tree.state.selection.items():
        if v.value in ("direct", "omitted"):
            assert k in selected
        if v.value == "not-selected":
            assert k not in selected


@settings(max_examples=200, deadline=None)
@given(trees(), st.integers(0, 29))
def test_branch_neighbours_follow_parent_links(nodes, pick):
    tree = Tree(nodes)
    target = nodes[pick % len(nodes)].entry_id
    before = branch_before(tree, target, 50)
    chain = [n.entry_id for n in before] + [target]
    for parent, child in itertools.pairwise(chain):
        assert tree.node(child).parent_id == parent
    walk = branch_after(tree, target, 50)
    chain = [target] + [n.entry_id for n in walk.nodes]
    for parent, child in itertools.pairwise(chain):
        assert tree.node(child).parent_id == parent
    if walk.stopped_at_fork:
        assert len(walk.stopped_at_fork["candidates"]) >= 2
