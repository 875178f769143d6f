"""What the ``langgraph-handoff`` inspection commands compute: JSON-ready views of threads,
checkpoints and their differences, and a verification of everything a store holds.

Kept apart from ``cli.py`` (argument parsing, printing) so scripts and tests can call it too.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.errors import EnvelopeError, InvalidConfigError
from langgraph_handoff.format import envelope, keys
from langgraph_handoff.format import records as rec_io
from langgraph_handoff.format.records import BlobRef, Head, Record

__all__ = ["Problem", "diff_checkpoints", "jsonable", "show_checkpoint", "verify_store"]


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


def show_checkpoint(
    saver: ObjectStoreSaver, thread_id: str, checkpoint_id: str | None = None, ns: str = ""
) -> dict[str, Any]:
    """One checkpoint (the latest by default) with its values, metadata and pending writes."""
    tup = saver.get_tuple(_config(thread_id, ns, checkpoint_id))
    if tup is None:
        what = f"no checkpoint {checkpoint_id!r}" if checkpoint_id else "no checkpoints"
        raise InvalidConfigError(f"thread {thread_id!r} namespace {ns!r} has {what}: see `langgraph-handoff threads`")
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
        }


def _heads(saver: ObjectStoreSaver, thread_id: str | None) -> Iterator[str]:
    for info in saver.store.list(keys.heads_prefix(thread_id)):
        yield info.key


def verify_store(saver: ObjectStoreSaver, thread_id: str | None = None) -> VerifyReport:
    """Read every object (of one thread, or all) and check it against the heads:

    * every object: envelope, format version, checksum, shape (``CorruptObjectError``,
      ``EnvelopeVersionError``);
    * every segment a head lists exists; every value a checkpoint references is in its payload
      table, and every large value exists (``missing_segment``, ``missing_value``,
      ``dangling_reference``);
    * every writes document sits under the key of its own thread, namespace and checkpoint, and a
      copy folded into a checkpoint with the same ETag holds the same writes (``misplaced_writes``,
      ``folded_mismatch``);
    * what nothing references is listed apart (``unreferenced``), and formats and state-schema
      versions are counted.

    Problems make ``langgraph-handoff verify`` exit 1.
    """
    report = VerifyReport()
    store = saver.store
    for hkey in _heads(saver, thread_id):
        obj = store.get(hkey)
        if obj is None:
            continue
        report.heads += 1
        head = _decoded(rec_io.decode_head, obj.body, hkey, report)
        if head is None:
            continue
        report.formats[head.format_version] += 1
        tid, ns = head.thread_id, head.checkpoint_ns
        present = {i.key: i.etag for i in store.list(keys.data_prefix(tid, ns))}
        referenced: set[str] = set()
        checkpoints: dict[str, Record] = {}
        tables = [(hkey, head.records, head.payloads)]
        for ref in head.segments:
            skey = keys.segment_key(tid, ns, ref.key)
            referenced.add(skey)
            sobj = store.get(skey)
            if sobj is None:
                report.problems.append(Problem(skey, "missing_segment", f"listed by {hkey} but absent"))
                continue
            report.segments += 1
            seg = _decoded(rec_io.decode_segment, sobj.body, skey, report)
            if seg is not None:
                report.formats[seg.format_version] += 1
                tables.append((skey, seg.records, seg.payloads))
        for where, recs, table in tables:
            checkpoints.update(recs)
            referenced |= _check_refs(head, recs, table, where, present, report)
        report.schemas.update(r.schema for r in checkpoints.values())
        for key in sorted(present):
            if "/w/" in key:
                report.writes += 1
                if _check_writes(store, key, tid, ns, checkpoints, report):
                    referenced.add(key)
            elif "/b/" in key:
                report.blobs += 1
                wobj = store.get(key)
                env = None if wobj is None else _decoded(_decode_blob_envelope, wobj.body, key, report)
                if env is not None:
                    report.blob_formats[env.format_version] += 1
        report.unreferenced += sorted(set(present) - referenced)
    return report


def _check_writes(
    store: Any, key: str, tid: str, ns: str, checkpoints: dict[str, Record], report: VerifyReport
) -> bool:
    """Check one writes document; True if it belongs to a checkpoint the namespace holds."""
    obj = store.get(key)
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


def _check_refs(
    head: Head, recs: dict[str, Record], table: Any, where: str, present: Any, report: VerifyReport
) -> set[str]:
    """Report values the checkpoints in ``recs`` reference but ``table`` lacks, and large values
    missing from the store; return the blob keys referenced."""
    blobs = set()
    for rec in recs.values():
        for ch, (origin, _version) in rec.values.items():
            payload = table.get(origin, {}).get(ch)
            if payload is None:
                report.problems.append(
                    Problem(where, "missing_value", f"checkpoint {rec.id} references a value of {ch!r} it lacks")
                )
            elif isinstance(payload, BlobRef):
                bkey = keys.blob_key(head.thread_id, head.checkpoint_ns, origin, payload.digest)
                blobs.add(bkey)
                if bkey not in present:
                    report.problems.append(
                        Problem(bkey, "dangling_reference", f"{where} references channel {ch!r} here")
                    )
            elif payload.spill:
                blobs.add(keys.blob_key(head.thread_id, head.checkpoint_ns, origin, payload.spill))
    return blobs


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str)
