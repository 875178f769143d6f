"""Checkpoint TTL, the pure part: settings, the idle stamp, expiry, and what a sweep reports.

**How idle is measured.** A saver built with ``ttl=`` writes a stamp into the metadata of every
head it writes (:class:`~langgraph_handoff._format.head_meta.TTLStamp`, stored as
``{"ttl": {"at": seconds, "m": minutes}}``): the head is rewritten on every ``put`` anyway, so
the stamp costs no request. This module owns that field and the sweep's mark (``swept``): it is
the only one that builds them. A thread expires when *every* one of its namespace
heads is older than its TTL (a subgraph writing while the root waits keeps the thread alive),
and no session lease on it is live: a lease that has not expired, or a transfer before its
deadline, keeps the thread (an owner's heartbeat renews the lease in the head without writing a
checkpoint or the stamp; see :func:`lease_hold`, which reads the lease through the session's
typed view, :class:`~langgraph_handoff.checkpoint.fencing.LeaseTerms`). A
head written without a stamp (before TTL was turned on, or by a saver without it) counts from the
time inside its latest checkpoint id (LangGraph's ids are time-based uuid6), with the sweeper's
``default_ttl``; with no default it never expires. A saver *without* ``ttl`` drops the stamp when
it writes, so a deployment that turns TTL off stops expiring the threads it keeps writing.

**refresh_on_read** re-stamps a head that ``get_tuple`` read outside a run (``get_state``, the
API; a run's own reads carry LangGraph's ``__pregel_*`` config keys and are not refreshed: the
run's put re-stamps the head anyway, and a refresh right before it would be a wasted write of
the same object, which GCS throttles) by a compare-and-swap of the head, but only when the
stamp is older than
:data:`REFRESH_AFTER` of the TTL: at most one extra PUT per namespace per tenth of the TTL, and
a read never extends a thread's life by less than 90 % of its TTL. A refresh that loses its
compare-and-swap is dropped: whoever moved the head wrote it, which is activity.

The sweep itself lives in :mod:`langgraph_handoff.checkpoint.plans.sweep`.

>>> settings = TTLSettings.parse({"default_ttl": 60, "refresh_on_read": True})
>>> settings.default_ttl, settings.refresh_on_read, settings.strategy
(60.0, True, 'delete')
>>> meta = restamp(HeadMeta(fence=2), settings, now=1000.0)
>>> meta.ttl, meta.wire()
(TTLStamp(at=1000.0, minutes=60.0), {'fence': 2, 'ttl': {'at': 1000.0, 'm': 60.0}})
>>> stamp_expiry(meta)
4600.0
>>> restamp(meta, None, now=2000.0).wire()  # a saver without ttl drops the stamp
{'fence': 2}
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from typing import Any

from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.head_meta import HeadMeta, SweptMark, TTLStamp
from langgraph_handoff.checkpoint.fencing import LeaseTerms
from langgraph_handoff.errors import InvalidConfigError

__all__ = [
    "REFRESH_AFTER",
    "BackgroundSweeper",
    "SweepResult",
    "TTLSettings",
    "ThreadSweep",
    "checkpoint_time",
    "idle_expiry",
    "lease_hold",
    "pending_cleanup",
    "restamp",
    "stamp_expiry",
    "sweep_arguments",
    "swept_mark",
]

log = logging.getLogger("langgraph_handoff")

#: refresh_on_read writes only when the stamp is older than this fraction of the TTL
REFRESH_AFTER = 0.1
#: the Agent Server's own default for ``sweep_interval_minutes``
DEFAULT_SWEEP_INTERVAL_MINUTES = 5.0
_STRATEGIES = ("delete", "keep_latest")
_KEYS = ("default_ttl", "refresh_on_read", "sweep_interval_minutes", "sweep_limit", "strategy")


@dataclass(frozen=True)
class TTLSettings:
    """A saver's ``ttl=``, checked. The dict shape is langgraph-checkpoint-redis's
    (``default_ttl`` minutes, ``refresh_on_read``) plus the Agent Server's ``checkpointer.ttl``
    keys (``strategy``, ``sweep_interval_minutes``, ``sweep_limit``).

    >>> TTLSettings.parse(None) is None
    True
    >>> TTLSettings.parse({"default_ttl": None}) is None  # as in redis: no default, no expiry
    True
    >>> TTLSettings.parse({"default_ttl": 0})
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: ttl default_ttl must be a positive number of minutes, got 0
    >>> TTLSettings.parse({"default_ttl": 5, "refresh": True})
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: unknown ttl keys ['refresh']: use default_ttl, refresh_on_read, sweep_interval_minutes, sweep_limit, strategy
    """

    default_ttl: float
    refresh_on_read: bool = False
    sweep_interval_minutes: float | None = None
    sweep_limit: int | None = None
    strategy: str = "delete"

    @classmethod
    def parse(cls, value: Mapping[str, Any] | TTLSettings | None) -> TTLSettings | None:
        if value is None or isinstance(value, TTLSettings):
            return value
        if not isinstance(value, Mapping):
            raise InvalidConfigError(
                f"ttl must be a dict like {{'default_ttl': 60, 'refresh_on_read': True}}, got {type(value).__name__}"
            )
        unknown = sorted(set(value) - set(_KEYS))
        if unknown:
            raise InvalidConfigError(f"unknown ttl keys {unknown}: use {', '.join(_KEYS)}")
        minutes = value.get("default_ttl")
        if minutes is None:
            return None
        interval = value.get("sweep_interval_minutes")
        limit = value.get("sweep_limit")
        strategy = str(value.get("strategy") or "delete")
        return cls(
            default_ttl=_minutes(minutes, "default_ttl"),
            refresh_on_read=bool(value.get("refresh_on_read", False)),
            sweep_interval_minutes=None if interval is None else _minutes(interval, "sweep_interval_minutes"),
            sweep_limit=None if limit is None else _limit(limit),
            strategy=_strategy(strategy),
        )


def _minutes(value: Any, name: str) -> float:
    try:
        minutes = float(value)
    except (TypeError, ValueError):
        minutes = math.nan
    if isinstance(value, bool) or not math.isfinite(minutes) or minutes <= 0:
        raise InvalidConfigError(f"ttl {name} must be a positive number of minutes, got {value!r}")
    return minutes


def _limit(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidConfigError(f"sweep limit must be a positive whole number of threads, got {value!r}")
    return value


def _strategy(value: str) -> str:
    if value not in _STRATEGIES:
        raise InvalidConfigError(f"ttl strategy {value!r} is not one of {_STRATEGIES}")
    return value


def sweep_arguments(
    settings: TTLSettings | None, default_ttl: float | None, strategy: str | None, limit: int | None
) -> tuple[float | None, str]:
    """A sweep's default TTL (minutes, or None) and strategy: the arguments, else the saver's
    ``ttl`` settings; checked before anything is read.

    >>> sweep_arguments(None, None, None, None)
    (None, 'delete')
    >>> sweep_arguments(TTLSettings(30, strategy="keep_latest"), None, None, 10)
    (30, 'keep_latest')
    >>> sweep_arguments(None, -1, None, None)
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidConfigError: ttl default_ttl must be a positive number of minutes, got -1
    """
    if limit is not None:
        _limit(limit)
    default = _minutes(default_ttl, "default_ttl") if default_ttl is not None else None
    if default is None and settings is not None:
        default = settings.default_ttl
    chosen = _strategy(strategy) if strategy is not None else (settings.strategy if settings else "delete")
    return default, chosen


# --------------------------------------------------------------------------------------------------
# The stamp
# --------------------------------------------------------------------------------------------------


def restamp(meta: HeadMeta, settings: TTLSettings | None, now: float) -> HeadMeta:
    """A written head's metadata: stamped ``now`` when TTL is on, the stamp dropped when it is
    off, and the sweep's mark dropped either way (a put on a swept head starts a new thread),
    except a cleanup still pending (``upto``), which stays until a sweep has done it.

    >>> restamp(HeadMeta(swept=SweptMark(5.0, "c1")), None, now=9.0).wire()
    {'swept': {'upto': 'c1'}}
    """
    if settings is None and meta.ttl is None and meta.swept is None and not meta.unreadable & {"ttl", "swept"}:
        return meta  # the common case allocates nothing
    upto = pending_cleanup(meta)
    return meta.replace(
        swept=SweptMark(None, upto) if upto is not None else None,
        ttl=TTLStamp(round(float(now), 3), settings.default_ttl) if settings is not None else None,
    )


def swept_mark(at: float, upto: str | None) -> SweptMark:
    """The mark of a tombstone: when, and (until its data objects are known deleted) the newest
    checkpoint id the sweep decided on: objects owned by ids up to it are the swept thread's."""
    return SweptMark(round(float(at), 3), upto)


