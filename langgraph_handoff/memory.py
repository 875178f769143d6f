"""Long-term memory on the same object store: a LangGraph ``BaseStore``.

A session's *context* (the conversation, its checkpoints, the handoff note of a transfer) belongs
to one thread and moves with its lease. What outlives a session (a user's preferences, facts
learned in past conversations) belongs in a store every worker shares, keyed by user rather than
by thread. ``ObjectStoreMemory`` is that store, on the bucket or directory the checkpoints use::

    memory/{namespace...}/=k/{key}      one JSON value, in a versioned, checksummed envelope

Pass it to ``compile(store=...)`` and nodes get it as ``runtime.store`` / the ``store`` argument.
Writes are last-writer-wins per key (memories are facts, not a lineage: no fencing). ``search``
filters by namespace prefix and exact field values; there is no semantic index (``query`` is
refused with a typed error rather than silently ignored).

>>> memory = ObjectStoreMemory.from_url("memory://")
>>> memory.put(("users", "customer-7"), "preferences", {"contact": "email"})
>>> memory.get(("users", "customer-7"), "preferences").value
{'contact': 'email'}
>>> [i.key for i in memory.search(("users",), filter={"contact": "email"})]
['preferences']
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from langgraph_handoff import envelope, keys
from langgraph_handoff.envelope import Kind
from langgraph_handoff.errors import CorruptObjectError, InvalidInputError
from langgraph_handoff.stores.base import StoreBase
from langgraph_handoff.stores.urls import store_from_url

__all__ = ["ObjectStoreMemory"]

_ROOT = "memory/"
_KEY_MARK = "=k"  # never an encoded segment: "=" alone stands for "" and "%" escapes everything else


def _check_namespace(namespace: tuple[str, ...]) -> tuple[str, ...]:
    if not isinstance(namespace, tuple) or not namespace or not all(isinstance(p, str) and p for p in namespace):
        raise InvalidInputError(f"a memory namespace is a non-empty tuple of non-empty strings, got {namespace!r}")
    return namespace


def _prefix(namespace: tuple[str, ...]) -> str:
    return _ROOT + "".join(keys.encode_segment(p) + "/" for p in namespace)


def _item_key(namespace: tuple[str, ...], key: str) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidInputError(f"a memory key is a non-empty string, got {key!r}")
    return f"{_prefix(_check_namespace(namespace))}{_KEY_MARK}/{keys.encode_segment(key)}"


def _parse(object_key: str) -> tuple[tuple[str, ...], str] | None:
    """``(namespace, key)`` from an object key, or None if a segment is hashed (read the object)."""
    parts = object_key[len(_ROOT) :].split("/")
    if len(parts) < 3 or parts[-2] != _KEY_MARK:
        return None
    decoded = [keys.decode_segment(p) for p in [*parts[:-2], parts[-1]]]
    found = [d for d in decoded if d is not None]
    if len(found) != len(decoded):
        return None
    return tuple(found[:-1]), found[-1]


_OPERATORS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and a > b,
    "$gte": lambda a, b: a is not None and a >= b,
    "$lt": lambda a, b: a is not None and a < b,
    "$lte": lambda a, b: a is not None and a <= b,
}


def _matches(actual: Any, wanted: Any) -> bool:
    """A filter value: a literal (equality) or ``{"$gt": 3, ...}`` as LangGraph's stores take it."""
    if isinstance(wanted, dict) and wanted and all(isinstance(k, str) and k.startswith("$") for k in wanted):
        unknown = set(wanted) - set(_OPERATORS)
        if unknown:
            raise InvalidInputError(f"unsupported filter operators {sorted(unknown)}; use {sorted(_OPERATORS)}")
        try:
            return all(_OPERATORS[op](actual, v) for op, v in wanted.items())
        except TypeError:
            return False  # incomparable types never match
    return actual == wanted


