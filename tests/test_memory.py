"""The daemon's heap upkeep (`piwatchd/memory.py`): glibc's per-thread caches off."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from piwatchd.memory import THREAD_CACHE_OFF, on_glibc, thread_cache_env


def test_thread_cache_env_adds_the_tunable():
    assert thread_cache_env({"HOME": "/h"}) == {"HOME": "/h", "GLIBC_TUNABLES": THREAD_CACHE_OFF}
    assert thread_cache_env({"GLIBC_TUNABLES": ""})["GLIBC_TUNABLES"] == THREAD_CACHE_OFF


def test_thread_cache_env_keeps_other_tunables_and_a_chosen_count():
    kept = thread_cache_env({"GLIBC_TUNABLES": "glibc.malloc.check=0"})
    assert kept is not None and kept["GLIBC_TUNABLES"] == f"glibc.malloc.check=0:{THREAD_CACHE_OFF}"
    # Set already (the second run), or the user chose a count: nothing to change, no second exec.
    assert thread_cache_env({"GLIBC_TUNABLES": THREAD_CACHE_OFF}) is None
    assert thread_cache_env({"GLIBC_TUNABLES": "glibc.malloc.tcache_count=3"}) is None


def test_thread_cache_env_off_glibc_changes_nothing():
    assert thread_cache_env({"HOME": "/h"}, on_glibc=False) is None


@pytest.mark.skipif(not (sys.platform == "linux" and on_glibc()), reason="glibc's tunables")
def test_running_daemon_has_thread_caches_off_under_its_own_pid(world):
    """The entry point ran itself again with the tunable, as the same process
    (the fixture waited for `status` to name the pid it started)."""
    assert world.proc is not None
    environ = Path(f"/proc/{world.proc.pid}/environ").read_bytes().split(b"\0")
    assert f"GLIBC_TUNABLES={THREAD_CACHE_OFF}".encode() in environ
    with world.client() as c:
        assert c.status().service.pid == world.proc.pid
