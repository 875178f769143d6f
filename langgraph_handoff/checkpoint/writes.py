"""Pending-write rules: slot indexes, the merge of a retried task, and read order.

LangGraph stores a task's writes with ``put_writes(config, writes, task_id, task_path)``:

* a regular write's slot is its position in the call; the special channels ``__error__``,
  ``__scheduled__``, ``__interrupt__`` and ``__resume__`` have fixed negative slots
  (``WRITES_IDX_MAP``), one per task;
* when a task's writes are stored again (a retried or resumed task), **special slots are
  overwritten** (the newest interrupt, resume values or error wins) and **regular slots keep their
  first value** (a re-run task must not duplicate or change what it already wrote). This is the
  per-write rule of langgraph's own ``InMemorySaver``; SQL savers apply one rule per call and so
  keep a stale ``__resume__`` when it arrives in a mixed call, which LangGraph does send;
* readers get every write of a checkpoint sorted by ``(task_path, task_id, idx)``
  (``writes_sort_key``), the order live execution applies them in.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from typing import Any

from langgraph.checkpoint.base import WRITES_IDX_MAP, writes_sort_key

from langgraph_handoff._format.records import WriteItem

__all__ = ["merge_items", "slot_items", "sorted_pending"]


def slot_items(writes: Sequence[tuple[str, Any]], dumps_typed: Any, *, schema: int = 0) -> tuple[WriteItem, ...]:
    """Serialise one ``put_writes`` call into slotted items (last one wins within a call), each
    tagged with the state-schema version its channel is named in."""
    slots: dict[int, WriteItem] = {}
    for position, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, position)
        typ, data = dumps_typed(value)
        slots[idx] = WriteItem(idx=idx, channel=channel, type=typ, data=data, schema=schema)
    return tuple(slots.values())


def merge_items(stored: Iterable[WriteItem], incoming: Iterable[WriteItem]) -> tuple[WriteItem, ...]:
    """Merge a repeated ``put_writes`` of the same task into what is stored.

    >>> a = WriteItem(0, "ch", "msgpack", b"1")
    >>> b = WriteItem(0, "ch", "msgpack", b"2")
    >>> merge_items([a], [b]) == (a,)   # regular slot: first value kept
    True
    >>> e1, e2 = WriteItem(-1, "__error__", "msgpack", b"x"), WriteItem(-1, "__error__", "msgpack", b"y")
    >>> merge_items([e1], [e2]) == (e2,)  # special slot: overwritten
    True
    """
    merged = {w.idx: w for w in stored}
    for w in incoming:
        if w.idx < 0 or w.idx not in merged:
            merged[w.idx] = w
    return tuple(merged[i] for i in sorted(merged))


def sorted_pending(
    tasks: Iterable[tuple[str, str, Iterable[WriteItem]]],
    loads_typed: Any,
    channels: Container[str] | None = None,
) -> list[tuple[str, str, Any]]:
    """``(task_id, channel, value)`` for every item, in ``writes_sort_key`` order; with
    ``channels``, only the items of those channels (the others are not deserialized at all:
    a ``DeltaChannel`` history wants one channel out of every ancestor's writes).

    ``tasks`` yields ``(task_id, task_path, items)``.
    """
    keyed = []
    for task_id, task_path, items in tasks:
        for w in items:
            if channels is None or w.channel in channels:
                keyed.append((writes_sort_key(task_path, task_id, w.idx), task_id, w))
    keyed.sort(key=lambda k: k[0])
    return [(task_id, w.channel, loads_typed((w.type, w.data))) for _, task_id, w in keyed]
