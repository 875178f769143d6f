"""What a saver remembers between calls about each (thread, namespace) it touched.

* The **head** it last read or wrote, with its ETag. A run pays for one read at start
  (``get_tuple``); every later ``put`` is a single compare-and-swap against the remembered ETag.
  A wrong memory only costs a lost CAS and a re-read, never correctness.
* **Empty reads**: how many ``get_tuple`` calls found the namespace empty and have not yet been
  followed by a parentless put. That is how a run that started from an empty thread is told apart
  from direct API use when the thread turns out to exist after all (see ``fencing``).
* **Branch points**: checkpoints a LangGraph run loaded *by id* while they were not the latest
  (time travel with new input, or a resume at an old interrupt). The run's first put may branch
  from such a checkpoint; a run that loaded the latest and then lost a race may not.
* **Unfolded writes**: writes documents this process wrote or read whose content is not yet
  copied into the head.
* **A run's writes listing**: the page of writes keys a LangGraph run's ``get_tuple`` of the
  latest checkpoint listed, held until the same run asks for that checkpoint's ``DeltaChannel``
  history (:meth:`HeadCache.keep_listing`).
* **Confirmed spills**: blobs this process saw written successfully. Only such a blob may replace
  the inline copy of a value in a head (see ``plans.writing._spill``). The next ``put`` folds them into their checkpoint's record, so history
  reads find them in the head instead of paying one GET per task.

Bounded (LRU over namespaces, by count and by the approximate bytes of the heads held) and shared
by shallow copies of the saver (``with_allowlist``). An evicted namespace only costs one GET later.

Beside the heads, the cache keeps **decoded immutable objects** (:class:`ImmutableCache`): history
segments and large values (blobs), in their own LRU bounded by approximate bytes. A segment is
written once under a key with a fresh nonce, a blob under the digest of its content, and neither
ever changes, so the copy decoded once stays right for as long as anything references that key:
a ``DeltaChannel``'s history walks the same sealed segments turn after turn and loads the same
snapshot value, and fetching and decoding them again was most of a long thread's CPU per turn.

Large **decoded values** are kept there too, as a pickle of what the serializer decoded from
blobs that never change (:meth:`ImmutableCache.value_copy`). Every read gets a copy of its own
(``pickle.loads``, about half the CPU of decoding again: no validation runs), so a node that
changes a message in place changes only its own copy, as it would with a fresh decode.
"""

from __future__ import annotations

import logging
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from langgraph_handoff._format.envelope import FORMAT_VERSION
from langgraph_handoff._format.keys import blob_key
from langgraph_handoff._format.records import (
    Archive,
    Folded,
    Head,
    Inline,
    PayloadTable,
    Record,
    Segment,
    Tail,
)
from langgraph_handoff._frozen import fast_init, fast_replace
from langgraph_handoff.stores.base import ListResult

__all__ = ["MISS", "HeadCache", "ImmutableCache", "NsState"]

_log = logging.getLogger(__name__)

#: what :meth:`ImmutableCache.value_copy` returns when it holds no copy
MISS: Any = object()

#: serializers an :class:`ImmutableCache` names by a tag at once (see
#: :meth:`ImmutableCache.serializer_tag`); a saver and its ``with_allowlist`` copies use a few
_SERIALIZERS = 64


#: kept instead of a pickle for a value pickle could not copy: it is decoded on every read
#: without trying to pickle it again (stored as this very object; no pickle is empty).
#:
#: A value's pickle is kept as plain ``bytes`` under its tuple key (segments, archives and blobs
#: have ``str`` keys), in an entry tuple of ``bytes`` and ``int``: the collector tracks neither.
#: A long ``DeltaChannel`` thread keeps thousands of them, and every full collection walks each
#: tracked object of the process (a wrapper object per value was 4,000 more at turn 1,000 of the
#: long-threads bench, 2026-12-04).
_REFUSED = b""


