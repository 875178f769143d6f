"""Listing: ``list``, the DeltaChannel ancestor walk, and the heads under a prefix.

``list`` streams checkpoints newest first: per thread, one round trip reads every namespace head
and the first page of its writes, then a k-way merge walks the heads and their sealed segments.
Results stream without listing the whole store: head keys arrive grouped by thread, and each
thread is listed as soon as its last namespace is seen.

Damage. ``list`` of one thread raises :class:`~langgraph_handoff.errors.CorruptObjectError` on a
head it cannot read, as ``get_tuple`` does: the caller asked about that thread, and an empty answer
would read as "no checkpoints". ``list(None)`` walks the whole store, and one damaged object must
not hide every thread behind it: it skips a head it cannot read (and the rest of a thread whose
segment, writes document or value it cannot read), logs a warning naming the key, hands the
record to ``on_damaged`` if given, and goes on. Keys under ``heads/`` that are not head keys (a
stray file) are skipped the same way, never read. ``langgraph-handoff verify`` lists them all.
"""

from __future__ import annotations

import heapq
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory

from langgraph_handoff._format import keys
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.records import ArchiveRef, Head, PayloadTable, Record, Segment, SegmentRef
from langgraph_handoff.checkpoint.driver import Batch, Emit, Plan
from langgraph_handoff.checkpoint.plans import manifest, metadata_index, reading
from langgraph_handoff.checkpoint.plans.state import SaverState, Vanished, made_by_run, parent_cycle, target_of
from langgraph_handoff.checkpoint.writes import sorted_pending
from langgraph_handoff.errors import CorruptObjectError, EnvelopeVersionError, MigrationError
from langgraph_handoff.stores.base import Get, ListPage, ObjectInfo

log = logging.getLogger("langgraph_handoff")

#: what a walk does with an object it cannot read: ``list(None)``'s ``on_damaged``
OnDamaged = Callable[[DamagedObject], None]
#: errors that say an object cannot be read (a walk reports the object and goes on); a newer
#: *state* schema is not among them: it concerns every thread alike, and says to deploy
UNREADABLE = (CorruptObjectError, EnvelopeVersionError)


def report_damage(damaged: DamagedObject, on_damaged: OnDamaged | None, walk: str) -> None:
    """Log one object a walk skipped (WARNING, naming the key) and hand it to ``on_damaged``."""
    log.warning("%s skipped %s: %s (%s)", walk, damaged.key, damaged.reason, damaged.detail)
    if on_damaged is not None:
        on_damaged(damaged)


@dataclass
class _ListQuery:
    only_id: str | None
    filter: dict[str, Any] | None
    before_id: str | None
    limit: int | None
    #: a LangGraph run lists (a replaying subgraph loading its state as of the replay point)
    by_run: bool = False
    emitted: int = 0

    @property
    def done(self) -> bool:
        return self.limit is not None and self.emitted >= self.limit

    def wants(self, rec: Record) -> bool:
        """The config's checkpoint id, if it names one."""
        return self.only_id is None or rec.id == self.only_id

    def accepts(self, metadata: Mapping[str, Any]) -> bool:
        """Top-level metadata equality (missing == None), as InMemorySaver filters."""
        return not self.filter or all(metadata.get(k) == v for k, v in self.filter.items())


class _RecordStream:
    """One namespace's records, newest first: the head's, then each sealed segment's."""

    def __init__(self, thread_id: str, ns: str, head: Head, below: str | None) -> None:
        self.thread_id, self.ns, self.below = thread_id, ns, below
        self.head = head
        self.items: deque[tuple[Record, PayloadTable]] = deque(
            (r, head.payloads) for _, r in sorted(head.records.items(), reverse=True) if self._wanted(r.id)
        )
        self.seen = set(head.records)
        self.segments: deque[SegmentRef] = deque(s for s in head.segments if below is None or s.first_id < below)
        #: the head's archive of older segments, until read (see manifest)
        self.archive: ArchiveRef | None = head.archive if below is None or (
            head.archive is not None and head.archive.first_id < below) else None  # fmt: skip
        #: the oldest segment taken so far: a new manifest is followed from below it
        self.floor: str | None = None

    def _wanted(self, checkpoint_id: str) -> bool:
        return self.below is None or checkpoint_id < self.below

    def add_segment(self, seg: Segment) -> None:
        fresh = [r for r in seg.records.values() if r.id not in self.seen and self._wanted(r.id)]
        self.seen.update(seg.records)
        merged = sorted([*self.items, *((r, seg.payloads) for r in fresh)], key=lambda x: x[0].id, reverse=True)
        self.items = deque(merged)


