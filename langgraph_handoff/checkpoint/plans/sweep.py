"""The TTL sweep: delete threads idle longer than their TTL, safely against writers.

What idle means and how it is stamped is in :mod:`langgraph_handoff.checkpoint.ttl`. A sweep:

1. lists every head (1 LIST per 1000 heads) and GETs the heads of 64 threads per round trip.
   Heads this saver already read in an earlier sweep under the same ETag are not read again
   (an ETag names one object state), nor are the small empty heads earlier sweeps left (their
   size in the listing gives them away): a periodic sweep reads only the heads that changed;
2. decides, on the heads it read, whether the thread expired: every head idle past its TTL,
   and no live session lease or transfer on the root head (a heartbeat renews the lease without
   writing a checkpoint, and is activity too);
3. for an expired thread: lists its data objects, then replaces the **root head** with an empty
   head (a *tombstone*, marked ``swept: {at, upto}``, ``upto`` the newest checkpoint id of the
   decided head) by a compare-and-swap on the version it decided on. That swap is the decision: if a writer
   or a refreshing reader moved the root head since, it fails and the thread is left alone
   (``"revived"``). Then each subgraph head, by compare-and-swap on its own decided version; one
   that moved meanwhile (a run writing in a subgraph) is left whole (``revived_namespaces``);
4. deletes, in the namespaces it emptied, the data objects it listed whose checkpoint id is at most
   the newest one in the decided head (writes documents, sealed segments, blobs);
5. clears ``upto`` from its tombstones by compare-and-swap: the cleanup is done. A settled
   tombstone is recognised by its size in later listings; one still carrying ``upto`` (the sweep
   failed, was cancelled or killed between 3 and 5) is read by the next sweep, which lists the
   thread's data, deletes the objects owned up to ``upto`` (step 4's filter) and clears the mark
   (``"cleaned"``). A put on a marked head carries ``upto`` over, so a thread started afresh
   before the cleanup does not lose it.

Why this is safe, case by case:

* **A writer that lands first** moves the head, so the sweep's compare-and-swap fails and nothing
  is deleted.
* **A writer that lands after the swap** finds an empty head. A run continuing the thread (its
  parent is gone) is refused with :class:`~langgraph_handoff.errors.ThreadExpiredError` and its
  checkpoint is not stored (see below for its writes); a run that reads first sees an empty
  thread and starts a clean new one. Nothing it writes is deleted: every object of a new checkpoint is named by that checkpoint's id, which is
  newer than anything the sweep decided on, and step 4 only deletes objects named by older ids
  (this also covers a put that wrote a large value, lost its swap to the sweep, and retried on the
  empty head). Such in-flight objects that nothing references stay as garbage, never as a
  dangling reference.
* **A half-deleted chain** cannot happen: a namespace's data is deleted only after its head was
  emptied by a swap on the very version the objects were decided on, and heads are emptied before
  anything is deleted. A sweep killed midway leaves tombstones marked ``upto`` and unreferenced
  objects; the next sweep deletes them (step 5).
* **A refused run's writes**: a run refused with ThreadExpiredError may have stored a writes
  document for its parent checkpoint after step 4 (``put_writes`` does not read the head). The
  refused put marks the tombstone ``upto`` that parent again, and the next sweep deletes it.

The empty heads stay. Deleting them would need a conditional DELETE, which Ceph RGW ignores and
obstore does not offer, and an unconditional one could remove the first checkpoint of a new
thread that landed on the empty head a moment before. An empty head is about 100 bytes; readers
treat it as an empty thread, the next put reuses it, and sweeps skip a settled one without a GET.

With ``strategy="keep_latest"`` (the Agent Server's other TTL strategy) an expired thread keeps
its latest checkpoint per namespace instead: each namespace is rewritten by the compare-and-swap
rewrite ``prune`` uses, and only on the head version the sweep decided on (as a delete: a writer or
a refreshing reader that moved the head since leaves it whole, ``"revived"``). The rewrite keeps
the old stamp, so the thread stays expired: it is reported ``"kept"`` with ``latest_only``, and
its head, remembered under its ETag with nothing left to prune, is not read again until it
changes.

Damage: a thread whose head cannot be read is reported ``"failed"`` with the object in its
``damaged`` list and left as it is (deleting what cannot be read is ``delete_thread``'s call, not
a sweep's); a key under ``heads/`` that is not a head key is reported in ``SweepResult.foreign``
and never read. The sweep goes on with every other thread.

Requests: see :meth:`~langgraph_handoff.ObjectStoreSaver.sweep`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from langgraph_handoff._format import index_keys, keys
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.head_meta import HeadMeta, SweptMark
from langgraph_handoff._format.records import Head
from langgraph_handoff._frozen import fast_replace
from langgraph_handoff.checkpoint import liveness
from langgraph_handoff.checkpoint.driver import PAUSE, Batch, Plan
from langgraph_handoff.checkpoint.fencing import LeaseTerms, released, session_of
from langgraph_handoff.checkpoint.plans import listing, metadata_index, rewriting
from langgraph_handoff.checkpoint.plans.state import SaverState
from langgraph_handoff.checkpoint.ttl import (
    SweepResult,
    ThreadSweep,
    checkpoint_time,
    idle_expiry,
    lease_hold,
    pending_cleanup,
    stamp_expiry,
    swept_mark,
)
from langgraph_handoff.errors import (
    CorruptObjectError,
    LangGraphHandoffError,
    PreconditionFailedError,
    UnknownOutcomeError,
)
from langgraph_handoff.stores.base import DeleteMany, Get, ObjectInfo, Put

__all__ = ["plan_sweep"]

#: threads whose heads are read in one round trip
_CHUNK = 64
#: heads remembered between sweeps (by key and ETag); cleared when it grows past this
_MEMO_MAX = 200_000
#: listed heads at most this big may be empty heads (checked by their exact size)
_SMALL_HEAD = 1024


@dataclass(frozen=True)
class _Seen:
    """What a sweep needs to know about one head, remembered under its ETag."""

    etag: str
    thread_id: str
    ns: str
    empty: bool
    stamped: float | None  # the stamp's expiry
    latest_time: float | None  # the time inside the latest checkpoint id
    pending: str | None = None  # ``swept.upto``: an earlier sweep's cleanup is not known done
    held: float | None = None  # a live session lease (or transfer) keeps the thread until then
    prunable: bool = False  # strategy keep_latest would drop something from it

    def expiry(self, default_minutes: float | None) -> float:
        return idle_expiry(self.stamped, self.latest_time, self.held, default_minutes)


def _seen(head: Head, etag: str, saver: SaverState | None = None) -> _Seen:
    empty = not head.has_history
    prunable = bool(head.segments) or len(head.records) > 1
    if prunable and not head.segments and saver is not None:
        try:  # a DeltaChannel's ancestors stay: whether keep_latest would drop anything
            prunable = bool(rewriting.keep_latest_drop(saver, head.thread_id, head.checkpoint_ns, dict(head.records)))
        except Exception:  # noqa: BLE001 - undecodable metadata: decided (and reported) when swept
            prunable = True
    return _Seen(
        etag,
        head.thread_id,
        head.checkpoint_ns,
        empty,
        stamp_expiry(head.meta),
        checkpoint_time(head.latest_id),
        pending_cleanup(head.meta),
        None if empty else lease_hold(head.meta),
        prunable,
    )


def _newest_id(head: Head) -> str | None:
    ids = [*head.records, *(s.last_id for s in head.segments)]
    return max(ids) if ids else None


def _owner_id(key: str, data_prefix: str) -> str | None:
    """The checkpoint id a data object is named by: a writes document's checkpoint, a segment's
    first checkpoint, an archive's newest, a blob's owner. None for anything else."""
    kind, _, name = key[len(data_prefix) :].partition("/")
    if kind == "w":
        cid = keys.checkpoint_id_from_inverted(name.split("/", 1)[0])
    elif kind in ("s", "b", "m"):
        cid = keys.checkpoint_id_from_inverted(name[:36])
    else:
        return None
    return cid if keys.is_checkpoint_id(cid) else None


def _sweep_memo(saver: SaverState) -> dict[str, _Seen]:
    memo = saver.__dict__.get("_ttl_memo")
    if memo is None:
        memo = saver.__dict__["_ttl_memo"] = {}
    return memo


def _empty_head_sizes(saver: SaverState, thread_id: str, ns: str) -> tuple[int, ...]:
    """The sizes of the settled empty heads of a namespace: a delete's (no mark), a sweep's
    whose cleanup is done (``{"at"}``), and the first TTL release's (a bare number). A tombstone
    still carrying ``upto`` is bigger by the id, so it is never taken for settled."""
    sizes = []
    for meta in (HeadMeta(), HeadMeta(swept=swept_mark(0.0, None)), HeadMeta(swept=SweptMark(0.0, bare=True))):
        head = Head(thread_id, ns, {}, {}, (), meta)
        sizes.append(len(rec_io.encode_head(head, schema_version=saver.layout.schema_version)))
    return tuple(sizes)


def _looks_empty(saver: SaverState, info: ObjectInfo) -> _Seen | None:
    """A settled empty head (a sweep's or a delete's) told apart by its exact size, without a
    GET: any record, segment, lease or pending cleanup makes a head bigger."""
    if info.size > _SMALL_HEAD:
        return None
    ids = listing.ids_of_head_key(info.key)
    if ids is None:
        return None
    if info.size in _empty_head_sizes(saver, *ids):
        return _Seen(info.etag, ids[0], ids[1], True, None, None)
    return None


def _known(saver: SaverState, memo: dict[str, _Seen], info: ObjectInfo) -> _Seen | None:
    """What the listing and this sweeper's memory tell about a head without reading it."""
    known = memo.get(info.key)
    if known is not None and known.etag == info.etag:
        return known
    return _looks_empty(saver, info)


