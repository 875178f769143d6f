"""Checkpoints written in an older state schema, upgraded in memory as they are read.

Readers never see an old schema: :func:`upgrade_checkpoint` runs the user's migrations on a
checkpoint before LangGraph gets it, and :func:`current_items` renames pending writes into this
code's channel names. ``migrate`` (:mod:`.migrate`) makes the same upgrade permanent with the very
same functions, so a thread reads the same before and after it is rewritten.

An upgraded checkpoint that still lacks a field the current schema requires
(``SchemaMigrations.required``) has a *schema gap* (:func:`schema_gap`): logged once per thread
and schema version (:class:`GapMemo`), and listed by ``migrate`` in each thread's result.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_handoff import telemetry as T
from langgraph_handoff._format.records import Record, WriteItem
from langgraph_handoff.checkpoint.plans.state import SaverState
from langgraph_handoff.errors import SchemaVersionError

_PLAIN = JsonPlusSerializer()

log = logging.getLogger("langgraph_handoff.migrations")

#: how many (thread, schema version) pairs a saver remembers having warned of
GAP_MEMO = 4096


class GapMemo:
    """The (thread, schema version) pairs a saver has logged a schema gap for, so a thread read
    on every turn warns once, not once a turn. Bounded (the oldest pair is forgotten first, and
    warned of again if it comes back): a worker serving millions of threads keeps a few KB."""

    def __init__(self, size: int = GAP_MEMO) -> None:
        self.size = size
        self._seen: dict[tuple[str, int], None] = {}
        self._lock = threading.Lock()

    def first(self, thread_id: str, version: int) -> bool:
        """Whether this is the first gap of ``thread_id`` at ``version`` (and remember it)."""
        key = (thread_id, version)
        with self._lock:
            if key in self._seen:
                return False
            if len(self._seen) >= self.size:
                del self._seen[next(iter(self._seen))]
            self._seen[key] = None
            return True


def schema_gap(saver: SaverState, ns: str, checkpoint: Mapping[str, Any], metadata: Any) -> tuple[str, ...]:
    """The required fields (``SchemaMigrations.required``) an upgraded checkpoint still lacks.

    Nothing for a subgraph's checkpoint (its state is not the graph's) and for a thread's input
    checkpoint (step -1: no node ran, no field is written yet). Pure: a read and ``migrate``
    both ask it of the very checkpoint :func:`upgrade_checkpoint` returns."""
    migrations = saver.migrations
    if migrations is None or not migrations.required or ns:
        return ()
    step = metadata.get("step") if isinstance(metadata, Mapping) else None
    if isinstance(step, int) and step < 0:
        return ()
    return migrations.missing(checkpoint["channel_values"])


def _warn_gap(saver: SaverState, thread_id: str, rec: Record, missing: tuple[str, ...]) -> None:
    if not saver._gap_memo.first(thread_id, rec.schema):
        return
    fields = ", ".join(repr(f) for f in missing)
    log.warning(
        "thread %r: a checkpoint written in schema %d still lacks %s after the migrations to "
        "schema %d ran, so the graph reads a state its code never writes; register a migration "
        "that fills them (values.setdefault(...)). `langgraph-handoff migrate --dry-run` lists "
        "every such thread",
        thread_id,
        rec.schema,
        fields,
        saver._schema,
        extra={
            T.EVENT: "schema_gap",
            T.THREAD: thread_id,
            T.CHECKPOINT_ID: rec.id,
            T.SCHEMA_VERSION: rec.schema,
            T.SCHEMA_CURRENT: saver._schema,
            T.SCHEMA_MISSING: list(missing),
        },
    )


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


def comparison_key(serde: Any, value: Any) -> bytes:
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


def current_items(
    saver: SaverState, thread_id: str, ns: str, rec: Record, items: tuple[WriteItem, ...]
) -> list[WriteItem]:
    """Pending writes addressed in this code's channel names. Each write is renamed from the
    schema of the code that wrote it (format 1 writes: that of their checkpoint)."""
    schema = saver._schema
    if rec.schema == schema:
        for w in items:
            if w.schema is not None and w.schema != schema:
                break
        else:
            return list(items)  # the common case: nothing to rename (a loop: no generator to make)
    out = []
    for w in items:
        since = rec.schema if w.schema is None else w.schema
        if since != saver._schema:
            if saver.migrations is None or since > saver.migrations.current:
                where = f"a pending write on checkpoint {rec.id} of thread {thread_id!r}" + (
                    f" namespace {ns!r}" if ns else ""
                )
                raise SchemaVersionError(where, found=since, supported=saver._schema)
            w = replace(w, channel=saver.migrations.rename(w.channel, from_version=since), schema=saver._schema)
        out.append(w)
    return out


def upgrade_checkpoint(
    saver: SaverState, thread_id: str, ns: str, rec: Record, checkpoint: Any, metadata: Any, *, warn: bool = True
) -> tuple[Any, Any]:
    """Upgrade a checkpoint written in an older state schema, in memory, before LangGraph
    sees it. Channels a step added or changed get a new version, so the next ``put`` stores
    their new values instead of pointing at the old ones; renamed channels keep theirs.
    A schema gap is logged (``warn``; ``migrate`` reports it in its result instead)."""
    where = f"checkpoint {rec.id} of thread {thread_id!r}" + (f" namespace {ns!r}" if ns else "")
    if saver.migrations is None or rec.schema > saver.migrations.current:
        raise SchemaVersionError(where, found=rec.schema, supported=saver._schema)
    migrations, since = saver.migrations, rec.schema
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
        if len(src) == 1 and src[0] in checkpoint["channel_values"] and (src[0] == new or new not in stored_versions)
    }
    values, metadata, _ = migrations.upgrade(
        dict(checkpoint["channel_values"]), dict(metadata), from_version=since, where=where
    )
    versions = {new: stored_versions[src[0]] for new, src in sources.items() if src[0] in stored_versions}
    bumped = _next_version(saver, stored_versions)
    for new, src in sources.items():
        if len(src) > 1 and new not in values:
            versions.pop(new, None)  # an ambiguous version of a channel without a value
    for ch, value in list(values.items()):
        if ch not in old or comparison_key(saver.serde, old[ch]) != comparison_key(saver.serde, value):
            versions[ch] = bumped
            # what a reader gets is what would be stored (a tuple comes back as a list), so a
            # migrated thread reads the same before and after ``migrate`` rewrites it
            values[ch] = saver.serde.loads_typed(saver.serde.dumps_typed(value))
    for ch in set(old) - set(values):
        versions.pop(ch, None)
    metadata = saver.serde.loads_typed(saver.serde.dumps_typed(metadata))  # as stored, too
    seen = {
        node: {migrations.rename(ch, from_version=since): v for ch, v in chans.items()}
        for node, chans in (checkpoint.get("versions_seen") or {}).items()
    }
    checkpoint = {**checkpoint, "channel_values": values, "channel_versions": versions, "versions_seen": seen}
    missing = schema_gap(saver, ns, checkpoint, metadata) if warn else ()
    if missing:
        _warn_gap(saver, thread_id, rec, missing)
    return checkpoint, metadata
