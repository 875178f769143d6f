"""Rewriting stored threads into the current state schema and storage format, while workers run.

Readers already upgrade old checkpoints in memory (lazily, see :mod:`langgraph_handoff.migrations`
and :mod:`langgraph_handoff._format.upgrades`). ``migrate`` makes that permanent, one namespace at a
time, so old versions can eventually be dropped from the code:

Every step and check runs first, on what is stored, so a step that fails leaves the namespace
exactly as it was. Then:

1. **Writes documents** whose format or channel names are old are rewritten in place, each by
   compare-and-swap on its own ETag. A rewritten document means exactly what it meant before to
   every reader running current code, so it is safe to do first and to do again.
2. **Records** (checkpoints) in an older state schema are upgraded with the very function readers
   use (:func:`.upgrading.upgrade_checkpoint`), so ``get_state`` shows the same values before and
   after. Values the steps left unchanged keep their stored reference; changed ones are stored
   once per chain, the way a ``put`` would store them.
3. Replacement **segments** go to fresh keys (create-only), then the **head** moves by
   compare-and-swap. A writer that moved the head first wins: if it only added checkpoints, the
   prepared upgrade is laid over its head and swapped at once; otherwise the namespace is redone.
   Only after the head moved are the replaced segments and the large values nothing can use any
   more deleted (a key an inline value may be spilled to is kept: a writer may write it).

A kill at any point leaves the namespace reading as before: the old head or the new one, writes
documents perhaps already rewritten, and at worst objects nothing references (``verify`` lists
them, ``delete_thread`` removes them). Current records are skipped, so a rerun finishes what was
left and never migrates a checkpoint twice.

Schema gaps: an upgraded checkpoint that still lacks a field ``SchemaMigrations.required``
names (:func:`.upgrading.schema_gap`) is listed in its thread's ``gaps``, dry run or not, so
``migrate --dry-run`` finds every thread a missing migration leaves short before anything is
rewritten (a rewrite stamps the checkpoint current, and reads stop warning of it).

Damage: a thread with an object that cannot be read fails (``"failed"``, the object in its
``damaged`` list) and is left exactly as it was; a key under ``heads/`` that is not a head key
(a stray file) is reported in ``MigrationSummary.foreign`` and never read. The run goes on with
every other thread, and does not stamp the format marker.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from langgraph_handoff import errors
from langgraph_handoff._format import keys, tails
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.envelope import FORMAT_VERSION
from langgraph_handoff.checkpoint.driver import Batch, Plan, Sleep
from langgraph_handoff.checkpoint.plans import listing, manifest, reading, rewriting, upgrading
from langgraph_handoff.checkpoint.plans.blobs import blob_keys, content_digest
from langgraph_handoff.checkpoint.plans.signing import SigningPass
from langgraph_handoff.checkpoint.plans.state import SaverState, Vanished, backoff
from langgraph_handoff.errors import CorruptObjectError
from langgraph_handoff.stores.base import DeleteMany, Get, ObjectInfo, Put

__all__ = ["MigrationSummary", "SchemaGap", "ThreadMigration", "plan_migrate_thread", "plan_migration_targets"]

log = logging.getLogger("langgraph_handoff.migrate")


@dataclass(frozen=True)
class SchemaGap:
    """Checkpoints of a thread written in schema ``version`` that lack ``missing`` (required
    fields) after every migration step ran: a migration that fills them is missing."""

    version: int
    missing: tuple[str, ...]
    checkpoints: int


@dataclass
class ThreadMigration:
    """What ``migrate_thread`` did (or, with ``dry_run``, would do) to one thread.

    ``status`` is ``"migrated"`` (something was rewritten), ``"current"`` (nothing to do),
    ``"would migrate"`` (dry run), ``"not found"`` (the store holds no such thread) or
    ``"failed"`` (``error`` says why; see :func:`_migrate_namespace_once` for what
    a failure leaves).
    """

    thread_id: str
    status: str = "current"
    #: checkpoints upgraded to the current state schema
    checkpoints: int = 0
    #: heads, segments and writes documents rewritten
    objects: int = 0
    #: compare-and-swap races lost to concurrent writers (each one re-read and redone)
    retries: int = 0
    error: str | None = None
    #: the objects of the thread that could not be read (it failed on the first; left as it was)
    damaged: list[DamagedObject] = field(default_factory=list)
    #: where the thread lives: ``""`` for the store's root, ``"teams/{TM}/members/"`` for the
    #: members of an agent team (``ObjectStoreSaver.under``)
    space: str = ""
    #: schema gaps of its upgraded checkpoints, per schema version and missing fields
    gaps: list[SchemaGap] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def failure(cls, thread_id: str, exc: BaseException) -> ThreadMigration:
        """A thread that could not be migrated: the run reports it and goes on with the others."""
        damaged = [DamagedObject.from_error(exc)] if isinstance(exc, listing.UNREADABLE) else []
        return cls(thread_id, status="failed", error=f"{type(exc).__name__}: {exc}", damaged=damaged)


@dataclass
class MigrationSummary:
    """The outcome of ``ObjectStoreSaver.migrate()`` over many threads."""

    results: list[ThreadMigration]
    dry_run: bool
    seconds: float
    #: whether the store's format marker was stamped with the current format (full, clean runs)
    marked: bool = False
    #: keys under ``heads/`` that are not head keys, and hashed heads that could not be read for
    #: their thread id: reported, never read further (the threads they belong to are unknown)
    foreign: list[DamagedObject] = field(default_factory=list)
    #: what signing the store did, when the saver signs (:mod:`.signing`)
    signing: SigningPass | None = None

    def count(self, *statuses: str) -> int:
        return sum(r.status in statuses for r in self.results)

    @property
    def damaged(self) -> list[DamagedObject]:
        """Every object the run could not read: ``foreign``, each failed thread's, and those the
        signing pass left unsigned."""
        unsigned = self.signing.damaged if self.signing is not None else []
        return [*self.foreign, *(d for r in self.results for d in r.damaged), *unsigned]

    @property
    def failed(self) -> int:
        return self.count("failed")

    def as_dict(self) -> dict[str, Any]:
        return {
            "scanned": len(self.results),
            "migrated": self.count("migrated", "would migrate"),
            "current": self.count("current"),
            "failed": self.failed,
            "not_found": self.count("not found"),
            "gaps": sum(bool(r.gaps) for r in self.results),
            "checkpoints": sum(r.checkpoints for r in self.results),
            "objects": sum(r.objects for r in self.results),
            "retries": sum(r.retries for r in self.results),
            "damaged": len(self.damaged),
            "dry_run": self.dry_run,
            "seconds": round(self.seconds, 3),
            **({"signing": self.signing.as_dict()} if self.signing is not None else {}),
        }


@dataclass
class _Counts:
    checkpoints: int = 0
    objects: int = 0
    retries: int = 0
    #: the namespace holds checkpoints (a deleted session's tombstone head holds none)
    found: bool = False
    #: (schema version, missing fields) -> how many upgraded checkpoints have that gap
    gaps: dict[tuple[int, tuple[str, ...]], int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Value:
    """One channel of an upgraded record."""

    version: Any
    #: the value as the saver's serde stores it
    typed: tuple[str, bytes]
    #: ``comparison_key``: equal exactly when values are (an encrypting serde never gives the
    #: same bytes twice)
    key: bytes
    #: the record's stored reference, when the steps left the channel as it was: kept as it is
    #: (bytes that cannot be reproduced, a set or an encrypted value, need not be)
    kept: tuple[str, Any] | None


@dataclass
class _Upgraded:
    """One record's upgrade, kept across attempts so a retry after a lost race only re-reads
    the head and reassembles: the window a busy writer can slip into stays small."""

    old: rec_io.Record
    checkpoint: tuple[str, bytes]
    metadata: tuple[str, bytes]
    #: channel -> its value in the current schema
    values: dict[str, _Value]
    #: required fields the upgraded checkpoint still lacks (:func:`.upgrading.schema_gap`)
    missing: tuple[str, ...] = ()


@dataclass
class _Memo:
    upgraded: dict[str, _Upgraded] = field(default_factory=dict)
    #: (key, ETag) of writes documents seen current
    current_docs: set[tuple[str, str]] = field(default_factory=set)


def _holds(payload: rec_io.Payload, typed: tuple[str, bytes]) -> bool:
    """Does a stored payload hold exactly these serialised bytes? (blobs: by digest; tails: the
    appended bytes, and the rest by the digest of the base they were written over; pieces:
    never said to, so an upgraded snapshot is stored whole, which costs bytes, not data)"""
    if isinstance(payload, rec_io.Pieces):
        return False
    if isinstance(payload, rec_io.Inline):
        return (payload.type, payload.data) == typed
    if isinstance(payload, rec_io.Tail):
        typ, data = typed
        found = tails.array_header(data)
        if typ != payload.type or found is None or found[0] != payload.count or not data.endswith(payload.data):
            return False
        base = tails.header_bytes(payload.base_count) + data[found[1] : len(data) - len(payload.data)]
        return len(base) == payload.base_size and content_digest(base) == payload.base_digest
    return payload.type == typed[0] and payload.size == len(typed[1]) and payload.digest == content_digest(typed[1])


def _put_new_segments(saver: SaverState, seg_puts: Sequence[tuple[str, bytes]]) -> Plan[None]:
    """Store a namespace's rewritten segments create-only, settling unknown outcomes.

    Each key is new (a random suffix only this run names), so "already there" can only be this
    run's own write: the same create-only PUT sent again settles an answer lost after the store
    committed (and a transport's own re-send of a committed PUT, which meets 412, is a success).
    A migration failed the thread with ``UnknownOutcomeError`` instead (the fault campaign)."""
    outcomes = yield Batch(tuple(Put(k, b, if_none_match=True) for k, b in seg_puts), outcomes=True)
    for (key, body), outcome in zip(seg_puts, outcomes, strict=True):
        for attempt in range(saver.layout.max_attempts):
            if not isinstance(outcome, errors.UnknownOutcomeError):
                break
            yield Sleep(backoff(saver.layout, attempt))
            try:
                yield Put(key, body, if_none_match=True)
                outcome = None
            except (errors.PreconditionFailedError, errors.UnknownOutcomeError) as exc:
                outcome = exc
        if isinstance(outcome, BaseException) and not isinstance(outcome, errors.PreconditionFailedError):
            raise outcome


def _settled(a: rec_io.Payload | None, b: rec_io.Payload) -> rec_io.Payload:
    """Of two copies of one stored value, the one furthest along its spill: a blob reference (its
    blob was seen written), then an inline copy being spilled, then a plain inline copy."""
    if a is None:
        return b
    rank = {rec_io.BlobRef: 2, rec_io.Tail: 2, rec_io.Pieces: 2, rec_io.Inline: 0}
    ra = rank[type(a)] + (1 if isinstance(a, rec_io.Inline) and a.spill else 0)
    rb = rank[type(b)] + (1 if isinstance(b, rec_io.Inline) and b.spill else 0)
    return a if ra >= rb else b


def _stored_as(payload: rec_io.Payload) -> tuple[str, str]:
    """What a payload holds, whatever its spill state: an inline value, the same value being
    spilled, and its blob all say (type, digest of the bytes)."""
    if isinstance(payload, rec_io.BlobRef):
        return payload.type, payload.digest
    if isinstance(payload, rec_io.Tail):
        return payload.type, f"{payload.base_digest}+{content_digest(payload.data)}"
    if isinstance(payload, rec_io.Pieces):
        return payload.type, "+".join(part.digest for part in payload.parts)
    return payload.type, payload.spill or content_digest(payload.data)


def _same_checkpoint(a: rec_io.Record, b: rec_io.Record) -> bool:
    """The same stored checkpoint, whatever writes were folded into either copy since."""
    return replace(a, writes={}) == replace(b, writes={})


def plan_migration_targets(
    saver: SaverState, thread_ids: Sequence[str] | None
) -> Plan[tuple[dict[str, list[str] | None], list[DamagedObject]]]:
    """Thread id -> its namespaces (None: list them when the thread's turn comes), and the keys
    under ``heads/`` that could not be taken for a thread's head. Every thread of the store comes
    from one listing of the heads, namespaces included, which saves a LIST per thread; named
    threads are validated and taken once each."""
    if thread_ids is None:
        found: dict[str, list[str] | None] = {}
        scan = yield from listing.plan_heads_scan(saver, keys.heads_prefix())
        for tid, ns in scan.ids:
            found.setdefault(tid, []).append(ns)  # type: ignore[union-attr]
        return dict(sorted(found.items())), scan.damaged
    if isinstance(thread_ids, str):
        raise TypeError("migrate takes a sequence of thread ids, not a single string; wrap it in a list")
    return dict.fromkeys(keys.validate_thread_id(t) for t in thread_ids), []


def plan_migrate_thread(
    saver: SaverState, thread_id: Any, dry_run: bool, namespaces: list[str] | None = None
) -> Plan[ThreadMigration]:
    tid = keys.validate_thread_id(thread_id)
    result = ThreadMigration(tid)
    if namespaces is None:
        scan = yield from listing.plan_heads_scan(saver, keys.heads_prefix(tid))
        unreadable = [d for d in scan.damaged if d.reason != "not_a_head"]
        if unreadable:  # a hashed head of the thread: fail on it, as on any other damaged head
            raise CorruptObjectError(unreadable[0].key, unreadable[0].detail, unreadable[0].reason)
        namespaces = [ns for _t, ns in scan.ids]
    found = False
    for ns in namespaces:
        counts = yield from _migrate_namespace(saver, tid, ns, dry_run)
        result.checkpoints += counts.checkpoints
        result.objects += counts.objects
        result.retries += counts.retries
        found = found or counts.found
        result.gaps += [SchemaGap(v, missing, n) for (v, missing), n in sorted(counts.gaps.items())]
    if result.objects:
        result.status = "would migrate" if dry_run else "migrated"
    elif not found:
        result.status = "not found"
    if not dry_run:
        saver._cache.forget_thread(tid)
    return result


def _migrate_namespace(saver: SaverState, tid: str, ns: str, dry_run: bool) -> Plan[_Counts]:
    counts, memo = _Counts(), _Memo()
    for attempt in range(saver.layout.max_attempts):
        try:
            done = yield from _migrate_namespace_once(saver, tid, ns, dry_run, counts, memo)
        except Vanished:
            done = False  # a value vanished under a concurrent prune: read again
            counts.retries += 1
        if done:
            return counts
        yield Sleep(backoff(saver.layout, attempt))  # (the lost race is counted where it was lost)
    raise errors.ConflictError(
        f"could not migrate thread {tid!r} namespace {ns!r}: writers kept moving it "
        f"({saver.layout.max_attempts} attempts). Rerun migrate; what is done stays done."
    )


def _migrate_namespace_once(
    saver: SaverState, tid: str, ns: str, dry_run: bool, counts: _Counts, memo: _Memo
) -> Plan[bool]:
    """One pass; False when the namespace must be read again from the start.

    Losing the head's compare-and-swap to a writer that only added checkpoints (the usual
    case: a worker taking a turn) does not restart the pass: the head is read again, the
    prepared upgrades are laid over it and the swap is retried at once. The window a busy
    writer can slip into is then one GET and one PUT long.
    """
    head, etag, segments, archived = yield from rewriting.plan_load_namespace(saver, tid, ns)
    if head is None:
        return True
    counts.found = counts.found or head.has_history
    seg_records: dict[str, rec_io.Record] = {}
    where: dict[str, rec_io.PayloadTable] = {}  # record id -> the payload table it was read with
    for seg in segments.values():
        seg_records.update(seg.records)
        where.update(dict.fromkeys(seg.records, seg.payloads))
    everything = {**seg_records, **head.records}
    where.update(dict.fromkeys(head.records, head.payloads))
    for rec in everything.values():
        if rec.schema > saver._schema:
            raise errors.SchemaVersionError(
                f"checkpoint {rec.id} of thread {tid!r}" + (f" namespace {ns!r}" if ns else ""),
                found=rec.schema,
                supported=saver._schema,
            )
    # Everything that can fail on what is stored (a step, a newer write, a value shared with
    # a newer checkpoint) runs before the first write: then the namespace is left exactly as
    # it was. Only a checkpoint arriving during the pass can fail it later; the writes
    # documents already rewritten then stay (they read the same to this code and newer), and
    # nothing else this pass wrote does.
    todo = yield from _writes_to_migrate(saver, tid, ns, everything, memo)
    upgrade = sorted(i for i, r in everything.items() if r.schema != saver._schema)
    yield from _upgraded_records(saver, tid, ns, everything, where, upgrade, memo)
    counts.gaps = {}
    for rid in upgrade:
        up = memo.upgraded[rid]
        if up.missing:
            gap = (up.old.schema, up.missing)
            counts.gaps[gap] = counts.gaps.get(gap, 0) + 1
    folded: dict[str, dict[str, rec_io.Folded]] = {}
    counts.objects += len(todo)
    if not dry_run:
        # 1. writes documents, each by its own compare-and-swap
        folded, lost = yield from _rewrite_writes(saver, tid, ns, everything, todo, memo)
        counts.retries += lost
    # candidates for collection: what exists (referenced blobs, copies being spilled)
    old_blobs = blob_keys(tid, ns, [(head.records, head.payloads)] + [
        (s.records, s.payloads) for s in segments.values()])  # fmt: skip
    segment_parts: list[tuple[dict[str, rec_io.Record], rec_io.PayloadTable]] = []  # what the new manifest holds
    hkey = keys.head_key(tid, ns)
    seg_puts: list[tuple[str, bytes]] | None = None  # written once per pass
    new_refs: list[rec_io.SegmentRef] = []
    replaced: list[str] = []
    written_blobs: set[str] = set()
    segments_written = False
    stacked: rec_io.Head | None = None  # a writer's head on top of ours, when our swap's reply was lost
    try:
        for _ in range(saver.layout.max_attempts):
            # 2. records
            upgrade = sorted(i for i, r in everything.items() if r.schema != saver._schema)
            new_records, table, blobs = yield from _upgraded_records(saver, tid, ns, everything, where, upgrade, memo)
            for cid, tasks in folded.items():
                target = new_records[cid] if cid in new_records else everything.get(cid)
                if target is not None:  # (a checkpoint pruned meanwhile has no copy to update)
                    new_records[cid] = replace(target, writes={**target.writes, **tasks})
            # 3. segments (once: they do not change while we only lose to added checkpoints)
            if seg_puts is None:
                seg_puts = []
                for ref in head.segments:
                    seg = segments[ref.key]
                    if seg.format_version == FORMAT_VERSION and not set(seg.records) & set(new_records):
                        new_refs.append(ref)
                        segment_parts.append((seg.records, seg.payloads))
                        continue
                    recs = {i: new_records.get(i, r) for i, r in seg.records.items()}
                    suffix = keys.segment_suffix(ref.first_id, secrets.token_hex(4))
                    seg_table = rec_io.payloads_for(recs.values(), table)
                    segment_parts.append((recs, seg_table))
                    body = rec_io.encode_segment(rec_io.Segment(tid, ns, recs, seg_table),
                                                 schema_version=saver.layout.schema_version)  # fmt: skip
                    seg_puts.append((keys.segment_key(tid, ns, suffix), body))
                    new_refs.append(rec_io.SegmentRef(suffix, ref.first_id, ref.last_id, ref.count))
                    replaced.append(keys.segment_key(tid, ns, ref.key))
            # 4. the head
            head_recs = {i: new_records.get(i, r) for i, r in head.records.items()}
            if not seg_puts and head.format_version == FORMAT_VERSION and head_recs == head.records:
                return True
            if dry_run:
                counts.objects += 1 + len(seg_puts)
                counts.checkpoints += len(upgrade)
                return True
            new_head = rec_io.Head(
                tid, ns, head_recs, rec_io.payloads_for(head_recs.values(), table), tuple(new_refs), head.meta
            )
            # what the head references is durable before the head moves
            fresh_blobs = [(k, b) for k, b in blobs if k not in written_blobs]
            if fresh_blobs:
                yield Batch(tuple(Put(k, b) for k, b in fresh_blobs))
                written_blobs.update(k for k, _ in fresh_blobs)
            if seg_puts and not segments_written:
                yield from _put_new_segments(saver, seg_puts)
                segments_written = True
            try:
                new_etag = yield Put(hkey, rec_io.encode_head(new_head, schema_version=saver.layout.schema_version),
                                     if_match=etag)  # fmt: skip
            except (errors.PreconditionFailedError, errors.UnknownOutcomeError):
                stored, fresh, fresh_etag = yield from rewriting.plan_read_unpacked(saver, tid, ns)
                ours = {k for k, _ in seg_puts}  # fresh keys no head but ours can list
                listed = {keys.segment_key(tid, ns, r.key) for r in (fresh.segments if fresh else ())}
                if fresh is not None and fresh.segments == new_head.segments and fresh.records == new_head.records:
                    new_etag = fresh_etag  # the outcome was unknown, but our head is the one stored
                elif fresh is not None and seg_puts and ours <= listed:
                    # our swap landed unseen and a writer wrote on top of it: done (the cache
                    # takes the writer's head, not ours, so this process never writes over it)
                    new_etag, stacked = fresh_etag, stored
                else:
                    counts.retries += 1
                    if (
                        fresh is None
                        or fresh.segments != head.segments
                        or any(
                            i not in fresh.records or not _same_checkpoint(fresh.records[i], r)
                            for i, r in head.records.items()
                        )
                        or any(r.schema > saver._schema for r in fresh.records.values())
                    ):
                        # Not just added checkpoints: start over, without leaving orphans behind.
                        yield from _drop_unused(
                            saver, tid, ns, seg_puts if segments_written else None, written_blobs, old_blobs
                        )
                        return False
                    head, etag = fresh, fresh_etag
                    archived = manifest.replaced_archive(tid, ns, stored, fresh)
                    everything = {**seg_records, **head.records}
                    where.update(dict.fromkeys(head.records, head.payloads))
                    continue
            if stacked is not None:
                saver._cache.observe(tid, ns, stacked, new_etag)
            else:
                saver._cache.wrote(tid, ns, new_head, new_etag, used_empty_read=False)
            counts.objects += 1 + len(seg_puts)
            counts.checkpoints += len(upgrade)
            # what the stored objects reference now (a segment kept as it was may still name a
            # blob where the new head holds the same value inline): everything else goes
            kept = blob_keys(tid, ns, [(head_recs, new_head.payloads), *segment_parts], may_spill=True)
            garbage = replaced + archived + sorted(old_blobs - kept - written_blobs)
            if garbage:
                yield DeleteMany(tuple(garbage))
            log.info(
                "migrated thread %r namespace %r: %d checkpoints upgraded, %d objects rewritten",
                tid,
                ns,
                len(upgrade),
                1 + len(seg_puts),
            )
            return True
        yield from _drop_unused(saver, tid, ns, seg_puts if segments_written else None, written_blobs, old_blobs)
        return False
    except Exception:
        # a step or check failed on a checkpoint that arrived meanwhile, or the store failed:
        # nothing this pass wrote may outlive it unreferenced
        yield from _drop_unused(saver, tid, ns, seg_puts if segments_written else None, written_blobs, old_blobs)
        raise


def _drop_unused(
    saver: SaverState, tid: str, ns: str, seg_puts: list[tuple[str, bytes]] | None, blobs: set[str], old_blobs: set[str]
) -> Plan[None]:
    """After a pass that did not move the head: delete what it wrote that nothing uses.

    Read against the namespace as it is now. A new segment goes unless the head lists it.
    A large value is keyed by its owner and its bytes, not its channel, so a key this pass
    wrote may be one the thread already used (a renamed channel's value): those stay, as do
    keys something references now, and keys whose owner checkpoint is still there (the
    next pass, or a concurrent migration of the thread, will use them).
    """
    if not seg_puts and not blobs:
        return None
    head, _etag, segments, _archived = yield from rewriting.plan_load_namespace(saver, tid, ns)
    listed = {keys.segment_key(tid, ns, ref.key) for ref in head.segments} if head is not None else set()
    garbage = [k for k, _ in seg_puts or [] if k not in listed]
    if head is not None:
        parts = [(head.records, head.payloads), *((g.records, g.payloads) for g in segments.values())]
        used = blob_keys(tid, ns, parts, may_spill=True)
        owners = set(head.records).union(*(g.records for g in segments.values()))
    else:
        used, owners = set(), set()
    for key in sorted(blobs - used - old_blobs):
        if keys.parse_blob_key(key) not in owners:
            garbage.append(key)
    if garbage:
        yield DeleteMany(tuple(garbage))
    return None


def _writes_to_migrate(
    saver: SaverState, tid: str, ns: str, everything: dict[str, rec_io.Record], memo: _Memo
) -> Plan[list[tuple[str, str, rec_io.WritesDoc]]]:
    """``(key, ETag, document)`` of the writes documents in an old format or naming channels
    of an old schema. Their new items are computed here once, so an item from newer code
    (``SchemaVersionError``) stops the migration before anything is written."""
    by_key: dict[str, tuple[str, str, rec_io.Folded]] = {}
    for cid, rec in everything.items():
        for task, f in rec.writes.items():
            by_key[keys.writes_key(tid, ns, cid, task)] = (cid, task, f)
    todo: list[tuple[str, str, rec_io.WritesDoc]] = []  # key, ETag, document
    fetch: list[ObjectInfo] = []
    for info in (yield from listing.list_all(saver, keys.writes_prefix(tid, ns))):
        parsed = keys.parse_writes_key(info.key)
        if parsed is None or parsed[0] not in everything:
            continue  # writes of a checkpoint this namespace no longer holds: garbage, not data
        hit = by_key.get(info.key)
        if (info.key, info.etag) in memo.current_docs:
            continue
        if hit is not None and hit[2].etag == info.etag:
            # the folded copy is this very document: decide (and rewrite) without a GET
            cid, task, f = hit
            if any(w.schema != saver._schema for w in f.items):
                todo.append((info.key, info.etag, rec_io.WritesDoc(tid, ns, cid, task, f.task_path, f.items)))
        else:
            fetch.append(info)
    for chunk_start in range(0, len(fetch), 64):
        chunk = fetch[chunk_start : chunk_start + 64]
        for info, obj in zip(chunk, (yield Batch(tuple(Get(i.key) for i in chunk))), strict=True):
            if obj is None:
                continue  # deleted meanwhile (a prune): nothing to migrate
            cid = keys.parse_writes_key(info.key)[0]  # type: ignore[index]
            doc = reading.decode_writes_doc(saver, obj, tid, ns, cid)
            if doc.format_version != FORMAT_VERSION or any(w.schema != saver._schema for w in doc.items):
                todo.append((info.key, obj.etag, doc))
            else:
                memo.current_docs.add((info.key, obj.etag))
    for _key, _etag, doc in todo:
        upgrading.current_items(saver, tid, ns, everything[doc.checkpoint_id], doc.items)
    return todo


def _rewrite_writes(
    saver: SaverState,
    tid: str,
    ns: str,
    everything: dict[str, rec_io.Record],
    todo: list[tuple[str, str, rec_io.WritesDoc]],
    memo: _Memo,
) -> Plan[tuple[dict[str, dict[str, rec_io.Folded]], int]]:
    """Rewrite each document by compare-and-swap on its own ETag (a task that merged more
    writes into it meanwhile wins: read and redo). Returns the new folded copies (checkpoint
    id -> task id -> Folded) for the records holding a copy, and the races lost."""
    out: dict[str, dict[str, rec_io.Folded]] = {}
    lost = 0
    for key, etag, doc in todo:
        for attempt in range(saver.layout.max_attempts):
            rec = everything[doc.checkpoint_id]
            items = tuple(upgrading.current_items(saver, tid, ns, rec, doc.items))
            body = rec_io.encode_writes(replace(doc, items=items), schema_version=saver.layout.schema_version)
            try:
                new_etag = yield Put(key, body, if_match=etag)
                memo.current_docs.add((key, new_etag))
            except (errors.PreconditionFailedError, errors.UnknownOutcomeError):
                # a task's retry merged into it (or our write landed unseen): read and redo
                lost += 1
                obj = yield Get(key)
                if obj is None:
                    break
                fresh = reading.decode_writes_doc(saver, obj, tid, ns, doc.checkpoint_id)
                if fresh.format_version == FORMAT_VERSION and all(w.schema == saver._schema for w in fresh.items):
                    new_etag, items = obj.etag, fresh.items
                else:
                    doc, etag = fresh, obj.etag
                    yield Sleep(backoff(saver.layout, attempt))
                    continue
            if doc.task_id in rec.writes:
                out.setdefault(doc.checkpoint_id, {})[doc.task_id] = rec_io.Folded(new_etag, doc.task_path, items)
            break
        else:
            raise errors.ConflictError(
                f"writes document {key!r} kept changing while it was migrated; rerun migrate when it is idle"
            )
    return out, lost


def _upgraded_records(
    saver: SaverState,
    tid: str,
    ns: str,
    everything: dict[str, rec_io.Record],
    where: dict[str, rec_io.PayloadTable],
    upgrade: list[str],
    memo: _Memo,
) -> Plan[tuple[dict[str, rec_io.Record], rec_io.PayloadTable, list[tuple[str, bytes]]]]:
    """The records in ``upgrade`` rebuilt in the current schema, the payload table every
    record of the namespace uses afterwards, and the large values to write first.

    Current records keep their references exactly ("pinned"). An upgraded record inherits
    its parent's (upgraded) value when version and bytes match, as ``put`` would; otherwise
    it owns the value under its own id, reusing the stored payload when the bytes are the
    ones it already stored there.
    """
    table: rec_io.PayloadTable = {}
    todo = set(upgrade)
    for rid, rec in everything.items():
        if rid in todo:
            continue
        for ch, (origin, _v) in rec.values.items():
            payload = where[rid].get(origin, {}).get(ch)
            if payload is not None:
                table.setdefault(origin, {})[ch] = _settled(table.get(origin, {}).get(ch), payload)
    new_records: dict[str, rec_io.Record] = {}
    # channel -> (origin, version, comparison key) of each upgraded record, for inheritance
    upgraded_values: dict[str, dict[str, tuple[str, Any, bytes]]] = {}
    blobs: list[tuple[str, bytes]] = []
    for rid in upgrade:  # ascending ids: parents before children
        rec = everything[rid]
        up = memo.upgraded.get(rid)
        if up is None or not _same_checkpoint(up.old, rec):
            up = yield from _upgrade_record(saver, tid, ns, rec, where[rid])
            memo.upgraded[rid] = up
        parent = upgraded_values.get(rec.parent or "", {})
        mine: dict[str, tuple[str, Any, bytes]] = {}
        refs: dict[str, tuple[str, Any]] = {}
        for ch, val in up.values.items():
            version, typed = val.version, val.typed
            inherited = parent.get(ch)
            stored = where[rid].get(val.kept[0], {}).get(ch) if val.kept else None
            current = table.get(val.kept[0], {}).get(ch) if val.kept else None
            if val.kept and stored is not None and (current is None or _stored_as(current) == _stored_as(stored)):
                origin = val.kept[0]  # unchanged: the stored reference and payload stay
                table.setdefault(origin, {})[ch] = _settled(current, stored)
            elif inherited is not None and inherited[1] == version and inherited[2] == val.key:
                origin = inherited[0]
            else:
                origin = rid
                taken = table.get(rid, {}).get(ch)
                if taken is not None and not _holds(taken, typed):
                    raise errors.MigrationError(
                        f"cannot rewrite checkpoint {rid} of thread {tid!r}: its upgraded value of {ch!r} "
                        "differs from the one a newer checkpoint still shares with it. Nothing was written; "
                        "readers keep upgrading it on read."
                    )
                if taken is None:
                    table.setdefault(rid, {})[ch] = _payload_for(saver, tid, ns, rid, ch, typed, where, blobs)
            mine[ch] = (origin, version, val.key)
            refs[ch] = (origin, version)
        upgraded_values[rid] = mine
        new_records[rid] = replace(
            rec, checkpoint=up.checkpoint, metadata=up.metadata, values=refs, schema=saver._schema
        )
    return new_records, table, blobs


def _upgrade_record(
    saver: SaverState, tid: str, ns: str, rec: rec_io.Record, table: rec_io.PayloadTable
) -> Plan[_Upgraded]:
    """Load a record's values and upgrade it exactly as a reader would (``upgrading.upgrade_checkpoint``)."""
    _tasks, values = yield from reading.fetch(saver, tid, ns, rec, table, (), rec.values)
    checkpoint = saver.serde.loads_typed(rec.checkpoint)
    checkpoint["channel_values"] = values
    checkpoint, metadata = upgrading.upgrade_checkpoint(
        saver, tid, ns, rec, checkpoint, saver.serde.loads_typed(rec.metadata), warn=False
    )
    versions = checkpoint.get("channel_versions") or {}
    typed = {}
    for ch, value in checkpoint["channel_values"].items():
        version = versions.get(ch)
        if version is None:
            continue  # a value without a version is not part of the checkpoint (as put)
        stored = rec.values.get(ch)
        kept = stored if stored is not None and stored[1] == version else None  # (renamed: not kept)
        typed[ch] = _Value(version, saver.serde.dumps_typed(value), upgrading.comparison_key(saver.serde, value), kept)
    return _Upgraded(
        rec,
        saver.serde.dumps_typed({k: v for k, v in checkpoint.items() if k != "channel_values"}),
        saver.serde.dumps_typed(metadata),
        typed,
        upgrading.schema_gap(saver, ns, checkpoint, metadata),
    )


def _payload_for(
    saver: SaverState,
    tid: str,
    ns: str,
    rid: str,
    ch: str,
    typed: tuple[str, bytes],
    where: dict[str, rec_io.PayloadTable],
    blobs: list[tuple[str, bytes]],
) -> rec_io.Payload:
    """The payload an upgraded record owns for ``ch``: what it stored there already if the
    bytes are the same (a blob stays where it is), or a blob it owns with these bytes under
    another channel (a rename), else a new inline value or blob."""
    stored = where[rid].get(rid, {}).get(ch)
    if stored is not None and _holds(stored, typed):
        return stored
    for table in {id(t): t for t in where.values()}.values():  # head and segments, each once
        for other in table.get(rid, {}).values():
            if isinstance(other, rec_io.BlobRef) and _holds(other, typed):
                return other
    typ, data = typed
    if len(data) < saver.layout.blob_threshold:
        return rec_io.Inline(typ, data)
    ref = rec_io.BlobRef(typ, content_digest(data), len(data))
    blobs.append(
        (
            keys.blob_key(tid, ns, rid, ref.digest),
            rec_io.encode_blob(data, schema_version=saver.layout.schema_version),
        )
    )
    return ref
