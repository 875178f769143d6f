"""What the ``langgraph-handoff`` inspection commands compute: JSON-ready views of threads,
checkpoints and their differences, and a verification of everything a store holds.

Kept apart from ``cli.py`` (argument parsing, printing) so scripts and tests can call it too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from langgraph_handoff import keys
from langgraph_handoff.checkpoint import records as rec_io
from langgraph_handoff.checkpoint.records import BlobRef, Head
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.errors import EnvelopeError, InvalidConfigError

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

    def as_dict(self) -> dict[str, Any]:
        return {
            "heads": self.heads,
            "segments": self.segments,
            "writes": self.writes,
            "blobs": self.blobs,
            "problems": [p.as_dict() for p in self.problems],
        }


def _heads(saver: ObjectStoreSaver, thread_id: str | None) -> Iterator[str]:
    for info in saver.store.list(keys.heads_prefix(thread_id)):
        yield info.key


def verify_store(saver: ObjectStoreSaver, thread_id: str | None = None) -> VerifyReport:
    """Read every object (of one thread, or all): envelopes and checksums, versions, and that
    every segment and large value a head or segment references exists."""
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
        present = {i.key for i in store.list(keys.data_prefix(head.thread_id, head.checkpoint_ns))}
        _check_refs(head, head.payloads, hkey, present, report)
        for ref in head.segments:
            skey = keys.segment_key(head.thread_id, head.checkpoint_ns, ref.key)
            sobj = store.get(skey)
            if sobj is None:
                report.problems.append(Problem(skey, "missing_segment", f"listed by {hkey} but absent"))
                continue
            report.segments += 1
            seg = _decoded(rec_io.decode_segment, sobj.body, skey, report)
            if seg is not None:
                _check_refs(head, seg.payloads, skey, present, report)
        for key in sorted(present):
            decoder: Any = rec_io.decode_writes if "/w/" in key else rec_io.decode_blob if "/b/" in key else None
            if decoder is None:
                continue
            if decoder is rec_io.decode_writes:
                report.writes += 1
            else:
                report.blobs += 1
            obj = store.get(key)
            if obj is not None:
                _decoded(decoder, obj.body, key, report)
    return report


def _decoded(decoder: Any, body: bytes, key: str, report: VerifyReport) -> Any:
    """``decoder(body)`` (envelope, version, checksum, shape), or None with the problem reported."""
    try:
        return decoder(body, key=key)
    except EnvelopeError as exc:
        report.problems.append(Problem(key, type(exc).__name__, str(exc)))
        return None


def _check_refs(head: Head, table: Any, where: str, present: set[str], report: VerifyReport) -> None:
    for origin, chs in table.items():
        for ch, payload in chs.items():
            if isinstance(payload, BlobRef):
                bkey = keys.blob_key(head.thread_id, head.checkpoint_ns, origin, payload.digest)
                if bkey not in present:
                    report.problems.append(
                        Problem(bkey, "dangling_reference", f"{where} references channel {ch!r} here")
                    )


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str)
