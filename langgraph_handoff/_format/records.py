"""The stored data model: heads, segments, writes documents and the records inside them.

Pure data and (de)serialisation, no I/O. All user data (checkpoints, metadata, channel values,
write values) is kept exactly as the saver's ``serde`` produced it, a ``(type, bytes)`` pair, so
an ``EncryptedSerializer`` covers all of it. Only ids, parent ids and channel versions are kept in
clear: the saver needs them to order, fence and deduplicate without decrypting anything.

A **record** is one checkpoint: its id, parent id, the serialised checkpoint without
``channel_values``, the serialised metadata, and for each channel that has a value the *origin*
(the checkpoint id under whose put the value was stored) and its version. Values that did not
change since the parent point at the parent's origin, so they are never serialised or stored
twice. **Payloads** (the values themselves) live in a table ``origin -> channel -> payload`` next
to the records that use them: inline bytes, a reference to a content-addressed blob, a tail
(the items a list appended to an earlier value, over a blob holding that value whole), or
pieces (a ``DeltaChannel`` snapshot as an earlier snapshot's blobs plus a blob of what it
appended).

A **head** holds the newest records of one (thread, namespace), the payloads they reference and
the manifest of sealed **segments**, immutable objects holding older records with every payload
they reference (a segment is readable on its own). A **writes document** holds one task's writes
for one checkpoint.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import re
import secrets
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langgraph_handoff._format import deflate, envelope, keys
from langgraph_handoff._format.envelope import FORMAT_VERSION, Kind
from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff._format.upgrades import upgrade_body
from langgraph_handoff._frozen import fast_init, fast_replace
from langgraph_handoff.errors import CorruptObjectError

__all__ = [
    "Archive",
    "ArchiveRef",
    "BlobRef",
    "Bookkeeping",
    "Folded",
    "Head",
    "Inline",
    "Payload",
    "Pieces",
    "Record",
    "Segment",
    "SegmentRef",
    "Tail",
    "WriteItem",
    "WritesDoc",
]

Typed = tuple[str, bytes]
Version = str | int | float

T = TypeVar("T")


@fast_init
@dataclass(frozen=True)
class Inline:
    type: str
    data: bytes
    #: set while a copy of this value is being written behind the head as a blob (its digest);
    #: the inline copy stays until a writer that saw that blob write succeed drops it
    spill: str | None = None
    #: memo of this payload's msgpack bytes (see ``_packed_once``)
    _packed: bytes | None = field(default=None, init=False, compare=False, repr=False)


@fast_init
@dataclass(frozen=True)
class BlobRef:
    """A large value stored once as ``data/{T}/{N}/b/{digest}``."""

    type: str
    digest: str
    size: int
    _packed: bytes | None = field(default=None, init=False, compare=False, repr=False)


@fast_init
@dataclass(frozen=True)
class Tail:
    """A value stored as what it appends to an earlier value of its channel (:mod:`.tails`):
    ``count`` items, those of the **base** blob ``data/{T}/{N}/b/{inv(base)}-{base_digest}``
    (an earlier value of ``base_count`` items and ``base_size`` bytes, stored whole and owned by
    checkpoint ``base``) followed by ``data``.

    The base is never itself a tail, so reading a value takes at most one blob, and a base is
    immutable like every blob: garbage collection keeps it while any tail names it
    (:func:`~langgraph_handoff.checkpoint.plans.blobs.blob_keys`)."""

    type: str
    base: str
    base_digest: str
    base_size: int
    base_count: int
    count: int
    data: bytes
    _packed: bytes | None = field(default=None, init=False, compare=False, repr=False)

    def base_ref(self) -> tuple[str, str]:
        """(owner checkpoint id, digest) of the base blob."""
        return self.base, self.base_digest


@fast_init
@dataclass(frozen=True)
class Piece:
    """One blob of a :class:`Pieces` value: ``data/{T}/{N}/b/{inv(owner)}-{digest}``, ``size``
    bytes, and the value's item count once it is added."""

    owner: str
    digest: str
    size: int
    count: int


@fast_init
@dataclass(frozen=True)
class Pieces:
    """A large list stored as blobs that add up to it (:mod:`.tails`): the first holds an earlier
    value whole (a msgpack list, bare or in an ext frame), each next one the items appended
    since, and the value is ``parts[-1].count`` items in the first part's frame.

    A ``DeltaChannel`` snapshot is stored so: it is the whole conversation again every
    ``snapshot_frequency`` updates, and its checkpoint's parent never holds the channel (the
    checkpoints in between store only their writes), so a :class:`Tail` cannot reach the
    previous snapshot. Stored whole, the snapshots of a 1,000-turn thread were most of the bytes
    it wrote. A reader fetches all parts in one batch; the writer bounds how many there are
    (``plans.writing``)."""

    type: str
    parts: tuple[Piece, ...]
    _packed: bytes | None = field(default=None, init=False, compare=False, repr=False)


