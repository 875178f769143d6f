"""Which items a search returns, in which order: pure functions, no I/O.

One order for every search: with a query and an index, best score first (an item's score is its
best vector's), then the items without vectors; without a query, newest first. Ties keep the
listing's order, so pages of one order never overlap or skip an item while nothing is written.

A search needs ``offset + limit`` items, not all of them in order: each namespace directory's
candidates are walked in its (cached) order until that many pass the filter and are not
expired, and the directories' heads are merged. A search of 100,000 items for 10 results checks
about 10 of them, not 100,000 (unless the filter is selective).

>>> order, updated = ["a", "b", "c"], [10.0, 30.0, 20.0]
>>> walk(order, [0.1, None, 0.9], updated, lambda: newest_first(updated), lambda k: k != "c", 2)
[((0, -0.1), 'a', 0.1), ((1, -30.0), 'b', None)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langgraph_handoff.memory import index

__all__ = ["Chunk", "by_score", "merge", "newest_first", "walk"]

Rank = tuple[int, float]


def by_score(scores: Sequence[float | None]) -> list[int]:
    """Positions of the scored items, best first (ties in position order)."""
    scored = [i for i, s in enumerate(scores) if s is not None]
    if not index.numpy_available():
        return sorted(scored, key=lambda i: -scores[i])  # type: ignore[operator]
    import numpy as np

    values = np.fromiter((scores[i] for i in scored), dtype=np.float64, count=len(scored))
    return [scored[i] for i in np.argsort(-values, kind="stable").tolist()]


def walk(
    order: Sequence[str],
    scores: Sequence[float | None] | None,
    updated: Sequence[float],
    newest: Callable[[], Iterable[int]],
    keep: Callable[[str], bool],
    wanted: int,
) -> list[tuple[Rank, str, float | None]]:
    """The first ``wanted`` keys of one directory in search order that ``keep`` accepts, with
    their rank (comparable across directories) and score. ``updated`` is each position's update
    time and ``newest()`` the positions newest first (asked for only when needed); with ``scores`` the scored positions come
    first, best first, then the unscored ones, newest first."""
    out: list[tuple[Rank, str, float | None]] = []
    if wanted <= 0:
        return out
    if scores is not None:
        for i in by_score(scores):
            key = order[i]
            if keep(key):
                out.append(((0, -scores[i]), key, scores[i]))  # type: ignore[operator]
                if len(out) == wanted:
                    return out
    for i in newest():
        if scores is not None and scores[i] is not None:
            continue
        key = order[i]
        if keep(key):
            out.append(((1, -updated[i]), key, None))
            if len(out) == wanted:
                break
    return out


class Chunk:
    """What searches derive from one bucket's items at one set of versions: their order, update
    times and vectors ready to score. Keyed by the bucket's count and the sum of its ``(key,
    ETag)`` hashes, so it is never used for versions it was not built from."""

    __slots__ = ("_tables", "fingerprint", "order", "updated")

    def __init__(self, fingerprint: tuple[int, int], order: list[str], entries: Mapping[str, Any]) -> None:
        self.fingerprint = fingerprint
        self.order = order
        self.updated = [entries[k].updated for k in order]
        self._tables: dict[int, index.VectorTable] = {}

    def table(self, entries: Mapping[str, Any], dims: int) -> index.VectorTable:
        """The vectors of ``dims`` numbers (``entries`` holds these very versions)."""
        table = self._tables.get(dims)
        if table is None:
            table = self._tables[dims] = index.VectorTable([entries[k].vectors for k in self.order], dims)
        return table


def newest_first(updated: Sequence[float]) -> list[int]:
    """Positions by update time, newest first (ties in position order)."""
    return sorted(range(len(updated)), key=lambda i: -updated[i])


def merge(heads: list[list[tuple[Rank, Any, float | None]]], offset: int, limit: int) -> list[Any]:
    """The page ``[offset, offset + limit)`` of the directories' heads merged (stable)."""
    import heapq

    merged = [r for head in heads for r in head]
    return heapq.nsmallest(offset + limit, merged, key=lambda r: r[0])[offset:]
