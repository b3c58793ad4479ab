"""Checks the real-Pi test-data generator (tests/pi/gen.mjs) for both Pi versions.

The generator drives Pi's own SessionManager through Node; these tests make sure what it writes
and what its manifests claim are true, so other tests can rely on them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "pi"))
import pitools

pytestmark = [pytest.mark.pi, pytest.mark.timeout(600)]

V1_SMALL_LINES = [
    {
        "type": "session",
        "id": "0b0e4d4e-5b7a-4a8e-9a39-2f1f6f2f0001",
        "timestamp": "2025-11-20T10:00:00.000Z",
        "cwd": "/work/legacy2",
        "provider": "anthropic",
        "modelId": "claude-sonnet-4-5",
        "thinkingLevel": "off",
    },
    {
        "type": "message",
        "timestamp": "2025-11-20T10:00:01.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "hello v1"}], "timestamp": 1763632801000},
    },
    {
        "type": "message",
        "timestamp": "2025-11-20T10:00:02.000Z",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "hi"}],
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": {
                "input": 1,
                "output": 1,
                "cacheRead": 0,
                "cacheWrite": 0,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
            },
            "stopReason": "stop",
            "timestamp": 1763632802000,
        },
    },
    {
        "type": "compaction",
        "timestamp": "2025-11-20T10:00:03.000Z",
        "summary": "sum",
        "firstKeptEntryIndex": 2,
        "tokensBefore": 10,
    },
    {
        "type": "message",
        "timestamp": "2025-11-20T10:00:04.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "again"}], "timestamp": 1763632804000},
    },
]

BASE_TYPES = {
    "message",
    "model_change",
    "thinking_level_change",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "session_info",
}
BASE_ROLES = {"user", "assistant", "toolResult", "bashExecution", "custom"}


def expected_types(version: str) -> set[str]:
    return BASE_TYPES | ({"usage", "context_edit"} if version == "1.6.0" else set())


def expected_roles(version: str) -> set[str]:
    return BASE_ROLES | ({"system"} if version == "1.6.0" else set())


MARKER_KIND = {
    "zebrauser": (True, "user.text"),
    "yakanswer": (True, "assistant.text"),
    "SECRETTHINK": (False, None),
    "SECRETSYSTEM": (False, None),
    "SECRETCUSTOM": (False, None),
    "SECRETIMAGE": (False, None),
    "toolargmarker": (True, "tool.call"),
    "toolresultmarker": (True, "tool.result"),
    "SECRETTRUNC": (False, None),
    "bashcmdmarker": (True, "bash.command"),
    "bashoutmarker": (True, "bash.output"),
    "compactmarker": (True, "summary.compaction"),
    "branchsummarker": (True, "summary.branch"),
    "custommsgmarker": (True, "custom.message"),
    "sessnamemarker": (True, "session.name"),
    "labelmarker": (False, None),
}


def require_node() -> None:
    try:
        pitools.find_node()
        pitools.find_npm()
    except pitools.NodeNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"node/npm are required in CI: {exc}")
        pytest.skip(f"node/npm not found, cannot run the real Pi writer: {exc}")


def encode_cwd(cwd: str) -> str:
    # Pi's getDefaultSessionDir encoding (for checking placement only; never decode it).
    return "--" + re.sub(r"[/\\:]", "-", re.sub(r"^[/\\]", "", cwd)) + "--"


def read_jsonl(path: str | Path) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                out.append(json.loads(line))
    return out


def entries_of(path) -> tuple[dict, list[dict]]:
    rows = read_jsonl(path)
    assert rows[0]["type"] == "session"
    return rows[0], [r for r in rows[1:] if r["type"] != "session"]


def strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)


def py_path(entries: list[dict], leaf_id: str | None) -> list[dict]:
    by_id = {e["id"]: e for e in entries}
    path, cur, seen = [], by_id.get(leaf_id), set()
    while cur is not None and cur["id"] not in seen:
        seen.add(cur["id"])
        path.append(cur)
        cur = by_id.get(cur["parentId"]) if cur.get("parentId") else None
    return path[::-1]


def py_projection_ids(entries: list[dict], leaf_id: str | None, version: str) -> list[str]:
    """Independent re-statement of Pi's compaction-aware projection (see gen.mjs header)."""
    path = py_path(entries, leaf_id)
    comp = None
    for e in path:
        if e["type"] == "compaction":
            comp = e
    if comp is None:
        ctx = path
    else:
        idx = next(i for i, e in enumerate(path) if e["id"] == comp["id"])
        ctx, found = [comp], False
        for e in path[:idx]:
            if e["id"] == comp.get("firstKeptEntryId"):
                found = True
            system = e["type"] == "message" and e["message"]["role"] == "system"
            if found and not (system and version == "1.6.0"):
                ctx.append(e)
        ctx += path[idx + 1 :]
    edits = {e["targetId"]: e for e in ctx if e["type"] == "context_edit"} if version == "1.6.0" else {}
    llm_roles = expected_roles(version)
    out = []
    for i, e in enumerate(ctx):
        t = e["type"]
        if t == "message":
            role = e["message"]["role"]
            visible = role in llm_roles and not (role == "bashExecution" and e["message"].get("excludeFromContext"))
        elif t == "custom_message":
            visible = True
        elif t == "branch_summary":
            visible = bool(e.get("summary"))
        elif t == "compaction":
            visible = i == 0
        else:
            visible = False
        edit = edits.get(e["id"])
        if edit is not None and edit["replacement"] is None:
            visible = False
        if visible:
            out.append(e["id"])
    return out


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=pitools.PI_VERSIONS)
def version(request):
    require_node()
    return request.param


