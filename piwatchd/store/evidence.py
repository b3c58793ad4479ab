"""An event's file evidence: its own `file_evidence` rows, and a tool result's
share of its call's (pure SQL building).

A tool result reads or changes what its call named, so it holds the call's
`tool-call` rows for its call id too (source `tool-result`, provenance
`derived`). Those are derived through the result's `tool-result-for` edge
when read, never copied: copies were half the file evidence rows. Trace, the
files filter and the text index's path fields all read evidence through
`event_files_sql`, the one definition of that derivation.

A UNION ALL view would say it once in SQL, but SQLite materializes a compound
view joined to events; two explicit arms keep each lookup on its indexes.
"""

from __future__ import annotations

__all__ = ["event_files_sql"]

# (holder alias, holder table, the evidence joined to it, source, provenance)
# of each arm. The holder is the event the evidence belongs to: the row's own
# event, or the result whose edge names the call.
_ARMS = (
    ("fe", "file_evidence fe", "", "fe.source", "fe.provenance"),
    (
        "r",
        "relationships r",
        " JOIN file_evidence fe ON fe.session_key = r.session_key AND fe.entry_id = r.target_entry_id"
        " AND fe.source = 'tool-call' AND fe.call_id = json_extract(r.detail, '$.toolCallId')",
        "'tool-result'",
        "'derived'",
    ),
)


def event_files_sql(columns: str, where: str, *, events: bool = False) -> str:
    """SQL selecting `columns` from every evidence row, own and inherited, that
    `where` admits. In both, `fe` is the evidence row; `{h}` names its holding
    event's alias (`{h}.session_key`, `{h}.entry_id`), `{source}` and
    `{provenance}` its source and provenance. `events`: join the holding event
    as `e`, first (a caller selecting by event rowid). The caller passes
    `where`'s parameters once per arm (twice)."""
    arms = []
    for holder, table, evidence, source, provenance in _ARMS:
        fill = {"h": holder, "source": source, "provenance": provenance}
        if events:
            table = f"events e JOIN {table} ON {holder}.session_key = e.session_key AND {holder}.entry_id = e.entry_id"
        inherited = " AND r.kind = 'tool-result-for'" if holder == "r" else ""
        arms.append(f"SELECT {columns.format(**fill)} FROM {table}{evidence} WHERE ({where.format(**fill)}){inherited}")
    return " UNION ALL ".join(arms)
