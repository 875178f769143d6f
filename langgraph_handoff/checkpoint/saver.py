"""``ObjectStoreSaver``: a LangGraph checkpoint saver on object storage, sync and async in one class."""

from __future__ import annotations

import asyncio
import builtins
import copy
import dataclasses
import itertools
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_handoff import telemetry
from langgraph_handoff._format import envelope, keys, signing
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff.checkpoint import driver, trust
from langgraph_handoff.checkpoint.cache import HeadCache
from langgraph_handoff.checkpoint.driver import Plan
from langgraph_handoff.checkpoint.heads import SaverHeads
from langgraph_handoff.checkpoint.observed import observed, outcome_of
from langgraph_handoff.checkpoint.plans import Layout, SaverPlans, metadata_index
from langgraph_handoff.checkpoint.plans.metadata_index import RebuildReport
from langgraph_handoff.checkpoint.plans.migrate import MigrationSummary, ThreadMigration
from langgraph_handoff.checkpoint.plans.signing import SigningPass, plan_sign_store
from langgraph_handoff.checkpoint.plans.spaces import plan_team_spaces
from langgraph_handoff.checkpoint.plans.upgrading import GapMemo
from langgraph_handoff.checkpoint.runs import RunLedger
from langgraph_handoff.checkpoint.serde_policy import HOW_TO_STOP, named_code_risk
from langgraph_handoff.checkpoint.signed_store import FROM_ENVIRONMENT, SigningKeyArg, SigningStore, signed_store
from langgraph_handoff.checkpoint.ttl import (
    DEFAULT_SWEEP_INTERVAL_MINUTES,
    BackgroundSweeper,
    SweepResult,
    ThreadSweep,
    TTLSettings,
    sweep_arguments,
)
from langgraph_handoff.errors import PreconditionFailedError, StaleWriterError, UnknownOutcomeError
from langgraph_handoff.migrations import SchemaMigrations
from langgraph_handoff.stores.base import Get, Put, StoreBase
from langgraph_handoff.stores.prefixed import PrefixedStore
from langgraph_handoff.stores.urls import store_from_url

__all__ = ["ObjectStoreSaver"]

log = logging.getLogger("langgraph_handoff")
R = TypeVar("R")