@pytest.fixture(scope="module")
def scen(version, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"scen-{version}")
    return pitools.run_gen(["scenarios", "--out", str(out), "--pi", version])


@pytest.fixture(scope="module")
def rand(version, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"rand-{version}")
    return pitools.run_gen(["random", "--out", str(out), "--pi", version, "--seed", "1234", "--count", "40"])


def by_scenario(manifest: dict, name: str) -> dict:
    found = [f for f in manifest["files"] if f["scenario"] == name]
    assert len(found) == 1, name
    return found[0]


# -- scenarios -------------------------------------------------------------------------------------


def test_install_is_idempotent():
    require_node()
    assert pitools.ensure_installed() == pitools.PI_DIR
    assert pitools.ensure_installed() == pitools.PI_DIR
    assert pitools.node_version()[:2] >= pitools.MIN_NODE


def test_scenarios_write_valid_sessions_where_pi_puts_them(scen, version):
    out = Path(scen["outDir"])
    assert scen["piVersion"] == version
    listed = {Path(f["path"]) for f in scen["files"]}
    on_disk = set((out / "sessions").glob("*/*.jsonl"))
    assert listed == on_disk
    for f in scen["files"]:
        p = Path(f["path"])
        header, entries = entries_of(p)
        assert header["version"] == 3 and header["id"] == f["sessionId"] and header["cwd"] == f["cwd"]
        assert p.parent == out / "sessions" / encode_cwd(header["cwd"])
        assert p.name.endswith(f"_{header['id']}.jsonl")
        ids = [e["id"] for e in entries]
        assert ids == f["entryIds"]
        assert len(set(ids)) == len(ids)
        assert f["leafId"] == ids[-1]
        for e in entries:
            assert isinstance(e["timestamp"], str) and "parentId" in e
        # every line is one JSON object terminated by \n
        raw = p.read_bytes()
        assert raw.endswith(b"\n") and b"\n\n" not in raw
    cwds = {f["cwd"] for f in scen["files"]}
    assert {"/work/proj", "/work/proj2"} <= cwds and len(cwds) >= 3


def test_scenarios_cover_every_entry_type_and_role(scen, version):
    types, roles = Counter(), Counter()
    for f in scen["files"]:
        for e in entries_of(f["path"])[1]:
            types[e["type"]] += 1
            if e["type"] == "message":
                roles[e["message"]["role"]] += 1
    assert expected_types(version) <= set(types), expected_types(version) - set(types)
    assert expected_roles(version) <= set(roles), expected_roles(version) - set(roles)
    assert set(types) <= expected_types(version)
    assert not scen["coverage"]["missingEntryTypes"] and not scen["coverage"]["missingRoles"]