Payload = Inline | BlobRef | Tail | Pieces


def blob_refs(origin: str, p: Payload) -> tuple[tuple[str, str], ...]:
    """(owner checkpoint id, digest) of each blob a value stored under ``origin`` needs to be
    read: its own blob, the base of a tail, or the parts of pieces; none for an inline value.
    (Not the copy of an inline value being spilled: the value does not need it.) Every walk
    over the blobs a table references (reads, garbage collection, copies, checks) goes through
    here.

    >>> blob_refs("c1", BlobRef("msgpack", "d1", 9)), blob_refs("c2", Tail("msgpack", "c1", "d1", 9, 2, 3, b""))
    ((('c1', 'd1'),), (('c1', 'd1'),))
    >>> blob_refs("c3", Pieces("msgpack", (Piece("c1", "d1", 9, 2), Piece("c3", "d3", 4, 3))))
    (('c1', 'd1'), ('c3', 'd3'))
    >>> blob_refs("c1", Inline("msgpack", b"x", "d1"))
    ()
    """
    if isinstance(p, BlobRef):
        return ((origin, p.digest),)
    if isinstance(p, Tail):
        return (p.base_ref(),)
    if isinstance(p, Pieces):
        return tuple((part.owner, part.digest) for part in p.parts)
    return ()


@fast_init
@dataclass(frozen=True)
class WriteItem:
    idx: int
    channel: str
    type: str
    data: bytes
    #: state-schema version ``channel`` is named in (the writer's); None: that of its checkpoint
    #: (writes stored in format 1 did not say)
    schema: int | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class Folded:
    """A copy of one task's writes document kept inside the record of its checkpoint, tagged with
    the document's ETag: readers that list the same ETag skip the GET.

    Slotted, like :class:`Record`: a long ``DeltaChannel`` thread keeps thousands of both in
    cached segments, and an instance ``__dict__`` holding containers is one more object that
    every full collection walks (at turn 1,000 of the long-threads bench, 9,000 of the process's
    144,000 tracked objects with the cached values' wrappers; 2026-12-04)."""

    etag: str
    task_path: str
    items: tuple[WriteItem, ...]


@dataclass(frozen=True, slots=True)
class Bookkeeping:
    r"""What the saver's own bookkeeping needs of a checkpoint's metadata, kept in clear beside
    it: the run that wrote it (``delete_for_runs``) and the ``DeltaChannel``\ s counting updates
    since their last snapshot (what a ``keep_latest`` prune or TTL sweep must keep of its
    ancestors). The metadata itself is the user's, serialised by the user's serializer, which
    may run code a stored object names (LangGraph's default imports what a msgpack ext type
    says): bookkeeping that walks every thread of a store must never decode it.

    Records written before format 4 have none (``Record.bookkeeping is None``)."""

    run_id: str | None = None
    delta: tuple[str, ...] = ()

    @classmethod
    def of(cls, metadata: Any) -> Bookkeeping:
        """From the metadata dict a put is given (before it is serialised).

        >>> Bookkeeping.of({"run_id": "r1", "counters_since_delta_snapshot": {"messages": 3}})
        Bookkeeping(run_id='r1', delta=('messages',))
        >>> Bookkeeping.of({"source": "input"})
        Bookkeeping(run_id=None, delta=())
        """
        if not isinstance(metadata, dict):
            return cls()
        run_id = metadata.get("run_id")
        counters = metadata.get("counters_since_delta_snapshot")
        delta = tuple(sorted(ch for ch in counters if type(ch) is str)) if isinstance(counters, dict) else ()
        return cls(run_id if isinstance(run_id, str) else None, delta)