def pending_cleanup(meta: HeadMeta) -> str | None:
    """``upto`` of a head's sweep mark: the thread was emptied, and its data objects owned by
    checkpoint ids up to this one may still be there (None: nothing left to clean up).

    >>> pending_cleanup(HeadMeta(swept=SweptMark(5.0, "c1"))), pending_cleanup(HeadMeta())
    ('c1', None)
    """
    return meta.swept.upto if meta.swept is not None else None


def lease_hold(meta: HeadMeta) -> float | None:
    """Until when a session lease in a root head keeps its thread from being idle (epoch
    seconds): an active lease until it expires, one locked for a transfer until the transfer's
    deadline; None for no lease or a released one. Renewing a lease rewrites the head but not
    the stamp, so this is what tells a heartbeating session from an idle thread.

    >>> lease_hold(HeadMeta(lease={"state": "active", "expires_at": 100.0}))
    100.0
    >>> lease_hold(HeadMeta(lease={"state": "transferring", "expires_at": 90.0, "transfer": {"deadline": 120.0}}))
    120.0
    >>> lease_hold(HeadMeta(lease={"state": "released", "expires_at": 100.0})) is None
    True
    """
    lease = LeaseTerms.of(meta)
    if lease is None or lease.state == "released":
        return None
    times = [lease.expires_at]
    if lease.state == "transferring":
        times.append(lease.transfer_deadline)
    known = [t for t in times if t is not None]
    return max(known) if known else None


