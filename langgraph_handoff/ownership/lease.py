"""Session leases as data, and every change to them as a pure function.

A lease says which worker owns a session (a thread) and until when. It lives in the thread's
root head object, next to the checkpoints, and changes only by compare-and-swap of that object,
so the whole fleet sees one truth. Each change of owner increments the **epoch**, the fencing
token: a saver bound to a lease stamps its epoch on every head it writes and refuses to write
where a higher epoch (or a lock for a transfer) is recorded. Clocks decide only *when* a lease
may be taken over (liveness); epochs decide *who may write* (safety), whatever the clocks say.

The transitions below take the current lease (``None`` for a session never owned) and return
the new one, or raise a typed error. They do no I/O: ``manager.py`` reads, decides and
compare-and-swaps, retrying the decision on a lost race.
"""

from __future__ import annotations

import math
import uuid
from typing import Any, Literal

from pydantic import ConfigDict, Field

from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff._format.keys import head_key
from langgraph_handoff._model import Model
from langgraph_handoff.checkpoint.fencing import fenced, write_refusal
from langgraph_handoff.errors import (
    CorruptObjectError,
    InvalidInputError,
    LeaseHeldError,
    OwnershipLostError,
    TransferError,
)

__all__ = [
    "FOREVER",
    "Lease",
    "RETIRED",
    "State",
    "Status",
    "Transfer",
    "abort_transfer",
    "accept",
    "acquire",
    "begin_transfer",
    "release",
    "renew",
    "retire",
    "write_refusal",
]

State = Literal["active", "transferring", "released"]

#: ``Lease.via`` of a retired session (:func:`retire`): its thread moved away for good
RETIRED = "retired"
#: how long a retired lease holds: for good (finite, as every stored lease time is)
FOREVER = 1e15
Status = Literal["owned", "expired", "transferring", "stuck", "released", "ownerless", "retired"]