@fast_init
@dataclass(frozen=True)
class NsState:
    #: True once head/etag reflect a real read or write (head None then means "absent")
    known: bool = False
    head: Head | None = None
    etag: str | None = None
    empty_reads: int = 0
    #: superseded checkpoints a run loaded by id (it may branch from each once)
    branch_points: frozenset[str] = frozenset()
    #: checkpoint id -> task id -> folded copy of its writes document
    unfolded: dict[str, dict[str, Folded]] = field(default_factory=dict)
    #: blob keys this process saw written successfully
    spilled: frozenset[str] = frozenset()
    #: writes keys the last ``DeltaChannel`` history walk of a run here wanted listed, counted
    #: from its target's own (a run's target is the latest; see :meth:`HeadCache.note_walk`);
    #: 0 before any
    walk_keys: int = 0


#: Calibration of the estimate against what a cached thread really keeps alive, measured with
#: tracemalloc (memory freed when the cache is cleared; 300 threads of the 5-node graph): the
#: serialised bytes, the msgpack pieces memoised for the next head write (about as many again),
#: and the Python objects around them (records, tuples, dicts).
_RECORD_OVERHEAD = 1800
_VALUE_OVERHEAD = 250
_STATE_OVERHEAD = 1024


def _writes_size(folded: Folded) -> int:
    return sum(_VALUE_OVERHEAD + 2 * len(w.data) for w in folded.items)


def _record_size(rec: Record) -> int:
    size = rec._approx_size
    if size is None:
        size = _RECORD_OVERHEAD + 2 * (len(rec.checkpoint[1]) + len(rec.metadata[1]))
        size += sum(_writes_size(f) for f in rec.writes.values())
        object.__setattr__(rec, "_approx_size", size)
    return size


def _records_size(records: dict[str, Record], payloads: PayloadTable) -> int:
    size = 0
    for rec in records.values():
        size += _record_size(rec)
    for chs in payloads.values():
        for p in chs.values():
            size += _VALUE_OVERHEAD + (2 * len(p.data) if isinstance(p, (Inline, Tail)) else 0)
    return size


def _head_size(head: Head) -> int:
    """The serialised data a head references, roughly. Heads and records are immutable, so this
    is counted once per head, and once per record (a new head shares all but one or two records
    with the one before; a cache update happens on every put, put_writes and read)."""
    size = head._approx_size
    if size is None:
        size = _records_size(head.records, head.payloads)
        object.__setattr__(head, "_approx_size", size)
    return size


def _spills_under_way(head: Head) -> frozenset[str]:
    """Blob keys of the values ``head`` still carries inline while spilling them."""
    return frozenset(
        blob_key(head.thread_id, head.checkpoint_ns, origin, p.spill)
        for origin, chs in head.payloads.items()
        for p in chs.values()
        if isinstance(p, Inline) and p.spill
    )


def approx_size(state: NsState) -> int:
    """Bytes a cached state keeps alive, roughly (see :data:`_RECORD_OVERHEAD`)."""
    size = _STATE_OVERHEAD
    if state.head is not None:
        size += _head_size(state.head)
    for tasks in state.unfolded.values():
        size += sum(_writes_size(f) for f in tasks.values())
    return size


#: namespaces whose run's writes listing is held at once (see :meth:`HeadCache.keep_listing`)
_LISTINGS = 64


