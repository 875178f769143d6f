"""Member statuses, derived and never stored. Pure.

One shared, mutable status document written by every member is how agent-team products lose
updates (a stuck "active" pointer, statuses racing messages). Here a status is computed from
three things that already exist, each with one writer:

* the roster entry (spawn, remove, shutdown request, failure: rare, by compare-and-swap);
* the member's lease (its worker, by compare-and-swap of its own head);
* its latest checkpoint and its inbox listing.

==============  =====================================================================
spawning        on the roster, no checkpoint yet
working         lease live, and messages pending or a step unfinished
waiting_input   the latest checkpoint waits at an ``interrupt()`` (plan approval, a human)
idle            nothing pending, nothing unfinished
handed_over     its worker stopped cleanly and handed it over with work pending: the next
                worker to step accepts it (if none does within the transfer timeout, it
                becomes ``stalled``)
stalled         lease expired (or never taken) with work pending: a worker should reclaim it
failed          its turns kept failing (roster state ``failed``)
stopping        shutdown requested, its worker still holds the lease (or it expired with
                nothing pending: any worker finishes the shutdown)
shutdown        shutdown requested and the lease released (``stalled`` if it expired with
                work pending)
==============  =====================================================================
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from langgraph_handoff.ownership.lease import Lease
from langgraph_handoff.teams.model import Member

__all__ = ["ATTENTION", "MemberStatus", "Status", "derive_status", "has_next", "pending_interrupt"]

Status = Literal[
    "spawning", "working", "waiting_input", "idle", "handed_over", "stalled", "failed", "stopping", "shutdown"
]
#: statuses that need a person or a worker to act (the CLI exits 1 while any member has one)
ATTENTION = frozenset({"stalled", "failed"})


@dataclass(frozen=True)
class MemberStatus:
    name: str
    role: str
    status: Status
    owner: str | None
    epoch: int
    lease_expires_at: float | None
    #: objects in the inbox (pending, held, or ingested and not yet deleted)
    pending: int
    last_checkpoint_id: str | None
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def has_next(tup: Any) -> bool:
    """Does a checkpoint tuple still have steps to run? (A finished run leaves no trigger
    channel set; the input checkpoint has ``__start__``; a mid-run one has ``branch:to:*``.)"""
    if tup is None:
        return False
    values = tup.checkpoint.get("channel_values") or {}
    return any(ch == "__start__" or ch.startswith("branch:to:") for ch in values)


def pending_interrupt(tup: Any) -> bool:
    """Does the latest checkpoint wait at an ``interrupt()``?"""
    if tup is None:
        return False
    return any(w[1] == "__interrupt__" for w in tup.pending_writes or ())


def derive_status(
    member: Member,
    lease: Lease | None,
    *,
    has_checkpoint: bool,
    next_tasks: bool,
    interrupted: bool,
    pending: int,
    now: float,
    last_checkpoint_id: str | None = None,
) -> MemberStatus:
    """The status of one member (see the table in this module's docstring).

    >>> m = Member(name="alice", role="coder")
    >>> derive_status(m, None, has_checkpoint=False, next_tasks=False, interrupted=False, pending=1, now=0).status
    'spawning'
    >>> derive_status(m, None, has_checkpoint=True, next_tasks=False, interrupted=False, pending=1, now=0).status
    'stalled'
    """
    # A lease being transferred is not live: its worker stopped cleanly (it may not write any more)
    # and no worker has accepted it yet; any worker that steps accepts it.
    live = lease is not None and lease.owner is not None and lease.state == "active" and lease.expires_at > now
    handed = lease is not None and lease.state == "transferring" and not lease.expired(now)
    work = pending > 0 or next_tasks
    status: Status
    if member.state == "failed":
        status = "failed"
    elif member.state == "stop_requested":
        released = lease is None or lease.state == "released"
        status = "stopping" if live else "shutdown" if released else "stalled" if work else "stopping"
    elif interrupted:
        status = "waiting_input"
    elif not has_checkpoint and not (work and lease is not None and not live):
        status = "spawning"
    elif work:
        status = "working" if live else "handed_over" if handed else "stalled"
    else:
        status = "idle"
    return MemberStatus(
        name=member.name,
        role=member.role,
        status=status,
        owner=lease.owner if lease is not None else None,
        epoch=lease.epoch if lease is not None else 0,
        lease_expires_at=lease.expires_at if lease is not None else None,
        pending=pending,
        last_checkpoint_id=last_checkpoint_id,
        reason=member.reason,
    )