@dataclass
class _Reads:
    """The heads of one chunk of threads: read (or remembered) by key, or why one could not be."""

    seen: dict[str, _Seen] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    #: the heads among ``failed`` that cannot be read (damaged, or from a newer release)
    damaged: dict[str, DamagedObject] = field(default_factory=dict)
    #: until when each worker liveness record read for this chunk keeps its leases alive
    alive: dict[tuple[str, str], float] = field(default_factory=dict)


def _nothing_to_do(
    saver: SaverState, memo: dict[str, _Seen], group: list[ObjectInfo], reads: _Reads, result: SweepResult,
    default_ttl: float | None,
) -> bool:  # fmt: skip
    """Whether a thread left behind by ``limit`` is known, without a request, to need nothing:
    every head known (read in this sweep, remembered, or a settled empty head) and the thread not
    expired, empty, or (``keep_latest``) with nothing to prune. Unreadable heads count as
    nothing to do (they are reported when the sweep gets to them)."""
    known = []
    for info in group:
        if info.key in reads.failed:
            continue
        s = reads.seen.get(info.key) or _known(saver, memo, info)
        if s is None:
            return False  # not read yet: it may be expired
        known.append(s)
    if any(s.pending for s in known):
        return False
    live = [s for s in known if not s.empty]
    if not live or result.now < max(s.expiry(default_ttl) for s in live):
        return True
    return result.strategy == "keep_latest" and not any(s.prunable for s in live)