def list_all(saver: SaverState, prefix: str) -> Plan[list[ObjectInfo]]:
    out: list[ObjectInfo] = []
    after = None
    while True:
        page = yield ListPage(prefix, start_after=after, max_keys=1000)
        out.extend(page.items)
        if not page.truncated or not page.items:
            return out
        after = page.items[-1].key


def list_all_many(saver: SaverState, prefixes: Sequence[str]) -> Plan[list[list[ObjectInfo]]]:
    """:func:`list_all` of several prefixes, their pages asked for together (one round trip
    per page of the longest listing)."""
    out: list[list[ObjectInfo]] = [[] for _ in prefixes]
    after: list[str | None] = [None] * len(prefixes)
    pending = list(range(len(prefixes)))
    while pending:
        pages = yield Batch(tuple(ListPage(prefixes[i], start_after=after[i], max_keys=1000) for i in pending))
        still = []
        for i, page in zip(pending, pages, strict=True):
            out[i].extend(page.items)
            if page.truncated and page.items:
                after[i] = page.items[-1].key
                still.append(i)
        pending = still
    return out


def plan_list(
    saver: SaverState,
    config: RunnableConfig | None,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
    on_damaged: OnDamaged | None = None,
) -> Plan[None]:
    only_id = ns = None
    if config is not None:
        thread_id, ns, only_id = target_of(config, "list")
    before_id = None
    if before is not None:
        before_id = ((before.get("configurable") or {}).get("checkpoint_id")) or None
    if limit is not None and limit <= 0:
        return None
    query = _ListQuery(only_id, filter, before_id, limit, by_run=made_by_run(config))
    if config is not None and ns is not None:
        yield from _list_thread(saver, [keys.head_key(thread_id, ns)], query)
        return None
    store_wide = config is None
    if store_wide and filter:
        # a filter on an indexed key: only the namespaces its entries name are read (and
        # filtered as below: an entry is a hint, never the answer)
        candidates = yield from metadata_index.plan_candidates(saver, filter)
        if candidates is not None:
            yield from _list_heads(saver, candidates, query, on_damaged)
            return None
    # Head keys arrive thread by thread (keys are grouped by thread); each thread is listed as
    # soon as its last namespace is seen, so results stream without listing the whole store.
    # A filter that reached this walk is unindexed: most threads match nothing, so their writes
    # are listed only once one of their checkpoints passes it (one request a thread, not two).
    lazy = store_wide and bool(filter)
    prefix = keys.heads_prefix(thread_id if not store_wide else None)
    group: list[str] = []
    after = None
    while True:
        page = yield ListPage(prefix, start_after=after, max_keys=1000)
        for info in page.items:
            if not keys.is_head_key(info.key):
                if store_wide:
                    report_damage(DamagedObject.foreign(info.key), on_damaged, "list")
                continue  # not a head: never read
            if group and info.key.split("/")[1] != group[-1].split("/")[1]:
                yield from _list_contained(saver, group, query, store_wide, on_damaged, lazy)
                if query.done:
                    return None
                group = []
            group.append(info.key)
        if not page.truncated or not page.items:
            break
        after = page.items[-1].key
    if group:
        yield from _list_contained(saver, group, query, store_wide, on_damaged, lazy)
    return None


def _list_heads(saver: SaverState, head_keys: list[str], query: _ListQuery, on_damaged: OnDamaged | None) -> Plan[None]:
    """A store-wide list over the given head keys (in key order), thread by thread."""
    group: list[str] = []
    for hk in head_keys:
        if group and hk.split("/")[1] != group[-1].split("/")[1]:
            yield from _list_contained(saver, group, query, True, on_damaged)
            if query.done:
                return None
            group = []
        group.append(hk)
    if group:
        yield from _list_contained(saver, group, query, True, on_damaged)
    return None


