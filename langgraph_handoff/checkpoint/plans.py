"""Every saver operation, written once as a sans-I/O plan.

Each ``_plan_*`` method is a generator: it yields store operations (see :mod:`.driver`) and gets
their results back, so the very same logic serves ``get_tuple`` and ``aget_tuple``, ``put`` and
``aput``, and so on. Nothing here blocks or awaits.

Request budget per operation (S3 requests; counted by the tests):

==============================  ====================================================
``put``                         1 conditional PUT of the head. Plus, only when needed:
                                1 PUT per new value >= ``blob_threshold`` (in parallel,
                                before the head) and 1 PUT of a sealed segment every
                                ``head_max_records`` checkpoints. A cold cache adds 1 GET.
``put_writes``                  1 create-only PUT (a retried task: GET + CAS)
``get_tuple`` (latest)          GET head + LIST writes, in one round trip; + 1 GET per
                                pending-writes document and per blob value
``list`` / history of k         GET head + LIST writes (one round trip), + GETs only for
                                writes documents not folded into the head and for sealed
                                segments reached
``delete_thread``               2 LISTs + 1 DeleteObjects per 1000 objects
==============================  ====================================================
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import logging
import random
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_handoff import keys
from langgraph_handoff.checkpoint import records as rec_io
from langgraph_handoff.checkpoint.cache import HeadCache
from langgraph_handoff.checkpoint.driver import Batch, Emit, Plan, Sleep
from langgraph_handoff.checkpoint.fencing import FENCE_KEY, LEASE_KEY, PutIntent, check_put, write_refusal
from langgraph_handoff.checkpoint.records import (
    BlobRef,
    Folded,
    Head,
    Inline,
    Payload,
    PayloadTable,
    Record,
    Segment,
    SegmentRef,
    WriteItem,
    WritesDoc,
    fast_replace,
    payloads_for,
)
from langgraph_handoff.checkpoint.ttl import TTLSettings, restamp, wants_refresh
from langgraph_handoff.checkpoint.writes import merge_items, slot_items, sorted_pending
from langgraph_handoff.errors import (
    ConflictError,
    CorruptObjectError,
    InvalidCheckpointIdError,
    InvalidConfigError,
    MigrationError,
    OwnershipLostError,
    PreconditionFailedError,
    SchemaVersionError,
    ThreadExistsError,
    UnknownOutcomeError,
)
from langgraph_handoff.migrations import SchemaMigrations
from langgraph_handoff.stores.base import (
    DeleteMany,
    Get,
    ListPage,
    ListResult,
    ObjectInfo,
    Put,
    StoredObject,
)

__all__ = ["Layout", "SaverPlans"]

#: Administrative operations (delete_for_runs, prune, copy_thread) report progress here at INFO.
log = logging.getLogger("langgraph_handoff")
_PROGRESS_EVERY = 100
#: head fields that belong to a session's ownership (see langgraph_handoff.ownership)
_OWNERSHIP_KEYS = (LEASE_KEY, FENCE_KEY)


@dataclass(frozen=True)
class Layout:
    """Storage layout knobs. The defaults meet the request targets for states up to 256 KiB.

    Attributes:
        spill_threshold: a serialised value at least this large that the latest checkpoint no
            longer uses is moved out of the head into its own object, written *behind* the head
            (in parallel with a head write that still carries it, and dropped from the head only
            by a later put): large states keep one round trip per put.
        blob_threshold: a new value at least this large is written as its own object *before*
            the head that references it (two round trips), instead of riding in the head.
        head_max_records: seal older checkpoints into a segment when the head holds more.
        head_max_bytes: ... or when the encoded head grows past this.
        head_max_overhead: ... or when it is this many times bigger than the latest checkpoint
            alone (and over ``head_overhead_floor`` bytes): big states then cost a reader about
            one copy of the state, not one per checkpoint in the window.
        head_overhead_floor: heads smaller than this are never sealed for overhead.
        head_keep: how many newest checkpoints stay in the head after sealing by count (sealing
            by size keeps only the latest).
        fold_max_bytes: writes documents up to this size are folded into the head.
        writes_page: LIST page size used next to the head GET when reading the latest checkpoint.
        max_attempts: compare-and-swap attempts per put before giving up with ConflictError.
        backoff: base of the jittered exponential back-off between attempts, in seconds.
        schema_version: the user state-schema version recorded in every object written.
    """

    spill_threshold: int = 32 * 1024
    blob_threshold: int = 1024 * 1024
    head_max_records: int = 64
    head_max_bytes: int = 1024 * 1024
    head_max_overhead: float = 2.0
    head_overhead_floor: int = 256 * 1024
    head_keep: int = 4
    fold_max_bytes: int = 16 * 1024
    writes_page: int = 100
    max_attempts: int = 12
    backoff: float = 0.01
    schema_version: int = 0

    def __post_init__(self) -> None:
        if self.head_keep < 1:
            raise ValueError("head_keep must be at least 1 (the latest checkpoint lives in the head)")
        if self.head_max_records <= self.head_keep:
            raise ValueError("head_max_records must be greater than head_keep")


# --------------------------------------------------------------------------------------------------
# Small pure helpers
# --------------------------------------------------------------------------------------------------


def _configurable(config: RunnableConfig | None, what: str) -> Mapping[str, Any]:
    conf = (config or {}).get("configurable")
    if not isinstance(conf, Mapping):
        raise InvalidConfigError(f"{what} needs config={{'configurable': {{'thread_id': ...}}}}; got {config!r}")
    if conf.get("thread_id") is None:
        raise InvalidConfigError(
            f"{what} needs config['configurable']['thread_id'] (the conversation's id); got keys "
            f"{sorted(k for k in conf if not str(k).startswith('__'))}"
        )
    return conf


def _target(config: RunnableConfig | None, what: str) -> tuple[str, str | None, str | None]:
    """(thread_id, checkpoint_ns or None if absent, checkpoint_id or None)."""
    conf = _configurable(config, what)
    thread_id = keys.validate_thread_id(conf["thread_id"])
    ns = conf.get("checkpoint_ns")
    ns = None if ns is None else keys.validate_namespace(ns)
    cid = conf.get("checkpoint_id") or None
    return thread_id, ns, cid


def _in_run(config: RunnableConfig) -> bool:
    """True for reads LangGraph's run loop makes (their config carries ``__pregel_*`` entries);
    ``get_state`` and direct API calls carry none."""
    return any(str(k).startswith("__pregel_") for k in (config.get("configurable") or {}))


def _tuple_config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


def _backoff(layout: Layout, attempt: int) -> float:
    return min(layout.backoff * (2**attempt), 1.0) * random.uniform(0.5, 1.5)


_PLAIN = JsonPlusSerializer()


def _canonical(value: Any) -> Any:
    """``value`` with every set in a fixed order: a set's bytes follow its iteration order, which
    depends on the process's hash seed and on how the set was built."""
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, sorted((_canonical(v) for v in value), key=repr))
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_canonical(v) for v in value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return (type(value).__qualname__, tuple(_canonical(v) for v in value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return (type(value).__qualname__, fields)
    if hasattr(value, "model_dump") and hasattr(type(value), "model_fields"):  # a pydantic model
        return (type(value).__qualname__, {k: _canonical(getattr(value, k)) for k in type(value).model_fields})
    return value


def _comparison_key(serde: Any, value: Any) -> bytes:
    """Bytes that are equal exactly when two values are: serialised (``==`` is elementwise for
    arrays and blind to 1 vs 1.0) by a plain serializer, since the saver's own may encrypt with
    a random nonce and never give the same bytes twice; sets in a fixed order."""
    try:
        typ, data = _PLAIN.dumps_typed(_canonical(value))
    except Exception:  # noqa: BLE001 - a type only the saver's serde knows how to store
        typ, data = serde.dumps_typed(value)
    return typ.encode() + b"\0" + data


def _next_version(saver: Any, versions: Mapping[str, Any]) -> Any:
    """A version above every one in ``versions``, of the same kind: an int if they are ints
    (checkpoints written with int versions stay comparable), else the saver's string form."""
    if not versions:
        return saver.get_next_version(None, None)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in versions.values()):
        return max(versions.values()) + 1
    highest = max(versions.values(), key=lambda v: int(v) if isinstance(v, (int, float)) else int(str(v).split(".")[0]))
    return saver.get_next_version(highest, None)


def content_digest(data: bytes) -> str:
    """The digest naming a large value's blob (with its owner): the same bytes, the same key."""
    return hashlib.sha256(data).hexdigest()[:32]


def _inline_size(rec: Record, table: PayloadTable) -> int:
    """Bytes one checkpoint needs in a head: its record plus the inline values it references."""
    size = len(rec.checkpoint[1]) + len(rec.metadata[1]) + 64
    for ch, (origin, _v) in rec.values.items():
        payload = table.get(origin, {}).get(ch)
        if isinstance(payload, Inline):
            size += len(payload.data) + len(ch)
    return size


def _folded_size(folded: Folded) -> int:
    return sum(len(w.data) + len(w.channel) + 16 for w in folded.items)


class _WritesCursor:
    """Walks a namespace's writes listing newest checkpoint first (keys hold inverted ids)."""

    def __init__(self, prefix: str, start_after: str | None = None, page: ListResult | None = None):
        self.prefix = prefix
        self.after = start_after
        self.buf: deque[tuple[str, ObjectInfo]] = deque()
        self.done = False
        if page is not None:
            self.feed(page)

    def feed(self, page: ListResult) -> None:
        for info in page.items:
            parsed = keys.parse_writes_key(info.key)
            if parsed is not None:
                self.buf.append((parsed[0], info))
        if page.items:
            self.after = page.items[-1].key
        self.done = not page.truncated or not page.items

    def need_more(self, checkpoint_id: str) -> bool:
        return not self.done and (not self.buf or self.buf[-1][0] >= checkpoint_id)

    def take(self, checkpoint_id: str) -> list[ObjectInfo]:
        while self.buf and self.buf[0][0] > checkpoint_id:
            self.buf.popleft()
        out = []
        while self.buf and self.buf[0][0] == checkpoint_id:
            out.append(self.buf.popleft()[1])
        return out


class _Vanished(Exception):
    """A value a record references was missing. Usually a concurrent prune, delete_for_runs or
    delete_thread removed the record a moment ago; readers re-read the head to tell that apart from
    real damage (then it becomes CorruptObjectError)."""

    def __init__(self, key: str, checkpoint_id: str) -> None:
        super().__init__(key)
        self.key = key
        self.checkpoint_id = checkpoint_id

    def corrupt(self) -> CorruptObjectError:
        return CorruptObjectError(
            self.key, f"checkpoint {self.checkpoint_id!r} references this value but it is missing"
        )


@dataclass
class _ListQuery:
    only_id: str | None
    filter: dict[str, Any] | None
    before_id: str | None
    limit: int | None
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

    def _wanted(self, checkpoint_id: str) -> bool:
        return self.below is None or checkpoint_id < self.below

    def add_segment(self, seg: Segment) -> None:
        fresh = [r for r in seg.records.values() if r.id not in self.seen and self._wanted(r.id)]
        self.seen.update(seg.records)
        merged = sorted([*self.items, *((r, seg.payloads) for r in fresh)], key=lambda x: x[0].id, reverse=True)
        self.items = deque(merged)


# --------------------------------------------------------------------------------------------------
# The plans
# --------------------------------------------------------------------------------------------------


class SaverPlans:
    """Mixin holding the logic of :class:`~langgraph_handoff.ObjectStoreSaver`.

    Expects ``self.serde`` (read on every call, so ``with_allowlist`` copies work), ``self.layout``
    (:class:`Layout`) and ``self._cache`` (:class:`HeadCache`).
    """

    serde: Any
    layout: Layout
    _cache: HeadCache
    #: ``(thread_id, epoch)`` of the session lease this saver writes under, if any
    _fence: tuple[str, int] | None = None
    #: ``(thread_id, rider)``: a function of the root head's extra fields applied inside every
    #: root-head compare-and-swap of that thread (see ``ObjectStoreSaver.with_head_rider``)
    _rider: tuple[str, Callable[[dict[str, Any]], dict[str, Any]]] | None = None
    #: the user's state-schema migrations (``None``: schema version 0, nothing to migrate)
    migrations: SchemaMigrations | None = None
    #: checkpoint TTL (``None``: threads never expire; see :mod:`.ttl`)
    ttl: TTLSettings | None = None
    #: seconds since the epoch, for TTL stamps and sweeps (tests inject their own)
    _clock: Callable[[], float] = staticmethod(time.time)  # type: ignore[assignment]

    @property
    def _schema(self) -> int:
        return self.migrations.current if self.migrations is not None else 0

    def _fence_for(self, thread_id: str) -> int | None:
        if self._fence is None:
            return None
        bound, epoch = self._fence
        if thread_id != bound:
            raise InvalidConfigError(
                f"this saver is bound to the lease of session {bound!r} and cannot write thread {thread_id!r}; "
                "use the unbound saver (or one bound to that session's lease)"
            )
        return epoch

    # -- decoding helpers -----------------------------------------------------------------------
    def _head_from(self, obj: StoredObject | None, thread_id: str, ns: str) -> tuple[Head | None, str | None]:
        if obj is None:
            return None, None
        head = self._cache.head_with_etag(thread_id, ns, obj.etag) or rec_io.decode_head(obj.body, key=obj.key)
        if head.thread_id != thread_id or head.checkpoint_ns != ns:
            raise CorruptObjectError(
                obj.key,
                f"head belongs to thread {head.thread_id!r} namespace {head.checkpoint_ns!r}, "
                f"not {thread_id!r} {ns!r} (misplaced object)",
            )
        return head, obj.etag

    def _load_segment(self, thread_id: str, ns: str, ref: SegmentRef) -> Plan[Segment | None]:
        key = keys.segment_key(thread_id, ns, ref.key)
        obj = yield Get(key)
        if obj is None:
            return None
        return rec_io.decode_segment(obj.body, key=key)

    def _missing_segment(self, thread_id: str, ns: str, ref: SegmentRef) -> CorruptObjectError:
        return CorruptObjectError(
            keys.segment_key(thread_id, ns, ref.key),
            "the head lists this history segment but it is missing",
        )

    def _find_record(
        self, thread_id: str, ns: str, head: Head, checkpoint_id: str
    ) -> Plan[tuple[Record, PayloadTable, Head] | None]:
        """Locate a checkpoint in the head or the segment whose id range covers it. A segment
        deleted by a concurrent prune sends us back to a fresh head (at most a few times)."""
        for _ in range(3):
            if checkpoint_id in head.records:
                return head.records[checkpoint_id], head.payloads, head
            refs = [s for s in head.segments if s.covers(checkpoint_id)]
            if not refs:
                return None
            missing = None
            for ref in refs:
                seg = yield from self._load_segment(thread_id, ns, ref)
                if seg is None:
                    missing = ref
                    continue
                if checkpoint_id in seg.records:
                    return seg.records[checkpoint_id], seg.payloads, head
            if missing is None:
                return None
            fresh, _etag = self._head_from((yield Get(keys.head_key(thread_id, ns))), thread_id, ns)
            if fresh is None or missing not in fresh.segments:
                if fresh is None:
                    return None
                head = fresh
                continue
            raise self._missing_segment(thread_id, ns, missing)
        return None

    def _writes_for(self, cursor: _WritesCursor, checkpoint_id: str) -> Plan[list[ObjectInfo]]:
        while cursor.need_more(checkpoint_id):
            cursor.feed((yield ListPage(cursor.prefix, start_after=cursor.after, max_keys=1000)))
        return cursor.take(checkpoint_id)

    def _decode_writes_doc(self, obj: StoredObject, thread_id: str, ns: str, checkpoint_id: str) -> WritesDoc:
        doc = rec_io.decode_writes(obj.body, key=obj.key)
        if (doc.thread_id, doc.checkpoint_ns, doc.checkpoint_id) != (thread_id, ns, checkpoint_id):
            raise CorruptObjectError(obj.key, "writes document belongs to another checkpoint (misplaced object)")
        return doc

    def _value(self, payload: Payload, blobs: Mapping[str, bytes], blob_key: str) -> Any:
        if isinstance(payload, Inline):
            return self.serde.loads_typed((payload.type, payload.data))
        return self.serde.loads_typed((payload.type, blobs[blob_key]))

    def _blob_gets(
        self, thread_id: str, ns: str, rec: Record, table: PayloadTable, channels: Iterable[str]
    ) -> list[str]:
        out = []
        for ch in channels:
            origin, _v = rec.values[ch]
            payload = table.get(origin, {}).get(ch)
            if isinstance(payload, BlobRef):
                out.append(keys.blob_key(thread_id, ns, origin, payload.digest))
        return out

    def _fetch(
        self,
        thread_id: str,
        ns: str,
        rec: Record,
        table: PayloadTable,
        infos: Sequence[ObjectInfo],
        channels: Iterable[str],
    ) -> Plan[tuple[list[tuple[str, str, Iterable[WriteItem]]], dict[str, Any]]]:
        """A record's writes documents (listed in ``infos``) and the values of ``channels``,
        fetching in one round trip only what the head does not already hold.

        Folded writes are used when the listing shows the same ETag; the listing is the truth
        about which documents exist.
        """
        by_segment = {keys.encode_segment(t): (t, f) for t, f in rec.writes.items()}
        tasks: list[tuple[str, str, Iterable[WriteItem]]] = []
        want: list[str] = []
        for info in infos:
            hit = by_segment.get(info.key.rsplit("/", 1)[1])
            if hit is not None and hit[1].etag == info.etag:
                tasks.append((hit[0], hit[1].task_path, self._current_items(thread_id, ns, rec, hit[1].items)))
            else:
                want.append(info.key)
        channels = list(channels)
        blob_keys = self._blob_gets(thread_id, ns, rec, table, channels)
        ops = tuple(Get(k) for k in [*want, *blob_keys])
        results = list((yield Batch(ops))) if ops else []
        for obj in results[: len(want)]:
            if obj is None:
                continue  # deleted between LIST and GET
            doc = self._decode_writes_doc(obj, thread_id, ns, rec.id)
            tasks.append((doc.task_id, doc.task_path, self._current_items(thread_id, ns, rec, doc.items)))
            self._cache.remember_writes(thread_id, ns, rec.id, doc.task_id, Folded(obj.etag, doc.task_path, doc.items))
        blobs: dict[str, bytes] = {}
        for key, obj in zip(blob_keys, results[len(want) :], strict=True):
            if obj is None:
                raise _Vanished(key, rec.id)
            blobs[key] = rec_io.decode_blob(obj.body, key=key)
        values = {}
        for ch in channels:
            origin, _v = rec.values[ch]
            payload = table.get(origin, {}).get(ch)
            if payload is None:
                raise CorruptObjectError(
                    keys.head_key(thread_id, ns), f"checkpoint {rec.id!r} references a missing value of {ch!r}"
                )
            bkey = keys.blob_key(thread_id, ns, origin, payload.digest) if isinstance(payload, BlobRef) else ""
            values[ch] = self._value(payload, blobs, bkey)
        return tasks, values

    def _current_items(self, thread_id: str, ns: str, rec: Record, items: tuple[WriteItem, ...]) -> list[WriteItem]:
        """Pending writes addressed in this code's channel names. Each write is renamed from the
        schema of the code that wrote it (format 1 writes: that of their checkpoint)."""
        out = []
        for w in items:
            since = rec.schema if w.schema is None else w.schema
            if since != self._schema:
                if self.migrations is None or since > self.migrations.current:
                    where = f"a pending write on checkpoint {rec.id} of thread {thread_id!r}" + (
                        f" namespace {ns!r}" if ns else ""
                    )
                    raise SchemaVersionError(where, found=since, supported=self._schema)
                w = replace(w, channel=self.migrations.rename(w.channel, from_version=since), schema=self._schema)
            out.append(w)
        return out

    def _assemble(
        self, thread_id: str, ns: str, rec: Record, table: PayloadTable, infos: Sequence[ObjectInfo]
    ) -> Plan[CheckpointTuple]:
        tasks, values = yield from self._fetch(thread_id, ns, rec, table, infos, rec.values)
        checkpoint = self.serde.loads_typed(rec.checkpoint)
        checkpoint["channel_values"] = values
        metadata = self.serde.loads_typed(rec.metadata)
        pending = sorted_pending(tasks, self.serde.loads_typed)
        if rec.schema != self._schema:
            checkpoint, metadata = self._migrate(thread_id, ns, rec, checkpoint, metadata)
        return CheckpointTuple(
            config=_tuple_config(thread_id, ns, rec.id),
            checkpoint=checkpoint,
            metadata=metadata,
            parent_config=_tuple_config(thread_id, ns, rec.parent) if rec.parent else None,
            pending_writes=pending,
        )

    def _migrate(self, thread_id: str, ns: str, rec: Record, checkpoint: Any, metadata: Any) -> tuple[Any, Any]:
        """Upgrade a checkpoint written in an older state schema, in memory, before LangGraph
        sees it. Channels a step added or changed get a new version, so the next ``put`` stores
        their new values instead of pointing at the old ones; renamed channels keep theirs."""
        where = f"checkpoint {rec.id} of thread {thread_id!r}" + (f" namespace {ns!r}" if ns else "")
        if self.migrations is None or rec.schema > self.migrations.current:
            raise SchemaVersionError(where, found=rec.schema, supported=self._schema)
        migrations, since = self.migrations, rec.schema
        stored_versions = checkpoint["channel_versions"]
        # Where each channel now comes from. A channel is only "the same" as the one stored under
        # its source's name: a rename onto a name the old schema used too (or two channels
        # renamed onto one) must not pass for unchanged, or the next put (and migrate) would
        # keep the value stored under that name and version.
        sources: dict[str, list[str]] = {}
        for ch in {**stored_versions, **checkpoint["channel_values"]}:
            sources.setdefault(migrations.rename(ch, from_version=since), []).append(ch)
        old = {
            new: checkpoint["channel_values"][src[0]]
            for new, src in sources.items()
            if len(src) == 1
            and src[0] in checkpoint["channel_values"]
            and (src[0] == new or new not in stored_versions)
        }
        values, metadata, _ = migrations.upgrade(
            dict(checkpoint["channel_values"]), dict(metadata), from_version=since, where=where
        )
        versions = {new: stored_versions[src[0]] for new, src in sources.items() if src[0] in stored_versions}
        bumped = _next_version(self, stored_versions)
        for new, src in sources.items():
            if len(src) > 1 and new not in values:
                versions.pop(new, None)  # an ambiguous version of a channel without a value
        for ch, value in list(values.items()):
            if ch not in old or _comparison_key(self.serde, old[ch]) != _comparison_key(self.serde, value):
                versions[ch] = bumped
                # what a reader gets is what would be stored (a tuple comes back as a list), so a
                # migrated thread reads the same before and after ``migrate`` rewrites it
                values[ch] = self.serde.loads_typed(self.serde.dumps_typed(value))
        for ch in set(old) - set(values):
            versions.pop(ch, None)
        metadata = self.serde.loads_typed(self.serde.dumps_typed(metadata))  # as stored, too
        seen = {
            node: {migrations.rename(ch, from_version=since): v for ch, v in chans.items()}
            for node, chans in (checkpoint.get("versions_seen") or {}).items()
        }
        checkpoint = {**checkpoint, "channel_values": values, "channel_versions": versions, "versions_seen": seen}
        return checkpoint, metadata

    # -- get_tuple -------------------------------------------------------------------------------
    def _plan_get_tuple(self, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
        """Read once more from a fresh head if a referenced value vanished under a concurrent
        prune; a value still missing then is real damage."""
        for _ in range(3):
            try:
                return (yield from self._get_tuple_once(config))
            except _Vanished as gone:
                vanished = gone
        raise vanished.corrupt()

    def _get_tuple_once(self, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
        thread_id, ns_or_none, cid = _target(config, "get_tuple")
        ns = ns_or_none or ""
        if cid is not None and not keys.is_checkpoint_id(cid):
            return None  # no stored checkpoint can have this id
        hkey = keys.head_key(thread_id, ns)
        wprefix = keys.writes_prefix(thread_id, ns, cid)
        page_size = self.layout.writes_page if cid is None else 1000
        head_obj, page = yield Batch((Get(hkey), ListPage(wprefix, max_keys=page_size)))
        head, etag = self._head_from(head_obj, thread_id, ns)
        empty = head is None or not head.records
        self._cache.observe(thread_id, ns, head, etag, empty_read=cid is None and empty)
        if head is None or empty:
            return None
        if self.ttl is not None and self.ttl.refresh_on_read:
            head, etag = yield from self._plan_refresh(thread_id, ns, head, etag)
        if cid is None:
            rec, table = head.latest, head.payloads  # type: ignore[assignment]
            assert rec is not None
        else:
            found = yield from self._find_record(thread_id, ns, head, cid)
            if found is None:
                return None
            rec, table, _ = found
            if cid != head.latest_id and _in_run(config):
                # A LangGraph run addressed at a superseded checkpoint: time travel. Its first put
                # may branch from here (fencing), unlike a run that lost a race for the latest.
                self._cache.note_branch_point(thread_id, ns, cid)
        infos = yield from self._writes_for(_WritesCursor(wprefix, page=page), rec.id)
        return (yield from self._assemble(thread_id, ns, rec, table, infos))

    # -- put -------------------------------------------------------------------------------------
    def _build_record(
        self,
        thread_id: str,
        ns: str,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
        parent: Record | None,
        cp_typed: tuple[str, bytes],
        md_typed: tuple[str, bytes],
        memo: dict[str, tuple[Payload, bytes | None]],
    ) -> tuple[Record, dict[str, Payload], list[tuple[str, bytes]]]:
        """The record for ``checkpoint``, the payloads it stores, and blobs to write first.

        A value is stored again only if its channel is in ``new_versions`` or the parent record
        does not hold the same version of it; otherwise the record points at the parent's copy.
        """
        cid = checkpoint["id"]
        versions = checkpoint.get("channel_versions") or {}
        parent_values = parent.values if parent is not None else {}
        values: dict[str, tuple[str, Any]] = {}
        payloads: dict[str, Payload] = {}
        blobs: list[tuple[str, bytes]] = []
        for ch, value in checkpoint["channel_values"].items():
            version = versions.get(ch)
            if version is None:
                continue  # a value without a version is not part of the checkpoint (as InMemorySaver)
            inherited = parent_values.get(ch)
            if ch not in new_versions and inherited is not None and inherited[1] == version:
                values[ch] = inherited
                continue
            if ch not in memo:
                typ, data = self.serde.dumps_typed(value)
                if len(data) >= self.layout.blob_threshold:
                    digest = content_digest(data)
                    memo[ch] = (
                        BlobRef(typ, digest, len(data)),
                        rec_io.encode_blob(data, schema_version=self.layout.schema_version),
                    )
                else:
                    memo[ch] = (Inline(typ, data), None)
            payload, blob_body = memo[ch]
            values[ch] = (cid, version)
            payloads[ch] = payload
            if blob_body is not None:
                assert isinstance(payload, BlobRef)
                blobs.append((keys.blob_key(thread_id, ns, cid, payload.digest), blob_body))
        parent_id = parent.id if parent is not None else None
        return Record(cid, parent_id, cp_typed, md_typed, values, schema=self._schema), payloads, blobs

    def _next_head(
        self,
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
                if target.writes.get(t) != f and _folded_size(f) <= self.layout.fold_max_bytes
            }
            if add:
                records[cid] = fast_replace(target, writes={**target.writes, **add})
        latest = records[max(records)]
        table, spills = self._spill(thread_id, ns, payloads_for(records.values(), table), latest, spilled)
        new = Head(
            thread_id=thread_id,
            checkpoint_ns=ns,
            records=records,
            payloads=table,
            segments=head.segments if head is not None else (),
            extra=self._stamp(head.extra if head is not None else {}, thread_id, ns),
        )
        schema = self.layout.schema_version
        body = rec_io.encode_head(new, schema_version=schema)
        layout = self.layout
        in_flight = sum(len(b) for _, b in spills)  # spilled copies leave the head on the next put
        too_many = len(records) > layout.head_max_records
        too_big = len(records) > 1 and (
            len(body) > layout.head_max_bytes
            or (
                len(body) - in_flight > layout.head_overhead_floor
                and len(body) - in_flight > layout.head_max_overhead * _inline_size(latest, new.payloads)
            )
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
        # spills of records now sealed travel in the segment itself
        kept_spills = {keys.blob_key(thread_id, ns, o, p.spill) for o, chs in new.payloads.items() for p in chs.values()
                       if isinstance(p, Inline) and p.spill}  # fmt: skip
        return new, body, segment_write, [(k, b) for k, b in spills if k in kept_spills]

    def _check_root_fence(self, thread_id: str, ns: str, fence: int) -> Plan[None]:
        root, _ = self._head_from((yield Get(keys.head_key(thread_id, ""))), thread_id, "")
        refusal = (
            "the session has no lease any more (its thread was deleted)"
            if root is None
            else write_refusal(root.extra, fence)
        )
        if refusal is not None:
            current = int(root.extra.get(FENCE_KEY, 0) or 0) if root is not None else 0
            raise OwnershipLostError(thread_id, ns, epoch=fence, current=current, reason=refusal)
        return None

    def _undo_if_fenced(
        self, thread_id: str, ns: str, fence: int, before: Head | None, written: Head, etag: str | None
    ) -> Plan[None]:
        """After a lease-bound subgraph write: if the session was taken over, locked or released
        while we wrote, put the head back as it was (an emptied head for a namespace we created)
        and refuse, so a superseded worker's write never stays.

        The restore is a compare-and-swap. If it fails because a takeover only stamped its epoch
        on our head, it is retried on top (keeping the stamp); if someone wrote *checkpoints* on
        top meanwhile, their write stands and ours is left under it, logged.
        """
        try:
            yield from self._check_root_fence(thread_id, ns, fence)
        except OwnershipLostError:
            hkey = keys.head_key(thread_id, ns)
            restore = before if before is not None else Head(thread_id, ns, {}, {}, (), dict(written.extra))
            for _ in range(self.layout.max_attempts):
                body = rec_io.encode_head(restore, schema_version=self.layout.schema_version)
                try:
                    yield Put(hkey, body, if_match=etag)
                    break
                except (PreconditionFailedError, UnknownOutcomeError):
                    fresh, fresh_etag = self._head_from((yield Get(hkey)), thread_id, ns)
                    if fresh is None or (fresh.records == restore.records and fresh.segments == restore.segments):
                        break  # gone, or our restore landed after all
                    if fresh.records != written.records or fresh.segments != written.segments:
                        log.error(
                            "could not undo a superseded write to thread %r namespace %r: newer checkpoints "
                            "were written on top of it",
                            thread_id,
                            ns,
                        )
                        break
                    restore = fast_replace(restore, extra={**restore.extra, **fresh.extra})  # keep the newer fence
                    etag = fresh_etag
            self._cache.forget_thread(thread_id)
            raise
        return None

    def _stamp(self, extra: dict[str, Any], thread_id: str, ns: str = "") -> dict[str, Any]:
        """A lease-bound writer records its epoch in every head it writes (the fencing token), and
        a rider's fields ride along in the root head: decided against the head this CAS replaces,
        so they commit atomically with the checkpoint or not at all."""
        if self._rider is not None and not ns and self._rider[0] == thread_id:
            extra = self._rider[1](extra)
        extra = restamp(extra, self.ttl, self._clock())
        fence = self._fence_for(thread_id)
        if fence is None or int(extra.get(FENCE_KEY, 0) or 0) >= fence:
            return extra
        return {**extra, FENCE_KEY: fence}

    def _plan_refresh(self, thread_id: str, ns: str, head: Head, etag: str | None) -> Plan[tuple[Head, str | None]]:
        """``refresh_on_read``: re-stamp a head just read, by compare-and-swap, when its stamp is
        older than ``ttl.REFRESH_AFTER`` of the TTL (so at most one PUT per namespace per tenth of
        the TTL). A lost or unsettled swap is dropped: whoever moved the head was active too."""
        assert self.ttl is not None
        now = self._clock()
        if etag is None or not wants_refresh(head.extra, self.ttl, now):
            return head, etag
        fresh = fast_replace(head, extra=restamp(head.extra, self.ttl, now))
        try:
            new_etag = yield Put(
                keys.head_key(thread_id, ns),
                rec_io.encode_head(fresh, schema_version=self.layout.schema_version),
                if_match=etag,
            )
        except (PreconditionFailedError, UnknownOutcomeError):
            return head, etag
        self._cache.observe(thread_id, ns, fresh, new_etag)
        return fresh, new_etag

    def _spill(
        self, thread_id: str, ns: str, table: PayloadTable, latest: Record, confirmed: frozenset[str]
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
                if isinstance(p, Inline) and len(p.data) >= self.layout.spill_threshold and (origin, ch) not in keep:
                    digest = p.spill or content_digest(p.data)
                    key = keys.blob_key(thread_id, ns, origin, digest)
                    if key in confirmed:
                        p = BlobRef(p.type, digest, len(p.data))
                    else:
                        p = Inline(p.type, p.data, digest)
                        writes.append((key, rec_io.encode_blob(p.data, schema_version=self.layout.schema_version)))
                moved[ch] = p
            out[origin] = moved
        return out, writes

    def _plan_put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Plan[RunnableConfig]:
        thread_id, ns_or_none, parent_id = _target(config, "put")
        ns = ns_or_none or ""
        cid = keys.validate_checkpoint_id(checkpoint.get("id"))
        if parent_id is not None and not keys.is_checkpoint_id(parent_id):
            raise InvalidCheckpointIdError(f"parent checkpoint id {parent_id!r} is not a canonical uuid string")
        md = get_checkpoint_metadata(config, metadata)
        cp_typed = self.serde.dumps_typed({k: v for k, v in checkpoint.items() if k != "channel_values"})
        md_typed = self.serde.dumps_typed(md)
        source = md.get("source")
        hkey = keys.head_key(thread_id, ns)
        state = self._cache.get(thread_id, ns)
        # ``fresh``: the head was just read from the store. The cache is shared by every thread of
        # this process and may lag behind (another thread's older read can land after our newer
        # write), so a conflict is only ever decided against a fresh read.
        fresh = not state.known
        if state.known:
            head, etag = state.head, state.etag
        else:
            head, etag = self._head_from((yield Get(hkey)), thread_id, ns)
            self._cache.observe(thread_id, ns, head, etag)
        fence = self._fence_for(thread_id)
        if fence is not None and ns:
            # A subgraph head cannot see the root's lease (a lock for a transfer, a release, a
            # takeover whose epoch has not reached this head yet): ask the root, before the write
            # and again after it (see _undo_if_fenced).
            yield from self._check_root_fence(thread_id, ns, fence)
        memo: dict[str, tuple[Payload, bytes | None]] = {}
        for attempt in range(self.layout.max_attempts):
            state = self._cache.get(thread_id, ns)
            saw_empty = parent_id is None and state.empty_reads > 0
            branches = parent_id is not None and parent_id in state.branch_points
            intent = PutIntent(
                thread_id, ns, cid, parent_id, source, saw_empty=saw_empty, branches_from_history=branches, fence=fence
            )
            conflict = check_put(head, intent)
            if conflict is not None and not fresh:
                head, etag = self._head_from((yield Get(hkey)), thread_id, ns)
                self._cache.observe(thread_id, ns, head, etag)
                fresh = True
                conflict = check_put(head, intent)
            if conflict is not None:
                if saw_empty:
                    self._cache.use_empty_read(thread_id, ns)
                raise conflict
            parent = head.records.get(parent_id) if head is not None and parent_id else None
            record, payloads, blobs = self._build_record(
                thread_id, ns, checkpoint, new_versions, parent, cp_typed, md_typed, memo
            )
            if parent is None and parent_id is not None:
                record = fast_replace(record, parent=parent_id)
            new_head, body, seal, spills = self._next_head(
                head, thread_id, ns, record, payloads, state.unfolded, state.spilled
            )
            # Crash safety: what the new head *references* is durable before the head points at
            # it (huge new values, a sealed segment); spilled copies ride alongside the head,
            # which still carries them inline.
            if blobs:
                yield Batch(tuple(Put(k, b) for k, b in blobs))
            if seal is not None:
                yield Put(seal[0], seal[1])  # a fresh nonce-named key: nobody else writes it
            before = head  # what our write replaces (restored if a fenced subgraph write must be undone)
            op = Put(hkey, body, if_match=etag) if etag is not None else Put(hkey, body, if_none_match=True)
            if spills:
                outcomes = yield Batch((op, *(Put(k, b) for k, b in spills)), outcomes=True)
                written = [
                    k for (k, _), o in zip(spills, outcomes[1:], strict=True) if not isinstance(o, BaseException)
                ]
                self._cache.confirm_spills(thread_id, ns, written)
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
                head, etag = self._head_from((yield Get(hkey)), thread_id, ns)
                self._cache.observe(thread_id, ns, head, etag)
                fresh = True
                landed = head.records.get(cid) if head is not None else None
                if landed is not None and (landed.checkpoint, landed.metadata, landed.parent) == (
                    cp_typed,
                    md_typed,
                    record.parent,
                ):
                    self._cache.wrote(thread_id, ns, head, etag, used_empty_read=saw_empty)
                    if fence is not None and ns:
                        assert head is not None
                        yield from self._undo_if_fenced(thread_id, ns, fence, before, head, etag)
                    return _tuple_config(thread_id, ns, cid)  # our write had landed after all
                if attempt + 1 < self.layout.max_attempts:
                    yield Sleep(_backoff(self.layout, attempt))
                continue
            self._cache.wrote(thread_id, ns, new_head, new_etag, used_empty_read=saw_empty)
            if fence is not None and ns:
                yield from self._undo_if_fenced(thread_id, ns, fence, head, new_head, new_etag)
            if branches:
                self._cache.use_branch_point(thread_id, ns, parent_id)  # type: ignore[arg-type]
            return _tuple_config(thread_id, ns, cid)
        raise ConflictError(
            f"put of checkpoint {cid!r} on thread {thread_id!r} lost {self.layout.max_attempts} "
            "compare-and-swap races in a row without a conflicting checkpoint: the namespace is "
            "under heavy contention. Retry later or raise Layout.max_attempts."
        )

    # -- put_writes ------------------------------------------------------------------------------
    def _plan_put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> Plan[None]:
        thread_id, ns_or_none, cid = _target(config, "put_writes")
        ns = ns_or_none or ""
        if cid is None:
            raise InvalidConfigError("put_writes needs config['configurable']['checkpoint_id']")
        keys.validate_checkpoint_id(cid)
        task_id = str(task_id)
        items = slot_items(writes, self.serde.dumps_typed, schema=self._schema)
        key = keys.writes_key(thread_id, ns, cid, task_id)
        schema = self.layout.schema_version

        def encode(merged: tuple[WriteItem, ...], path: str) -> bytes:
            doc = WritesDoc(thread_id, ns, cid, task_id, path, merged)
            return rec_io.encode_writes(doc, schema_version=schema)

        known = self._cache.known_writes(thread_id, ns, cid, task_id)
        for attempt in range(self.layout.max_attempts):
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
            except (PreconditionFailedError, UnknownOutcomeError):
                obj = yield Get(key)
                if obj is None:
                    known = None
                else:
                    doc = self._decode_writes_doc(obj, thread_id, ns, cid)
                    known = Folded(obj.etag, doc.task_path, doc.items)
                    if merge_items(doc.items, items) == doc.items:
                        self._cache.remember_writes(thread_id, ns, cid, task_id, known)
                        return None  # already stored (possibly by our own first attempt)
                if attempt:
                    yield Sleep(_backoff(self.layout, attempt))
                continue
            self._cache.remember_writes(thread_id, ns, cid, task_id, Folded(etag, path, merged))
            return None
        raise ConflictError(
            f"writes of task {task_id!r} on checkpoint {cid!r} lost {self.layout.max_attempts} "
            "compare-and-swap races in a row; another process keeps rewriting them"
        )

    # -- list ------------------------------------------------------------------------------------
    def _list_all(self, prefix: str) -> Plan[list[ObjectInfo]]:
        out: list[ObjectInfo] = []
        after = None
        while True:
            page = yield ListPage(prefix, start_after=after, max_keys=1000)
            out.extend(page.items)
            if not page.truncated or not page.items:
                return out
            after = page.items[-1].key

    def _plan_list(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Plan[None]:
        only_id = ns = None
        if config is not None:
            thread_id, ns, only_id = _target(config, "list")
        before_id = None
        if before is not None:
            before_id = ((before.get("configurable") or {}).get("checkpoint_id")) or None
        if limit is not None and limit <= 0:
            return None
        query = _ListQuery(only_id, filter, before_id, limit)
        if config is not None and ns is not None:
            yield from self._list_thread([keys.head_key(thread_id, ns)], query)
            return None
        # Head keys arrive thread by thread (keys are grouped by thread); each thread is listed as
        # soon as its last namespace is seen, so results stream without listing the whole store.
        prefix = keys.heads_prefix(thread_id if config is not None else None)
        group: list[str] = []
        after = None
        while True:
            page = yield ListPage(prefix, start_after=after, max_keys=1000)
            for info in page.items:
                if group and info.key.split("/")[1] != group[-1].split("/")[1]:
                    yield from self._list_thread(group, query)
                    if query.done:
                        return None
                    group = []
                group.append(info.key)
            if not page.truncated or not page.items:
                break
            after = page.items[-1].key
        if group:
            yield from self._list_thread(group, query)
        return None

    def _list_thread(self, group: list[str], query: _ListQuery) -> Plan[None]:
        """Emit one thread's matching checkpoints (heads ``group``), newest first across its
        namespaces. One round trip reads every head plus the first page of its writes."""
        ops: list[Any] = []
        for hk in group:
            ops += [Get(hk), ListPage(_writes_prefix_of_head(hk), max_keys=1000)]
        results = list((yield Batch(tuple(ops))))
        streams: list[tuple[_RecordStream, _WritesCursor]] = []
        for hk, obj, page in zip(group, results[0::2], results[1::2], strict=True):
            if obj is None:
                continue
            ids = _ids_of_head_key(hk)
            head = (self._cache.head_with_etag(*ids, obj.etag) if ids else None) or rec_io.decode_head(
                obj.body, key=obj.key
            )
            if keys.head_key(head.thread_id, head.checkpoint_ns) != hk:
                raise CorruptObjectError(hk, "head does not belong at this key (misplaced object)")
            self._cache.observe(head.thread_id, head.checkpoint_ns, head, obj.etag)
            if head.records:
                stream = _RecordStream(head.thread_id, head.checkpoint_ns, head, query.before_id)
                streams.append((stream, _WritesCursor(_writes_prefix_of_head(hk), page=page)))
        # k-way merge by checkpoint id, newest first, across the thread's namespaces
        heap: list[tuple[str, int]] = []
        for i, (stream, _c) in enumerate(streams):
            yield from self._fill(stream)
            if stream.items:
                heapq.heappush(heap, (_neg(stream.items[0][0].id), i))
        while heap:
            _, i = heapq.heappop(heap)
            stream, cursor = streams[i]
            rec, table = stream.items.popleft()
            yield from self._fill(stream)
            if stream.items:
                heapq.heappush(heap, (_neg(stream.items[0][0].id), i))
            if not query.wants(rec):
                continue
            # A filter is checked on the metadata readers get: a current record's as stored
            # (decoded before anything is fetched), an older one's after the same upgrade as its
            # values, since a step may derive metadata from them.
            current = rec.schema == self._schema
            if current and not query.accepts(self.serde.loads_typed(rec.metadata)):
                continue
            infos = yield from self._writes_for(cursor, rec.id)
            try:
                tup = yield from self._assemble(stream.thread_id, stream.ns, rec, table, infos)
            except _Vanished as gone:
                # Pruned while we listed? Then it is simply no longer part of the history.
                hkey = keys.head_key(stream.thread_id, stream.ns)
                fresh, _ = self._head_from((yield Get(hkey)), stream.thread_id, stream.ns)
                found = (
                    None
                    if fresh is None
                    else (yield from self._find_record(stream.thread_id, stream.ns, fresh, rec.id))
                )
                if found is None:
                    continue
                try:
                    tup = yield from self._assemble(stream.thread_id, stream.ns, found[0], found[1], infos)
                except _Vanished:
                    raise gone.corrupt() from None
            if not current and not query.accepts(tup.metadata):
                continue
            yield Emit(tup)
            query.emitted += 1
            if query.done:
                return None
        return None

    def _fill(self, stream: _RecordStream) -> Plan[None]:
        """Make sure ``stream.items`` is non-empty unless the namespace is exhausted."""
        while not stream.items and stream.segments:
            ref = stream.segments.popleft()
            seg = yield from self._load_segment(stream.thread_id, stream.ns, ref)
            if seg is None:
                fresh, _ = self._head_from(
                    (yield Get(keys.head_key(stream.thread_id, stream.ns))), stream.thread_id, stream.ns
                )
                if fresh is not None and ref in fresh.segments:
                    raise self._missing_segment(stream.thread_id, stream.ns, ref)
                # pruned meanwhile: continue below what we already passed, from the new manifest
                floor = ref.first_id
                stream.segments = deque(
                    s for s in (fresh.segments if fresh else ()) if s.first_id < floor and s not in stream.segments
                )
                continue
            stream.add_segment(seg)
        return None

    # -- delete_thread ---------------------------------------------------------------------------
    def _plan_delete_thread(self, thread_id: Any) -> Plan[None]:
        tid = keys.validate_thread_id(thread_id)
        root_key = keys.head_key(tid, "")
        for attempt in range(self.layout.max_attempts):
            heads = yield from self._list_all(keys.heads_prefix(tid))
            data = yield from self._list_all(keys.thread_data_prefix(tid))
            root, etag = (None, None)
            if any(i.key == root_key for i in heads):
                root, etag = self._head_from((yield Get(root_key)), tid, "")
            ownership = {k: v for k, v in (root.extra if root else {}).items() if k in _OWNERSHIP_KEYS}
            if ownership:
                # A leased session keeps its lease (released) and fencing epoch, so the next owner
                # gets a higher epoch and the old one's late writes stay refused. The tombstone
                # replaces the root head by compare-and-swap *first*: if anyone moved it meanwhile
                # (a write, an acquire), we start again instead of overwriting them.
                lease = dict(ownership.get(LEASE_KEY) or {})
                if lease:
                    lease.update(state="released", transfer=None)
                    ownership[LEASE_KEY] = lease
                tomb = rec_io.encode_head(
                    Head(tid, "", {}, {}, (), ownership), schema_version=self.layout.schema_version
                )
                try:
                    yield Put(root_key, tomb, if_match=etag)
                except (PreconditionFailedError, UnknownOutcomeError):
                    fresh, _ = self._head_from((yield Get(root_key)), tid, "")
                    if (
                        fresh is None
                        or fresh.records
                        or fresh.segments
                        or fresh.extra != Head(tid, "", {}, {}, (), ownership).extra
                    ):
                        yield Sleep(_backoff(self.layout, attempt))
                        continue
                heads = [i for i in heads if i.key != root_key]
            # Heads first: once they are gone the thread reads as empty even if we crash midway.
            if heads:
                yield DeleteMany(tuple(i.key for i in heads))
            if data:
                yield DeleteMany(tuple(i.key for i in data))
            self._cache.forget_thread(tid)
            return None
        raise ConflictError(
            f"thread {tid!r} kept changing while it was deleted ({self.layout.max_attempts} attempts); "
            "retry when it is idle"
        )

    # -- rewriting history: delete_for_runs and prune --------------------------------------------
    def _plan_load_namespace(self, thread_id: str, ns: str) -> Plan[tuple[Head | None, str | None, dict[str, Segment]]]:
        """The head and every sealed segment of a namespace, as one consistent snapshot. A
        segment that vanished was replaced by a concurrent rewrite: read the new head."""
        for _ in range(5):
            head, etag = self._head_from((yield Get(keys.head_key(thread_id, ns))), thread_id, ns)
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
                return head, etag, segments
        assert missing is not None
        raise self._missing_segment(thread_id, ns, missing)

    def _plan_rewrite_namespace(
        self,
        thread_id: str,
        ns: str,
        choose_drop: Callable[[dict[str, Record]], set[str]],
    ) -> Plan[int]:
        """Remove the records ``choose_drop`` picks from one namespace, crash-safely:

        1. write replacement segments (create-only);
        2. compare-and-swap the head to the new record set and segment manifest (retried on
           conflicts, so concurrent writers are never overwritten);
        3. delete what nothing references any more: replaced segments, the dropped checkpoints'
           writes and the blobs only they owned.

        A crash between steps leaves unreferenced objects, never a head that points at nothing.
        """
        for attempt in range(self.layout.max_attempts):
            head, etag, segments = yield from self._plan_load_namespace(thread_id, ns)
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
            schema = self.layout.schema_version
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
            new_head = Head(
                thread_id, ns, kept_head, payloads_for(kept_head.values(), table), tuple(new_refs), head.extra
            )
            for key, body in new_segments:
                yield Put(key, body)
            stacked = False
            try:
                new_etag = yield Put(
                    keys.head_key(thread_id, ns), rec_io.encode_head(new_head, schema_version=schema), if_match=etag
                )
            except (PreconditionFailedError, UnknownOutcomeError):
                fresh, fresh_etag = self._head_from((yield Get(keys.head_key(thread_id, ns))), thread_id, ns)
                mine = (
                    fresh is not None and fresh.segments == new_head.segments and set(fresh.records) == set(kept_head)
                )
                if mine or self._landed_under(fresh, new_head, new_segments, replaced, drop, thread_id, ns):
                    # Our swap landed unseen (perhaps with a writer's checkpoints, or a lease or
                    # migrate change, on top): done, and the garbage below must go (a deleted
                    # run's checkpoints must not linger). What is stored now, not what we
                    # computed, is what the cache keeps and what the collection keeps alive,
                    # including what a writer sealed since.
                    assert fresh is not None
                    sealed = yield from self._load_segments(thread_id, ns, [s for s in fresh.segments
                                                                          if s not in new_head.segments])  # fmt: skip
                    if sealed is None:  # replaced meanwhile: read it all again
                        yield Sleep(_backoff(self.layout, attempt))
                        continue
                    remaining += sealed
                    self._cache.observe(thread_id, ns, fresh, fresh_etag)
                    new_head, new_etag, stacked = fresh, fresh_etag, True
                else:
                    # Not ours: start over. Our new segments are orphans unless the head lists them.
                    listed = {keys.segment_key(thread_id, ns, r.key) for r in (fresh.segments if fresh else ())}
                    orphans = tuple(k for k, _ in new_segments if k not in listed)
                    if orphans:
                        yield DeleteMany(orphans)
                    yield Sleep(_backoff(self.layout, attempt))
                    continue
            if not stacked:
                self._cache.wrote(thread_id, ns, new_head, new_etag, used_empty_read=False)
            # Garbage: replaced segments, writes of dropped checkpoints, blobs only they owned.
            garbage = list(replaced)
            for info in (yield from self._list_all(keys.writes_prefix(thread_id, ns))):
                parsed = keys.parse_writes_key(info.key)
                if parsed is not None and parsed[0] in drop:
                    garbage.append(info.key)
            # a dropped checkpoint's blobs go unless what remains references them (by key: an owner
            # kept for one value may have others nothing uses any more)
            still = self._blob_keys(thread_id, ns, [(new_head.records, new_head.payloads), *remaining], may_spill=True)
            for info in (yield from self._list_all(keys.blobs_prefix(thread_id, ns))):
                if keys.parse_blob_key(info.key) in drop and info.key not in still:
                    garbage.append(info.key)
            if garbage:
                yield DeleteMany(tuple(garbage))
            return len(drop)
        raise ConflictError(
            f"could not rewrite thread {thread_id!r} namespace {ns!r}: writers kept moving it "
            f"({self.layout.max_attempts} attempts). Retry when the thread is idle."
        )

    def _blob_keys(
        self, tid: str, ns: str, parts: list[tuple[dict[str, Record], PayloadTable]], *, may_spill: bool = False
    ) -> set[str]:
        """Keys of the large values the records reference, and of the copies being spilled
        behind inline values. With ``may_spill``, also the key *every* inline value may be
        copied to: a writer may write that copy at any time (and remember it written, dropping
        its inline copy on its next put), so garbage collection must keep such a key while any
        record holds the value."""
        out = set()
        for recs, table in parts:
            for origin, chs in payloads_for(list(recs.values()), table).items():
                for p in chs.values():
                    if isinstance(p, BlobRef):
                        out.add(keys.blob_key(tid, ns, origin, p.digest))
                    elif p.spill or may_spill:
                        out.add(keys.blob_key(tid, ns, origin, p.spill or content_digest(p.data)))
        return out

    def _load_segments(
        self, thread_id: str, ns: str, refs: list[SegmentRef]
    ) -> Plan[list[tuple[dict[str, Record], PayloadTable]] | None]:
        """The records and payloads of ``refs``; None if one of them is gone."""
        out = []
        for ref in refs:
            seg = yield from self._load_segment(thread_id, ns, ref)
            if seg is None:
                return None
            out.append((seg.records, seg.payloads))
        return out

    def _landed_under(
        self,
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

    def _plan_heads_ids(self, prefix: str) -> Plan[list[tuple[str, str]]]:
        """``(thread_id, checkpoint_ns)`` of every head under ``prefix``. The ids are decoded from
        the keys; only a hashed (over-long) segment costs a GET of the head that stores the id."""
        infos = yield from self._list_all(prefix)
        decoded = [_ids_of_head_key(i.key) for i in infos]
        hashed = [i.key for i, ids in zip(infos, decoded, strict=True) if ids is None]
        found: dict[str, tuple[str, str]] = {}
        if hashed:
            for obj in (yield Batch(tuple(Get(k) for k in hashed))):
                if obj is not None:
                    head = rec_io.decode_head(obj.body, key=obj.key)
                    found[obj.key] = (head.thread_id, head.checkpoint_ns)
        return [ids or found[i.key] for i, ids in zip(infos, decoded, strict=True) if ids or i.key in found]

    def _plan_namespaces(self, thread_id: str) -> Plan[list[str]]:
        """Every namespace of a thread."""
        return [ns for _t, ns in (yield from self._plan_heads_ids(keys.heads_prefix(thread_id)))]

    def _plan_delete_for_runs(self, run_ids: Sequence[str]) -> Plan[None]:
        wanted = {str(r) for r in run_ids}
        if not wanted:
            return None

        def choose(records: dict[str, Record]) -> set[str]:
            return {i for i, r in records.items() if self.serde.loads_typed(r.metadata).get("run_id") in wanted}

        scanned = removed = 0
        for thread_id, ns in (yield from self._plan_heads_ids(keys.heads_prefix())):
            removed += yield from self._plan_rewrite_namespace(thread_id, ns, choose)
            scanned += 1
            if scanned % _PROGRESS_EVERY == 0:
                log.info("delete_for_runs: %d namespaces scanned, %d checkpoints removed so far", scanned, removed)
        log.info("delete_for_runs: done; %d namespaces scanned, %d checkpoints removed", scanned, removed)
        return None

    def _plan_prune(self, thread_ids: Sequence[str], strategy: str) -> Plan[None]:
        if isinstance(thread_ids, str):
            raise TypeError("prune takes a sequence of thread ids, not a single string; wrap it in a list")
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        for done, raw in enumerate(thread_ids, 1):
            tid = keys.validate_thread_id(raw)
            if strategy == "delete":
                yield from self._plan_delete_thread(tid)
            else:
                removed = 0
                for ns in (yield from self._plan_namespaces(tid)):
                    removed += yield from self._plan_rewrite_namespace(tid, ns, self._keep_latest_drop)
                log.debug("prune: thread %r: %d checkpoints removed", tid, removed)
            if done % _PROGRESS_EVERY == 0:
                log.info("prune(%s): %d of %d threads done", strategy, done, len(thread_ids))
        return None

    def _keep_latest_drop(self, records: dict[str, Record]) -> set[str]:
        """Everything but the latest checkpoint, except the ancestors a DeltaChannel still needs:
        from the latest back to (and including) the nearest one holding a value for each delta
        channel the latest stores no value for (the history ``get_delta_channel_history`` walks)."""
        if not records:
            return set()
        latest = records[max(records)]
        keep = {latest.id}
        counters = self.serde.loads_typed(latest.metadata).get("counters_since_delta_snapshot") or {}
        need = {ch for ch in counters if ch not in latest.values}
        cur = latest.parent
        while need and cur is not None and cur in records:
            rec = records[cur]
            keep.add(cur)
            need -= set(rec.values)
            cur = rec.parent
        return set(records) - keep

    # -- copy_thread -----------------------------------------------------------------------------
    def _plan_copy_thread(self, source_thread_id: Any, target_thread_id: Any) -> Plan[None]:
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
        owned: dict[str, dict[str, Any]] = {}  # dst namespace -> its own lease and fence (kept)
        for info in (yield from self._list_all(keys.heads_prefix(dst))):
            obj = yield Get(info.key)
            if obj is None:
                continue
            head = rec_io.decode_head(obj.body, key=obj.key)
            if head.records or head.segments:
                raise ThreadExistsError(dst)
            emptied[head.checkpoint_ns] = obj.etag
            owned[head.checkpoint_ns] = {k: v for k, v in head.extra.items() if k in _OWNERSHIP_KEYS}
        heads: list[tuple[str, bytes]] = []
        for ns in (yield from self._plan_namespaces(src)):
            for attempt in range(self.layout.max_attempts):
                try:
                    body = yield from self._copy_namespace(src, dst, ns, owned.get(ns, {}))
                    break
                except _Vanished:
                    yield Sleep(_backoff(self.layout, attempt))
            else:
                raise ConflictError(
                    f"thread {src!r} namespace {ns!r} kept changing while it was copied "
                    f"({self.layout.max_attempts} attempts); retry when it is idle"
                )
            if body is not None:
                heads.append((ns, body))
        for ns, body in heads:
            key = keys.head_key(dst, ns)
            etag = emptied.get(ns)
            try:
                yield Put(key, body, if_match=etag) if etag else Put(key, body, if_none_match=True)
            except (PreconditionFailedError, UnknownOutcomeError):
                obj = yield Get(key)
                if obj is None or obj.body != body:
                    raise ThreadExistsError(dst) from None  # someone wrote to the target meanwhile
        self._cache.forget_thread(dst)
        log.info("copy_thread: %r -> %r, %d namespaces", src, dst, len(heads))
        return None

    def _copy_namespace(self, src: str, dst: str, ns: str, ownership: dict[str, Any]) -> Plan[bytes | None]:
        """Write one namespace's data objects under ``dst``; return its head, re-encoded for
        ``dst`` (None if the namespace vanished). Raises _Vanished if the source moved."""
        head, _etag, segments = yield from self._plan_load_namespace(src, ns)
        if head is None:
            return None
        schema = self.layout.schema_version
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
        blob_refs = {
            (origin, payload.digest)
            for recs, table in tables
            for origin, chs in payloads_for(list(recs), table).items()
            for payload in chs.values()
            if isinstance(payload, BlobRef)
        }
        blob_keys = [(keys.blob_key(src, ns, o, d), keys.blob_key(dst, ns, o, d)) for o, d in sorted(blob_refs)]
        for chunk in _chunks(blob_keys, 64):
            for (from_key, to_key), obj in zip(chunk, (yield Batch(tuple(Get(k) for k, _ in chunk))), strict=True):
                if obj is None:
                    raise _Vanished(from_key, "")
                puts.append(Put(to_key, obj.body))
        wdocs = [i.key for i in (yield from self._list_all(keys.writes_prefix(src, ns)))]
        for chunk in _chunks(wdocs, 64):
            for key, obj in zip(chunk, (yield Batch(tuple(Get(k) for k in chunk))), strict=True):
                if obj is None:
                    raise _Vanished(key, "")
                doc = rec_io.decode_writes(obj.body, key=obj.key)
                to_key = keys.writes_key(dst, ns, doc.checkpoint_id, doc.task_id)
                puts.append(Put(to_key, rec_io.encode_writes(replace(doc, thread_id=dst), schema_version=schema)))
        for chunk in _chunks(puts, 64):
            yield Batch(tuple(chunk))
        # Folded writes keep the source's ETags; the re-encoded documents have new ones, so readers
        # of the copy simply fetch them once.
        # a session's lease and fencing epoch belong to its thread: the copy gets none of the
        # source's, and keeps the target's own if it had one
        extra = restamp({k: v for k, v in head.extra.items() if k not in _OWNERSHIP_KEYS}, self.ttl, self._clock())
        extra |= ownership
        return rec_io.encode_head(replace(head, thread_id=dst, extra=extra), schema_version=schema)

    # -- get_delta_channel_history ---------------------------------------------------------------
    def _delta_refusal(self, thread_id: str, rec: Record) -> MigrationError:
        return MigrationError(
            f"checkpoint {rec.id} of thread {thread_id!r} is in state schema {rec.schema} and is part of a "
            f"DeltaChannel history, which lazy reads do not migrate (code is at schema {self._schema}). "
            "Nothing was loaded; rewrite the thread with `langgraph-handoff migrate` (or "
            "ObjectStoreSaver.migrate_thread) and it reads normally."
        )

    def _plan_delta_history(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Plan[dict[str, DeltaChannelHistory]]:
        for _ in range(3):
            try:
                return (yield from self._delta_history_once(config, channels))
            except _Vanished as gone:
                vanished = gone
        raise vanished.corrupt()

    def _delta_history_once(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Plan[dict[str, DeltaChannelHistory]]:
        if not channels:
            return {}
        thread_id, ns_or_none, cid = _target(config, "get_delta_channel_history")
        ns = ns_or_none or ""
        result: dict[str, DeltaChannelHistory] = {ch: {"writes": []} for ch in channels}
        hkey = keys.head_key(thread_id, ns)
        head, _ = self._head_from((yield Get(hkey)), thread_id, ns)
        if head is None or not head.records:
            return result
        target_id = cid if cid is not None else head.latest_id
        if target_id is None or not keys.is_checkpoint_id(target_id):
            return result
        found = yield from self._find_record(thread_id, ns, head, target_id)
        if found is None:
            return result
        target, _, head = found
        if target.schema != self._schema:
            raise self._delta_refusal(thread_id, target)
        # Ancestors have smaller ids: list writes strictly below the target's own.
        wprefix = keys.writes_prefix(thread_id, ns)
        cursor = _WritesCursor(wprefix, start_after=wprefix + keys.invert_checkpoint_id(target_id) + "/~~")
        remaining = set(channels)
        collected: dict[str, list[tuple[str, str, Any]]] = {ch: [] for ch in channels}
        cur = target.parent
        while cur is not None and remaining and keys.is_checkpoint_id(cur):
            found = yield from self._find_record(thread_id, ns, head, cur)
            if found is None:
                break
            rec, table, head = found
            if rec.schema != self._schema:
                # its stored value would seed the history unmigrated (a thread read lazily, then
                # written once by new code): refuse rather than undo the steps silently
                raise self._delta_refusal(thread_id, rec)
            infos = yield from self._writes_for(cursor, rec.id)
            seeds = [ch for ch in remaining if ch in rec.values]
            tasks, seed_values = yield from self._fetch(thread_id, ns, rec, table, infos, seeds)
            pending = sorted_pending(tasks, self.serde.loads_typed)
            for write in reversed(pending):
                if write[1] in remaining:
                    collected[write[1]].append(write)
            for ch in seeds:
                result[ch]["seed"] = seed_values[ch]
                remaining.discard(ch)
            cur = rec.parent
        for ch in channels:
            result[ch]["writes"] = list(reversed(collected[ch]))
        return result


def _ids_of_head_key(head_key: str) -> tuple[str, str] | None:
    """``heads/{T}/{N}`` -> (thread id, namespace), or None if a segment is hashed."""
    _, t, n = head_key.split("/")
    thread_id, ns = keys.decode_segment(t), keys.decode_segment(n)
    return None if thread_id is None or ns is None else (thread_id, ns)


def _writes_prefix_of_head(head_key: str) -> str:
    """``heads/{T}/{N}`` -> ``data/{T}/{N}/w/`` (no decoding needed, so it can be batched)."""
    return "data/" + head_key[len("heads/") :] + "/w/"


def _neg(checkpoint_id: str) -> str:
    """A key that sorts checkpoint ids descending in a min-heap."""
    return checkpoint_id.translate(str.maketrans("0123456789abcdef", "fedcba9876543210"))


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