def test_scenarios_have_the_promised_shapes(scen, version):
    ks = entries_of(by_scenario(scen, "kitchen-sink")["path"])[1]
    msgs = [e["message"] for e in ks if e["type"] == "message"]
    users = [m for m in msgs if m["role"] == "user"]
    assert any(isinstance(m["content"], str) for m in users)
    assert any(isinstance(m["content"], list) and {b["type"] for b in m["content"]} == {"text", "image"} for m in users)
    big = max((m for m in msgs if m["role"] == "assistant"), key=lambda m: len(m["content"]))
    kinds = [b["type"] for b in big["content"]]
    assert "thinking" in kinds and "text" in kinds
    assert all(b.get("thinkingSignature") for b in big["content"] if b["type"] == "thinking")
    assert {"read", "edit", "write", "bash", "grep", "jira_lookup"} <= {
        b["name"] for b in big["content"] if b["type"] == "toolCall"
    }
    results = [m for m in msgs if m["role"] == "toolResult"]
    assert {True, False} <= {m["isError"] for m in results}
    assert any(b["type"] == "image" for m in results for b in m["content"])
    assert any(
        (m.get("details") or {}).get("truncation", {}).get("content") for m in results if m["toolName"] == "read"
    )
    assert any((m.get("details") or {}).get("diff") for m in results if m["toolName"] == "edit")
    bashes = [m for m in msgs if m["role"] == "bashExecution"]
    assert any(m.get("excludeFromContext") for m in bashes) and any(not m.get("excludeFromContext") for m in bashes)
    cms = [e for e in ks if e["type"] == "custom_message"]
    assert {type(e["content"]) for e in cms} == {str, list}
    assert any(isinstance(e.get("data"), str) for e in ks if e["type"] == "custom")
    labels = [e for e in ks if e["type"] == "label"]
    assert any("label" not in e for e in labels) and any(e.get("label") for e in labels)
    assert any(e["type"] == "session_info" and e.get("name") for e in ks)

    comp = entries_of(by_scenario(scen, "compaction")["path"])[1]
    comps = [e for e in comp if e["type"] == "compaction"]
    assert len(comps) >= 3
    assert all(set(e["details"]) == {"readFiles", "modifiedFiles"} for e in comps)
    comp_file = by_scenario(scen, "compaction")
    # the latest compaction keeps entries from before an older compaction: that one is not projected
    older = [e["id"] for e in comps[:-1]]
    assert comp_file["projectionIds"][0] == comps[-1]["id"]
    assert not set(older) & set(comp_file["projectionIds"])
    if version == "1.6.0":
        assert [r["id"] for r in comp_file["projection"] if r.get("retainedOlderCompaction")] == older[-1:]

    br_file = by_scenario(scen, "branching")
    br = entries_of(br_file["path"])[1]
    assert len(br_file["roots"]) >= 3
    assert any(e["type"] == "branch_summary" and e["parentId"] is None for e in br)
    assert len([e for e in br if e["type"] == "session_info"]) >= 2

    if version == "1.6.0":
        assert any(e["type"] == "usage" for e in ks)
        systems = [m for m in msgs if m["role"] == "system"]
        assert systems and all(m.get("sections") for m in systems)
        assert all(e.get("systemMessage", {}).get("role") == "system" for e in comps)
        assert any(e["firstKeptEntryId"] == e["id"] for e in comps)  # retain-none
        edits = [e for e in br if e["type"] == "context_edit"]
        assert any(e["replacement"] is None for e in edits) and any(e["replacement"] is not None for e in edits)
        flags = {r.get("edit") for r in br_file["projection"]}
        assert {"omitted", "replaced"} <= flags
    else:
        # 0.73.1 createBranchedSession drops path labels without re-chaining: an orphan appears
        assert by_scenario(scen, "fork-branched")["orphans"]


def test_forks_copy_ids_and_record_parent(scen):
    src = by_scenario(scen, "branching")
    src_ids = set(src["entryIds"])
    fb = by_scenario(scen, "fork-branched")
    ff = by_scenario(scen, "fork-from")
    for fork in (fb, ff):
        header, _ = entries_of(fork["path"])
        assert header["parentSession"] == src["path"]
        assert header["id"] != src["sessionId"] and fork["path"] != src["path"]
    # createBranchedSession copies the root->leaf path (labels re-emitted with new ids)
    copied = [i for i in fb["entryIds"] if i in src_ids]
    assert fb["forkLeafId"] in copied and len(copied) >= 10
    # forkFrom copies every entry with identical ids, into another cwd
    assert src_ids <= set(ff["entryIds"])
    assert ff["cwd"] != src["cwd"] and Path(ff["path"]).parent.name == encode_cwd(ff["cwd"])


