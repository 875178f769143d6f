"""The store probe: does this store really enforce conditional writes?

Everything this package guarantees rests on two conditions the store must enforce: a create-only
PUT (``If-None-Match: *``) fails when the key exists, and a compare-and-swap PUT (``If-Match``)
fails when the ETag is stale. Some "S3-compatible" services accept both headers and ignore them
(Google Cloud Storage's S3 API, Garage, older MinIO and moto builds), or refuse them (Backblaze B2
answers 501). On such a store the saver would write happily while two workers fork a thread.

* :func:`plan_check` is what ``setup()`` runs once per deployment, and what the saver runs
  before its first write to a store no probe has passed (:mod:`langgraph_handoff.checkpoint.trust`):
  6 requests on a scratch key under ``meta/probe/``, raising
  :class:`~langgraph_handoff.errors.UnsafeStoreError` on any failure. The pass is recorded in
  the format marker, so a later process pays one GET.
* :func:`plan_report` is ``langgraph-handoff doctor``: the same checks plus conditional delete,
  list-after-write and the median latency of each operation, as a :class:`ProbeReport`.

Both are plans (see :mod:`langgraph_handoff.checkpoint.driver`), so the sync and async paths share
them:

>>> from langgraph_handoff.checkpoint import driver
>>> from langgraph_handoff.stores import MemoryStore
>>> report = driver.run(MemoryStore(), plan_report(rounds=1))
>>> report.trusted, report.create_only, report.compare_and_swap
(True, 'enforced', 'enforced')
"""

from __future__ import annotations

import secrets
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from langgraph_handoff.checkpoint import driver
from langgraph_handoff.errors import (
    PreconditionFailedError,
    StoreError,
    StoreNotFoundError,
    UnknownOutcomeError,
    UnsafeStoreError,
)
from langgraph_handoff.stores.base import Delete, Get, ListPage, Op, Put

__all__ = ["PROBE_PREFIX", "ProbeReport", "plan_check", "plan_report"]

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
    """The two write conditions on ``key`` (absent at the start); fills ``report``."""
    try:
        yield from timer.timed("put_create_only", Put(key, b"probe-1", if_none_match=True))
    except StoreNotFoundError:
        raise  # a missing bucket says nothing about conditions: the caller must create it
    except (UnknownOutcomeError, StoreError) as exc:
        report.create_only = report.compare_and_swap = f"refused: {exc}"
        report.problems.append(f"it refuses conditional writes ({exc})")
        return
    if (yield from _landed(timer, "put_create_only", Put(key, b"probe-2", if_none_match=True))):
        report.create_only = "ignored"
        report.problems.append("a second create-only PUT (If-None-Match: *) was accepted")
    else:
        report.create_only = "enforced"
    current = yield Get(key)
    wrong = "0" * 32 if current.etag != "0" * 32 else "1" * 32
    if (yield from _landed(timer, "put_if_match", Put(key, b"probe-3", if_match=wrong))):
        report.compare_and_swap = "ignored"
        report.problems.append("a PUT with a wrong If-Match was accepted")
        current = yield Get(key)
    else:
        report.compare_and_swap = "enforced"
    if not (yield from _landed(timer, "put_if_match", Put(key, b"probe-4", if_match=current.etag))):
        report.compare_and_swap = "refused: the current ETag did not match"
        report.problems.append("a PUT with the current ETag as If-Match was refused")


def _landed(timer: _Timer, name: str, put: Put) -> driver.Plan[bool]:
    """Whether a conditional PUT was applied. A lost condition says no; an unknown outcome (GCS
    answers a quick second write to one name with 429, and a 412 after a retried 429 is
    reported as unknown) is settled by reading the key back."""
    try:
        yield from timer.timed(name, put)
        return True
    except PreconditionFailedError:
        return False
    except UnknownOutcomeError:
        stored = yield Get(put.key)
        return stored is not None and stored.body == put.body


def plan_check(store_name: str = "the store") -> driver.Plan[None]:
    """``setup()``'s probe: the write conditions on a scratch key (6 requests, one of them a
    DELETE), raising :class:`~langgraph_handoff.errors.UnsafeStoreError` if they do not hold."""
    report = ProbeReport(store=store_name)
    key = _scratch()
    try:
        yield from _conditions(report, key, _Timer())
    finally:
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
