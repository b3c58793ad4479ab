"""oh-my-pi (omp) session bytes as omp writes them, from its documented format."""

from __future__ import annotations

import json

__all__ = ["title_slot"]


def title_slot(title: str, size: int = 256) -> bytes:
    """omp's fixed-size title slot line (`serializeTitleSlot`): its first line,
    `size` bytes with the newline, padded by `pad`."""
    slot = {"type": "title", "v": 1, "title": title, "updatedAt": "2026-01-01T00:00:00Z", "pad": ""}
    line = json.dumps(slot, separators=(",", ":"), ensure_ascii=False)
    line = line.replace('"pad":""', '"pad":"' + " " * (size - len(line.encode()) - 1) + '"')
    return line.encode() + b"\n"
