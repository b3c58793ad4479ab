"""Indexed events re-projected from their source lines.

With the Tantivy engine the read model keeps no fragment text: snippets and
re-fed documents come from the source file through each event's locator
(byte offset, length, fingerprint), projected by the same `project_entry`
that indexing uses. A line whose bytes no longer match its fingerprint is
skipped: the file was rewritten, and its rebuild re-feeds the session.
"""

from __future__ import annotations

import json
import os
import sqlite3

from ..model import Entry, Event
from ..project import project_entry
from ..source.lines import RawLine, decode_line
from ..source.parser import line_fingerprint
from .redaction import index_rules

__all__ = ["project_rows", "verified_line"]


def verified_line(fd: int, offset: int, length: int, fingerprint: str) -> bytes | None:
    """The line at [offset, offset+length) without its newline, or None when
    the bytes there are not the indexed line any more."""
    try:
        data = os.pread(fd, length, offset)
    except OSError:
        return None
    line = data[:-1] if data.endswith(b"\n") else data
    if line.endswith(b"\r"):
        line = line[:-1]
    if len(data) != length or line_fingerprint(line) != fingerprint:
        return None
    return line


def project_rows(conn: sqlite3.Connection, event_rowids: list[int]) -> dict[int, Event]:
    """{event rowid: Event} for the rows whose source line still verifies."""
    by_path: dict[str, list[tuple]] = {}
    for row in conn.execute(
        "SELECT e.event_rowid, e.session_id, e.entry_id, e.parent_id, e.type, e.ordinal, e.byte_offset, e.byte_len,"
        " e.fingerprint, e.id_recorded, src.path FROM events e JOIN sessions s ON s.session_id = e.session_id"
        " JOIN sources src ON src.source_id = s.source_id"
        " WHERE e.event_rowid IN (SELECT value FROM json_each(?))", (json.dumps(event_rowids),)):
        by_path.setdefault(row[10], []).append(row)
    out: dict[int, Event] = {}
    rules = index_rules(conn)  # the rules that redacted the indexed text
    for path, rows in by_path.items():
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            for rowid, sid, eid, parent, etype, ordinal, offset, length, fp, id_recorded, _ in sorted(rows, key=lambda r: r[6]):
                line = verified_line(fd, offset, length, fp)
                if line is None:
                    continue
                value = decode_line(RawLine(offset, line)).value
                data = value if isinstance(value, dict) else {}
                entry = Entry(eid, parent, etype, ordinal, offset, length, fp, data, bool(id_recorded))
                out[rowid] = project_entry(sid, entry, rules)
        finally:
            os.close(fd)
    return out