@fast_init
@dataclass(frozen=True, slots=True)
class Record:
    id: str
    parent: str | None
    checkpoint: Typed
    metadata: Typed
    #: channel -> (origin checkpoint id, channel version)
    values: dict[str, tuple[str, Version]]
    #: task id -> folded writes
    writes: dict[str, Folded] = field(default_factory=dict)
    #: version of the user's state schema the checkpoint was written in (see migrations.py)
    schema: int = 0
    #: what bookkeeping needs of the metadata, in clear (None: written before format 4)
    bookkeeping: Bookkeeping | None = None
    #: memo of this record's msgpack bytes: a head is rewritten whole on every put, and its
    #: older records are the same objects as in the head before (``replace`` resets it)
    _packed: bytes | None = field(default=None, init=False, compare=False, repr=False)
    #: memo of this record's share of ``cache.approx_size``
    _approx_size: int | None = field(default=None, init=False, compare=False, repr=False)

    def origins(self) -> set[tuple[str, str]]:
        return {(origin, ch) for ch, (origin, _v) in self.values.items()}


@fast_init
@dataclass(frozen=True)
class SegmentRef:
    key: str
    first_id: str
    last_id: str
    count: int

    def covers(self, checkpoint_id: str) -> bool:
        return self.first_id <= checkpoint_id <= self.last_id


@dataclass(frozen=True)
class ArchiveRef:
    """Where a head keeps the references of its older segments: an archive object (written
    once, create-only, under a fresh nonce) holding ``count`` references, oldest last, whose
    segments cover ``first_id`` to ``last_id``. See :mod:`langgraph_handoff.checkpoint.plans.manifest`."""

    key: str
    count: int
    first_id: str
    last_id: str

    def covers(self, checkpoint_id: str) -> bool:
        return self.first_id <= checkpoint_id <= self.last_id


@dataclass(frozen=True)
class Archive:
    """An archive object's content: segment references, newest first.

    >>> a = Archive((SegmentRef("s/2", "c", "d", 2), SegmentRef("s/1", "a", "b", 2)))
    >>> a.covering("d"), a.covering("bb")
    ([SegmentRef(key='s/2', first_id='c', last_id='d', count=2)], [])
    """

    refs: tuple[SegmentRef, ...]

    @functools.cached_property
    def _by_first(self) -> tuple[list[str], list[SegmentRef]] | None:
        """The references sorted by first id, if no two ranges overlap (sealing makes them
        disjoint); None if some do."""
        ordered = sorted(self.refs, key=lambda r: r.first_id)
        if any(a.last_id >= b.first_id for a, b in itertools.pairwise(ordered)):
            return None
        return [r.first_id for r in ordered], ordered

    def covering(self, checkpoint_id: str) -> list[SegmentRef]:
        """The references whose id range covers ``checkpoint_id``. A history walk asks this for
        every ancestor, and an archive lists hundreds of segments on a long thread: one bisect,
        not a scan (a scan was a third of a 1,000-turn ``DeltaChannel`` turn's CPU)."""
        index = self._by_first
        if index is None:
            return [r for r in self.refs if r.covers(checkpoint_id)]
        firsts, ordered = index
        i = bisect.bisect_right(firsts, checkpoint_id) - 1
        return [ordered[i]] if i >= 0 and ordered[i].covers(checkpoint_id) else []


PayloadTable = dict[str, dict[str, Payload]]


def payloads_for(records: list[Record] | Any, table: PayloadTable) -> PayloadTable:
    """The sub-table of payloads the given records reference."""
    out: PayloadTable = {}
    for rec in records:
        for ch, (origin, _v) in rec.values.items():
            payload = table.get(origin, {}).get(ch)
            if payload is not None:
                out.setdefault(origin, {})[ch] = payload
    return out


@dataclass(frozen=True)
class RecordsObject:
    """What a head and a sealed segment both are: one namespace's records and the table of the
    payloads they reference. Never stored as such: see :class:`Head` and :class:`Segment`."""

    thread_id: str
    checkpoint_ns: str
    records: dict[str, Record]
    payloads: PayloadTable


@fast_init
@dataclass(frozen=True)
class Head(RecordsObject):
    """A namespace's mutable object: its newest records, inline, and its segments' ids."""

    #: newest first; with ``archive``, only the newest segments (the rest are listed there)
    segments: tuple[SegmentRef, ...] = ()
    #: what the head carries besides its checkpoints (TTL stamp, sweep mark, session lease and
    #: fencing epoch, a team member's ack and resume count; see :mod:`.head_meta`)
    meta: HeadMeta = field(default_factory=HeadMeta)
    #: storage format the object was read in (what ``migrate`` looks at); writes are always current
    format_version: int = field(default=FORMAT_VERSION, compare=False)
    #: memo of ``cache.approx_size`` for this head (heads are never mutated; ``replace`` resets it)
    _approx_size: int | None = field(default=None, init=False, compare=False, repr=False)
    #: the archive listing the segments older than ``segments``, if the head has one
    archive: ArchiveRef | None = None

    @property
    def manifest(self) -> tuple[tuple[SegmentRef, ...], ArchiveRef | None]:
        """What the head says about its sealed segments (compare these, not ``segments`` alone)."""
        return self.segments, self.archive

    @property
    def has_history(self) -> bool:
        """Whether the namespace holds any checkpoint (in the head or in a sealed segment)."""
        return bool(self.records or self.segments or self.archive)

    @property
    def latest_id(self) -> str | None:
        return max(self.records) if self.records else None

    @property
    def latest(self) -> Record | None:
        latest = self.latest_id
        return self.records[latest] if latest is not None else None

    def with_records(self, records: dict[str, Record], payloads: PayloadTable) -> Head:
        """A copy holding ``records`` and only the payloads they reference."""
        return fast_replace(self, records=records, payloads=payloads_for(records.values(), payloads))


