"""The metadata index: ``list(None, filter=...)`` reads only the threads that can match.

Without it, a store-wide filtered list reads every thread (2 requests each: 60,032 requests and
157 s at 30,000 threads on Ceph RGW). With it, the namespaces holding ``metadata[key] == value``
are one prefix listing away (:mod:`langgraph_handoff._format.index_keys` has the layout), for
the keys ``Layout.indexed_metadata`` names.

**A hint, never the answer.** Every thread an entry names is read and filtered as the full walk
filters it, so a stale entry (a thread pruned, swept or deleted since) costs a read, never a
wrong result; an entry is only listed, never read, and nothing in it is trusted but its key
name. What is trusted is ``meta/index`` (complete or not), read through the saver's store like
every object: a signing saver refuses one no key signed, and its filters read every thread.
What must hold is the other direction: *no missing entry*. Kept so:

* a ``put`` writes the entries of its checkpoint's indexed values **before** the head
  compare-and-swap that commits it, whenever the head it swaps out carries no checkpoint with
  that value (decided again on every attempt, against the head that attempt replaces). A crash
  in between leaves an entry for a checkpoint that never landed: stale, not missing. A thread
  whose user never changes pays one batch of entry PUTs on the first put of each namespace,
  and nothing after;
* ``copy_thread`` writes the target's entries before its heads; ``delete_thread`` and a TTL
  sweep that deletes remove the entries they listed before the thread went (a put that lands
  afterwards writes fresh entries, with a fresh nonce, which they never listed);
* ``index rebuild`` (:func:`plan_rebuild`) reads every checkpoint of every namespace, writes
  the entries missing, and only then records the keys as complete in ``meta/index``. Until a key
  is recorded there, a filter on it reads every thread, as before: a store written by an older
  release (which wrote no entries) never answers with threads missing.

What the marker cannot know: a writer that does not index a key the marker declares (another
``Layout``, an older release) leaves its new threads out. Every process writing to a store must
index the same keys; ``verify`` reports a checkpoint whose value has no entry.

One residual race, stated: a *new namespace* written into a thread while ``delete_thread`` of
that very thread runs may keep its head and lose its entry (the delete listed the entry before
the head appeared). Deleting a thread while a run writes to it loses data anyway; ``index
rebuild`` repairs the entry.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph_handoff._format import envelope, keys
from langgraph_handoff._format import index_keys as ik
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.records import Head, Record
from langgraph_handoff.checkpoint.driver import Batch, Plan
from langgraph_handoff.checkpoint.plans import listing, reading, rewriting
from langgraph_handoff.checkpoint.plans.state import SaverState, chunks
from langgraph_handoff.errors import (
    ConflictError,
    CorruptObjectError,
    EnvelopeError,
    PreconditionFailedError,
    UndecodableValueError,
    UnknownOutcomeError,
)
from langgraph_handoff.stores.base import DeleteMany, Get, ListPage, Put

log = logging.getLogger("langgraph_handoff")

#: how long a reader trusts "this key is not complete" before reading ``meta/index`` again (a
#: rebuild elsewhere completes it); "complete" is kept for the process
MARKER_RECHECK_SECONDS = 30.0


#: stored metadata whose digests a saver remembers (then forgets them all: a put needs its
#: parent's, which it usually wrote itself a moment before)
DIGESTS_MEMO = 4096


@dataclass
class IndexMemo:
    """What this saver (and its ``with_lease`` copies) learned of ``meta/index``, and the
    digests of the indexed values of metadata it wrote or read, by the stored bytes: deciding
    whether a put needs entries then costs a dict lookup, not a decode of its parent's metadata
    (32 us a put with the Agent Server's metadata)."""

    complete: frozenset[str] = frozenset()
    read_at: float | None = None
    digests: dict[bytes, dict[str, str]] = field(default_factory=dict)

    def remember(self, stored: bytes, digests: dict[str, str]) -> None:
        if len(self.digests) >= DIGESTS_MEMO:
            self.digests = {}
        self.digests[stored] = digests


def _memo(saver: SaverState) -> IndexMemo:
    memo = saver._index_memo
    if not isinstance(memo, IndexMemo):
        memo = saver._index_memo = IndexMemo()
    return memo


# -- what a put writes ------------------------------------------------------------------------------


def digests_of(metadata: Mapping[str, Any], names: Iterable[str]) -> dict[str, str]:
    """``{key: digest}`` of the indexed values in ``metadata`` (keys it lacks, or holds a value
    equality cannot meet by digest, are left out)."""
    out = {}
    for name in names:
        if name in metadata:
            digest = ik.value_digest(metadata[name])
            if digest is not None:
                out[name] = digest
    return out


def _record_digests(saver: SaverState, rec: Record, names: Sequence[str]) -> dict[str, str]:
    if tuple(names) != saver.layout.indexed_metadata:  # (a rebuild or verify of other keys)
        return _decoded_digests(saver, rec, names)
    memo = _memo(saver)
    known = memo.digests.get(rec.metadata[1])
    if known is not None:
        return known
    found = _decoded_digests(saver, rec, names)
    memo.remember(rec.metadata[1], found)
    return found


def _decoded_digests(saver: SaverState, rec: Record, names: Sequence[str]) -> dict[str, str]:
    try:
        with reading.user_data("metadata", f"checkpoint {rec.id!r}"):
            metadata = saver.serde.loads_typed(rec.metadata)
    except UndecodableValueError:  # metadata that cannot be read carries nothing to rely on
        return {}
    return digests_of(metadata, names) if isinstance(metadata, Mapping) else {}


def entry_puts(
    saver: SaverState,
    head: Head | None,
    metadata: Mapping[str, Any],
    stored: bytes,
    parent_id: str | None,
    thread_id: str,
    ns: str,
) -> list[Put]:
    """The entries to write before swapping ``head`` for one holding a checkpoint with
    ``metadata`` (``stored``: its serialised form): those of its indexed values that neither
    the parent nor the latest checkpoint in ``head`` carries (their writer wrote the entries
    before committing them)."""
    names = saver.layout.indexed_metadata
    if not names:
        return []
    wanted = digests_of(metadata, names)
    if not wanted:
        return []
    _memo(saver).remember(stored, wanted)  # the next put's parent
    if head is not None:
        for rid in {parent_id, head.latest_id}:
            rec = head.records.get(rid) if rid is not None else None
            if rec is not None:
                carried = _record_digests(saver, rec, names)
                wanted = {k: d for k, d in wanted.items() if carried.get(k) != d}
                if not wanted:
                    return []
    return _puts_for(thread_id, ns, sorted(wanted.items()))


def _puts_for(thread_id: str, ns: str, pairs: list[tuple[str, str]]) -> list[Put]:
    nonce = secrets.token_hex(8)
    puts = [Put(ik.entry_key(k, d, thread_id, ns, nonce), b"") for k, d in pairs]
    for chunk in chunks(pairs, ik.BY_THREAD_PAIRS):
        puts.append(Put(ik.by_thread_name(thread_id, ns, nonce, list(chunk)), b""))
    return puts


# -- the marker ---------------------------------------------------------------------------------------


def _decode_marker(obj: Any) -> tuple[frozenset[str], Any]:
    marker, _env = envelope.decode_msgpack(obj.body, key=obj.key, expect=envelope.Kind.MARKER)
    index = marker.get("index") if isinstance(marker, dict) else None
    complete = index.get("complete") if isinstance(index, dict) else None
    if not isinstance(complete, list) or not all(isinstance(k, str) for k in complete):
        raise CorruptObjectError(obj.key, "not an index marker (no list of complete keys)", "malformed")
    return frozenset(complete), marker


def plan_complete_keys(saver: SaverState, *, fresh: bool = False) -> Plan[frozenset[str]]:
    """The keys ``meta/index`` declares complete (1 GET, remembered; "not complete" is checked
    again after :data:`MARKER_RECHECK_SECONDS`). A marker that cannot be read declares nothing:
    filters then read every thread, as without an index."""
    memo = _memo(saver)
    now = time.monotonic()
    if not fresh and memo.read_at is not None and now - memo.read_at < MARKER_RECHECK_SECONDS:
        return memo.complete
    obj = yield Get(ik.INDEX_MARKER_KEY)
    complete: frozenset[str] = frozenset()
    if obj is not None:
        try:
            complete, _ = _decode_marker(obj)
        except EnvelopeError as exc:
            listing.report_damage(DamagedObject.from_error(exc, ik.INDEX_MARKER_KEY), None, "the metadata index")
    memo.complete, memo.read_at = complete, now
    return complete


_UNREAD: Any = object()


def plan_declare(saver: SaverState, names: Sequence[str], marker_obj: Any = _UNREAD) -> Plan[frozenset[str]]:
    """Add ``names`` to the keys ``meta/index`` declares complete, by compare-and-swap
    (``marker_obj``: the marker object as just read, None if absent, to save reading it again)."""
    for _ in range(saver.layout.max_attempts):
        obj = (yield Get(ik.INDEX_MARKER_KEY)) if marker_obj is _UNREAD else marker_obj
        marker_obj = _UNREAD
        complete, marker = _decode_marker(obj) if obj is not None else (frozenset(), None)
        wanted = complete | frozenset(names)
        if obj is not None and wanted == complete:
            break
        record = dict(marker) if isinstance(marker, dict) else {"package": "langgraph-handoff"}
        record["index"] = {"complete": sorted(wanted)}
        body = envelope.encode(envelope.Kind.MARKER, envelope.packb(record))
        try:
            yield (
                Put(ik.INDEX_MARKER_KEY, body, if_match=obj.etag)
                if obj
                else Put(ik.INDEX_MARKER_KEY, body, if_none_match=True)
            )
            break
        except (PreconditionFailedError, UnknownOutcomeError):
            continue  # read again: a concurrent rebuild's marker, or ours landed
    else:
        raise ConflictError(f"{ik.INDEX_MARKER_KEY} kept changing while it was written; run the rebuild again")
    memo = _memo(saver)
    memo.complete, memo.read_at = wanted, time.monotonic()
    return wanted


def plan_declare_if_empty(saver: SaverState) -> Plan[None]:
    """``setup()`` on a store holding no thread yet: its index is trivially complete, so the
    keys this saver indexes are declared at once (1 GET of the marker; on a fresh store, 1 LIST
    and 1 PUT more). A store that already holds threads waits for ``index rebuild``."""
    names = saver.layout.indexed_metadata
    if not names:
        return None
    obj = yield Get(ik.INDEX_MARKER_KEY)
    if obj is not None and set(names) <= _decode_marker(obj)[0]:
        return None
    page = yield ListPage(keys.heads_prefix(), max_keys=1)
    if not page.items:
        yield from plan_declare(saver, names, obj)
    return None


# -- what a filtered list reads -----------------------------------------------------------------------


def plan_candidates(saver: SaverState, filter: Mapping[str, Any] | None) -> Plan[list[str] | None]:
    """The head keys that can hold a checkpoint matching ``filter``, in key order (thread by
    thread, as a full walk goes), or None when no key of the filter has a complete index
    (read every thread). Costs 1 GET of the marker (remembered) and 1 LIST per 1,000 entries of
    each indexed key in the filter; the lists are intersected."""
    if not filter:
        return None
    usable = {k: d for k, v in filter.items() if (d := ik.value_digest(v)) is not None}
    if not usable:
        return None
    complete = yield from plan_complete_keys(saver)
    usable = {k: d for k, d in usable.items() if k in complete}
    if not usable:
        return None
    found: set[str] | None = None
    for name, digest in sorted(usable.items()):
        prefix = ik.value_prefix(name, digest)
        heads = set()
        for info in (yield from listing.list_all(saver, prefix)):
            hk = ik.parse_entry_key(info.key, prefix)
            if hk is not None:
                heads.add(hk)
        found = heads if found is None else found & heads
        if not found:
            return []
    return sorted(found or ())


# -- delete and copy ----------------------------------------------------------------------------------


def plan_by_thread(saver: SaverState, thread_id: str) -> Plan[list[str]]:
    """The by-thread records of a thread's entries (1 LIST per 1,000)."""
    return [i.key for i in (yield from listing.list_all(saver, ik.by_thread_prefix(thread_id)))]


def entry_keys_of(by_thread: Iterable[str], namespaces: Iterable[str] | None = None) -> list[str]:
    """Every entry key the by-thread records name, and the records themselves (what a delete
    removes); with ``namespaces``, only theirs."""
    wanted = None if namespaces is None else {keys.encode_segment(n) for n in namespaces}
    out: list[str] = []
    for name in by_thread:
        parsed = ik.parse_by_thread_name(name)
        if parsed is None:
            continue  # not ours: never deleted
        t, n, pairs = parsed
        if wanted is not None and n not in wanted:
            continue
        nonce = name.rsplit("/", 1)[1].split(".", 1)[0]
        out += [f"{ik.INDEX_ROOT}{k}/{d}/{t}/{n}/{nonce}" for k, d in pairs]
        out.append(name)
    return out


def plan_delete_entries(by_thread: Sequence[str], namespaces: Iterable[str] | None = None) -> Plan[None]:
    """Delete the entries listed in ``by_thread`` (forward ones first: a by-thread record stays
    until what it names is gone, so a delete stopped midway is finished by the next)."""
    doomed = entry_keys_of(by_thread, namespaces)
    if doomed:
        forward = tuple(k for k in doomed if not k.startswith(ik.by_thread_prefix()))
        if forward:
            yield DeleteMany(forward)
        yield DeleteMany(tuple(k for k in doomed if k.startswith(ik.by_thread_prefix())))
    return None


def plan_copy_entries(saver: SaverState, src: str, dst: str, namespaces: Iterable[str]) -> Plan[None]:
    """Give ``dst`` the entries ``src`` has in ``namespaces``: written before the copy's heads,
    so the copy is never found missing."""
    pairs_by_ns: dict[str, set[tuple[str, str]]] = {}
    wanted = {keys.encode_segment(n): n for n in namespaces}
    for name in (yield from plan_by_thread(saver, src)):
        parsed = ik.parse_by_thread_name(name)
        if parsed is not None and parsed[1] in wanted:
            pairs_by_ns.setdefault(wanted[parsed[1]], set()).update(parsed[2])
    puts: list[Put] = []
    for ns, pairs in sorted(pairs_by_ns.items()):
        decoded = [(keys.decode_segment(k), d) for k, d in sorted(pairs)]
        puts += _puts_for(dst, ns, [(k, d) for k, d in decoded if k is not None])
    for chunk in chunks(puts, 64):
        yield Batch(tuple(chunk))
    return None


# -- rebuild ------------------------------------------------------------------------------------------


@dataclass
class RebuildReport:
    """What ``index rebuild`` did: namespaces read, entries written, keys now complete."""

    namespaces: int = 0
    checkpoints: int = 0
    created: int = 0
    complete: list[str] = field(default_factory=list)
    damaged: list[DamagedObject] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespaces": self.namespaces,
            "checkpoints": self.checkpoints,
            "created": self.created,
            "complete": self.complete,
            "damaged": [d.as_dict() for d in self.damaged],
        }


