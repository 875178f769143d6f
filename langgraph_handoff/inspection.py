"""What the ``langgraph-handoff`` inspection commands compute: JSON-ready views of threads,
checkpoints and their differences, and a verification of everything a store holds.

Kept apart from ``cli.py`` (argument parsing, printing) so scripts and tests can call it too.

Every walk here reports an object it cannot read (a damaged head, a stray key under ``heads/``)
as a :class:`~langgraph_handoff._format.damage.DamagedObject` or a :class:`Problem` and goes on
with the rest; a read of one checkpoint raises instead, naming the key.
"""

from __future__ import annotations

import itertools
import json
import math
import shlex
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from langgraph_handoff._format import envelope, keys
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.records import Head, Inline, Record, blob_refs
from langgraph_handoff.checkpoint import driver
from langgraph_handoff.checkpoint.driver import fetch, fetch_many
from langgraph_handoff.checkpoint.plans import metadata_index
from langgraph_handoff.checkpoint.plans.listing import UNREADABLE
from langgraph_handoff.checkpoint.plans.reading import check_part, part_sizes
from langgraph_handoff.checkpoint.plans.spaces import plan_team_spaces
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.errors import (
    CorruptObjectError,
    EnvelopeError,
    InvalidConfigError,
    ThreadNotFoundError,
)
from langgraph_handoff.stores.base import Get, ObjectInfo, StoredObject
from langgraph_handoff.stores.prefixed import PrefixedStore, unprefixed

__all__ = [
    "Problem",
    "ThreadHeads",
    "ThreadsListing",
    "diff_checkpoints",
    "jsonable",
    "list_threads",
    "show_checkpoint",
    "thread_heads",
    "verify_store",
]


_INTERNAL = ("branch:", "__")


def jsonable(value: Any) -> Any:
    """Channel values as JSON: messages as their dicts, pydantic models dumped, the rest by str."""
    if isinstance(value, BaseMessage):
        out = {"type": value.type, "content": value.content}
        for extra in ("name", "id", "tool_calls", "tool_call_id", "status"):
            v = getattr(value, extra, None)
            if v:
                out[extra] = jsonable(v)
        return out
    if hasattr(value, "model_dump"):
        return jsonable(value.model_dump(mode="json"))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, bytes):
        return {"bytes": len(value)}
    return str(value)