def test_markers_are_where_the_manifest_says(scen, version):
    assert scen["unlocatedMarkers"] == []
    seen_prefixes = set()
    for f in scen["files"]:
        entries = {e["id"]: e for e in entries_of(f["path"])[1]}
        proj = set(f["projectionIds"])
        for m in f["markers"]:
            prefix = re.sub(r"\d+$", "", m["marker"])
            seen_prefixes.add(prefix)
            e = entries[m["entryId"]]
            raw = json.dumps(e, ensure_ascii=False)
            needle = m.get("needle", m["marker"])
            assert needle in raw, (f["scenario"], m)
            assert m["entryType"] == e["type"]
            assert m["inProjection"] == (m["entryId"] in proj)
            if m.get("copiedByPi"):  # e.g. the system prompt checkpoint inside a compaction
                assert not m["expectSearchable"]
                continue
            if prefix in MARKER_KIND:
                assert (m["expectSearchable"], m["expectedKind"]) == MARKER_KIND[prefix], m
            if prefix == "SECRETIMAGE":
                assert m["marker"] not in raw
                assert m["marker"].encode() in base64.b64decode(needle)
            else:  # a standalone token for any tokenizer (no letters, digits or _ around it)
                bounded = re.compile(rf"(?<![A-Za-z0-9_]){m['marker']}(?![A-Za-z0-9_])")
                assert any(bounded.search(t) for t in strings(e)), m
    required = set(MARKER_KIND) - ({"SECRETSYSTEM"} if version == "0.73.1" else set())  # no system role in 0.73.1
    assert required <= seen_prefixes, required - seen_prefixes
    if version == "1.6.0":
        assert "editreplmarker" in seen_prefixes


def test_v1_and_v2_migration_in_scenarios(scen):
    v1 = by_scenario(scen, "migrated-v1-small")
    mig = v1["migration"]
    assert (mig["preVersion"], mig["postVersion"]) == (1, 3)
    assert mig["preSha256"] != mig["postSha256"] and mig["rewritten"]
    assert hashlib.sha256(Path(v1["path"]).read_bytes()).hexdigest() == mig["postSha256"]
    header, entries = entries_of(v1["path"])
    assert header["version"] == 3
    prev = None
    for e in entries:
        assert re.fullmatch(r"[0-9a-f]{8}", e["id"]) and e["parentId"] == prev
        prev = e["id"]
    comp = next(e for e in entries if e["type"] == "compaction")
    assert "firstKeptEntryIndex" not in comp and comp["firstKeptEntryId"] in {e["id"] for e in entries}
    assert all(m.get("assignedByMigration") for m in v1["markers"])

    v2 = by_scenario(scen, "migrated-v2-small")
    assert (v2["migration"]["preVersion"], v2["migration"]["postVersion"]) == (2, 3)
    roles = [e["message"]["role"] for e in entries_of(v2["path"])[1] if e["type"] == "message"]
    assert "hookMessage" not in roles and "custom" in roles

    fx = by_scenario(scen, "migrated-v1-fixture")  # the vendored pi-mono v1 session, always present
    assert (fx["migration"]["preVersion"], fx["version"]) == (1, 3)
    assert all("id" in e for e in entries_of(fx["path"])[1])


def test_scenario_projection_matches_reference(scen, version):
    for f in scen["files"]:
        _, entries = entries_of(f["path"])
        assert py_projection_ids(entries, f["leafId"], version) == f["projectionIds"], f["scenario"]


# -- random + oracle -------------------------------------------------------------------------------


def test_random_oracle_is_self_consistent(rand, version):
    files = rand["files"]
    assert len(files) == 40
    ops = Counter(o for f in files for o in f["ops"])
    for op in ("turn", "branch", "branch_summary", "compaction", "reset_leaf", "label", "bash"):
        assert ops[op] > 0, op
    if version == "1.6.0":
        assert ops["context_edit"] > 0 and ops["usage"] > 0
    assert any(len(f["roots"]) > 1 for f in files)
    assert any(f["latestCompactionId"] for f in files)
    for f in files:
        header, entries = entries_of(f["path"])
        ids = [e["id"] for e in entries]
        assert ids == f["entryIds"] and f["leafId"] == ids[-1]
        assert header["id"] == f["sessionId"]
        assert any(e["type"] == "message" and e["message"]["role"] == "assistant" for e in entries)
        branch = [e["id"] for e in py_path(entries, f["leafId"])]
        assert branch == f["branchIds"]
        on_branch = set(branch)
        assert set(f["projectionIds"]) <= on_branch
        rows = {r["id"]: r for r in f["projection"]}
        assert [r["id"] for r in f["projection"] if r["llmRoles"]] == f["projectionIds"]
        for r in f["projection"]:
            assert r["id"] in on_branch
            if r.get("edit") == "omitted" or r.get("excludeFromContext") or r.get("retainedOlderCompaction"):
                assert r["llmRoles"] == []
        if version == "1.6.0":
            assert f["projectionSource"] == "buildSessionProjection"
            assert [r["id"] for r in f["projection"]] == f["contextEntryIds"]
            if not f["latestCompactionId"]:
                assert f["contextEntryIds"] == branch
        else:
            assert f["projectionSource"] == "buildSessionContext+entry-tagging" and f["contextEntryIds"] is None
        if f["latestCompactionId"]:
            assert f["projection"][0]["id"] == f["latestCompactionId"]
            assert rows[f["latestCompactionId"]]["messageRoles"][-1] == "compactionSummary"
        assert py_projection_ids(entries, f["leafId"], version) == f["projectionIds"]