class HeadCache:
    def __init__(self, max_namespaces: int = 1024, max_bytes: int = 64 * 1024 * 1024) -> None:
        #: decoded sealed segments and blob contents, with a budget of their own (as the heads')
        self.immutable = ImmutableCache(max_bytes)
        #: (thread, ns) -> (head ETag, checkpoint id, writes page) of a run's latest read
        self._listings: OrderedDict[tuple[str, str], tuple[str, str, ListResult]] = OrderedDict()
        #: a run of this saver (or its copies) walked a ``DeltaChannel`` history: runs' latest
        #: reads list the long page it goes on from (``Layout.writes_page``). Until then, on a
        #: store that lists in process, a run's graph is taken for one without a
        #: ``DeltaChannel``, whose read wants the latest's own writes.
        self.delta_runs = False
        #: drops of listings so far; per namespace, the number of its last drop (the oldest
        #: forgotten, with the largest number forgotten kept as the floor for all others)
        self._drops = 0
        self._last_drop: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._drop_floor = 0
        self._lock = threading.Lock()
        self._max = max_namespaces
        self._max_bytes = max_bytes
        self._bytes = 0
        self._sizes: dict[tuple[str, str], int] = {}
        self._states: OrderedDict[tuple[str, str], NsState] = OrderedDict()

    def get(self, thread_id: str, ns: str) -> NsState:
        with self._lock:
            state = self._states.get((thread_id, ns))
            if state is None:
                return NsState()
            self._states.move_to_end((thread_id, ns))
            return state

    def head_with_etag(self, thread_id: str, ns: str, etag: str) -> Head | None:
        """The head we hold for this namespace if it is the object with ``etag``, else None.

        Lets a read skip decoding an object it already holds: an ETag names one object state (a
        compare-and-swap relies on exactly that), and every head write carries a fresh nonce, so
        a head read back under the ETag we recorded is the head we wrote or read. A head built
        from an older-format one (``format_version`` below the current) is not offered: its
        bytes were written in the current format, and a fresh decode says so."""
        with self._lock:
            state = self._states.get((thread_id, ns))
        if state is None or not state.known or state.etag != etag:
            return None
        head = state.head
        if head is None or head.format_version != FORMAT_VERSION:
            return None
        return head

    def _set(self, key: tuple[str, str], state: NsState) -> None:
        size = approx_size(state)
        self._bytes += size - self._sizes.get(key, 0)
        self._sizes[key] = size
        self._states[key] = state
        self._states.move_to_end(key)
        while len(self._states) > 1 and (len(self._states) > self._max or self._bytes > self._max_bytes):
            old, _ = self._states.popitem(last=False)
            self._bytes -= self._sizes.pop(old)

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._states)

    def _update(self, thread_id: str, ns: str, change: Callable[[NsState], NsState]) -> None:
        """Apply ``change`` to a namespace's state (a fresh one if unknown), atomically."""
        key = (thread_id, ns)
        with self._lock:
            self._set(key, change(self._states.get(key, NsState())))

    def observe(
        self, thread_id: str, ns: str, head: Head | None, etag: str | None, *, empty_read: bool = False
    ) -> None:
        """Record a head we just read. (If a concurrent write of ours landed after this read, the
        next put loses one CAS and re-reads: a cost, never a correctness problem.)

        A head someone else wrote voids the blobs we saw written: an administrative rewrite
        (migrate, prune, a delete and a copy back) may have collected them since, so the next
        spill of such a value writes its blob again instead of trusting the memory."""
        self._update(
            thread_id,
            ns,
            lambda old: fast_replace(
                old,
                known=True,
                head=head,
                etag=etag,
                empty_reads=old.empty_reads + int(empty_read),
                spilled=old.spilled if etag == old.etag else frozenset(),
            ),
        )

    def wrote(self, thread_id: str, ns: str, head: Head | None, etag: str | None, *, used_empty_read: bool) -> None:
        """Record a head we just wrote and drop the writes we folded into it."""

        def change(old: NsState) -> NsState:
            unfolded = {}
            for cid, tasks in old.unfolded.items():
                rec = head.records.get(cid) if head is not None else None
                left = {t: f for t, f in tasks.items() if rec is None or rec.writes.get(t) != f}
                if left and (head is None or not head.records or cid >= min(head.records)):
                    unfolded[cid] = left
            empty_reads = max(0, old.empty_reads - int(used_empty_read))
            return fast_replace(old, known=True, head=head, etag=etag, empty_reads=empty_reads, unfolded=unfolded)

        self._update(thread_id, ns, change)

    def use_empty_read(self, thread_id: str, ns: str) -> None:
        self._update(thread_id, ns, lambda old: fast_replace(old, empty_reads=max(0, old.empty_reads - 1)))

    def confirm_spills(self, thread_id: str, ns: str, blob_keys: list[str]) -> None:
        """Remember blobs just written. Of those remembered before, only the ones the head we
        hold still carries inline (a spill under way) are kept: the others were turned into
        references already, and nothing asks for them again. (The set was capped at 256 keys
        in sorted order instead, which dropped the *newest* keys once a long thread had spilled
        256 values: every put then compressed and wrote every pending spill again, 8-13 MB of
        zlib input per turn at turn 200 of a plain message list.)"""
        if not blob_keys:
            return

        def change(old: NsState) -> NsState:
            pending = _spills_under_way(old.head) if old.head is not None else frozenset()
            return fast_replace(old, spilled=frozenset({k for k in old.spilled if k in pending} | set(blob_keys)))

        self._update(thread_id, ns, change)

    def note_walk(self, thread_id: str, ns: str, wanted: int) -> None:
        """Remember how many writes keys a run's ``DeltaChannel`` history walk of this namespace
        wanted listed (its target's own, the latest for a run, then its ancestors' up to the
        last snapshot). The next run's read of the latest lists that many at once (up to a LIST's
        1,000), so its walk goes on from that page without a LIST of its own: the walk grows by
        a checkpoint or two a turn, and it asks for an eighth more than it expects.

        >>> cache = HeadCache()
        >>> cache.note_walk("t", "", 420); cache.get("t", "").walk_keys
        420
        """
        self._update(thread_id, ns, lambda old: fast_replace(old, walk_keys=wanted))

    def note_branch_point(self, thread_id: str, ns: str, checkpoint_id: str) -> None:
        self._update(
            thread_id,
            ns,
            lambda old: fast_replace(old, branch_points=frozenset(sorted({*old.branch_points, checkpoint_id})[-32:])),
        )

    def use_branch_point(self, thread_id: str, ns: str, checkpoint_id: str) -> None:
        self._update(thread_id, ns, lambda old: fast_replace(old, branch_points=old.branch_points - {checkpoint_id}))

    def remember_writes(self, thread_id: str, ns: str, checkpoint_id: str, task_id: str, folded: Folded) -> None:
        def change(old: NsState) -> NsState:
            unfolded = dict(old.unfolded)
            unfolded[checkpoint_id] = {**unfolded.get(checkpoint_id, {}), task_id: folded}
            return fast_replace(old, unfolded=unfolded)

        self._update(thread_id, ns, change)

    def known_writes(self, thread_id: str, ns: str, checkpoint_id: str, task_id: str) -> Folded | None:
        state = self.get(thread_id, ns)
        found = state.unfolded.get(checkpoint_id, {}).get(task_id)
        if found is None and state.head is not None:
            rec = state.head.records.get(checkpoint_id)
            if rec is not None:
                found = rec.writes.get(task_id)
        return found

    def forget_thread(self, thread_id: str) -> None:
        """After delete/prune/copy: the thread's namespaces must be read afresh."""
        with self._lock:
            for key in [k for k in self._states if k[0] == thread_id]:
                del self._states[key]
                self._bytes -= self._sizes.pop(key)
            for key in [k for k in self._listings if k[0] == thread_id]:
                del self._listings[key]

    def listing_mark(self) -> int:
        """Taken by a run's ``get_tuple`` before it lists, for :meth:`keep_listing`."""
        with self._lock:
            return self._drops

    def keep_listing(self, thread_id: str, ns: str, etag: str, checkpoint_id: str, page: ListResult, mark: int) -> None:
        """Hold the writes page a LangGraph run's ``get_tuple`` of the latest checkpoint listed
        beside head ``etag``, for that run's ``DeltaChannel`` history of the same checkpoint.

        A run loads a checkpoint with those two calls, one right after the other, and the
        history needs the writes of the checkpoints just below the latest: the first page
        already lists them. Taken together the two read one snapshot of the namespace, the one
        ``get_tuple`` saw; on a long thread this saves a LIST a turn (on ``file://`` a walk of
        every checkpoint's directory). Only the next :meth:`take_listing` with the same head
        ETag gets it, once. A write of this process to the namespace drops it
        (:meth:`drop_listing`), and so does one that began after ``mark`` (taken before the
        LIST): a ``put_writes`` of another thread of this process that finished while the run
        was reading is never missed, as a process always reads its own writes."""
        with self._lock:
            if self._last_drop.get((thread_id, ns), self._drop_floor) > mark:
                return
            self._listings[(thread_id, ns)] = (etag, checkpoint_id, page)
            self._listings.move_to_end((thread_id, ns))
            while len(self._listings) > _LISTINGS:
                self._listings.popitem(last=False)

    def take_listing(self, thread_id: str, ns: str, etag: str | None, checkpoint_id: str) -> ListResult | None:
        """The page :meth:`keep_listing` holds for this head ETag and checkpoint, given once.

        >>> from langgraph_handoff.stores.base import ListResult
        >>> cache, page = HeadCache(), ListResult(items=[], truncated=False)
        >>> cache.keep_listing("t", "", "etag-1", "cp", page, cache.listing_mark())
        >>> cache.take_listing("t", "", "etag-2", "cp") is None  # the head moved: not used
        True
        >>> cache.keep_listing("t", "", "etag-1", "cp", page, cache.listing_mark())
        >>> cache.take_listing("t", "", "etag-1", "cp") is page, cache.take_listing("t", "", "etag-1", "cp")
        (True, None)
        """
        with self._lock:
            held = self._listings.pop((thread_id, ns), None)
        if held is None or etag is None or held[:2] != (etag, checkpoint_id):
            return None
        return held[2]

    def drop_listing(self, thread_id: str, ns: str) -> None:
        """Before this process writes to the namespace: no run may go on from a page listed
        before that write, held already or kept later (see :meth:`keep_listing`)."""
        with self._lock:
            self._drops += 1
            self._last_drop[(thread_id, ns)] = self._drops
            self._last_drop.move_to_end((thread_id, ns))
            while len(self._last_drop) > self._max:
                _, forgotten = self._last_drop.popitem(last=False)
                self._drop_floor = max(self._drop_floor, forgotten)
            self._listings.pop((thread_id, ns), None)

    def clear(self) -> None:
        with self._lock:
            self._states.clear()
            self._sizes.clear()
            self._bytes = 0
            self._listings.clear()
        self.immutable.clear()