def _list_contained(
    saver: SaverState,
    group: list[str],
    query: _ListQuery,
    store_wide: bool,
    on_damaged: OnDamaged | None,
    lazy_writes: bool = False,
) -> Plan[None]:
    """``_list_thread``; in a store-wide list, an object it cannot read is reported and the walk
    goes on with the next thread (what the thread emitted before it stands)."""
    if not store_wide:
        yield from _list_thread(saver, group, query)
        return None
    try:
        yield from _list_thread(saver, group, query, contain=True, on_damaged=on_damaged, lazy_writes=lazy_writes)
    except UNREADABLE as exc:
        report_damage(DamagedObject.from_error(exc), on_damaged, "list")
    return None


def _list_thread(
    saver: SaverState,
    group: list[str],
    query: _ListQuery,
    contain: bool = False,
    on_damaged: OnDamaged | None = None,
    lazy_writes: bool = False,
) -> Plan[None]:
    """Emit one thread's matching checkpoints (heads ``group``), newest first across its
    namespaces. One round trip reads every head plus the first page of its writes; with
    ``lazy_writes`` it reads the heads alone, and a namespace's writes are listed when a record
    first needs them (a filter most threads fail). With ``contain`` (a store-wide list), a head
    that cannot be read is reported and its namespace skipped."""
    ops: list[Any] = []
    for hk in group:
        ops.append(Get(hk))
        if not lazy_writes:
            ops.append(ListPage(_writes_prefix_of_head(hk), max_keys=reading.WRITES_PAGE))
    results = list((yield Batch(tuple(ops))))
    objs, pages = (results, [None] * len(group)) if lazy_writes else (results[0::2], results[1::2])
    streams: list[tuple[_RecordStream, reading.WritesCursor]] = []
    for hk, obj, page in zip(group, objs, pages, strict=True):
        if obj is None:
            continue
        try:
            head = _head_at(saver, hk, obj)
        except UNREADABLE as exc:
            if not contain:
                raise
            report_damage(DamagedObject.from_error(exc, hk), on_damaged, "list")
            continue
        saver._cache.observe(head.thread_id, head.checkpoint_ns, head, obj.etag)
        if head.records:
            stream = _RecordStream(head.thread_id, head.checkpoint_ns, head, query.before_id)
            streams.append((stream, reading.WritesCursor(_writes_prefix_of_head(hk), page=page)))
    # k-way merge by checkpoint id, newest first, across the thread's namespaces
    heap: list[tuple[str, int]] = []
    for i, (stream, _c) in enumerate(streams):
        yield from _fill(saver, stream)
        if stream.items:
            heapq.heappush(heap, (_neg(stream.items[0][0].id), i))
    while heap:
        _, i = heapq.heappop(heap)
        stream, cursor = streams[i]
        rec, table = stream.items.popleft()
        yield from _fill(saver, stream)
        if stream.items:
            heapq.heappush(heap, (_neg(stream.items[0][0].id), i))
        if not query.wants(rec):
            continue
        # A filter is checked on the metadata readers get: a current record's as stored
        # (decoded before anything is fetched), an older one's after the same upgrade as its
        # values, since a step may derive metadata from them.
        current = rec.schema == saver._schema
        if current:
            with reading.user_data(keys.head_key(stream.thread_id, stream.ns), f"checkpoint {rec.id!r}"):
                metadata = saver.serde.loads_typed(rec.metadata)
            if not query.accepts(metadata):
                continue
        infos = yield from reading.writes_for(saver, cursor, rec.id)
        try:
            tasks, values = yield from reading.fetch(saver, stream.thread_id, stream.ns, rec, table, infos, rec.values)
            tup = reading.checkpoint_tuple(saver, stream.thread_id, stream.ns, rec, tasks, values)
        except Vanished as gone:
            # Pruned while we listed? Then it is simply no longer part of the history.
            hkey = keys.head_key(stream.thread_id, stream.ns)
            fresh, _ = reading.head_from(saver, (yield Get(hkey)), stream.thread_id, stream.ns)
            found = (
                None
                if fresh is None
                else (yield from reading.find_record(saver, stream.thread_id, stream.ns, fresh, rec.id))
            )
            if found is None:
                continue
            try:
                rec, table, _ = found
                tasks, values = yield from reading.fetch(
                    saver, stream.thread_id, stream.ns, rec, table, infos, rec.values
                )
                tup = reading.checkpoint_tuple(saver, stream.thread_id, stream.ns, rec, tasks, values)
            except Vanished:
                raise gone.corrupt() from None
        if not current and not query.accepts(tup.metadata):
            continue
        if query.by_run and rec.id != stream.head.latest_id:
            # A run handed a superseded checkpoint (LangGraph replays a stateful subgraph from
            # ``list(before=<replay point>, limit=1)``): its first put may branch from there,
            # as after a get_tuple by id (fencing, ``branches_from_history``).
            saver._cache.note_branch_point(stream.thread_id, stream.ns, rec.id)
        yield Emit(tup)
        query.emitted += 1
        if query.done:
            return None
    return None


