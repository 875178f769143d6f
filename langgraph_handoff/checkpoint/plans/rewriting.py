"""History rewriting: removing checkpoints from a namespace, crash-safely, while writers run.

``prune``, ``delete_for_runs`` and a ``keep_latest`` sweep all drop checkpoints the same way
(:func:`plan_rewrite_namespace`): new segments first (create-only), then the head by
compare-and-swap, and only then the objects nothing references any more. A crash between the
steps leaves unreferenced objects, never a head that points at nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from langgraph_handoff._format import keys
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.records import Head, PayloadTable, Record, Segment, SegmentRef, payloads_for
from langgraph_handoff.checkpoint.driver import Batch, Plan, Sleep
from langgraph_handoff.checkpoint.plans import bookkeeping, listing, manifest, reading
from langgraph_handoff.checkpoint.plans.blobs import blob_keys
from langgraph_handoff.checkpoint.plans.state import SaverState, backoff, parent_cycle
from langgraph_handoff.errors import ConflictError, PreconditionFailedError, UnknownOutcomeError
from langgraph_handoff.stores.base import DeleteMany, Get, Put


def plan_load_namespace(
    saver: SaverState, thread_id: str, ns: str
) -> Plan[tuple[Head | None, str | None, dict[str, Segment], list[str]]]:
    """The head and every sealed segment of a namespace, as one consistent snapshot. A
    segment that vanished was replaced by a concurrent rewrite: read the new head.

    The head comes back *unpacked*: ``segments`` lists every segment, and the archive the
    stored head named (see :mod:`.manifest`) is returned apart, as a key that is garbage once
    a head written from this one is stored (it does not name it)."""
    for _ in range(5):
        stored, head, etag = yield from plan_read_unpacked(saver, thread_id, ns)
        archived = manifest.replaced_archive(thread_id, ns, stored, head)
        segments: dict[str, Segment] = {}
        missing = None
        if head is not None and head.segments:
            objs = yield Batch(tuple(Get(keys.segment_key(thread_id, ns, s.key)) for s in head.segments))
            for ref, obj in zip(head.segments, objs, strict=True):
                if obj is None:
                    missing = ref
                    break
                segments[ref.key] = rec_io.decode_segment(obj.body, key=obj.key)
        if missing is None:
            return head, etag, segments, archived
    assert missing is not None
    raise reading.missing_segment(saver, thread_id, ns, missing)


def plan_read_unpacked(saver: SaverState, thread_id: str, ns: str) -> Plan[tuple[Head | None, Head | None, str | None]]:
    """The stored head and the same head unpacked (``(stored, unpacked, etag)``; see
    :func:`.manifest.plan_unpacked`), read again while a fold or prune keeps replacing its
    archive under us."""
    for _ in range(5):
        stored, etag = reading.head_from(saver, (yield Get(keys.head_key(thread_id, ns))), thread_id, ns)
        unpacked = yield from manifest.plan_unpacked(saver, thread_id, ns, stored)
        if stored is None or unpacked is not None:
            return stored, unpacked, etag
    assert stored is not None and stored.archive is not None
    raise manifest.missing_archive(thread_id, ns, stored.archive)


def plan_rewrite_namespace(
    saver: SaverState,
    thread_id: str,
    ns: str,
    choose_drop: Callable[[dict[str, Record]], set[str]],
    on_version: str | None = None,
) -> Plan[int]:
    """Remove the records ``choose_drop`` picks from one namespace, crash-safely:

    1. write replacement segments (create-only);
    2. compare-and-swap the head to the new record set and segment manifest (retried on
       conflicts, so concurrent writers are never overwritten);
    3. delete what nothing references any more: replaced segments, the dropped checkpoints'
       writes and the blobs only they owned.

    A crash between steps leaves unreferenced objects, never a head that points at nothing.

    ``on_version``: rewrite only the head with this ETag (the version a caller decided on, as
    a TTL sweep does); once the head moved, nothing is dropped (``-1``).
    """
    carried: list[str] = []  # archives a swap of ours replaced before we had to start over
    for attempt in range(saver.layout.max_attempts):
        head, etag, segments, archived = yield from plan_load_namespace(saver, thread_id, ns)
        if on_version is not None and etag != on_version:
            return -1
        if head is None:
            return 0
        everything: dict[str, Record] = {}
        for seg in segments.values():
            everything.update(seg.records)
        everything.update(head.records)
        drop = choose_drop(everything) & set(everything)
        if not drop:
            return 0
        # Readers take the head's newest record as the latest: if every checkpoint left in the
        # head is dropped, the newest survivor moves up from its segment into the head.
        survivors = set(everything) - drop
        promote = {max(survivors)} - set(head.records) if survivors else set()
        kept_head = {i: r for i, r in head.records.items() if i not in drop}
        table: PayloadTable = dict(head.payloads)
        for seg in segments.values():
            for i in promote & set(seg.records):
                kept_head[i] = seg.records[i]
                for origin, chs in payloads_for([seg.records[i]], seg.payloads).items():
                    table[origin] = {**table.get(origin, {}), **chs}
        new_refs: list[SegmentRef] = []
        new_segments: list[tuple[str, bytes]] = []
        replaced: list[str] = []
        remaining: list[tuple[dict[str, Record], PayloadTable]] = []  # what the new manifest holds
        schema = saver.layout.schema_version
        for ref in head.segments:
            seg = segments[ref.key]
            left = {i: r for i, r in seg.records.items() if i not in drop and i not in kept_head}
            if len(left) == len(seg.records):
                new_refs.append(ref)
                remaining.append((seg.records, seg.payloads))
                continue
            replaced.append(keys.segment_key(thread_id, ns, ref.key))
            if not left:
                continue
            ids = sorted(left)
            suffix = keys.segment_suffix(ids[0], secrets.token_hex(4))
            new_seg = Segment(thread_id, ns, left, payloads_for(left.values(), seg.payloads))
            remaining.append((new_seg.records, new_seg.payloads))
            new_segments.append(
                (keys.segment_key(thread_id, ns, suffix), rec_io.encode_segment(new_seg, schema_version=schema))
            )
            new_refs.append(SegmentRef(suffix, ids[0], ids[-1], len(ids)))
        new_head = Head(thread_id, ns, kept_head, payloads_for(kept_head.values(), table), tuple(new_refs), head.meta)
        for key, body in new_segments:
            yield Put(key, body)
        stacked = False
        try:
            new_etag = yield Put(
                keys.head_key(thread_id, ns), rec_io.encode_head(new_head, schema_version=schema), if_match=etag
            )
        except (PreconditionFailedError, UnknownOutcomeError):
            stored, fresh, fresh_etag = yield from plan_read_unpacked(saver, thread_id, ns)
            mine = fresh is not None and fresh.segments == new_head.segments and set(fresh.records) == set(kept_head)
            if mine or _landed_under(saver, fresh, new_head, new_segments, replaced, drop, thread_id, ns):
                # Our swap landed unseen (perhaps with a writer's checkpoints, or a lease or
                # migrate change, on top): done, and the garbage below must go (a deleted
                # run's checkpoints must not linger). What is stored now, not what we
                # computed, is what the cache keeps and what the collection keeps alive,
                # including what a writer sealed since.
                assert fresh is not None
                sealed = yield from _load_segments(saver, thread_id, ns, [s for s in fresh.segments
                                                                      if s not in new_head.segments])  # fmt: skip
                if sealed is None:  # replaced meanwhile: read it all again
                    carried += archived
                    yield Sleep(backoff(saver.layout, attempt))
                    continue
                remaining += sealed
                saver._cache.observe(thread_id, ns, stored, fresh_etag)
                new_head, new_etag, stacked = fresh, fresh_etag, True
            else:
                # Not ours: start over. Our new segments are orphans unless the head lists them.
                listed = {keys.segment_key(thread_id, ns, r.key) for r in (fresh.segments if fresh else ())}
                orphans = tuple(k for k, _ in new_segments if k not in listed)
                if orphans:
                    yield DeleteMany(orphans)
                yield Sleep(backoff(saver.layout, attempt))
                continue
        if not stacked:
            saver._cache.wrote(thread_id, ns, new_head, new_etag, used_empty_read=False)
        # Garbage: replaced segments and archive, writes of dropped checkpoints, blobs only
        # they owned.
        garbage = [*replaced, *archived, *carried]
        for info in (yield from listing.list_all(saver, keys.writes_prefix(thread_id, ns))):
            parsed = keys.parse_writes_key(info.key)
            if parsed is not None and parsed[0] in drop:
                garbage.append(info.key)
        # a dropped checkpoint's blobs, and those its values referenced (the older parts of
        # a snapshot stored as pieces are owned by checkpoints dropped before), go unless what
        # remains references them (by key: an owner kept for one value may have others
        # nothing uses any more)
        still = blob_keys(thread_id, ns, [(new_head.records, new_head.payloads), *remaining], may_spill=True)
        dropped = [({i: r for i, r in head.records.items() if i in drop}, head.payloads)]
        dropped += [({i: r for i, r in seg.records.items() if i in drop}, seg.payloads) for seg in segments.values()]
        referenced = blob_keys(thread_id, ns, dropped)
        for info in (yield from listing.list_all(saver, keys.blobs_prefix(thread_id, ns))):
            if (keys.parse_blob_key(info.key) in drop or info.key in referenced) and info.key not in still:
                garbage.append(info.key)
        if garbage:
            yield DeleteMany(tuple(garbage))
        return len(drop)
    raise ConflictError(
        f"could not rewrite thread {thread_id!r} namespace {ns!r}: writers kept moving it "
        f"({saver.layout.max_attempts} attempts). Retry when the thread is idle."
    )


def _load_segments(
    saver: SaverState, thread_id: str, ns: str, refs: list[SegmentRef]
) -> Plan[list[tuple[dict[str, Record], PayloadTable]] | None]:
    """The records and payloads of ``refs``; None if one of them is gone."""
    out = []
    for ref in refs:
        seg = yield from reading.load_segment(saver, thread_id, ns, ref)
        if seg is None:
            return None
        out.append((seg.records, seg.payloads))
    return out


def _landed_under(
    saver: SaverState,
    fresh: Head | None,
    ours: Head,
    new_segments: list[tuple[str, bytes]],
    replaced: list[str],
    drop: set[str],
    thread_id: str,
    ns: str,
) -> bool:
    """Is ``fresh`` our rewrite with a writer's checkpoints on top? It lists every segment we
    wrote (fresh keys nobody else knows) and none we replaced, and holds none of the dropped
    checkpoints, not even in a segment sealed since. When unsure, no: the caller starts over,
    which at worst leaves garbage."""
    if fresh is None or fresh.records.keys() & drop:
        return False
    listed = {keys.segment_key(thread_id, ns, r.key) for r in fresh.segments}
    if not {k for k, _ in new_segments} <= listed or listed & set(replaced):
        return False
    sealed_since = [s for s in fresh.segments if s not in ours.segments]
    return not any(s.covers(d) for s in sealed_since for d in drop)


def keep_latest_drop(saver: SaverState, thread_id: str, ns: str, records: dict[str, Record]) -> set[str]:
    """Everything but the latest checkpoint, except the ancestors a DeltaChannel still needs:
    from the latest back to (and including) the nearest one holding a value for each delta
    channel the latest stores no value for (the history ``get_delta_channel_history`` walks)."""
    if not records:
        return set()
    latest = records[max(records)]
    keep = {latest.id}
    kept = bookkeeping.of_record(saver.serde, latest)
    if kept is None:
        return set()  # which ancestors a DeltaChannel needs is not known: keep them all
    need = {ch for ch in kept.delta if ch not in latest.values}
    cur = latest.parent
    while need and cur is not None and cur in records:
        if cur in keep:
            raise parent_cycle(thread_id, ns, cur)
        rec = records[cur]
        keep.add(cur)
        need -= set(rec.values)
        cur = rec.parent
    return set(records) - keep