def _key_bytes(key: tuple[Hashable, ...]) -> int:
    return sum(len(k) for k in key if isinstance(k, bytes))


def _named(key: tuple[Hashable, ...]) -> str:
    """A value key for a log line: its type and blob keys, never a write's bytes."""
    return repr(tuple(f"<{len(k)} bytes>" if isinstance(k, bytes) else k for k in key[1:]))


class ImmutableCache:
    """Decoded immutable objects by key (sealed segments, segment archives, blob contents, and
    values decoded from blobs), least recently used first out, bounded by the approximate bytes
    they keep alive: a segment counts what the head cache's estimate gives its records and
    payloads (:func:`_records_size`), a blob its length, a value its pickle's length.

    Only keys a head references are ever looked up, and such a key never names other content (a
    segment's carries a fresh nonce, a blob's the digest of its bytes), so a hit is always the
    object the head means. A pruned or deleted thread's objects simply age out. An object larger
    than the whole budget is not kept.

    >>> from langgraph_handoff._format.records import Segment
    >>> cache = ImmutableCache(max_bytes=10_000)
    >>> seg = Segment("t", "", {}, {})
    >>> cache.put("data/t/=/s/k", seg); cache.get("data/t/=/s/k") is seg, cache.get("other")
    (True, None)
    >>> cache.put("data/t/=/b/k", b"value"); cache.get("data/t/=/b/k")
    b'value'
    """

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self._lock = threading.Lock()
        self._max_bytes = max_bytes
        self._bytes = 0
        self._items: OrderedDict[Hashable, tuple[Segment | Archive | bytes, int]] = OrderedDict()
        #: id(serializer) -> (that serializer, its tag); see :meth:`serializer_tag`
        self._serializers: dict[int, tuple[object, int]] = {}
        self._tags = 0

    def serializer_tag(self, serde: object) -> int:
        """A number naming ``serde`` in value keys (:meth:`keep_value`): two serializers that
        compare equal may still decode differently (another allow-list), so a value key names the
        very object, and need not hash it.

        The cache holds each tagged serializer, so its ``id`` cannot pass to another object
        while the tag is in use; past :data:`_SERIALIZERS` the least recently asked for is let
        go (a saver whose runs each make a serializer, ``with_allowlist`` under LangGraph's
        strict msgpack mode, does not push out the saver's own), and a serializer tagged again
        gets a new number (what its old tag keyed ages out unread).

        A number, not a wrapper object, because a key of numbers and strings is one the garbage
        collector stops tracking: a long ``DeltaChannel`` thread keeps thousands of keys, and
        every full collection walks each tracked object of the process (about 3,000 objects at
        turn 1,000 of the long-threads bench, and a Python-level ``__hash__`` and ``__eq__`` on
        every lookup, 2026-12-04).

        >>> cache, serde = ImmutableCache(), object()
        >>> cache.serializer_tag(serde) == cache.serializer_tag(serde) != cache.serializer_tag(object())
        True
        """
        with self._lock:  # (once per walk or value read: a lock costs nothing here)
            held = self._serializers.pop(id(serde), None)
            if held is not None:  # held strongly, so this id is still that very object
                self._serializers[id(serde)] = held  # the most recently asked for
                return held[1]
            while len(self._serializers) >= _SERIALIZERS:
                del self._serializers[next(iter(self._serializers))]
            self._tags += 1
            self._serializers[id(serde)] = (serde, self._tags)
            return self._tags

    def get(self, key: str) -> Segment | Archive | bytes | None:
        return self._get(key)

    def _get(self, key: Hashable) -> Segment | Archive | bytes | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            return hit[0]

    def segment(self, key: str) -> Segment | None:
        found = self.get(key)
        return found if isinstance(found, Segment) else None

    def blob(self, key: str) -> bytes | None:
        found = self.get(key)
        return found if isinstance(found, bytes) else None

    def value_copy(self, key: tuple[Hashable, ...]) -> Any:
        """A fresh copy of the value :meth:`keep_value` kept under ``key``, or :data:`MISS`.

        >>> cache = ImmutableCache()
        >>> cache.keep_value(("serde", "msgpack", "data/t/=/b/k"), [{"role": "user"}])
        >>> a = cache.value_copy(("serde", "msgpack", "data/t/=/b/k"))
        >>> a[0]["role"] = "changed"  # a copy of its own
        >>> cache.value_copy(("serde", "msgpack", "data/t/=/b/k"))
        [{'role': 'user'}]
        >>> cache.value_copy(("serde", "msgpack", "other")) is MISS
        True
        """
        found = self._get(key)
        if type(found) is not bytes or found is _REFUSED:
            return MISS
        try:
            return pickle.loads(found)  # bytes this process pickled itself
        except Exception as exc:  # noqa: BLE001 - any class's __setstate__ may raise anything
            _log.debug("not caching a decoded value of %s any more: %s", _named(key), exc)
            self._put(key, _REFUSED, _VALUE_OVERHEAD + _key_bytes(key))
            return MISS

    def copy_or_decode(self, key: tuple[Hashable, ...], decode: Callable[[], Any]) -> Any:
        """:meth:`value_copy` of ``key``; on a miss, ``decode()``, kept for the next call
        (:meth:`keep_value`) and returned as it is.

        >>> cache = ImmutableCache()
        >>> cache.copy_or_decode(("serde", "msgpack", "k"), lambda: [1]), len(cache)
        ([1], 1)
        """
        copy = self.value_copy(key)
        if copy is not MISS:
            return copy
        value = decode()
        self.keep_value(key, value)
        return value

    def keep_value(self, key: tuple[Hashable, ...], value: Any) -> None:
        """Keep a copy of ``value``, just decoded from blobs that never change, for the next
        :meth:`value_copy`. The key must name everything the decoded value depends on: the
        serializer (its :meth:`serializer_tag`: an allow-list decides what decodes), the
        payload type and the blob keys in order.

        A copy is what a fresh decode would give, except for what decoding computes without
        storing it (a ``default_factory`` of a field the serializer leaves out, a
        ``__post_init__`` with side effects): the copy repeats the first decode's. A value pickle
        cannot copy (or copy back) is decoded on every read, and not offered to pickle again.
        Bytes the key itself holds (a write's, see ``reading.write_loader``) count in the bound."""
        if self._get(key) is _REFUSED:
            return
        key_bytes = _key_bytes(key)
        try:
            data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - any class's __reduce__ may raise anything
            _log.debug("not caching a decoded value of %s: %s", _named(key), exc)
            self._put(key, _REFUSED, _VALUE_OVERHEAD + key_bytes)
            return
        self._put(key, data, _VALUE_OVERHEAD + key_bytes + len(data))

    def put(self, key: str, value: Segment | Archive | bytes) -> None:
        if isinstance(value, bytes):
            size = _VALUE_OVERHEAD + len(value)
        elif isinstance(value, Archive):
            size = _VALUE_OVERHEAD + 64 * len(value.refs)
        else:
            size = _STATE_OVERHEAD + _records_size(value.records, value.payloads)
        self._put(key, value, size)

    def _put(self, key: Hashable, value: Segment | Archive | bytes, size: int) -> None:
        if size > self._max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[key] = (value, size)
            self._bytes += size
            while self._bytes > self._max_bytes:
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