@fast_init
@dataclass(frozen=True)
class Segment(RecordsObject):
    """Older records sealed out of a head, written once (create-only) and never changed."""

    format_version: int = field(default=FORMAT_VERSION, compare=False)


@fast_init
@dataclass(frozen=True)
class WritesDoc:
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    task_path: str
    items: tuple[WriteItem, ...]
    format_version: int = field(default=FORMAT_VERSION, compare=False)


# --------------------------------------------------------------------------------------------------
# msgpack structures. Short keys: heads are rewritten on every put.
# --------------------------------------------------------------------------------------------------


def _payload_out(p: Payload) -> Any:
    if isinstance(p, Inline):
        return [p.type, p.data] if p.spill is None else [p.type, p.data, p.spill]
    if isinstance(p, Tail):
        return {"a": [p.base, p.base_digest, p.base_size, p.base_count, p.count], "t": p.type, "d": p.data}
    if isinstance(p, Pieces):
        return {"p": [[x.owner, x.digest, x.size, x.count] for x in p.parts], "t": p.type}
    return {"b": p.digest, "t": p.type, "n": p.size}


def _payload_in(raw: Any) -> Payload:
    if type(raw) is list:
        if len(raw) not in (2, 3):
            raise ValueError(f"an inline value has {len(raw)} fields, not 2 or 3")
        return Inline(_str(raw[0]), _bytes(raw[1]), _digest(raw[2]) if len(raw) > 2 and raw[2] is not None else None)
    if type(raw) is not dict:
        raise TypeError(f"a value is stored as {type(raw).__name__}, not a list or a map")
    if "a" in raw:
        base, digest, size, base_count, count = _fields(raw["a"], 5, "a tail's base")
        return Tail(
            _str(raw["t"]),
            _cid(base),
            _digest(digest),
            _size(size),
            _count(base_count),
            _count(count),
            _bytes(raw["d"]),
        )
    if "p" in raw:
        parts = tuple(Piece(_cid(o), _digest(d), _size(n), _count(c)) for o, d, n, c in _list(raw["p"], PIECES_MAX))
        if not parts:
            raise ValueError("a value stored as pieces names no blob")
        if len({(p.owner, p.digest) for p in parts}) != len(parts):
            raise ValueError("a value stored as pieces names the same blob twice")
        if sum(p.size for p in parts) > envelope.MAX_OBJECT_BYTES:
            raise ValueError(f"a value stored as pieces adds up to more than {envelope.MAX_OBJECT_BYTES} bytes")
        return Pieces(_str(raw["t"]), parts)
    return BlobRef(_str(raw["t"]), _digest(raw["b"]), _size(raw["n"]))


# -- strict readers of stored fields ---------------------------------------------------------------
# Whoever can write into the bucket can write any msgpack, with a valid checksum. So every field
# is taken only in the type and range the writer stores it in: ``bytes(2**62)`` of an integer
# where bytes belong, a size of ``inf``, a key of ``../../x`` or a part named 8,000 times must
# be refused here, as a damaged object, not met later as MemoryError, OverflowError or
# InvalidKeyError where the value is used.

#: a value stored as pieces has at most this many parts (the writer's own bound, ``plans.writing``)
PIECES_MAX = 16
_DIGEST_RE = re.compile(r"^[0-9a-f]{16,64}$")
#: what the key of a sealed segment or an archive may be, relative to its namespace's data
#: prefix: one key segment of the portable alphabet under ``s/`` or ``m/`` (never ``..``)
_SUFFIX_RE = re.compile(r"^[sm]/[a-z0-9_%~=-][a-z0-9_.%~=-]{0,199}$")


