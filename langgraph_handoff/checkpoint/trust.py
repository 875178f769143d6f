"""A saver never writes to a store no probe has passed.

Everything the saver guarantees rests on the store enforcing ``If-None-Match: *`` and
``If-Match`` (:mod:`langgraph_handoff.probe`). ``setup()`` checks that, but nothing made anyone
call it: the documented S3 example did not, LangGraph's own tests build savers without it, and
on a server that accepts the headers and ignores them a graph wrote happily while two workers
could fork a thread. So the check runs by itself, at the first write:

* **Local stores are ours.** ``MemoryStore`` and ``LocalStore`` implement the conditions in
  this package (:meth:`~langgraph_handoff.stores.base.StoreBase.trust_scope` is ``None``):
  nothing is probed, nothing is added to any operation.
* **Any other store is probed once per process**, before the first operation that writes
  (a ``Put``, ``Delete`` or ``DeleteMany``; reads never probe, so read-only credentials keep
  working). The probe is :func:`plan_setup`, exactly what ``setup()`` runs: it reads the format
  marker ``meta/format`` (1 GET); a marker that records a passed probe is enough. Otherwise it
  probes (6 requests on a scratch key) and records the pass in the marker, so the next process
  pays the GET only. The verdict is kept for the process per *scope* (the server, bucket and
  prefix): every later operation runs exactly as before, with no request and no wrapper.
* **A failure is kept as well**: every write then raises
  :class:`~langgraph_handoff.errors.UnsafeStoreError` at once, without a request, saying to run
  ``langgraph-handoff doctor``. ``setup()`` probes again (and records what it finds). Errors that
  say nothing about the store's conditions (a missing bucket, throttling) are raised, not kept.
* **Not gated**: ``ObjectStoreMemory`` (long-term memories are unconditional PUTs, last writer
  wins per key: they rely on no condition), and ``doctor`` (it *is* the probe).
* **Concurrent first writers share one probe**: threads wait on a lock, the coroutines of one
  event loop on an asyncio lock (a plan cannot wait, so the gate yields a
  :class:`~langgraph_handoff.checkpoint.driver.Call`, run in the caller's own mode).

Why probe rather than refuse until ``setup()`` runs: refusing costs nothing at the first write,
but breaks every program that never called ``setup()`` (LangGraph's suite on S3, the documented
examples until now), while the probe costs one GET per process on a store ``setup()`` or another
process already probed. Measured in ``bench/first_write.py`` (docs/checkpointer.md, "The store probe").

>>> from langgraph_handoff.stores import MemoryStore
>>> def plan():
...     yield Put("k", b"v")
>>> p = plan()
>>> gated(MemoryStore(), p) is p  # a local store: nothing to probe, the plan itself
True
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
import weakref
from collections.abc import Hashable
from typing import Any, TypeVar

from langgraph_handoff import probe
from langgraph_handoff._format import envelope, keys, signing
from langgraph_handoff._version import __version__
from langgraph_handoff.checkpoint import driver
from langgraph_handoff.errors import (
    PreconditionFailedError,
    SigningKeyRequiredError,
    StoreUnavailableError,
    UnknownOutcomeError,
    UnsafeStoreError,
)
from langgraph_handoff.stores.base import Delete, DeleteMany, Get, Put, StoreBase
from langgraph_handoff.stores.prefixed import unprefixed

R = TypeVar("R")

__all__ = ["aensure", "arun", "asetup", "ensure", "forget", "gated", "plan_setup", "run", "setup", "verdict"]

#: the scopes a probe passed in this process. A store that names no scope of its own is its own
#: scope, kept weakly: a verdict must not keep a store alive, nor pass to a new store at its address
_PASSED: set[Hashable] = set()
_PASSED_STORES: weakref.WeakSet[StoreBase] = weakref.WeakSet()
#: scope -> (store, problems) of a probe that failed in this process
_FAILED: dict[Hashable, tuple[str, list[str]]] = {}
_FAILED_STORES: weakref.WeakKeyDictionary[StoreBase, tuple[str, list[str]]] = weakref.WeakKeyDictionary()
_THREAD_LOCKS: dict[Hashable, threading.Lock] = {}
_LOOP_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)
_GUARD = threading.Lock()
_WRITES = (Put, Delete, DeleteMany)


#: sends of the format marker whose answers were lost before setup gives up (a transient error)
_MARKER_ATTEMPTS = 3


def plan_setup(store_name: str, *, signs: bool = False, accept_unsigned: bool = False) -> driver.Plan[None]:
    """``setup()``: probe the store unless its format marker records a pass, then record it.

    ``signs``: the store signs what it writes (``SigningStore``); without, a marker that says a
    key is required raises :class:`~langgraph_handoff.errors.SigningKeyRequiredError` before
    anything is written. With it (and not ``accept_unsigned``), the marker is made to say so.

    The marker keeps the storage format version it had: recording a probe migrates nothing
    (only ``mark_format``, after a full ``migrate``, moves it). A concurrent setup that wrote the
    marker first is fine; a marker from a newer release raises
    :class:`~langgraph_handoff.errors.EnvelopeVersionError` before anything is written."""
    obj = yield Get(keys.FORMAT_MARKER_KEY)
    marker: Any = None
    version = envelope.FORMAT_VERSION
    if obj is not None:
        marker, env = envelope.decode_msgpack(obj.body, key=obj.key, expect=envelope.Kind.MARKER)
        version = env.format_version
    if signing.required_by(marker) and not signs:
        raise SigningKeyRequiredError(store_name)
    # a store whose writers sign and refuse what is not signed says so in its marker, so that no
    # writer without the key adds an unsigned object, and readers still accepting unsigned ones
    # (while a store is being signed) stop
    require = signs and not accept_unsigned and not signing.required_by(marker)
    if isinstance(marker, dict) and marker.get("probe") and not require:
        return None
    if not (isinstance(marker, dict) and marker.get("probe")):
        yield from probe.plan_check(store_name)
    base = marker if isinstance(marker, dict) else {"package": "langgraph-handoff"}
    record = {**base, "probe": base.get("probe") or {"passed": int(time.time()), "by": __version__}}
    if require:
        record["signing"] = "required"
    body = envelope.encode(envelope.Kind.MARKER, envelope.packb(record), format_version=version)
    # a lost or unknown answer is settled by reading the marker back: one there (ours, or a
    # concurrent setup's) is the marker; none means the write did not land, so it is sent again
    for _ in range(_MARKER_ATTEMPTS):
        try:
            if obj is None:
                yield Put(keys.FORMAT_MARKER_KEY, body, if_none_match=True)
            else:
                yield Put(keys.FORMAT_MARKER_KEY, body, if_match=obj.etag)
            return None
        except (PreconditionFailedError, UnknownOutcomeError):
            obj = yield Get(keys.FORMAT_MARKER_KEY)
            if obj is not None:
                envelope.decode(obj.body, key=obj.key, expect=envelope.Kind.MARKER)
                return None
    raise StoreUnavailableError(
        f"{store_name}: writing the format marker {keys.FORMAT_MARKER_KEY!r} got no answer {_MARKER_ATTEMPTS} "
        "times and it is not there; retry the operation"
    )


def _plan_setup_of(store: StoreBase) -> driver.Plan[None]:
    keys_held = getattr(store, "keys", None) if store.signs else None
    accept = bool(getattr(keys_held, "accept_unsigned", False))
    return plan_setup(repr(store), signs=store.signs, accept_unsigned=accept)


def _lock_key(scope: Hashable) -> Hashable:
    """What a scope's lock is filed under: a store by its id (a lock must not keep it alive;
    a lock shared with a later store at the same address costs nothing but a wait)."""
    return ("store", id(scope)) if isinstance(scope, StoreBase) else scope


def _passed(scope: Hashable) -> bool:
    return scope in (_PASSED_STORES if isinstance(scope, StoreBase) else _PASSED)


def _failure(scope: Hashable) -> tuple[str, list[str]] | None:
    if isinstance(scope, StoreBase):
        return _FAILED_STORES.get(scope)
    return _FAILED.get(scope)


def verdict(store: StoreBase) -> bool | None:
    """True: writes may go ahead (a probe passed, or the store is local); False: a probe failed;
    None: not probed yet in this process."""
    scope = store.trust_scope()
    if scope is None or _passed(scope):
        return True
    return False if _failure(scope) is not None else None


def forget(store: StoreBase) -> None:
    """Drop this process's verdict for ``store``'s scope (tests, the bench: a new process)."""
    _record(store.trust_scope(), None, keep=False)


def _known(scope: Hashable) -> bool:
    """True when the scope passed; raises a fresh UnsafeStoreError when it failed; False when unknown."""
    if _passed(scope):
        return True
    failed = _failure(scope)
    if failed is not None:
        raise UnsafeStoreError(*failed)
    return False


def _record(scope: Hashable | None, failure: UnsafeStoreError | None, *, keep: bool = True) -> None:
    if scope is None:
        return
    found = None if failure is None else (failure.store, failure.problems)
    with _GUARD:
        if isinstance(scope, StoreBase):
            _PASSED_STORES.discard(scope)
            _FAILED_STORES.pop(scope, None)
            if keep and found is None:
                _PASSED_STORES.add(scope)
            elif keep and found is not None:
                _FAILED_STORES[scope] = found
        else:
            _PASSED.discard(scope)
            _FAILED.pop(scope, None)
            if keep and found is None:
                _PASSED.add(scope)
            elif keep and found is not None:
                _FAILED[scope] = found


def setup(store: StoreBase) -> None:
    """Run :func:`plan_setup` now and keep its verdict for the store's scope (``saver.setup()``).
    A prefixed view (a team's members) is probed at the root of the store it looks into: the
    marker lives there, and one verdict covers every view."""
    store = unprefixed(store)
    try:
        driver.run(store, _plan_setup_of(store))
    except UnsafeStoreError as exc:
        _record(store.trust_scope(), exc)
        raise
    _record(store.trust_scope(), None)


async def asetup(store: StoreBase) -> None:
    store = unprefixed(store)
    try:
        await driver.arun(store, _plan_setup_of(store))
    except UnsafeStoreError as exc:
        _record(store.trust_scope(), exc)
        raise
    _record(store.trust_scope(), None)


def ensure(store: StoreBase, scope: Hashable) -> None:
    """Before a first write: the kept verdict, else one probe (other threads wait for it)."""
    if _known(scope):
        return
    with _GUARD:
        lock = _THREAD_LOCKS.setdefault(_lock_key(scope), threading.Lock())
    with lock:
        if not _known(scope):
            setup(store)


async def aensure(store: StoreBase, scope: Hashable) -> None:
    """:func:`ensure` for coroutines: the others of this event loop wait for one probe."""
    if _known(scope):
        return
    with _GUARD:
        locks = _LOOP_LOCKS.setdefault(asyncio.get_running_loop(), {})
        lock = locks.setdefault(_lock_key(scope), asyncio.Lock())
    async with lock:
        if not _known(scope):
            await asetup(store)


def _writes(step: Any) -> bool:
    if isinstance(step, _WRITES):
        return True
    return isinstance(step, driver.Batch) and any(isinstance(op, _WRITES) for op in step.ops)


def gated(store: StoreBase, plan: driver.Plan[R]) -> driver.Plan[R]:
    """``plan``, probed before its first write if ``store`` needs it. A local store, or one whose
    scope passed already, gets ``plan`` itself back: no wrapper, no cost."""
    scope = store.trust_scope()
    if scope is None or _passed(scope):
        return plan
    return _gate(store, scope, plan)


def run(store: StoreBase, plan: driver.Plan[R]) -> R:
    """Run ``plan`` on ``store``, never writing to a store that has not been probed: what every
    operation outside the saver's own plans (sessions, teams, audit records) runs through."""
    return driver.run(store, gated(store, plan))


async def arun(store: StoreBase, plan: driver.Plan[R]) -> R:
    return await driver.arun(store, gated(store, plan))


def _gate(store: StoreBase, scope: Hashable, plan: driver.Plan[R]) -> driver.Plan[R]:
    """Pass every step of ``plan`` through; before the first write, yield the probe."""
    value: Any = None
    error: BaseException | None = None
    checked = False
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(value)
        except StopIteration as stop:
            result: R = stop.value
            return result
        if not checked and _writes(step):
            checked = True
            try:
                yield driver.Call(functools.partial(ensure, store, scope), functools.partial(aensure, store, scope))
            except BaseException:
                # nothing may be written now: a cleanup that would write (a finally that yields)
                # is dropped with the plan, never thrown a StoreError it might take for a lost write
                with contextlib.suppress(RuntimeError):
                    plan.close()
                raise
        try:
            value, error = (yield step), None
        except GeneratorExit:
            plan.close()
            raise
        except Exception as exc:  # noqa: BLE001 - a store error, handed to the plan as the driver would
            value, error = None, exc