def idle_expiry(
    stamped: float | None, latest_time: float | None, held_until: float | None, default_minutes: float | None
) -> float:
    """When one non-empty head stops keeping its thread alive: its stamp's expiry, else its
    latest checkpoint's time plus ``default_minutes`` (``inf``, never, when neither is known);
    and never before a live session lease on it lapses (``held_until``, see :func:`lease_hold`).

    >>> idle_expiry(100.0, None, None, None), idle_expiry(100.0, None, 500.0, None)
    (100.0, 500.0)
    >>> idle_expiry(None, None, 500.0, None)
    inf
    """
    if stamped is not None:
        expiry = stamped
    elif latest_time is None or default_minutes is None:
        expiry = math.inf
    else:
        expiry = latest_time + default_minutes * 60
    return expiry if held_until is None else max(expiry, held_until)


def stamp_expiry(meta: HeadMeta) -> float | None:
    """When a stamped head expires (epoch seconds), or None if it carries no stamp (or one that
    cannot be read)."""
    return None if meta.ttl is None else meta.ttl.expires_at


def wants_refresh(meta: HeadMeta, settings: TTLSettings, now: float) -> bool:
    """Whether a read should re-stamp the head: no stamp, another TTL, or older than
    :data:`REFRESH_AFTER` of it.

    >>> s = TTLSettings(default_ttl=10, refresh_on_read=True)
    >>> wants_refresh(restamp(HeadMeta(), s, 0.0), s, 59.0), wants_refresh(restamp(HeadMeta(), s, 0.0), s, 60.0)
    (False, True)
    """
    stamp = meta.ttl
    if stamp is None or stamp.minutes != settings.default_ttl:
        return True
    return now - stamp.at >= REFRESH_AFTER * settings.default_ttl * 60


_UUID_EPOCH = 0x01B21DD213814000  # 1582-10-15 to 1970-01-01, in 100 ns


def checkpoint_time(checkpoint_id: str | None) -> float | None:
    """Epoch seconds inside a time-based checkpoint id (uuid6, as LangGraph makes them, or
    uuid1); None for any other id.

    >>> from langgraph.checkpoint.base.id import uuid6
    >>> import time
    >>> abs(checkpoint_time(str(uuid6())) - time.time()) < 5
    True
    >>> checkpoint_time("00000000-0000-4000-8000-000000000000") is None
    True
    """
    if not checkpoint_id:
        return None
    try:
        u = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    if u.version == 6:
        ticks = (u.time_low << 28) | (u.time_mid << 12) | (u.time_hi_version & 0x0FFF)
    elif u.version == 1:
        ticks = u.time
    else:
        return None
    return (ticks - _UUID_EPOCH) / 1e7


def head_expiry(meta: HeadMeta, latest_id: str | None, default_minutes: float | None) -> float:
    """When one non-empty head expires (:func:`idle_expiry` of what the head holds)."""
    return idle_expiry(stamp_expiry(meta), checkpoint_time(latest_id), lease_hold(meta), default_minutes)


# --------------------------------------------------------------------------------------------------
# What a sweep reports
# --------------------------------------------------------------------------------------------------


