"""Secrets stay out, end to end: sessions written by the real Pi, piwatchd as a
process, search / read / trace / status over its socket and the CLI.

Every planted secret (tests/redact_cases.py) sits in a tool result, a bash
output, a user message and an assistant message. None of it may come back by
searching for its value, in a snippet, a read or a trace; every look-alike
must come back intact and be found by its value. The tests use only the
public behaviour (socket and CLI), so they hold for any text-index engine.
"""

from __future__ import annotations

import json
import re

import pytest
from helpers.world import World, wait_for
from piwatch import wire
from piwatch.client import RequestFailed
from redact_cases import LOOKALIKES, PLANTED

from piwatchd.model.redact import marker, redact

pitools = pytest.importorskip("pi.pitools")

pytestmark = [pytest.mark.pi, pytest.mark.timeout(600)]

ROLES = ("tool", "bash", "user", "assistant")


class B:
    """The client's answers as plain wire JSON (camelCase dicts), so the checks read what a model reads."""

    def __init__(self, client):
        self.client = client

    def __getattr__(self, op):
        return lambda *a, **kw: wire.to_builtins(getattr(self.client, op)(*a, **kw))


def _pieces(secret: str) -> list[str]:
    """The secret itself and every long run of word characters in it: none may be searchable or shown."""
    runs = [r for r in re.findall(r"[A-Za-z0-9]{8,}", secret) if not r.isalpha() or len(r) > 14]
    return [secret, *runs]


def _probes(text: str) -> list[str]:
    """Distinctive words of a look-alike to search for."""
    return sorted({w for w in re.findall(r"[A-Za-z0-9]{6,}", text) if any(c.isdigit() for c in w)})[:3]


def _spec(cwd: str) -> dict:
    items = []
    for i, (_, line, _) in enumerate(PLANTED):
        for role in ROLES:
            text = f"plantctx{i}{role} before\n{line}\nafter plantctx{i}{role}"
            items.append({"role": role, "text": text, "command": f"cat secrets{i}.env"})
    for i, line in enumerate(LOOKALIKES):
        for role in ROLES:
            items.append({"role": role, "text": f"lookctx{i}{role} {line} end", "command": "git log"})
    return {"sessions": [{"cwd": cwd, "items": items}]}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    import shutil
    import tempfile
    from pathlib import Path

    pitools.ensure_installed()
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="pw-red-"))
    world = World(base)
    manifest = pitools.texts(base / "agent", "1.6.0", _spec(str(world.proj)))
    world.root = Path(manifest["sessionsDir"])
    world.start()
    yield world, manifest["files"][0]
    world.stop()
    shutil.rmtree(base, ignore_errors=True)


def _entry_ids(file: dict, first: int, count: int) -> list[str]:
    return file["entryIds"][first : first + count]


def test_no_secret_is_found_by_its_value(planted):
    world, _ = planted
    with world.client({"cwd": str(world.proj)}) as c:
        for kind, _, secret in PLANTED:
            for piece in _pieces(secret):
                query = json.dumps(piece)  # a quoted phrase: the whole value
                result = B(c).search(query, limit=5)
                assert result["hits"] == [], (kind, piece)


def test_snippets_show_markers_and_context_never_values(planted):
    world, _ = planted
    with world.client({"cwd": str(world.proj)}) as c:
        for i, (kind, _, secret) in enumerate(PLANTED):
            for role in ROLES:
                result = B(c).search(f"plantctx{i}{role}", limit=5)
                assert len(result["hits"]) == 1, (kind, role)
                dumped = json.dumps(result)
                for piece in _pieces(secret):
                    assert piece not in dumped, (kind, role, piece)
            # The marker's words are searchable: the kind is findable, the value is not.
            assert B(c).search(f'"redacted {kind}" plantctx{i}tool')["hits"], kind


def test_reads_and_traces_are_redacted_and_say_so(planted):
    world, file = planted
    sid = file["sessionId"]
    with world.client({"cwd": str(world.proj)}) as c:
        for i, (kind, _, secret) in enumerate(PLANTED):
            for eid in _entry_ids(file, i * len(ROLES), len(ROLES)):
                read = B(c).read(sid, eid, before=1, after=1)
                trace = B(c).trace(sid, eid)
                dumped = json.dumps([read, trace])
                for piece in _pieces(secret):
                    assert piece not in dumped, (kind, eid, piece)
                assert marker(kind) in json.dumps(read["content"])
                notes = [o for o in read["omitted"] if o["kind"] == "redacted"]
                assert notes and any(kind in o["counts"] for o in notes), read["omitted"]
                assert all(set(o) == {"field", "kind", "counts", "reason"} for o in notes)
                for frag in read["content"]:
                    window = B(c).read(sid, eid, fragmentId=frag["fragmentId"], offset=0, length=64000)
                    assert all(p not in window["fragment"]["text"] for p in _pieces(secret))