def plan_sweep(
    saver: SaverState,
    *,
    dry_run: bool,
    limit: int | None,
    default_ttl: float | None,
    strategy: str,
    on_start: Callable[[int], None] | None,
    on_thread: Callable[[ThreadSweep], None] | None,
) -> Plan[SweepResult]:
    now = saver._clock()
    result = SweepResult(dry_run=dry_run, strategy=strategy, now=now)
    groups: dict[str, list[ObjectInfo]] = {}
    for info in (yield from listing.list_all(saver, keys.heads_prefix())):
        if keys.is_head_key(info.key):
            groups.setdefault(info.key.split("/")[1], []).append(info)
        else:
            result.foreign.append(DamagedObject.foreign(info.key))  # a stray file: never read
    if on_start is not None:
        on_start(len(groups))
    memo = _sweep_memo(saver)
    if len(memo) > _MEMO_MAX:
        memo.clear()
    acted = 0
    pending = list(groups.values())
    for start in range(0, len(pending), _CHUNK):
        chunk = pending[start : start + _CHUNK]
        reads = _Reads()
        want = []
        for group in chunk:
            for info in group:
                known = _known(saver, memo, info)
                if known is not None:
                    reads.seen[info.key] = known
                else:
                    want.append(info.key)
        if want:
            objs = yield Batch(tuple(Get(k) for k in want), outcomes=True)
            for key, obj in zip(want, objs, strict=True):
                yield PAUSE  # under asyncio, a server's other requests run between two heads
                if obj is None:
                    continue  # deleted since the listing
                try:
                    if isinstance(obj, BaseException):
                        raise obj
                    head = rec_io.decode_head(obj.body, key=key)
                    if keys.head_key(head.thread_id, head.checkpoint_ns) != key:
                        raise CorruptObjectError(key, "head belongs elsewhere (misplaced object)", "misplaced")
                except LangGraphHandoffError as exc:
                    reads.failed[key] = f"{type(exc).__name__}: {exc}"
                    if isinstance(exc, listing.UNREADABLE):
                        reads.damaged[key] = DamagedObject.from_error(exc, key)
                    continue
                reads.seen[key] = memo[key] = _seen(head, obj.etag, saver)
        for i, group in enumerate(chunk):
            if limit is not None and acted >= limit:
                later = pending[start + i :]
                result.limited = not all(_nothing_to_do(saver, memo, g, reads, result, default_ttl) for g in later)
                return result
            yield PAUSE
            try:
                outcome = yield from _sweep_group(saver, group, reads, result, default_ttl)
            except LangGraphHandoffError as exc:  # reported; the other threads are still swept
                ids = listing.ids_of_head_key(group[0].key)
                tid = ids[0] if ids else group[0].key.split("/")[1]
                outcome = ThreadSweep(tid, "failed", error=f"{type(exc).__name__}: {exc}")
                if isinstance(exc, listing.UNREADABLE):
                    outcome.damaged.append(DamagedObject.from_error(exc))
            if outcome is None:
                continue
            if outcome.status in ("deleted", "would delete", "pruned", "would prune"):
                acted += 1
            result.add(outcome)
            if on_thread is not None:
                on_thread(outcome)
    return result


