"""The extractor registry: a custom entry type a user registers in config.toml
becomes searchable by the fields named, redacted like every other text; every
other custom entry stays unsearchable; a change of registry re-reads only the
sessions holding a changed type (pure parts, then the index in-process)."""

from __future__ import annotations

import os

import pytest
from conftest import jsonl, msg, v3_header
from hypothesis import given, strategies as st

from piwatchd.model.events import Entry, FragmentKind
from piwatchd.model.extractors import (
    MAX_STRINGS,
    NO_EXTRACTORS,
    ExtractorError,
    Registry,
    changed_types,
    registry_from_config,
)
from piwatchd.model.project import project_entry
from piwatchd.model.redact import marker

NOTES = registry_from_config([{"custom_type": "acme.notes", "fields": ["data.summary", "data.items"]}])


def custom(custom_type, data, eid="c1"):
    return {"type": "custom", "id": eid, "parentId": None, "customType": custom_type, "data": data}


def entry(data: dict) -> Entry:
    return Entry(data.get("id", "c1"), None, data["type"], 0, 0, 10, "fp", data)


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        ({"custom_type": "x"}, "must be a list of tables"),
        (["x"], "extract #1 must be a table"),
        ([{"fields": ["data.a"]}], "custom_type must be the entries' customType"),
        ([{"custom_type": "", "fields": ["data.a"]}], "custom_type must be"),
        ([{"custom_type": "x"}], "fields must be a non-empty list"),
        ([{"custom_type": "x", "fields": []}], "fields must be a non-empty list"),
        ([{"custom_type": "x", "fields": "data.a"}], "fields must be a non-empty list"),
        ([{"custom_type": "x", "fields": ["data..a"]}], "field 'data..a' must be keys joined by dots"),
        ([{"custom_type": "x", "fields": ["a.b.c.d.e.f.g.h.i"]}], "at most 8 deep"),
        ([{"custom_type": "x", "fields": ["data.a"], "kind": "tool.call"}], "kind must be one of custom.message"),
        ([{"custom_type": "x", "fields": ["data.a"], "kinds": "user.text"}], "unknown key 'kinds'"),
        ([{"custom_type": "x", "fields": ["a"]}, {"custom_type": "x", "fields": ["b"]}], "registered twice"),
        ([{"custom_type": "x", "fields": [f"f{i}" for i in range(17)]}], "at most 16 fields"),
    ],
)
def test_a_registry_that_does_not_fit_is_refused_in_words(tables, message):
    with pytest.raises(ExtractorError, match=message.replace("(", r"\(").replace(".", r"\.")):
        registry_from_config(tables)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # a string field: its string
        ({"summary": "deploy plan"}, [("data.summary", "deploy plan")]),
        # a list or an object: every string inside, in order, one a line; numbers, booleans and keys are not text
        ({"items": ["one", 2, True, {"k": "three"}]}, [("data.items", "one\nthree")]),
        ({"summary": "s", "items": {"a": "x", "b": ["y"]}}, [("data.summary", "s"), ("data.items", "x\ny")]),
        # nothing there, or nothing textual: no fragment
        ({}, []),
        ({"summary": 42, "items": [None, 1.5]}, []),
        ({"summary": "   "}, []),
        # a field not registered is not text
        ({"other": "hidden", "summary": "shown"}, [("data.summary", "shown")]),
    ],
)
def test_a_registered_type_gives_one_fragment_per_field_that_holds_text(data, expected):
    texts = NOTES.texts(custom("acme.notes", data))
    assert [(fid, text) for fid, _, text, _ in texts] == expected
    assert {(kind, ct) for _, kind, _, ct in texts} <= {(FragmentKind.CUSTOM_MESSAGE, "acme.notes")}


def test_other_custom_types_and_odd_shapes_give_nothing():
    for e in (
        custom("acme.other", {"summary": "hidden"}),
        custom(None, {"summary": "hidden"}),
        custom(["acme.notes"], {"summary": "hidden"}),
        {"type": "custom", "customType": "acme.notes", "data": "a string, not an object"},
    ):
        assert NOTES.texts(e) == []
    assert NO_EXTRACTORS.texts(custom("acme.notes", {"summary": "hidden"})) == []