def _head_at(saver: SaverState, hk: str, obj: Any) -> Head:
    """The head stored at ``hk`` (from the cache when its ETag is known), checked to belong there."""
    ids = ids_of_head_key(hk)
    head = (saver._cache.head_with_etag(*ids, obj.etag) if ids else None) or rec_io.decode_head(obj.body, key=obj.key)
    if keys.head_key(head.thread_id, head.checkpoint_ns) != hk:
        raise CorruptObjectError(hk, "head does not belong at this key (misplaced object)", "misplaced")
    return head


def _fill(saver: SaverState, stream: _RecordStream) -> Plan[None]:
    """Make sure ``stream.items`` is non-empty unless the namespace is exhausted."""
    tid, ns = stream.thread_id, stream.ns
    while not stream.items and (stream.segments or stream.archive is not None):
        if not stream.segments:
            assert stream.archive is not None
            ref_a, stream.archive = stream.archive, None
            archive = yield from manifest.load_archive(saver, tid, ns, ref_a)
            if archive is None:  # folded or pruned meanwhile: follow the new manifest
                yield from _follow_fresh(saver, stream, None)
            else:
                stream.segments.extend(s for s in archive.refs if stream.below is None or s.first_id < stream.below)
            continue
        ref = stream.segments.popleft()
        seg = yield from reading.load_segment(saver, tid, ns, ref)
        if seg is None:
            yield from _follow_fresh(saver, stream, ref)
            continue
        stream.floor = ref.first_id if stream.floor is None else min(stream.floor, ref.first_id)
        stream.add_segment(seg)
    return None


def _follow_fresh(saver: SaverState, stream: _RecordStream, gone: SegmentRef | None) -> Plan[None]:
    """A segment (``gone``) or the archive the stream was reading is gone: the namespace was
    pruned or folded meanwhile. Continue below what the stream already passed, from the
    manifest stored now; a segment the stored head still lists is missing for real."""
    tid, ns = stream.thread_id, stream.ns
    for _ in range(3):
        fresh, _ = reading.head_from(saver, (yield Get(keys.head_key(tid, ns))), tid, ns)
        refs = () if fresh is None else (yield from manifest.plan_refs(saver, tid, ns, fresh))
        if refs is None:
            continue  # its archive went too: read it again
        if gone is not None and gone in refs:
            raise reading.missing_segment(saver, tid, ns, gone)
        floor = gone.first_id if gone is not None else stream.floor
        stream.segments = deque(
            s for s in refs
            if (floor is None or s.first_id < floor) and (stream.below is None or s.first_id < stream.below)
            and s not in stream.segments
        )  # fmt: skip
        stream.archive = None
        return None
    assert fresh is not None and fresh.archive is not None
    raise manifest.missing_archive(tid, ns, fresh.archive)


@dataclass
class HeadsScan:
    """The heads under a prefix: ``(thread_id, checkpoint_ns)`` of each, and what could not be
    taken for one (a key that is not a head key; a hashed head that cannot be read)."""

    ids: list[tuple[str, str]] = field(default_factory=list)
    damaged: list[DamagedObject] = field(default_factory=list)


