"""Checkpoint operations as OpenTelemetry sees them: a span, a duration, the requests made, the
compare-and-swap attempts lost, and the outcome.

Every saver operation is a plan (:mod:`~langgraph_handoff.checkpoint.driver`), so one wrapper
around the plan sees what it does, whichever driver runs it (sync or async) and whichever store
answers: each request it yields and how it ended. No store adapter and no plan is touched.

The outcome of an operation is ``ok`` (a read), ``committed`` (a write), or the reason it was
refused or failed: ``stale_writer``, ``ownership_lost``, ``thread_expired``,
``checkpoint_order``, ``unsafe_store`` (refusals, which keep the data right, are also counted by
reason and logged at INFO), ``corrupt``, ``unavailable``, ``conflict``, ``invalid``, ``error``.

With ``telemetry.configure(store_spans=True)`` each request is also a ``store {method}`` client
span, a child of the operation's span, timed from the plan's ``yield`` to its answer: this
wrapper is the one place that sees every request of every operation on every store, sync or
async, and the operation it belongs to. A batch's requests run in parallel: each of their
spans covers the batch. Requests made outside a checkpoint operation (leases, team messages,
long-term memory) are not spans, as they are not in the request counter either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from langgraph_handoff import errors, telemetry
from langgraph_handoff._format import keys
from langgraph_handoff.checkpoint.driver import Batch, Plan
from langgraph_handoff.stores.base import Delete, DeleteMany, Get, ListPage, ListResult, Put, StoreBase, StoredObject

__all__ = ["REFUSALS", "observed", "outcome_of", "store_kind"]

log = logging.getLogger("langgraph_handoff.checkpoint")
R = TypeVar("R")

#: outcomes that are refusals: the package said no to keep the data right
REFUSALS = frozenset({"stale_writer", "ownership_lost", "thread_expired", "checkpoint_order", "unsafe_store"})

_OUTCOMES: tuple[tuple[type[BaseException], str], ...] = (
    (errors.OwnershipLostError, "ownership_lost"),
    (errors.ThreadExpiredError, "thread_expired"),
    (errors.StaleWriterError, "stale_writer"),
    (errors.CheckpointOrderError, "checkpoint_order"),
    (errors.UnsafeStoreError, "unsafe_store"),
    (errors.EnvelopeError, "corrupt"),
    (errors.StoreUnavailableError, "unavailable"),
    (errors.ConflictError, "conflict"),
    (errors.InvalidInputError, "invalid"),
)


def outcome_of(exc: BaseException) -> str:
    """The outcome an exception stands for.

    >>> outcome_of(errors.OwnershipLostError("t", "", epoch=1, current=2, reason="moved on"))
    'ownership_lost'
    >>> outcome_of(KeyError("x"))
    'error'
    """
    for cls, name in _OUTCOMES:
        if isinstance(exc, cls):
            return name
    return "error"


_KINDS = (("Memory", "memory"), ("Local", "file"), ("Azure", "azure"), ("GCS", "gcs"), ("S3", "s3"))


def store_kind(store: StoreBase) -> str:
    """``memory``, ``file``, ``s3``, ``azure``, ``gcs`` (or the class name): what a metric may carry.

    >>> from langgraph_handoff.stores import MemoryStore
    >>> store_kind(MemoryStore())
    'memory'
    """
    seen = 0
    while hasattr(store, "inner") and seen < 8:  # prefixed, signing, counting wrappers
        store, seen = store.inner, seen + 1
    name = type(store).__name__
    return next((kind for part, kind in _KINDS if part in name), name)


def _method(op: Any) -> str:
    if isinstance(op, Get):
        return "GET"
    if isinstance(op, Put):
        return "PUT"
    if isinstance(op, Delete | DeleteMany):
        return "DELETE"
    if isinstance(op, ListPage):
        return "LIST"
    return ""


def _request_outcome(result: Any) -> str:
    if isinstance(result, errors.PreconditionFailedError):
        return "precondition_failed"
    if isinstance(result, BaseException):
        return outcome_of(result)
    return "ok"


def _request_attributes(op: Any, result: Any) -> dict[str, Any]:
    """What a request's span says beyond its method, store and outcome: its key (and the kind
    of object it holds), the bytes it carried, how many keys it listed or deleted, a PUT's
    condition."""
    if isinstance(op, DeleteMany):
        return {telemetry.STORE_KEYS: len(op.keys)}
    key = op.prefix if isinstance(op, ListPage) else op.key
    attrs: dict[str, Any] = {telemetry.STORE_KEY: key, telemetry.KEY_KIND: keys.key_kind(key)}
    if isinstance(op, Put):
        attrs[telemetry.STORE_BYTES] = len(op.body)
        if op.if_match is not None or op.if_none_match:
            attrs[telemetry.CONDITION] = "if_match" if op.if_match is not None else "if_none_match"
    elif isinstance(result, StoredObject):
        attrs[telemetry.STORE_BYTES] = len(result.body)
    elif isinstance(result, ListResult):
        attrs[telemetry.STORE_KEYS] = len(result.items)
    return attrs


class _Tally:
    """Requests of one operation and their outcomes, counted as the plan runs; each one a span
    of its own under ``parent`` when store spans are on."""

    __slots__ = ("cas", "lost", "parent", "requests", "store")

    def __init__(self, store: str, parent: telemetry.Span | None) -> None:
        self.store = store
        self.parent = parent
        self.requests = 0
        self.cas = 0
        self.lost = 0

    def sent(
        self, ops: tuple[Any, ...], results: list[Any] | None, error: BaseException | None, started_ns: int = 0
    ) -> None:
        ended_ns = telemetry.now_ns() if self.parent is not None else 0
        for i, op in enumerate(ops):
            method = _method(op)
            if not method:
                continue
            self.requests += 1
            result = error if error is not None else (results[i] if results is not None else None)
            outcome = _request_outcome(result)
            if isinstance(op, Put) and (op.if_match is not None or op.if_none_match):
                self.cas += 1
                if isinstance(result, errors.PreconditionFailedError | errors.UnknownOutcomeError):
                    self.lost += 1
            attrs = {telemetry.REQUEST_METHOD: method, telemetry.STORE: self.store, telemetry.OUTCOME: outcome}
            telemetry.counter(telemetry.M_STORE_REQUESTS, 1, attrs)
            if self.parent is not None:
                telemetry.finished_span(
                    f"store {method}",
                    {**attrs, **_request_attributes(op, result)},
                    parent=self.parent,
                    start_ns=started_ns,
                    end_ns=ended_ns,
                    error=result if isinstance(result, BaseException) else None,
                )


def observed(
    operation: str,
    store: StoreBase,
    plan: Plan[R],
    attributes: Mapping[str, Any] | None = None,
    *,
    write: bool = False,
    on_refusal: Callable[[str, BaseException], None] | None = None,
) -> Plan[R]:
    """``plan``, observed as checkpoint operation ``operation`` (``put``, ``get_tuple``, ...).
    With telemetry off it is ``plan`` itself: nothing is added to a run."""
    if not telemetry.is_on():
        return plan
    return _observe(operation, store, plan, dict(attributes or {}), write, on_refusal)


def _observe(
    operation: str,
    store: StoreBase,
    plan: Plan[R],
    attributes: dict[str, Any],
    write: bool,
    on_refusal: Callable[[str, BaseException], None] | None,
) -> Plan[R]:
    kind = store_kind(store)
    started = telemetry.now()
    outcome = "committed" if write else "ok"
    attributes = {telemetry.OPERATION: f"checkpoint.{operation}", telemetry.STORE: kind, **attributes}
    with telemetry.span(f"checkpoint {operation}", attributes, current=False) as span:
        tally = _Tally(kind, span if telemetry.store_spans_on() else None)
        try:
            value: Any = None
            error: BaseException | None = None
            while True:
                step = plan.throw(error) if error is not None else plan.send(value)
                ops = step.ops if isinstance(step, Batch) else (step,)
                sent_ns = telemetry.now_ns() if tally.parent is not None else 0
                try:
                    value, error = (yield step), None
                except GeneratorExit:
                    raise
                except BaseException as exc:  # noqa: BLE001 - thrown back into the plan, as the driver would
                    value, error = None, exc
                results = value if isinstance(step, Batch) and isinstance(value, list) else [value]
                tally.sent(ops, results, error, sent_ns)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except GeneratorExit:
            plan.close()
            outcome = "closed"
            raise
        except BaseException as exc:
            outcome = outcome_of(exc)
            if outcome in REFUSALS:
                telemetry.counter(telemetry.M_REFUSALS, 1, {telemetry.OUTCOME: outcome, telemetry.STORE: kind})
                if on_refusal is not None:
                    on_refusal(outcome, exc)
            raise
        finally:
            attrs = {telemetry.OPERATION: operation, telemetry.STORE: kind, telemetry.OUTCOME: outcome}
            span.set(
                {telemetry.OUTCOME: outcome, telemetry.REQUESTS: tally.requests, telemetry.CAS_ATTEMPTS: tally.cas}
            )
            telemetry.histogram(telemetry.M_OPERATION_DURATION, telemetry.now() - started, attrs)
            if tally.lost:
                telemetry.counter(
                    telemetry.M_CAS_RETRIES, tally.lost, {telemetry.OPERATION: operation, telemetry.STORE: kind}
                )
