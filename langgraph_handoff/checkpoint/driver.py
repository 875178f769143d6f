"""Drivers: run one sans-I/O plan against a store, synchronously or asynchronously.

Every saver operation is written once, as a generator ("plan") that yields what it needs done and
receives the outcome (httpx's one-core, two-front-ends model):

* a store :data:`~langgraph_handoff.stores.base.Op` -> its result, or the exception it raised is
  thrown back into the plan at the ``yield``;
* :class:`Batch` -> a list of results; the operations are independent and run in parallel where the
  store can (one round trip). With ``outcomes=True`` a failed operation's exception takes its
  place in the list instead of being thrown;
* :class:`Sleep` -> back off before a retry;
* :class:`Pause` -> nothing when run synchronously; under asyncio, let the event loop run other
  tasks before the plan goes on (a walk over many objects pauses after each one it decodes, so
  a sweep inside a server never holds the loop for longer than one object);
* :class:`Emit` -> hand one item to the caller (streaming ``list``);
* :class:`Call` -> run a function in the caller's own mode (``call()`` or ``await acall()``) and
  send back its result: work that must wait for other threads or tasks, which a plan cannot do
  (the store probe before a first write, :mod:`langgraph_handoff.checkpoint.trust`).

The plan's return value is the operation's result. Only these two small loops know whether the
caller is sync or async.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph_handoff._format import envelope
from langgraph_handoff.errors import NotAnObjectError, ResponseTooLargeError, StoreUnavailableError
from langgraph_handoff.stores.base import Get, Op, StoreBase, StoredObject, settle
from langgraph_handoff.stores.prefixed import prefixed_op, unprefixed_result

__all__ = [
    "PAUSE",
    "Batch",
    "Call",
    "Emit",
    "Pause",
    "Plan",
    "Sleep",
    "aiterate",
    "arun",
    "fetch",
    "fetch_many",
    "iterate",
    "run",
    "under",
]

R = TypeVar("R")


@dataclass(frozen=True)
class Batch:
    ops: tuple[Op, ...]
    outcomes: bool = False


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Pause:
    """Let other tasks of the event loop run (``asyncio.sleep(0)``); nothing in sync mode."""


PAUSE = Pause()


@dataclass(frozen=True)
class Emit:
    item: Any


@dataclass(frozen=True)
class Call:
    """``call()`` under :func:`run`/:func:`iterate`, ``await acall()`` under :func:`arun`/:func:`aiterate`."""

    call: Callable[[], Any]
    acall: Callable[[], Awaitable[Any]]


Step = Any  # Op | Batch | Sleep | Pause | Emit | Call
Plan = Generator[Step, Any, R]


class _Done(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


def _advance(plan: Plan[Any], value: Any, error: BaseException | None) -> Step:
    try:
        if error is not None:
            return plan.throw(error)
        return plan.send(value)
    except StopIteration as stop:
        raise _Done(stop.value) from None


#: what a store raises for a GET of an object it will not hand over, and the damage it stands for
_UNREADABLE = ((ResponseTooLargeError, "malformed"), (NotAnObjectError, "not_ours"))


def _fetched(op: Any, outcome: Any) -> Any:
    """A GET the store refused for the size of what it would return (``ResponseTooLargeError``),
    or for what is at the key (``NotAnObjectError``: a link or a FIFO in a directory) is, to the
    plan, an object it cannot read: a refusal that decodes as damage naming the key, so a walk
    over many objects reports it and goes on, as it does for any damaged object."""
    if isinstance(op, Get):
        for error, reason in _UNREADABLE:
            if isinstance(outcome, error):
                return StoredObject(op.key, envelope.refusal(str(outcome), reason), "")
    return outcome


#: reads of an object that keeps arriving cut short before the GET is decided: damage when
#: every read was the same, else an outage (``StoreUnavailableError``)
CUT_READS = 3


def _cut(op: Any, outcome: Any) -> bool:
    return isinstance(op, Get) and isinstance(outcome, StoredObject) and envelope.cut_short(outcome.body)


def _after_cut(key: str, again: Any, reads: int, identical: bool) -> bool:
    """Whether ``again`` (the ``reads``-th read of an object that arrived cut short) is the
    answer. A whole object (or none) is. After :data:`CUT_READS` reads that all arrived cut
    short: the very same bytes under the same ETag every time are an object stored cut short,
    which decodes as the damage it is (``truncated``); bodies that differed are a transport
    failure, not the object, an outage (``StoreUnavailableError``), never a
    ``CorruptObjectError`` telling the operator to restore an object that is intact. Three
    identical cuts in a row, not two: the fault campaign saw two transient cuts that matched."""
    if not _cut(Get(key), again):
        return True
    if reads < CUT_READS:
        return False
    if identical:
        return True
    raise StoreUnavailableError(
        f"GET {key}: the body arrived cut short {reads} times, not always the same (the object is "
        "probably intact); a proxy or the network is cutting answers. Retry the operation"
    )


def _same(a: Any, b: Any) -> bool:
    return isinstance(b, StoredObject) and a.body == b.body and a.etag == b.etag


def _whole(store: StoreBase, op: Any, outcome: Any) -> Any:
    """``outcome`` of ``op``, read again while it arrives cut short; an error as a value."""
    reads, identical = 1, True
    try:
        while _cut(op, outcome):
            reads += 1
            again = _fetched(op, _get(store, op))
            identical = identical and _same(outcome, again)
            if _after_cut(op.key, again, reads, identical):
                return again
            outcome = again
    except Exception as exc:  # noqa: BLE001 - an outcome, as the batch hands back every other
        return exc
    return outcome


async def _awhole(store: StoreBase, op: Any, outcome: Any) -> Any:
    reads, identical = 1, True
    try:
        while _cut(op, outcome):
            reads += 1
            again = _fetched(op, await _aget(store, op))
            identical = identical and _same(outcome, again)
            if _after_cut(op.key, again, reads, identical):
                return again
            outcome = again
    except Exception as exc:  # noqa: BLE001 - an outcome, as the batch hands back every other
        return exc
    return outcome


def _get(store: StoreBase, op: Get) -> Any:
    """A GET's outcome, its error as a value (a batch's outcomes carry errors so)."""
    try:
        return store.run(op)
    except Exception as exc:  # noqa: BLE001
        return exc


async def _aget(store: StoreBase, op: Get) -> Any:
    try:
        return await store.arun(op)
    except Exception as exc:  # noqa: BLE001
        return exc


def _raised(outcome: Any) -> Any:
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def fetch_many(store: StoreBase, ops: Sequence[Op]) -> list[Any]:
    """``store.run_many(ops)`` for a walk that is not a plan (``verify``, ``threads``, the
    long-term memory's sweep): a GET of an object the store will not hand over comes back as
    the refusal a plan gets (:func:`_fetched`), and one that arrives cut short is read again as
    a plan's is, so the walk reports damage and goes on; any other failure is raised."""
    outcomes = store.run_many(ops, return_exceptions=True)
    return settle([_whole(store, op, _fetched(op, o)) for op, o in zip(ops, outcomes, strict=True)], False)


def fetch(store: StoreBase, key: str) -> StoredObject | None:
    """:func:`fetch_many` of one GET."""
    return fetch_many(store, (Get(key),))[0]  # type: ignore[no-any-return]


def _perform(store: StoreBase, step: Step) -> Any:
    if isinstance(step, Batch):
        outcomes = store.run_many(step.ops, return_exceptions=True)
        got = [_whole(store, op, _fetched(op, o)) for op, o in zip(step.ops, outcomes, strict=True)]
        return settle(got, step.outcomes)
    if isinstance(step, Sleep):
        time.sleep(step.seconds)
        return None
    if isinstance(step, Pause):
        return None
    if isinstance(step, Call):
        return step.call()
    if isinstance(step, Get):
        return _raised(_whole(store, step, _fetched(step, _get(store, step))))
    return store.run(step)


async def _aperform(store: StoreBase, step: Step) -> Any:
    if isinstance(step, Batch):
        outcomes = await store.arun_many(step.ops, return_exceptions=True)
        got = [await _awhole(store, op, _fetched(op, o)) for op, o in zip(step.ops, outcomes, strict=True)]
        return settle(got, step.outcomes)
    if isinstance(step, (Sleep, Pause)):
        await asyncio.sleep(step.seconds if isinstance(step, Sleep) else 0)
        return None
    if isinstance(step, Call):
        return await step.acall()
    if isinstance(step, Get):
        return _raised(await _awhole(store, step, _fetched(step, await _aget(store, step))))
    return await store.arun(step)


def iterate(store: StoreBase, plan: Plan[R]) -> Generator[Any, None, R]:
    """Drive ``plan`` synchronously, yielding what it emits; returns the plan's result."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = _advance(plan, value, error)
        except _Done as done:
            return done.value  # type: ignore[no-any-return]
        value, error = None, None
        if isinstance(step, Emit):
            yield step.item
            continue
        try:
            value = _perform(store, step)
        except Exception as exc:  # noqa: BLE001 - handed to the plan, which decides
            error = exc


def run(store: StoreBase, plan: Plan[R]) -> R:
    """Drive a non-streaming plan synchronously and return its result."""
    driver = iterate(store, plan)
    try:
        next(driver)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    raise TypeError("plan emitted items; drive it with iterate()")


async def aiterate(store: StoreBase, plan: Plan[Any], result: list[Any] | None = None) -> AsyncIterator[Any]:
    """Drive ``plan`` asynchronously, yielding what it emits. An async generator cannot return a
    value, so the plan's result is appended to ``result`` when one is passed."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = _advance(plan, value, error)
        except _Done as done:
            if result is not None:
                result.append(done.value)
            return
        value, error = None, None
        if isinstance(step, Emit):
            yield step.item
            continue
        try:
            value = await _aperform(store, step)
        except Exception as exc:  # noqa: BLE001 - handed to the plan, which decides
            error = exc


def under(prefix: str, plan: Plan[R]) -> Plan[R]:
    """``plan``, written for a store, as a step of a plan on the store that holds it under
    ``prefix`` (:class:`~langgraph_handoff.stores.prefixed.PrefixedStore`): its operations go out
    with the prefix and their results come back without it. A team's plans, which run on the
    store's root (roster, inboxes), read and swap a member's head of the team's saver so.

    >>> from langgraph_handoff.stores import MemoryStore
    >>> root = MemoryStore()
    >>> _ = root.put("teams/t/members/k", b"v")
    >>> def read():
    ...     obj = yield Get("k")
    ...     return obj.key, obj.body
    >>> run(root, under("teams/t/members/", read()))
    ('k', b'v')
    """
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = _advance(plan, value, error)
        except _Done as done:
            return done.value  # type: ignore[no-any-return]
        if isinstance(step, Batch):
            step = Batch(tuple(prefixed_op(prefix, op) for op in step.ops), step.outcomes)
        elif not isinstance(step, (Sleep, Pause, Emit, Call)):
            step = prefixed_op(prefix, step)
        try:
            got = yield step
        except GeneratorExit:
            plan.close()
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the plan, as the driver would
            value, error = None, exc
            continue
        if isinstance(got, list):
            value, error = [unprefixed_result(prefix, r) for r in got], None
        else:
            value, error = unprefixed_result(prefix, got), None


async def arun(store: StoreBase, plan: Plan[R]) -> R:
    """Drive a non-streaming plan asynchronously and return its result."""
    result: list[Any] = []
    async for _item in aiterate(store, plan, result):
        raise TypeError("plan emitted items; drive it with aiterate()")
    return result[0]  # type: ignore[no-any-return]
