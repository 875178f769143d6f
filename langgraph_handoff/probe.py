"""The store probe: does this store really enforce conditional writes?

Everything this package guarantees rests on two conditions the store must enforce: a create-only
PUT (``If-None-Match: *``) fails when the key exists, and a compare-and-swap PUT (``If-Match``)
fails when the ETag is stale. Some "S3-compatible" services accept both headers and ignore them
(Google Cloud Storage's S3 API, Garage, older MinIO builds, moto 4), or refuse them (Backblaze B2
answers 501). On such a store the saver would write happily while two workers fork a thread.

* :func:`plan_check` is what ``setup()`` runs once per deployment, and what the saver runs
  before its first write to a store no probe has passed (:mod:`langgraph_handoff.checkpoint.trust`):
  6 requests on a scratch key under ``meta/probe/``, raising
  :class:`~langgraph_handoff.errors.UnsafeStoreError` on any failure. The pass is recorded in
  the format marker, so a later process pays one GET.
* :func:`plan_report` is ``langgraph-handoff doctor``: the same checks plus conditional delete,
  list-after-write and the median latency of each operation, as a :class:`ProbeReport`.
* :func:`race` / :func:`arace` is ``langgraph-handoff doctor --race``: many writers at once, the
  same ETag (or the same new key), round after round, as a :class:`RaceReport`. The two checks
  above send one request at a time, so they cannot see a compare-and-swap that checks and then
  writes without holding anything in between: moto 5.2.5 refuses a stale ``If-Match`` sent
  alone, yet let two writers win in some rounds of a 16-thread race. That store would pass
  ``setup()`` and fork threads under load; only a race shows it. Too costly for every start
  (hundreds of requests), so it is ``doctor``'s, on demand.

The first two are plans (see :mod:`langgraph_handoff.checkpoint.driver`), so the sync and async
paths share them:

>>> from langgraph_handoff.checkpoint import driver
>>> from langgraph_handoff.stores import MemoryStore
>>> report = driver.run(MemoryStore(), plan_report(rounds=1))
>>> report.trusted, report.create_only, report.compare_and_swap
(True, 'enforced', 'enforced')
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from langgraph_handoff.checkpoint import driver
from langgraph_handoff.errors import (
    PreconditionFailedError,
    StoreError,
    StoreNotFoundError,
    StoreUnavailableError,
    UnknownOutcomeError,
    UnsafeStoreError,
)
from langgraph_handoff.stores.base import Delete, Get, ListPage, Op, Put, StoreBase

__all__ = ["PROBE_PREFIX", "ProbeReport", "RaceReport", "RaceTally", "arace", "race"]

#: scratch keys live here, one fresh name per probe, deleted afterwards
PROBE_PREFIX = "meta/probe/"


@dataclass
class ProbeReport:
    """What ``doctor`` found. Each capability reads ``enforced``/``ignored``/``refused: ...``."""

    store: str
    create_only: str = "not probed"
    compare_and_swap: str = "not probed"
    #: which ``If-Match`` form the server matched (S3 stores), else ``n/a``
    etag_quoting: str = "n/a"
    conditional_delete: str = "not probed"
    list_after_write: str = "not probed"
    #: median milliseconds per operation, measured from this client
    latency_ms: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def trusted(self) -> bool:
        """Whether the saver may use this store: both write conditions enforced."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "trusted": self.trusted}


class _Timer:
    """Collects the wall time of each operation a plan performs, by name."""

    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = {}

    def timed(self, name: str, op: Op) -> driver.Plan[Any]:
        start = time.perf_counter()
        try:
            return (yield op)
        finally:
            self.samples.setdefault(name, []).append((time.perf_counter() - start) * 1000)

    def medians(self) -> dict[str, float]:
        return {name: round(statistics.median(values), 2) for name, values in self.samples.items()}


def _scratch() -> str:
    return f"{PROBE_PREFIX}{secrets.token_hex(16)}"