@dataclass
class ThreadSweep:
    """One thread's outcome in a sweep.

    ``status``: ``"deleted"``, ``"would delete"`` (dry run), ``"pruned"`` / ``"would prune"``
    (strategy ``keep_latest``), ``"kept"`` (not expired), ``"revived"`` (expired when read, but a
    writer or a refreshing reader moved its root head before the sweep's compare-and-swap, or
    with ``keep_latest`` every head it would have pruned: left as it is), ``"empty"`` (nothing but empty heads left by an earlier delete or sweep),
    ``"cleaned"`` / ``"would clean"`` (an earlier sweep emptied the thread but was stopped or
    failed before its data objects were all deleted: this sweep deleted them),
    ``"failed"`` (``error`` says why; the sweep goes on). A thread that failed because an object
    of it cannot be read (a damaged head) lists it in ``damaged``; the sweep leaves it as it is.

    A ``"deleted"`` thread with an ``error`` was emptied (its heads swapped: it is gone for
    readers and writers) but deleting its data objects failed; the mark left in its heads makes
    the next sweep finish (``"cleaned"``). :attr:`SweepResult.cleanup_pending` counts them.
    """

    thread_id: str
    status: str
    #: when the thread expired / expires (epoch seconds); None if it never does
    expires_at: float | None = None
    #: objects deleted (data objects; the emptied heads stay, see the sweep module)
    objects_deleted: int = 0
    #: checkpoints removed (strategy ``keep_latest``)
    checkpoints_removed: int = 0
    #: subgraph namespaces a writer revived after the root was swept: left whole, not deleted
    revived_namespaces: list[str] = field(default_factory=list)
    error: str | None = None
    #: strategy ``keep_latest``: expired, but nothing is left to prune (it holds only its latest
    #: checkpoint, e.g. pruned by an earlier sweep); reported ``"kept"``, and not read again by
    #: this sweeper until its head changes
    latest_only: bool = False
    #: the thread's objects this sweep could not read (reported, left as they are)
    damaged: list[DamagedObject] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["expires_at"] = None if self.expires_at is None or math.isinf(self.expires_at) else self.expires_at
        return out


@dataclass
class SweepResult:
    """What :meth:`ObjectStoreSaver.sweep` did. ``threads`` lists every thread it decided on
    (kept ones too); the counts are over them.

    >>> r = SweepResult(dry_run=False, strategy="delete", now=0.0)
    >>> r.add(ThreadSweep("a", "deleted")); r.add(ThreadSweep("b", "kept")); r.add(ThreadSweep("c", "revived"))
    >>> r.examined, r.deleted, r.skipped, r.kept
    (3, 1, 1, 1)
    """

    dry_run: bool
    strategy: str
    #: the sweep's clock reading: every decision was taken against it
    now: float
    threads: list[ThreadSweep] = field(default_factory=list)
    #: stopped early at ``limit`` deletions with threads left that it would act on (expired, or
    #: with an unfinished cleanup), or that it had not read yet; the next sweep goes on. False
    #: when every thread left is known (without a request) to need nothing
    limited: bool = False
    #: wall time the sweep took
    seconds: float = 0.0
    #: keys under ``heads/`` that are not head keys (stray files): reported, never read or deleted
    foreign: list[DamagedObject] = field(default_factory=list)

    def add(self, outcome: ThreadSweep) -> None:
        self.threads.append(outcome)

    @property
    def damaged(self) -> list[DamagedObject]:
        """Every object this sweep could not use: stray keys, and the objects of threads that
        failed because they cannot be read. The sweep went on past each."""
        return [*self.foreign, *(d for t in self.threads for d in t.damaged)]

    def _count(self, *statuses: str) -> int:
        return sum(1 for t in self.threads if t.status in statuses)

    @property
    def examined(self) -> int:
        return len(self.threads)

    @property
    def deleted(self) -> int:
        """Threads deleted (or pruned, with ``keep_latest``), or that would be on a dry run."""
        return self._count("deleted", "would delete", "pruned", "would prune")

    @property
    def skipped(self) -> int:
        """Expired threads left alone: revived during the sweep, or failed."""
        return self._count("revived", "failed")

    @property
    def kept(self) -> int:
        return self._count("kept")

    @property
    def empty(self) -> int:
        return self._count("empty")

    @property
    def failed(self) -> int:
        return self._count("failed")

    @property
    def latest_only(self) -> int:
        """Expired threads ``keep_latest`` left alone: only their latest checkpoint is left."""
        return sum(1 for t in self.threads if t.latest_only)

    @property
    def cleaned(self) -> int:
        """Threads an earlier, interrupted sweep emptied, whose leftovers this one deleted."""
        return self._count("cleaned", "would clean")

    @property
    def cleanup_pending(self) -> int:
        """Threads deleted (emptied) whose data objects could not all be deleted yet: the next
        sweep deletes them."""
        return sum(1 for t in self.threads if t.status == "deleted" and t.error is not None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "strategy": self.strategy,
            "now": self.now,
            "examined": self.examined,
            "deleted": self.deleted,
            "skipped": self.skipped,
            "kept": self.kept,
            "empty": self.empty,
            "failed": self.failed,
            "latest_only": self.latest_only,
            "cleaned": self.cleaned,
            "cleanup_pending": self.cleanup_pending,
            "limited": self.limited,
            "damaged": len(self.damaged),
            "objects_deleted": sum(t.objects_deleted for t in self.threads),
            "seconds": round(self.seconds, 3),
        }


