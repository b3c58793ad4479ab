"""The real Pi's interactive terminal UI in a pseudo-terminal, read through a
VT emulator (pyte): what a person would see on screen, and keys typed as a
terminal sends them. Used by tests/test_pi_history.py.

    with PiTerminal(cwd, env) as pi:
        pi.wait_for(lambda s: "v1.6.0" in s)
        pi.type("/history")
        ...
        text = pi.screen_text()
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pyte

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "pi"))
import pitools

__all__ = ["ENTER", "ESCAPE", "PiTerminal"]

ENTER = "\r"
ESCAPE = "\x1b"
# Each Pi version's `pi` command (its package.json "bin").
CLI = {
    "1.6.0": pitools.NODE_MODULES / pitools.PI_PACKAGE_DIRS["1.6.0"] / "dist" / "bundle" / "cli.js",
    "0.73.1": pitools.NODE_MODULES / pitools.PI_PACKAGE_DIRS["0.73.1"] / "dist" / "cli.js",
}


class PiTerminal:
    """`pi` (the CLI of Pi `version`) running in a pty of `columns` x `rows`, its output fed to a pyte screen."""

    def __init__(
        self, cwd: Path, env: dict[str, str], columns: int = 120, rows: int = 34, version: str = "1.6.0"
    ) -> None:
        self.version = version
        self.columns, self.rows = columns, rows
        self.screen = pyte.Screen(columns, rows)
        self.stream = pyte.ByteStream(self.screen)
        env = {**env, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": str(rows)}
        # No network: no model catalogue refresh, version check or telemetry.
        env.update(PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1", PI_TELEMETRY="0")
        node = pitools.find_node()
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: Pi, with the pty as its terminal
            try:
                os.chdir(cwd)
                os.execve(node, [node, str(CLI[version])], env)
            finally:
                os._exit(127)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

    def __enter__(self) -> PiTerminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pump(self, seconds: float = 0.05) -> None:
        """Feed whatever Pi wrote within `seconds` to the screen."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(0.0, left))
            if ready:
                try:
                    data = os.read(self.fd, 1 << 16)
                except OSError:  # Pi exited: the pty is gone
                    return
                if not data:
                    return
                self.stream.feed(data)
            elif left <= 0:
                return

    def screen_text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 20.0, what: str = "screen") -> str:
        deadline = time.monotonic() + timeout
        while True:
            self.pump(0.05)
            text = self.screen_text()
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen shows:\n{text}")

    def type(self, keys: str, per_key: float = 0.0) -> None:
        """Send keys as a terminal does, one at a time when `per_key` (seconds between keys)."""
        if not per_key:
            os.write(self.fd, keys.encode())
            return
        for k in keys:
            os.write(self.fd, k.encode())
            self.pump(per_key)

    def close(self) -> None:
        """End Pi: ctrl+d on an empty editor, then SIGTERM, then SIGKILL; always reaped."""
        try:
            os.write(self.fd, b"\x03\x04")
        except OSError:
            pass
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                try:
                    os.kill(self.pid, sig)
                except ProcessLookupError:
                    break
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                self.pump(0.05)
                done, _ = os.waitpid(self.pid, os.WNOHANG)
                if done:
                    os.close(self.fd)
                    return
        os.waitpid(self.pid, 0)
        os.close(self.fd)