def _str(value: Any) -> str:
    if type(value) is not str:
        raise TypeError(f"expected a string, found {type(value).__name__}")
    return value


def _bytes(value: Any) -> bytes:
    if type(value) is not bytes:
        raise TypeError(f"expected bytes, found {type(value).__name__}")
    return value


def _int(value: Any, low: int, high: int, what: str) -> int:
    if type(value) is not int or not low <= value < high:
        raise ValueError(f"{what} {value!r} is not a whole number in [{low}, {high})")
    return value


def _size(value: Any) -> int:
    return _int(value, 0, envelope.MAX_OBJECT_BYTES + 1, "size")


def _count(value: Any) -> int:
    return _int(value, 0, 1 << 32, "item count")


def _cid(value: Any) -> str:
    if not keys.is_checkpoint_id(value):
        raise ValueError(f"{value!r} is not a checkpoint id")
    return value  # type: ignore[no-any-return]


def _digest(value: Any) -> str:
    if type(value) is not str or not _DIGEST_RE.match(value):
        raise ValueError(f"{value!r} is not a value digest")
    return value


def _suffix(value: Any, kind: str) -> str:
    if type(value) is not str or not _SUFFIX_RE.match(value) or not value.startswith(kind):
        raise ValueError(f"{value!r} is not the key of a sealed {'segment' if kind == 's/' else 'archive'}")
    return value


def _version(value: Any) -> Version:
    """A channel version: what LangGraph's ``get_next_version`` returns (a string, or a number)."""
    if type(value) is str or type(value) is int:
        return value
    if type(value) is float and math.isfinite(value):
        return value
    raise TypeError(f"channel version {value!r} is not a string or a finite number")


def _list(value: Any, limit: int | None = None) -> list[Any]:
    if type(value) is not list:
        raise TypeError(f"expected a list, found {type(value).__name__}")
    if limit is not None and len(value) > limit:
        raise ValueError(f"a list of {len(value)} where at most {limit} are written")
    return value


def _map(value: Any) -> dict[Any, Any]:
    if type(value) is not dict:
        raise TypeError(f"expected a map, found {type(value).__name__}")
    return value


def _fields(value: Any, n: int, what: str) -> list[Any]:
    if type(value) is not list or len(value) != n:
        raise ValueError(f"{what} is not a list of {n} fields")
    return value


def _typed(value: Any) -> Typed:
    kind, data = _fields(value, 2, "a serialised value")
    return _str(kind), _bytes(data)


def _items_out(items: tuple[WriteItem, ...]) -> list[Any]:
    return [[w.idx, w.channel, w.type, w.data, w.schema] for w in items]


def _items_in(raw: Any) -> tuple[WriteItem, ...]:
    return tuple(
        [
            WriteItem(_int(i, -(1 << 31), 1 << 31, "write index"), _str(c), _str(t), _bytes(d), _schema_or_none(z))
            for i, c, t, d, z in (_fields(item, 5, "a write") for item in _list(raw))
        ]
    )


def _schema_or_none(value: Any) -> int | None:
    return None if value is None else _int(value, 0, 1 << 31, "state-schema version")


def _decoded(data: bytes, key: str, kind: Kind, build: Callable[[Any, int], T]) -> T:
    """``build(body, format_version)`` over an object's msgpack body, upgraded to the current
    format. A body that is not what its kind promises (a field missing, of a wrong type or out of
    range) is a :class:`CorruptObjectError` naming the key, never a bare ``KeyError``,
    ``MemoryError`` or ``OverflowError`` from deep inside: building never calls anything but
    the strict readers above and constructors of frozen records, so any exception it raises
    means the body is not ours."""
    obj, env = envelope.decode_msgpack(data, key=key, expect=kind)
    try:
        return build(upgrade_body(obj, kind, from_version=env.format_version, key=key), env.format_version)
    except CorruptObjectError:
        raise
    except Exception as exc:  # noqa: BLE001 - see the docstring: any failure here is the object's
        raise CorruptObjectError(key, f"malformed {kind.name.lower()} ({type(exc).__name__}: {exc})") from None


def _record_out(r: Record) -> dict[str, Any]:
    out: dict[str, Any] = {
        "i": r.id,
        "p": r.parent,
        "c": list(r.checkpoint),
        "m": list(r.metadata),
        "v": {ch: [origin, version] for ch, (origin, version) in r.values.items()},
    }
    if r.writes:
        out["w"] = {t: [f.etag, f.task_path, _items_out(f.items)] for t, f in r.writes.items()}
    if r.schema:
        out["z"] = r.schema
    if r.bookkeeping is not None:
        out["k"] = [r.bookkeeping.run_id, list(r.bookkeeping.delta)]
    return out


