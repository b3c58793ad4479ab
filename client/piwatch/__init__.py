"""piwatch: the client side of piwatchd (CLI now; socket client with the daemon issue).

This package must never import `piwatchd` at import time.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
