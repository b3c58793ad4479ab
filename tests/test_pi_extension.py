"""The piwatch Pi extension end to end: the real Pi agent (1.6.0 and 0.73.1; SDK, scripted
faux model, no network) calls event_search, event_read and event_trace through
the extension installed by `piwatch pi install`, against a real `piwatchd`
subprocess indexing sessions written by Pi's own SessionManager. Assertions
read the session file Pi itself recorded.

Also: the daemon down, the wrong protocol and a daemon that never answers all
give a clear tool error (never a hang), the socket path agrees with the Python
client, and uninstall removes only what install added.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "pi"))
import pitools
from helpers.live import poll
from piwatch.client import Client, PiwatchError
from piwatch.protocol import MAX_REQUEST_BYTES, ProtocolError, encode_frame, recv_frame

pytestmark = [pytest.mark.pi, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parent.parent
EXT_SRC = REPO / "client" / "pi-extension"
RUNNER = REPO / "tests" / "pi_e2e" / "run_agent.mjs"
WORD = "zorblax"
PIWATCH_TOOLS = {"event_search", "event_read", "event_trace"}


def _env(**extra: str) -> dict[str, str]:
    env = pitools.node_env()
    env.pop("PIWATCH_SOCKET", None)
    env.update(extra)
    return env


def run_node(args: list, env: dict[str, str], timeout: float = 300) -> dict:
    proc = subprocess.run(
        [pitools.find_node(), str(RUNNER), *map(str, args)],
        cwd=RUNNER.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"run_agent.mjs {args[0]} failed:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout)


def piwatch_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "piwatch.cli", *args], env=env or _env(), capture_output=True, text=True, timeout=600
    )


def read_entries(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def tool_results(entries: list[dict]) -> dict[str, dict]:
    """toolCallId -> the toolResult message Pi recorded."""
    return {
        e["message"]["toolCallId"]: e["message"]
        for e in entries
        if e.get("type") == "message" and e["message"].get("role") == "toolResult"
    }


def entry_holding_call(entries: list[dict], call_id: str) -> str:
    for e in entries:
        m = e.get("message") or {}
        if m.get("role") == "assistant" and any(
            b.get("type") == "toolCall" and b.get("id") == call_id for b in m.get("content") or []
        ):
            return e["id"]
    raise AssertionError(f"no assistant entry holds {call_id}")


def referenced(value) -> set[tuple[str, str]]:
    """Every (sessionId, entryId) pair anywhere in a structured result."""
    out: set[tuple[str, str]] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if isinstance(v.get("sessionId"), str) and isinstance(v.get("entryId"), str):
                out.add((v["sessionId"], v["entryId"]))
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


# -- the world: earlier sessions, the installed extension, a running piwatchd ------------------


class World:
    tmp: Path
    proj: Path
    other: Path
    agent: Path
    sock: Path
    db: Path
    daemon: subprocess.Popen
    seeded: dict


def _wait_indexed(world: World, expected_sessions: int, timeout: float = 60) -> None:
    def indexed() -> bool:
        if world.daemon.poll() is not None:
            raise AssertionError(f"piwatchd exited {world.daemon.returncode}:\n{world.daemon.stderr.read()[-4000:]}")
        with Client(world.sock, timeout=5, caller={"all": True}) as c:
            return len(c.sessions().sessions) >= expected_sessions

    poll(
        indexed,
        timeout,
        interval=0.2,
        errors=(PiwatchError,),
        message=f"piwatchd at {world.sock} to serve and index {expected_sessions} sessions",
    )


@pytest.fixture(scope="module")
def world():
    pitools.ensure_installed()
    w = World()
    w.tmp = Path(tempfile.mkdtemp(dir="/tmp", prefix="pwx-"))
    w.proj, w.other, w.agent = w.tmp / "proj", w.tmp / "other", w.tmp / "agent"
    (w.proj / ".git").mkdir(parents=True)  # the project root is its Git root
    w.other.mkdir()
    w.seeded = run_node(
        ["seed", "--agent-dir", w.agent, "--cwd", w.proj, "--other-cwd", w.other, "--word", WORD], _env()
    )
    installed = piwatch_cli("pi", "install", "--agent-dir", str(w.agent), "--json")
    assert installed.returncode == 0, installed.stderr
    w.sock = w.tmp / "run" / "d.sock"
    w.sock.parent.mkdir(mode=0o700)  # piwatchd refuses a socket directory others can enter
    os.chmod(w.sock.parent, 0o700)
    w.db = w.tmp / "index.sqlite3"
    w.daemon = subprocess.Popen(
        [
            shutil.which("piwatchd", path=str(Path(sys.executable).parent)) or "piwatchd",
            "--sessions",
            str(w.agent / "sessions"),
            "--db",
            str(w.db),
            "--log-level",
            "warning",
        ],
        env=_env(PIWATCH_SOCKET=str(w.sock)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_indexed(w, expected_sessions=3)
        yield w
    finally:
        w.daemon.send_signal(signal.SIGTERM)
        try:
            w.daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            w.daemon.kill()
            w.daemon.wait()
        shutil.rmtree(w.tmp, ignore_errors=True)


def seeded(world: World, cwd: Path) -> list[dict]:
    return [s for s in world.seeded["sessions"] if s["cwd"] == str(cwd)]


# -- the end-to-end run ---------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["1.6.0", "0.73.1"])
def agent_run(world, request):
    target = next(s for s in seeded(world, world.proj) if "call" in s["ids"])
    out = run_node(
        [
            "agent",
            "--pi",
            request.param,
            "--agent-dir",
            world.agent,
            "--cwd",
            world.proj,
            "--word",
            WORD,
            "--expect-session",
            target["id"],
        ],
        _env(PIWATCH_SOCKET=str(world.sock)),
    )
    entries = read_entries(out["sessionFile"])
    return out, entries, tool_results(entries), target


def test_extension_is_discovered_where_piwatch_installed_it(world, agent_run):
    out, _, _, _ = agent_run
    assert out["errors"] == []
    assert out["extensions"] == [str(world.agent / "extensions" / "piwatch" / "index.ts")]
    assert out["pendingResponses"] == 0  # the model got through its whole script


def test_search_finds_this_project_and_never_the_other(world, agent_run):
    out, _entries, results, target = agent_run
    res = results["call_search_1"]
    assert res["isError"] is False, res["content"]
    pw = res["details"]["piwatch"]
    assert pw["v"] == 1 and pw["op"] == "search" and pw["args"]["query"] == WORD
    hits = pw["result"]["hits"]
    found = {(h["sessionId"], h["entryId"]) for h in hits}
    # Every WORD-bearing entry of the authorized earlier session is found.
    assert {(target["id"], target["ids"][k]) for k in ("user", "call", "result", "answer")} <= found
    other_ids = {s["id"] for s in seeded(world, world.other)}
    assert not {sid for sid, _ in found} & other_ids
    assert all(h["cwd"] == str(world.proj) for h in hits)
    text = res["content"][0]["text"]
    assert target["ids"]["result"] in text and f"«{WORD}»" in text and "Historical evidence" in text
    assert not any(oid[:13] in text for oid in other_ids) and "vault" not in text  # not even a short id
    # The running session is not searched unless asked for by id.
    assert out["sessionId"] not in {sid for sid, _ in found}


def test_read_and_trace_follow_a_hit(world, agent_run):
    _, _, results, target = agent_run
    read, trace = results["call_read_1"], results["call_trace_1"]
    assert read["isError"] is False and trace["isError"] is False, (read["content"], trace["content"])
    r = read["details"]["piwatch"]
    # The model took the ids from the search text: a short session id (a unique prefix) it names the session by.
    short = r["args"]["sessionId"]
    assert r["op"] == "read" and target["id"].startswith(short) and 8 <= len(short) < len(target["id"])
    assert r["result"]["sessionId"] == target["id"]
    eid = r["args"]["entryId"]
    assert r["result"]["entryId"] == eid and eid in target["ids"].values()
    assert WORD in "".join(c["text"] for c in r["result"]["content"])
    nb = r["result"]["neighbours"]
    assert len(nb["before"]) + len(nb["after"]) >= 1
    assert {sid for sid, _ in referenced(r["result"])} == {target["id"]}
    t = trace["details"]["piwatch"]
    assert t["op"] == "trace" and t["args"] == {"sessionId": short, "entryId": eid}
    assert t["result"]["sessionId"] == target["id"]
    assert t["result"]["node"]["entryId"] == eid
    assert {sid for sid, _ in referenced(t["result"])} == {target["id"]}
    assert f"entry {eid}" in trace["content"][0]["text"]


def test_the_running_session_is_cut_at_the_invoking_entry(world, agent_run):
    out, entries, results, _ = agent_run
    own = out["sessionId"]
    order = [e["id"] for e in entries if "id" in e]
    for call_id, res in results.items():
        if res["toolName"] not in PIWATCH_TOOLS:
            continue
        pw = res["details"]["piwatch"]
        invoking = entry_holding_call(entries, call_id)
        assert pw["cutoffEntryId"] == invoking, call_id
        cut = order.index(invoking)
        for sid, eid in referenced(pw["result"]):
            if sid == own:
                assert order.index(eid) < cut, f"{call_id} returned its own entry {eid} at/after the cutoff"
    # Asked explicitly for its own session, the agent sees its earlier turn but not the invoking entry
    # (whose tool call holds WORD too) or anything later, and not piwatch's own earlier results.
    own_hits = results["call_search_self"]["details"]["piwatch"]["result"]["hits"]
    assert own_hits and {h["sessionId"] for h in own_hits} == {own}
    prompt = next(e["id"] for e in entries if e.get("message", {}).get("role") == "user")
    assert prompt in {h["entryId"] for h in own_hits}
    hidden = {entry_holding_call(entries, "call_search_self")} | {
        e["id"] for e in entries if e.get("message", {}).get("role") == "toolResult"
    }
    assert not hidden & {h["entryId"] for h in own_hits}


def test_outputs_are_bounded(agent_run):
    _, _, results, _ = agent_run
    for res in results.values():
        assert len(res["content"][0]["text"].encode()) <= 50_000
        assert len(json.dumps(res["details"]).encode()) <= 64_000


# -- failures are clear and bounded ------------------------------------------------------------


def _single_search(world: World, sock: Path, steps: str = "search", **env: str) -> tuple[dict, float]:
    started = time.monotonic()
    out = run_node(
        ["agent", "--agent-dir", world.agent, "--cwd", world.proj, "--word", WORD, "--steps", steps],
        _env(PIWATCH_SOCKET=str(sock), **env),
        timeout=120,
    )
    res = tool_results(read_entries(out["sessionFile"]))["call_search_1"]
    return res, time.monotonic() - started


def _assert_clean_error(res: dict) -> str:
    assert res["isError"] is True
    text = res["content"][0]["text"]
    assert "    at " not in text and "node:" not in text  # no stack trace
    return text


def test_daemon_down_is_a_clear_error(world):
    res, _ = _single_search(world, world.tmp / "nowhere.sock")
    text = _assert_clean_error(res)
    assert "piwatchd is not running" in text and "`piwatchd`" in text and "piwatch service install" in text


class FakeDaemon:
    """A Unix-socket peer that misbehaves on purpose."""

    def __init__(self, path: Path, mode: str) -> None:
        self.path, self.mode = path, mode
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.mode == "old-protocol":
                try:
                    hello = recv_frame(conn, MAX_REQUEST_BYTES)
                    conn.sendall(
                        encode_frame(
                            {
                                "id": hello["id"],
                                "ok": False,
                                "error": {"code": "unsupported_protocol", "message": "this piwatchd speaks protocol 2"},
                            }
                        )
                    )
                except (OSError, ProtocolError):
                    pass
            # "silent": accept and never answer

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


def test_wrong_protocol_is_a_clear_error(world):
    fake = FakeDaemon(world.tmp / "old.sock", "old-protocol")
    try:
        res, _ = _single_search(world, fake.path)
    finally:
        fake.close()
    text = _assert_clean_error(res)
    assert "protocol" in text and "piwatch pi install" in text


def test_silent_daemon_times_out(world):
    fake = FakeDaemon(world.tmp / "silent.sock", "silent")
    try:
        res, seconds = _single_search(world, fake.path, PIWATCH_PI_TIMEOUT_MS="1500")
    finally:
        fake.close()
    text = _assert_clean_error(res)
    assert "did not answer" in text
    assert seconds < 60


def test_abort_cancels_a_waiting_request(world):
    fake = FakeDaemon(world.tmp / "slow.sock", "silent")
    try:
        res, seconds = _single_search(world, fake.path, steps="abort", PIWATCH_PI_TIMEOUT_MS="60000")
    finally:
        fake.close()
    text = _assert_clean_error(res)
    assert "cancelled" in text
    assert seconds < 30  # the 60 s deadline was not what ended it


# -- the socket path and the installer ---------------------------------------------------------------


def _paths(env: dict[str, str]) -> tuple[str, str]:
    node = subprocess.run(
        [
            pitools.find_node(),
            "-e",
            f"import({json.dumps(str(EXT_SRC / 'socket-path.ts'))}).then(m => console.log(m.socketPath()))",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    py = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", "from piwatch.paths import socket_path; print(socket_path())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert node.returncode == 0 and py.returncode == 0, node.stderr + py.stderr
    return node.stdout.strip(), py.stdout.strip()


def test_socket_path_matches_the_python_client(short_tmp):
    private = short_tmp / "xdg"
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)
    loose = short_tmp / "loose"
    loose.mkdir()
    os.chmod(loose, 0o755)
    deep = short_tmp / ("d" * 90)
    deep.mkdir(mode=0o700)
    os.chmod(deep, 0o700)
    base = _env()
    for key in ("XDG_RUNTIME_DIR", "PIWATCH_RUNTIME_DIR"):
        base.pop(key, None)
    cases = {
        "xdg": {"XDG_RUNTIME_DIR": str(private)},
        "xdg not private": {"XDG_RUNTIME_DIR": str(loose)},
        "xdg unset": {},
        "too long": {"XDG_RUNTIME_DIR": str(deep)},
        "override": {"PIWATCH_SOCKET": str(short_tmp / "x.sock")},
        "runtime override": {"PIWATCH_RUNTIME_DIR": str(short_tmp / "rt")},
    }
    seen = {}
    for name, extra in cases.items():
        node_path, py_path = _paths({**base, **extra})
        assert node_path == py_path, name
        seen[name] = node_path
    assert seen["xdg"] == str(private / "piwatch" / "piwatchd.sock")
    assert seen["xdg not private"] != str(loose / "piwatch" / "piwatchd.sock")
    assert seen["too long"] == f"/tmp/piwatch-{os.getuid()}/piwatchd.sock"


def test_history_escapes_exactly_what_the_cli_escapes():
    """history-view.ts's `visibleControls` mirrors `piwatch.colour.visible_controls`:
    over every code point, the same characters escaped, the same way."""
    from piwatch.colour import visible_controls

    script = (
        f"const {{ visibleControls: v }} = await import({json.dumps(str(EXT_SRC / 'history-view.ts'))});"
        "const out = {};"
        "for (let c = 0; c < 0x110000; c++) {"
        "  if (c >= 0xd800 && c < 0xe000) continue;"
        "  const s = String.fromCodePoint(c);"
        "  if (v(s) !== s) out[c] = v(s);"
        "}"
        "console.log(JSON.stringify(out));"
    )
    node = subprocess.run(
        [pitools.find_node(), "--input-type=module", "-e", script],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert node.returncode == 0, node.stderr
    ts = {int(c): shown for c, shown in json.loads(node.stdout).items()}
    py = {}
    for c in (*range(0xD800), *range(0xE000, 0x110000)):
        if (shown := visible_controls(chr(c))) != chr(c):
            py[c] = shown
    assert ts == py
    for c in (0x1B, 0x9B, 0x202E, 0x2066, 0x200F, 0x061C, 0x200B, 0x2060, 0xFEFF, 0xE0041):
        assert c in py, hex(c)  # the characters, among them


def test_uninstall_removes_only_what_install_added(short_tmp):
    agent = short_tmp / "agent"
    (agent / "extensions").mkdir(parents=True)
    (agent / "extensions" / "mine.ts").write_text("export default () => {}\n")
    assert piwatch_cli("pi", "install", "--agent-dir", str(agent)).returncode == 0
    target = agent / "extensions" / "piwatch"
    assert (target / "index.ts").read_bytes() == (EXT_SRC / "index.ts").read_bytes()
    assert (target / "node_modules" / "@msgpack" / "msgpack" / "package.json").is_file()
    status = json.loads(piwatch_cli("pi", "status", "--agent-dir", str(agent), "--json").stdout)
    assert status["installed"] and status["dependencyInstalled"] and status["sourceDiffers"] == []
    (target / "notes.txt").write_text("the user's own file\n")
    # Reinstalling over our own install is fine; over a foreign directory it is refused.
    assert piwatch_cli("pi", "install", "--agent-dir", str(agent)).returncode == 0
    assert piwatch_cli("pi", "uninstall", "--agent-dir", str(agent)).returncode == 0
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    assert (agent / "extensions" / "mine.ts").is_file()
    refused = piwatch_cli("pi", "install", "--agent-dir", str(agent))
    assert refused.returncode == 1 and "not made by" in refused.stderr
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    (target / "notes.txt").unlink()
    assert piwatch_cli("pi", "install", "--agent-dir", str(agent)).returncode == 0
    assert piwatch_cli("pi", "uninstall", "--agent-dir", str(agent)).returncode == 0
    assert target.is_dir() and not any(target.iterdir())  # it existed before the install: not ours to remove
    assert (agent / "extensions" / "mine.ts").is_file()