def _conditions(report: ProbeReport, key: str, timer: _Timer) -> driver.Plan[None]:
    """The two write conditions on ``key`` (absent at the start); fills ``report``.

    Only an answer proves anything: a condition the store ignored (a second create-only PUT or
    a stale ``If-Match`` that was applied) or a refusal it gave on purpose (an error answer that
    is not transient, such as Backblaze B2's 501). A transient failure (a reset, a 5xx, an answer
    lost after the store committed) proves nothing, so it is settled by reading the key back or
    it ends the probe with :class:`~langgraph_handoff.errors.StoreUnavailableError`: the caller's
    one operation fails, nothing is kept, and the next write probes again.
    """
    try:
        yield from timer.timed("put_create_only", Put(key, b"probe-1", if_none_match=True))
    except StoreNotFoundError:
        raise  # a missing bucket says nothing about conditions: the caller must create it
    except StoreUnavailableError:
        raise
    except (UnknownOutcomeError, PreconditionFailedError) as exc:
        # the answer was lost (or a re-send of a PUT that landed found it there): read it back
        stored = yield Get(key)
        if stored is None or stored.body != b"probe-1":
            raise _inconclusive("the first create-only PUT", exc) from None
    except StoreError as exc:
        report.create_only = report.compare_and_swap = f"refused: {exc}"
        report.problems.append(f"it refuses conditional writes ({exc})")
        return
    if (yield from _landed(timer, "put_create_only", Put(key, b"probe-2", if_none_match=True))):
        report.create_only = "ignored"
        report.problems.append("a second create-only PUT (If-None-Match: *) was accepted")
    else:
        report.create_only = "enforced"
    current = yield Get(key)
    if current is None:
        raise _inconclusive("reading the scratch key back", None)
    wrong = "0" * 32 if current.etag != "0" * 32 else "1" * 32
    if (yield from _landed(timer, "put_if_match", Put(key, b"probe-3", if_match=wrong))):
        report.compare_and_swap = "ignored"
        report.problems.append("a PUT with a wrong If-Match was accepted")
        current = yield Get(key)
        if current is None:
            raise _inconclusive("reading the scratch key back", None)
    else:
        report.compare_and_swap = "enforced"
    put = Put(key, b"probe-4", if_match=current.etag)
    try:
        applied = yield from _landed(timer, "put_if_match", put, must_land=True)
    except UnknownOutcomeError as exc:
        raise _inconclusive("the compare-and-swap PUT", exc) from None
    if not applied:
        report.compare_and_swap = "refused: the current ETag did not match"
        report.problems.append("a PUT with the current ETag as If-Match was refused")


def _inconclusive(what: str, exc: BaseException | None) -> StoreUnavailableError:
    cause = f": {exc}" if exc is not None else ""
    return StoreUnavailableError(
        f"the store probe could not finish ({what} failed without an answer{cause}); nothing is concluded "
        "about the store, and the next write probes again. Retry the operation"
    )


def _landed(timer: _Timer, name: str, put: Put, *, must_land: bool = False) -> driver.Plan[bool]:
    """Whether a conditional PUT was applied. An unknown outcome is settled by reading the key
    back (GCS answers a quick second write to one name with 429, and a 412 after a retried 429
    is reported as unknown).

    ``must_land``: the PUT should succeed. Its lost condition is read back too, for it may be the
    store refusing a client's own re-send of the PUT that landed (botocore re-sends a PUT whose
    answer it lost); and not finding it after an unknown outcome raises that outcome (the probe
    is inconclusive) rather than reporting a refusal no answer proved. A PUT that must fail
    needs no read-back after a 412: a store that ignored the condition would have applied the
    re-send too."""
    try:
        yield from timer.timed(name, put)
        return True
    except PreconditionFailedError:
        if not must_land:
            return False
        stored = yield Get(put.key)
        return stored is not None and stored.body == put.body
    except UnknownOutcomeError:
        stored = yield Get(put.key)
        if stored is not None and stored.body == put.body:
            return True
        if must_land:
            raise
        return False


def plan_check(store_name: str = "the store") -> driver.Plan[None]:
    """``setup()``'s probe: the write conditions on a scratch key (6 requests, one of them a
    DELETE), raising :class:`~langgraph_handoff.errors.UnsafeStoreError` if they do not hold."""
    report = ProbeReport(store=store_name)
    key = _scratch()
    try:
        yield from _conditions(report, key, _Timer())
    finally:
        # a scratch key left under meta/probe/ is harmless: a failed clean-up changes no verdict
        with contextlib.suppress(StoreError):
            yield Delete(key)
    if report.problems:
        raise UnsafeStoreError(store_name, report.problems)


