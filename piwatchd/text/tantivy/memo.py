"""How long a word's remembered analyses and statistics stay good (pure).

`TantivyText.memo` keeps each query word's analyses and counts for the
searcher generation; this module says which of them a disk commit may
leave as they are (the rule below), so a busy writer's commits once a
second do not make every question pay for its words again.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

__all__ = ["MEMO_MAX", "COUNT_FIELDS", "COUNT_DRIFT", "lasts"]

# Words' analyses and statistics remembered (`TantivyText.memo`), at most this many.
MEMO_MAX = 4096
# What a disk commit may change of a remembered value, by the kind its key
# names first (`lasts`). A word's analysis ("forms") reads the analyzers
# only: no commit changes it. A count of the documents holding a word ("df"),
# or of all those of a caller's scope ("docs", `scope.scope_docs`: ~4 ms of a
# workspace caller's question on 1 GB, paid again after every commit of a
# live session before), moves by at most COUNT_FIELDS for each document
# added or deleted since (a stem's count sums three fields); it is kept
# while that bound stays within 1/COUNT_DRIFT of it, so a partial-tier
# weight (its IDF) moves by under 0.04 and a word found stays found. A zero
# is never kept: the next commit may hold the word (the bound says so), and
# whether a word has postings decides its repairs.
# Everything else (derivations and repairs: which words the term dictionary
# lists) is computed again after any change, as is every count after a
# reload of another process's commits (`refresh`: by how much is unknown).
_ANALYSES = frozenset({"forms"})
_COUNTS = frozenset({"df", "docs"})
COUNT_FIELDS = 3
COUNT_DRIFT = 32


def lasts(kind: Hashable, value: Any, changed: int, reloaded: bool) -> bool:
    """Whether a value `memo` remembered is still good after `changed`
    documents were added or deleted (`reloaded`: by an unknown number);
    the rule is MEMO_MAX's comment."""
    if kind in _ANALYSES:
        return True
    if reloaded:
        return False
    if changed == 0:
        return True
    return kind in _COUNTS and type(value) is int and changed * COUNT_FIELDS * COUNT_DRIFT <= value
