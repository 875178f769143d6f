"""What a search sees: every live item under a namespace prefix, for as few requests as possible.

One LIST stream of the prefix is the truth (which items exist, at which ETag). Each listed item is
then taken, in this order, from:

1. this process's cache, if it holds that item at that ETag (no request);
2. a pack of its namespace (:mod:`.packs`), read when it would answer at least
   :data:`~.packs.PACK_READ_MIN` of the items still unknown in its bucket, if the pack's entry has
   that ETag;
3. the item's own object (GET, 64 per round trip).

After a search, :func:`plan_packs` says which packs to write so that the namespace's packs match
what the search saw (only the buckets that changed), and which superseded packs to delete.

Nothing here trusts anything but ETags from the listing, or a body and ETag from one GET: a cached
or packed entry is used only for the very version the listing names.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from langgraph_handoff._format import envelope, keys
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff.errors import CorruptObjectError, EnvelopeVersionError, StoreError
from langgraph_handoff.memory import packs
from langgraph_handoff.memory.items import Entry, swept_size
from langgraph_handoff.memory.select import Chunk
from langgraph_handoff.stores.base import DeleteMany, Get, ObjectInfo, Put, StoreBase

__all__ = ["DirScan", "PackCache", "PackInfo", "group", "maintain", "plan_packs", "purge", "resolve", "scan"]

logger = logging.getLogger("langgraph_handoff.memory")

#: items the in-process cache keeps (whole namespaces are dropped, least recently used first; one
#: namespace larger than that is kept whole): about 4.2 KB each with 384-dimensional vectors, body
#: and ranking row (measured with tracemalloc), so about 420 MB at the default
CACHE_MAX_ITEMS = 100_000
#: requests of one kind per round trip
ROUND = 64


@dataclass(frozen=True)
class PackInfo:
    key: str
    level: int
    bucket: int
    count: int
    digest: str


@dataclass
class DirScan:
    """One namespace directory as a search saw it."""

    directory: str
    #: the ETag of each item object the listing shows (swept markers excluded), by object key
    listed: dict[str, str] = field(default_factory=dict)
    packs: list[PackInfo] = field(default_factory=list)
    #: the version of each live item (expired ones included: the caller decides), by object key
    entries: dict[str, Entry] = field(default_factory=dict)
    #: how many times the namespace is split (:func:`.packs.target_level`), and the entries'
    #: object keys by bucket with the sum of their ``(key, ETag)`` hashes (:meth:`partition`)
    level: int = 0
    buckets: dict[int, list[str]] = field(default_factory=dict)
    sums: dict[int, int] = field(default_factory=dict)

    def partition(self, cache: PackCache) -> None:
        """Split the entries into the buckets of their packs. Both the packs and the ranking
        tables are kept per bucket, so a write rebuilds one bucket's pack and table, not the
        namespace's."""
        levels = Counter(p.level for p in self.packs)
        self.level = packs.target_level(len(self.entries), levels.most_common(1)[0][0] if levels else None)
        buckets: dict[int, list[str]] = {}
        sums: dict[int, int] = {}
        shift = 64 - self.level
        for okey, entry in self.entries.items():
            b = cache.key_hash(okey) >> shift if self.level else 0
            members = buckets.get(b)
            if members is None:
                buckets[b], sums[b] = [okey], entry.pair
            else:
                members.append(okey)
                sums[b] += entry.pair
        self.buckets, self.sums = buckets, sums


class _Dir:
    __slots__ = ("chunks", "entries", "level")

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}
        self.level = -1
        self.chunks: dict[int, Chunk] = {}