def plan_report(store_name: str = "the store", *, rounds: int = 5, quoting: Any = None) -> driver.Plan[ProbeReport]:
    """``doctor``'s probe: the write conditions, conditional delete, list-after-write, and the
    median latency of GET, PUT, create-only PUT, compare-and-swap PUT, LIST and DELETE over
    ``rounds`` rounds. Never raises for what it finds; the report says it. ``quoting`` is an S3
    store's :class:`~langgraph_handoff.stores.s3_compat.EtagQuoting`, read after the probe."""
    report = ProbeReport(store=store_name)
    timer = _Timer()
    run = secrets.token_hex(16)
    base = f"{PROBE_PREFIX}{run}/"
    written = [f"{base}cas"]
    try:
        yield from _conditions(report, f"{base}cas", timer)
        if quoting is not None and report.compare_and_swap == "enforced":
            report.etag_quoting = "quoted" if quoting.quoted else "unquoted"
        key = f"{base}del"
        written.append(key)
        yield Put(key, b"x")
        try:
            yield Delete(key, if_match="0" * 32)
            report.conditional_delete = "ignored" if (yield Get(key)) is None else "enforced"
        except PreconditionFailedError:
            report.conditional_delete = "enforced"
        except StoreError:
            report.conditional_delete = "not offered"
        for i in range(rounds):
            key = f"{base}r{i}"
            written.append(key)
            yield from timer.timed("put", Put(key, b"x" * 1024))
            yield from timer.timed("get", Get(key))
            page = yield from timer.timed("list", ListPage(base))
            if i == 0:
                listed = key in {item.key for item in page.items}
                report.list_after_write = "yes" if listed else "no: a key just written was not listed"
                if not listed:
                    report.problems.append("a key just written was missing from the listing")
        for key in written[2:]:
            yield from timer.timed("delete", Delete(key))
        written = written[:2]
    finally:
        for key in written:
            yield Delete(key)
    report.latency_ms = timer.medians()
    return report


# -- the race: many writers, one ETag ----------------------------------------------------------------

CAS = "compare-and-swap"
CREATE_ONLY = "create-only"


@dataclass
class RaceTally:
    """One kind of conditional PUT raced ``rounds`` times by ``writers`` writers at once."""

    kind: str
    writers: int
    rounds: int = 0
    #: rounds in which two or more writers were told (or found) that their write won
    double_wins: int = 0
    #: the most writers that won one round
    most_winners: int = 0
    #: answers that left the outcome open (RGW answers many losers 500), settled by reading back
    unknown: int = 0
    #: writes that failed outright (not a lost race), and the first few of their errors
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)

    def note(self, outcomes: list[str | BaseException], bodies: list[bytes], final: bytes | None) -> None:
        """Count one round: who won, going by the answers and by what the key holds now."""
        self.rounds += 1
        winners = set()
        for i, outcome in enumerate(outcomes):
            if outcome == "won":
                winners.add(i)
            elif outcome == "unknown":
                self.unknown += 1
                if final == bodies[i]:  # its write landed: it won
                    winners.add(i)
            elif isinstance(outcome, BaseException):
                self.errors += 1
                if len(self.error_samples) < 3:
                    self.error_samples.append(f"{type(outcome).__name__}: {outcome}")
        self.most_winners = max(self.most_winners, len(winners))
        if len(winners) >= 2:
            self.double_wins += 1

    @property
    def verdict(self) -> str:
        """What ``doctor`` prints for it."""
        if self.double_wins:
            return (
                f"NOT ATOMIC: two or more of {self.writers} writers won in {self.double_wins} of {self.rounds} "
                f"rounds (up to {self.most_winners} in one round)"
            )
        if self.errors == self.rounds * self.writers:
            return f"not raced: every write failed ({'; '.join(self.error_samples)})"
        notes = [f"{self.writers} writers at once"]
        if self.unknown:
            notes.append(f"{self.unknown} unknown answers read back")
        if self.errors:
            notes.append(f"{self.errors} writes failed")
        return f"one winner at most in each of {self.rounds} rounds ({', '.join(notes)})"