def _bookkeeping_in(raw: Any) -> Bookkeeping | None:
    if raw is None:
        return None
    run_id, delta = _fields(raw, 2, "a record's bookkeeping")
    return Bookkeeping(None if run_id is None else _str(run_id), tuple(_str(ch) for ch in _list(delta)))


def _record_in(raw: Any) -> Record:
    raw = _map(raw)
    parent = raw["p"]
    return Record(
        _cid(raw["i"]),
        None if parent is None else _cid(parent),
        _typed(raw["c"]),
        _typed(raw["m"]),
        {_str(ch): (_cid(o), _version(v)) for ch, (o, v) in _map(raw["v"]).items()},
        {_str(t): Folded(_str(e), _str(p), _items_in(items)) for t, (e, p, items) in _map(raw.get("w", {})).items()},
        _int(raw.get("z", 0), 0, 1 << 31, "state-schema version"),
        _bookkeeping_in(raw.get("k")),
    )


def _table_out(table: PayloadTable) -> dict[str, Any]:
    return {o: {ch: _payload_out(p) for ch, p in chs.items()} for o, chs in table.items()}


def _table_in(raw: Any) -> PayloadTable:
    return {_cid(o): {_str(ch): _payload_in(p) for ch, p in _map(chs).items()} for o, chs in _map(raw).items()}


def _records_in(obj: dict[str, Any]) -> dict[str, Record]:
    return {r.id: r for r in (_record_in(x) for x in _list(obj["r"]))}


_HEAD_KEYS = {"t", "n", "r", "x", "s", "u", "a"}


# Heads are rewritten whole on every put, but most of a head is the records and values of the
# head before. So the body is assembled from msgpack pieces memoised on the (immutable) records
# and payloads: the very bytes ``packb`` gives for the whole structure (a map or an array is its
# header followed by its packed items, in order), at the cost of packing only what is new.


class _Packed:
    """A value already packed, as pieces, spliced into a body by :func:`_pack_body`. Large pieces
    that live on from head to head (a record's packed bytes, a value's data) are
    :class:`~.deflate.Reused`, so the envelope compresses each of them once (:mod:`.deflate`)."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[deflate.Piece]) -> None:
        self.parts = parts


def _reused(data: bytes) -> deflate.Piece:
    return deflate.Reused(data) if len(data) >= deflate.REUSE_MIN else data


def _bin_header(n: int) -> bytes:
    """msgpack's header for ``n`` bytes of bin (what ``packb(b"...")`` writes before them)."""
    if n < 0x100:
        return b"\xc4" + n.to_bytes(1, "big")
    if n < 0x10000:
        return b"\xc5" + n.to_bytes(2, "big")
    return b"\xc6" + n.to_bytes(4, "big")


def _payload_parts(p: Payload) -> list[deflate.Piece]:
    """``packb(_payload_out(p))`` as pieces: a large inline value's data is a piece of its own,
    the same bytes object the value and its spilled blob carry (so it is compressed once).

    >>> big = Inline("msgpack", b"x" * 5000, "ab")
    >>> deflate.joined(_payload_parts(big)) == envelope.packb(_payload_out(big))
    True
    """
    if not isinstance(p, Inline) or len(p.data) < deflate.REUSE_MIN:
        return [_reused(_packed_once(p, _payload_out))]  # a tail's bytes live on from head to head
    fields = 2 if p.spill is None else 3
    head = envelope.packb_array_header(fields) + _key_bytes(p.type) + _bin_header(len(p.data))
    tail = [] if p.spill is None else [envelope.packb(p.spill)]
    return [head, deflate.Reused(p.data), *tail]


@functools.lru_cache(maxsize=8192)
def _str_bytes(value: str) -> bytes:
    """Packed map keys (channel names, checkpoint ids): the same few strings on every put."""
    return envelope.packb(value)


def _key_bytes(value: Any) -> bytes:
    return _str_bytes(value) if type(value) is str else envelope.packb(value)


def _packed_once(obj: Payload | Record, out: Callable[[Any], Any]) -> bytes:
    """``packb(out(obj))``, kept on ``obj``: payloads and records are immutable and carried from
    head to head, so each is packed once, not on every put that rewrites its head."""
    packed = obj._packed
    if packed is None:
        packed = envelope.packb(out(obj))
        object.__setattr__(obj, "_packed", packed)
    return packed


