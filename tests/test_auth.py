"""Workspace-root authorization (the seed's rules)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, strategies as st

from piwatchd.model.subtree import is_under
from piwatchd.serve.auth import ScopeError, git_root, resolve_scope


@pytest.mark.parametrize(
    "path, root, expected",
    [
        ("/a/proj", "/a/proj", True),
        ("/a/proj/sub/x", "/a/proj", True),
        ("/a/proj2", "/a/proj", False),
        ("/a/proj-x", "/a/proj", False),
        ("/a", "/a/proj", False),
        ("/anything", "/", True),
        ("/a/proj/", "/a/proj/", True),
    ],
)
def test_is_under_component_boundary(path, root, expected):
    assert is_under(path.rstrip("/") or "/", root) is expected


seg = st.text(alphabet="ab-_.x", min_size=1, max_size=4).filter(lambda s: s not in (".", ".."))


@given(st.lists(seg, min_size=1, max_size=4), st.lists(seg, min_size=1, max_size=4))
def test_is_under_matches_component_prefix(a, b):
    path, root = "/" + "/".join(a), "/" + "/".join(b)
    assert is_under(path, root) == (a[: len(b)] == b)


def test_root_resolution_order(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    sub = repo / "pkg" / "mod"
    sub.mkdir(parents=True)
    plain = tmp_path / "plain"
    plain.mkdir()
    real = os.path.realpath
    assert resolve_scope({"cwd": str(sub)}).roots == (real(repo),)  # git worktree root
    assert resolve_scope({"cwd": str(plain)}).roots == (real(plain),)  # no git: the cwd
    assert resolve_scope({"cwd": str(sub), "workspaceRoot": str(sub)}).roots == (real(sub),)  # explicit wins
    assert resolve_scope({"cwd": str(sub)}, configured_roots=[str(repo / "pkg")]).roots == (real(repo / "pkg"),)
    assert resolve_scope({"all": True}).roots is None
    assert git_root(str(plain)) in (None, real("/")) or not git_root(str(plain)).startswith(str(tmp_path))


def test_symlinks_are_resolved(tmp_path):
    target = tmp_path / "real"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    assert resolve_scope({"cwd": str(link)}).roots == (os.path.realpath(target),)


@pytest.mark.parametrize(
    "caller", [None, "x", {}, {"cwd": "relative/path"}, {"workspaceRoot": 3}, {"cwd": "/x", "extraRoots": "/y"}]
)
def test_bad_callers_are_clear_errors(caller):
    with pytest.raises(ScopeError):
        resolve_scope(caller)
