"""``ObjectStoreMemory``: LangGraph's ``BaseStore`` on the object store (see the package docstring).

Sync and async share one implementation: ``batch`` and ``abatch`` build the same
:class:`~.index.EmbedPlan` before any I/O, embed (``abatch`` awaits an async embedder on the event
loop), then run the same store code, ``abatch`` in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from langgraph_handoff._format import envelope, keys
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff.checkpoint.driver import fetch_many
from langgraph_handoff.checkpoint.signed_store import FROM_ENVIRONMENT, SigningKeyArg, SigningStore, signed_store
from langgraph_handoff.checkpoint.ttl import DEFAULT_SWEEP_INTERVAL_MINUTES, BackgroundSweeper, log_damage
from langgraph_handoff.errors import (
    CorruptObjectError,
    EnvelopeVersionError,
    InvalidInputError,
    PreconditionFailedError,
    UnknownOutcomeError,
)
from langgraph_handoff.memory.index import EmbedPlan, parse_index
from langgraph_handoff.memory.items import (
    Entry,
    check_ttl,
    encode_item,
    expiry,
    fresh,
    item_key,
    marker,
    matches,
    parse,
    positive_minutes,
    swept_size,
    unpack,
)
from langgraph_handoff.memory.select import merge, newest_first, walk
from langgraph_handoff.memory.view import CACHE_MAX_ITEMS, PackCache, group, maintain, purge, resolve, scan
from langgraph_handoff.stores.base import Get, StoreBase, StoredObject, validate_key
from langgraph_handoff.stores.local import LocalStore
from langgraph_handoff.stores.memory import MemoryStore
from langgraph_handoff.stores.urls import store_from_url

__all__ = ["MemorySweep", "ObjectStoreMemory"]

logger = logging.getLogger("langgraph_handoff.memory")

#: how many live items a sweeper remembers between sweeps (about 150 bytes each)
_SEEN_MAX = 100_000


@dataclass
class MemorySweep:
    """What :meth:`ObjectStoreMemory.sweep` did: ``removed`` expired items, and the objects it
    could not read (``damaged``: an item that is truncated, fails its checksum or is not ours, or
    a key under ``memory/`` that is neither an item's nor a pack's key), each left as it is. The
    sweep went on past them."""

    removed: int = 0
    damaged: list[DamagedObject] = field(default_factory=list)


def _ours(key: str) -> bool:
    """Whether ``key`` is one this package writes under ``memory/``: an item's or a pack's, in
    portable segments (a file dropped there by hand is neither)."""
    try:
        validate_key(key)
    except InvalidInputError:
        return False
    return keys.parse_memory_item_key(key) is not None or keys.parse_memory_pack_key(key) is not None


def _still_live(seen: tuple[str, float | None] | None, etag: str, now: float) -> bool:
    """Whether an item a previous sweep read, unchanged since (same ETag), is still not due."""
    return seen is not None and seen[0] == etag and (seen[1] is None or now < seen[1])


def _entry(obj: StoredObject) -> Entry | None:
    return Entry.decode(obj.key, obj.etag, envelope.decode(obj.body, key=obj.key, expect=Kind.MEMORY).body)


class ObjectStoreMemory(BaseStore):
    """A LangGraph ``BaseStore`` kept in an object store (S3, Azure, GCS, a local directory, memory).

    Args:
        store: any :mod:`langgraph_handoff.stores` store.
        index: LangGraph's ``IndexConfig`` for semantic search: ``embed`` (a LangChain
            ``Embeddings``, a sync or async function of a list of texts, a ``"provider:model"``
            string, or this package's offline ``"e5:multilingual-e5-small"`` / ``E5Encoder``),
            ``dims`` (what the embedder returns) and ``fields`` (JSON paths to embed, default
            ``["$"]``: the whole value). None: no index (``query`` is ignored, as LangGraph's
            stores without one do).
        ttl: LangGraph's ``TTLConfig``: ``default_ttl`` (minutes, for puts that pass no ``ttl``),
            ``refresh_on_read`` (default True, as in LangGraph), ``sweep_interval_minutes`` (for
            :meth:`start_ttl_sweeper`).
        clock: seconds since the epoch (default ``time.time``; tests pass their own).
        cache_items: how many item versions this process keeps for searches (whole namespaces,
            least recently searched dropped first): about 4.2 KB each at 384 dimensions. A
            search of items not kept reads them again (from packs).
        signing_key: sign every object written and refuse every object read that no key held
            signed, as :class:`~langgraph_handoff.checkpoint.ObjectStoreSaver` does: a
            ``SigningKey``, several, ``SigningKeys``, or their text form ``"ID:SECRET,..."``.
    """

    supports_ttl = True

    def __init__(
        self,
        store: StoreBase,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        clock: Callable[[], float] | None = None,
        cache_items: int = CACHE_MAX_ITEMS,
        signing_key: SigningKeyArg = None,
    ) -> None:
        self.store = signed_store(store, signing_key)
        self.ttl_config = check_ttl(ttl)
        self._index = parse_index(index)
        #: the ``IndexConfig`` as given (None without an index), as LangGraph's stores expose it
        self.index_config: IndexConfig | None = self._index.config if self._index else None  # type: ignore[assignment]
        #: the ``Embeddings`` the index uses (None without an index)
        self.embeddings = self._index.embeddings if self._index else None
        self._clock = clock or time.time
        self._sweeper = BackgroundSweeper("memory", self.sweep, self.asweep)
        #: what sweeps read: key -> (ETag, expires_at) of live items, so that the next sweep reads
        #: only items written since or due by now (an ETag changes with every write of an item)
        self._seen_expiry: dict[str, tuple[str, float | None]] = {}
        #: item versions this process read or wrote, by ETag (see :mod:`.view`)
        self._cache = PackCache(cache_items)
        #: whether searches write packs (off: every cold search reads every item)
        self.write_packs = True

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        clock: Callable[[], float] | None = None,
        cache_items: int = CACHE_MAX_ITEMS,
        signing_key: SigningKeyArg = FROM_ENVIRONMENT,
        **store_kwargs: Any,
    ) -> ObjectStoreMemory:
        """The same URLs as :meth:`ObjectStoreSaver.from_url`: ``memory://``, ``file://``, ``s3://``,
        ``az://`` and ``gs://``. An unknown query parameter or keyword argument raises
        :class:`~langgraph_handoff.errors.InvalidConfigError` naming the accepted ones. Signing keys
        as there: ``LANGGRAPH_HANDOFF_SIGNING_KEYS`` by default."""
        store = signed_store(store_from_url(url, **store_kwargs), signing_key)
        return cls(store, index=index, ttl=ttl, clock=clock, cache_items=cache_items)

    @classmethod
    def from_conn_string(cls, conn_string: str, **kwargs: Any) -> ObjectStoreMemory:
        """:meth:`from_url` under the name LangGraph's stores use."""
        return cls.from_url(conn_string, **kwargs)

    def close(self) -> None:
        """Close the object store's client (its connections, its threads)."""
        self.store.close()

    async def aclose(self) -> None:
        await self.store.aclose()

    def __enter__(self) -> ObjectStoreMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ObjectStoreMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- one operation each --------------------------------------------------------------------------

    def _live(self, obj: StoredObject | None, refresh: bool, now: float) -> Entry | None:
        """The item ``obj`` holds if it has not expired; re-stamped first when ``refresh`` asks
        (see :meth:`_refresh`)."""
        if obj is None:
            return None
        entry = _entry(obj)
        if entry is None or entry.expired(now):
            return None
        self._cache.remember(entry)
        return self._refresh(entry, now) if refresh else entry

    def _refresh(self, entry: Entry, now: float) -> Entry:
        """Re-stamp an item that has used up more than a tenth of its TTL: one conditional PUT,
        dropped if someone wrote the item meanwhile (that write set its own expiry)."""
        minutes = entry.data.get("ttl")
        if entry.expires is None or minutes is None or fresh(entry.expires, float(minutes), now):
            return entry
        body = {**entry.data, "expires_at": now + float(minutes) * 60}
        try:
            etag = self.store.put(entry.okey, encode_item(body), if_match=entry.etag)
        except (PreconditionFailedError, UnknownOutcomeError):
            return entry
        raw = envelope.packb(body)
        renewed = Entry(entry.okey, etag, raw, unpack(entry.okey, raw))
        self._cache.remember(renewed)
        return renewed

    def _load(self, object_key: str, refresh: bool = False) -> Item | None:
        entry = self._live(self.store.get(object_key), refresh, self._clock())
        return None if entry is None else entry.item()

    def _put(self, op: PutOp, vectors: dict[str, Any] | None) -> None:
        okey = item_key(op.namespace, op.key)
        if op.value is None:
            self.store.delete(okey)
            self._cache.forget(okey)
            if self.write_packs:
                purge(self.store, self._cache, okey)
            return
        if not isinstance(op.value, dict):
            raise InvalidInputError(f"a memory value is a dict, got {type(op.value).__name__}")
        minutes = None if op.ttl is None else positive_minutes(op.ttl, "ttl")
        clock = self._clock()
        now = datetime.now(timezone.utc)
        old = self._load(okey)
        body: dict[str, Any] = {
            "namespace": list(op.namespace),
            "key": op.key,
            "value": op.value,
            "created_at": (old.created_at if old else now).isoformat(),
            "updated_at": now.isoformat(),
            "ttl": minutes,
            "expires_at": None if minutes is None else clock + minutes * 60,
        }
        if vectors is not None:
            body["vectors"] = vectors
        try:
            data = encode_item(body)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"memory value for {op.key!r} is not JSON-like data: {exc}") from None
        etag = self.store.put(okey, data)
        raw = envelope.packb(body)
        self._cache.remember(Entry(okey, etag, raw, unpack(okey, raw)))

    # -- search ----------------------------------------------------------------------------------------

    def _search(self, op: SearchOp, query: Any) -> list[SearchItem]:
        """Filter and rank every live item under the prefix (see :mod:`.view` for what that reads
        and :mod:`.select` for the order: with a query and an index, best cosine first, then the
        items without vectors with ``score`` None, as LangGraph's ``InMemoryStore`` returns
        them; otherwise newest first)."""
        prefix = keys.memory_namespace_prefix(op.namespace_prefix) if op.namespace_prefix else keys.MEMORY_ROOT
        scans = scan(self.store, self._cache, prefix)
        now = self._clock()
        wanted = op.filter or {}
        paged = op.offset >= 0 and op.limit >= 0  # else: a slice of the whole order, as before
        heads = []
        for d in scans:
            chunks = self._cache.chunks(d)
            entries = d.entries
            order = [k for c in chunks for k in c.order]
            updated = [u for c in chunks for u in c.updated]

            def keep(okey: str, entries: dict[str, Entry] = entries) -> bool:
                e = entries[okey]
                if e.expires is not None and now >= e.expires:
                    return False
                return not wanted or all(matches(e.value.get(k), v) for k, v in wanted.items())

            scores = None
            if query is not None and self._index is not None:
                dims = self._index.dims
                scores = [s for c in chunks for s in c.table(entries, dims).scores(query)]
            found = walk(order, scores, updated, functools.partial(newest_first, updated), keep,
                         op.offset + op.limit if paged else len(entries))  # fmt: skip
            heads.append([(rank, entries[okey], score) for rank, okey, score in found])
        if paged:
            page = merge(heads, op.offset, op.limit)
        else:
            page = sorted((r for head in heads for r in head), key=lambda r: r[0])[op.offset : op.offset + op.limit]
        if self.write_packs:
            maintain(self.store, self._cache, scans)
        if op.refresh_ttl:
            page = [(rank, self._refresh(entry, now), score) for rank, entry, score in page]
        return [entry.search_item(score) for _, entry, score in page]

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
        next ``put`` of that key overwrites it. The packs of a namespace that lost items are then
        rebuilt without them (as a search would), so an expired item's value and vectors do not
        outlive the sweep. Requests: 1 LIST per 1000 items, 1 GET per live item the first time
        (later sweeps by the same object read only items written since, or due by then), 1 PUT
        (plus 1 DELETE on local stores) per expired item, and for each namespace that lost items
        what a search of it costs.

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
        """:meth:`sweep` in a worker thread. Cancelled, it asks the sweep to stop and waits until
        it has (at most the round trip under way and its swaps), so that nothing touches the
        store after ``astop_ttl_sweeper()`` returned or the store was closed."""
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
        raw = self.store.inner if isinstance(self.store, SigningStore) else self.store  # (signing changes no condition)
        conditional_delete = isinstance(raw, (MemoryStore, LocalStore))
        result = MemorySweep()
        seen = self._seen_expiry
        listing = []
        for i in self.store.list(keys.MEMORY_ROOT):
            if _ours(i.key):
                listing.append(i)
            else:
                detail = "not a memory item's or pack's key (langgraph-handoff never writes one like it)"
                result.damaged.append(DamagedObject(i.key, "not_an_item", detail))
        infos = [
            i
            for i in listing
            if keys.parse_memory_item_key(i.key) is not None
            and not swept_size(i.key, i.size)
            and not _still_live(seen.get(i.key), i.etag, now)
        ]
        if len(seen) > _SEEN_MAX:
            seen.clear()
        swept: set[str] = set()
        for chunk in [infos[i : i + 64] for i in range(0, len(infos), 64)]:
            if stop is not None and stop.is_set():
                break
            objs = fetch_many(self.store, [Get(i.key) for i in chunk])
            for obj in objs:
                if obj is None or (stop is not None and stop.is_set()):
                    continue
                try:
                    data, _ = envelope.decode_msgpack(obj.body, key=obj.key, expect=Kind.MEMORY)
                    if not isinstance(data, dict):
                        raise CorruptObjectError(obj.key, "malformed memory item (not a map)")
                    expires = None if data.get("expired") is not None else expiry(obj.key, data)
                except (CorruptObjectError, EnvelopeVersionError) as exc:
                    result.damaged.append(DamagedObject.from_error(exc, obj.key))
                    continue
                if data.get("expired") is not None:
                    continue
                seen[obj.key] = (obj.etag, expires)
                if expires is None or now < expires:
                    continue
                seen.pop(obj.key, None)
                try:
                    etag = self.store.put(obj.key, marker(data, now), if_match=obj.etag)
                except (PreconditionFailedError, UnknownOutcomeError):
                    continue  # renewed meanwhile (or unsettled: the next sweep decides again)
                result.removed += 1
                self._cache.forget(obj.key)
                swept.add(obj.key)
                if conditional_delete:
                    with contextlib.suppress(PreconditionFailedError):  # put again since: theirs stands
                        self.store.delete(obj.key, if_match=etag)
        if swept and self.write_packs and not (stop is not None and stop.is_set()):
            self._repack_after_sweep(listing, swept)
        return result

    def _repack_after_sweep(self, listing: list[Any], swept: set[str]) -> None:
        """Rebuild the packs of the namespaces that lost items (those with packs: the others
        hold the swept values nowhere else), from the sweep's own listing less what it swept."""
        dirs = group(i for i in listing if i.key not in swept)
        touched = {k.rpartition(f"{keys.MEMORY_ITEMS}/")[0] for k in swept}
        packed = {name: d for name, d in dirs.items() if name in touched and d.packs}
        if packed:
            maintain(self.store, self._cache, resolve(self.store, self._cache, packed))

    async def asweep_ttl(self) -> int:
        """:meth:`sweep_ttl` in a worker thread, cancellable as :meth:`asweep`."""
        result = await self.asweep()
        log_damage("memory", result)
        return result.removed

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

    # -- namespaces ------------------------------------------------------------------------------------

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found: set[tuple[str, ...]] = set()
        for info in self.store.list(keys.MEMORY_ROOT):
            parsed = parse(info.key)
            if parsed is None:
                item = self._load(info.key) if f"/{keys.MEMORY_ITEMS}/" in info.key else None
                if item is None:
                    continue
                parsed = (item.namespace, item.key)
            found.add(parsed[0])

        def fits(ns: tuple[str, ...]) -> bool:
            for cond in op.match_conditions or ():
                path = tuple(cond.path)
                part = ns[: len(path)] if cond.match_type == "prefix" else ns[-len(path) :] if path else ()
                if len(part) != len(path) or any(p != "*" and p != q for p, q in zip(path, part, strict=True)):
                    return False
            return True

        spaces = {ns[: op.max_depth] if op.max_depth is not None else ns for ns in found if fits(ns)}
        return sorted(spaces)[op.offset : op.offset + op.limit]

    # -- BaseStore --------------------------------------------------------------------------------------

    def _run(self, ops: list[Op], vectors: dict[int, Any]) -> list[Result]:
        results: list[Result] = []
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results.append(self._load(item_key(op.namespace, op.key), op.refresh_ttl))
            elif isinstance(op, PutOp):
                self._put(op, vectors.get(i))
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op, vectors.get(i)))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op))
            else:
                raise InvalidInputError(f"unsupported store operation {type(op).__name__}")
        return results

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        plan = EmbedPlan.of(self._index, ops)
        return self._run(ops, plan.run() if plan else {})

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        plan = EmbedPlan.of(self._index, ops)
        vectors = await plan.arun() if plan else {}
        return await asyncio.to_thread(self._run, ops, vectors)
