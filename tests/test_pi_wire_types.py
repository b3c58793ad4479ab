"""The Pi extension's TypeScript types (client/pi-extension/wire.ts) match the
wire contract's JSON Schema (client/piwatch/wire_schema.json, generated from
piwatch.wire): every message type the extension sends or reads has an
interface with exactly the schema's fields, the same required-ness (`?`), the
same nullability and the same TypeScript rendering of each field's type."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WIRE_TS = REPO / "client" / "pi-extension" / "wire.ts"
SCHEMA = json.loads((REPO / "client" / "piwatch" / "wire_schema.json").read_text())
DEFS = SCHEMA["$defs"]
# The operations the extension calls (index.ts; hello in daemon-client.ts).
EXTENSION_OPS = ("hello", "search", "read", "trace")
# Standing queries: typed here too, for TypeScript clients of the socket (README, Protocol).
STREAM_OPS = ("follow", "unfollow")


def _ref(node: dict) -> str:
    return node["$ref"].rsplit("/", 1)[-1]


def ts_type(p: dict) -> str:
    """How a schema type is written in wire.ts."""
    if "$ref" in p:
        return _ref(p)
    if "anyOf" in p:
        return " | ".join(ts_type(a) for a in p["anyOf"])
    if "enum" in p:
        return " | ".join(json.dumps(v) for v in p["enum"])
    t = p.get("type")
    if t == "array":
        if "prefixItems" in p:
            return "[" + ", ".join(ts_type(x) for x in p["prefixItems"]) + "]"
        inner = ts_type(p["items"])
        return f"({inner})[]" if "|" in inner else f"{inner}[]"
    return {
        "null": "null",
        "string": "string",
        "integer": "number",
        "number": "number",
        "boolean": "boolean",
        "object": "Record<string, unknown>",
    }.get(t, "unknown")


def parse_interfaces(text: str) -> dict[str, dict[str, tuple[bool, str]]]:
    """interface name -> field -> (required, type), in the layout wire.ts promises."""
    out: dict[str, dict[str, tuple[bool, str]]] = {}
    for m in re.finditer(r"^export interface (\w+) \{\n(.*?)^\}$", text, re.M | re.S):
        fields = {}
        for line in m.group(2).splitlines():
            f = re.fullmatch(r"\t(\w+)(\??): (.+);", line)
            assert f, f"wire.ts, interface {m.group(1)}: cannot read the line {line!r} (one `name?: type;` per line)"
            fields[f.group(1)] = (f.group(2) == "", f.group(3))
        out[m.group(1)] = fields
    return out


def reachable() -> set[str]:
    """Schema types the extension meets: its ops' args and results, the response envelope, the caller."""
    seen: set[str] = set()

    def walk(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        stack: list = [DEFS[name]]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if "$ref" in node:
                    walk(_ref(node))
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)

    for op in EXTENSION_OPS + STREAM_OPS:
        walk(_ref(SCHEMA["ops"][op]["args"]))
        walk(_ref(SCHEMA["ops"][op]["result"]))
    for pushed in SCHEMA["pushed"].values():
        walk(_ref(pushed))
    walk(_ref(SCHEMA["response"]))
    walk(_ref(SCHEMA["caller"]))
    return seen


def test_every_message_type_the_extension_meets_has_an_interface():
    interfaces = parse_interfaces(WIRE_TS.read_text())
    missing = sorted(reachable() - set(interfaces))
    assert not missing, f"wire.ts lacks interfaces for {missing} (schema $defs of the same names)"
    unknown = sorted(set(interfaces) - set(DEFS))
    assert not unknown, f"wire.ts has interfaces the contract does not define: {unknown}"


def test_fields_required_ness_and_types_match_the_schema():
    problems = []
    for name, fields in parse_interfaces(WIRE_TS.read_text()).items():
        schema = DEFS.get(name, {})
        props, required = schema.get("properties", {}), set(schema.get("required", []))
        for field in sorted(set(props) - set(fields)):
            problems.append(
                f"{name}.{field}: in the schema, missing in wire.ts (add `{field}{'' if field in required else '?'}: {ts_type(props[field])};`)"
            )
        for field in sorted(set(fields) - set(props)):
            problems.append(f"{name}.{field}: in wire.ts, not in the schema (remove it)")
        for field in sorted(set(fields) & set(props)):
            req, typ = fields[field]
            if req != (field in required):
                problems.append(f"{name}.{field}: required in {'wire.ts' if req else 'the schema'} only")
            if typ != ts_type(props[field]):
                problems.append(f"{name}.{field}: wire.ts says {typ}, the schema says {ts_type(props[field])}")
    assert not problems, "\n".join(problems)


def test_the_extension_reads_responses_through_these_types():
    src = REPO / "client" / "pi-extension"
    for name in ("format.ts", "daemon-client.ts", "tools.ts", "index.ts"):
        text = (src / name).read_text()
        assert re.search(r'^import type \{[^}]+\} from "\./wire\.ts";', text, re.M), name
    # Daemon results are never `any` (Pi's own objects still are: its API has no published types here).
    for name in ("format.ts", "tools.ts", "daemon-client.ts", "framing.ts"):
        assert not re.search(r":\s*any\b|<any>|as any\b", (src / name).read_text()), name


def _tsc() -> list[str]:
    """The pinned TypeScript compiler of tests/ts (installed with `npm ci` when its lockfile changed)."""
    import hashlib
    import subprocess
    import sys

    sys.path.insert(0, str(REPO / "tests" / "pi"))
    import pitools

    pitools.ensure_installed()  # pi-tui's types (history.ts imports it) come from Pi's own install in tests/pi
    ts = REPO / "tests" / "ts"
    stamp = ts / "node_modules" / ".piwatch-stamp"
    want = hashlib.sha256((ts / "package-lock.json").read_bytes()).hexdigest()
    if not stamp.is_file() or stamp.read_text() != want:
        proc = subprocess.run(
            [pitools.find_npm(), "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
            cwd=ts,
            env=pitools.node_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, f"npm ci in {ts} failed:\n{proc.stderr[-3000:]}"
        stamp.write_text(want)
    return [
        pitools.find_node(),
        str(ts / "node_modules" / "typescript" / "bin" / "tsc"),
        "-p",
        str(ts / "tsconfig.json"),
    ]


def test_the_extension_type_checks_in_strict_mode():
    """`tsc --strict` over client/pi-extension: the types above are used, not just written down
    (a misspelt field of a daemon result is a compile error here)."""
    import subprocess

    proc = subprocess.run(_tsc(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"tsc found type errors in client/pi-extension:\n{proc.stdout}{proc.stderr}"


def test_the_tools_enums_are_the_wires_filter_values():
    # The model is offered exactly the values the daemon accepts (any other is a bad request).
    from piwatch.wire import FILTER_VALUES

    text = (REPO / "client" / "pi-extension" / "tools.ts").read_text()

    def ts_list(name: str) -> tuple[str, ...]:
        body = re.search(rf"^const {name} = \[(.*?)\];", text, re.M | re.S).group(1)
        return tuple(re.findall(r'"([^"]+)"', body))

    names = {"kind": "KINDS", "role": "ROLES", "branchState": "BRANCH_STATES", "selectionState": "SELECTION_STATES"}
    assert {k: ts_list(v) for k, v in names.items()} == {k: FILTER_VALUES[k] for k in names}
