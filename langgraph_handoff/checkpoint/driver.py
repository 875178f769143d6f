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
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph_handoff._format import envelope
from langgraph_handoff.errors import ResponseTooLargeError
from langgraph_handoff.stores.base import Get, Op, StoreBase, StoredObject, settle
from langgraph_handoff.stores.prefixed import prefixed_op, unprefixed_result

__all__ = ["PAUSE", "Batch", "Call", "Emit", "Pause", "Plan", "Sleep", "aiterate", "arun", "iterate", "run", "under"]

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


def _fetched(op: Any, outcome: Any) -> Any:
    """A GET the store refused for the size of what it would return (``ResponseTooLargeError``)
    is, to the plan, an object it cannot read: a refusal that decodes as damage naming the key,
    so a walk over many objects reports it and goes on, as it does for any damaged object."""
    if isinstance(op, Get) and isinstance(outcome, ResponseTooLargeError):
        return StoredObject(op.key, envelope.refusal(str(outcome), "malformed"), "")
    return outcome


def _perform(store: StoreBase, step: Step) -> Any:
    if isinstance(step, Batch):
        outcomes = store.run_many(step.ops, return_exceptions=True)
        return settle([_fetched(op, o) for op, o in zip(step.ops, outcomes, strict=True)], step.outcomes)
    if isinstance(step, Sleep):
        time.sleep(step.seconds)
        return None
    if isinstance(step, Pause):
        return None
    if isinstance(step, Call):
        return step.call()
    try:
        return store.run(step)
    except ResponseTooLargeError as exc:
        if not isinstance(step, Get):
            raise
        return _fetched(step, exc)


async def _aperform(store: StoreBase, step: Step) -> Any:
    if isinstance(step, Batch):
        outcomes = await store.arun_many(step.ops, return_exceptions=True)
        return settle([_fetched(op, o) for op, o in zip(step.ops, outcomes, strict=True)], step.outcomes)
    if isinstance(step, (Sleep, Pause)):
        await asyncio.sleep(step.seconds if isinstance(step, Sleep) else 0)
        return None
    if isinstance(step, Call):
        return await step.acall()
    try:
        return await store.arun(step)
    except ResponseTooLargeError as exc:
        if not isinstance(step, Get):
            raise
        return _fetched(step, exc)


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
