"""systemd readiness and watchdog notifications, without a dependency.

One datagram per message to `$NOTIFY_SOCKET` (a leading `@` is the abstract
namespace). Outside systemd every call is a cheap no-op.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

__all__ = ["notify", "watchdog_interval"]


def notify(message: str, env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    address = env.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
        return True
    except OSError:
        return False


def watchdog_interval(env: Mapping[str, str] | None = None) -> float | None:
    """Seconds between WATCHDOG=1 pings (half of WatchdogSec), if enabled for us."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC")
    pid = env.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        return int(usec) / 2e6
    except ValueError:
        return None