class PackCache:
    """Item versions this process has read or written, by namespace directory, keyed by ETag,
    and their vectors ready to score. Thread-safe; bounded by :data:`CACHE_MAX_ITEMS`."""

    def __init__(self, max_items: int = CACHE_MAX_ITEMS) -> None:
        self.max_items = max_items
        self._dirs: OrderedDict[str, _Dir] = OrderedDict()
        self._lock = threading.Lock()
        self._khash: dict[str, int] = {}
        #: entries held in all directories (kept as they change: a put must not count them)
        self._held = 0

    def known(self, directory: str, listed: dict[str, str]) -> dict[str, Entry]:
        """The entries of ``directory`` whose cached ETag is the listed one."""
        with self._lock:
            state = self._dirs.get(directory)
            if state is None:
                return {}
            self._dirs.move_to_end(directory)
            out = {}
            for okey, etag in listed.items():
                e = state.entries.get(okey)
                if e is not None and e.etag == etag:
                    out[okey] = e
            return out

    def replace(self, directory: str, entries: dict[str, Entry]) -> None:
        """What a full scan of ``directory`` found (items no longer there are forgotten)."""
        with self._lock:
            state = self._dirs.get(directory)
            if state is None:
                state = self._dirs[directory] = _Dir()
            self._held += len(entries) - len(state.entries)
            state.entries = dict(entries)
            self._dirs.move_to_end(directory)
            self._trim()

    def remember(self, entry: Entry) -> None:
        """One version this process wrote or read."""
        parsed = keys.parse_memory_item_key(entry.okey)
        if parsed is None:
            return
        with self._lock:
            state = self._dirs.get(parsed[0])
            if state is None:
                state = self._dirs[parsed[0]] = _Dir()
            self._held += entry.okey not in state.entries
            state.entries[entry.okey] = entry
            self._trim()

    def forget(self, okey: str) -> None:
        parsed = keys.parse_memory_item_key(okey)
        with self._lock:
            state = self._dirs.get(parsed[0]) if parsed else None
            if state is not None and state.entries.pop(okey, None) is not None:
                self._held -= 1

    def clear(self) -> None:
        with self._lock:
            self._dirs.clear()
            self._held = 0

    def _trim(self) -> None:
        while self._held > self.max_items and len(self._dirs) > 1:
            _, dropped = self._dirs.popitem(last=False)
            self._held -= len(dropped.entries)
        if len(self._khash) > 4 * self.max_items:
            self._khash.clear()

    def key_hash(self, okey: str) -> int:
        h = self._khash.get(okey)
        if h is None:
            h = self._khash[okey] = packs.key_hash(okey.rpartition("/")[2])
        return h

    def chunks(self, d: DirScan) -> list[Chunk]:
        """What searches derive from each bucket of scan ``d`` (order, update times, vectors ready
        to score), rebuilt only for the buckets whose versions changed since the last search."""
        with self._lock:
            state = self._dirs.get(d.directory)
            old = state.chunks if state is not None and state.level == d.level else {}
        fresh: dict[int, Chunk] = {}
        for b in sorted(d.buckets):
            members = d.buckets[b]
            fingerprint = (len(members), d.sums[b])
            chunk = old.get(b)
            if chunk is None or chunk.fingerprint != fingerprint:
                chunk = Chunk(fingerprint, members, d.entries)
            fresh[b] = chunk
        with self._lock:
            if state is not None:
                state.level, state.chunks = d.level, fresh
        return list(fresh.values())


def group(infos: Iterable[ObjectInfo]) -> dict[str, DirScan]:
    """A listing's item and pack objects by namespace directory (swept markers left out)."""
    dirs: dict[str, DirScan] = {}
    for info in infos:
        item = keys.parse_memory_item_key(info.key)
        if item is not None:
            if not swept_size(info.key, info.size):
                d = dirs.get(item[0])
                if d is None:
                    d = dirs[item[0]] = DirScan(item[0])
                d.listed[info.key] = info.etag
            continue
        pack = keys.parse_memory_pack_key(info.key)
        if pack is not None:
            d = dirs.get(pack[0])
            if d is None:
                d = dirs[pack[0]] = DirScan(pack[0])
            d.packs.append(PackInfo(info.key, *pack[1:]))
    return dirs


def _packs_to_read(cache: PackCache, d: DirScan, unknown: list[str]) -> list[PackInfo]:
    """The packs worth a GET: those that would answer enough of the still unknown items."""
    if not unknown or not d.packs:
        return []
    chosen = []
    for level in {p.level for p in d.packs}:
        counts = Counter(packs.bucket_of(cache.key_hash(k), level) for k in unknown)
        chosen += [
            p
            for p in d.packs
            if p.level == level and counts[p.bucket] and counts[p.bucket] >= min(packs.PACK_READ_MIN, p.count)
        ]
    return chosen


def _rounds(store: StoreBase, ops: list[Any]) -> list[Any]:
    out: list[Any] = []
    for i in range(0, len(ops), ROUND):
        out += store.run_many(ops[i : i + ROUND])
    return out


def scan(store: StoreBase, cache: PackCache, prefix: str) -> list[DirScan]:
    """Every namespace directory under ``prefix`` with all its live items resolved."""
    return resolve(store, cache, group(store.list(prefix)))


def resolve(store: StoreBase, cache: PackCache, dirs: dict[str, DirScan]) -> list[DirScan]:
    """Fill each directory's ``entries`` from the cache, its packs and GETs (in that order)."""
    unknown: dict[str, list[str]] = {}
    for d in dirs.values():
        d.entries = cache.known(d.directory, d.listed)
        unknown[d.directory] = [k for k in d.listed if k not in d.entries]

    wanted = [p for d in dirs.values() for p in _packs_to_read(cache, d, unknown[d.directory])]
    broken: list[str] = []
    for pack, obj in zip(wanted, _rounds(store, [Get(p.key) for p in wanted]), strict=True):
        if obj is None:
            continue  # replaced by a newer pack since the listing: its items are read one by one
        d = dirs[keys.parse_memory_pack_key(pack.key)[0]]  # type: ignore[index]
        try:
            found = _unpack(d, obj.body, obj.key)
        except EnvelopeVersionError:
            continue  # written by a newer version of this package: not ours to read or remove
        except CorruptObjectError as exc:
            # a damaged cache: read its items one by one and let the next rebuild replace it
            logger.warning("memory pack %s is damaged, deleting it: %s", pack.key, exc)
            broken.append(pack.key)
            d.packs.remove(pack)
            continue
        for okey, entry in found.items():
            d.entries.setdefault(okey, entry)
    if broken:
        with contextlib.suppress(StoreError, OSError):
            store.run(DeleteMany(tuple(broken)))

    missing = [(d, k) for d in dirs.values() for k in unknown[d.directory] if k not in d.entries]
    for (d, okey), obj in zip(missing, _rounds(store, [Get(k) for _, k in missing]), strict=True):
        if obj is None:
            d.listed.pop(okey, None)  # deleted since the listing
            continue
        fetched = Entry.decode(okey, obj.etag, envelope.decode(obj.body, key=okey, expect=Kind.MEMORY).body)
        if fetched is None:
            d.listed.pop(okey, None)  # swept since the listing
        else:
            d.entries[okey] = fetched

    for d in dirs.values():
        cache.replace(d.directory, d.entries)
        d.partition(cache)
    return list(dirs.values())