def test_the_projection_indexes_a_registered_field_redacted_and_nothing_else():
    secret = "AKIAQ3PLANTEDZX7WY4M"
    data = custom("acme.notes", {"summary": f"rollout notes key {secret}", "private": "unregistered words"})
    event = project_entry("s", entry(data), extractors=NOTES)
    assert [(f.fragment_id, f.kind, f.meta) for f in event.fragments] == [
        ("data.summary", FragmentKind.CUSTOM_MESSAGE, "acme.notes")
    ]
    assert event.fragments[0].text == f"rollout notes key {marker('aws-access-key')}"
    assert dict(event.redactions) == {"aws-access-key": 1}
    assert event.meta == {"customType": "acme.notes"}
    # without the registry the entry is a typed event without text, as before
    assert project_entry("s", entry(data)).fragments == ()
    other = custom("acme.other", {"summary": "rollout"})
    assert project_entry("s", entry(other), extractors=NOTES).fragments == ()


def test_a_registered_kind_is_the_fragments_kind():
    reg = registry_from_config([{"custom_type": "t", "fields": ["data.s"], "kind": "summary.branch"}])
    (f,) = project_entry("s", entry(custom("t", {"s": "text"})), extractors=reg).fragments
    assert f.kind is FragmentKind.SUMMARY_BRANCH


def test_a_hostile_payload_is_bounded():
    data = custom("acme.notes", {"items": ["w"] * (MAX_STRINGS + 50), "summary": [[[[[[[[[["too deep"]]]]]]]]]]})
    texts = {fid: text for fid, _, text, _ in NOTES.texts(data)}
    assert texts == {"data.items": "\n".join(["w"] * MAX_STRINGS)}


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@given(data=st.dictionaries(st.sampled_from(["summary", "items", "other"]), _json, max_size=3))
def test_every_string_of_a_registered_field_and_no_other_is_indexed(data):
    texts = {fid: text for fid, _, text, _ in NOTES.texts(custom("acme.notes", data))}
    for field in ("summary", "items"):
        strings = [s for s in _walk(data.get(field)) if s.strip()]
        assert texts.get(f"data.{field}") == ("\n".join(strings) if strings else None)
    assert set(texts) <= {"data.summary", "data.items"}


def _walk(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)


_tables = st.lists(
    st.fixed_dictionaries(
        {
            "custom_type": st.sampled_from(["a", "b", "c"]),
            "fields": st.lists(st.sampled_from(["data.x", "data.y"]), min_size=1, max_size=2),
            "kind": st.sampled_from(["custom.message", "user.text"]),
        }
    ),
    max_size=3,
    unique_by=lambda t: t["custom_type"],
)


@given(old=_tables, new=_tables)
def test_the_changed_types_are_exactly_those_whose_projection_differs(old, new):
    before, after = registry_from_config(old), registry_from_config(new)
    changed = changed_types(before.doc(), after)
    for t in ("a", "b", "c"):
        assert (t in changed) == (before.by_type.get(t) != after.by_type.get(t))
    assert changed_types(after.doc(), after) == frozenset()
    assert (before.fingerprint == after.fingerprint) == (before.doc() == after.doc())


def test_the_registry_round_trips_through_its_recorded_form():
    tables = [{"custom_type": t, **x} for t, x in NOTES.doc().items()]
    assert registry_from_config(tables) == NOTES
    assert isinstance(NOTES, Registry)


# -- the index, in-process (`piwatch index --once`) ----------------------------------


def _session(sid: str, custom_type: str, summary: str) -> bytes:
    return jsonl(
        v3_header(sid),
        msg(f"{sid}-a", None, "user", f"opening {sid}"),
        {
            **custom(custom_type, {"summary": summary, "private": f"hiddenword{sid.replace('-', '')}"}, f"{sid}-c"),
            "parentId": f"{sid}-a",
        },
    )


def _configure(monkeypatch, short_tmp, text: str) -> None:
    path = short_tmp / "config.toml"
    path.write_text(text)
    monkeypatch.setenv("PIWATCH_CONFIG", str(path))


REGISTER = '[[extract]]\ncustom_type = "acme.notes"\nfields = ["data.summary"]\n'


