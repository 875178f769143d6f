"""``CountingStore``: wraps any store and counts the requests it makes.

Request counts, not timings, are how this project pins its storage economy: tests assert exact
counts per saver operation, and the benchmarks print them. A batch of independent operations
(``run_many``) is one *round trip*: that is the latency a caller pays for it.

>>> from langgraph_handoff.stores import MemoryStore
>>> store = CountingStore(MemoryStore())
>>> _ = store.put("k", b"v", if_none_match=True)
>>> store.get("k").body, store.counts["PUT"], store.requests
(b'v', 1, 2)
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any

from langgraph_handoff.stores.base import (
    Delete,
    DeleteMany,
    Get,
    ListPage,
    ListResult,
    Op,
    Put,
    StoreBase,
    StoredObject,
)

__all__ = ["CountingStore"]


def _op_name(op: Op) -> str:
    if isinstance(op, Get):
        return "GET"
    if isinstance(op, Put):
        return "PUT"
    if isinstance(op, Delete):
        return "DELETE"
    if isinstance(op, DeleteMany):
        return "DELETE_MANY"
    if isinstance(op, ListPage):
        return "LIST"
    raise TypeError(op)


class CountingStore(StoreBase):
    """Counts requests by kind (``GET``, ``PUT``, ``DELETE``, ``DELETE_MANY``, ``LIST``), plus
    ``round_trips``. ``log`` keeps ``(kind, key)`` in order. Thread- and task-safe."""

    def __init__(self, inner: StoreBase) -> None:
        self.inner = inner
        # a wrapper lists as what it wraps
        self.lists_in_process = inner.lists_in_process
        self.lists_scan_directories = inner.lists_scan_directories
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.round_trips = 0
        self.log: list[tuple[str, str]] = []

    def __repr__(self) -> str:
        return f"CountingStore({self.inner!r})"

    def trust_scope(self) -> Hashable | None:
        """The inner store's: counting its requests changes nothing about its conditions."""
        return self.inner.trust_scope()

    @property
    def requests(self) -> int:
        return sum(self.counts.values())

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.round_trips = 0
            self.log.clear()

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            out = dict(self.counts)
            out["requests"] = sum(self.counts.values())
            out["round_trips"] = self.round_trips
        return out

    def _note(self, ops: Sequence[Op]) -> None:
        with self._lock:
            self.round_trips += 1
            for op in ops:
                name = _op_name(op)
                n = max(1, (len(op.keys) + 999) // 1000) if isinstance(op, DeleteMany) else 1
                if isinstance(op, DeleteMany) and not op.keys:
                    n = 0
                self.counts[name] += n
                self.log.append((name, getattr(op, "key", getattr(op, "prefix", ""))))

    # primitives: count, then delegate
    def get(self, key: str) -> StoredObject | None:
        self._note([Get(key)])
        return self.inner.get(key)

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        self._note([Put(key, b"", if_match, if_none_match)])
        return self.inner.put(key, body, if_match=if_match, if_none_match=if_none_match)

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        self._note([Delete(key, if_match)])
        self.inner.delete(key, if_match=if_match)

    def delete_many(self, keys: Sequence[str]) -> None:
        self._note([DeleteMany(tuple(keys))])
        self.inner.delete_many(keys)

    def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        self._note([ListPage(prefix, start_after, max_keys)])
        return self.inner.list_page(prefix, start_after=start_after, max_keys=max_keys)

    def close(self) -> None:
        self.inner.close()

    # operations as values: count the batch once, let the inner store keep its parallelism
    def run(self, op: Op) -> Any:
        self._note([op])
        return self.inner.run(op)

    async def arun(self, op: Op) -> Any:
        self._note([op])
        return await self.inner.arun(op)

    def run_many(self, ops: Sequence[Op], *, return_exceptions: bool = False) -> list[Any]:
        self._note(ops)
        return self.inner.run_many(ops, return_exceptions=return_exceptions)

    async def arun_many(self, ops: Sequence[Op], *, return_exceptions: bool = False) -> list[Any]:
        self._note(ops)
        return await self.inner.arun_many(ops, return_exceptions=return_exceptions)

    async def aclose(self) -> None:
        await self.inner.aclose()