def _unpack(d: DirScan, body: bytes, key: str) -> dict[str, Entry]:
    """The entries of a pack that are the very versions ``d``'s listing names."""
    out = {}
    for segment, etag, raw in packs.decode_pack(body, key):
        okey = f"{d.directory}{keys.MEMORY_ITEMS}/{segment}"
        if d.listed.get(okey) == etag and okey not in d.entries:
            entry = Entry.decode(okey, etag, raw)
            if entry is not None:
                out[okey] = entry
    return out


def plan_packs(cache: PackCache, d: DirScan) -> tuple[list[Put], list[str]]:
    """The packs to write so that ``d``'s packs hold exactly the versions the scan found (one per
    bucket whose pack is not named for its current versions), and the packs those supersede.
    Nothing when they already match: the names say so, no pack is read."""
    present = {p.key for p in d.packs}
    keep: set[str] = set()
    puts: list[Put] = []
    for bucket, members in d.buckets.items():
        name = keys.memory_pack_key(d.directory, d.level, bucket, len(members), packs.digest(d.sums[bucket]))
        keep.add(name)
        if name not in present:
            body = packs.encode_pack(
                [(okey.rpartition("/")[2], d.entries[okey].etag, d.entries[okey].raw) for okey in sorted(members)]
            )
            puts.append(Put(name, body))
    return puts, sorted(present - keep)


def maintain(store: StoreBase, cache: PackCache, scans: list[DirScan]) -> tuple[int, int]:
    """Write the packs :func:`plan_packs` asks for, then delete what they supersede (only once
    every new pack of that directory is stored). Best effort: packs are a cache, so a store that
    refuses the writes (read-only credentials, throttling) costs later searches time, never a
    result. Returns (packs written, packs deleted)."""
    written = deleted = 0
    for d in scans:
        puts, stale = plan_packs(cache, d)
        if not puts and not stale:
            continue
        try:
            _rounds(store, list(puts))
            written += len(puts)
            if stale:
                store.run(DeleteMany(tuple(stale)))
                deleted += len(stale)
        except (StoreError, OSError) as exc:
            logger.warning("memory packs of %s not updated (searches stay correct, only slower): %s", d.directory, exc)
    return written, deleted


def purge(store: StoreBase, cache: PackCache, okey: str) -> int:
    """After a delete: rewrite the packs that hold any version of ``okey`` without it, so that a
    deleted value (and its vectors) is kept in no object. Only the packs of its bucket are read:
    1 LIST of the namespace's packs, then 1 GET per such pack and, where it held the item, 1 PUT of
    its successor and 1 DELETE. A search that listed the item before the delete may still write it
    into a pack; the next search of the namespace rebuilds that bucket without it (and no search
    ever uses it: the listing no longer names it). Best effort, like :func:`maintain`. Returns
    how many packs were rewritten."""
    parsed = keys.parse_memory_item_key(okey)
    if parsed is None:
        return 0
    directory, segment = parsed
    khash = cache.key_hash(okey)
    try:
        found = [keys.parse_memory_pack_key(i.key) for i in store.list(f"{directory}{keys.MEMORY_PACKS}/")]
        candidates = [
            keys.memory_pack_key(directory, *p[1:])
            for p in found
            if p is not None and p[0] == directory and packs.bucket_of(khash, p[1]) == p[2]
        ]
        objs = [o for o in _rounds(store, [Get(k) for k in candidates]) if o is not None]
        rewritten = 0
        for obj in objs:
            members = packs.decode_pack(obj.body, obj.key)
            kept = [m for m in members if m[0] != segment]
            if len(kept) == len(members):
                continue
            level, bucket = keys.parse_memory_pack_key(obj.key)[1:3]  # type: ignore[index]
            if kept:
                total = sum(packs.pair_hash(f"{directory}{keys.MEMORY_ITEMS}/{s}", t) for s, t, _ in kept)
                name = keys.memory_pack_key(directory, level, bucket, len(kept), packs.digest(total))
                store.put(name, packs.encode_pack(kept))
            store.delete(obj.key)
            rewritten += 1
        return rewritten
    except (StoreError, OSError, CorruptObjectError, EnvelopeVersionError) as exc:
        logger.warning("memory packs of %s not purged of %s (the next search rebuilds them): %s", directory, okey, exc)
        return 0