def _records_bytes(records: dict[str, Record]) -> _Packed:
    """``[_record_out(r) for r in records, by id]``, packed."""
    parts: list[deflate.Piece] = [envelope.packb_array_header(len(records))]
    parts += [_reused(_packed_once(r, _record_out)) for _, r in sorted(records.items())]
    return _Packed(parts)


def _table_bytes(table: PayloadTable) -> _Packed:
    """``_table_out(table)``, packed."""
    map_header = envelope.packb_map_header
    parts: list[deflate.Piece] = [map_header(len(table))]
    for origin, chs in table.items():
        parts.append(_key_bytes(origin))
        parts.append(map_header(len(chs)))
        for ch, p in chs.items():
            parts.append(_key_bytes(ch))
            parts += _payload_parts(p)
    return _Packed(parts)


def _pack_body(obj: dict[str, Any]) -> list[deflate.Piece]:
    """``packb(obj)``, as pieces, for a top-level map whose values may be :class:`_Packed`."""
    parts: list[deflate.Piece] = [envelope.packb_map_header(len(obj))]
    for k, v in obj.items():
        parts.append(_key_bytes(k))
        if isinstance(v, _Packed):
            parts += v.parts
        else:
            parts.append(envelope.packb(v))
    return deflate.coalesced(parts)


def _records_out(thread_id: str, ns: str, records: dict[str, Record], table: PayloadTable) -> dict[str, Any]:
    """The part heads and segments share: whose records, the records, their payloads."""
    return {"t": thread_id, "n": ns, "r": _records_bytes(records), "x": _table_bytes(table)}


def encode_head(head: Head, *, schema_version: int = 0) -> bytes:
    """A head's bytes. Each write gets a random nonce (``u``): ETags are content hashes on every
    store, and a head written again with the same content (a thread deleted and copied back)
    must not carry the ETag a writer still holds, or its compare-and-swap would succeed on a
    head it never read (ABA) and trust what it remembers about the old one."""
    obj: dict[str, Any] = head.meta.wire()
    obj.update(_records_out(head.thread_id, head.checkpoint_ns, head.records, head.payloads))
    obj["s"] = _refs_out(head.segments)
    if head.archive is not None:
        a = head.archive
        obj["a"] = [a.key, a.count, a.first_id, a.last_id]
    obj["u"] = secrets.token_bytes(8)
    return envelope.encode(Kind.HEAD, _pack_body(obj), schema_version=schema_version)


def encode_archive(archive: Archive, *, schema_version: int = 0) -> bytes:
    """An archive object's bytes: its references in the head's compact manifest form."""
    return envelope.encode_msgpack(Kind.ARCHIVE, {"s": _refs_out(archive.refs)}, schema_version=schema_version)


def decode_archive(data: bytes, *, key: str) -> Archive:
    return _decoded(data, key, Kind.ARCHIVE, lambda obj, _fmt: Archive(_refs_in(_map(obj)["s"])))


# A head lists every sealed segment of its namespace, and is rewritten on every put: on a
# 1,000-turn conversation that is a few hundred references, which as msgpack strings (key, two
# uuids, count: about 130 bytes, 64 compressed) were half of a head's stored bytes. A reference
# whose key is the usual ``s/{inverted first id}-{8 hex nonce}`` is stored as 40 bytes instead:
# both ids as 16 bytes, the nonce as 4, the count as 4; the whole manifest is one bin. A head
# with no segment, or with a reference of any other key (none is written today), keeps the list
# form, which is also what heads written before this were: both are read.
_REF = struct.Struct(">16s16s4sI")


@functools.lru_cache(maxsize=65536)
def _packed_ref(ref: SegmentRef) -> bytes | None:
    nonce = ref.key[-8:]
    if not (
        keys.is_checkpoint_id(ref.first_id)
        and keys.is_checkpoint_id(ref.last_id)
        and _is_hex8(nonce)
        and 0 <= ref.count < 1 << 32
        and ref.key == keys.segment_suffix(ref.first_id, nonce)
    ):
        return None
    return _REF.pack(_uuid_bytes(ref.first_id), _uuid_bytes(ref.last_id), bytes.fromhex(nonce), ref.count)


@functools.lru_cache(maxsize=65536)
def _unpacked_ref(packed: bytes) -> SegmentRef:
    first, last, nonce, count = _REF.unpack(packed)
    first_id = _uuid_str(first)
    return SegmentRef(keys.segment_suffix(first_id, nonce.hex()), first_id, _uuid_str(last), count)


def _is_hex8(text: str) -> bool:
    return len(text) == 8 and all(c in "0123456789abcdef" for c in text)