def _config(thread_id: str, ns: str, checkpoint_id: str | None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


# --------------------------------------------------------------------------------------------------
# Heads: which threads there are, and what one thread holds
# --------------------------------------------------------------------------------------------------


def _read_heads(saver: ObjectStoreSaver, infos: list[ObjectInfo]) -> Iterator[tuple[str, Head | DamagedObject]]:
    """Each listed head key with its head, or what is wrong with it; 64 GETs per round trip.
    Keys that are not head keys are reported without a read."""
    heads = []
    for info in infos:
        if keys.is_head_key(info.key):
            heads.append(info.key)
        else:
            yield info.key, DamagedObject.foreign(info.key)
    for start in range(0, len(heads), 64):
        chunk = heads[start : start + 64]
        for key, obj in zip(chunk, fetch_many(saver.store, [Get(k) for k in chunk]), strict=True):
            if obj is not None:
                yield key, _head_or_damage(key, obj)


def _head_or_damage(key: str, obj: StoredObject) -> Head | DamagedObject:
    try:
        head = rec_io.decode_head(obj.body, key=key)
        if keys.head_key(head.thread_id, head.checkpoint_ns) != key:
            raise CorruptObjectError(key, "head belongs to another thread or namespace (misplaced object)", "misplaced")
    except UNREADABLE as exc:
        return DamagedObject.from_error(exc, key)
    return head


@dataclass
class ThreadsListing:
    """What ``langgraph-handoff threads`` shows: one row per thread holding checkpoints
    (``thread_id``, its ``namespaces``, the root's ``latest`` checkpoint id), and every object
    under ``heads/`` that could not be taken for a head (``damaged``), skipped."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    damaged: list[DamagedObject] = field(default_factory=list)


def list_threads(saver: ObjectStoreSaver) -> ThreadsListing:
    """Every thread that holds checkpoints; a head that cannot be read, or a key that is not a
    head key, is reported in ``damaged`` and the listing goes on. Requests: 1 LIST per 1000
    heads, 1 round trip of GETs per 64 heads."""
    rows: dict[str, dict[str, Any]] = {}
    out = ThreadsListing()
    for _key, found in _read_heads(saver, list(saver.store.list(keys.heads_prefix()))):
        if isinstance(found, DamagedObject):
            out.damaged.append(found)
        elif found.has_history:
            row = rows.setdefault(found.thread_id, {"thread_id": found.thread_id, "namespaces": [], "latest": None})
            row["namespaces"].append(found.checkpoint_ns)
            if found.checkpoint_ns == "":
                row["latest"] = found.latest_id
    for row in rows.values():
        row["namespaces"] = sorted(row["namespaces"])
    out.rows = sorted(rows.values(), key=lambda r: str(r["thread_id"]))
    return out


@dataclass
class ThreadHeads:
    """The heads of one thread as stored: ``heads`` (namespace -> head, the readable ones,
    emptied ones included) and ``damaged`` (heads that cannot be read, and keys under the
    thread's prefix that are not head keys)."""

    thread_id: str
    heads: dict[str, Head] = field(default_factory=dict)
    damaged: list[DamagedObject] = field(default_factory=list)

    @property
    def namespaces(self) -> list[str]:
        """The namespaces holding checkpoints, the root graph's ('') first."""
        return sorted(ns for ns, h in self.heads.items() if h.has_history)

    @property
    def unreadable(self) -> list[DamagedObject]:
        """Heads of the thread that cannot be read (stray keys left out)."""
        return [d for d in self.damaged if d.reason != "not_a_head"]

    @property
    def exists(self) -> bool:
        """Whether there is a thread: a head holding checkpoints, or one that cannot be read."""
        return bool(self.namespaces or self.unreadable)

    def require(self) -> ThreadHeads:
        """This, or :class:`~langgraph_handoff.errors.ThreadNotFoundError` if there is no thread."""
        if not self.exists:
            raise ThreadNotFoundError(self.thread_id)
        return self


def thread_heads(saver: ObjectStoreSaver, thread_id: str) -> ThreadHeads:
    """Read every head of one thread (1 LIST, 1 round trip of GETs per 64 namespaces); what
    cannot be read is reported, not raised."""
    tid = keys.validate_thread_id(thread_id)
    out = ThreadHeads(tid)
    for _key, found in _read_heads(saver, list(saver.store.list(keys.heads_prefix(tid)))):
        if isinstance(found, DamagedObject):
            out.damaged.append(found)
        else:
            out.heads[found.checkpoint_ns] = found
    return out


def show_checkpoint(
    saver: ObjectStoreSaver, thread_id: str, checkpoint_id: str | None = None, ns: str = ""
) -> dict[str, Any]:
    """One checkpoint (the latest by default) with its values, metadata and pending writes.
    Raises :class:`~langgraph_handoff.errors.ThreadNotFoundError` for a thread the store does
    not hold, ``InvalidConfigError`` for a namespace or checkpoint it does not have."""
    tup = saver.get_tuple(_config(thread_id, ns, checkpoint_id))
    if tup is None:
        present = thread_heads(saver, thread_id).require()
        if ns not in present.namespaces:
            known = ", ".join(repr(n) for n in present.namespaces) or "none"
            raise InvalidConfigError(
                f"thread {thread_id!r} has no checkpoints in namespace {ns!r} (its namespaces: {known}); "
                f"`langgraph-handoff history URL {shlex.quote(thread_id)}` lists its checkpoints"
            )
        raise InvalidConfigError(
            f"thread {thread_id!r} namespace {ns!r} has no checkpoint {checkpoint_id!r}: "
            f"`langgraph-handoff history URL {shlex.quote(thread_id)}` lists its checkpoints"
        )
    return {
        "thread_id": thread_id,
        "checkpoint_ns": ns,
        "checkpoint_id": tup.config["configurable"]["checkpoint_id"],
        "parent": (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
        "metadata": jsonable(dict(tup.metadata)),
        # LangGraph's own routing channels ("branch:to:x", "__start__") are plumbing, not state
        "values": jsonable({k: v for k, v in tup.checkpoint["channel_values"].items() if not k.startswith(_INTERNAL)}),
        "versions": jsonable(tup.checkpoint["channel_versions"]),
        "pending_writes": [{"task": t, "channel": c, "value": jsonable(v)} for t, c, v in tup.pending_writes or []],
    }


def diff_checkpoints(saver: ObjectStoreSaver, thread_id: str, a: str, b: str, ns: str = "") -> dict[str, Any]:
    """What changed from checkpoint ``a`` to checkpoint ``b``, channel by channel. For list
    channels that grew (messages), the items appended are shown instead of the whole list."""
    left = show_checkpoint(saver, thread_id, a, ns)["values"]
    right = show_checkpoint(saver, thread_id, b, ns)["values"]
    changed: dict[str, Any] = {}
    for ch in sorted(set(left) & set(right)):
        if left[ch] == right[ch]:
            continue
        old, new = left[ch], right[ch]
        if isinstance(old, list) and isinstance(new, list) and new[: len(old)] == old:
            changed[ch] = {"appended": new[len(old) :]}
        else:
            changed[ch] = {"from": old, "to": new}
    return {
        "from": a,
        "to": b,
        "added": {ch: right[ch] for ch in sorted(set(right) - set(left))},
        "removed": sorted(set(left) - set(right)),
        "changed": changed,
    }


@dataclass
class Problem:
    """One thing ``verify_store`` found wrong: the key, a short kind (``format_marker``,
    ``foreign_object``, the error's class name, ...) and what exactly."""

    key: str
    kind: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "kind": self.kind, "detail": self.detail}


@dataclass
class VerifyReport:
    heads: int = 0
    segments: int = 0
    writes: int = 0
    blobs: int = 0
    problems: list[Problem] = field(default_factory=list)
    #: objects nothing references (left by a crash or a lost race; ``delete_thread`` removes them).
    #: Not problems: readers never look at them, and a writer may be about to reference one.
    unreferenced: list[str] = field(default_factory=list)
    #: storage format version -> heads, segments and writes documents in it (older than the
    #: current: ``migrate`` rewrites them)
    formats: Counter[int] = field(default_factory=Counter)
    #: the same for blobs, counted apart: their framing has not changed since format 1, so
    #: ``migrate`` leaves them as they are
    blob_formats: Counter[int] = field(default_factory=Counter)
    #: state-schema version -> checkpoints written in it
    schemas: Counter[int] = field(default_factory=Counter)
    #: the store's format marker (``meta/format``): its format version and what it records,
    #: None when the store has none (``setup`` writes it; a store used without it has none)
    marker: dict[str, Any] | None = None
    #: metadata-index entries that name a namespace no longer there, or a value none of its
    #: checkpoints carries any more (a prune, a sweep): not problems, a filtered list only
    #: reads that namespace for nothing (``plans/metadata_index.py``)
    stale_index_entries: int = 0
    #: the whole store was checked and holds nothing: no marker, no object at all
    empty: bool = False

    def add(self, other: VerifyReport, prefix: str) -> None:
        """Count in what ``other`` found in the keys under ``prefix`` (a team's space)."""
        self.heads += other.heads
        self.segments += other.segments
        self.writes += other.writes
        self.blobs += other.blobs
        self.problems += [Problem(prefix + p.key, p.kind, p.detail) for p in other.problems]
        self.unreferenced += [prefix + k for k in other.unreferenced]
        self.formats.update(other.formats)
        self.blob_formats.update(other.blob_formats)
        self.schemas.update(other.schemas)
        self.stale_index_entries += other.stale_index_entries

    def as_dict(self) -> dict[str, Any]:
        return {
            "heads": self.heads,
            "segments": self.segments,
            "writes": self.writes,
            "blobs": self.blobs,
            "problems": [p.as_dict() for p in self.problems],
            "unreferenced": self.unreferenced,
            "formats": {str(k): v for k, v in sorted(self.formats.items())},
            "blob_formats": {str(k): v for k, v in sorted(self.blob_formats.items())},
            "schemas": {str(k): v for k, v in sorted(self.schemas.items())},
            "marker": self.marker,
            "stale_index_entries": self.stale_index_entries,
            "empty": self.empty,
        }


def _heads(saver: ObjectStoreSaver, thread_id: str | None, report: VerifyReport) -> Iterator[str]:
    """The head keys to check; any other key under ``heads/`` is a problem (``foreign_object``),
    never read."""
    for info in saver.store.list(keys.heads_prefix(thread_id)):
        if keys.is_head_key(info.key):
            yield info.key
        else:
            found = DamagedObject.foreign(info.key)
            report.problems.append(Problem(found.key, "foreign_object", found.detail))


def _check_marker(saver: ObjectStoreSaver, report: VerifyReport) -> None:
    """The format marker: a marker envelope this version can read, holding langgraph-handoff's
    record. A store without one is not a problem (it was used without ``setup``)."""
    key = keys.FORMAT_MARKER_KEY
    obj = fetch(unprefixed(saver.store), key)  # a team space's saver: the store's own marker
    if obj is None:
        return
    try:
        marker, env = envelope.decode_msgpack(obj.body, key=key, expect=envelope.Kind.MARKER)
    except EnvelopeError as exc:
        report.problems.append(Problem(key, type(exc).__name__, str(exc)))
        return
    if not isinstance(marker, dict) or marker.get("package") != "langgraph-handoff":
        report.problems.append(
            Problem(key, "format_marker", f"not langgraph-handoff's format marker (holds {str(marker)[:80]!r})")
        )
        return
    if not _plain(marker):
        report.problems.append(
            Problem(key, "format_marker", f"the format marker holds what no writer puts there ({str(marker)[:80]!r})")
        )
        return
    report.marker = {"format": env.format_version, **{k: v for k, v in marker.items() if k != "package"}}


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is plain data as the package writes into the marker (text keys, no
    bytes, finite numbers, a few levels deep): the report repeats the marker's fields, and
    ``verify --json`` prints them (a bytes key raised out of ``json.dumps``)."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if depth > 4:
        return False
    if isinstance(value, list):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


def verify_store(saver: ObjectStoreSaver, thread_id: str | None = None) -> VerifyReport:
    """Read every object (of one thread, or all) and check it against the heads:

    * every object: envelope, format version, checksum, shape (``CorruptObjectError``,
      ``EnvelopeVersionError``);
    * every segment a head lists exists; every value a checkpoint references is in its payload
      table, and every large value exists (``missing_segment``, ``missing_value``,
      ``dangling_reference``);
    * every blob a tail or pieces were written over is what a read of them checks: the size its
      checkpoint recorded, and a base's list frame (``CorruptObjectError``, as the read raises);
    * every writes document sits under the key of its own thread, namespace and checkpoint, and a
      copy folded into a checkpoint with the same ETag holds the same writes (``misplaced_writes``,
      ``folded_mismatch``);
    * what nothing references is listed apart (``unreferenced``), and formats and state-schema
      versions are counted;
    * keys under ``heads/`` that are not head keys (``foreign_object``: a stray file, never read);
    * the store's format marker (``meta/format``): an envelope this version reads, holding
      langgraph-handoff's marker (``format_marker``); a store without one is fine, but a place
      with no marker and no object of ours, only others, is not a store (``not_a_store``), and
      one with no object at all is ``empty``;
    * the metadata index: a checkpoint carrying a value of a key ``meta/index`` declares
      complete, with no entry for it (``missing_index_entry``); entries naming what is gone are
      counted in ``stale_index_entries``, not problems.

    A head that cannot be read is a problem and the walk goes on. Problems make
    ``langgraph-handoff verify`` exit 1.

    The whole store (no ``thread_id``) includes the threads of every agent team's members, which
    live in their team's space (``teams/{TM}/members/``, ``ObjectStoreSaver.under``): their keys
    are reported with that prefix.
    """
    report = VerifyReport()
    _check_marker(saver, report)
    _verify_heads(saver, thread_id, report)
    if thread_id is None and not isinstance(saver.store, PrefixedStore):
        for prefix in driver.run(saver.store, plan_team_spaces()):
            space = VerifyReport()
            _verify_heads(saver.under(prefix), None, space)
            report.add(space, prefix)
        if not report.heads and report.marker is None and not report.problems:
            _check_is_a_store(saver, report)
    return report


#: the top-level prefixes of the package's keys (:mod:`langgraph_handoff._format.keys`)
_OUR_ROOTS = ("heads/", "data/", "meta/", "index/", "workers/", "memory/", "teams/", keys.AUDIT_ROOT)


def _check_is_a_store(saver: ObjectStoreSaver, report: VerifyReport) -> None:
    """A place with no marker, no head and no object of the package's key layout, but other
    objects, is not a store (``not_a_store``): ``verify`` on the wrong directory (the
    repository's ``docs/``) or one level above the threads said ``ok``. A place that holds
    nothing at all is :attr:`VerifyReport.empty` instead: the wrong place too, or a store whose
    threads were all deleted and that ``setup`` never marked (the command line exits 1 on
    both). Called only when nothing else was found, so the listing stops at the first object
    of ours, or reads a place that holds none."""
    others: list[str] = []
    for info in saver.store.list(""):
        if info.key.startswith(_OUR_ROOTS):
            return
        others.append(info.key)
    if not others:
        report.empty = True
        return
    below = sorted({k[: k.index("/heads/") + 1] for k in others if "/heads/" in k})
    hint = f" (a store seems to be under {below[0]!r}: add it to the URL's path)" if below else ""
    report.problems.append(
        Problem(
            keys.FORMAT_MARKER_KEY,
            "not_a_store",
            f"no store here: no format marker, no thread, and {len(others)} object(s), none of them "
            f"langgraph-handoff's{hint}. Check the URL; `setup` makes a store here",
        )
    )


def _verify_heads(saver: ObjectStoreSaver, thread_id: str | None, report: VerifyReport) -> None:
    store = saver.store
    index = _IndexCheck.read(saver, thread_id)
    for hkey in _heads(saver, thread_id, report):
        obj = fetch(store, hkey)
        if obj is None:
            continue
        report.heads += 1
        head = _decoded(rec_io.decode_head, obj.body, hkey, report)
        if head is None:
            continue
        if keys.head_key(head.thread_id, head.checkpoint_ns) != hkey:
            report.problems.append(
                Problem(hkey, "CorruptObjectError", "head belongs to another thread or namespace (misplaced object)")
            )
            continue
        report.formats[head.format_version] += 1
        tid, ns = head.thread_id, head.checkpoint_ns
        present = {i.key: i.etag for i in store.list(keys.data_prefix(tid, ns))}
        referenced: set[str] = set()
        checkpoints: dict[str, Record] = {}
        tables = [(hkey, head.records, head.payloads)]
        refs = head.segments
        if head.archive is not None:
            akey = keys.segment_key(tid, ns, head.archive.key)
            referenced.add(akey)
            aobj = fetch(store, akey)
            archive = None if aobj is None else _decoded(rec_io.decode_archive, aobj.body, akey, report)
            if aobj is None:
                report.problems.append(Problem(akey, "missing_archive", f"named by {hkey} but absent"))
            elif archive is not None:
                refs += archive.refs
                if len(archive.refs) != head.archive.count:
                    report.problems.append(
                        Problem(akey, "archive_mismatch", f"{hkey} says it lists {head.archive.count} segments")
                    )
        for ref in refs:
            skey = keys.segment_key(tid, ns, ref.key)
            referenced.add(skey)
            sobj = fetch(store, skey)
            if sobj is None:
                report.problems.append(Problem(skey, "missing_segment", f"listed by {hkey} but absent"))
                continue
            report.segments += 1
            seg = _decoded(rec_io.decode_segment, sobj.body, skey, report)
            if seg is not None:
                report.formats[seg.format_version] += 1
                tables.append((skey, seg.records, seg.payloads))
        parts: dict[str, set[tuple[int, bool]]] = {}
        for where, recs, table in tables:
            checkpoints.update(recs)
            referenced |= _check_refs(head, recs, table, where, present, report, parts)
        report.schemas.update(r.schema for r in checkpoints.values())
        index.check(saver, hkey, tid, ns, checkpoints.values(), report)
        for key in sorted(present):
            if "/w/" in key:
                report.writes += 1
                if _check_writes(store, key, tid, ns, checkpoints, report):
                    referenced.add(key)
            elif "/b/" in key:
                report.blobs += 1
                wobj = fetch(store, key)
                env = None if wobj is None else _decoded(_decode_blob_envelope, wobj.body, key, report)
                if env is not None:
                    report.blob_formats[env.format_version] += 1
                    _check_parts(key, env.body, parts.get(key, ()), report)
        report.unreferenced += sorted(set(present) - referenced)
    report.stale_index_entries += index.leftover()


@dataclass
class _IndexCheck:
    """The metadata index against the checkpoints: a value of a key ``meta/index`` declares
    complete that a checkpoint carries without an entry is a problem (``missing_index_entry``:
    a filtered list would not find it; ``langgraph-handoff index rebuild`` writes it); an entry
    for a namespace or value no longer there is only counted (stale)."""

    complete: tuple[str, ...]
    #: (encoded thread, encoded namespace) -> {(encoded key, digest)} of the by-thread records
    entries: dict[tuple[str, str], set[tuple[str, str]]]

    @classmethod
    def read(cls, saver: ObjectStoreSaver, thread_id: str | None) -> _IndexCheck:
        complete = driver.run(saver.store, metadata_index.plan_complete_keys(saver, fresh=True))
        existing = driver.run(saver.store, metadata_index.plan_existing(saver, thread_id))
        return cls(tuple(sorted(complete)), existing)

    def check(self, saver: ObjectStoreSaver, hkey: str, tid: str, ns: str, records: Any, report: VerifyReport) -> None:
        held = self.entries.pop((keys.encode_segment(tid), keys.encode_segment(ns)), set())
        carried = metadata_index.namespace_digests(saver, records, self.complete) if self.complete else set()
        for name, _digest in sorted(carried - held):
            report.problems.append(
                Problem(
                    hkey,
                    "missing_index_entry",
                    f"a checkpoint carries a value of metadata key {keys.decode_segment(name)!r}, which meta/index "
                    "declares complete, without an index entry: store-wide filters on it miss this thread "
                    "(`langgraph-handoff index rebuild` writes it; every writer must index the same keys)",
                )
            )
        report.stale_index_entries += len(held - carried) if self.complete else 0

    def leftover(self) -> int:
        """Entries of namespaces that have no head any more."""
        return sum(len(v) for v in self.entries.values())


def _check_writes(
    store: Any, key: str, tid: str, ns: str, checkpoints: dict[str, Record], report: VerifyReport
) -> bool:
    """Check one writes document; True if it belongs to a checkpoint the namespace holds."""
    obj = fetch(store, key)
    if obj is None:
        return True  # deleted since the listing
    doc = _decoded(rec_io.decode_writes, obj.body, key, report)
    if doc is None:
        return True
    report.formats[doc.format_version] += 1
    if keys.writes_key(doc.thread_id, doc.checkpoint_ns, doc.checkpoint_id, doc.task_id) != key or (
        doc.thread_id,
        doc.checkpoint_ns,
    ) != (tid, ns):
        report.problems.append(Problem(key, "misplaced_writes", "holds the writes of another checkpoint or task"))
        return True
    folded = checkpoints.get(doc.checkpoint_id)
    copy = folded.writes.get(doc.task_id) if folded is not None else None
    if copy is not None and copy.etag == obj.etag and copy.items != doc.items:
        report.problems.append(
            Problem(key, "folded_mismatch", f"checkpoint {doc.checkpoint_id} holds a different copy of these writes")
        )
    return folded is not None


def _decode_blob_envelope(body: bytes, *, key: str) -> envelope.Envelope:
    return envelope.decode(body, key=key, expect=envelope.Kind.BLOB)


def _decoded(decoder: Any, body: bytes, key: str, report: VerifyReport) -> Any:
    """``decoder(body)`` (envelope, version, checksum, shape), or None with the problem reported."""
    try:
        return decoder(body, key=key)
    except EnvelopeError as exc:
        report.problems.append(Problem(key, type(exc).__name__, str(exc)))
        return None


def _check_parts(key: str, data: bytes, expected: Any, report: VerifyReport) -> None:
    """A blob that tails or pieces were written over: what a read of them checks."""
    for size, base in sorted(expected):
        try:
            check_part(key, data, size, base=base)
        except CorruptObjectError as exc:
            report.problems.append(Problem(key, type(exc).__name__, str(exc)))
            return


def _check_refs(
    head: Head, recs: dict[str, Record], table: Any, where: str, present: Any, report: VerifyReport,
    parts: dict[str, set[tuple[int, bool]]],
) -> set[str]:  # fmt: skip
    """Report values the checkpoints in ``recs`` reference but ``table`` lacks, and large values
    missing from the store; return the blob keys referenced, and note in ``parts`` what each
    blob a tail or pieces were written over must be (:func:`check_part`)."""
    blobs = set()
    for rec in recs.values():
        for ch, (origin, _version) in rec.values.items():
            payload = table.get(origin, {}).get(ch)
            if payload is None:
                report.problems.append(
                    Problem(where, "missing_value", f"checkpoint {rec.id} references a value of {ch!r} it lacks")
                )
            elif refs := blob_refs(origin, payload):
                for ref, expected in itertools.zip_longest(refs, part_sizes(payload)):
                    bkey = keys.blob_key(head.thread_id, head.checkpoint_ns, *ref)
                    blobs.add(bkey)
                    if expected is not None:
                        parts.setdefault(bkey, set()).add(expected)
                    if bkey not in present:
                        report.problems.append(
                            Problem(bkey, "dangling_reference", f"{where} references channel {ch!r} here")
                        )
            elif isinstance(payload, Inline) and payload.spill:
                blobs.add(keys.blob_key(head.thread_id, head.checkpoint_ns, origin, payload.spill))
    return blobs


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str)
