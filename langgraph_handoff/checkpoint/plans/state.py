"""What every plan shares: the storage :class:`Layout`, the saver state the plans read
(:class:`SaverState`), and the small helpers of all of them (the target a config names, the
back-off between compare-and-swap attempts, the signal that a referenced value vanished)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from langgraph_handoff._format import keys
from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff.checkpoint.cache import HeadCache
from langgraph_handoff.checkpoint.runs import RunLedger
from langgraph_handoff.checkpoint.ttl import TTLSettings
from langgraph_handoff.errors import CorruptObjectError, InvalidConfigError
from langgraph_handoff.migrations import SchemaMigrations
from langgraph_handoff.stores.base import StoreBase

if TYPE_CHECKING:
    from langgraph_handoff.checkpoint.plans.upgrading import GapMemo


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
        tail_min_base: a list value that only appended to one at least this large (serialised)
            is stored as a *tail*, the appended items over a blob holding the earlier value
            whole, instead of whole again. A plain ``add_messages`` list then writes a few KB per
            put instead of the whole conversation; reading it takes the base blob too (one more
            GET when this process does not hold it yet). A ``DeltaChannel`` snapshot past
            ``spill_threshold`` is likewise stored as *pieces* over the previous snapshot's
            blobs. ``None`` stores every value whole.
        head_max_records: seal older checkpoints into a segment when the head holds more.
            Every put rewrites the head, so its records are written again on each put until
            they are sealed: 16 wrote half the bytes of 64 a turn on the long-threads bench
            (chat with a ``DeltaChannel``: 16.3 KiB a turn at turn 50 and 15.4 at turn 1,000,
            against 30.4 and 44.9), for about one more segment PUT every five turns. The
            segment list it grows stays small in the head (see ``plans/manifest.py``).
        head_max_bytes: ... or when the encoded head grows past this.
        head_max_overhead: ... or when it is this many times bigger than the latest checkpoint
            alone (and over ``head_overhead_floor`` bytes): big states then cost a reader about
            one copy of the state, not one per checkpoint in the window.
        head_overhead_floor: heads smaller than this are never sealed for overhead.
        head_keep: how many newest checkpoints stay in the head after sealing by count (sealing
            by size keeps only the latest).
        fold_max_bytes: writes documents up to this size are folded into the head.
        writes_page: LIST page size used next to the head GET when reading the latest
            checkpoint. On a store that lists in process (memory, a local directory), only a
            run's read once a run of this saver walked a ``DeltaChannel`` history (the walk goes
            on from that page). Other reads there ask for at most ``reading.READ_WRITES_PAGE``
            keys on ``memory://``, and in a local directory read the head first and then list
            the latest checkpoint's own writes alone (``StoreBase.lists_scan_directories``).
            A run's read of a namespace whose history a run walked before asks for as many
            keys as that walk wanted, if more (at most 1,000), so the next walk usually lists
            nothing (one that wants more than that, or over 1,000 keys, lists the rest).
        max_attempts: compare-and-swap attempts per put before giving up with ConflictError.
        backoff: base of the jittered exponential back-off between attempts, in seconds.
        schema_version: the user state-schema version recorded in every object written.
        indexed_metadata: metadata keys kept in the store's metadata index
            (:mod:`~langgraph_handoff.checkpoint.plans.metadata_index`): a store-wide
            ``list(None, filter=...)`` on one of them reads only the threads that carry the
            value, once ``langgraph-handoff index rebuild`` (or a fresh store's ``setup()``)
            declared the key complete. The default is what the Agent Server stamps on every
            checkpoint of a run (``assistant_id``, ``graph_id``) and what applications list
            conversations by (``user_id``). A put writes entries only on the first checkpoint of
            a namespace carrying a value, never after; every process writing to one store must
            index the same keys. ``()`` indexes nothing.
    """

    spill_threshold: int = 32 * 1024
    blob_threshold: int = 1024 * 1024
    tail_min_base: int | None = 32 * 1024
    head_max_records: int = 16
    head_max_bytes: int = 1024 * 1024
    head_max_overhead: float = 2.0
    head_overhead_floor: int = 256 * 1024
    head_keep: int = 4
    fold_max_bytes: int = 16 * 1024
    writes_page: int = 100
    max_attempts: int = 12
    backoff: float = 0.01
    schema_version: int = 0
    indexed_metadata: tuple[str, ...] = ("user_id", "assistant_id", "graph_id")

    def __post_init__(self) -> None:
        if self.head_keep < 1:
            raise ValueError("head_keep must be at least 1 (the latest checkpoint lives in the head)")
        if self.head_max_records <= self.head_keep:
            raise ValueError("head_max_records must be greater than head_keep")
        if isinstance(self.indexed_metadata, str) or not all(isinstance(k, str) for k in self.indexed_metadata):
            raise ValueError("indexed_metadata is a tuple of metadata key names, e.g. ('user_id',)")
        object.__setattr__(self, "indexed_metadata", tuple(self.indexed_metadata))