def _sweep_group(
    saver: SaverState, group: list[ObjectInfo], reads: _Reads, result: SweepResult, default_ttl: float | None
) -> Plan[ThreadSweep | None]:
    known = [reads.seen[i.key] for i in group if i.key in reads.seen]
    errors = [f"{k}: {reads.failed[k]}" for k in (i.key for i in group) if k in reads.failed]
    ids = listing.ids_of_head_key(group[0].key)
    thread_id = known[0].thread_id if known else ids[0] if ids else group[0].key.split("/")[1]
    if errors:
        damaged = [reads.damaged[i.key] for i in group if i.key in reads.damaged]
        return ThreadSweep(thread_id, "failed", error="; ".join(errors), damaged=damaged)
    if not known:
        return None  # every head vanished since the listing: someone deleted the thread
    if any(s.pending for s in known):
        return (yield from _finish_cleanup(saver, thread_id, group, result.dry_run))
    live = [s for s in known if not s.empty]
    if not live:
        return ThreadSweep(thread_id, "empty")
    expires = max(s.expiry(default_ttl) for s in live)
    if result.now < expires:
        return ThreadSweep(thread_id, "kept", expires_at=expires)
    if result.strategy == "keep_latest" and not any(s.prunable for s in live):
        # pruned already (or never had more than its latest): nothing to read again until it changes
        return ThreadSweep(thread_id, "kept", expires_at=expires, latest_only=True)
    # Expired on what we know. Decide on fresh heads: the memo may be a sweep old.
    keys_ = [i.key for i in group]
    objs = yield Batch(tuple(Get(k) for k in keys_))
    heads: dict[str, tuple[Head, str]] = {}
    for key, obj in zip(keys_, objs, strict=True):
        if obj is not None:
            head = rec_io.decode_head(obj.body, key=key)
            heads[head.checkpoint_ns] = (head, obj.etag)
            _sweep_memo(saver)[key] = _seen(head, obj.etag, saver)
    live_heads = {ns: h for ns, h in heads.items() if h[0].has_history}
    if not live_heads:
        return ThreadSweep(thread_id, "empty")
    expires = max(_seen(h, e).expiry(default_ttl) for h, e in live_heads.values())
    if result.now >= expires and "" in live_heads:
        expires = max(expires, (yield from _worker_alive_until(live_heads[""][0], reads.alive)))
    if result.now < expires:
        return ThreadSweep(thread_id, "kept", expires_at=expires)
    if result.strategy == "keep_latest":
        return (yield from _sweep_keep_latest(saver, thread_id, live_heads, expires, result.dry_run))
    if result.dry_run:
        return ThreadSweep(thread_id, "would delete", expires_at=expires)
    return (yield from _sweep_delete(saver, thread_id, heads, expires, result.now))


def _worker_alive_until(root: Head, alive: dict[tuple[str, str], float]) -> Plan[float]:
    """Until when the liveness record of the worker whose lease is on ``root`` keeps the
    session alive (0.0: no such lease or record). A worker renews that one record, not each
    lease (:mod:`~langgraph_handoff.checkpoint.liveness`), so a session it serves is idle
    only once the record lapses too."""
    terms = LeaseTerms.of(root.meta)
    ref = terms.liveness_ref if terms is not None else None
    if ref is None:
        return 0.0
    if ref not in alive:  # one GET per worker, however many of its sessions the chunk holds
        alive.update((yield from liveness.plan_alive_until([ref])))
    return alive.get(ref, 0.0)


