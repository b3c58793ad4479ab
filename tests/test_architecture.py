"""ARCHITECTURE.md names every module, and every module it names exists.

Each code directory has a section headed with its path (`## piwatchd/ ...`);
inside it, modules are named relative to that directory (`source/lines.py`).
An empty `__init__.py` needs no line; one with code does.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "ARCHITECTURE.md"
# Section heading path -> the suffix of the files it must name.
SECTIONS = {"piwatchd/": ".py", "client/piwatch/": ".py", "client/pi-extension/": ".ts"}
NAME = re.compile(r"`([\w./-]+\.(?:py|ts))`")


def sections(text: str) -> dict[str, str]:
    """Body of each `## <path>/` section, keyed by that path."""
    out = {}
    for match in re.finditer(r"^## (\S+/)[^\n]*\n(.*?)(?=^## |\Z)", text, re.M | re.S):
        out[match.group(1)] = match.group(2)
    return out


def modules(folder: str, suffix: str) -> set[str]:
    root = REPO / folder
    found = set()
    for path in root.rglob(f"*{suffix}"):
        rel = path.relative_to(root)
        if "node_modules" in rel.parts or "__pycache__" in rel.parts:
            continue
        if path.name == "__init__.py" and not path.read_text().strip():
            continue  # an empty package marker has no role to describe
        found.add(rel.as_posix())
    return found


def named(folder: str, body: str) -> tuple[set[str], set[str]]:
    """Names in a section: its own modules (relative to its folder, with its suffix), and
    references elsewhere (`tests/...` from the repository, `paths.py` from the TypeScript section)."""
    local, other = set(), set()
    for name in NAME.findall(body):
        own = name.endswith(SECTIONS[folder]) and not name.startswith(("tests/", "bench/"))
        (local if own else other).add(name)
    return local, other


def test_every_section_exists():
    missing = set(SECTIONS) - set(sections(DOC.read_text()))
    assert not missing, (
        f"ARCHITECTURE.md lacks the section(s) {sorted(missing)}: add a `## <path> (...)` heading for each"
    )


def test_every_module_is_named_in_its_section():
    problems = []
    found_sections = sections(DOC.read_text())
    for folder, suffix in SECTIONS.items():
        local, _ = named(folder, found_sections.get(folder, ""))
        for module in sorted(modules(folder, suffix) - local):
            problems.append(f"{folder}{module}: under '## {folder}' add the line:  - `{module}`: <its role>")
    assert not problems, "ARCHITECTURE.md does not name every module:\n" + "\n".join(problems)


def test_every_named_module_exists():
    problems = []
    for folder, body in sections(DOC.read_text()).items():
        if folder not in SECTIONS:
            continue
        local, repo_wide = named(folder, body)
        for name in sorted(local):
            if not (REPO / folder / name).is_file():
                problems.append(
                    f"`{name}` under `## {folder}`: {folder}{name} does not exist (renamed or removed? fix the line)"
                )
        for name in sorted(repo_wide):
            if not any((base / name).is_file() for base in [REPO, *(REPO / f for f in SECTIONS)]):
                problems.append(f"`{name}` under `## {folder}` does not exist anywhere")
    assert not problems, "ARCHITECTURE.md names modules that are not there:\n" + "\n".join(problems)