def _thread(thread_id: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _refused(operation: str, config: Any, exc: StaleWriterError) -> None:
    """The INFO record of a refused write: expected when runs race, raised to the caller
    anyway, and worth finding in the logs (its thread, its outcome, what the caller was told)."""
    conf = (config or {}).get("configurable", {}) if isinstance(config, Mapping) else {}
    outcome = outcome_of(exc)
    log.info(
        "checkpoint %s refused on thread %r (%s): %s",
        operation,
        conf.get("thread_id"),
        outcome,
        exc,
        extra={"langgraph_handoff.event": "checkpoint.refused", telemetry.THREAD: conf.get("thread_id"),
               telemetry.OUTCOME: outcome, telemetry.OPERATION: f"checkpoint.{operation}"},
    )  # fmt: skip


def _placed(result: ThreadMigration, store: StoreBase) -> None:
    """Say in ``result`` which team space its thread lives in, and name its damaged objects by
    their keys in the store (a space's saver names them by its own)."""
    if isinstance(store, PrefixedStore):
        result.space = store.prefix
        result.damaged = [dataclasses.replace(d, key=store.prefix + d.key) for d in result.damaged]


class ObjectStoreSaver(SaverPlans, BaseCheckpointSaver[str]):
    """Checkpoints on an object store, with ETag optimistic concurrency.

    Every operation exists in a sync and an async form on the same instance (``invoke`` uses the
    first, ``ainvoke`` the second), both driven by one implementation, so they behave alike.

    Guarantees:

    * the latest checkpoint of a (thread, namespace) moves only by compare-and-swap;
    * a run that continues a lineage whose parent is no longer the latest is refused with
      :class:`~langgraph_handoff.errors.StaleWriterError`: of two runs racing on one thread exactly
      one commits each step, and the thread never forks silently;
    * explicit forks (time travel, ``update_state``) may start from any checkpoint;
    * every stored object is a versioned, checksummed envelope; a damaged or newer-format object
      raises instead of being half-read.

    Args:
        store: any :mod:`langgraph_handoff.stores` store (``MemoryStore``, ``LocalStore``,
            ``S3Store``).
        serde: the serializer (default ``JsonPlusSerializer``). Checkpoints, metadata, channel
            values and writes all go through it, so an ``EncryptedSerializer`` covers them all.
        layout: storage knobs (:class:`~langgraph_handoff.checkpoint.plans.state.Layout`).
        cache_size: namespaces whose head is remembered between calls ...
        cache_bytes: ... and the approximate memory those heads may use.
        migrations: your :class:`~langgraph_handoff.migrations.SchemaMigrations`: checkpoints
            an older state schema wrote are upgraded as they are read (Schema migrations guide).
        ttl: checkpoint TTL, ``{"default_ttl": minutes, "refresh_on_read": bool}`` (the shape
            langgraph-checkpoint-redis takes; also ``strategy``, ``sweep_interval_minutes`` and
            ``sweep_limit`` as in the Agent Server's ``checkpointer.ttl``). Threads idle longer
            are deleted by :meth:`sweep`; see :mod:`langgraph_handoff.checkpoint.ttl`.
        clock: seconds since the epoch for TTL stamps and sweeps (default ``time.time``; tests
            pass their own).
        signing_key: sign every object written and refuse every object read that no key held
            signed (:mod:`langgraph_handoff.checkpoint.signed_store`): a ``SigningKey``, several (the
            first signs, all verify), ``SigningKeys``, or their text form ``"ID:SECRET,..."``.
            ``from_url`` takes them from ``LANGGRAPH_HANDOFF_SIGNING_KEYS`` by default.

    For langgraph-handoff's own layers (not a user API, it may change with any release):
    :attr:`heads` reads and compare-and-swaps heads, lists threads and namespaces and counts a
    prune, as plans; session ownership, teams and the command line use it instead of the
    saver's private members, and its compare-and-swap keeps the head cache right by itself.

    Example:
        >>> from langgraph.graph import StateGraph, START, END
        >>> from typing_extensions import TypedDict
        >>> class State(TypedDict):
        ...     count: int
        >>> builder = StateGraph(State)
        >>> _ = builder.add_node("inc", lambda s: {"count": s["count"] + 1})
        >>> _ = builder.add_edge(START, "inc")
        >>> _ = builder.add_edge("inc", END)
        >>> with ObjectStoreSaver.from_url("memory://") as saver:
        ...     graph = builder.compile(checkpointer=saver)
        ...     cfg = {"configurable": {"thread_id": "t1"}}
        ...     graph.invoke({"count": 1}, cfg)["count"]
        ...     graph.get_state(cfg).values
        2
        {'count': 2}
    """

    def __init__(
        self,
        store: StoreBase,
        *,
        serde: SerializerProtocol | None = None,
        layout: Layout | None = None,
        cache_size: int = 1024,
        cache_bytes: int = 64 * 1024 * 1024,
        migrations: SchemaMigrations | None = None,
        ttl: Mapping[str, Any] | TTLSettings | None = None,
        clock: Callable[[], float] | None = None,
        signing_key: SigningKeyArg = None,
    ) -> None:
        super().__init__(serde=serde)
        self.ttl = TTLSettings.parse(ttl)
        if clock is not None:
            self._clock = clock
        self._sweeper = BackgroundSweeper("checkpoint", self.sweep, self.asweep)
        if migrations is not None:
            migrations.check()
        self.migrations = migrations
        if not isinstance(store, StoreBase):
            raise TypeError(f"store must be a langgraph_handoff.stores store, got {type(store).__name__}")
        self.store = signed_store(store, signing_key)
        self.layout = layout or Layout()
        self._cache = HeadCache(cache_size, cache_bytes)
        self._runs = RunLedger()
        self._gap_memo = GapMemo()
        self._cache_limits = (cache_size, cache_bytes)

    def __repr__(self) -> str:
        return f"ObjectStoreSaver({self.store!r})"

    # -- construction ----------------------------------------------------------------------------
    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        serde: SerializerProtocol | None = None,
        layout: Layout | None = None,
        cache_size: int = 1024,
        cache_bytes: int = 64 * 1024 * 1024,
        migrations: SchemaMigrations | None = None,
        ttl: Mapping[str, Any] | TTLSettings | None = None,
        clock: Callable[[], float] | None = None,
        signing_key: SigningKeyArg = FROM_ENVIRONMENT,
        **store_kwargs: Any,
    ) -> ObjectStoreSaver:
        """Build a saver from a URL; use it directly or as a (async) context manager.

        * ``memory://`` (a fresh store) or ``memory://NAME`` (shared in this process by name);
        * ``file:///abs/dir`` or ``file://./relative/dir``: a :class:`LocalStore`;
        * ``s3://bucket/prefix``: S3 with credentials from the boto3 chain, on the obstore
          transport when it is installed, else boto3. Query parameters ``endpoint_url``,
          ``region``, ``transport`` and ``async_io``, e.g.
          ``s3://agents/prod?endpoint_url=http://127.0.0.1:7480``;
        * ``az://container/prefix``: Azure Blob Storage (the ``obstore`` extra); query parameters
          ``account_name`` (or ``account``) and ``endpoint_url``; keys as keyword arguments or
          ``AZURE_STORAGE_*`` variables, never in the URL;
        * ``gs://bucket/prefix``: Google Cloud Storage (the ``gcs`` extra); query parameters
          ``endpoint_url`` (an emulator) and ``project``.

        ``store_kwargs`` go to the store's constructor (``transport="boto3"`` picks the transport);
        ``serde``, ``layout``, ``cache_size``, ``cache_bytes``, ``migrations``, ``ttl``, ``clock`` and
        ``signing_key`` to the saver's (``signing_key`` defaults to the keys in
        ``LANGGRAPH_HANDOFF_SIGNING_KEYS``, none when it is unset; ``None`` signs nothing). An unknown query parameter or keyword argument raises
        :class:`~langgraph_handoff.errors.InvalidConfigError` naming the accepted ones: a typo
        such as ``?endpoint=`` must not send the saver to AWS (:mod:`langgraph_handoff.stores.urls`).

        >>> with ObjectStoreSaver.from_url("memory://") as saver:
        ...     saver.get_tuple({"configurable": {"thread_id": "nobody"}}) is None
        True
        """
        store = signed_store(store_from_url(url, **store_kwargs), signing_key)
        return cls(
            store,
            serde=serde,
            layout=layout,
            cache_size=cache_size,
            cache_bytes=cache_bytes,
            migrations=migrations,
            ttl=ttl,
            clock=clock,
        )

    @classmethod
    def from_conn_string(cls, conn_string: str, **kwargs: Any) -> ObjectStoreSaver:
        """:meth:`from_url` under the name every LangGraph saver uses, so code written for
        ``SqliteSaver``/``PostgresSaver`` ports unchanged: the result works with ``with`` and
        ``async with`` alike.

        >>> with ObjectStoreSaver.from_conn_string("memory://") as saver:
        ...     type(saver.store).__name__
        'MemoryStore'
        """
        return cls.from_url(conn_string, **kwargs)

    def setup(self) -> None:
        """Check the store, once per deployment, and record (or check) its format marker.

        The first ``setup()`` on a store probes it (:mod:`langgraph_handoff.probe`, 6 requests on a
        scratch key): a store that accepts a second create-only PUT or a PUT with a wrong
        ``If-Match`` would let two workers fork a thread silently, so it raises
        :class:`~langgraph_handoff.errors.UnsafeStoreError` and nothing is written. A pass is
        recorded in the marker; later calls cost two GETs (this marker and the metadata index's).
        On a store that holds no thread yet, it also declares the metadata index complete for
        ``layout.indexed_metadata`` (1 LIST and 1 PUT, once): filters on those keys read only
        matching threads from the first put (a store with threads needs ``index rebuild``
        instead; :meth:`rebuild_index`). Idempotent. A store whose marker was
        written by a newer langgraph-handoff raises
        :class:`~langgraph_handoff.errors.EnvelopeVersionError` here, before any data is touched.

        Optional: without it, the saver runs the same check before its first write to a store
        (once per process; :mod:`langgraph_handoff.checkpoint.trust`). Calling it at startup
        moves that cost, and any refusal, to startup.

        It also logs a WARNING when this saver's serializer would import and call what a stored
        object names (LangGraph's default does): whoever can write into the store could then run
        code in this process (:mod:`langgraph_handoff.checkpoint.serde_policy` says how to stop it).
        """
        trust.setup(self.store)
        driver.run(self.store, metadata_index.plan_declare_if_empty(self))
        self._warn_named_code()

    async def asetup(self) -> None:
        await trust.asetup(self.store)
        await driver.arun(self.store, metadata_index.plan_declare_if_empty(self))
        self._warn_named_code()

    def _warn_named_code(self) -> None:
        risk = named_code_risk(self.serde)
        if risk is not None:
            log.warning("%r: %s: whoever can write into the store can run code here; %s", self, risk, HOW_TO_STOP)

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        self._sweeper.stop()
        self.store.close()

    async def aclose(self) -> None:
        await self._sweeper.astop()
        self._sweeper.stop()
        await self.store.aclose()

    @property
    def heads(self) -> SaverHeads:
        """This saver's heads for the package's other layers: read, compare-and-swap (recorded
        in the head cache), list, count a prune (:mod:`langgraph_handoff.checkpoint.heads`)."""
        return SaverHeads(self)

    def with_lease(self, lease: Any) -> ObjectStoreSaver:
        """A copy of this saver whose writes to ``lease.thread_id`` are fenced by the lease's
        epoch: once another worker takes the session over (or this one locks it for a transfer or
        releases it), its puts raise :class:`~langgraph_handoff.errors.OwnershipLostError` and store
        nothing. It shares this saver's store and cache; writes to other threads are refused.
        See :class:`~langgraph_handoff.ownership.SessionManager`."""
        clone = copy.copy(self)
        clone._fence, clone._fence_lookup = (lease.thread_id, int(lease.epoch)), None
        return clone

    def with_lease_lookup(self, epoch_of: Callable[[str], int]) -> ObjectStoreSaver:
        """A copy of this saver whose every write is fenced by the epoch ``epoch_of(thread_id)``
        returns at the time of the write; ``epoch_of`` raises (``OwnershipLostError``) to refuse
        a thread the caller does not hold. What :meth:`with_lease` does for one session, for all
        the sessions a worker holds: :class:`~langgraph_handoff.ownership.SessionWorker` compiles
        its graph once on such a saver instead of once per call.

        >>> saver = ObjectStoreSaver.from_url("memory://").with_lease_lookup(lambda thread_id: 1)
        >>> saver._fence_lookup("chat-1")
        1
        """
        clone = copy.copy(self)
        clone._fence, clone._fence_lookup = None, epoch_of
        return clone

    def under(self, prefix: str) -> ObjectStoreSaver:
        """A saver with this one's serializer, layout, migrations and clock whose threads live
        under ``prefix`` (``"teams/{TM}/members/"``) of this saver's store
        (:class:`~langgraph_handoff.stores.prefixed.PrefixedStore`), apart from every thread id
        a caller of this saver can pass: this saver never lists, reads or writes them. An agent
        team keeps its members' conversations so (:mod:`langgraph_handoff.teams`).

        Its threads have no TTL: this saver's sweep never sees them, and their owner (the team)
        decides how long they live. It shares this saver's store (closing it closes nothing) and
        its store probe, but has a head cache of its own.

        >>> saver = ObjectStoreSaver.from_url("memory://")
        >>> members = saver.under("teams/t/members/")
        >>> cfg = {"configurable": {"thread_id": "t/alice", "checkpoint_ns": ""}}
        >>> cp = {"v": 4, "id": "1ef4f797-8335-6428-8001-8a1503f9b875", "ts": "2024-01-01T00:00:00+00:00",
        ...       "channel_values": {"x": 1}, "channel_versions": {"x": 1}, "versions_seen": {}}
        >>> _ = members.put(cfg, cp, {}, {"x": 1})
        >>> members.get_tuple(cfg) is not None, saver.get_tuple(cfg) is None, saver.thread_ids()
        (True, True, [])
        """
        cache_size, cache_bytes = self._cache_limits
        return type(self)(
            PrefixedStore(self.store, prefix),
            serde=self.serde,
            layout=self.layout,
            cache_size=cache_size,
            cache_bytes=cache_bytes,
            migrations=self.migrations,
            clock=self._clock,
        )

    def with_head_rider(self, thread_id: str, rider: Callable[[HeadMeta], HeadMeta]) -> ObjectStoreSaver:
        """A copy of this saver whose every ``put`` to the root namespace of ``thread_id`` passes
        the head's metadata (:class:`~langgraph_handoff._format.head_meta.HeadMeta`) through
        ``rider`` inside the same compare-and-swap.

        This is how a team member's inbox acknowledgement costs no request of its own: the record
        of which messages a turn consumed rides in the checkpoint put that stores them, so both
        commit together or not at all (:mod:`langgraph_handoff.teams`). ``rider`` is called again
        on every retry against the head as re-read, must be idempotent, and may raise a
        :class:`~langgraph_handoff.errors.ConflictError` to refuse the write. Combines with
        :meth:`with_lease`. A put of new input through this saver is refused
        (:class:`~langgraph_handoff.errors.StaleWriterError`) when the latest checkpoint still
        holds input that has not run: LangGraph would discard it, and what rode with it.
        """
        clone = copy.copy(self)
        clone._rider = (keys.validate_thread_id(thread_id), rider)
        return clone

    def __enter__(self) -> ObjectStoreSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ObjectStoreSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _observed(
        self, operation: str, plan: Plan[R], config: Any, *, write: bool = False, threads: int | None = None
    ) -> Plan[R]:
        """``plan`` as a traced, measured checkpoint operation (itself when telemetry is off).
        ``threads``: how many threads an operation over several touches (``prune``)."""
        if not telemetry.is_on():
            return plan
        conf = (config or {}).get("configurable", {}) if isinstance(config, Mapping) else {}
        attrs = {telemetry.THREAD: conf.get("thread_id"), telemetry.NAMESPACE: conf.get("checkpoint_ns")}
        if threads is not None:
            attrs[telemetry.THREADS] = threads
        return observed(operation, self.store, plan, attrs, write=write)

    def _pruning(self, thread_ids: Sequence[str], strategy: str) -> Plan[None]:
        """The plan of :meth:`prune`, observed as ``checkpoint prune`` (one span for the call;
        the thread on it when there is one)."""
        plan = self._plan_prune(thread_ids, strategy)
        if not telemetry.is_on() or isinstance(thread_ids, str):  # a string: the plan refuses it
            return plan
        only = _thread(thread_ids[0]) if len(thread_ids) == 1 else None
        return self._observed("prune", plan, only, write=True, threads=len(thread_ids))

    def _migrating(
        self, thread_id: str, dry_run: bool, namespaces: builtins.list[str] | None = None
    ) -> Plan[ThreadMigration]:
        """The plan of :meth:`migrate_thread` (and of each thread :meth:`migrate` takes), observed
        as ``checkpoint migrate``: a dry run writes nothing, so its outcome is ``ok``."""
        plan = self._plan_migrate_thread(thread_id, dry_run, namespaces)
        return self._observed("migrate", plan, _thread(thread_id), write=not dry_run)

    # -- versions --------------------------------------------------------------------------------
    def get_next_version(self, current: str | int | float | None, channel: None = None) -> str:
        """``"{n:032}.{random}"``: ordered as strings, and unique across branches of a thread."""
        if current is None:
            n = 0
        elif isinstance(current, (int, float)):
            n = int(current)
        else:
            n = int(str(current).split(".")[0])
        return f"{n + 1:032}.{random.random():016}"

    # -- reads -----------------------------------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (exactly that id, or None), else the latest."""
        return driver.run(self.store, self._observed("get_tuple", self._plan_get_tuple(config), config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await driver.arun(self.store, self._observed("get_tuple", self._plan_get_tuple(config), config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
        on_damaged: Callable[[DamagedObject], None] | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by id), across all namespaces of a thread when the config has
        no ``checkpoint_ns``, across all threads when ``config`` is None (thread by thread).
        ``filter`` matches top-level metadata keys exactly; ``before`` is exclusive; ``limit``
        counts after filtering.

        Damage: listing one thread raises :class:`~langgraph_handoff.errors.CorruptObjectError`
        on an object of it that cannot be read, as ``get_tuple`` does. Listing every thread
        (``config=None``) does not stop there: it skips what it cannot read (a head's namespace,
        or the rest of a thread), logs a WARNING naming the key, passes each
        :class:`~langgraph_handoff._format.damage.DamagedObject` to ``on_damaged``, and goes on
        with the other threads. Keys under ``heads/`` that are not head keys are skipped so too.
        """
        plan = self._plan_list(config, filter, before, limit, on_damaged)
        return driver.iterate(self.store, self._observed("list", plan, config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
        on_damaged: Callable[[DamagedObject], None] | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        plan = self._observed("list", self._plan_list(config, filter, before, limit, on_damaged), config)
        async for item in driver.aiterate(self.store, plan):
            yield item

    # -- writes ----------------------------------------------------------------------------------
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint by compare-and-swap on its namespace's head (one request)."""
        plan = self._observed("put", self._plan_put(config, checkpoint, metadata, new_versions), config, write=True)
        try:
            return driver.run(self.store, plan)
        except StaleWriterError as exc:
            _refused("put", config, exc)
            raise

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        plan = self._observed("put", self._plan_put(config, checkpoint, metadata, new_versions), config, write=True)
        try:
            return await driver.arun(self.store, plan)
        except StaleWriterError as exc:
            _refused("put", config, exc)
            raise

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store one task's writes for a checkpoint (one create-only request)."""
        plan = self._plan_put_writes(config, writes, task_id, task_path)
        driver.run(self.store, self._observed("put_writes", plan, config, write=True))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        plan = self._plan_put_writes(config, writes, task_id, task_path)
        await driver.arun(self.store, self._observed("put_writes", plan, config, write=True))

    # -- maintenance -----------------------------------------------------------------------------
    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and value of a thread, in all namespaces.

        A thread whose heads cannot be read (truncated, failing their checksum, not ours) is
        deleted too, without reading them: a damaged root head is replaced by a tombstone by
        compare-and-swap on its ETag, fencing every lease epoch it may have held
        (:mod:`~langgraph_handoff.checkpoint.plans.maintenance`). Keys under the thread's
        ``heads/`` prefix that are not head keys are left alone; nothing of another thread is
        touched."""
        plan = self._plan_delete_thread(thread_id)
        driver.run(self.store, self._observed("delete_thread", plan, _thread(thread_id), write=True))

    async def adelete_thread(self, thread_id: str) -> None:
        plan = self._plan_delete_thread(thread_id)
        await driver.arun(self.store, self._observed("delete_thread", plan, _thread(thread_id), write=True))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints whose metadata ``run_id`` is in ``run_ids`` (all threads), with
        their writes. Scans every thread: an administrative operation. A namespace it cannot
        read is skipped; after every other thread was done it raises
        :class:`~langgraph_handoff.errors.DamagedObjectsError` listing them (``.damaged``)."""
        driver.run(self.store, self._plan_delete_for_runs(run_ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await driver.arun(self.store, self._plan_delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a whole thread (every namespace, checkpoint id, write and value) to a new thread id.
        Raises :class:`~langgraph_handoff.errors.ThreadExistsError` if the target has checkpoints."""
        driver.run(self.store, self._plan_copy_thread(source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await driver.arun(self.store, self._plan_copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"`` keeps the newest checkpoint of every namespace (plus, for
        DeltaChannel threads, the ancestors its history needs); ``"delete"`` deletes the threads
        (damaged ones too, as :meth:`delete_thread`). With ``"keep_latest"`` a namespace that
        cannot be read is skipped and the other threads are pruned; then
        :class:`~langgraph_handoff.errors.DamagedObjectsError` lists what was skipped
        (``.damaged``: :class:`~langgraph_handoff._format.damage.DamagedObject` records)."""
        driver.run(self.store, self._pruning(thread_ids, strategy))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await driver.arun(self.store, self._pruning(thread_ids, strategy))

    # -- TTL -----------------------------------------------------------------------------------------
    def sweep(
        self,
        *,
        dry_run: bool = False,
        limit: int | None = None,
        default_ttl: float | None = None,
        strategy: str | None = None,
        on_start: Callable[[int], None] | None = None,
        on_thread: Callable[[ThreadSweep], None] | None = None,
    ) -> SweepResult:
        """Delete every thread idle longer than its TTL; safe while workers write.

        A thread's TTL is the one stamped in its heads by the saver that last wrote it
        (``ttl=``); threads written without a stamp count from their latest checkpoint's time
        with ``default_ttl`` minutes (default: this saver's ``ttl`` default; without either
        they never expire). ``strategy`` is ``"delete"`` (default) or ``"keep_latest"``
        (default: this saver's ``ttl`` strategy). ``dry_run`` decides and reports, writing
        nothing; ``limit`` stops after that many threads deleted (the next sweep goes on;
        default: the ``ttl`` setting's ``sweep_limit``), and ``result.limited`` says whether
        threads it would act on (or had not read yet) were left.
        ``on_start`` gets the number of threads, ``on_thread`` each thread's outcome (progress).

        The decision sticks by a compare-and-swap on the head version it was taken on, so a
        writer that revives the thread first makes the sweep skip it, and a run that continues it
        afterwards gets :class:`~langgraph_handoff.errors.ThreadExpiredError`
        (:mod:`langgraph_handoff.checkpoint.plans.sweep` has the argument).

        Requests: 1 LIST per 1000 heads, plus one round trip of GETs per 64 threads for the heads
        this saver has not read under their current ETag in an earlier sweep (empty heads left by
        sweeps and deletes are recognised from the listing). Per expired thread: 1 round trip
        of GETs (its heads, fresh), 1 LIST per 1000 data objects, 1 conditional PUT per
        namespace (its tombstone, marked with what is left to delete), 1 DeleteObjects per 1000
        objects, then 1 round trip of conditional PUTs clearing the marks. A sweep stopped or
        failing between the swap and that last round trip leaves the marks, and the next sweep
        finishes the thread (``"cleaned"``).

        >>> clock = [1_000_000.0]
        >>> saver = ObjectStoreSaver.from_url("memory://", ttl={"default_ttl": 60}, clock=lambda: clock[0])
        >>> cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        >>> cp = {"v": 4, "id": "1ef4f797-8335-6428-8001-8a1503f9b875", "ts": "2024-01-01T00:00:00+00:00",
        ...       "channel_values": {"x": 1}, "channel_versions": {"x": 1}, "versions_seen": {}}
        >>> _ = saver.put(cfg, cp, {"source": "input", "step": -1}, {"x": 1})
        >>> clock[0] += 59 * 60
        >>> saver.sweep().kept
        1
        >>> clock[0] += 2 * 60
        >>> result = saver.sweep()
        >>> result.examined, result.deleted, result.skipped
        (1, 1, 0)
        >>> saver.get_tuple(cfg) is None
        True
        """
        return driver.run(self.store, self._sweep_plan(dry_run, limit, default_ttl, strategy, on_start, on_thread))

    async def asweep(
        self,
        *,
        dry_run: bool = False,
        limit: int | None = None,
        default_ttl: float | None = None,
        strategy: str | None = None,
        on_start: Callable[[int], None] | None = None,
        on_thread: Callable[[ThreadSweep], None] | None = None,
    ) -> SweepResult:
        plan = self._sweep_plan(dry_run, limit, default_ttl, strategy, on_start, on_thread)
        return await driver.arun(self.store, plan)

    def _sweep_plan(
        self,
        dry_run: bool,
        limit: int | None,
        default_ttl: float | None,
        strategy: str | None,
        on_start: Callable[[int], None] | None,
        on_thread: Callable[[ThreadSweep], None] | None,
    ) -> driver.Plan[SweepResult]:
        default, chosen = sweep_arguments(self.ttl, default_ttl, strategy, limit)
        if limit is None and self.ttl is not None:
            limit = self.ttl.sweep_limit  # the Agent Server's sweep_limit
        started = time.monotonic()
        result = yield from self._plan_sweep(
            dry_run=dry_run,
            limit=limit,
            default_ttl=default,
            strategy=chosen,
            on_start=on_start,
            on_thread=on_thread,
        )
        result.seconds = time.monotonic() - started
        return result

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Any:
        """Sweep now and every ``sweep_interval_minutes`` (default: the ``ttl`` setting, else 5)
        in a daemon thread, until :meth:`stop_ttl_sweeper` or :meth:`close`. Returns a
        ``concurrent.futures.Future`` that completes when it stops."""
        return self._sweeper.start(self._sweep_interval(sweep_interval_minutes))

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        return self._sweeper.stop(timeout)

    async def astart_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> asyncio.Task[None]:
        """:meth:`start_ttl_sweeper` as an asyncio task on the running loop (what
        :func:`langgraph_handoff.server.checkpointer` starts for the Agent Server)."""
        return await self._sweeper.astart(self._sweep_interval(sweep_interval_minutes))

    async def astop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        return await self._sweeper.astop(timeout)

    def _sweep_interval(self, minutes: float | None) -> float:
        if minutes is not None:
            return minutes
        if self.ttl is not None and self.ttl.sweep_interval_minutes is not None:
            return self.ttl.sweep_interval_minutes
        return DEFAULT_SWEEP_INTERVAL_MINUTES

    # -- the metadata index ------------------------------------------------------------------------
    def rebuild_index(
        self, names: Sequence[str] | None = None, *, progress: Callable[[int, int], None] | None = None
    ) -> RebuildReport:
        """Write every missing metadata-index entry of ``names`` (default
        ``layout.indexed_metadata``), reading every checkpoint of every namespace, then declare
        the keys complete in ``meta/index``: from then on a store-wide ``list(None,
        filter=...)`` on them reads only the threads that carry the value
        (:mod:`~langgraph_handoff.checkpoint.plans.metadata_index`). Idempotent, safe to kill
        and to run while workers write (they keep the index themselves); ``progress`` gets
        ``(namespaces done, namespaces)``. A store written by an older release needs it once.

        >>> saver = ObjectStoreSaver.from_url("memory://")
        >>> saver.rebuild_index(["user_id"]).complete
        ['user_id']
        """
        plan = metadata_index.plan_rebuild(self, self._index_names(names), progress)
        return trust.run(self.store, plan)

    async def arebuild_index(
        self, names: Sequence[str] | None = None, *, progress: Callable[[int, int], None] | None = None
    ) -> RebuildReport:
        plan = metadata_index.plan_rebuild(self, self._index_names(names), progress)
        return await trust.arun(self.store, plan)

    def _index_names(self, names: Sequence[str] | None) -> tuple[str, ...]:
        if names is None:
            return self.layout.indexed_metadata
        if isinstance(names, str):
            raise TypeError("rebuild_index takes a sequence of metadata keys, not a single string; wrap it in a list")
        return tuple(names)

    # -- migration ---------------------------------------------------------------------------------
    def thread_ids(self) -> builtins.list[str]:
        """Every thread id the store holds (from key listings: no object is read unless its id
        was too long to sit in its key)."""
        return sorted({t for t, _ns in driver.run(self.store, self.heads.ids())})

    async def athread_ids(self) -> builtins.list[str]:
        return sorted({t for t, _ns in await driver.arun(self.store, self.heads.ids())})

    def migrate_thread(self, thread_id: str, *, dry_run: bool = False) -> ThreadMigration:
        """Rewrite one thread into this saver's state schema (``migrations``) and the current
        storage format; safe while workers write to it, and a no-op on a current thread.

        ``dry_run`` runs every migration step and reports what would be rewritten, writing nothing.
        Raises :class:`~langgraph_handoff.errors.MigrationError` if a step fails,
        :class:`~langgraph_handoff.errors.SchemaVersionError` for a thread written by newer code
        (when the data was there before the migration started, that namespace is left exactly as
        it was; a checkpoint from newer code arriving mid-way stops it after the writes documents
        may have been rewritten, which every reader at this version or newer reads the same).
        ``langgraph-handoff migrate`` runs this over many threads at once. See
        :mod:`langgraph_handoff.checkpoint.plans.migrate`.

        >>> from langgraph_handoff.migrations import SchemaMigrations
        >>> v1 = ObjectStoreSaver.from_url("memory://")
        >>> cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        >>> cp = {"v": 1, "id": "1ef4f797-8335-6428-8001-8a1503f9b875", "ts": "2024-01-01T00:00:00+00:00",
        ...       "channel_values": {"topic": "refund"}, "channel_versions": {"topic": 1}, "versions_seen": {}}
        >>> _ = v1.put(cfg, cp, {}, {"topic": 1})
        >>> migrations = SchemaMigrations()
        >>> @migrations.register(1, "add language")
        ... def add_language(values, metadata):
        ...     values.setdefault("language", "en")
        >>> v2 = ObjectStoreSaver(v1.store, migrations=migrations)
        >>> v2.migrate_thread("t").status, v2.migrate_thread("t").status
        ('migrated', 'current')
        >>> v2.get_tuple(cfg).checkpoint["channel_values"]
        {'topic': 'refund', 'language': 'en'}
        """
        return driver.run(self.store, self._migrating(thread_id, dry_run))

    async def amigrate_thread(self, thread_id: str, *, dry_run: bool = False) -> ThreadMigration:
        return await driver.arun(self.store, self._migrating(thread_id, dry_run))

    def migrate(
        self,
        thread_ids: Sequence[str] | None = None,
        *,
        dry_run: bool = False,
        concurrency: int = 8,
        on_result: Callable[[ThreadMigration], None] | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> MigrationSummary:
        """:meth:`migrate_thread` over ``thread_ids`` (default: every thread), ``concurrency`` at
        a time. A thread that fails is reported (``status="failed"``; one with an object that
        cannot be read lists it in ``damaged``) and the others go on; keys under ``heads/`` that
        are not head keys are reported in ``summary.foreign`` and never read.
        ``on_start`` gets the number of threads, ``on_result`` each thread's result as it
        finishes (progress). A run over every thread with no failure stamps the store's format
        marker (:meth:`mark_format`), when it met no stray key either. This is what
        ``langgraph-handoff migrate`` runs.

        Every thread means the threads of every agent team's members too, which live in their
        team's space and not among this saver's (:meth:`under`); their results name it in
        ``space`` (``"teams/{TM}/members/"``; ``""`` for this saver's own threads)."""
        started = time.monotonic()
        signs = self._sign_store(dry_run) if thread_ids is None else None  # first: see plans/signing.py
        signed = driver.run(*signs) if signs is not None else None
        targets, foreign = driver.run(self.store, self._plan_migration_targets(thread_ids))
        items = [(self, t, ns) for t, ns in targets.items()]
        if thread_ids is None:  # and every team's members' threads (plans/spaces.py)
            for prefix in driver.run(self.store, plan_team_spaces()):
                space = self.under(prefix)
                found, damaged = driver.run(space.store, space._plan_migration_targets(None))
                items += [(space, t, ns) for t, ns in found.items()]
                foreign += [dataclasses.replace(d, key=prefix + d.key) for d in damaged]
        if on_start is not None:
            on_start(len(items))
        results: builtins.list[ThreadMigration] = []

        def one(item: tuple[ObjectStoreSaver, str, builtins.list[str] | None]) -> ThreadMigration:
            saver, thread_id, namespaces = item
            try:
                result = driver.run(saver.store, saver._migrating(thread_id, dry_run, namespaces))
            except Exception as exc:  # noqa: BLE001 - reported per thread; the run goes on
                result = ThreadMigration.failure(thread_id, exc)
            _placed(result, saver.store)
            return result

        # at most ``concurrency`` threads are handed to the pool at a time, the next one only once
        # a result is in: when on_result fails or Ctrl-C comes, only those under way finish. With
        # every thread queued up front, the workers went on taking new threads until the caller's
        # thread got the CPU back to stop them (6 of 60 migrated instead of at most 2 under load)
        pool = ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="migrate")
        waiting = iter(items)
        running: set[Future[ThreadMigration]] = set()  # submitted, result not reported yet

        def start_more() -> None:
            for item in itertools.islice(waiting, max(1, concurrency) - len(running)):
                running.add(pool.submit(one, item))

        try:
            start_more()
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    results.append(future.result())
                    running.discard(future)
                    if on_result is not None:
                        on_result(results[-1])
                start_more()
        except BaseException:
            # Ctrl-C, or on_result failing (a closed pipe): threads not started yet never start;
            # the ones under way finish their thread (each is safe to stop between threads) and
            # are still reported, so the output accounts for every thread that was migrated
            pool.shutdown(wait=True)
            for future in running:
                results.append(future.result())
                if on_result is not None:
                    try:
                        on_result(results[-1])
                    except Exception:  # noqa: BLE001 - already stopping on the first error
                        break
            raise
        pool.shutdown(wait=True)
        summary = MigrationSummary(results, dry_run, time.monotonic() - started, foreign=foreign, signing=signed)
        if thread_ids is None and not dry_run and not summary.failed and not foreign:
            self.mark_format(require_signing=signed is not None and not signed.damaged)
            summary.marked = True
        return summary

    async def amigrate(
        self,
        thread_ids: Sequence[str] | None = None,
        *,
        dry_run: bool = False,
        concurrency: int = 8,
        on_result: Callable[[ThreadMigration], None] | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> MigrationSummary:
        started = time.monotonic()
        signs = self._sign_store(dry_run) if thread_ids is None else None
        signed = await driver.arun(*signs) if signs is not None else None
        targets, foreign = await driver.arun(self.store, self._plan_migration_targets(thread_ids))
        items = [(self, t, ns) for t, ns in targets.items()]
        if thread_ids is None:  # and every team's members' threads (plans/spaces.py)
            for prefix in await driver.arun(self.store, plan_team_spaces()):
                space = self.under(prefix)
                found, damaged = await driver.arun(space.store, space._plan_migration_targets(None))
                items += [(space, t, ns) for t, ns in found.items()]
                foreign += [dataclasses.replace(d, key=prefix + d.key) for d in damaged]
        if on_start is not None:
            on_start(len(items))
        gate = asyncio.Semaphore(max(1, concurrency))
        results: builtins.list[ThreadMigration] = []

        async def one(item: tuple[ObjectStoreSaver, str, builtins.list[str] | None]) -> None:
            saver, thread_id, namespaces = item
            async with gate:
                try:
                    result = await driver.arun(saver.store, saver._migrating(thread_id, dry_run, namespaces))
                except Exception as exc:  # noqa: BLE001 - reported per thread; the run goes on
                    result = ThreadMigration.failure(thread_id, exc)
            _placed(result, saver.store)
            results.append(result)
            if on_result is not None:
                on_result(result)

        tasks = [asyncio.ensure_future(one(item)) for item in items]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:  # stop the rest, as the sync twin does; a cancelled pass is a kill
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        summary = MigrationSummary(results, dry_run, time.monotonic() - started, foreign=foreign, signing=signed)
        if thread_ids is None and not dry_run and not summary.failed and not foreign:
            await self.amark_format(require_signing=signed is not None and not signed.damaged)
            summary.marked = True
        return summary

    def mark_format(self, *, require_signing: bool = False) -> bool:
        """After every thread was migrated: stamp the store's format marker with the current
        storage format (so a later release can tell the store holds nothing older), keeping what
        else it records; with ``require_signing`` (a signing ``migrate`` that left nothing
        unsigned), record that the store's objects must be signed. Returns whether the marker
        changed."""
        return trust.run(self.store, self._plan_mark_format(require_signing))

    async def amark_format(self, *, require_signing: bool = False) -> bool:
        return await trust.arun(self.store, self._plan_mark_format(require_signing))

    def _sign_store(self, dry_run: bool) -> tuple[StoreBase, driver.Plan[SigningPass]] | None:
        """The signing pass of ``migrate`` and the raw store it runs on; None when this saver
        does not sign."""
        if not isinstance(self.store, SigningStore):
            return None
        raw = self.store.inner
        return raw, trust.gated(raw, plan_sign_store(self.store.keys, dry_run))

    def _plan_mark_format(self, require_signing: bool) -> driver.Plan[bool]:
        obj = yield Get(keys.FORMAT_MARKER_KEY)
        record: dict[str, Any] = {"package": "langgraph-handoff"}
        if obj is not None:
            old, env = envelope.decode_msgpack(obj.body, key=obj.key, expect=envelope.Kind.MARKER)
            if env.format_version == envelope.FORMAT_VERSION and (not require_signing or signing.required_by(old)):
                return False
            record = {**(old if isinstance(old, dict) else {}), **record}
        if require_signing:
            record["signing"] = "required"
        marker = envelope.encode_msgpack(envelope.Kind.MARKER, record)
        try:
            if obj is None:
                yield Put(keys.FORMAT_MARKER_KEY, marker, if_none_match=True)
            else:
                yield Put(keys.FORMAT_MARKER_KEY, marker, if_match=obj.etag)
        except (PreconditionFailedError, UnknownOutcomeError):
            return False  # someone else stamped it meanwhile
        return True

    # -- DeltaChannel support --------------------------------------------------------------------
    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Native ancestor walk: one head read and one writes listing for the whole walk,
        instead of a ``get_tuple`` per ancestor."""
        return driver.run(self.store, self._plan_delta_history(config, channels))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await driver.arun(self.store, self._plan_delta_history(config, channels))