def _tombstone(thread_id: str, ns: str, head: Head | None, now: float, upto: str | None) -> Head:
    """The empty head a sweep leaves: a session's lease (released) and fencing epoch stay, so
    a superseded owner's late write is still refused; ``swept`` tells a late run why, and its
    ``upto`` which objects are the swept thread's until they are known deleted."""
    session = HeadMeta()
    if head is not None:
        session = released(session_of(head.meta))
        if ns:
            session = session.replace(lease=None)
    return Head(thread_id, ns, {}, {}, (), session.replace(swept=swept_mark(now, upto)))


def _swap_to_empty(
    saver: SaverState, thread_id: str, ns: str, decided: tuple[Head, str] | None, now: float
) -> Plan[str | None]:
    """Empty one head by compare-and-swap on the decided version: the tombstone's ETag, or None
    if the head moved."""
    key = keys.head_key(thread_id, ns)
    upto = _newest_id(decided[0]) if decided else None
    tomb = _tombstone(thread_id, ns, decided[0] if decided else None, now, upto)
    body = rec_io.encode_head(tomb, schema_version=saver.layout.schema_version)
    op = Put(key, body, if_match=decided[1]) if decided else Put(key, body, if_none_match=True)
    try:
        etag = yield op
    except PreconditionFailedError:
        return None
    except UnknownOutcomeError:
        obj = yield Get(key)  # settle it: landed iff the head is exactly our body (it has a nonce)
        return obj.etag if obj is not None and obj.body == body else None
    return str(etag)


def _garbage(data: list[ObjectInfo], thread_id: str, ns: str, upto: str) -> list[str]:
    """The listed data objects of one namespace owned by checkpoint ids up to ``upto``."""
    prefix = keys.data_prefix(thread_id, ns)
    out = []
    for info in data:
        if info.key.startswith(prefix):
            owner = _owner_id(info.key, prefix)
            if owner is not None and owner <= upto:
                out.append(info.key)
    return out


def _clear_marks(saver: SaverState, thread_id: str, marked: list[tuple[Head, str]]) -> Plan[None]:
    """The cleanup is done: drop ``upto`` from these heads (as read, with their ETags) by
    compare-and-swap. A head that moved meanwhile keeps its mark (a put carries it over) and a
    later sweep clears it; deleting again is harmless."""
    ops, fresh = [], []
    for head, etag in marked:
        at = head.meta.swept.at if head.meta.swept is not None else None
        meta = head.meta.replace(swept=None if at is None else swept_mark(at, None))
        new = fast_replace(head, meta=meta)
        fresh.append(new)
        key = keys.head_key(thread_id, head.checkpoint_ns)
        ops.append(Put(key, rec_io.encode_head(new, schema_version=saver.layout.schema_version), if_match=etag))
    if not ops:
        return None
    outcomes = yield Batch(tuple(ops), outcomes=True)
    memo = _sweep_memo(saver)
    for op, new, outcome in zip(ops, fresh, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, (PreconditionFailedError, UnknownOutcomeError)):
                raise outcome
            continue
        memo[op.key] = _seen(new, str(outcome))
        saver._cache.observe(thread_id, new.checkpoint_ns, new, str(outcome))
    return None


def _finish_cleanup(saver: SaverState, thread_id: str, group: list[ObjectInfo], dry_run: bool) -> Plan[ThreadSweep]:
    """An earlier sweep emptied this thread (or some namespaces of it) and stopped or failed
    before its delete was known done: delete, in each namespace still marked, the data objects
    owned up to the mark, then clear the marks. The filter is the sweep's own, so a thread
    started afresh on the emptied head keeps its objects."""
    keys_ = [i.key for i in group]
    objs = yield Batch(tuple(Get(k) for k in keys_))
    marked: list[tuple[Head, str]] = []
    for key, obj in zip(keys_, objs, strict=True):
        if obj is not None:
            head = rec_io.decode_head(obj.body, key=key)
            _sweep_memo(saver)[key] = _seen(head, obj.etag)
            if pending_cleanup(head.meta) is not None:
                marked.append((head, obj.etag))
    outcome = ThreadSweep(thread_id, "would clean" if dry_run else "cleaned")
    if not marked:
        outcome.status = "empty"
        return outcome
    data = yield from listing.list_all(saver, keys.thread_data_prefix(thread_id))
    garbage = []
    for head, _etag in marked:
        upto = pending_cleanup(head.meta)
        assert upto is not None
        garbage += _garbage(data, thread_id, head.checkpoint_ns, upto)
    outcome.objects_deleted = len(garbage)
    if dry_run:
        return outcome
    if garbage:
        yield DeleteMany(tuple(garbage))
    yield from _clear_marks(saver, thread_id, marked)
    return outcome


