"""A head's segment manifest, kept the same size however long the thread grows.

A head lists the sealed segments of its namespace, and every put rewrites the head. Listing all
of them made a head grow by 40 bytes a segment: on a 1,000-turn chat with a ``DeltaChannel``
the manifest was 1.8 KB of each 14 KB head, and sealing sooner to keep heads small only made
it grow faster (``head_max_records=16``: 16.2 KiB written a turn at turn 50, 42.6 at turn
1,000). So the head carries only its newest segment references; the older ones live in one
*archive* object the head names (:class:`~langgraph_handoff._format.records.ArchiveRef`).

* **Folding.** A put whose head would list more than :data:`ARCHIVE_FOLD` segments writes an
  archive of all but the newest :data:`ARCHIVE_KEEP` (the previous archive's references
  included), create-only under a fresh nonce and *before* the head that names it, as a segment
  is. Once that head is stored, the archive it replaced is deleted. That is one more PUT and one
  DELETE every ``ARCHIVE_FOLD - ARCHIVE_KEEP`` seals.
* **Reading.** The latest checkpoint and the history the head's own segments hold need no
  archive. A full listing, or a checkpoint older than the head's segments, reads it once; it
  never changes, so the saver's immutable cache keeps it. An archive that is gone means the
  head was replaced meanwhile (a fold, a prune): the reader reads the head again.
* **Rewrites** (``prune``, ``migrate``, ``copy_thread``) work on every reference at once: they
  load the archive, store their new manifest in the head in full, and delete the archive that
  head no longer names. The next put folds it again.

An archive is rewritten whole at each fold, so the bytes a fold writes grow with the number of
segments: 40 bytes a segment every ``ARCHIVE_FOLD - ARCHIVE_KEEP`` seals, which on the
long-threads bench is under 0.2 KiB a turn at turn 1,000.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import replace

from langgraph_handoff._format import keys
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.records import Archive, ArchiveRef, Head, SegmentRef
from langgraph_handoff.checkpoint.driver import Plan
from langgraph_handoff.checkpoint.plans.state import SaverState
from langgraph_handoff.errors import CorruptObjectError
from langgraph_handoff.stores.base import Get

log = logging.getLogger(__name__)

#: a head keeps this many segment references after a fold ...
ARCHIVE_KEEP = 8
#: ... and folds once it would list more than this many
ARCHIVE_FOLD = 16


def archive_key(thread_id: str, ns: str, ref: ArchiveRef) -> str:
    return keys.segment_key(thread_id, ns, ref.key)


def cached_covering(saver: SaverState, thread_id: str, ns: str, head: Head, checkpoint_id: str) -> list[SegmentRef]:
    """The references of ``head`` whose range covers ``checkpoint_id``, the archived ones too if
    this process holds the archive. Never reads the store (for the writer's in-memory walks)."""
    refs = [r for r in head.segments if r.covers(checkpoint_id)]
    if not refs and head.archive is not None and head.archive.covers(checkpoint_id):
        archive = saver._cache.immutable.get(archive_key(thread_id, ns, head.archive))
        if isinstance(archive, Archive):
            refs = archive.covering(checkpoint_id)
    return refs


def load_archive(saver: SaverState, thread_id: str, ns: str, ref: ArchiveRef) -> Plan[Archive | None]:
    """The archive ``ref`` names, from the cache or one GET; None if it is gone."""
    key = archive_key(thread_id, ns, ref)
    cached = saver._cache.immutable.get(key)
    if isinstance(cached, Archive):
        return cached
    obj = yield Get(key)
    if obj is None:
        return None
    archive = rec_io.decode_archive(obj.body, key=key)
    if len(archive.refs) != ref.count:
        raise CorruptObjectError(
            key, f"the head says this archive lists {ref.count} segments; it lists {len(archive.refs)}", "malformed"
        )
    saver._cache.immutable.put(key, archive)
    return archive


def missing_archive(thread_id: str, ns: str, ref: ArchiveRef) -> CorruptObjectError:
    return CorruptObjectError(
        archive_key(thread_id, ns, ref), "the head names this archive of older segments but it is missing", "missing"
    )


def plan_refs(saver: SaverState, thread_id: str, ns: str, head: Head) -> Plan[tuple[SegmentRef, ...] | None]:
    """Every segment reference of ``head``, newest first; None if its archive is gone (the head
    was replaced since it was read: read it again)."""
    if head.archive is None:
        return head.segments
    archive = yield from load_archive(saver, thread_id, ns, head.archive)
    return None if archive is None else head.segments + archive.refs


def plan_unpacked(saver: SaverState, thread_id: str, ns: str, head: Head | None) -> Plan[Head | None]:
    """``head`` with every segment reference in ``segments`` and no archive, as rewrites and
    checks that compare manifests want it; None if its archive is gone."""
    if head is None or head.archive is None:
        return head
    refs = yield from plan_refs(saver, thread_id, ns, head)
    return None if refs is None else replace(head, segments=refs, archive=None)


def plan_fold(saver: SaverState, thread_id: str, ns: str, head: Head) -> Plan[tuple[Head, tuple[str, bytes] | None]]:
    """``head`` folded if it lists more than :data:`ARCHIVE_FOLD` segments, and the archive to
    write before it. A head whose archive is gone is stale: it is returned as it is (its
    compare-and-swap fails and the put starts again from the stored head)."""
    if len(head.segments) <= ARCHIVE_FOLD:
        return head, None
    try:
        refs = yield from plan_refs(saver, thread_id, ns, head)
    except CorruptObjectError as exc:
        # a damaged archive must not stop the thread: its head keeps every newer reference
        # (readers of the older history get the error; `verify` reports it)
        log.warning("not folding the segment list of thread %r namespace %r: %s", thread_id, ns, exc)
        return head, None
    if refs is None:
        return head, None
    older = refs[ARCHIVE_KEEP:]
    last_id = max(r.last_id for r in older)
    ref = ArchiveRef(
        keys.archive_suffix(last_id, secrets.token_hex(4)), len(older), min(r.first_id for r in older), last_id
    )
    body = rec_io.encode_archive(Archive(older), schema_version=saver.layout.schema_version)
    saver._cache.immutable.put(archive_key(thread_id, ns, ref), Archive(older))
    return replace(head, segments=refs[:ARCHIVE_KEEP], archive=ref), (archive_key(thread_id, ns, ref), body)


def replaced_archive(thread_id: str, ns: str, before: Head | None, after: Head | None) -> list[str]:
    """The archive ``before`` named that ``after`` does not: garbage once ``after`` is stored."""
    if before is None or before.archive is None:
        return []
    if after is not None and after.archive is not None and after.archive.key == before.archive.key:
        return []
    return [archive_key(thread_id, ns, before.archive)]
