"""Reading: ``get_tuple``, and the pieces every other reader builds on.

The latest checkpoint costs one round trip: the head GET and the first page of its writes LIST go
out together (in a local directory, where that saves no round trip, a read that wants only the
latest's own writes reads the head first and then lists those alone). A record is found in the
head or in the sealed segment whose id range covers it; its values come from the head (inline)
or from blobs, its pending writes from the copies folded into the record when the listing shows
the same ETag, else from the writes documents themselves.
A value that vanished under a concurrent prune sends the reader back to a fresh head
(:class:`~.state.Vanished`); one still missing then is real damage.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_handoff._format import keys, tails
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._frozen import fast_replace
from langgraph_handoff.checkpoint.cache import MISS
from langgraph_handoff.checkpoint.driver import Batch, Plan
from langgraph_handoff.checkpoint.plans import manifest, upgrading
from langgraph_handoff.checkpoint.plans.state import SaverState, Vanished, made_by_run, target_of, tuple_config
from langgraph_handoff.checkpoint.ttl import restamp, wants_refresh
from langgraph_handoff.checkpoint.writes import sorted_pending
from langgraph_handoff.errors import (
    CorruptObjectError,
    LangGraphHandoffError,
    PreconditionFailedError,
    UndecodableValueError,
    UnknownOutcomeError,
)
from langgraph_handoff.stores.base import Get, ListPage, ListResult, ObjectInfo, Put, StoredObject

#: a record's pending writes as :func:`fetch` returns them: (task id, task path, items) per task
Tasks = list[tuple[str, str, Iterable[rec_io.WriteItem]]]


#: keys in a writes listing page after the first (S3's maximum)
WRITES_PAGE = 1000
#: the first page of a latest-checkpoint read that wants only the latest's own writes, on a
#: store that lists in process (``StoreBase.lists_in_process``) without scanning directories
#: (``memory://``): ``get_state``, and a run's read while no run of this saver walked a
#: ``DeltaChannel`` history. A finished run's latest has none or a few writes; more (an
#: interrupted fan-out) cost one more LIST, which there is no round trip. On a network store a
#: LIST is a round trip, so reads keep ``Layout.writes_page``; a local directory lists the
#: latest's own writes alone (``StoreBase.lists_scan_directories``).
READ_WRITES_PAGE = 16


class WritesCursor:
    """Walks a namespace's writes listing newest checkpoint first (keys hold inverted ids).

    ``first_page``: how many keys the first LIST asks for, when a caller knows roughly how many
    it will consume; later pages ask for :data:`WRITES_PAGE`. A page cut short only costs one
    more LIST; a page much longer than needed costs the server and the client a long listing on
    every call (see ``listing._delta_history_once``).
    """

    def __init__(
        self,
        prefix: str,
        start_after: str | None = None,
        page: ListResult | None = None,
        *,
        first_page: int = WRITES_PAGE,
    ):
        self.prefix = prefix
        self.after = start_after
        self.buf: deque[tuple[str, ObjectInfo]] = deque()
        self.done = False
        self.page_size = max(1, min(first_page, WRITES_PAGE))
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
        self.page_size = WRITES_PAGE

    def need_more(self, checkpoint_id: str) -> bool:
        return not self.done and (not self.buf or self.buf[-1][0] >= checkpoint_id)

    def take(self, checkpoint_id: str) -> list[ObjectInfo]:
        while self.buf and self.buf[0][0] > checkpoint_id:
            self.buf.popleft()
        out = []
        while self.buf and self.buf[0][0] == checkpoint_id:
            out.append(self.buf.popleft()[1])
        return out


def head_from(
    saver: SaverState, obj: StoredObject | None, thread_id: str, ns: str
) -> tuple[rec_io.Head | None, str | None]:
    if obj is None:
        return None, None
    head = saver._cache.head_with_etag(thread_id, ns, obj.etag) or rec_io.decode_head(obj.body, key=obj.key)
    if head.thread_id != thread_id or head.checkpoint_ns != ns:
        raise CorruptObjectError(
            obj.key,
            f"head belongs to thread {head.thread_id!r} namespace {head.checkpoint_ns!r}, "
            f"not {thread_id!r} {ns!r} (misplaced object)",
            "misplaced",
        )
    return head, obj.etag


def load_segment(saver: SaverState, thread_id: str, ns: str, ref: rec_io.SegmentRef) -> Plan[rec_io.Segment | None]:
    """The sealed segment ``ref`` names: from the saver's segment cache when this process
    decoded it before (segments never change), else one GET."""
    key = keys.segment_key(thread_id, ns, ref.key)
    cached = saver._cache.immutable.segment(key)
    if cached is not None:
        return cached
    obj = yield Get(key)
    if obj is None:
        return None
    segment = rec_io.decode_segment(obj.body, key=key)
    saver._cache.immutable.put(key, segment)
    return segment


def missing_segment(saver: SaverState, thread_id: str, ns: str, ref: rec_io.SegmentRef) -> CorruptObjectError:
    return CorruptObjectError(
        keys.segment_key(thread_id, ns, ref.key),
        "the head lists this history segment but it is missing",
        "missing",
    )


def find_record(
    saver: SaverState, thread_id: str, ns: str, head: rec_io.Head, checkpoint_id: str
) -> Plan[tuple[rec_io.Record, rec_io.PayloadTable, rec_io.Head] | None]:
    """Locate a checkpoint in the head or the segment whose id range covers it (the head's
    archive is read only for a checkpoint older than the segments the head itself lists). A
    segment or archive deleted by a concurrent prune or fold sends us back to a fresh head (at
    most a few times)."""
    found = yield from find_container(saver, thread_id, ns, head, checkpoint_id)
    if found is None:
        return None
    records, table, head = found
    return records[checkpoint_id], table, head


def find_container(
    saver: SaverState, thread_id: str, ns: str, head: rec_io.Head, checkpoint_id: str
) -> Plan[tuple[Mapping[str, rec_io.Record], rec_io.PayloadTable, rec_io.Head] | None]:
    """:func:`find_record`, answering with every record of the head or segment that holds the
    checkpoint (and their payload table): a walk down a parent chain finds the next ancestors
    there with one dict lookup each, instead of searching the segment list, the archive and the
    segment cache again for every one of them."""
    for _ in range(3):
        if checkpoint_id in head.records:
            return head.records, head.payloads, head
        refs = [s for s in head.segments if s.covers(checkpoint_id)]
        if not refs and head.archive is not None and head.archive.covers(checkpoint_id):
            archive = yield from manifest.load_archive(saver, thread_id, ns, head.archive)
            if archive is None:
                fresh, _etag = head_from(saver, (yield Get(keys.head_key(thread_id, ns))), thread_id, ns)
                if fresh is None:
                    return None
                if fresh.archive == head.archive:
                    raise manifest.missing_archive(thread_id, ns, head.archive)
                head = fresh
                continue
            refs = archive.covering(checkpoint_id)
        if not refs:
            return None
        missing = None
        for ref in refs:
            seg = yield from load_segment(saver, thread_id, ns, ref)
            if seg is None:
                missing = ref
                continue
            if checkpoint_id in seg.records:
                return seg.records, seg.payloads, head
        if missing is None:
            return None
        fresh, _etag = head_from(saver, (yield Get(keys.head_key(thread_id, ns))), thread_id, ns)
        if fresh is None:
            return None
        listed = yield from manifest.plan_refs(saver, thread_id, ns, fresh)
        if listed is None or missing not in listed:
            head = fresh
            continue
        raise missing_segment(saver, thread_id, ns, missing)
    return None


def writes_for(saver: SaverState, cursor: WritesCursor, checkpoint_id: str) -> Plan[list[ObjectInfo]]:
    while cursor.need_more(checkpoint_id):
        cursor.feed((yield ListPage(cursor.prefix, start_after=cursor.after, max_keys=cursor.page_size)))
    return cursor.take(checkpoint_id)


@contextmanager
def user_data(key: str, what: str) -> Iterator[None]:
    """Decoding of the user's own values (by ``saver.serde``) in this block fails only with a
    typed error: anything the serializer raises on stored bytes (a msgpack error, a
    ``RecursionError`` on nesting deeper than Python's stack, an ext type that does not build)
    is an :class:`~langgraph_handoff.errors.UndecodableValueError` (a ``CorruptObjectError``,
    so walks report it and go on) naming ``key``, with the serializer's exception chained. Bytes
    under a valid checksum that the serializer cannot read were written by someone else, or by a
    serializer configured otherwise (a wrong encryption key: the chained cause says which)."""
    try:
        yield
    except LangGraphHandoffError:
        raise
    except Exception as exc:
        raise UndecodableValueError(key, what, exc) from exc


def decode_writes_doc(
    saver: SaverState, obj: StoredObject, thread_id: str, ns: str, checkpoint_id: str
) -> rec_io.WritesDoc:
    doc = rec_io.decode_writes(obj.body, key=obj.key)
    if (doc.thread_id, doc.checkpoint_ns, doc.checkpoint_id) != (thread_id, ns, checkpoint_id):
        raise CorruptObjectError(
            obj.key, "writes document belongs to another checkpoint (misplaced object)", "misplaced"
        )
    return doc


def _value(saver: SaverState, payload: rec_io.Payload, blobs: Mapping[str, bytes], blob_keys: list[str]) -> Any:
    """The value a payload stores, from the blobs it needs (``blob_keys``, as
    :func:`~.records.blob_refs` names them, already fetched into ``blobs``)."""
    if isinstance(payload, rec_io.Inline):
        return saver.serde.loads_typed((payload.type, payload.data))
    if isinstance(payload, rec_io.Tail):
        base = check_part(blob_keys[0], blobs[blob_keys[0]], payload.base_size, base=True)
        value = _tail_over_copy(saver, payload, base, blob_keys[0])
        if value is not MISS:
            return value
        return saver.serde.loads_typed((payload.type, tails.joined(base, payload.count, payload.data)))
    if isinstance(payload, rec_io.Pieces):
        base, *added = (
            check_part(key, blobs[key], part.size, base=i == 0)
            for i, (key, part) in enumerate(zip(blob_keys, payload.parts, strict=True))
        )
        return saver.serde.loads_typed((payload.type, tails.joined(base, payload.parts[-1].count, *added)))
    return saver.serde.loads_typed((payload.type, blobs[blob_keys[0]]))


def _tail_over_copy(saver: SaverState, payload: rec_io.Tail, base: bytes, base_key: str) -> Any:
    """A tail's value as a copy of its base's decoded list (:meth:`ImmutableCache.value_copy`,
    kept the first time) extended by its own items, decoded alone; :data:`MISS` where that is
    not known to equal decoding the joined bytes: a serializer other than LangGraph's own
    ``JsonPlusSerializer.loads_typed`` with its own ext hook (msgpack decodes an array's items
    one by one, with no state across them), a base in an ext frame or of another length than
    the tail was written over, or anything that does not decode to lists.

    Why: a plain ``add_messages`` list is a tail over a base of up to 16 times its size, and
    every read decoded the whole list, base included: on a 2,000-message thread, every
    ``get_state`` and every run's first read. A copy costs about half of a decode."""
    serde = saver.serde
    if (
        payload.type != "msgpack"
        or getattr(type(serde), "loads_typed", None) is not _JSONPLUS_LOADS
        or getattr(serde, "_custom_unpack_ext_hook", True)  # a hook of the user's may keep state
    ):
        return MISS
    frame = tails.framing(base)
    if frame is None or frame[0] is not None or frame[1] != payload.base_count or payload.count <= frame[1]:
        return MISS
    # the base blob's decoded value, under the key a value stored whole in that blob has
    value = saver._cache.immutable.copy_or_decode(
        _value_key(saver, payload, [base_key]), lambda: serde.loads_typed((payload.type, base))
    )
    if not isinstance(value, list):
        return MISS
    added = serde.loads_typed((payload.type, tails.header_bytes(payload.count - frame[1]) + payload.data))
    if not isinstance(added, list) or len(value) + len(added) != payload.count:
        return MISS
    value.extend(added)
    return value


def _value_key(saver: SaverState, payload: rec_io.Payload, blob_keys: list[str]) -> tuple[Any, ...]:
    """What a value decoded only from blobs depends on: the serializer (its allow-list decides
    what decodes), the payload's type and its blobs, which never change under their keys."""
    return (saver._cache.immutable.serializer_tag(saver.serde), payload.type, *blob_keys)


#: LangGraph's own decoder: a tail's items decode alone as they do in the joined list
_JSONPLUS_LOADS = JsonPlusSerializer.loads_typed

#: a written value shorter than this is decoded every time: a cached copy would cost about as much
_WRITE_COPY_MIN = 256


def write_loader(saver: SaverState) -> Callable[[tuple[str, bytes]], Any]:
    """``serde.loads_typed`` for pending writes that a ``DeltaChannel`` walk decodes on every
    turn: each ancestor's writes since the last snapshot, the same bytes turn after turn. A value
    decoded once is kept in the immutable cache, under the serializer and the very bytes it was
    decoded from, and read back as a copy of its own (:meth:`ImmutableCache.value_copy`: about
    half the CPU of decoding a message again, and a node that changes it changes only its copy).

    With a snapshot every 1,000, the walk decodes about a thousand messages a turn at turn 1,000
    of the long-threads bench, a third of the turn on ``memory://`` (2026-12-03)."""
    loads, cache = saver.serde.loads_typed, saver._cache.immutable
    tag = cache.serializer_tag(saver.serde)

    def load(typed: tuple[str, bytes]) -> Any:
        data = typed[1]
        if type(data) is not bytes or len(data) < _WRITE_COPY_MIN:
            return loads(typed)  # (a write this process made may hold a bytearray: not a key)
        return cache.copy_or_decode((tag, "write", *typed), lambda: loads(typed))

    return load


def part_sizes(payload: rec_io.Payload) -> tuple[tuple[int, bool], ...]:
    """For each blob :func:`~.records.blob_refs` names for ``payload``: the size its checkpoint
    recorded and whether it is a base (a whole list); nothing for a value stored whole in a
    blob, whose size is not checked."""
    if isinstance(payload, rec_io.Tail):
        return ((payload.base_size, True),)
    if isinstance(payload, rec_io.Pieces):
        return tuple((part.size, i == 0) for i, part in enumerate(payload.parts))
    return ()


def check_part(key: str, data: bytes, size: int, *, base: bool) -> bytes:
    """``data``, the blob ``key`` that a tail or pieces were written over (``base``: the list
    they extend) or that pieces add, checked to be what they were written over. A read and
    ``verify`` both check with this, so that what one refuses the other reports."""
    if base and (len(data) != size or tails.framing(data) is None):
        raise CorruptObjectError(
            key, f"the base of a stored value is {len(data)} bytes, not the list of {size} bytes its tail "
            "was written over", "malformed",
        )  # fmt: skip
    if len(data) != size:
        raise CorruptObjectError(
            key, f"a piece of a stored value is {len(data)} bytes, not the {size} its checkpoint recorded", "malformed"
        )
    return data


def folded_tasks(
    saver: SaverState, thread_id: str, ns: str, rec: rec_io.Record, infos: Sequence[ObjectInfo]
) -> tuple[Tasks, list[str]]:
    """The tasks of ``rec``'s listed writes documents (``infos``) whose copy folded into the
    record has the listed ETag, and the keys of the others (to fetch).

    A ``DeltaChannel`` walk asks this of every ancestor on every turn, so the common case goes
    first: a task id that is its own key segment (LangGraph's are UUIDs), found in the record
    by that segment, with no map of every task's segment built (:func:`keys.encode_segment` is
    injective, so the segment names that task and no other)."""
    tasks: Tasks = []
    want: list[str] = []
    if not infos:
        return tasks, want
    writes = rec.writes
    by_segment: dict[str, str] | None = None
    for info in infos:
        segment = info.key.rpartition("/")[2]
        task: str | None = segment
        folded = writes.get(segment)
        if folded is None or keys.encode_segment(segment) != segment:
            if by_segment is None:
                by_segment = {keys.encode_segment(t): t for t in writes}
            task = by_segment.get(segment)
            folded = writes.get(task) if task is not None else None
        if task is not None and folded is not None and folded.etag == info.etag:
            tasks.append((task, folded.task_path, upgrading.current_items(saver, thread_id, ns, rec, folded.items)))
        else:
            want.append(info.key)
    return tasks, want


def fetch(
    saver: SaverState,
    thread_id: str,
    ns: str,
    rec: rec_io.Record,
    table: rec_io.PayloadTable,
    infos: Sequence[ObjectInfo],
    channels: Iterable[str],
    folded: tuple[Tasks, list[str]] | None = None,
) -> Plan[tuple[Tasks, dict[str, Any]]]:
    """A record's writes documents (listed in ``infos``) and the values of ``channels``,
    fetching in one round trip only what the head does not already hold.

    Folded writes are used when the listing shows the same ETag; the listing is the truth
    about which documents exist. ``folded``: :func:`folded_tasks` of the same arguments, when
    the caller already has it (a ``DeltaChannel`` walk calls this only for the records that
    need a fetch).
    """
    tasks, want = folded if folded is not None else folded_tasks(saver, thread_id, ns, rec, infos)
    channels = list(channels)
    # A value stored only in blobs (a large value, a DeltaChannel snapshot) that this process
    # decoded before comes from the immutable cache as a copy: its blobs are not even fetched.
    values: dict[str, Any] = {}
    #: channel -> (payload, blob keys, the key of its decoded copy if it is stored only in blobs)
    wanted: dict[str, tuple[rec_io.Payload, list[str], tuple[Any, ...] | None]] = {}
    for ch in channels:
        origin, _v = rec.values[ch]
        payload = table.get(origin, {}).get(ch)
        if payload is None:
            raise CorruptObjectError(
                keys.head_key(thread_id, ns), f"checkpoint {rec.id!r} references a missing value of {ch!r}", "missing"
            )
        refs = [keys.blob_key(thread_id, ns, *ref) for ref in rec_io.blob_refs(origin, payload)]
        memo = _value_key(saver, payload, refs) if isinstance(payload, (rec_io.BlobRef, rec_io.Pieces)) else None
        if memo is not None:
            copy = saver._cache.immutable.value_copy(memo)
            if copy is not MISS:
                values[ch] = copy
                continue
        wanted[ch] = (payload, refs, memo)
    blobs: dict[str, bytes] = {}
    blob_keys = []
    for key in dict.fromkeys(k for _p, refs, _m in wanted.values() for k in refs):  # tails may share a base
        cached = saver._cache.immutable.blob(key)  # content-addressed: never another value
        if cached is None:
            blob_keys.append(key)
        else:
            blobs[key] = cached
    ops = tuple(Get(k) for k in [*want, *blob_keys])
    results = list((yield Batch(ops))) if ops else []
    for obj in results[: len(want)]:
        if obj is None:
            continue  # deleted between LIST and GET
        doc = decode_writes_doc(saver, obj, thread_id, ns, rec.id)
        tasks.append((doc.task_id, doc.task_path, upgrading.current_items(saver, thread_id, ns, rec, doc.items)))
        saver._cache.remember_writes(
            thread_id, ns, rec.id, doc.task_id, rec_io.Folded(obj.etag, doc.task_path, doc.items)
        )
    for key, obj in zip(blob_keys, results[len(want) :], strict=True):
        if obj is None:
            raise Vanished(key, rec.id)
        blobs[key] = rec_io.decode_blob(obj.body, key=key)
        saver._cache.immutable.put(key, blobs[key])
    for ch, (payload, refs, memo) in wanted.items():
        with user_data(
            refs[0] if refs else keys.head_key(thread_id, ns), f"the value of {ch!r} in checkpoint {rec.id!r}"
        ):
            values[ch] = _value(saver, payload, blobs, refs)
        if memo is not None:
            saver._cache.immutable.keep_value(memo, values[ch])
    return tasks, {ch: values[ch] for ch in channels}


def checkpoint_tuple(
    saver: SaverState, thread_id: str, ns: str, rec: rec_io.Record, tasks: Tasks, values: dict[str, Any]
) -> CheckpointTuple:
    """The tuple LangGraph gets for ``rec``, from what :func:`fetch` read for all its channels
    (upgraded when it was written under an older state schema)."""
    with user_data(keys.head_key(thread_id, ns), f"checkpoint {rec.id!r}"):
        checkpoint = saver.serde.loads_typed(rec.checkpoint)
        checkpoint["channel_values"] = values
        metadata = saver.serde.loads_typed(rec.metadata)
        pending = sorted_pending(tasks, saver.serde.loads_typed)
    if rec.schema != saver._schema:
        checkpoint, metadata = upgrading.upgrade_checkpoint(saver, thread_id, ns, rec, checkpoint, metadata)
    return CheckpointTuple(
        config=tuple_config(thread_id, ns, rec.id),
        checkpoint=checkpoint,
        metadata=metadata,
        parent_config=tuple_config(thread_id, ns, rec.parent) if rec.parent else None,
        pending_writes=pending,
    )


def plan_get_tuple(saver: SaverState, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
    """Read once more from a fresh head if a referenced value vanished under a concurrent
    prune; a value still missing then is real damage."""
    for _ in range(3):
        try:
            return (yield from _get_tuple_once(saver, config))
        except Vanished as gone:
            vanished = gone
    raise vanished.corrupt()


def _get_tuple_once(saver: SaverState, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
    thread_id, ns_or_none, cid = target_of(config, "get_tuple")
    ns = ns_or_none or ""
    if cid is not None and not keys.is_checkpoint_id(cid):
        return None  # no stored checkpoint can have this id
    hkey = keys.head_key(thread_id, ns)
    wprefix = keys.writes_prefix(thread_id, ns, cid)
    own_only = False  # the head first, then the latest's own writes (see below)
    if cid is not None:
        page_size = WRITES_PAGE  # the listing starts at that checkpoint's own writes
    elif made_by_run(config) and saver._cache.delta_runs:
        # the run's delta history goes on from this page: as long as the last walk here wanted
        page_size = max(saver.layout.writes_page, min(WRITES_PAGE, saver._cache.get(thread_id, ns).walk_keys))
    elif not saver.store.lists_in_process:
        page_size = saver.layout.writes_page  # a round trip saved
    elif saver.store.lists_scan_directories:
        # A read that wants only the latest's own writes, in a local directory: a page of the
        # namespace beside the GET saved no round trip and walked into older checkpoints'
        # writes (a finished run's latest has none or a few), a directory scan and two ``stat``
        # calls a key, and a read and a hash of every file of the last moments: on a plain
        # list, 96 ``stat``, 36 ``getdents`` and 61 ``open`` calls a turn, 12, 0 and 28 now
        # (long-threads bench, turns 41-50, 2026-12-04).
        own_only = True
    else:
        page_size = min(saver.layout.writes_page, READ_WRITES_PAGE)
    mark = saver._cache.listing_mark()  # before the LIST: see HeadCache.keep_listing
    if own_only:
        head_obj, page = (yield Get(hkey)), None
    else:
        head_obj, page = yield Batch((Get(hkey), ListPage(wprefix, max_keys=page_size)))
    head, etag = head_from(saver, head_obj, thread_id, ns)
    empty = head is None or not head.records
    saver._cache.observe(thread_id, ns, head, etag, empty_read=cid is None and empty)
    if head is None or empty:
        return None
    if saver.ttl is not None and saver.ttl.refresh_on_read and not made_by_run(config):
        # A run's own read is not refreshed: the run's put re-stamps the head anyway, and a
        # refresh would be a second write of the same object right before it (GCS throttles
        # that: one write per object name per second).
        head, etag = yield from _plan_refresh(saver, thread_id, ns, head, etag)
    if cid is None:
        rec, table = head.latest, head.payloads
        assert rec is not None
    else:
        found = yield from find_record(saver, thread_id, ns, head, cid)
        if found is None:
            return None
        rec, table, _ = found
        if cid != head.latest_id and made_by_run(config):
            # A LangGraph run addressed at a superseded checkpoint: time travel. Its first put
            # may branch from here (fencing), unlike a run that lost a race for the latest.
            saver._cache.note_branch_point(thread_id, ns, cid)
    if page is None:  # (own_only) the head named the latest: list its writes alone
        wprefix = keys.writes_prefix(thread_id, ns, rec.id)
        page = yield ListPage(wprefix, max_keys=WRITES_PAGE)
    infos = yield from writes_for(saver, WritesCursor(wprefix, page=page), rec.id)
    tasks, values = yield from fetch(saver, thread_id, ns, rec, table, infos, rec.values)
    if cid is None and etag is not None and made_by_run(config) and not own_only:
        saver._cache.keep_listing(thread_id, ns, etag, rec.id, page, mark)  # for the run's delta history
    return checkpoint_tuple(saver, thread_id, ns, rec, tasks, values)


def _plan_refresh(
    saver: SaverState, thread_id: str, ns: str, head: rec_io.Head, etag: str | None
) -> Plan[tuple[rec_io.Head, str | None]]:
    """``refresh_on_read``: re-stamp a head just read, by compare-and-swap, when its stamp is
    older than ``ttl.REFRESH_AFTER`` of the TTL (so at most one PUT per namespace per tenth of
    the TTL). A lost or unsettled swap is dropped: whoever moved the head was active too."""
    assert saver.ttl is not None
    now = saver._clock()
    if etag is None or not wants_refresh(head.meta, saver.ttl, now):
        return head, etag
    fresh = fast_replace(head, meta=restamp(head.meta, saver.ttl, now))
    try:
        new_etag = yield Put(
            keys.head_key(thread_id, ns),
            rec_io.encode_head(fresh, schema_version=saver.layout.schema_version),
            if_match=etag,
        )
    except (PreconditionFailedError, UnknownOutcomeError):
        return head, etag
    saver._cache.observe(thread_id, ns, fresh, new_etag)
    return fresh, new_etag
