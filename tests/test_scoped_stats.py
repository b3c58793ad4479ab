"""Two worlds that differ only in another project's words: a workspace
caller's answers must be equal in both (docs/concepts.md, "Who may see what").

Each world is a real piwatchd (Tantivy, and FTS5 for its exact tier) over
the same caller project (the same session file, the same paths) beside an
"other" project whose events have the same shape and lengths but other
words. In world A the other project holds the caller's misspelling
(`kubrnetes`), the word a typo of the caller's would be repaired to there
(`zanzibarian`), three frequent words one edit from `rebot` and a common
`alphawave`; in world B it holds none of them and a common `gammaray`
instead. Whether a word is misspelt, what repairs it, how much a word
weighs in the partial tier, and whether a hit shows a score could all tell
the caller which world it is in. Each of the caller's events holds each word
once, so BM25's order inside a tier (the residual channel the concepts
document) depends on their lengths alone here.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import msgspec
import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import Daemon, poll, q
from piwatch.client import Client

CALLER = {
    "k8s": "rolled the kubernetes cluster back after the outage",
    "k8s2": "kubernetes upgrade notes for the cluster",
    "robot": "the robot arm firmware",
    "gateway": "the gateway timed out twice",
    "ab": "alphawave and betaline readings",
    "bg": "betaline and gammaray readings",
    "ag": "alphawave and gammaray readings",
    "lunch": "unrelated chatter about lunch",
}
# The other project: the same number of events, each as many words long, in both worlds.
OTHER = {
    "a": [
        "kubrnetes rollout stalled",
        "kubernetes ingress broke",
        "kubernetes node drained",
        "zanzibarian gateway config",
        "reboot the fleet",
        "reboot again today",
        "rebut the claim",
        "rebut it now",
        "rebota pending here",
        "rebota failed there",
        "alphawave spike seen",
        "alphawave drift noted",
        "alphawave logs rotated",
    ],
    "b": [
        "terraform rollout stalled",
        "terraform ingress broke",
        "terraform node drained",
        "quokka gateway config",
        "vacuum the fleet",
        "vacuum again today",
        "zephyr the claim",
        "zephyr it now",
        "marble pending here",
        "marble failed there",
        "gammaray spike seen",
        "gammaray drift noted",
        "gammaray logs rotated",
    ],
}
QUERIES = [
    ("kubrnetes", {}),  # the caller's misspelling, a word the other project holds in A
    ("kubrnetes cluster", {}),
    ("zanzibarin gateway", {}),  # a misspelling of a word only the other project holds (in A)
    ("rebot", {}),  # in A the other project holds three frequent words one edit away
    ("rebot arm", {}),
    ("why did alphawave betaline gammaray fail", {"limit": 5}),  # partial: ranked by the words' weights
    ("kubernetes cluster", {}),  # exact, with scores on main
    ("upgrading kubernetes", {}),  # forms
    ("kubernetes lunch", {}),  # nothing: each word counted by itself
    ("alphawave readings", {"group": "session"}),
]


def _session(sid: str, cwd: Path, texts: list[str], keys: list[str]) -> bytes:
    entries, prev = [], None
    for i, (key, text) in enumerate(zip(keys, texts, strict=True)):
        entries.append(msg(key, prev, "user", text, ts=f"2026-05-01T10:00:{i:02d}.000Z"))
        prev = key
    return jsonl(v3_header(sid, str(cwd)), *entries)


def _world(base: Path, name: str, engine: str) -> Daemon:
    root = base / name / "sessions" / "--work-proj--"
    root.mkdir(parents=True)
    (base / name).chmod(0o700)  # the socket's directory
    (root / "caller.jsonl").write_bytes(_session("s-caller", base / "proj", list(CALLER.values()), list(CALLER)))
    keys = [f"o{i}" for i in range(len(OTHER[name]))]
    (root / "other.jsonl").write_bytes(_session("s-other", base / "other", OTHER[name], keys))
    old = os.environ.get("PIWATCH_ENGINE")
    os.environ["PIWATCH_ENGINE"] = engine
    daemon = Daemon(root.parent, base / name / "index.sqlite3")
    try:
        daemon.start()
    finally:
        if old is None:
            os.environ.pop("PIWATCH_ENGINE", None)
        else:
            os.environ["PIWATCH_ENGINE"] = old
    # Both worlds' scores from the on-disk index, not the overlay's statistics.
    poll(lambda: q(daemon.db, "SELECT count(*) FROM text_debt")[0][0] == 0, 30, message="the text index's commit")
    return daemon


@pytest.fixture(scope="module", params=["tantivy", "fts5"])
def worlds(request):
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="pw2w-"))
    for d in (base / "proj", base / "other"):
        (d / ".git").mkdir(parents=True)
    daemons = {}
    try:
        for name in ("a", "b"):
            daemons[name] = _world(base, name, request.param)
        yield request.param, base / "proj", daemons
    finally:
        for d in daemons.values():
            d.stop()
        shutil.rmtree(base, ignore_errors=True)


def _search(daemon: Daemon, query: str, caller: dict, **kw):
    with Client(daemon.socket, timeout=30, caller=caller) as c:
        return c.search(query, **kw)


def test_a_workspace_callers_answers_are_the_same_in_both_worlds(worlds):
    engine, proj, daemons = worlds
    caller = {"cwd": str(proj)}
    for query, kw in QUERIES:
        a, b = (msgspec.to_builtins(_search(daemons[w], query, caller, **kw)) for w in "ab")
        assert a == b, query
    if engine == "fts5":
        return  # the exact tier only: no repair, no partial tier, no word counts (README)
    # The queries reach what they are about, in both worlds.
    mine = _search(daemons["a"], "kubrnetes", caller)
    assert [(r.word, r.replacement) for r in mine.repairs] == [("kubrnetes", "kubernetes")]
    assert [r.replacement for r in _search(daemons["a"], "rebot", caller).repairs] == ["robot"]
    partial = _search(daemons["a"], "why did alphawave betaline gammaray fail", caller, limit=5)
    assert sorted(h.entry_id for h in partial.hits) == ["ab", "ag", "bg"]
    assert {h.tier for h in partial.hits} == {"partial"}
    words = _search(daemons["a"], "kubernetes lunch", caller).words
    assert [(w.word, w.events) for w in words] == [("kubernetes", 2), ("lunch", 1)]


def test_scores_only_for_a_caller_that_may_see_everything(worlds):
    """A score weighs words by their rarity in the whole index: a workspace
    caller gets the order alone; the local CLI's `all` gets scores."""
    _, proj, daemons = worlds
    scoped = _search(daemons["a"], "kubernetes cluster", {"cwd": str(proj)})
    assert scoped.hits and all(h.score is None for h in scoped.hits)
    every = _search(daemons["a"], "kubernetes cluster", {"all": True})
    assert every.hits and all(h.score is not None and h.score > 0 for h in every.hits)
    grouped = _search(daemons["a"], "kubernetes", {"cwd": str(proj)}, group="session")
    assert grouped.sessions and all(s.evidence.score is None for s in grouped.sessions)


def test_statistics_are_remembered_per_scope(worlds):
    """One daemon, one searcher generation, two callers: what the whole
    index says of a word (another project holds `kubrnetes`) and what the
    workspace says (nobody there does: repair it) are remembered apart,
    whichever asks first. (With `cluster`, the whole index's exact tier
    finds nothing, so the word's statistics are looked up for it too.)"""
    engine, proj, daemons = worlds
    if engine == "fts5":
        pytest.skip("the FTS5 engine makes no repairs")
    every, mine = {"all": True}, {"cwd": str(proj)}
    for first, then in ((every, mine), (mine, every), (every, mine)):
        _search(daemons["a"], "kubrnetes cluster", first)
        got = _search(daemons["a"], "kubrnetes cluster", then)
        assert [r.replacement for r in got.repairs] == ([] if then is every else ["kubernetes"])