def plan_existing(saver: SaverState, thread_id: str | None = None) -> Plan[dict[tuple[str, str], set[tuple[str, str]]]]:
    """``{(T, N): {(K, D), ...}}`` (segments encoded) of every by-thread record in the store
    (of one thread's, with ``thread_id``)."""
    out: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for info in (yield from listing.list_all(saver, ik.by_thread_prefix(thread_id))):
        parsed = ik.parse_by_thread_name(info.key)
        if parsed is not None:
            out.setdefault((parsed[0], parsed[1]), set()).update(parsed[2])
    return out


def namespace_digests(saver: SaverState, records: Iterable[Record], names: Sequence[str]) -> set[tuple[str, str]]:
    """``{(encoded key, digest)}`` of the indexed values the checkpoints carry."""
    found: set[tuple[str, str]] = set()
    for rec in records:
        found.update((keys.encode_segment(k), d) for k, d in _record_digests(saver, rec, names).items())
    return found


def plan_rebuild(
    saver: SaverState, names: Sequence[str], progress: Callable[[int, int], None] | None = None
) -> Plan[RebuildReport]:
    """Write every missing entry of ``names`` (read every checkpoint of every namespace), then
    declare them complete in ``meta/index``. Idempotent and safe to kill: entries already there
    are not written again, and the marker is written last."""
    report = RebuildReport()
    existing = yield from plan_existing(saver)
    scan = yield from listing.plan_heads_scan(saver, keys.heads_prefix())
    report.damaged += scan.damaged
    total = len(scan.ids)
    for done, (tid, ns) in enumerate(scan.ids, 1):
        try:
            head, _etag, segments, _archived = yield from rewriting.plan_load_namespace(saver, tid, ns)
        except listing.UNREADABLE as exc:
            report.damaged.append(DamagedObject.from_error(exc))
            continue
        if head is not None:
            records = [*head.records.values(), *(r for s in segments.values() for r in s.records.values())]
            report.checkpoints += len(records)
            have = existing.get((keys.encode_segment(tid), keys.encode_segment(ns)), set())
            missing = sorted(namespace_digests(saver, records, names) - have)
            if missing:
                pairs = [(k, d) for k, d in ((keys.decode_segment(k), d) for k, d in missing) if k is not None]
                yield Batch(tuple(_puts_for(tid, ns, pairs)))
                report.created += len(pairs)
        report.namespaces += 1
        if progress is not None:
            progress(done, total)
    report.complete = sorted((yield from plan_declare(saver, names)))
    return report