def test_random_is_deterministic_per_seed(rand, version, tmp_path):
    again = pitools.run_gen(["random", "--out", str(tmp_path), "--pi", version, "--seed", "1234", "--count", "40"])

    def shape(m):
        out = []
        for f in m["files"]:
            _, entries = entries_of(f["path"])
            out.append((f["cwd"], f["ops"], [(e["type"], e.get("message", {}).get("role")) for e in entries]))
        return out

    assert shape(again) == shape(rand)


def test_oracle_mode_agrees_with_manifest(scen, version):
    f = by_scenario(scen, "compaction")
    o = pitools.run_gen(["oracle", "--file", f["path"], "--pi", version])
    for key in ("leafId", "entryIds", "branchIds", "projectionIds", "projection", "contextEntryIds"):
        assert o[key] == f[key], key


# -- append / migrate / corpus ---------------------------------------------------------------------


def test_append_mode_appends_in_place(scen, version, tmp_path):
    src = Path(by_scenario(scen, "kitchen-sink")["path"])
    dst = tmp_path / "sessions" / src.parent.name / src.name
    dst.parent.mkdir(parents=True)
    shutil.copyfile(src, dst)
    before = dst.read_bytes()
    m = pitools.run_gen(["append", "--file", str(dst), "--pi", version, "--count", "3", "--marker", "livetailmarker77"])
    after = dst.read_bytes()
    assert after.startswith(before) and len(after) > len(before)
    _, entries = entries_of(dst)
    new = entries[-6:]
    assert [e["id"] for e in new] == m["newEntryIds"] and m["leafId"] == new[-1]["id"]
    assert all("livetailmarker77" in json.dumps(e) for e in new)
    assert new[0]["parentId"] == entries[-7]["id"]


def test_migrate_mode_rewrites_v1(version, tmp_path):
    p = (
        tmp_path
        / "sessions"
        / "--work-legacy2--"
        / "2025-11-20T10-00-00-000Z_0b0e4d4e-5b7a-4a8e-9a39-2f1f6f2f0001.jsonl"
    )
    p.parent.mkdir(parents=True)
    p.write_text("".join(json.dumps(line) + "\n" for line in V1_SMALL_LINES))
    old = hashlib.sha256(p.read_bytes()).hexdigest()
    m = pitools.run_gen(["migrate", "--file", str(p), "--pi", version])
    assert m["oldSha256"] == old and m["newSha256"] == hashlib.sha256(p.read_bytes()).hexdigest() != old
    assert (m["oldVersion"], m["newVersion"]) == (1, 3)
    header, entries = entries_of(p)
    assert header["version"] == 3 and [e["id"] for e in entries] == m["newEntryIds"] == m["entryIds"]
    comp = next(e for e in entries if e["type"] == "compaction")
    # firstKeptEntryIndex 2 counts the header as 0: it names the assistant line
    assert comp["firstKeptEntryId"] == entries[1]["id"]


def test_corpus_mode_small(version, tmp_path):
    m = pitools.run_gen(["corpus", "--out", str(tmp_path), "--pi", version, "--bytes", "3M", "--seed", "5"])
    assert m["totalBytes"] >= 3_000_000
    files = m["files"]
    assert m["fileCount"] == len(files) and sum(f["bytes"] for f in files) == m["totalBytes"]
    assert sum(f["entries"] for f in files) == m["entries"]
    assert set((tmp_path / "sessions").glob("*/*.jsonl")) == {Path(f["path"]) for f in files}
    big = max(len(line) for f in files for line in Path(f["path"]).read_bytes().split(b"\n"))
    assert big > 1_000_000  # at least one 1-2 MB tool result
    for n in m["needles"][:5]:
        _, entries = entries_of(n["path"])
        hit = [e for e in entries if e["id"] == n["entryId"]]
        assert hit and n["token"] in json.dumps(hit[0])


def test_gen_reports_errors_with_stderr(tmp_path):
    require_node()
    with pytest.raises(pitools.PiGenError) as err:
        pitools.run_gen(
            ["append", "--file", str(tmp_path / "missing.jsonl"), "--pi", "1.6.0", "--count", "1", "--marker", "x"]
        )
    assert "no such session file" in err.value.stderr