def _sweep_delete(
    saver: SaverState, thread_id: str, heads: dict[str, tuple[Head, str]], expires: float, now: float
) -> Plan[ThreadSweep]:
    # its index entries are listed before the swap decides: a put after it writes fresh ones
    data, by_thread = yield from listing.list_all_many(
        saver, (keys.thread_data_prefix(thread_id), index_keys.by_thread_prefix(thread_id))
    )
    entries = [i.key for i in by_thread]
    outcome = ThreadSweep(thread_id, "deleted", expires_at=expires)
    emptied: dict[str, str] = {}  # namespace -> its tombstone's ETag
    try:
        etag = yield from _swap_to_empty(saver, thread_id, "", heads.get(""), now)
        if etag is None:
            outcome.status = "revived"
            return outcome
        emptied[""] = etag
        for ns in sorted(n for n in heads if n):
            head, _etag = heads[ns]
            if not head.has_history:
                continue  # already empty: nothing of it to protect or delete
            etag = yield from _swap_to_empty(saver, thread_id, ns, heads[ns], now)
            if etag is not None:
                emptied[ns] = etag
            else:
                outcome.revived_namespaces.append(ns)
    finally:
        saver._cache.forget_thread(thread_id)
    # From here the thread is gone for readers and writers; its tombstones carry ``upto``, so
    # if this sweep stops or fails before the marks are cleared, a later sweep deletes the rest.
    garbage: list[str] = []
    marked: list[tuple[Head, str]] = []
    for ns, tomb_etag in emptied.items():
        newest = _newest_id(heads[ns][0]) if ns in heads else None
        if newest is None:
            continue
        garbage += _garbage(data, thread_id, ns, newest)
        marked.append((_tombstone(thread_id, ns, heads[ns][0], now, newest), tomb_etag))
    try:
        if garbage:
            yield DeleteMany(tuple(garbage))
        outcome.objects_deleted = len(garbage)
        yield from metadata_index.plan_delete_entries(entries, emptied)
        yield from _clear_marks(saver, thread_id, marked)
    except LangGraphHandoffError as exc:
        outcome.error = (
            f"emptied, but deleting its data objects failed ({type(exc).__name__}: {exc}); the next sweep deletes them"
        )
    return outcome


def _sweep_keep_latest(
    saver: SaverState, thread_id: str, heads: dict[str, tuple[Head, str]], expires: float, dry_run: bool
) -> Plan[ThreadSweep]:
    outcome = ThreadSweep(thread_id, "kept", expires_at=expires, latest_only=True)
    moved = []
    for ns, (head, etag) in sorted(heads.items()):
        if not head.segments and not rewriting.keep_latest_drop(saver, thread_id, ns, dict(head.records)):
            continue  # nothing older to drop
        outcome.latest_only = False
        if dry_run:
            outcome.status = "would prune"
            continue

        choose = partial(rewriting.keep_latest_drop, saver, thread_id, ns)

        # the decision sticks as a delete's does: only on the head version it was taken on (a
        # writer or a refreshing reader that moved the head since keeps the thread whole)
        removed = yield from rewriting.plan_rewrite_namespace(saver, thread_id, ns, choose, on_version=etag)
        if removed < 0:
            moved.append(ns)
            continue
        outcome.checkpoints_removed += removed
        state = saver._cache.get(thread_id, ns)
        if state.known and state.head is not None and state.etag is not None:
            # the rewritten head is remembered: later sweeps skip it until it changes
            _sweep_memo(saver)[keys.head_key(thread_id, ns)] = _seen(state.head, state.etag, saver)
    if outcome.checkpoints_removed:
        outcome.status = "pruned"
        outcome.revived_namespaces = [ns for ns in moved if ns]
    elif moved:
        outcome.status = "revived"
        outcome.revived_namespaces = [ns for ns in moved if ns]
    return outcome
