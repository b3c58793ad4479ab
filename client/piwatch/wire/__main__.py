"""`python -m piwatch.wire`: print the wire contract's JSON Schema (`wire_schema.json`)."""

from __future__ import annotations

from .contract import schema_text

__all__: list[str] = []

print(schema_text(), end="")