class ObjectStoreMemory(BaseStore):
    """A LangGraph ``BaseStore`` kept in an object store (S3, a local directory, memory)."""

    supports_ttl = False

    def __init__(self, store: StoreBase):
        self.store = store

    @classmethod
    def from_url(cls, url: str, **store_kwargs: Any) -> ObjectStoreMemory:
        """The same URLs as :meth:`ObjectStoreSaver.from_url` (``memory://``, ``file://``, ``s3://``)."""
        return cls(store_from_url(url, **store_kwargs))

    @classmethod
    def from_conn_string(cls, conn_string: str, **store_kwargs: Any) -> ObjectStoreMemory:
        """:meth:`from_url` under the name LangGraph's stores use."""
        return cls.from_url(conn_string, **store_kwargs)

    # -- one operation each --------------------------------------------------------------------------

    def _load(self, object_key: str) -> Item | None:
        obj = self.store.get(object_key)
        if obj is None:
            return None
        data, _ = envelope.decode_msgpack(obj.body, key=object_key, expect=Kind.MEMORY)
        try:
            return Item(
                value=dict(data["value"]),
                key=str(data["key"]),
                namespace=tuple(data["namespace"]),
                created_at=datetime.fromisoformat(data["created_at"]),
                updated_at=datetime.fromisoformat(data["updated_at"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptObjectError(object_key, f"malformed memory item ({exc})") from None

    def _put(self, op: PutOp) -> None:
        okey = _item_key(op.namespace, op.key)
        if op.value is None:
            self.store.delete(okey)
            return
        if not isinstance(op.value, dict):
            raise InvalidInputError(f"a memory value is a dict, got {type(op.value).__name__}")
        now = datetime.now(timezone.utc)
        old = self._load(okey)
        body = {
            "namespace": list(op.namespace),
            "key": op.key,
            "value": op.value,
            "created_at": (old.created_at if old else now).isoformat(),
            "updated_at": now.isoformat(),
        }
        try:
            data = envelope.encode_msgpack(Kind.MEMORY, body)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"memory value for {op.key!r} is not JSON-like data: {exc}") from None
        self.store.put(okey, data)

    def _items(self, prefix: str) -> list[Item]:
        out = []
        for info in self.store.list(prefix):
            if f"/{_KEY_MARK}/" in info.key and (item := self._load(info.key)) is not None:
                out.append(item)
        return out

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.query is not None:
            raise InvalidInputError(
                "ObjectStoreMemory has no semantic index: search with namespace_prefix and filter, not query"
            )
        prefix = _prefix(op.namespace_prefix) if op.namespace_prefix else _ROOT
        items = [
            i for i in self._items(prefix) if all(_matches(i.value.get(k), v) for k, v in (op.filter or {}).items())
        ]
        items.sort(key=lambda i: i.updated_at, reverse=True)
        return [
            SearchItem(
                namespace=i.namespace, key=i.key, value=i.value, created_at=i.created_at, updated_at=i.updated_at
            )
            for i in items[op.offset : op.offset + op.limit]
        ]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found: set[tuple[str, ...]] = set()
        for info in self.store.list(_ROOT):
            parsed = _parse(info.key)
            if parsed is None:
                item = self._load(info.key) if f"/{_KEY_MARK}/" in info.key else None
                if item is None:
                    continue
                parsed = (item.namespace, item.key)
            found.add(parsed[0])

        def matches(ns: tuple[str, ...]) -> bool:
            for cond in op.match_conditions or ():
                path = tuple(cond.path)
                part = ns[: len(path)] if cond.match_type == "prefix" else ns[-len(path) :] if path else ()
                if len(part) != len(path) or any(p != "*" and p != q for p, q in zip(path, part, strict=True)):
                    return False
            return True

        spaces = {ns[: op.max_depth] if op.max_depth is not None else ns for ns in found if matches(ns)}
        return sorted(spaces)[op.offset : op.offset + op.limit]

    # -- BaseStore --------------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._load(_item_key(op.namespace, op.key)))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op))
            else:
                raise InvalidInputError(f"unsupported store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))
