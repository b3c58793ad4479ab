"""Pi is the oracle: for every entry of sessions written by the real Pi 1.6.0
SessionManager, our `selectionState == "direct"` must equal membership in
Pi's own `buildSessionProjection(entries, leafId)` (after `convertToLlm`) for
the materialized leaf, and `branchState == "selected"` must equal membership
in Pi's `getBranch(leaf)`.

The sessions are indexed twice: in one pass, and by growing each file line by
line so every append goes through the incremental path (fast or full). Both
must agree with Pi.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "pi"))
import pitools

pytestmark = [pytest.mark.pi, pytest.mark.timeout(900)]

SEEDS = ("oracle-a", "oracle-b", "oracle-c", "oracle-d")
PER_SEED = 60  # 240 sessions


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("oracle")
    files = []
    for seed in SEEDS:
        manifest = pitools.random_sessions(out / seed, "1.6.0", seed, PER_SEED, timeout=600)
        assert manifest["piVersion"] == "1.6.0"
        files.extend(manifest["files"])
    roots = [str(out / seed / "sessions") for seed in SEEDS]
    return roots, files


def _states(db: Path) -> dict[tuple[str, str], tuple[str, str]]:
    conn = sqlite3.connect(db)
    try:
        return {
            (s, e): (b, sel)
            for s, e, b, sel in conn.execute(
                "SELECT s.session_id, e.entry_id, e.branch_state, e.selection_state FROM events e JOIN sessions s USING(session_key)"
            )
        }
    finally:
        conn.close()


def _compare(files, states) -> tuple[int, int, list[str]]:
    sessions = entries = 0
    disagreements: list[str] = []
    for f in files:
        sid = f["sessionId"]
        direct = set(f["projectionIds"])
        branch = set(f["branchIds"])
        sessions += 1
        assert f["leafId"] == f["entryIds"][-1]
        for eid in dict.fromkeys(f["entryIds"]):
            entries += 1
            got = states.get((sid, eid))
            if got is None:
                disagreements.append(f"{f['path']}: {eid} not indexed")
                continue
            b, sel = got
            if (sel == "direct") != (eid in direct):
                disagreements.append(f"{f['path']}: {eid} selection={sel} but Pi direct={eid in direct}")
            if (b == "selected") != (eid in branch):
                disagreements.append(f"{f['path']}: {eid} branch={b} but Pi on-branch={eid in branch}")
            if sel == "unknown" or b == "unknown":
                disagreements.append(f"{f['path']}: {eid} unknown state for a complete Pi session")
    return sessions, entries, disagreements


def test_selection_state_matches_pi_projection(generated, tmp_path, capsys):
    from piwatchd.ingest.scan import index_once

    roots, files = generated
    assert len(files) >= 200
    db = tmp_path / "index.sqlite3"
    summary = index_once(db, roots)
    assert summary["problems"] == [] and summary["files"] == len(files)
    sessions, entries, bad = _compare(files, _states(db))
    with capsys.disabled():
        print(f"\noracle (one pass): {sessions} sessions, {entries} entries compared, {len(bad)} disagreements")
    assert not bad, "\n".join(bad[:40])
    assert sessions >= 200 and entries > 5000
    # The vocabulary is exercised, not just `direct`/`not-selected`.
    seen = {s for _, s in _states(db).values()}
    assert {"direct", "summarized", "omitted", "not-selected", "not-applicable"} <= seen


def test_incremental_appends_match_pi_projection(generated, tmp_path, capsys, monkeypatch):
    """Grow a copy of every file a few lines at a time; the states after the
    last append must equal Pi's, whatever path each append took."""
    from piwatchd.ingest.scan import index_once
    from piwatchd.store import tree_store

    paths = {"fast": 0, "full": 0}
    real_fast = tree_store._fast_append

    def counting_fast(*a, **kw):
        result = real_fast(*a, **kw)
        paths["fast" if result is not None else "full"] += 1
        return result

    monkeypatch.setattr(tree_store, "_fast_append", counting_fast)

    _, files = generated
    subset = files[:: max(1, len(files) // 60)]
    root = tmp_path / "grow"
    copies = []
    for i, f in enumerate(subset):
        data = Path(f["path"]).read_bytes().splitlines(keepends=True)
        dest = root / f"s{i:03d}.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        copies.append((dest, data))
    db = tmp_path / "grow.sqlite3"
    step = 0
    longest = max(len(d) for _, d in copies)
    written = [0] * len(copies)
    while any(w < len(d) for w, (_, d) in zip(written, copies)):
        step += 1
        for i, (dest, data) in enumerate(copies):
            if written[i] >= len(data):
                continue
            n = 2 if written[i] == 0 else 1 + (step % 3)  # header + first entry, then 1-3 lines
            with open(dest, "ab") as fh:
                fh.write(b"".join(data[written[i] : written[i] + n]))
            written[i] += n
        index_once(db, [str(root)])
    assert step >= longest // 3
    sessions, entries, bad = _compare(subset, _states(db))
    with capsys.disabled():
        print(
            f"\noracle (incremental, {step} passes): {sessions} sessions, {entries} entries, {len(bad)} disagreements;"
            f" appends: {paths['fast']} fast, {paths['full']} reclassified"
        )
    assert not bad, "\n".join(bad[:40])
    assert paths["fast"] > 100 and paths["full"] > 100  # both update paths were exercised