class Transfer(Model):
    """A planned transfer in progress (phase 1, *lock*, done; waiting for phase 3, *accept*)."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    from_owner: str
    #: the worker that must accept, or ``None`` for any worker
    to_owner: str | None = None
    #: the handoff note (a ``Handoff`` dumped to JSON): what is done, decided, and next
    note: dict[str, Any] = Field(default_factory=dict)
    started_at: float
    deadline: float
    #: the W3C ``traceparent`` of the span that locked the session (OpenTelemetry), so that
    #: the accepting worker's span links to it: one story across the two workers
    traceparent: str | None = None


class Lease(Model):
    """Who owns a session, at which fencing epoch, until when.

    >>> lease = acquire(None, "t-1", "worker-a", ttl=30, now=1000.0)
    >>> (lease.owner, lease.epoch, lease.expires_at, lease.state)
    ('worker-a', 1, 1030.0, 'active')
    """

    model_config = ConfigDict(frozen=True)
    invalid_error = InvalidInputError

    thread_id: str
    owner: str | None
    epoch: int
    expires_at: float
    state: State = "active"
    transfer: Transfer | None = None
    acquired_at: float = 0.0
    #: how the current owner got the session: acquire, takeover, transfer
    via: str = "acquire"
    #: the lease duration last asked for (what ``renew`` extends by, unless told otherwise)
    ttl: float = 30.0
    #: the incarnation of the owner whose liveness record also keeps this lease alive (a
    #: ``SessionWorker``'s: its heartbeat renews that one record, :mod:`~langgraph_handoff.checkpoint.liveness`), or ``None``
    liveness: str | None = None
    #: the W3C ``traceparent`` of the span that gave the session to its owner (an acquire, a
    #: takeover or an accept), so that the next owner's span links to it
    traceparent: str | None = None
    #: the planned transfer that brought the session to its owner (:func:`accept`): its note
    #: says what was done and what comes next (``SessionWorker.note_for``)
    received: Transfer | None = None

    @property
    def liveness_ref(self) -> tuple[str, str] | None:
        """``(owner, incarnation)`` of the liveness record that may keep this lease alive."""
        return (self.owner, self.liveness) if self.owner is not None and self.liveness is not None else None

    def alive_until(self, record_expires_at: float) -> Lease:
        """This lease with the time its owner's liveness record gives it, if later than its own.

        >>> lease = acquire(None, "t-1", "worker-a", ttl=30, now=1000.0, liveness="0f3c")
        >>> lease.expired(1100.0), lease.alive_until(1130.0).expired(1100.0)
        (True, False)
        """
        if record_expires_at <= self.expires_at:
            return self
        return self.model_copy(update={"expires_at": record_expires_at})

    def expired(self, now: float) -> bool:
        """May another worker take the session over now? (A transfer nobody accepted in time
        counts as expired, so a session is never stuck without an owner who can act.)"""
        if self.state == "released":
            return True
        if self.state == "transferring" and self.transfer is not None:
            return now > self.transfer.deadline
        return now > self.expires_at

    @classmethod
    def from_meta(cls, meta: HeadMeta, thread_id: str) -> Lease | None:
        """The lease a root head records (None: it records none), read strictly: a lease that
        cannot be read makes the head corrupt (:class:`~langgraph_handoff.errors.CorruptObjectError`)
        for the session monitor, which must report it. The write rule and the TTL sweep read the
        same field leniently (:class:`~langgraph_handoff.checkpoint.fencing.LeaseTerms`).

        >>> lease = acquire(None, "t-1", "worker-a", ttl=30, now=1000.0)
        >>> Lease.from_meta(lease.into(HeadMeta()), "t-1") == lease, Lease.from_meta(HeadMeta(), "t-1")
        (True, None)
        """
        raw = meta.lease
        if raw is None:
            if "lease" in meta.unreadable:
                raise CorruptObjectError(head_key(thread_id, ""), "malformed session lease: not a record")
            return None
        try:
            return cls.from_data(raw)
        except Exception as exc:  # noqa: BLE001 - any malformed lease is a corrupt object
            raise CorruptObjectError(head_key(thread_id, ""), f"malformed session lease: {exc}") from None

    def into(self, meta: HeadMeta) -> HeadMeta:
        """``meta`` recording this lease, with the head's fencing epoch raised to the lease's: the
        only way a lease is written to a head.

        >>> lease = acquire(None, "t-1", "worker-a", ttl=30, now=1000.0)
        >>> meta = lease.into(HeadMeta())
        >>> meta.fence, meta.lease["owner"]
        (1, 'worker-a')
        """
        # fields that are not set are stored as before they existed
        data = self.model_dump(mode="json")
        for name in ("liveness", "traceparent", "received"):
            if data.get(name) is None:
                data.pop(name, None)
        if isinstance(data.get("transfer"), dict) and data["transfer"].get("traceparent") is None:
            data["transfer"].pop("traceparent", None)
        return fenced(meta.replace(lease=data), self.epoch)

    @property
    def retired(self) -> bool:
        """Is the session retired (:func:`retire`): nobody may own it again? (A retired lease a
        ``delete_thread`` released is not: the thread of that id starts again.)"""
        return self.via == RETIRED and self.state == "active"

    def status(self, now: float) -> Status:
        if self.retired:
            return "retired"
        if self.state == "released":
            return "released"
        if self.state == "transferring":
            return "stuck" if self.expired(now) else "transferring"
        return "expired" if self.expired(now) else "owned"


def check_ttl(ttl: float) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0 or not math.isfinite(ttl):
        raise InvalidInputError(f"ttl must be a finite number of seconds > 0, got {ttl!r}")
    return float(ttl)


def check_owner(owner: object) -> str:
    if not isinstance(owner, str) or not owner.strip():
        raise InvalidInputError(f"owner must be a non-empty string naming the worker, got {owner!r}")
    return owner


def _mine(current: Lease | None, lease: Lease) -> Lease:
    """``current`` if ``lease`` (what the caller holds) is still the session's lease."""
    if current is None or current.epoch != lease.epoch or current.owner != lease.owner:
        now_owner = f"{current.owner!r} holds epoch {current.epoch}" if current else "the session has no lease"
        raise OwnershipLostError(
            lease.thread_id,
            "",
            epoch=lease.epoch,
            current=current.epoch if current else 0,
            reason=f"the session moved on ({now_owner})",
        )
    return current


def acquire(
    current: Lease | None,
    thread_id: str,
    owner: str,
    *,
    ttl: float,
    now: float,
    force: bool = False,
    liveness: str | None = None,
) -> Lease:
    """Take a free, released or expired session (epoch + 1); renew it if ``owner`` already holds
    it; ``force`` takes it from a live owner (an operator who knows that worker is gone).
    ``liveness``: the incarnation whose liveness record also keeps the lease alive."""
    owner, ttl = check_owner(owner), check_ttl(ttl)
    if current is not None and current.owner == owner and current.state == "active" and not current.expired(now):
        return current.model_copy(update={"expires_at": now + ttl, "ttl": ttl, "liveness": liveness})
    if current is not None and not force and not current.expired(now):
        verb = "being transferred" if current.state == "transferring" else "owned"
        raise LeaseHeldError(thread_id, current.owner, current.expires_at, verb)
    via = "acquire" if current is None or current.state == "released" else "takeover"
    return Lease(
        thread_id=thread_id,
        owner=owner,
        epoch=(current.epoch if current else 0) + 1,
        expires_at=now + ttl,
        acquired_at=now,
        via=via,
        ttl=ttl,
        liveness=liveness,
    )