@dataclass
class RaceReport:
    """What ``doctor --race`` found: one :class:`RaceTally` per kind of conditional PUT."""

    store: str
    writers: int
    rounds: int
    compare_and_swap: RaceTally
    create_only: RaceTally

    @property
    def problems(self) -> list[str]:
        return [
            f"{tally.kind} PUT raced by {self.writers} writers: {tally.verdict}"
            for tally in (self.compare_and_swap, self.create_only)
            if tally.double_wins or tally.errors == tally.rounds * tally.writers
        ]

    @property
    def trusted(self) -> bool:
        """Whether no round had two winners (and the race could run at all)."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "problems": self.problems, "trusted": self.trusted}


def _outcome(exc: BaseException | None) -> str | BaseException:
    if exc is None:
        return "won"
    if isinstance(exc, PreconditionFailedError):
        return "lost"
    if isinstance(exc, UnknownOutcomeError):
        return "unknown"
    return exc


def _round_put(kind: str, key: str, etag: str | None, body: bytes) -> Put:
    if kind == CAS:
        return Put(key, body, if_match=etag)
    return Put(key, body, if_none_match=True)


def _plan_round_start(kind: str, base: str, i: int) -> driver.Plan[tuple[str, str | None]]:
    """The key the writers of round ``i`` race on, and the ETag they all hold."""
    if kind == CREATE_ONLY:
        return f"{base}create-{i}", None
    key = f"{base}cas"
    etag = yield Put(key, f"round {i}".encode())
    if i == 0:  # one uncontested swap first, so an S3 store learns its ETag quoting alone
        etag = yield Put(key, b"warm-up", if_match=etag)
    return key, etag


def _check_race_arguments(writers: int, rounds: int) -> None:
    if writers < 2 or rounds < 1:
        raise ValueError(f"a race needs 2 or more writers and 1 or more rounds, not {writers} and {rounds}")


def race(store: StoreBase, *, writers: int = 16, rounds: int = 20, store_name: str | None = None) -> RaceReport:
    """``writers`` threads, held at a barrier, send the same conditional PUT at once, ``rounds``
    times for each kind: a compare-and-swap on the same ETag, and a create-only PUT of the same
    new key. A store is atomic if no round ever has two winners. Scratch keys live under
    :data:`PROBE_PREFIX` and are deleted afterwards.

    >>> from langgraph_handoff.stores import MemoryStore
    >>> report = race(MemoryStore(), writers=4, rounds=3)
    >>> report.trusted, report.compare_and_swap.double_wins, report.create_only.rounds
    (True, 0, 3)
    """
    _check_race_arguments(writers, rounds)
    base = f"{PROBE_PREFIX}{secrets.token_hex(16)}/"
    tallies = {kind: RaceTally(kind, writers) for kind in (CAS, CREATE_ONLY)}
    written: list[str] = []
    pool = ThreadPoolExecutor(writers, thread_name_prefix="lgh-race")
    try:
        for kind, tally in tallies.items():
            for i in range(rounds):
                key, etag = driver.run(store, _plan_round_start(kind, base, i))
                written.append(key)
                puts = [_round_put(kind, key, etag, f"round {i} writer {w}".encode()) for w in range(writers)]
                outcomes = _fire_threads(store, pool, puts)
                final = store.get(key)
                tally.note(outcomes, [put.body for put in puts], None if final is None else final.body)
    finally:
        pool.shutdown(wait=True)
        store.delete_many(sorted(set(written)))
    return RaceReport(store_name or repr(store), writers, rounds, tallies[CAS], tallies[CREATE_ONLY])


async def arace(store: StoreBase, *, writers: int = 16, rounds: int = 20, store_name: str | None = None) -> RaceReport:
    """:func:`race` with ``writers`` tasks on the running event loop (the store's async API),
    released together once every one of them has started."""
    _check_race_arguments(writers, rounds)
    base = f"{PROBE_PREFIX}{secrets.token_hex(16)}/"
    tallies = {kind: RaceTally(kind, writers) for kind in (CAS, CREATE_ONLY)}
    written: list[str] = []
    try:
        for kind, tally in tallies.items():
            for i in range(rounds):
                key, etag = await driver.arun(store, _plan_round_start(kind, base, i))
                written.append(key)
                puts = [_round_put(kind, key, etag, f"round {i} writer {w}".encode()) for w in range(writers)]
                outcomes = await _fire_tasks(store, puts)
                final = await store.aget(key)
                tally.note(outcomes, [put.body for put in puts], None if final is None else final.body)
    finally:
        await store.adelete_many(sorted(set(written)))
    return RaceReport(store_name or repr(store), writers, rounds, tallies[CAS], tallies[CREATE_ONLY])


def _fire_threads(store: StoreBase, pool: ThreadPoolExecutor, puts: list[Put]) -> list[str | BaseException]:
    """Each PUT from a thread of its own (the pool has one per PUT), all released by one barrier."""
    barrier = threading.Barrier(len(puts))

    def one(put: Put) -> str | BaseException:
        barrier.wait(timeout=60)
        try:
            store.run(put)
        except Exception as exc:  # noqa: BLE001 - every answer is counted
            return _outcome(exc)
        return _outcome(None)

    return list(pool.map(one, puts))


async def _fire_tasks(store: StoreBase, puts: list[Put]) -> list[str | BaseException]:
    """Each PUT from a task of its own, released together once every task has started."""
    go = asyncio.Event()
    ready = _Countdown(len(puts), go.set)

    async def one(put: Put) -> str | BaseException:
        ready.arrive()
        await go.wait()
        try:
            await store.arun(put)
        except Exception as exc:  # noqa: BLE001 - every answer is counted
            return _outcome(exc)
        return _outcome(None)

    return list(await asyncio.gather(*(one(put) for put in puts)))


class _Countdown:
    """Calls ``then`` when ``arrive`` was called ``n`` times (asyncio.Barrier is 3.11+)."""

    def __init__(self, n: int, then: Callable[[], None]) -> None:
        self.left, self.then = n, then

    def arrive(self) -> None:
        self.left -= 1
        if self.left == 0:
            self.then()