def _uuid_bytes(checkpoint_id: str) -> bytes:
    return bytes.fromhex(checkpoint_id.replace("-", ""))


def _uuid_str(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def manifest_size(refs: tuple[SegmentRef, ...]) -> int:
    """About the bytes a head's segment manifest takes (uncompressed, compact form)."""
    return len(refs) * _REF.size


def _refs_out(refs: tuple[SegmentRef, ...]) -> bytes | list[list[Any]]:
    packed = [_packed_ref(ref) for ref in refs]
    if packed and all(p is not None for p in packed):
        return b"".join(packed)  # type: ignore[arg-type]
    return [[ref.key, ref.first_id, ref.last_id, ref.count] for ref in refs]


def _refs_in(wire: Any) -> tuple[SegmentRef, ...]:
    if type(wire) is bytes:
        if len(wire) % _REF.size:
            raise ValueError(f"segment manifest of {len(wire)} bytes is not whole references")
        return tuple(_unpacked_ref(wire[i : i + _REF.size]) for i in range(0, len(wire), _REF.size))
    return tuple(
        SegmentRef(_suffix(k, "s/"), _cid(a), _cid(b), _count(c))
        for k, a, b, c in (_fields(ref, 4, "a segment reference") for ref in _list(wire))
    )


def _archive_ref_in(wire: Any) -> ArchiveRef | None:
    if wire is None:
        return None
    key, count, first_id, last_id = _fields(wire, 4, "an archive reference [key, count, first id, last id]")
    return ArchiveRef(_suffix(key, "m/"), _int(count, 1, 1 << 32, "archived references"), _cid(first_id), _cid(last_id))


def decode_head(data: bytes, *, key: str) -> Head:
    return _decoded(data, key, Kind.HEAD, _head_of)


def _records_fields(obj: Any) -> dict[str, Any]:
    """The fields :func:`_records_out` wrote, as keyword arguments of a head or a segment."""
    obj = _map(obj)
    return {
        "thread_id": _str(obj["t"]),
        "checkpoint_ns": _str(obj["n"]),
        "records": _records_in(obj),
        "payloads": _table_in(obj["x"]),
    }


def _head_of(obj: Any, fmt: int) -> Head:
    return Head(
        **_records_fields(obj),
        segments=_refs_in(obj["s"]),
        archive=_archive_ref_in(obj.get("a")),
        meta=HeadMeta.from_wire({k: v for k, v in obj.items() if k not in _HEAD_KEYS}),
        format_version=fmt,
    )


def encode_segment(seg: Segment, *, schema_version: int = 0) -> bytes:
    obj = _records_out(seg.thread_id, seg.checkpoint_ns, seg.records, seg.payloads)
    return envelope.encode(Kind.SEGMENT, _pack_body(obj), schema_version=schema_version)


def decode_segment(data: bytes, *, key: str) -> Segment:
    return _decoded(data, key, Kind.SEGMENT, _segment_of)


def _segment_of(obj: Any, fmt: int) -> Segment:
    return Segment(**_records_fields(obj), format_version=fmt)


def encode_writes(doc: WritesDoc, *, schema_version: int = 0) -> bytes:
    obj = {
        "t": doc.thread_id,
        "n": doc.checkpoint_ns,
        "c": doc.checkpoint_id,
        "k": doc.task_id,
        "p": doc.task_path,
        "i": _items_out(doc.items),
    }
    return envelope.encode_msgpack(Kind.WRITES, obj, schema_version=schema_version)


def decode_writes(data: bytes, *, key: str) -> WritesDoc:
    return _decoded(data, key, Kind.WRITES, _writes_of)


def _writes_of(obj: Any, fmt: int) -> WritesDoc:
    obj = _map(obj)
    return WritesDoc(
        thread_id=_str(obj["t"]),
        checkpoint_ns=_str(obj["n"]),
        checkpoint_id=_cid(obj["c"]),
        task_id=_str(obj["k"]),
        task_path=_str(obj["p"]),
        items=_items_in(obj["i"]),
        format_version=fmt,
    )


def encode_blob(data: bytes, *, schema_version: int = 0) -> bytes:
    """A large value's own object. ``data`` is usually also carried inline in a head while it
    is spilled: the compressed form is shared with that head's (:mod:`.deflate`)."""
    return envelope.encode(Kind.BLOB, [_reused(data)], schema_version=schema_version)


def decode_blob(data: bytes, *, key: str) -> bytes:
    return envelope.decode(data, key=key, expect=Kind.BLOB).body
