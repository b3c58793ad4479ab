"""Sessions as results (`group: "session"`), pure: ranked events grouped by
their session, sessions ranked by their strongest event.

The search ranks at most `GROUP_EVENTS_MAX` best events (the bound on the
cost); this module turns their session ids, best first, into the page of
sessions: for each, the index of its strongest event (the evidence, which
alone gets a snippet) and how many of the ranked events belong to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from piwatch.wire import GROUP_EVENTS_MAX

__all__ = ["GROUP_EVENTS_MAX", "SessionGroup", "SessionPager", "group_sessions"]


class SessionGroup(NamedTuple):
    session_id: str
    evidence: int  # index of the session's strongest event in the ranked list
    matching_events: int  # the session's events among the ranked ones


def group_sessions(ranked: Sequence[str], offset: int, limit: int) -> tuple[list[SessionGroup], bool]:
    """The page [offset, offset + limit) of sessions in the order of their
    first (strongest) event in `ranked` (session ids, best event first), and
    whether more sessions follow the page."""
    first: dict[str, int] = {}
    counts: dict[str, int] = {}
    for i, sid in enumerate(ranked):
        first.setdefault(sid, i)
        counts[sid] = counts.get(sid, 0) + 1
    order = list(first)  # dicts keep insertion order: by strongest event
    page = [SessionGroup(sid, first[sid], counts[sid]) for sid in order[offset : offset + limit]]
    return page, len(order) > offset + limit


class SessionPager:
    """The engines' row chooser for a grouped search: called with the ranked
    events' session ids (best first, up to GROUP_EVENTS_MAX + 1 to learn
    whether more matched), it keeps the page of sessions and returns the
    indices of their evidence events (the only rows that get snippets)."""

    def __init__(self, offset: int, limit: int, bound: int = GROUP_EVENTS_MAX) -> None:
        self.offset, self.limit, self.bound = offset, limit, bound
        self.page: list[SessionGroup] = []
        self.has_more = False
        self.grouped = 0
        self.capped = False

    def __call__(self, session_ids: Sequence[str]) -> list[int]:
        self.grouped = min(len(session_ids), self.bound)
        self.capped = len(session_ids) > self.bound
        self.page, self.has_more = group_sessions(session_ids[: self.bound], self.offset, self.limit)
        return [g.evidence for g in self.page]
