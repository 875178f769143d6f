"""Long-term memory on the same object store: a LangGraph ``BaseStore``.

A session's *context* (the conversation, its checkpoints, the handoff note of a transfer) belongs
to one thread and moves with its lease. What outlives a session (a user's preferences, facts
learned in past conversations) belongs in a store every worker shares, keyed by user rather than
by thread. ``ObjectStoreMemory`` is that store, on the bucket or directory the checkpoints use::

    memory/{namespace...}/=k/{key}      one JSON value, in a versioned, checksummed envelope

Pass it to ``compile(store=...)`` and nodes get it as ``runtime.store`` / the ``store`` argument.
TTL works as LangGraph's ``BaseStore`` defines it (``supports_ttl = True``): ``ttl=TTLConfig``
(``default_ttl`` minutes, ``refresh_on_read``, ``sweep_interval_minutes``), ``put(..., ttl=)``
per item, ``refresh_ttl`` on ``get``/``search``. An expired item is invisible to ``get`` and
``search`` at once and removed by :meth:`ObjectStoreMemory.sweep_ttl` (or the background
sweeper, :meth:`~ObjectStoreMemory.start_ttl_sweeper`); see :meth:`ObjectStoreMemory.sweep_ttl`
for what a sweep does and costs.
Writes are last-writer-wins per key (memories are facts, not a lineage: no fencing). ``search``
filters by namespace prefix and exact field values; there is no semantic index (``query`` is
refused with a typed error rather than silently ignored).

>>> memory = ObjectStoreMemory.from_url("memory://")
>>> memory.put(("users", "customer-7"), "preferences", {"contact": "email"})
>>> memory.get(("users", "customer-7"), "preferences").value
{'contact': 'email'}
>>> [i.key for i in memory.search(("users",), filter={"contact": "email"})]
['preferences']

With a TTL (the clock is injected here; by default it is ``time.time``):

>>> now = [1_000_000.0]
>>> memory = ObjectStoreMemory.from_url("memory://", ttl={"default_ttl": 10}, clock=lambda: now[0])
>>> memory.put(("users", "u1"), "draft", {"text": "hi"})
>>> memory.put(("users", "u1"), "profile", {"name": "Ada"}, ttl=None)  # never expires
>>> now[0] += 11 * 60
>>> memory.get(("users", "u1"), "draft") is None, memory.get(("users", "u1"), "profile").value
(True, {'name': 'Ada'})
>>> memory.sweep_ttl()
1
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
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
    TTLConfig,
)

from langgraph_handoff.checkpoint.ttl import (
    DEFAULT_SWEEP_INTERVAL_MINUTES,
    REFRESH_AFTER,
    BackgroundSweeper,
    log_damage,
)
from langgraph_handoff.errors import (
    CorruptObjectError,
    EnvelopeVersionError,
    InvalidConfigError,
    InvalidInputError,
    PreconditionFailedError,
    UnknownOutcomeError,
)
from langgraph_handoff.format import envelope, keys
from langgraph_handoff.format.damage import DamagedObject
from langgraph_handoff.format.envelope import Kind
from langgraph_handoff.stores.base import Get, StoreBase, StoredObject, validate_key
from langgraph_handoff.stores.local import LocalStore
from langgraph_handoff.stores.memory import MemoryStore
from langgraph_handoff.stores.urls import store_from_url

__all__ = ["MemorySweep", "ObjectStoreMemory"]

_ROOT = "memory/"
_KEY_MARK = "=k"  # never an encoded segment: "=" alone stands for "" and "%" escapes everything else


@dataclass
class MemorySweep:
    """What :meth:`ObjectStoreMemory.sweep` did: ``removed`` expired items, and the objects it
    could not read (``damaged``: an item that is truncated, fails its checksum or is not ours, or
    a key under ``memory/`` that is not an item key), each left as it is. The sweep went on past
    them."""

    removed: int = 0
    damaged: list[DamagedObject] = field(default_factory=list)


def _portable(key: str) -> bool:
    try:
        validate_key(key)
    except InvalidInputError:
        return False
    return True


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


def _fresh(expires: float, minutes: float, now: float) -> bool:
    """Less than a tenth of the TTL used up: a refresh on read would not be worth a PUT."""
    return expires - now > (1 - REFRESH_AFTER) * minutes * 60


#: how many live items a sweeper remembers between sweeps (about 150 bytes each)
_SEEN_MAX = 100_000


def _still_live(seen: tuple[str, float | None] | None, etag: str, now: float) -> bool:
    """Whether an item a previous sweep read, unchanged since (same ETag), is still not due."""
    return seen is not None and seen[0] == etag and (seen[1] is None or now < seen[1])


def _item_bytes(body: dict[str, Any]) -> bytes:
    """A live item's stored bytes, never the size of its key's swept marker: sweeps and
    ``search`` skip objects of exactly that size without reading them, and a compressed item
    could otherwise shrink to it and vanish from ``search``. Uncompressed, an item is always
    larger than its marker (it holds the same address plus its value and times)."""
    data = envelope.encode_msgpack(Kind.MEMORY, body)
    if len(data) == len(_marker(body, 0.0)):
        data = envelope.encode(Kind.MEMORY, envelope.packb(body), compress=False)
    return data


def _marker(data: dict[str, Any], now: float) -> bytes:
    """What a swept item becomes: its address and when it was swept; read as absent."""
    body = {"namespace": data.get("namespace"), "key": data.get("key"), "expired": round(float(now), 3)}
    return envelope.encode_msgpack(Kind.MEMORY, body)


def _positive(value: Any, name: str) -> float:
    try:
        minutes = float(value)
    except (TypeError, ValueError):
        minutes = -1.0
    if isinstance(value, bool) or not minutes > 0 or minutes == float("inf"):
        raise InvalidInputError(f"memory {name} must be a positive number of minutes (or None), got {value!r}")
    return minutes


def _check_ttl(ttl: Any) -> TTLConfig | None:
    """LangGraph's ``TTLConfig``, checked now rather than at the first put."""
    if ttl is None:
        return None
    if not isinstance(ttl, dict):
        raise InvalidConfigError(f"ttl must be a TTLConfig dict, got {type(ttl).__name__}")
    unknown = sorted(set(ttl) - {"default_ttl", "refresh_on_read", "sweep_interval_minutes"})
    if unknown:
        raise InvalidConfigError(
            f"unknown TTLConfig keys {unknown}: use default_ttl, refresh_on_read, sweep_interval_minutes"
        )
    for name in ("default_ttl", "sweep_interval_minutes"):
        if ttl.get(name) is not None:
            try:
                _positive(ttl[name], name)
            except InvalidInputError as exc:
                raise InvalidConfigError(str(exc)) from None
    return ttl  # type: ignore[return-value]


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
    """A LangGraph ``BaseStore`` kept in an object store (S3, a local directory, memory).

    Args:
        store: any :mod:`langgraph_handoff.stores` store.
        ttl: LangGraph's ``TTLConfig``: ``default_ttl`` (minutes, for puts that pass no ``ttl``),
            ``refresh_on_read`` (default True, as in LangGraph), ``sweep_interval_minutes`` (for
            :meth:`start_ttl_sweeper`).
        clock: seconds since the epoch (default ``time.time``; tests pass their own).
    """

    supports_ttl = True

    def __init__(
        self, store: StoreBase, *, ttl: TTLConfig | None = None, clock: Callable[[], float] | None = None
    ) -> None:
        self.store = store
        self.ttl_config = _check_ttl(ttl)
        self._clock = clock or time.time
        self._sweeper = BackgroundSweeper("memory", self.sweep, self.asweep)
        #: what sweeps read: key -> (ETag, expires_at) of live items, so that the next sweep reads
        #: only items written since or due by now (an ETag changes with every write of an item)
        self._seen_expiry: dict[str, tuple[str, float | None]] = {}

    @classmethod
    def from_url(
        cls, url: str, *, ttl: TTLConfig | None = None, clock: Callable[[], float] | None = None, **store_kwargs: Any
    ) -> ObjectStoreMemory:
        """The same URLs as :meth:`ObjectStoreSaver.from_url`: ``memory://``, ``file://``, ``s3://``,
        ``az://`` and ``gs://``. An unknown query parameter or keyword argument raises
        :class:`~langgraph_handoff.errors.InvalidConfigError` naming the accepted ones."""
        return cls(store_from_url(url, **store_kwargs), ttl=ttl, clock=clock)

    @classmethod
    def from_conn_string(cls, conn_string: str, **kwargs: Any) -> ObjectStoreMemory:
        """:meth:`from_url` under the name LangGraph's stores use."""
        return cls.from_url(conn_string, **kwargs)

    # -- one operation each --------------------------------------------------------------------------

    def _decode(self, obj: StoredObject) -> tuple[Item | None, dict[str, Any]]:
        """The item (None for a swept one) and its raw fields."""
        data, _ = envelope.decode_msgpack(obj.body, key=obj.key, expect=Kind.MEMORY)
        if not isinstance(data, dict):
            raise CorruptObjectError(obj.key, "malformed memory item (not a map)")
        if data.get("expired") is not None:
            return None, data
        try:
            return Item(
                value=dict(data["value"]),
                key=str(data["key"]),
                namespace=tuple(data["namespace"]),
                created_at=datetime.fromisoformat(data["created_at"]),
                updated_at=datetime.fromisoformat(data["updated_at"]),
            ), data
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptObjectError(obj.key, f"malformed memory item ({exc})") from None

    def _live(self, obj: StoredObject | None, refresh: bool, now: float) -> Item | None:
        """The item ``obj`` holds if it has not expired; re-stamped first when ``refresh`` asks
        and it has used up more than a tenth of its TTL (one conditional PUT, dropped if someone
        wrote the item meanwhile)."""
        if obj is None:
            return None
        item, data = self._decode(obj)
        if item is None:
            return None
        expires = None if data.get("expires_at") is None else float(data["expires_at"])
        minutes = None if data.get("ttl") is None else float(data["ttl"])
        if expires is not None and now >= expires:
            return None
        if refresh and expires is not None and minutes is not None and not _fresh(expires, minutes, now):
            body = _item_bytes({**data, "expires_at": now + minutes * 60})
            # written meanwhile? That write set its own expiry
            with contextlib.suppress(PreconditionFailedError, UnknownOutcomeError):
                self.store.put(obj.key, body, if_match=obj.etag)
        return item

    def _load(self, object_key: str, refresh: bool = False) -> Item | None:
        return self._live(self.store.get(object_key), refresh, self._clock())

    def _put(self, op: PutOp) -> None:
        okey = _item_key(op.namespace, op.key)
        if op.value is None:
            self.store.delete(okey)
            return
        if not isinstance(op.value, dict):
            raise InvalidInputError(f"a memory value is a dict, got {type(op.value).__name__}")
        minutes = None if op.ttl is None else _positive(op.ttl, "ttl")
        clock = self._clock()
        now = datetime.now(timezone.utc)
        old = self._load(okey)
        body = {
            "namespace": list(op.namespace),
            "key": op.key,
            "value": op.value,
            "created_at": (old.created_at if old else now).isoformat(),
            "updated_at": now.isoformat(),
            "ttl": minutes,
            "expires_at": None if minutes is None else clock + minutes * 60,
        }
        try:
            data = _item_bytes(body)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"memory value for {op.key!r} is not JSON-like data: {exc}") from None
        self.store.put(okey, data)

    # -- TTL -------------------------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Remove every expired item; returns how many. Safe against a concurrent ``put``.

        Each item is read (64 per round trip; items a sweep already emptied are recognised by
        their size in the listing and not read again) and an expired one is replaced, by a
        compare-and-swap on the version judged expired, with a small empty marker that reads as
        absent: a ``put`` that renewed the item first makes the swap fail, and the item stays.
        Where the store enforces a conditional DELETE (``memory://``, ``file://``) the marker is
        then deleted the same way; elsewhere (S3, whose servers ignore or lack it) it stays,
        because an unconditional DELETE could remove an item put a moment after the sweep, and the
        next ``put`` of that key overwrites it. Requests: 1 LIST per 1000 items, 1 GET per live
        item the first time (later sweeps by the same object read only items written since, or
        due by then), 1 PUT (plus 1 DELETE on local stores) per expired item.

        An item that cannot be read is skipped, logged (WARNING) and left as it is; the sweep
        goes on. :meth:`sweep` returns them too.
        """
        result = self._sweep(None)
        log_damage("memory", result)
        return result.removed

    def sweep(self) -> MemorySweep:
        """:meth:`sweep_ttl`, returning what it removed and what it could not read
        (:class:`MemorySweep`). The background sweeper runs this one and logs the damage."""
        return self._sweep(None)

    async def asweep(self) -> MemorySweep:
        """:meth:`sweep` in a worker thread (cancellable as :meth:`asweep_ttl`)."""
        stop = threading.Event()
        work = asyncio.ensure_future(asyncio.to_thread(self._sweep, stop))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            stop.set()
            await asyncio.wait({work})
            raise

    def _sweep(self, stop: threading.Event | None) -> MemorySweep:
        """The sweep; with ``stop`` set it ends before its next round trip (``asweep``)."""
        now = self._clock()
        conditional_delete = isinstance(self.store, (MemoryStore, LocalStore))
        result = MemorySweep()
        seen = self._seen_expiry
        infos = []
        for i in self.store.list(_ROOT):
            if f"/{_KEY_MARK}/" not in i.key or not _portable(i.key):
                detail = "not a memory item's key (langgraph-handoff never writes one like it)"
                result.damaged.append(DamagedObject(i.key, "not_an_item", detail))
            elif not self._swept_size(i) and not _still_live(seen.get(i.key), i.etag, now):
                infos.append(i)
        if len(seen) > _SEEN_MAX:
            seen.clear()
        for chunk in [infos[i : i + 64] for i in range(0, len(infos), 64)]:
            if stop is not None and stop.is_set():
                break
            objs = self.store.run_many([Get(i.key) for i in chunk])
            for obj in objs:
                if obj is None or (stop is not None and stop.is_set()):
                    continue
                try:
                    item, data = self._decode(obj)
                except (CorruptObjectError, EnvelopeVersionError) as exc:
                    result.damaged.append(DamagedObject.from_error(exc, obj.key))
                    continue
                expires = data.get("expires_at")
                if item is not None:
                    seen[obj.key] = (obj.etag, None if expires is None else float(expires))
                if item is None or expires is None or now < float(expires):
                    continue
                seen.pop(obj.key, None)
                marker = _marker(data, now)
                try:
                    etag = self.store.put(obj.key, marker, if_match=obj.etag)
                except (PreconditionFailedError, UnknownOutcomeError):
                    continue  # renewed meanwhile (or unsettled: the next sweep decides again)
                result.removed += 1
                if conditional_delete:
                    with contextlib.suppress(PreconditionFailedError):  # put again since: theirs stands
                        self.store.delete(obj.key, if_match=etag)
        return result

    async def asweep_ttl(self) -> int:
        """``sweep_ttl`` in a worker thread. Cancelled, it asks the sweep to stop and waits until
        it has (at most the round trip under way and its swaps), so that nothing touches the
        store after ``astop_ttl_sweeper()`` returned or the store was closed."""
        result = await self.asweep()
        log_damage("memory", result)
        return result.removed

    def _swept_size(self, info: Any) -> bool:
        """Whether a listed item is exactly the size of a swept marker (not worth a GET)."""
        if info.size > 1024:
            return False
        parsed = _parse(info.key)
        if parsed is None:
            return False
        data = {"namespace": list(parsed[0]), "key": parsed[1]}
        return bool(info.size == len(_marker(data, 0.0)))

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Any:
        """Sweep now and every ``sweep_interval_minutes`` (default: the ``TTLConfig``'s, else 5)
        in a daemon thread; returns a ``concurrent.futures.Future`` done when it stops."""
        return self._sweeper.start(self._interval(sweep_interval_minutes))

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        return self._sweeper.stop(timeout)

    async def astart_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> asyncio.Task[None]:
        """:meth:`start_ttl_sweeper` as an asyncio task (what :func:`langgraph_handoff.server.store`
        starts for the Agent Server, which skips its own sweeper for a custom store)."""
        return await self._sweeper.astart(self._interval(sweep_interval_minutes))

    async def astop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        return await self._sweeper.astop(timeout)

    def _interval(self, minutes: float | None) -> float:
        if minutes is not None:
            return minutes
        configured = (self.ttl_config or {}).get("sweep_interval_minutes")
        return float(configured) if configured is not None else DEFAULT_SWEEP_INTERVAL_MINUTES

    def _items(self, prefix: str) -> list[tuple[Item, StoredObject]]:
        """Every live item under ``prefix``, read 64 per round trip, with its object."""
        infos = [i for i in self.store.list(prefix) if f"/{_KEY_MARK}/" in i.key and not self._swept_size(i)]
        now = self._clock()
        out = []
        for chunk in [infos[i : i + 64] for i in range(0, len(infos), 64)]:
            for obj in self.store.run_many([Get(i.key) for i in chunk]):
                if (item := self._live(obj, False, now)) is not None:
                    out.append((item, obj))
        return out

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.query is not None:
            raise InvalidInputError(
                "ObjectStoreMemory has no semantic index: search with namespace_prefix and filter, not query"
            )
        prefix = _prefix(op.namespace_prefix) if op.namespace_prefix else _ROOT
        found = [
            (i, obj)
            for i, obj in self._items(prefix)
            if all(_matches(i.value.get(k), v) for k, v in (op.filter or {}).items())
        ]
        found.sort(key=lambda pair: pair[0].updated_at, reverse=True)
        page = found[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            now = self._clock()
            for _item, obj in page:
                self._live(obj, True, now)
        return [
            SearchItem(
                namespace=i.namespace, key=i.key, value=i.value, created_at=i.created_at, updated_at=i.updated_at
            )
            for i, _obj in page
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
                results.append(self._load(_item_key(op.namespace, op.key), op.refresh_ttl))
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