def renew(current: Lease | None, lease: Lease, *, ttl: float, now: float) -> Lease:
    """Extend the holder's lease. Works even after ``expires_at`` as long as nobody took the
    session over (the epoch did not move): expiry only *allows* a takeover."""
    ttl = check_ttl(ttl)
    cur = _mine(current, lease)
    if cur.state != "active":
        raise OwnershipLostError(
            lease.thread_id,
            "",
            epoch=lease.epoch,
            current=cur.epoch,
            reason=f"the session is {cur.state}; this worker stopped owning it",
        )
    return cur.model_copy(update={"expires_at": now + ttl, "ttl": ttl})


def release(current: Lease | None, lease: Lease, *, now: float) -> Lease:
    """Give the session up: anyone may acquire it at once (epoch + 1)."""
    cur = _mine(current, lease)
    return cur.model_copy(update={"state": "released", "expires_at": now, "transfer": None})


def begin_transfer(
    current: Lease | None, lease: Lease, *, to_owner: str | None, note: dict[str, Any], timeout: float, now: float
) -> Lease:
    """Phase 1, *lock*: the owner stops processing and marks the session as being handed over.
    From here its own writes are refused; nobody else's are accepted before phase 3."""
    timeout = check_ttl(timeout)
    cur = _mine(current, lease)
    if cur.state != "active":
        raise TransferError(f"session {lease.thread_id!r} is {cur.state}, not active: cannot start a transfer")
    if to_owner is not None:
        check_owner(to_owner)
    transfer = Transfer(
        from_owner=cur.owner or "", to_owner=to_owner, note=note, started_at=now, deadline=now + timeout
    )
    return cur.model_copy(update={"state": "transferring", "transfer": transfer, "expires_at": now + timeout})


def accept(
    current: Lease | None,
    thread_id: str,
    owner: str,
    *,
    transfer_id: str | None,
    ttl: float,
    now: float,
    liveness: str | None = None,
) -> Lease:
    """Phase 3, *accept*: the new owner acknowledges; only now does ownership change (epoch + 1)."""
    owner, ttl = check_owner(owner), check_ttl(ttl)
    if current is None or current.state != "transferring" or current.transfer is None:
        raise TransferError(f"session {thread_id!r} has no transfer pending")
    t = current.transfer
    if transfer_id is not None and t.id != transfer_id:
        raise TransferError(f"session {thread_id!r} is in transfer {t.id!r}, not {transfer_id!r}")
    if t.to_owner is not None and t.to_owner != owner:
        raise TransferError(f"session {thread_id!r} is being transferred to {t.to_owner!r}, not {owner!r}")
    if now > t.deadline:
        raise TransferError(f"the transfer of session {thread_id!r} expired at {t.deadline:.3f}; it is reclaimable")
    return Lease(
        thread_id=thread_id,
        owner=owner,
        epoch=current.epoch + 1,
        expires_at=now + ttl,
        acquired_at=now,
        via="transfer",
        ttl=ttl,
        liveness=liveness,
        received=t,
    )


def retire(current: Lease | None, thread_id: str, owner: str, *, now: float) -> Lease:
    """Take a session for good: its thread moved elsewhere (a team member's conversation moved
    out of the store's root, :mod:`langgraph_handoff.teams.upgrade`), and no worker may own it
    again. The lease is held by ``owner`` (a description of where the thread went) until
    :data:`FOREVER` at epoch + 1, so a worker that still serves the session is fenced, and one
    of an older release that looks for free sessions finds it held.

    Allowed when the session is free, released, expired, or locked for a transfer (its owner
    stopped writing); ``LeaseHeldError`` while a worker holds it: that worker still serves it.
    Retiring a retired session returns it unchanged.

    >>> lease = retire(acquire(None, "t/a", "old-worker", ttl=30, now=1000.0), "t/a", "moved", now=1031.0)
    >>> lease.epoch, lease.retired, lease.expired(10**12)
    (2, True, False)
    """
    owner = check_owner(owner)
    if current is not None and current.retired:
        return current
    if current is not None and current.state == "active" and not current.expired(now):
        raise LeaseHeldError(thread_id, current.owner, current.expires_at, "owned")
    return Lease(
        thread_id=thread_id,
        owner=owner,
        epoch=(current.epoch if current else 0) + 1,
        expires_at=FOREVER,
        acquired_at=now,
        via=RETIRED,
    )


def abort_transfer(current: Lease | None, lease: Lease, *, ttl: float, now: float) -> Lease:
    """The old owner takes the session back (the receiver never answered)."""
    cur = _mine(current, lease)
    if cur.state != "transferring":
        raise TransferError(f"session {lease.thread_id!r} is {cur.state}: no transfer to abort")
    return cur.model_copy(update={"state": "active", "transfer": None, "expires_at": now + check_ttl(ttl)})