def test_a_registry_change_rereads_only_the_sessions_holding_a_changed_type(index_dir, short_tmp, monkeypatch):
    from helpers.live import q

    _configure(monkeypatch, short_tmp, "")
    index_dir.write("n.jsonl", _session("s-notes", "acme.notes", "kestrelword notes"))
    index_dir.write("o.jsonl", _session("s-other", "acme.other", "ospreyword other"))
    index_dir.write("p.jsonl", jsonl(v3_header("s-plain"), msg("p-a", None, "user", "plain session")))
    index_dir.index()
    assert index_dir.hits("kestrelword") == [] and index_dir.hits("ospreyword") == []

    _configure(monkeypatch, short_tmp, REGISTER)
    summary = index_dir.index()
    assert summary["changed"] == 1  # s-notes alone was re-read
    assert index_dir.hits("kestrelword") == [("s-notes", "s-notes-c", "custom.message")]
    assert index_dir.hits("ospreyword") == [] and index_dir.hits("hiddenwordsnotes") == []
    with index_dir.client() as c:
        read = c.read("s-notes", "s-notes-c")
    assert [(c.fragment_id, c.text) for c in read.content] == [("data.summary", "kestrelword notes")]

    assert index_dir.index()["changed"] == 0  # the same registry again: nothing to re-read
    _configure(monkeypatch, short_tmp, "")  # unregistered again: the text leaves the index
    assert index_dir.index()["changed"] == 1
    assert index_dir.hits("kestrelword") == []
    assert q(index_dir.db, "SELECT count(*) FROM sources WHERE state != 'ok'") == [(0,)]


# -- piwatchd as a process: a config change, a restart ----------------------------------


@pytest.mark.timeout(180)
def test_piwatchd_searches_a_type_registered_after_a_restart_and_no_other(live, short_tmp, monkeypatch):
    from helpers.live import FOLDER, poll, q
    from piwatch.client import Client

    secret = "AKIAQ3PLANTEDZX7WY4M"
    folder = live.root / FOLDER
    (folder / "n.jsonl").write_bytes(_session("s-notes", "acme.notes", f"kestrelword key {secret}"))
    (folder / "o.jsonl").write_bytes(_session("s-other", "acme.other", "ospreyword other"))
    for i in range(5):  # sessions without custom entries: never re-read
        (folder / f"p{i}.jsonl").write_bytes(jsonl(v3_header(f"s-p{i}"), msg(f"p{i}", None, "user", "plain")))

    def hits(word: str) -> list[tuple[str, str, str]]:
        with Client(live.base / "d.sock", caller={"all": True}) as c:
            return [(h.session_id, h.entry_id, h.evidence.kind) for h in c.search(word).hits]

    def ingested() -> dict[str, int]:
        return dict(q(live.db, "SELECT path, last_ingest_ms FROM sources"))

    _configure(monkeypatch, short_tmp, "")
    d = live.daemon()
    poll(lambda: hits("plain") and len(hits("opening")) == 2, message="the first index")
    assert hits("kestrelword") == [] and hits(secret) == []
    assert d.stop() == 0
    before = ingested()

    _configure(monkeypatch, short_tmp, REGISTER)
    d = live.daemon()
    assert hits("kestrelword") == [("s-notes", "s-notes-c", "custom.message")]
    assert hits(secret) == []
    assert hits("ospreyword") == [] and hits("hiddenwordsnotes") == []
    with Client(live.base / "d.sock", caller={"all": True}) as c:
        (hit,) = c.search("kestrelword").hits
        assert secret not in hit.snippet and "[redacted: aws-access-key]" in hit.snippet
        content = c.read("s-notes", "s-notes-c").content
        assert [(x.fragment_id, x.text) for x in content] == [
            ("data.summary", "kestrelword key [redacted: aws-access-key]")
        ]
    after = ingested()
    reread = sorted(os.path.basename(p) for p in after if after[p] != before[p])
    assert reread == ["n.jsonl"]
    assert d.stop() == 0


def test_a_malformed_table_in_config_toml_is_refused_with_its_reason(short_tmp, monkeypatch):
    from piwatchd.config import load_settings

    _configure(monkeypatch, short_tmp, '[[extract]]\ncustom_type = "acme.notes"\nfields = ["data..x"]\n')
    with pytest.raises(SystemExit, match=r"config .*config\.toml: extract #1 \(acme\.notes\): field 'data\.\.x'"):
        load_settings()
    _configure(monkeypatch, short_tmp, REGISTER)
    assert load_settings().extractors.doc() == {"acme.notes": {"fields": ["data.summary"], "kind": "custom.message"}}