def test_lookalikes_stay_intact_and_searchable(planted):
    world, file = planted
    sid = file["sessionId"]
    first = len(PLANTED) * len(ROLES)
    with world.client({"cwd": str(world.proj)}) as c:
        for i, line in enumerate(LOOKALIKES):
            for probe in _probes(line):
                hits = B(c).search(probe, limit=50)["hits"]
                assert len({h["entryId"] for h in hits} & set(_entry_ids(file, first + i * 4, 4))) == 4, (line, probe)
            for eid in _entry_ids(file, first + i * len(ROLES), len(ROLES)):
                read = B(c).read(sid, eid)
                assert any(line in frag["text"] for frag in read["content"]), (line, eid)
                assert not [o for o in read["omitted"] if o["kind"] == "redacted"]


def test_status_counts_by_kind_without_values(planted):
    world, _ = planted
    expected: dict[str, int] = {}
    for _, line, _ in PLANTED:
        for kind, n in redact(line)[1].items():
            expected[kind] = expected.get(kind, 0) + n * len(ROLES)
    with world.client({"cwd": str(world.proj)}) as c:
        red = B(c).status()["redactions"]
    assert red["byKind"] == dict(sorted(expected.items()))
    assert red["total"] == sum(expected.values())
    assert set(red["byKind"]) >= {k for k, _, _ in PLANTED}
    text = world.cli("status").stdout
    assert f"redacted   {red['total']} secrets" in text
    for _, _, secret in PLANTED:
        assert secret not in json.dumps(red) and secret not in text


def test_unredacted_is_for_the_local_all_caller_only(planted):
    world, file = planted
    sid, eid = file["sessionId"], file["entryIds"][3 * len(ROLES)]  # the AWS access key in a tool result
    secret = PLANTED[3][2]
    with world.client({"cwd": str(world.proj)}) as c:
        with pytest.raises(RequestFailed) as exc:
            B(c).read(sid, eid, unredacted=True)
        assert exc.value.code == "bad_request"
        with pytest.raises(RequestFailed):  # the wire refuses it on trace (an unknown field), whoever asks
            c.request("trace", {"sessionId": sid, "entryId": eid, "unredacted": True})
    with world.client({"all": True}) as c:
        read = B(c).read(sid, eid, unredacted=True)
        assert secret in json.dumps(read["content"]) and read["unredacted"] is True
        with pytest.raises(RequestFailed):
            c.request("trace", {"sessionId": sid, "entryId": eid, "unredacted": True})
    cli = world.cli("read", sid, eid, "--all", "--unredacted")
    assert cli.returncode == 0 and secret in cli.stdout
    cli = world.cli("read", sid, eid, "--unredacted", cwd=str(world.proj))
    assert cli.returncode == 2 and secret not in cli.stdout and "unredacted" in cli.stderr
    cli = world.cli("read", sid, eid, cwd=str(world.proj))
    assert cli.returncode == 0 and secret not in cli.stdout and "[redacted: aws-access-key]" in cli.stdout
    assert "aws-access-key x1" in cli.stdout


def test_changed_rules_rebuild_the_index(planted):
    """Allowlisting a value and adding a pattern in config.toml: after a restart the index is rebuilt with them."""
    world, _ = planted
    allowed = PLANTED[3][2]  # AWS access key id
    world.stop()
    config = world.env["PIWATCH_CONFIG"]
    with open(config, "w") as fh:
        fh.write(
            f'[redact]\nallow = ["{allowed}"]\n[[redact.patterns]]\nname = "plant-context"\nregex = "plantctx1(user)"\n'
        )
    try:
        world.start()
        with world.client({"cwd": str(world.proj)}) as c:
            wait_for(lambda: B(c).search(json.dumps(allowed))["hits"])
            assert len(B(c).search(json.dumps(allowed), limit=10)["hits"]) == len(ROLES)
            assert B(c).search("plantctx1user", exact=True)["hits"] == []  # the value as written is gone
            assert B(c).search('"plantctx1 redacted plant context"')["hits"]
            red = B(c).status()["redactions"]
            assert red["extraPatterns"] == ["plant-context"] and red["byKind"]["plant-context"] == 2
            assert "aws-access-key" not in red["byKind"]
    finally:
        world.stop()
        with open(config, "w") as fh:
            fh.write("")
        world.start()
        with world.client({"cwd": str(world.proj)}) as c:
            wait_for(lambda: B(c).search(json.dumps(allowed))["hits"] == [] and B(c).search("plantctx1user")["hits"])
