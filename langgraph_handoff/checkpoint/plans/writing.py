"""Writing: ``put`` and ``put_writes``.

A ``put`` builds the checkpoint's record (unchanged values point at the parent's copy), the next
head (pending writes folded in, large superseded values spilled behind it, old records sealed
into a segment when it grows too big), and moves the head by one compare-and-swap. What the new
head references is written first; a lost or unsettled swap is re-read and retried (or found to
have landed after all), and a conflicting checkpoint is refused by :mod:`~langgraph_handoff.checkpoint.fencing`'s admission
rule. A lease-bound saver stamps its fencing epoch in every head it writes and undoes a subgraph
write that a takeover overtook. ``put_writes`` stores one task's writes create-only, and merges a
retried task's writes by compare-and-swap.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, get_checkpoint_metadata

from langgraph_handoff._format import keys, tails
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff._format.records import (
    PIECES_MAX,
    BlobRef,
    Bookkeeping,
    Folded,
    Head,
    Inline,
    Payload,
    PayloadTable,
    Piece,
    Pieces,
    Record,
    Segment,
    SegmentRef,
    Tail,
    WriteItem,
    WritesDoc,
    payloads_for,
)
from langgraph_handoff._frozen import fast_replace
from langgraph_handoff.checkpoint.driver import Batch, Plan, Sleep
from langgraph_handoff.checkpoint.fencing import PutIntent, check_put, fence_of, fenced, write_refusal
from langgraph_handoff.checkpoint.plans import bookkeeping as bookkeeping_io
from langgraph_handoff.checkpoint.plans import manifest, metadata_index, reading
from langgraph_handoff.checkpoint.plans.attempts import Attempts
from langgraph_handoff.checkpoint.plans.blobs import content_digest
from langgraph_handoff.checkpoint.plans.state import SaverState, backoff, made_by_run, target_of, tuple_config
from langgraph_handoff.checkpoint.ttl import restamp, swept_mark
from langgraph_handoff.checkpoint.writes import merge_items, slot_items
from langgraph_handoff.errors import (
    InvalidCheckpointIdError,
    InvalidConfigError,
    OwnershipLostError,
    PreconditionFailedError,
    ThreadExpiredError,
    UnknownOutcomeError,
)
from langgraph_handoff.stores.base import DeleteMany, Get, Put

try:  # DeltaChannel's snapshot type: private to langgraph-checkpoint and part of a beta API
    from langgraph.checkpoint.serde.types import _DeltaSnapshot
except ImportError:  # pragma: no cover - a langgraph-checkpoint that renamed it

    class _DeltaSnapshot:  # type: ignore[no-redef]
        """Stands in for a type this langgraph-checkpoint does not have: snapshots are then
        stored as any other value, which costs bytes, never correctness."""


log = logging.getLogger("langgraph_handoff")


def _inline_size(rec: Record, table: PayloadTable) -> int:
    """Bytes one checkpoint needs in a head: its record plus the inline values it references."""
    size = len(rec.checkpoint[1]) + len(rec.metadata[1]) + 64
    for ch, (origin, _v) in rec.values.items():
        payload = table.get(origin, {}).get(ch)
        if isinstance(payload, (Inline, Tail)):
            size += len(payload.data) + len(ch)
    return size


def _folded_size(folded: Folded) -> int:
    return sum(len(w.data) + len(w.channel) + 16 for w in folded.items)


def _fence_for(saver: SaverState, thread_id: str) -> int | None:
    if saver._fence_lookup is not None:
        return saver._fence_lookup(thread_id)
    if saver._fence is None:
        return None
    bound, epoch = saver._fence
    if thread_id != bound:
        raise InvalidConfigError(
            f"this saver is bound to the lease of session {bound!r} and cannot write thread {thread_id!r}; "
            "use the unbound saver (or one bound to that session's lease)"
        )
    return epoch


def _build_record(
    saver: SaverState,
    thread_id: str,
    ns: str,
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
    parent: Record | None,
    head: Head | None,
    cp_typed: tuple[str, bytes],
    md_typed: tuple[str, bytes],
    memo: dict[str, tuple[str, bytes]],
    bookkeeping: Bookkeeping,
) -> tuple[Record, dict[str, Payload], list[tuple[str, bytes, bytes]]]:
    """The record for ``checkpoint``, the payloads it stores, and the blobs to write first, as
    ``(key, envelope, value bytes)``.

    A value is stored again only if its channel is in ``new_versions`` or the parent record
    does not hold the same version of it; otherwise the record points at the parent's copy. A
    value that only appended to the parent's is stored as a :class:`~.records.Tail` over a base
    blob (:func:`_as_tail`).

    A large ``DeltaChannel`` snapshot goes straight to its own blob, as values past
    ``blob_threshold`` do: no later checkpoint stores that channel's value (they hold only the
    writes since), so an inline copy would leave the head at the next put anyway, after riding
    in two heads and then a spill blob. Written once instead, a snapshot of a 2,000-message
    conversation costs a third of the bytes. When the previous snapshot is at hand, only what
    was appended since is written (:func:`_as_pieces`).
    """
    table = head.payloads if head is not None else {}
    cid = checkpoint["id"]
    versions = checkpoint.get("channel_versions") or {}
    parent_values = parent.values if parent is not None else {}
    values: dict[str, tuple[str, Any]] = {}
    payloads: dict[str, Payload] = {}
    blobs: list[tuple[str, bytes, bytes]] = []
    for ch, value in checkpoint["channel_values"].items():
        version = versions.get(ch)
        if version is None:
            continue  # a value without a version is not part of the checkpoint (as InMemorySaver)
        inherited = parent_values.get(ch)
        if ch not in new_versions and inherited is not None and inherited[1] == version:
            values[ch] = inherited
            continue
        if ch not in memo:
            memo[ch] = saver.serde.dumps_typed(value)
        typ, data = memo[ch]
        values[ch] = (cid, version)
        before = table.get(inherited[0], {}).get(ch) if inherited is not None else None
        tail = _as_tail(saver, thread_id, ns, typ, data, inherited[0], before) if inherited and before else None
        snapshot = len(data) >= saver.layout.spill_threshold and isinstance(value, _DeltaSnapshot)
        pieces = (
            _as_pieces(saver, thread_id, ns, cid, ch, typ, data, parent, head) if snapshot and tail is None else None
        )
        if tail is not None:
            payloads[ch], base_write = tail
            if base_write is not None:
                blobs.append(base_write)
        elif pieces is not None:
            payloads[ch], piece_write = pieces
            blobs.append(piece_write)
        elif len(data) >= saver.layout.blob_threshold or snapshot:
            ref = BlobRef(typ, content_digest(data), len(data))
            body = rec_io.encode_blob(data, schema_version=saver.layout.schema_version)
            payloads[ch] = ref
            blobs.append((keys.blob_key(thread_id, ns, cid, ref.digest), body, data))
        else:
            payloads[ch] = Inline(typ, data)
    parent_id = parent.id if parent is not None else None
    record = Record(cid, parent_id, cp_typed, md_typed, values, schema=saver._schema, bookkeeping=bookkeeping)
    return record, payloads, blobs


#: a tail longer than this and than 1/16 of its base is stored whole instead (a "rebase"): each
#: put writes a tail of at most that much, and the base, written again once per rebase, costs
#: little spread over the puts in between. Measured on the long-threads bench's plain list, KiB
#: written per turn at turns 41-50 / 91-100 / 226-250 / 501-600 (memory store, 2026-12-02):
#: 8 KiB here and 8 KiB for TAIL_HEAD_FLOOR: 24.0 / 31.9 / 57.7 / 99.0; 16 and 32 KiB: 59.2 /
#: 63.0 / 61.5 / 107.5; 8 and 16 KiB: 31.8 / 43.4 / 64.2 / 96.0; 6 and 8 KiB: 24.4 / 37.5 at the
#: first two (more rebases); 10 and 8 KiB: 30.4 / 41.0. At turn 600, 1/8 instead of 1/16 gave
#: 147 and 64 KiB with 1/8 gave 163.
TAIL_REBASE_MIN = 8 * 1024
TAIL_REBASE_DIV = 16
#: a head whose latest checkpoint stores a tail is sealed for overhead from this size on: its
#: older records hold shorter copies of the latest's tail, so keeping them costs every put.
#: (From 6 to 12 KiB the figures above do not move: the head then seals about once a rebase.)
TAIL_HEAD_FLOOR = 8 * 1024
#: ... and once it holds more records than this, however small they are: each put rewrites the
#: head, and a head sealed about once a rebase carried a whole rebase's records. Same bench,
#: with the compact segment manifest: 19.4 / 28.2 / 49.0 / 90.4 KiB a turn, against 23.7 / 31.2
#: / 57.3 / 94.1 without this rule, 20.8 / 31.3 / 50.3 / 93.0 with 18 and 23.7 / 31.2 / 55.6 /
#: 93.6 with 24, for 0.27 segment PUTs a turn at turns 501-600 instead of 0.21.
TAIL_HEAD_RECORDS = 12


def _as_tail(
    saver: SaverState, thread_id: str, ns: str, typ: str, data: bytes, origin: str, before: Payload
) -> tuple[Tail, tuple[str, bytes, bytes] | None] | None:
    """``data`` as a tail over the base of ``before`` (the parent's value of the channel, owned
    by ``origin``), and the base blob to write first if it is not stored yet; None to store the
    value whole.

    The base is the parent's value itself when that is stored whole (inline: its blob is written
    before the head, under the key a spill would give it, so the spill is the same object), or
    the base of the parent's tail, and a bare msgpack array (a list in an ext frame, a
    ``DeltaChannel`` snapshot, is stored as pieces). Tails never stack: a base is always a whole
    value. Only bytes are compared (:func:`.tails.split`), so a list changed in place is simply
    stored whole; so is a value whose base this process does not hold in memory (a rebase, never
    a read).
    """
    min_base = saver.layout.tail_min_base
    if min_base is None or before.type != typ or (isinstance(before, Inline) and len(before.data) < min_base):
        return None  # (checked first: most values are small)
    if isinstance(before, Pieces):
        return None  # a snapshot's: the next one is stored as pieces too (_as_pieces)
    base: bytes | None
    if isinstance(before, Inline):
        base, base_origin, digest = before.data, origin, ""
    else:
        base_origin, digest = before.base_ref() if isinstance(before, Tail) else (origin, before.digest)
        base = saver._cache.immutable.blob(keys.blob_key(thread_id, ns, base_origin, digest))
    if base is None or len(base) < min_base or tails.array_header(base) is None:
        return None  # (a list in an ext frame, a DeltaChannel snapshot, goes to _as_pieces)
    split = tails.split(base, data)  # a memcmp: cheap next to serialising the value
    if split is None or len(split[1]) > max(TAIL_REBASE_MIN, len(base) // TAIL_REBASE_DIV):
        return None
    write: tuple[str, bytes, bytes] | None = None
    if isinstance(before, Inline):  # its blob is written first, unless a spill of it was seen written
        digest = before.spill or content_digest(base)
        key = keys.blob_key(thread_id, ns, base_origin, digest)
        if key not in saver._cache.get(thread_id, ns).spilled:
            write = (key, rec_io.encode_blob(base, schema_version=saver.layout.schema_version), base)
    base_count = tails.array_header(base)
    assert base_count is not None  # split() checked it
    return Tail(typ, base_origin, digest, len(base), base_count[0], split[0], split[1]), write


#: A snapshot is stored whole again (a "rebase") once the pieces since its whole copy would
#: add up to more than ``PIECES_GROWTH`` times that copy, or would number more than
#: ``PIECES_MAX``: with snapshots growing by d bytes each, the bytes written per snapshot then
#: average about 2.5 d while the cap is not reached, and a cold read fetches at most
#: ``PIECES_MAX`` blobs, in one batch. (Twice, not once: a ``DeltaChannel`` whose second
#: snapshot doubles its first, as ``snapshot_frequency=1000`` on a 1,000-turn thread does, would
#: otherwise store it whole.)
PIECES_GROWTH = 2
#: How far back :func:`_previous_snapshot` walks the parents (a ``DeltaChannel`` stores its
#: snapshot every ``snapshot_frequency`` updates; the walk only looks at records in memory).
SNAPSHOT_WALK_MAX = 4096


def _as_pieces(
    saver: SaverState,
    thread_id: str,
    ns: str,
    cid: str,
    ch: str,
    typ: str,
    data: bytes,
    parent: Record | None,
    head: Head | None,
) -> tuple[Pieces, tuple[str, bytes, bytes]] | None:
    """A ``DeltaChannel`` snapshot as the previous snapshot's blobs plus one new blob of what was
    appended since, and that blob to write first; None to store it whole.

    Only bytes are compared (:func:`.tails.split`), so a list changed in place is stored whole.
    So is a snapshot whose predecessor this process does not hold in memory (never a read), or
    one after which a rebase is due (:data:`PIECES_GROWTH`, :data:`PIECES_MAX`).

    Safe against garbage collection as a tail is: the record holding the previous snapshot is
    found in the head this put replaces by compare-and-swap (or in a segment it lists), and the
    blobs a record references are kept as long as a record references them. A prune that drops that
    record must move the head, and then this put's swap fails and it is built again.
    """
    if saver.layout.tail_min_base is None or head is None or parent is None:
        return None
    found = _previous_snapshot(saver, thread_id, ns, head, parent, ch)
    if found is None:
        return None
    origin, before = found
    if not isinstance(before, (BlobRef, Pieces)) or before.type != typ:
        return None
    if isinstance(before, Pieces) and len(before.parts) >= PIECES_MAX:
        return None  # a rebase is due whatever was appended
    cached = [
        saver._cache.immutable.blob(keys.blob_key(thread_id, ns, *ref)) for ref in rec_io.blob_refs(origin, before)
    ]
    held = [b for b in cached if b is not None]
    framed = tails.framing(held[0]) if len(held) == len(cached) else None
    if framed is None:
        return None
    parts = before.parts if isinstance(before, Pieces) else (Piece(origin, before.digest, before.size, framed[1]),)
    if any(len(b) != p.size for b, p in zip(held, parts, strict=True)):
        return None
    previous = tails.joined(held[0], parts[-1].count, *held[1:]) if len(held) > 1 else held[0]
    split = tails.split(previous, data)
    if split is None:
        return None
    count, added = split
    if sum(p.size for p in parts[1:]) + len(added) > PIECES_GROWTH * parts[0].size:
        return None  # a rebase: stored whole, the base of the next snapshots
    digest = content_digest(added)
    key = keys.blob_key(thread_id, ns, cid, digest)
    body = rec_io.encode_blob(added, schema_version=saver.layout.schema_version)
    return Pieces(typ, (*parts, Piece(cid, digest, len(added), count))), (key, body, added)


def _previous_snapshot(
    saver: SaverState, thread_id: str, ns: str, head: Head, parent: Record, ch: str
) -> tuple[str, Payload] | None:
    """(origin, payload) of the nearest ancestor's value of ``ch`` (a ``DeltaChannel``'s
    checkpoints between snapshots store none), from the payload table next to the record that
    references it. Walks records in memory only (the head, segments this process decoded); None
    when the walk leaves them."""
    found: tuple[Record, PayloadTable] | None = (parent, head.payloads)  # (the parent is in the head)
    for _ in range(SNAPSHOT_WALK_MAX):
        if found is None:
            return None
        rec, table = found
        held = rec.values.get(ch)
        if held is not None:
            payload = table.get(held[0], {}).get(ch)
            return None if payload is None else (held[0], payload)
        found = _record_in_memory(saver, thread_id, ns, head, rec.parent) if rec.parent is not None else None
    return None


def _record_in_memory(
    saver: SaverState, thread_id: str, ns: str, head: Head, checkpoint_id: str
) -> tuple[Record, PayloadTable] | None:
    """A record of ``head`` or of a segment it lists, if this process holds it decoded."""
    rec = head.records.get(checkpoint_id)
    if rec is not None:
        return rec, head.payloads
    for ref in manifest.cached_covering(saver, thread_id, ns, head, checkpoint_id):
        seg = saver._cache.immutable.segment(keys.segment_key(thread_id, ns, ref.key))
        if seg is not None and checkpoint_id in seg.records:
            return seg.records[checkpoint_id], seg.payloads
    return None


def _next_head(
    saver: SaverState,
    head: Head | None,
    thread_id: str,
    ns: str,
    record: Record,
    payloads: dict[str, Payload],
    unfolded: Mapping[str, Mapping[str, Folded]],
    spilled: frozenset[str] = frozenset(),
) -> tuple[Head, bytes, tuple[str, bytes] | None, list[tuple[str, bytes]]]:
    """The head after adding ``record``: fold known writes, spill large superseded values
    behind it, seal old records if it is still too big. Also returns the segment to write
    first (if sealing) and the blobs to write alongside it (spills)."""
    records = dict(head.records) if head is not None else {}
    table: PayloadTable = dict(head.payloads) if head is not None else {}
    records[record.id] = record
    # An upsert (same id again) may drop a channel that children still point at: keep the
    # old payloads and let the new ones win, as InMemorySaver's version-keyed blobs do.
    table[record.id] = {**table.get(record.id, {}), **payloads}
    for cid, tasks in unfolded.items():
        target = records.get(cid)
        if target is None:
            continue
        add = {
            t: f
            for t, f in tasks.items()
            if target.writes.get(t) != f and _folded_size(f) <= saver.layout.fold_max_bytes
        }
        if add:
            records[cid] = fast_replace(target, writes={**target.writes, **add})
    latest = records[max(records)]
    table, spills = _spill(saver, thread_id, ns, payloads_for(records.values(), table), latest, spilled)
    new = Head(
        thread_id=thread_id,
        checkpoint_ns=ns,
        records=records,
        payloads=table,
        segments=head.segments if head is not None else (),
        archive=head.archive if head is not None else None,
        meta=_stamp(saver, head.meta if head is not None else HeadMeta(), thread_id, ns),
    )
    schema = saver.layout.schema_version
    body = rec_io.encode_head(new, schema_version=schema)
    layout = saver.layout
    in_flight = sum(len(b) for _, b in spills)  # spilled copies leave the head on the next put
    too_many = len(records) > layout.head_max_records
    floor = layout.head_overhead_floor
    tailed = any(isinstance(p, Tail) for p in new.payloads.get(latest.id, {}).values())
    if tailed:
        # the older records' tails are near-copies of the latest's: seal them out early
        floor = min(floor, TAIL_HEAD_FLOOR)
    # the segment manifest is not overhead that sealing removes (sealing adds to it)
    overhead = len(body) - in_flight - rec_io.manifest_size(new.segments)
    too_big = len(records) > 1 and (
        len(body) > layout.head_max_bytes
        or (tailed and len(records) > TAIL_HEAD_RECORDS)
        or (overhead > floor and overhead > layout.head_max_overhead * _inline_size(latest, new.payloads))
    )
    if not (too_many or too_big):
        return new, body, None, spills
    keep = 1 if too_big else layout.head_keep
    ids = sorted(records)
    sealed, kept = ids[:-keep], ids[-keep:]
    seg_records = {i: records[i] for i in sealed}
    segment = Segment(thread_id, ns, seg_records, payloads_for(seg_records.values(), new.payloads))
    suffix = keys.segment_suffix(sealed[0], secrets.token_hex(4))
    ref = SegmentRef(suffix, sealed[0], sealed[-1], len(sealed))
    new = replace(new.with_records({i: records[i] for i in kept}, new.payloads), segments=(ref, *new.segments))
    body = rec_io.encode_head(new, schema_version=schema)
    segment_write = (keys.segment_key(thread_id, ns, suffix), rec_io.encode_segment(segment, schema_version=schema))
    # kept decoded, as a read would: the next snapshot's pieces walk back through these records
    # (a key with a fresh nonce names only this segment, so an entry whose put fails is never used)
    saver._cache.immutable.put(segment_write[0], segment)
    # spills of records now sealed travel in the segment itself
    kept_spills = {keys.blob_key(thread_id, ns, o, p.spill) for o, chs in new.payloads.items() for p in chs.values()
                   if isinstance(p, Inline) and p.spill}  # fmt: skip
    return new, body, segment_write, [(k, b) for k, b in spills if k in kept_spills]


def _check_root_fence(saver: SaverState, thread_id: str, ns: str, fence: int) -> Plan[None]:
    root, _ = reading.head_from(saver, (yield Get(keys.head_key(thread_id, ""))), thread_id, "")
    refusal = (
        "the session has no lease any more (its thread was deleted)"
        if root is None
        else write_refusal(root.meta, fence)
    )
    if refusal is not None:
        current = fence_of(root.meta) if root is not None else 0
        raise OwnershipLostError(thread_id, ns, epoch=fence, current=current, reason=refusal)
    return None


def _undo_if_fenced(
    saver: SaverState,
    thread_id: str,
    ns: str,
    fence: int,
    before: Head | None,
    written: Head,
    etag: str | None,
    stored: Head | None = None,
) -> Plan[None]:
    """After a lease-bound subgraph write: if the session was taken over, locked or released
    while we wrote, put the head back as it was (an emptied head for a namespace we created)
    and refuse, so a superseded worker's write never stays.

    The restore is a compare-and-swap. If it fails because a takeover only stamped its epoch
    on our head, it is retried on top (keeping the stamp); if someone wrote *checkpoints* on
    top meanwhile, their write stands and ours is left under it, logged. ``stored`` is the head
    read back (at ``etag``) when our swap's answer was lost: it is restored over only if it is
    exactly what we wrote, so a new owner's write on top is never overwritten.

    Archives (see :mod:`.manifest`): the one our write folded goes once the restore lands; the
    one it replaced goes if no restore does (we are the only writer that could name it again).
    """
    try:
        yield from _check_root_fence(saver, thread_id, ns, fence)
    except OwnershipLostError:
        hkey = keys.head_key(thread_id, ns)
        restore = before if before is not None else Head(thread_id, ns, {}, {}, (), written.meta)
        restored = False
        attempts = saver.layout.max_attempts
        if stored is not None:
            if (stored.records, stored.manifest) != (written.records, written.manifest):
                _log_not_undone(thread_id, ns)
                attempts = 0
            restore = fast_replace(restore, meta=restore.meta.overlay(stored.meta))  # keep the newer fence
        for _ in range(attempts):
            body = rec_io.encode_head(restore, schema_version=saver.layout.schema_version)
            try:
                yield Put(hkey, body, if_match=etag)
                restored = True
                break
            except (PreconditionFailedError, UnknownOutcomeError):
                fresh, fresh_etag = reading.head_from(saver, (yield Get(hkey)), thread_id, ns)
                if fresh is None or (fresh.records, fresh.manifest) == (restore.records, restore.manifest):
                    restored = fresh is not None
                    break  # gone, or our restore landed after all
                if (fresh.records, fresh.manifest) != (written.records, written.manifest):
                    _log_not_undone(thread_id, ns)
                    break
                restore = fast_replace(restore, meta=restore.meta.overlay(fresh.meta))  # keep the newer fence
                etag = fresh_etag
        saver._cache.forget_thread(thread_id)
        if restored:
            yield from _drop(manifest.replaced_archive(thread_id, ns, written, restore))
        else:
            yield from _drop(manifest.replaced_archive(thread_id, ns, before, written))
        raise
    return None


def _log_not_undone(thread_id: str, ns: str) -> None:
    log.error(
        "could not undo a superseded write to thread %r namespace %r: newer checkpoints were written on top of it",
        thread_id,
        ns,
    )


def _mark_refused_writes(
    saver: SaverState, thread_id: str, ns: str, head: Head, etag: str, parent_id: str
) -> Plan[None]:
    """A run refused with ThreadExpiredError may have stored writes documents for its parent
    checkpoint after the sweep deleted the thread's objects (``put_writes`` is one create-only
    PUT, unchecked against the head). Mark the tombstone so the next sweep deletes objects up
    to that checkpoint, as it finishes an interrupted sweep. Best effort: a head that moved
    meanwhile is left alone (one PUT, on this error path only)."""
    mark = head.meta.swept
    if mark is None or mark.at is None or (mark.upto is not None and mark.upto >= parent_id):
        return None
    marked = fast_replace(head, meta=head.meta.replace(swept=swept_mark(mark.at, parent_id)))
    body = rec_io.encode_head(marked, schema_version=saver.layout.schema_version)
    try:
        new_etag = yield Put(keys.head_key(thread_id, ns), body, if_match=etag)
    except (PreconditionFailedError, UnknownOutcomeError):
        return None
    saver._cache.observe(thread_id, ns, marked, new_etag)
    return None


def _stamp(saver: SaverState, meta: HeadMeta, thread_id: str, ns: str = "") -> HeadMeta:
    """A lease-bound writer records its epoch in every head it writes (the fencing token), and
    a rider's fields ride along in the root head: decided against the head this CAS replaces,
    so they commit atomically with the checkpoint or not at all."""
    if saver._rider is not None and not ns and saver._rider[0] == thread_id:
        meta = saver._rider[1](meta)
    meta = restamp(meta, saver.ttl, saver._clock())
    fence = _fence_for(saver, thread_id)
    return meta if fence is None else fenced(meta, fence)


def _spill(
    saver: SaverState, thread_id: str, ns: str, table: PayloadTable, latest: Record, confirmed: frozenset[str]
) -> tuple[PayloadTable, list[tuple[str, bytes]]]:
    """Move large values the latest checkpoint no longer uses out of the head, one round trip
    at a time and never ahead of the data:

    * a value not yet spilled keeps its inline copy and gets a blob written alongside this
      head (``spill`` records the digest);
    * a spilled value whose blob *this process* saw written (``confirmed``) becomes a
      reference to that blob, and its inline copy goes;
    * a spill another process started (we cannot know it landed) is written again: blob keys
      are content-addressed per owner, so rewriting is idempotent.

    So no head ever points at a blob that may not exist, and a failed or interrupted spill
    write loses nothing. The latest checkpoint's own values always stay inline: reading it is
    one GET.
    """
    keep = latest.origins()
    out: PayloadTable = {}
    writes: list[tuple[str, bytes]] = []
    for origin, chs in table.items():
        moved: dict[str, Payload] = {}
        for ch, p in chs.items():
            if isinstance(p, Inline) and len(p.data) >= saver.layout.spill_threshold and (origin, ch) not in keep:
                digest = p.spill or content_digest(p.data)
                key = keys.blob_key(thread_id, ns, origin, digest)
                if key in confirmed:
                    p = BlobRef(p.type, digest, len(p.data))
                else:
                    p = Inline(p.type, p.data, digest)
                    writes.append((key, rec_io.encode_blob(p.data, schema_version=saver.layout.schema_version)))
            moved[ch] = p
        out[origin] = moved
    return out, writes


def plan_put(
    saver: SaverState,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> Plan[RunnableConfig]:
    thread_id, ns_or_none, parent_id = target_of(config, "put")
    ns = ns_or_none or ""
    cid = keys.validate_checkpoint_id(checkpoint.get("id"))
    saver._cache.drop_listing(thread_id, ns)  # (its head ETag changes too; dropped the moment we write)
    if parent_id is not None and not keys.is_checkpoint_id(parent_id):
        raise InvalidCheckpointIdError(f"parent checkpoint id {parent_id!r} is not a canonical uuid string")
    md = get_checkpoint_metadata(config, metadata)
    cp_typed = saver.serde.dumps_typed({k: v for k, v in checkpoint.items() if k != "channel_values"})
    md_typed = saver.serde.dumps_typed(md)
    bookkeeping = Bookkeeping.of(md)
    source = md.get("source")
    hkey = keys.head_key(thread_id, ns)
    state = saver._cache.get(thread_id, ns)
    # ``fresh``: the head was just read from the store. The cache is shared by every thread of
    # this process and may lag behind (another thread's older read can land after our newer
    # write), so a conflict is only ever decided against a fresh read.
    fresh = not state.known
    if state.known:
        head, etag = state.head, state.etag
    else:
        head, etag = reading.head_from(saver, (yield Get(hkey)), thread_id, ns)
        saver._cache.observe(thread_id, ns, head, etag)
    fence = _fence_for(saver, thread_id)
    if fence is not None and ns:
        # A subgraph head cannot see the root's lease (a lock for a transfer, a release, a
        # takeover whose epoch has not reached this head yet): ask the root, before the write
        # and again after it (see _undo_if_fenced).
        yield from _check_root_fence(saver, thread_id, ns, fence)
    memo: dict[str, tuple[str, bytes]] = {}
    rides = saver._rider is not None and not ns and saver._rider[0] == thread_id
    by_run = made_by_run(config)
    tally = Attempts()
    source_of = bookkeeping_io.source_reader(saver.serde)
    for attempt in range(saver.layout.max_attempts):
        state = saver._cache.get(thread_id, ns)
        saw_empty = parent_id is None and state.empty_reads > 0
        branches = parent_id is not None and parent_id in state.branch_points
        intent = PutIntent(
            thread_id, ns, cid, parent_id, source, saw_empty=saw_empty, branches_from_history=branches, fence=fence,
            by_run=by_run, keeps_pending_input=rides, run_id=bookkeeping.run_id,
            own=saver._runs.own(config, thread_id, ns),
        )  # fmt: skip
        conflict = check_put(head, intent, source_of)
        if conflict is not None and not fresh:
            head, etag = reading.head_from(saver, (yield Get(hkey)), thread_id, ns)
            saver._cache.observe(thread_id, ns, head, etag)
            fresh = True
            conflict = check_put(head, intent, source_of)
        if conflict is not None:
            if saw_empty:
                saver._cache.use_empty_read(thread_id, ns)
            if isinstance(conflict, ThreadExpiredError) and head is not None and etag is not None and parent_id:
                yield from _mark_refused_writes(saver, thread_id, ns, head, etag, parent_id)
            raise conflict
        parent = head.records.get(parent_id) if head is not None and parent_id else None
        record, payloads, blobs = _build_record(
            saver, thread_id, ns, checkpoint, new_versions, parent, head, cp_typed, md_typed, memo, bookkeeping,
        )  # fmt: skip
        if parent is None and parent_id is not None:
            record = fast_replace(record, parent=parent_id)
        # Crash safety: what the new head *references* is durable before the head points at
        # it (huge new values, the base of a tail, a sealed segment); spilled copies ride
        # alongside the head, which still carries them inline.
        if blobs:
            yield Batch(tuple(Put(k, b) for k, b, _ in blobs))
            for k, _, data in blobs:
                saver._cache.immutable.put(k, data)  # the base of the next puts' tails
            saver._cache.confirm_spills(thread_id, ns, [k for k, _, _ in blobs])
        new_head, body, seal, spills = _next_head(
            saver, head, thread_id, ns, record, payloads, state.unfolded, saver._cache.get(thread_id, ns).spilled
        )
        folded, archive = yield from manifest.plan_fold(saver, thread_id, ns, new_head)
        if archive is not None:
            new_head, body = folded, rec_io.encode_head(folded, schema_version=saver.layout.schema_version)
        firsts = [Put(*w) for w in (seal, archive) if w is not None]  # fresh nonce-named keys: nobody else writes them
        # the metadata index's entries, decided against the head this attempt swaps out: a
        # crash before the swap leaves a stale entry, never a committed value without one
        firsts += metadata_index.entry_puts(saver, head, md, md_typed[1], parent_id, thread_id, ns)
        if len(firsts) == 1:
            yield firsts[0]
        elif firsts:
            yield Batch(tuple(firsts))
        before = head  # what our write replaces (restored if a fenced subgraph write must be undone)
        op = Put(hkey, body, if_match=etag) if etag is not None else Put(hkey, body, if_none_match=True)
        if spills:
            outcomes = yield Batch((op, *(Put(k, b) for k, b in spills)), outcomes=True)
            written = [k for (k, _), o in zip(spills, outcomes[1:], strict=True) if not isinstance(o, BaseException)]
            saver._cache.confirm_spills(thread_id, ns, written)
            head_outcome = outcomes[0]
        else:
            try:
                head_outcome = yield op
            except (PreconditionFailedError, UnknownOutcomeError) as exc:
                head_outcome = exc
        if isinstance(head_outcome, BaseException) and not isinstance(
            head_outcome, (PreconditionFailedError, UnknownOutcomeError)
        ):
            raise head_outcome
        new_etag = head_outcome
        if isinstance(head_outcome, (PreconditionFailedError, UnknownOutcomeError)):
            tried = etag
            head, etag = reading.head_from(saver, (yield Get(hkey)), thread_id, ns)
            tally.failed(head_outcome, changed=etag != tried)
            saver._cache.observe(thread_id, ns, head, etag)
            fresh = True
            landed = head.records.get(cid) if head is not None else None
            if landed is not None and (landed.checkpoint, landed.metadata, landed.parent) == (
                cp_typed,
                md_typed,
                record.parent,
            ):
                saver._cache.wrote(thread_id, ns, head, etag, used_empty_read=saw_empty)
                if fence is not None and ns:
                    assert head is not None
                    yield from _undo_if_fenced(saver, thread_id, ns, fence, before, new_head, etag, stored=head)
                yield from _drop(manifest.replaced_archive(thread_id, ns, before, head))
                saver._runs.wrote(config, thread_id, ns, cid)
                return tuple_config(thread_id, ns, cid)  # our write had landed after all
            if archive is not None:  # an orphan: only our head could name it (a fresh nonce)
                yield from _drop(manifest.replaced_archive(thread_id, ns, new_head, head))
            if attempt + 1 < saver.layout.max_attempts:
                yield Sleep(backoff(saver.layout, attempt))
            continue
        saver._cache.wrote(thread_id, ns, new_head, new_etag, used_empty_read=saw_empty)
        if fence is not None and ns:
            yield from _undo_if_fenced(saver, thread_id, ns, fence, head, new_head, new_etag)
        # a fold replaced the head's archive: readers of the old head that still need it read
        # the head again (see manifest)
        yield from _drop(manifest.replaced_archive(thread_id, ns, head, new_head))
        if branches:
            saver._cache.use_branch_point(thread_id, ns, parent_id)  # type: ignore[arg-type]
        saver._runs.wrote(config, thread_id, ns, cid)
        return tuple_config(thread_id, ns, cid)
    raise tally.exhausted(
        f"put of checkpoint {cid!r} on thread {thread_id!r}",
        f"put of checkpoint {cid!r} on thread {thread_id!r} lost {saver.layout.max_attempts} "
        "compare-and-swap races in a row without a conflicting checkpoint: the namespace is "
        "under heavy contention. Retry later or raise Layout.max_attempts.",
    )


def _drop(garbage: list[str]) -> Plan[None]:
    if garbage:
        yield DeleteMany(tuple(garbage))
    return None


def plan_put_writes(
    saver: SaverState, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
) -> Plan[None]:
    thread_id, ns_or_none, cid = target_of(config, "put_writes")
    ns = ns_or_none or ""
    if cid is None:
        raise InvalidConfigError("put_writes needs config['configurable']['checkpoint_id']")
    keys.validate_checkpoint_id(cid)
    task_id = str(task_id)
    items = slot_items(writes, saver.serde.dumps_typed, schema=saver._schema)
    key = keys.writes_key(thread_id, ns, cid, task_id)
    saver._cache.drop_listing(thread_id, ns)  # a listing from before this write would miss it
    schema = saver.layout.schema_version

    def encode(merged: tuple[WriteItem, ...], path: str) -> bytes:
        doc = WritesDoc(thread_id, ns, cid, task_id, path, merged)
        return rec_io.encode_writes(doc, schema_version=schema)

    known = saver._cache.known_writes(thread_id, ns, cid, task_id)
    tally = Attempts()
    for attempt in range(saver.layout.max_attempts):
        if known is None:
            merged, path = tuple(sorted(items, key=lambda w: w.idx)), task_path
            op = Put(key, encode(merged, path), if_none_match=True)
        else:
            merged, path = merge_items(known.items, items), known.task_path or task_path
            if merged == known.items:
                return None  # nothing new: a repeated call stores nothing
            op = Put(key, encode(merged, path), if_match=known.etag)
        try:
            etag = yield op
        except (PreconditionFailedError, UnknownOutcomeError) as exc:
            obj = yield Get(key)
            tally.failed(exc, changed=(obj.etag if obj is not None else None) != (known.etag if known else None))
            if obj is None:
                known = None
            else:
                doc = reading.decode_writes_doc(saver, obj, thread_id, ns, cid)
                known = Folded(obj.etag, doc.task_path, doc.items)
                if merge_items(doc.items, items) == doc.items:
                    saver._cache.remember_writes(thread_id, ns, cid, task_id, known)
                    return None  # already stored (possibly by our own first attempt)
            if attempt:
                yield Sleep(backoff(saver.layout, attempt))
            continue
        saver._cache.remember_writes(thread_id, ns, cid, task_id, Folded(etag, path, merged))
        return None
    raise tally.exhausted(
        f"writes of task {task_id!r} on checkpoint {cid!r}",
        f"writes of task {task_id!r} on checkpoint {cid!r} lost {saver.layout.max_attempts} "
        "compare-and-swap races in a row; another process keeps rewriting them",
    )
