"""ARCHITECTURE.md names every module, and every module it names exists.

Each code directory has a section headed with its path (`## piwatchd/ ...`);
inside it, modules are named relative to that directory (`source/lines.py`).
An empty `__init__.py` needs no line; one with code does.
"""

from __future__ import annotations

import ast
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


# -- each module's docstring says what its line says ----------------------------------

_STOP = frozenset(
    {
        "the",
        "a",
        "an",
        "of",
        "and",
        "or",
        "to",
        "in",
        "on",
        "for",
        "with",
        "by",
        "from",
        "as",
        "is",
        "are",
        "its",
        "it",
        "be",
        "this",
        "that",
        "at",
        "one",
        "each",
        "every",
        "no",
        "not",
    }
)
_LINE = re.compile(r"^\s*- `([\w./]+\.py)`[^:\n]*:\s*(.*)$", re.M)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z][a-z0-9_]+", text.lower()) if len(w) > 2 and w not in _STOP}


def module_lines(folder: str) -> dict[str, str]:
    """{module: its own line in the section}, for modules that have a line."""
    return {m.group(1): m.group(2) for m in _LINE.finditer(sections(DOC.read_text()).get(folder, ""))}


def test_every_daemon_module_has_a_docstring_that_agrees_with_its_line():
    """Every non-empty module says what it is in a docstring, and the docstring
    and the module's line in ARCHITECTURE.md describe the same thing (they
    share at least two significant words): a module that changed role, or a
    line copied to the wrong module, fails here."""
    lines = module_lines("piwatchd/")
    problems = []
    for module in sorted(modules("piwatchd/", ".py")):
        source = (REPO / "piwatchd" / module).read_text()
        doc = ast.get_docstring(ast.parse(source))
        if not doc:
            problems.append(f"piwatchd/{module}: no module docstring (say what the module is for)")
        elif module in lines and len(_words(doc) & _words(lines[module])) < 2:
            problems.append(
                f"piwatchd/{module}: its docstring and its ARCHITECTURE.md line disagree: {lines[module]!r}"
            )
    assert not problems, "\n".join(problems)


# -- no import cycles -----------------------------------------------------------------


def import_graph() -> dict[str, set[str]]:
    """Module -> the piwatchd modules it imports at import time (module level;
    imports inside functions and under TYPE_CHECKING are deliberate and lazy)."""
    root = REPO / "piwatchd"
    mods: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps: set[str] = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            for n in ast.walk(node):
                if isinstance(n, ast.ImportFrom):
                    base = package[: len(package) - n.level + 1] if n.level else []
                    source = ".".join(base + ([n.module] if n.module else []))
                    for alias in n.names:
                        deps.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in mods else source)
                elif isinstance(n, ast.Import):
                    deps.update(alias.name for alias in n.names)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_cycles_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_in_the_daemon_package():
    graph = import_graph()
    assert graph.get("piwatchd.ingest.service"), "the graph must see imports"
    found = cycles(graph)
    assert not found, "import cycles (break them, or import lazily inside the function that needs it):\n" + "\n".join(
        " -> ".join(c) for c in found
    )


# -- sizes: functions under 60 lines, modules under 500 -------------------------------

MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 500
# Pure tables may be longer: the redaction rules are one table, read top to bottom.
MODULE_SIZE_EXEMPT = {"piwatchd/model/redact.py"}
CODE = ("piwatchd", "client/piwatch")


def python_files() -> list[Path]:
    return sorted(p for folder in CODE for p in (REPO / folder).rglob("*.py") if "__pycache__" not in p.parts)


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int, int]]:
    """(qualified name, first line, length) of each function longer than `limit`
    lines, decorators included; a nested function counts on its own too."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    length = (child.end_lineno or child.lineno) - first + 1
                    if length > limit:
                        found.append((name, first, length))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def test_long_functions_finds_a_long_function():
    body = "\n".join(f"        x{i} = {i}" for i in range(60))
    source = f"class C:\n    @staticmethod\n    def short():\n        pass\n\n    def long(self):\n{body}\n"
    assert long_functions(source) == [("C.long", 6, 61)]
    assert long_functions(source, limit=61) == []


def test_no_function_over_60_lines():
    problems = []
    for path in python_files():
        for name, line, length in long_functions(path.read_text()):
            problems.append(f"{path.relative_to(REPO)}:{line}: {name} has {length} lines (split it into named steps)")
    assert not problems, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(problems)


def test_no_module_over_500_lines():
    problems = []
    for path in python_files():
        rel = path.relative_to(REPO).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES and rel not in MODULE_SIZE_EXEMPT:
            problems.append(f"{rel}: {lines} lines (split it by role)")
    for rel in sorted(MODULE_SIZE_EXEMPT):
        assert (REPO / rel).is_file(), f"{rel} is exempt from the size limit but does not exist"
    assert not problems, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(problems)


# Functions of more than 6 parameters (self and cls aside) in piwatchd/: each
# is a call nobody reads at a glance; group what belongs together (a typed
# NamedTuple or dataclass) instead. Lower the ceiling as they go (issue 29 asked <= 3).
MAX_PARAMS = 6
MANY_PARAMS_CEILING = 2


def many_params(source: str, limit: int = MAX_PARAMS) -> list[tuple[str, int]]:
    """(function, parameters) of each function taking more than `limit`."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            names = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
            names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
            if names[:1] in (["self"], ["cls"]):
                names = names[1:]
            if len(names) > limit:
                out.append((node.name, len(names)))
    return out


def test_many_params_counts_past_self():
    source = "class C:\n    def f(self, a, b, c, d, e, f): ...\n    def g(self, a, b, *, c, d, e, f, g): ...\n"
    assert many_params(source) == [("g", 7)]


def test_few_functions_take_more_than_6_parameters():
    found = [
        f"{path.relative_to(REPO).as_posix()}: {name} ({n})"
        for path in sorted((REPO / "piwatchd").rglob("*.py"))
        for name, n in many_params(path.read_text())
    ]
    assert len(found) <= MANY_PARAMS_CEILING, "functions of more than 6 parameters:\n" + "\n".join(found)
