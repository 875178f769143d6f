"""Maintenance: ``delete_thread``, ``delete_for_runs``, ``prune`` and ``copy_thread``.

Administrative operations over whole threads (``delete_for_runs`` and ``prune`` report progress
at INFO). Each orders its writes so that a thread reads whole or empty at whatever moment it is
stopped: ``delete_thread`` deletes the heads before the data, ``copy_thread`` writes them after
it, and ``prune`` and ``delete_for_runs`` go through :mod:`.rewriting`. A leased session keeps
its lease and fencing epoch through all of them, so a superseded owner's late write stays refused.

A thread whose root head cannot be read is still deleted, without reading it: the damaged head
is replaced by a tombstone by compare-and-swap on its own ETag (a head repaired meanwhile is read
again instead), whose fencing epoch is :data:`LOST_EPOCH_GAP` above any still readable in the
thread: the lease it may have held is lost with it, and a worker still holding that lease must
stay refused, also after the next owner takes the session. Keys under the thread's ``heads/``
prefix that are not head keys are not its heads and are left alone. ``prune`` and
``delete_for_runs`` go on past a namespace they cannot read (left as it is) and raise
:class:`~langgraph_handoff.errors.DamagedObjectsError` at the end, naming every such object;
a key under ``heads/`` that is not a head key is only logged (it is not ours to read).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from langgraph_handoff._format import index_keys, keys
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff._format.records import Head, Record, blob_refs, payloads_for
from langgraph_handoff.checkpoint.driver import Batch, Plan, Sleep
from langgraph_handoff.checkpoint.fencing import released, session_of, with_session
from langgraph_handoff.checkpoint.plans import bookkeeping, listing, metadata_index, reading, rewriting
from langgraph_handoff.checkpoint.plans.attempts import Attempts
from langgraph_handoff.checkpoint.plans.state import SaverState, Vanished, backoff, chunks
from langgraph_handoff.checkpoint.ttl import restamp
from langgraph_handoff.errors import (
    ConflictError,
    CorruptObjectError,
    DamagedObjectsError,
    InvalidConfigError,
    PreconditionFailedError,
    ThreadExistsError,
    UnknownOutcomeError,
)
from langgraph_handoff.stores.base import DeleteMany, Get, Put

#: Administrative operations (delete_for_runs, prune, copy_thread) report progress here at INFO.
log = logging.getLogger("langgraph_handoff")
_PROGRESS_EVERY = 100
#: How far above the highest fencing epoch still readable in a thread the tombstone of a root
#: head that could not be read puts its epoch. That head may have held a session lease whose
#: epoch is lost with it; an epoch grows by one per change of owner (a compare-and-swap of the
#: root head each), so no lease can have got this far, and the next owner's epoch is above it.
LOST_EPOCH_GAP = 1 << 32


def plan_delete_thread(saver: SaverState, thread_id: Any) -> Plan[None]:
    tid = keys.validate_thread_id(thread_id)
    root_key = keys.head_key(tid, "")
    for attempt in range(saver.layout.max_attempts):
        # the thread's index entries, listed before anything goes: a put that lands after the
        # delete writes fresh ones, never among these (plans/metadata_index.py)
        listed, by_thread = yield from listing.list_all_many(
            saver, (keys.heads_prefix(tid), index_keys.by_thread_prefix(tid))
        )
        entries = [i.key for i in by_thread]
        heads = [i for i in listed if keys.is_head_key(i.key)]  # a stray file there is not this thread's
        data = yield from listing.list_all(saver, keys.thread_data_prefix(tid))
        root, etag = (None, None)
        ownership = HeadMeta()
        if any(i.key == root_key for i in heads):
            obj = yield Get(root_key)
            try:
                root, etag = reading.head_from(saver, obj, tid, "")
            except CorruptObjectError:
                # Deleted without being read: whatever lease it held is lost, so its tombstone
                # fences every epoch that lease can have had (LOST_EPOCH_GAP).
                assert obj is not None
                etag = obj.etag
                ownership = HeadMeta(fence=(yield from _readable_fence(saver, tid, heads, root_key)) + LOST_EPOCH_GAP)
        if root is not None:
            ownership = released(session_of(root.meta))
        if ownership != HeadMeta():
            # A leased session keeps its lease (released) and fencing epoch, so the next owner
            # gets a higher epoch and the old one's late writes stay refused. The tombstone
            # replaces the root head by compare-and-swap *first*: if anyone moved it meanwhile
            # (a write, an acquire), we start again instead of overwriting them.
            tomb = rec_io.encode_head(Head(tid, "", {}, {}, (), ownership), schema_version=saver.layout.schema_version)
            try:
                yield Put(root_key, tomb, if_match=etag)
            except (PreconditionFailedError, UnknownOutcomeError):
                try:
                    fresh, _ = reading.head_from(saver, (yield Get(root_key)), tid, "")
                except CorruptObjectError:
                    fresh = None  # still damaged, but not the bytes we decided on: decide again
                if fresh is None or fresh.has_history or fresh.meta != ownership:
                    yield Sleep(backoff(saver.layout, attempt))
                    continue
            heads = [i for i in heads if i.key != root_key]
        # Heads first: once they are gone the thread reads as empty even if we crash midway.
        if heads:
            yield DeleteMany(tuple(i.key for i in heads))
        if data:
            yield DeleteMany(tuple(i.key for i in data))
        yield from metadata_index.plan_delete_entries(entries)
        saver._cache.forget_thread(tid)
        return None
    raise ConflictError(
        f"thread {tid!r} kept changing while it was deleted ({saver.layout.max_attempts} attempts); "
        "retry when it is idle"
    )


def _readable_fence(saver: SaverState, tid: str, heads: Sequence[Any], root_key: str) -> Plan[int]:
    """The highest fencing epoch recorded in the thread's other heads that can be read (0 if
    none): a subgraph head carries every epoch its root had since it was first written."""
    others = [i.key for i in heads if i.key != root_key]
    fence = 0
    for chunk in chunks(others, 64):
        for key, obj in zip(chunk, (yield Batch(tuple(Get(k) for k in chunk))), strict=True):
            if obj is None:
                continue
            try:
                head = rec_io.decode_head(obj.body, key=key)
            except CorruptObjectError:
                continue
            fence = max(fence, head.meta.fence or 0)
    return fence


def plan_delete_for_runs(saver: SaverState, run_ids: Sequence[str]) -> Plan[None]:
    wanted = {str(r) for r in run_ids}
    if not wanted:
        return None

    def choose(records: dict[str, Record]) -> set[str]:
        # the run id kept in clear, never the user's metadata decoded (see plans/bookkeeping.py)
        return {i for i, r in records.items() if (b := bookkeeping.of_record(saver.serde, r)) and b.run_id in wanted}

    scanned = removed = 0
    scan = yield from listing.plan_heads_scan(saver, keys.heads_prefix())
    damaged = _unreadable(scan.damaged, "delete_for_runs")
    for thread_id, ns in scan.ids:
        try:
            removed += yield from rewriting.plan_rewrite_namespace(saver, thread_id, ns, choose)
        except listing.UNREADABLE as exc:  # reported at the end; the other threads go on
            damaged.append(DamagedObject.from_error(exc))
        scanned += 1
        if scanned % _PROGRESS_EVERY == 0:
            log.info("delete_for_runs: %d namespaces scanned, %d checkpoints removed so far", scanned, removed)
    log.info("delete_for_runs: done; %d namespaces scanned, %d checkpoints removed", scanned, removed)
    if damaged:
        raise DamagedObjectsError("delete_for_runs", damaged)
    return None


def _unreadable(damaged: Sequence[DamagedObject], walk: str) -> list[DamagedObject]:
    """Of what a listing of heads could not take, the heads of ours that cannot be read (raised
    at the end of the walk); keys that are not head keys are not ours, only logged."""
    out = []
    for d in damaged:
        if d.reason == "not_a_head":
            listing.report_damage(d, None, walk)
        else:
            out.append(d)
    return out


def plan_prune(saver: SaverState, thread_ids: Sequence[str], strategy: str) -> Plan[None]:
    if isinstance(thread_ids, str):
        raise TypeError("prune takes a sequence of thread ids, not a single string; wrap it in a list")
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
    tids = [keys.validate_thread_id(raw) for raw in thread_ids]  # all checked before anything changes
    damaged: list[DamagedObject] = []
    for done, tid in enumerate(tids, 1):
        if strategy == "delete":
            yield from plan_delete_thread(saver, tid)  # deletes a damaged thread without reading it
        else:
            removed = 0
            scan = yield from listing.plan_heads_scan(saver, keys.heads_prefix(tid))
            damaged += _unreadable(scan.damaged, "prune")
            for _tid, ns in scan.ids:
                try:
                    removed += yield from rewriting.plan_rewrite_namespace(
                        saver, tid, ns, partial(rewriting.keep_latest_drop, saver, tid, ns)
                    )
                except listing.UNREADABLE as exc:  # reported at the end; the other namespaces go on
                    damaged.append(DamagedObject.from_error(exc))
            log.debug("prune: thread %r: %d checkpoints removed", tid, removed)
        if done % _PROGRESS_EVERY == 0:
            log.info("prune(%s): %d of %d threads done", strategy, done, len(tids))
    if damaged:
        raise DamagedObjectsError(f"prune({strategy})", damaged)
    return None


def plan_prune_count(saver: SaverState, thread_id: str) -> Plan[int]:
    """How many checkpoints ``prune(keep_latest)`` would remove from a thread now: per namespace,
    everything but the latest and the ancestors a DeltaChannel still needs (the rule
    :func:`plan_prune` applies). Reads every head and segment; writes nothing."""
    removed = 0
    for ns in (yield from listing.plan_namespaces(saver, thread_id)):
        head, _etag, segments, _archived = yield from rewriting.plan_load_namespace(saver, thread_id, ns)
        if head is None:
            continue
        everything = {i: r for seg in segments.values() for i, r in seg.records.items()} | dict(head.records)
        removed += len(rewriting.keep_latest_drop(saver, thread_id, ns, everything))
    return removed


def plan_copy_thread(saver: SaverState, source_thread_id: Any, target_thread_id: Any) -> Plan[None]:
    """Copy every namespace of ``src`` to ``dst``:

    1. check ``dst`` holds no checkpoints (an emptied head counts as empty);
    2. per namespace, read a consistent snapshot of ``src`` (head, segments, writes documents
       and the blobs the records reference) and write it under ``dst``; if anything it
       references vanishes meanwhile (a concurrent prune), start that namespace again;
    3. write the heads last, create-only (or over an emptied head by compare-and-swap), so a
       namespace of the copy is visible whole or not at all.
    """
    src = keys.validate_thread_id(source_thread_id)
    dst = keys.validate_thread_id(target_thread_id)
    if src == dst:
        raise InvalidConfigError("copy_thread needs two different thread ids")
    emptied: dict[str, str] = {}  # dst namespace -> ETag of its emptied head
    owned: dict[str, HeadMeta] = {}  # dst namespace -> its own lease and fence (kept)
    for info in (yield from listing.list_all(saver, keys.heads_prefix(dst))):
        obj = yield Get(info.key)
        if obj is None:
            continue
        head = rec_io.decode_head(obj.body, key=obj.key)
        if head.has_history:
            raise ThreadExistsError(dst)
        emptied[head.checkpoint_ns] = obj.etag
        owned[head.checkpoint_ns] = session_of(head.meta)
    heads: list[tuple[str, bytes]] = []
    for ns in (yield from listing.plan_namespaces(saver, src)):
        for attempt in range(saver.layout.max_attempts):
            try:
                body = yield from _copy_namespace(saver, src, dst, ns, owned.get(ns, HeadMeta()))
                break
            except Vanished:
                yield Sleep(backoff(saver.layout, attempt))
        else:
            raise ConflictError(
                f"thread {src!r} namespace {ns!r} kept changing while it was copied "
                f"({saver.layout.max_attempts} attempts); retry when it is idle"
            )
        if body is not None:
            heads.append((ns, body))
    # the copy's index entries before its heads: a copy is never found missing
    yield from metadata_index.plan_copy_entries(saver, src, dst, [ns for ns, _ in heads])
    for ns, body in heads:
        key = keys.head_key(dst, ns)
        etag = emptied.get(ns)
        tally = Attempts()
        for _ in range(saver.layout.max_attempts):
            try:
                yield Put(key, body, if_match=etag) if etag else Put(key, body, if_none_match=True)
                break
            except (PreconditionFailedError, UnknownOutcomeError) as exc:
                obj = yield Get(key)
                if obj is not None and obj.body == body:
                    break  # our own write, whose answer was lost
                if (obj is not None and obj.etag != etag) or isinstance(exc, PreconditionFailedError):
                    raise ThreadExistsError(dst) from None  # someone wrote to the target meanwhile
                tally.failed(exc, changed=False)  # no answer and not there: send it again
        else:
            raise tally.exhausted(f"copy_thread {src!r} -> {dst!r}", f"copy_thread {src!r} -> {dst!r} kept losing")
    saver._cache.forget_thread(dst)
    log.info("copy_thread: %r -> %r, %d namespaces", src, dst, len(heads))
    return None


def _absent(src: str, ns: str, etag: str | None, key: str) -> Plan[None]:
    """A value the head references is absent. A concurrent prune or delete rewrites the head
    before it deletes what the head no longer names, so if the head has moved, the copy starts
    again (``Vanished``); if it has not, the value is missing: damage, not a busy thread."""
    hkey = keys.head_key(src, ns)
    now = yield Get(hkey)
    if now is not None and now.etag == etag:
        raise CorruptObjectError(key, f"{hkey} references this value but it is missing", "missing")
    raise Vanished(key, "")


def _copy_namespace(saver: SaverState, src: str, dst: str, ns: str, ownership: HeadMeta) -> Plan[bytes | None]:
    """Write one namespace's data objects under ``dst``; return its head, re-encoded for
    ``dst`` (None if the namespace vanished). Raises Vanished if the source moved."""
    head, etag, segments, _archived = yield from rewriting.plan_load_namespace(saver, src, ns)
    if head is None:
        return None
    schema = saver.layout.schema_version
    puts: list[Put] = []
    tables = [(head.records.values(), head.payloads)]
    for ref in head.segments:
        seg = segments[ref.key]
        tables.append((seg.records.values(), seg.payloads))
        puts.append(
            Put(
                keys.segment_key(dst, ns, ref.key),
                rec_io.encode_segment(replace(seg, thread_id=dst), schema_version=schema),
            )
        )
    used_blobs = {
        used
        for recs, table in tables
        for origin, chs in payloads_for(list(recs), table).items()
        for payload in chs.values()
        for used in blob_refs(origin, payload)
    }
    blob_keys = [(keys.blob_key(src, ns, o, d), keys.blob_key(dst, ns, o, d)) for o, d in sorted(used_blobs)]
    for chunk in chunks(blob_keys, 64):
        for (from_key, to_key), obj in zip(chunk, (yield Batch(tuple(Get(k) for k, _ in chunk))), strict=True):
            if obj is None:
                yield from _absent(src, ns, etag, from_key)
            rec_io.decode_blob(obj.body, key=from_key)  # bytes that are not a blob of ours are never copied in
            puts.append(Put(to_key, obj.body))
    wdocs = [i.key for i in (yield from listing.list_all(saver, keys.writes_prefix(src, ns)))]
    for chunk in chunks(wdocs, 64):
        for key, obj in zip(chunk, (yield Batch(tuple(Get(k) for k in chunk))), strict=True):
            if obj is None:
                raise Vanished(key, "")
            doc = rec_io.decode_writes(obj.body, key=obj.key)
            to_key = keys.writes_key(dst, ns, doc.checkpoint_id, doc.task_id)
            puts.append(Put(to_key, rec_io.encode_writes(replace(doc, thread_id=dst), schema_version=schema)))
    for chunk in chunks(puts, 64):
        yield Batch(tuple(chunk))
    # Folded writes keep the source's ETags; the re-encoded documents have new ones, so readers
    # of the copy simply fetch them once.
    # a session's lease and fencing epoch belong to its thread: the copy gets none of the
    # source's, and keeps the target's own if it had one
    meta = with_session(restamp(with_session(head.meta, HeadMeta()), saver.ttl, saver._clock()), ownership)
    return rec_io.encode_head(replace(head, thread_id=dst, meta=meta), schema_version=schema)