class SaverState:
    """The saver's state, as every plan reads it.

    The plans are functions of the saver itself (``ObjectStoreSaver`` is a :class:`SaverState`),
    so a copy made by ``with_lease``, ``with_head_rider`` or ``with_allowlist`` runs every plan
    with its own fence, rider and serde. ``serde`` is read on every call for that reason;
    ``layout`` (:class:`Layout`) and ``_cache`` (:class:`~langgraph_handoff.checkpoint.cache.HeadCache`) are set by the
    saver's constructor.
    """

    serde: Any
    layout: Layout
    _cache: HeadCache
    store: StoreBase
    #: which checkpoints each run of this process put (what a refused run left behind)
    _runs: RunLedger
    #: ``(thread_id, epoch)`` of the session lease this saver writes under, if any
    _fence: tuple[str, int] | None = None
    #: the epoch to write each thread under, looked up per write (``with_lease_lookup``: one
    #: compiled graph serves every session a worker holds); it raises to refuse the write
    _fence_lookup: Callable[[str], int] | None = None
    #: ``(thread_id, rider)``: a function of the root head's metadata applied inside every
    #: root-head compare-and-swap of that thread (see ``ObjectStoreSaver.with_head_rider``)
    _rider: tuple[str, Callable[[HeadMeta], HeadMeta]] | None = None
    #: the user's state-schema migrations (``None``: schema version 0, nothing to migrate)
    migrations: SchemaMigrations | None = None
    #: the threads this saver warned of a schema gap (``upgrading.GapMemo``), shared by its copies
    _gap_memo: GapMemo
    #: checkpoint TTL (``None``: threads never expire; see :mod:`langgraph_handoff.checkpoint.ttl`)
    ttl: TTLSettings | None = None
    #: what this saver learned of the metadata index's marker (``plans.metadata_index``)
    _index_memo: Any = None
    #: seconds since the epoch, for TTL stamps and sweeps (tests inject their own)
    _clock: Callable[[], float] = staticmethod(time.time)

    @property
    def _schema(self) -> int:
        return self.migrations.current if self.migrations is not None else 0


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


def target_of(config: RunnableConfig | None, what: str) -> tuple[str, str | None, str | None]:
    """(thread_id, checkpoint_ns or None if absent, checkpoint_id or None)."""
    conf = _configurable(config, what)
    thread_id = keys.validate_thread_id(conf["thread_id"])
    ns = conf.get("checkpoint_ns")
    ns = None if ns is None else keys.validate_namespace(ns)
    cid = conf.get("checkpoint_id") or None
    return thread_id, ns, cid


def made_by_run(config: RunnableConfig | None) -> bool:
    """True for calls LangGraph's run loop makes: their config carries its ``__pregel_*`` entries
    (every run sets at least ``__pregel_runtime``). ``update_state``, ``bulk_update_state``,
    ``get_state`` and direct API calls carry none.

    The write rule needs the difference: only runs race each other for the next step of a
    thread; an update or a direct put names the checkpoint it writes on explicitly.
    """
    return any(str(k).startswith("__pregel_") for k in ((config or {}).get("configurable") or {}))


def tuple_config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


def backoff(layout: Layout, attempt: int) -> float:
    return min(layout.backoff * 2.0**attempt, 1.0) * random.uniform(0.5, 1.5)


class Vanished(Exception):
    """A value a record references was missing. Usually a concurrent prune, delete_for_runs or
    delete_thread removed the record a moment ago; readers re-read the head to tell that apart from
    real damage (then it becomes CorruptObjectError)."""

    def __init__(self, key: str, checkpoint_id: str) -> None:
        super().__init__(key)
        self.key = key
        self.checkpoint_id = checkpoint_id

    def corrupt(self) -> CorruptObjectError:
        return CorruptObjectError(
            self.key, f"checkpoint {self.checkpoint_id!r} references this value but it is missing", "missing"
        )


def parent_cycle(thread_id: str, ns: str, checkpoint_id: str) -> CorruptObjectError:
    """What a walk up a namespace's parents raises on meeting a checkpoint twice. LangGraph never
    writes a checkpoint that is its own ancestor, and this saver refuses a put that would; a
    chain that loops was written by someone else, and a walk that followed it would never end."""
    return CorruptObjectError(
        keys.head_key(thread_id, ns),
        f"checkpoint {checkpoint_id!r} is its own ancestor (its parent chain loops)",
        "malformed",
    )


def chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
