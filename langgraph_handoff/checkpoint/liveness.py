"""Worker liveness records: one object per worker process says until when that process is
alive, so a heartbeat costs one request however many sessions the worker holds.

Why: a lease lives in its thread's root head, and renewing it is a compare-and-swap of that
head (a GET and a PUT). A worker that renewed each of its leases in turn took 19.3 s per beat
over 3,000 sessions on Ceph RGW; past a few thousand sessions (a few hundred at 20 ms to S3) its
leases lapsed between beats and other workers could take live sessions over. So a lease taken
by a :class:`~langgraph_handoff.ownership.SessionWorker` names its worker's record
(``Lease.liveness``: the incarnation, one per process), and the heartbeat rewrites that record
alone. The lease holds while its own ``expires_at`` *or* the record's is in the future.

Safety never depends on this: fencing epochs refuse a superseded worker's writes whatever a
clock or a record says. The record only decides *when* others may take a session over. A
record that cannot be read, or is missing, counts as expired: the lease's own time decides
(a hostile record can hand a session to a new owner early, which fencing makes safe, or keep
a dead worker's sessions waiting, which an operator ends with ``acquire(force=True)``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from langgraph_handoff._format import envelope, keys
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff.checkpoint import driver
from langgraph_handoff.checkpoint.driver import Plan
from langgraph_handoff.errors import CorruptObjectError
from langgraph_handoff.stores.base import Get, Put

__all__ = ["WorkerRecord", "decode_record", "encode_record", "plan_alive_until", "plan_write"]


@dataclass(frozen=True)
class WorkerRecord:
    """Until when incarnation ``incarnation`` of worker ``owner`` is alive (unix seconds).
    ``stopped``: the worker stopped (every session it held may be taken at once).

    >>> rec = WorkerRecord("worker-a", "0f3c", 1030.0)
    >>> decode_record(encode_record(rec), key="k") == rec
    True
    """

    owner: str
    incarnation: str
    expires_at: float
    stopped: bool = False

    @property
    def key(self) -> str:
        return keys.worker_key(self.owner, self.incarnation)


def encode_record(record: WorkerRecord) -> bytes:
    return envelope.encode_msgpack(
        Kind.WORKER,
        {"owner": record.owner, "incarnation": record.incarnation, "expires_at": record.expires_at,
         "stopped": record.stopped},
    )  # fmt: skip


def decode_record(body: bytes, *, key: str) -> WorkerRecord:
    """A record as stored, read strictly (``CorruptObjectError`` naming ``key`` otherwise)."""
    obj, _ = envelope.decode_msgpack(body, key=key, expect=Kind.WORKER)
    if not isinstance(obj, dict):
        raise CorruptObjectError(key, "not a worker liveness record")
    owner, incarnation, expires, stopped = (obj.get(f) for f in ("owner", "incarnation", "expires_at", "stopped"))
    if not (isinstance(owner, str) and isinstance(incarnation, str) and isinstance(stopped, bool)):
        raise CorruptObjectError(key, "not a worker liveness record")
    if isinstance(expires, bool) or not isinstance(expires, int | float) or not math.isfinite(expires):
        raise CorruptObjectError(key, "a worker liveness record without a finite expires_at")
    return WorkerRecord(owner, incarnation, float(expires), stopped)


def plan_write(record: WorkerRecord) -> Plan[None]:
    """Store the record (a plain PUT: only its own process writes it)."""
    yield Put(record.key, encode_record(record))
    return None


def plan_alive_until(refs: Iterable[tuple[str, str]]) -> Plan[dict[tuple[str, str], float]]:
    """Until when each ``(owner, incarnation)`` is alive, one GET per distinct record, all in
    one round trip. A stopped worker's record, and one that is missing or cannot be read, keeps
    nothing alive (``0.0``): the lease's own time decides."""
    wanted = sorted(set(refs))
    if not wanted:
        return {}
    outcomes = yield driver.Batch(tuple(Get(keys.worker_key(o, i)) for o, i in wanted), outcomes=True)
    out: dict[tuple[str, str], float] = {}
    for (owner, incarnation), got in zip(wanted, outcomes, strict=True):
        if isinstance(got, BaseException) and not isinstance(got, CorruptObjectError):
            raise got  # the store failed: nothing is decided on a guess
        until = 0.0
        if got is not None and not isinstance(got, BaseException):
            key = keys.worker_key(owner, incarnation)
            try:
                rec = decode_record(got.body, key=key)
            except CorruptObjectError:
                rec = None
            if rec is not None and (rec.owner, rec.incarnation) == (owner, incarnation) and not rec.stopped:
                until = rec.expires_at
        out[(owner, incarnation)] = until
    return out