# --------------------------------------------------------------------------------------------------
# A periodic sweep, in a thread or an asyncio task
# --------------------------------------------------------------------------------------------------


def log_damage(name: str, result: Any) -> None:
    """Log (WARNING) each object a background sweep could not read (``result.damaged``): nobody
    else sees its result. The sweep went on past them; ``langgraph-handoff verify`` lists them."""
    for damaged in getattr(result, "damaged", None) or ():
        log.warning(
            "%s TTL sweep skipped %s: %s (%s); it is left as it is", name, damaged.key, damaged.reason, damaged.detail
        )


class BackgroundSweeper:
    """Runs ``sweep`` now and then every ``interval`` seconds until stopped, in a daemon thread
    (:meth:`start`) or an asyncio task (:meth:`astart`). A failing sweep is logged and the loop
    goes on, and so is each object a sweep skipped because it could not read it (a damaged
    head, a stray file); stopping wakes the wait at once. :meth:`astop` cancels a sweep under way: a thread
    emptied but not yet cleaned up keeps a mark in its heads, and the next sweep deletes the
    rest (see :mod:`langgraph_handoff.checkpoint.plans.sweep`)."""

    def __init__(self, name: str, sweep: Callable[[], Any], asweep: Callable[[], Awaitable[Any]]) -> None:
        self.name = name
        self._sweep, self._asweep = sweep, asweep
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._future: Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._astop: asyncio.Event | None = None
        #: sweeps finished (ok or failed) since construction, and an event set after each one
        self.rounds = 0
        self.round_done = threading.Event()

    def _finished(self) -> None:
        self.rounds += 1
        self.round_done.set()

    @property
    def running(self) -> bool:
        return (self._thread is not None and self._thread.is_alive()) or (
            self._task is not None and not self._task.done()
        )

    def start(self, interval_minutes: float) -> Future[None]:
        if self.running:
            raise RuntimeError(f"the {self.name} sweeper is already running; stop it first")
        interval = _minutes(interval_minutes, "sweep_interval_minutes") * 60
        self._stop.clear()
        future: Future[None] = Future()

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    log_damage(self.name, self._sweep())
                except Exception:
                    log.exception("%s TTL sweep failed; retrying in %.0f s", self.name, interval)
                self._finished()
                self._stop.wait(interval)
            future.set_result(None)

        self._future = future
        self._thread = threading.Thread(target=loop, name=f"{self.name}-ttl-sweeper", daemon=True)
        self._thread.start()
        return future

    def stop(self, timeout: float | None = None) -> bool:
        """Stop the thread; True if it ended within ``timeout``."""
        self._stop.set()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        done = not self._thread.is_alive()
        if done:
            self._thread = None
        return done

    async def astart(self, interval_minutes: float) -> asyncio.Task[None]:
        if self.running:
            raise RuntimeError(f"the {self.name} sweeper is already running; stop it first")
        interval = _minutes(interval_minutes, "sweep_interval_minutes") * 60
        stop = self._astop = asyncio.Event()

        async def loop() -> None:
            while not stop.is_set():
                try:
                    log_damage(self.name, await self._asweep())
                except Exception:
                    log.exception("%s TTL sweep failed; retrying in %.0f s", self.name, interval)
                self._finished()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=interval)

        self._task = asyncio.create_task(loop(), name=f"{self.name}-ttl-sweeper")
        return self._task

    async def astop(self, timeout: float | None = None) -> bool:
        """Stop the task (cancelling a sweep under way); True if it ended within ``timeout``."""
        if self._astop is not None:
            self._astop.set()
        task, self._task = self._task, None
        if task is None or task.done():
            return True
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=timeout)
        return bool(done)
