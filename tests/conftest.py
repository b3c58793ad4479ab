"""Shared helpers: short temp dirs, writing session files, indexing and searching."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

# Hypothesis' per-example deadline (200 ms) measures the machine, not the code: on a loaded CI box
# a pure test fails as "flaky" when one example is slow. The tests' own timeouts still apply.
settings.register_profile("piwatch", deadline=None)
settings.load_profile("piwatch")

REPO = Path(__file__).resolve().parent.parent
# Real Pi sessions vendored with provenance and licences (tests/fixtures/README.md);
# the large ones are gzipped, so tests go through fixture_bytes / copy_fixture.
FIXTURES = REPO / "tests" / "fixtures"
sys.path.insert(0, str(REPO / "tests"))


def fixture_bytes(name: str) -> bytes:
    """The bytes of a vendored fixture (`pi-mono-v1/large-session.jsonl`), gzipped or not."""
    plain = FIXTURES / name
    if plain.exists():
        return plain.read_bytes()
    return gzip.decompress((FIXTURES / (name + ".gz")).read_bytes())


def fixture_names(folder: str) -> list[str]:
    """The fixture names in a folder, without any `.gz` suffix."""
    return sorted(f"{folder}/{p.name.removesuffix('.gz')}" for p in (FIXTURES / folder).glob("*.jsonl*"))


def copy_fixture(name: str, dest: Path) -> Path:
    """Write a fixture's plain bytes to `dest` (a file path) and return it."""
    dest.write_bytes(fixture_bytes(name))
    return dest


@pytest.fixture
def short_tmp():
    # AF_UNIX paths are limited to ~100 bytes; keep every test dir short.
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="pw-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def jsonl(*objs) -> bytes:
    return b"".join(json.dumps(o, ensure_ascii=False).encode() + b"\n" for o in objs)


def v3_header(sid="s-1", cwd="/work/proj", **extra):
    return {"type": "session", "version": 3, "id": sid, "timestamp": "2026-05-01T10:00:00.000Z", "cwd": cwd, **extra}


def msg(eid, parent, role, content, ts="2026-05-01T10:00:01.000Z", **extra):
    return {
        "type": "message",
        "id": eid,
        "parentId": parent,
        "timestamp": ts,
        "message": {"role": role, "content": content, **extra},
    }


@pytest.fixture
def index_dir(short_tmp):
    """A sessions root and a db path, plus helpers to (re)index and search."""

    class Env:
        root = short_tmp / "sessions"
        db = short_tmp / "index.sqlite3"

        def write(self, name: str, data: bytes, folder: str = "--work-proj--") -> Path:
            d = self.root / folder
            d.mkdir(parents=True, exist_ok=True)
            p = d / name
            p.write_bytes(data)
            return p

        def index(self) -> dict:
            from piwatchd.ingest.scan import index_once

            return index_once(self.db, [str(self.root)])

        def client(self, caller=None):
            """A client on this index through the daemon's own api (in-process)."""
            from piwatch.client import Client, LocalTransport

            return Client(transport=LocalTransport(self.db), caller=caller or {"all": True})

        def search(self, query: str, **kw):
            with self.client() as c:
                return c.search(query, filters=kw, limit=kw.pop("limit", 50))

        def hits(self, query: str, **kw) -> list[tuple[str, str, str]]:
            return [(h.session_id, h.entry_id, h.evidence.kind) for h in self.search(query, **kw).hits]

    Env.root.mkdir(parents=True)
    return Env()


@pytest.fixture
def live():
    """piwatchd processes on a temp sessions root and index (`helpers.live`)."""
    from helpers.live import live_env  # here, not at the top: helpers import this module

    yield from live_env()


@pytest.fixture
def world(short_tmp):
    """piwatchd running on a small world of sessions in two projects (`helpers.world`)."""
    from helpers.world import world_env

    yield from world_env(short_tmp)


# Tests that run piwatchd, the CLI or the real Pi as processes (through these fixtures, or
# marked `pi`) are `e2e`; they and the tests that build large real indexes are `slow`.
# `pytest -m "not slow"` is the inner loop (pure and in-process tests, a few seconds);
# CI runs everything.
E2E_FIXTURES = frozenset(
    {"live", "world", "served", "daemon", "vworld", "planted", "pitools", "agent_run", "catching_up", "extension"}
)
SLOW_MODULES = frozenset({"test_engines", "test_oracle", "test_pi_generator", "test_progress", "test_search_plans"})
# Tests that start processes themselves (the CLI, tsc, piwatchd without a fixture): over 3 s here.
SLOW_TESTS = frozenset(
    {
        "test_public_api.py::test_every_command_has_help",
        "test_public_api.py::test_client_package_never_imports_the_daemon",
        "test_pi_wire_types.py::test_the_extension_type_checks_in_strict_mode",
        "test_search.py::test_cli_index_and_search_human_and_json",
        "test_read_trace.py::test_append_to_long_session_updates_a_bounded_number_of_rows",
        "test_colour.py::test_a_terminal_gets_colour_unless_told_otherwise",
        "test_service_units.py::test_service_print_writes_nothing",
        "test_hostile_ingest.py::test_new_folders_under_a_symlinked_root_are_indexed_at_once",
        "test_deadlines.py::test_hundreds_of_slow_connections_do_not_lock_others_out",
    }
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        e2e = bool(E2E_FIXTURES & set(getattr(item, "fixturenames", ()))) or item.get_closest_marker("pi") is not None
        if e2e:
            item.add_marker(pytest.mark.e2e)
        test_id = f"{item.path.name}::{item.originalname}"
        if e2e or item.module.__name__ in SLOW_MODULES or test_id in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