def plan_heads_scan(saver: SaverState, prefix: str) -> Plan[HeadsScan]:
    """``(thread_id, checkpoint_ns)`` of every head under ``prefix``. The ids are decoded from
    the keys; only a hashed (over-long) segment costs a GET of the head that stores the id.
    Keys that are not head keys are reported, never read."""
    infos = yield from list_all(saver, prefix)
    scan = HeadsScan()
    heads = []
    for info in infos:
        if keys.is_head_key(info.key):
            heads.append(info)
        else:
            scan.damaged.append(DamagedObject.foreign(info.key))
    decoded = [ids_of_head_key(i.key) for i in heads]
    hashed = [i.key for i, ids in zip(heads, decoded, strict=True) if ids is None]
    found: dict[str, tuple[str, str]] = {}
    if hashed:
        for key, obj in zip(hashed, (yield Batch(tuple(Get(k) for k in hashed))), strict=True):
            if obj is None:
                continue
            try:
                head = _head_at(saver, key, obj)
            except UNREADABLE as exc:
                scan.damaged.append(DamagedObject.from_error(exc, key))
                continue
            found[key] = (head.thread_id, head.checkpoint_ns)
    scan.ids = [ids or found[i.key] for i, ids in zip(heads, decoded, strict=True) if ids or i.key in found]
    return scan


def plan_heads_ids(saver: SaverState, prefix: str) -> Plan[list[tuple[str, str]]]:
    """:func:`plan_heads_scan`'s ids; what it could not take is logged (WARNING) and left out."""
    scan = yield from plan_heads_scan(saver, prefix)
    for damaged in scan.damaged:
        report_damage(damaged, None, "a listing of heads")
    return scan.ids


def plan_namespaces(saver: SaverState, thread_id: str) -> Plan[list[str]]:
    """Every namespace of a thread."""
    return [ns for _t, ns in (yield from plan_heads_ids(saver, keys.heads_prefix(thread_id)))]


def _delta_refusal(saver: SaverState, thread_id: str, rec: Record) -> MigrationError:
    return MigrationError(
        f"checkpoint {rec.id} of thread {thread_id!r} is in state schema {rec.schema} and is part of a "
        f"DeltaChannel history, which lazy reads do not migrate (code is at schema {saver._schema}). "
        "Nothing was loaded; rewrite the thread with `langgraph-handoff migrate` (or "
        "ObjectStoreSaver.migrate_thread) and it reads normally."
    )


def plan_delta_history(
    saver: SaverState, config: RunnableConfig, channels: Sequence[str]
) -> Plan[dict[str, DeltaChannelHistory]]:
    for _ in range(3):
        try:
            return (yield from _delta_history_once(saver, config, channels))
        except Vanished as gone:
            vanished = gone
    raise vanished.corrupt()


