"""The public surface is explicit and the layering holds."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import piwatch
import piwatch.cli
import pytest

import piwatchd


def modules(package):
    yield package.__name__
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if info.name.endswith("pi_extension"):
            continue
        yield info.name


@pytest.mark.parametrize("name", sorted(set(modules(piwatchd)) | set(modules(piwatch))))
def test_every_module_declares_a_resolvable_all(name):
    module = importlib.import_module(name)
    if name.endswith("__main__") or name.split(".")[-1] in ("__init__",):
        return
    exported = getattr(module, "__all__", None)
    if hasattr(module, "__path__") and not Path(module.__file__ or "").read_text().strip():
        return  # a namespace-only package (an empty __init__.py)
    assert exported is not None, f"{name} has no __all__"
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.__all__ names missing {symbol}"


def test_client_package_never_imports_the_daemon():
    code = (
        "import sys, importlib, pkgutil, piwatch, piwatch.cli;"
        "[importlib.import_module(m.name) for m in pkgutil.walk_packages(piwatch.__path__, 'piwatch.') if 'pi_extension' not in m.name];"
        "piwatch.cli.build_parser();"
        "bad = [m for m in sys.modules if m == 'piwatchd' or m.startswith('piwatchd.')];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_top_level_exports():
    assert {"Client", "DaemonNotRunning", "NotFound", "QueryError"} <= set(piwatch.__all__)
    assert {"Client", "LocalTransport", "SocketTransport"} <= set(piwatch.__all__)
    assert {"index_once", "SearchRequest", "project_entry"} <= set(piwatchd.__all__)
    assert "search_index" not in piwatchd.__all__  # queries go through the api, with authorization


def test_every_command_has_help():
    for name in piwatch.cli.COMMANDS:
        out = subprocess.run([sys.executable, "-m", "piwatch.cli", name, "--help"], capture_output=True, text=True)
        assert out.returncode == 0 and "usage: piwatch" in out.stdout, name
    out = subprocess.run([sys.executable, "-m", "piwatchd.daemon", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--socket" in out.stdout
