"""Where sessions are found: Pi's roots and omp's, resolved as each agent does (pure but for isdir)."""

from __future__ import annotations

import os

import pytest

from piwatchd.source.discovery import agent_of, discover_roots, omp_session_roots

HOME = "/h"


def _roots(env: dict[str, str]) -> list[tuple[str, str, str]]:
    return [(r.path, r.origin, r.agent) for r in discover_roots(env, HOME)]


def test_omp_default_root_beside_pis() -> None:
    assert _roots({}) == [
        ("/h/.pi/agent/sessions", "default", "pi"),
        ("/h/.omp/agent/sessions", "default", "omp"),
    ]


@pytest.mark.parametrize(
    ("env", "first"),
    [
        ({"PI_CONFIG_DIR": ".omp2"}, "/h/.omp2/agent/sessions"),
        ({"OMP_PROFILE": "work"}, "/h/.omp/profiles/work/agent/sessions"),
        ({"PI_PROFILE": "work"}, "/h/.omp/profiles/work/agent/sessions"),
        ({"OMP_PROFILE": "", "PI_PROFILE": "work"}, "/h/.omp/agent/sessions"),  # omp: OMP_PROFILE wins when set
        ({"OMP_PROFILE": "default"}, "/h/.omp/agent/sessions"),
        ({"OMP_PROFILE": "../x"}, "/h/.omp/agent/sessions"),  # a name omp refuses
        ({"PI_CODING_AGENT_DIR": "~/agents/a"}, "/h/agents/a/sessions"),
        ({"PI_CODING_AGENT_DIR": "/x", "OMP_PROFILE": "p"}, "/h/.omp/profiles/p/agent/sessions"),
    ],
)
def test_omp_resolves_its_root_as_omp_does(env: dict[str, str], first: str) -> None:
    roots = omp_session_roots(env, HOME)
    assert roots[0].path == first and {r.agent for r in roots} == {"omp"}
    assert roots[-1].path == "/h/.omp/agent/sessions"  # sessions written before a setting changed


def test_omp_xdg_data_home_only_when_it_exists(tmp_path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path)}
    assert omp_session_roots(env, HOME)[0].path == "/h/.omp/agent/sessions"
    os.mkdir(tmp_path / "omp")
    assert omp_session_roots(env, HOME)[0].path == str(tmp_path / "omp" / "sessions")


def test_a_root_both_write_is_pis_and_listed_once() -> None:
    roots = _roots({"PI_CODING_AGENT_DIR": "/a"})
    assert roots[0] == ("/a/sessions", "default", "pi")
    assert [r[0] for r in roots].count("/a/sessions") == 1


def test_agent_of_a_session_is_its_roots() -> None:
    roots = discover_roots({}, HOME)
    assert agent_of("/h/.omp/agent/sessions/--w--/1_a.jsonl", roots) == "omp"
    assert agent_of("/h/.pi/agent/sessions/--w--/1_a.jsonl", roots) == "pi"
    assert agent_of("/elsewhere/1_a.jsonl", roots) == "pi"