def _delta_history_once(
    saver: SaverState, config: RunnableConfig, channels: Sequence[str]
) -> Plan[dict[str, DeltaChannelHistory]]:
    if not channels:
        return {}
    thread_id, ns_or_none, cid = target_of(config, "get_delta_channel_history")
    ns = ns_or_none or ""
    result: dict[str, DeltaChannelHistory] = {ch: {"writes": []} for ch in channels}
    hkey = keys.head_key(thread_id, ns)
    head, head_etag = reading.head_from(saver, (yield Get(hkey)), thread_id, ns)
    if head is None or not head.records:
        return result
    target_id = cid if cid is not None else head.latest_id
    if target_id is None or not keys.is_checkpoint_id(target_id):
        return result
    found = yield from reading.find_record(saver, thread_id, ns, head, target_id)
    if found is None:
        return result
    target, _, head = found
    schema = saver._schema  # (a property: read once, not per ancestor)
    if target.schema != schema:
        raise _delta_refusal(saver, thread_id, target)
    # The ancestors the history needs, from the target's parent back to the checkpoint that
    # stores a value of every channel asked for (the last snapshot). Records only: they are in
    # the head or in sealed segments this process has cached.
    chain: list[tuple[Record, PayloadTable]] = []
    remaining = set(channels)
    cur = target.parent
    # the head or segment that held the last ancestor: the next ones are mostly there too
    records: Mapping[str, Record] = {}
    table: PayloadTable = {}
    seen: set[str] = {target.id}  # a parent chain written by someone hostile may loop
    while cur is not None and remaining:
        if cur in seen:
            raise parent_cycle(thread_id, ns, cur)
        seen.add(cur)
        rec = records.get(cur)  # a hit is a record stored under that very id
        if rec is None:
            if not keys.is_checkpoint_id(cur):
                break
            held = yield from reading.find_container(saver, thread_id, ns, head, cur)
            if held is None:
                break
            records, table, head = held
            rec = records[cur]
        if rec.schema != schema:
            # its stored value would seed the history unmigrated (a thread read lazily, then
            # written once by new code): refuse rather than undo the steps silently
            raise _delta_refusal(saver, thread_id, rec)
        chain.append((rec, table))
        remaining.difference_update(rec.values)
        cur = rec.parent
    # Ancestors have smaller ids: list writes strictly below the target's own. The first page
    # asks for about as many keys as the chain's records hold folded writes documents, not for
    # S3's 1,000: on a long thread that LIST came back full on every turn, a server-side listing
    # and a response to parse of ten times the keys the walk reads (long-threads bench,
    # delta-100 at turns 451-500: 931 keys a turn, 70 now, in as many LISTs). Documents this
    # process never saw folded (another writer's, a fork's) only make the cursor page on.
    folded = sum(len(rec.writes) for rec, _ in chain)
    wprefix = keys.writes_prefix(thread_id, ns)
    # A run that just read this checkpoint as the latest, with the head unchanged since, goes on
    # from the page that read listed (HeadCache.keep_listing): the keys below the target come
    # first in it. Any other caller lists afresh.
    below = wprefix + keys.invert_checkpoint_id(target_id) + "/~~"  # ancestors' keys sort after it
    expected = folded + folded // 8 + 16
    page = None
    if made_by_run(config):
        saver._cache.delta_runs = True  # the next runs' reads list the page this walk goes on from
        saver._cache.note_walk(thread_id, ns, len(target.writes) + expected)  # ...that long
        page = saver._cache.take_listing(thread_id, ns, head_etag, target_id)
    older = 0 if page is None else sum(1 for info in page.items if info.key > below)
    if page is None or (page.truncated and not older):
        # (a page that ended among the target's own writes would only page on through them)
        cursor = reading.WritesCursor(wprefix, start_after=below, first_page=expected)
    else:
        cursor = reading.WritesCursor(wprefix, page=page)
        cursor.page_size = max(1, min(expected - older, reading.WRITES_PAGE))
    remaining = set(channels)
    collected: dict[str, list[tuple[str, str, Any]]] = {ch: [] for ch in channels}
    loads = reading.write_loader(saver)
    for rec, table in chain:  # about a thousand a turn with a snapshot every 1,000: kept lean
        # (reading.writes_for, without creating a generator when the page in hand suffices)
        if cursor.need_more(rec.id):
            infos = yield from reading.writes_for(saver, cursor, rec.id)
        else:
            infos = cursor.take(rec.id)
        seeds = [ch for ch in remaining if ch in rec.values]
        known = tasks, want = reading.folded_tasks(saver, thread_id, ns, rec, infos)
        if want or seeds:
            tasks, seed_values = yield from reading.fetch(saver, thread_id, ns, rec, table, infos, seeds, known)
            for ch in seeds:
                result[ch]["seed"] = seed_values[ch]
        if tasks:
            with reading.user_data(keys.head_key(thread_id, ns), f"a pending write of checkpoint {rec.id!r}"):
                pending = sorted_pending(tasks, loads, remaining)
            for write in reversed(pending):
                collected[write[1]].append(write)
        remaining.difference_update(seeds)
    for ch in channels:
        result[ch]["writes"] = list(reversed(collected[ch]))
    return result


def ids_of_head_key(head_key: str) -> tuple[str, str] | None:
    """``heads/{T}/{N}`` -> (thread id, namespace), or None if a segment is hashed (or the key
    is not a head key at all: :func:`keys.is_head_key` tells the two apart)."""
    parts = head_key.split("/")
    if len(parts) != 3:
        return None
    _, t, n = parts
    thread_id, ns = keys.decode_segment(t), keys.decode_segment(n)
    return None if thread_id is None or ns is None else (thread_id, ns)


def _writes_prefix_of_head(head_key: str) -> str:
    """``heads/{T}/{N}`` -> ``data/{T}/{N}/w/`` (no decoding needed, so it can be batched)."""
    return "data/" + head_key[len("heads/") :] + "/w/"


def _neg(checkpoint_id: str) -> str:
    """A key that sorts checkpoint ids descending in a min-heap."""
    return checkpoint_id.translate(str.maketrans("0123456789abcdef", "fedcba9876543210"))
