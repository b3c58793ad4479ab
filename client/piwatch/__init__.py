"""piwatch: the client side of piwatchd.

    from piwatch import Client
    with Client(caller={"cwd": "/work/proj"}) as c:
        c.search("flaky websocket")

This package never imports `piwatchd` at import time; the CLI's direct-index
fallback imports it lazily.
"""

__version__ = "0.1.0"

from .client import (
    Client,
    DaemonNotRunning,
    LocalTransport,
    NotFound,
    PiwatchError,
    ProtocolMismatch,
    QueryError,
    RequestFailed,
    SocketTransport,
    Transport,
)
from .protocol import PROTOCOL_VERSION

__all__ = [
    "__version__",
    "Client",
    "Transport",
    "SocketTransport",
    "LocalTransport",
    "PiwatchError",
    "DaemonNotRunning",
    "ProtocolMismatch",
    "RequestFailed",
    "NotFound",
    "QueryError",
    "PROTOCOL_VERSION",
]
