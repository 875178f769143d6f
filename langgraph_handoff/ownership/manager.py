"""``SessionManager``: leases, planned transfers and takeovers, on the saver's own store.

Every operation reads the thread's root head, decides with a pure transition from
:mod:`langgraph_handoff.ownership.lease`, and compare-and-swaps the head through the saver's heads
API (``saver.heads.cas``, which records what it wrote in the saver's head cache); a lost race
re-reads and decides again. Operations are written once as sans-I/O plans and run sync or async by the same
driver as the saver (``acquire``/``aacquire``, ...).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from langgraph_handoff._format import keys
from langgraph_handoff._format.records import Head
from langgraph_handoff.checkpoint import driver, trust
from langgraph_handoff.checkpoint.driver import Plan
from langgraph_handoff.checkpoint.fencing import fence_of, fenced
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.errors import (
    LeaseHeldError,
)
from langgraph_handoff.handoff.model import Handoff
from langgraph_handoff.ownership import lease as L
from langgraph_handoff.ownership.lease import Lease, Status

log = logging.getLogger("langgraph_handoff.ownership")

Decide = Callable[[Lease | None, float], Lease]


R = TypeVar("R")


@dataclass(frozen=True)
class SessionInfo:
    """One session as monitoring sees it. ``status``: ``owned``, ``expired`` (the owner stopped
    renewing: nobody is responsible until someone reclaims it), ``transferring``, ``stuck`` (a
    transfer nobody accepted in time), ``released``, ``ownerless`` (checkpoints, never leased),
    or ``retired`` (its thread moved away for good: a team member's conversation of 0.2,
    ``lease.retire``)."""

    thread_id: str
    status: Status
    lease: Lease | None
    latest_checkpoint_id: str | None

    @property
    def needs_attention(self) -> bool:
        return self.status in ("expired", "stuck", "ownerless")

    def as_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "status": self.status,
            "owner": self.lease.owner if self.lease else None,
            "epoch": self.lease.epoch if self.lease else 0,
            "expires_at": self.lease.expires_at if self.lease else None,
            "transfer_to": self.lease.transfer.to_owner if self.lease and self.lease.transfer else None,
            "latest_checkpoint_id": self.latest_checkpoint_id,
        }


def lease_of(head: Head | None, thread_id: str) -> Lease | None:
    """The lease recorded in a root head, if any (:meth:`Lease.from_meta`: strictly)."""
    return Lease.from_meta(head.meta, thread_id) if head is not None else None


class SessionManager:
    """Who owns which session, for a fleet of workers sharing one store.

    >>> from langgraph_handoff import ObjectStoreSaver
    >>> saver = ObjectStoreSaver.from_url("memory://")
    >>> sessions = SessionManager(saver)
    >>> a = sessions.acquire("chat-1", "worker-a", ttl=30)
    >>> a.epoch, sessions.get("chat-1").owner
    (1, 'worker-a')
    >>> fenced = saver.with_lease(a)      # give this saver to worker A's graph: its writes are fenced
    """

    def __init__(self, saver: ObjectStoreSaver, *, clock: Callable[[], float] = time.time):
        self.saver = saver
        self.clock = clock

    # -- the one read-decide-swap loop ----------------------------------------------------------------

    def _plan_change(self, thread_id: str, decide: Decide, *, fence_all: bool = False) -> Plan[Lease]:
        """Read the root head, decide, compare-and-swap (``saver.heads.cas``: a lost race decides
        again on a fresh read; an unknown outcome whose lease landed is ours). After a change of
        epoch (or always, with ``fence_all``: acquire and accept, so retrying one finishes an
        interrupted fence pass) the epoch is carried to every subgraph namespace head."""
        thread_id = keys.validate_thread_id(thread_id)
        decided: list[tuple[Lease | None, Lease]] = []  # (current, new) of the latest decision

        def change(head: Head | None) -> Head:
            current = lease_of(head, thread_id)
            new = decide(current, self.clock())
            base = head if head is not None else Head(thread_id, "", {}, {})
            recorded = fence_of(base.meta)
            if (current is None or new.epoch != current.epoch) and new.epoch <= recorded:
                # a new owner always gets an epoch above every one ever recorded for the thread
                new = new.model_copy(update={"epoch": recorded + 1})
            decided[:] = [(current, new)]
            return replace(base, meta=new.into(base.meta))

        def landed(head: Head | None) -> bool:
            return lease_of(head, thread_id) == decided[0][1]

        attempts = self.saver.layout.max_attempts
        yield from self.saver.heads.cas(
            thread_id, "", change, landed=landed,
            contention=f"the lease of session {thread_id!r} kept changing under us ({attempts} attempts); retry",
        )  # fmt: skip
        current, new = decided[0]
        if fence_all or current is None or new.epoch != current.epoch:
            yield from self._plan_fence_namespaces(thread_id, new.epoch)
        return new

    def _plan_fence_namespaces(self, thread_id: str, epoch: int) -> Plan[None]:
        """Carry a new epoch to every subgraph namespace head, so a superseded worker's subgraph
        writes are refused too (the root head got it with the lease)."""
        heads = self.saver.heads

        def change(head: Head | None) -> Head | None:
            if head is None or fence_of(head.meta) >= epoch:
                return None
            return replace(head, meta=fenced(head.meta, epoch))

        for ns in (yield from heads.namespaces(thread_id)):
            if ns == "":
                continue
            yield from heads.cas(thread_id, ns, change, contention=(
                f"could not carry epoch {epoch} to namespace {ns!r} of session {thread_id!r} "
                f"({self.saver.layout.max_attempts} attempts). The lease is yours at epoch {epoch}; call acquire "
                "again to finish (bound subgraph writes check the root head meanwhile)"
            ))  # fmt: skip
        return None

    def plan_retire(self, thread_id: str, owner: str) -> Plan[tuple[Lease, bool]]:
        """Retire a session for good (:func:`~langgraph_handoff.ownership.lease.retire`), as a
        plan for a caller that moves its thread elsewhere (:mod:`langgraph_handoff.teams.upgrade`):
        the new epoch reaches every namespace head, so no superseded worker writes again. Returns
        the lease and whether this call retired it (False: it was retired before).
        ``LeaseHeldError`` while a worker holds the session."""
        before: list[Lease | None] = [None]

        def decide(current: Lease | None, now: float) -> Lease:
            before[0] = current
            return L.retire(current, thread_id, owner, now=now)

        lease = yield from self._plan_change(thread_id, decide, fence_all=True)
        return lease, not (before[0] is not None and before[0].retired)

    def _plan_get(self, thread_id: str) -> Plan[Lease | None]:
        thread_id = keys.validate_thread_id(thread_id)
        head, _ = yield from self.saver.heads.read(thread_id)
        return lease_of(head, thread_id)

    def _run(self, plan: Plan[R]) -> R:
        return driver.run(self.saver.store, trust.gated(self.saver.store, plan))  # never on an unprobed store

    async def _arun(self, plan: Plan[R]) -> R:
        return await driver.arun(self.saver.store, trust.gated(self.saver.store, plan))

    # -- leases ---------------------------------------------------------------------------------------

    def _acquire(self, thread_id: str, owner: str, ttl: float, force: bool) -> Plan[Lease]:
        lease = yield from self._plan_change(
            thread_id, lambda cur, now: L.acquire(cur, thread_id, owner, ttl=ttl, now=now, force=force), fence_all=True
        )
        log.info("session %r: %s holds epoch %d (%s)", thread_id, owner, lease.epoch, lease.via)
        return lease

    def acquire(self, thread_id: str, owner: str, ttl: float, *, force: bool = False) -> Lease:
        """Own a session for ``ttl`` seconds: a free, released or expired one (epoch + 1, a
        *takeover* if someone held it), or renew your own. ``LeaseHeldError`` if another owner's
        lease is valid; ``force=True`` takes it anyway (for an operator who knows that worker is gone)."""
        return self._run(self._acquire(thread_id, owner, ttl, force))

    async def aacquire(self, thread_id: str, owner: str, ttl: float, *, force: bool = False) -> Lease:
        return await self._arun(self._acquire(thread_id, owner, ttl, force))

    def renew(self, lease: Lease, ttl: float | None = None) -> Lease:
        """Extend your lease (the heartbeat). ``OwnershipLostError`` if the session moved on."""
        t = ttl if ttl is not None else lease.ttl
        return self._run(self._plan_change(lease.thread_id, lambda cur, now: L.renew(cur, lease, ttl=t, now=now)))

    async def arenew(self, lease: Lease, ttl: float | None = None) -> Lease:
        t = ttl if ttl is not None else lease.ttl
        return await self._arun(
            self._plan_change(lease.thread_id, lambda cur, now: L.renew(cur, lease, ttl=t, now=now))
        )

    def release(self, lease: Lease) -> Lease:
        """Give the session up; anyone may acquire it at once."""
        return self._run(self._plan_change(lease.thread_id, lambda cur, now: L.release(cur, lease, now=now)))

    async def arelease(self, lease: Lease) -> Lease:
        return await self._arun(self._plan_change(lease.thread_id, lambda cur, now: L.release(cur, lease, now=now)))

    def get(self, thread_id: str) -> Lease | None:
        """The session's lease as stored now (one GET)."""
        return self._run(self._plan_get(thread_id))

    async def aget(self, thread_id: str) -> Lease | None:
        return await self._arun(self._plan_get(thread_id))

    # -- planned transfer: lock, transfer, accept -----------------------------------------------------

    def _begin(self, lease: Lease, to_owner: str | None, note: Handoff | None, timeout: float) -> Plan[Lease]:
        data = note.model_dump(mode="json") if note is not None else {}
        out = yield from self._plan_change(
            lease.thread_id,
            lambda cur, now: L.begin_transfer(cur, lease, to_owner=to_owner, note=data, timeout=timeout, now=now),
        )
        log.info(
            "session %r: %s locked it for a transfer to %s", lease.thread_id, lease.owner, to_owner or "any worker"
        )
        return out

    def begin_transfer(
        self, lease: Lease, *, to_owner: str | None = None, note: Handoff | None = None, timeout: float = 30.0
    ) -> Lease:
        """Phases 1 and 2 of a planned handoff. *Lock*: from now on the old owner's writes are
        refused and it must stop processing. *Transfer*: the checkpoint is already in the store;
        ``note`` (a :class:`~langgraph_handoff.handoff.Handoff`, see :func:`session_note`) travels
        with the lease and says what is done and what comes next. Phase 3 is the receiver's
        :meth:`accept`. If nobody accepts within ``timeout``, the session becomes reclaimable
        (``reclaim_expired``) or the old owner takes it back with :meth:`abort_transfer`: it is
        never ownerless."""
        return self._run(self._begin(lease, to_owner, note, timeout))

    async def abegin_transfer(
        self, lease: Lease, *, to_owner: str | None = None, note: Handoff | None = None, timeout: float = 30.0
    ) -> Lease:
        return await self._arun(self._begin(lease, to_owner, note, timeout))

    def accept(self, thread_id: str, owner: str, ttl: float, *, transfer_id: str | None = None) -> Lease:
        """Phase 3: the new owner acknowledges; ownership changes now, at epoch + 1."""
        return self._run(
            self._plan_change(
                thread_id, lambda cur, now: L.accept(cur, thread_id, owner, transfer_id=transfer_id, ttl=ttl, now=now)
            )
        )

    async def aaccept(self, thread_id: str, owner: str, ttl: float, *, transfer_id: str | None = None) -> Lease:
        return await self._arun(
            self._plan_change(
                thread_id, lambda cur, now: L.accept(cur, thread_id, owner, transfer_id=transfer_id, ttl=ttl, now=now)
            )
        )

    def abort_transfer(self, lease: Lease, ttl: float) -> Lease:
        """The old owner takes its session back after a transfer nobody accepted."""
        return self._run(
            self._plan_change(lease.thread_id, lambda cur, now: L.abort_transfer(cur, lease, ttl=ttl, now=now))
        )

    async def aabort_transfer(self, lease: Lease, ttl: float) -> Lease:
        return await self._arun(
            self._plan_change(lease.thread_id, lambda cur, now: L.abort_transfer(cur, lease, ttl=ttl, now=now))
        )

    # -- monitoring and forced takeover ------------------------------------------------------------------

    def _plan_sessions(self, thread_ids: Sequence[str] | None) -> Plan[list[SessionInfo]]:
        heads = self.saver.heads
        if thread_ids is None:
            ids = [t for t, ns in (yield from heads.ids()) if ns == ""]
        else:
            ids = [keys.validate_thread_id(t) for t in thread_ids]
        now = self.clock()
        out: list[SessionInfo] = []
        for start in range(0, len(ids), 64):
            chunk = ids[start : start + 64]
            reads = yield from heads.read_many([(t, "") for t in chunk])
            for tid, (head, _) in zip(chunk, reads, strict=True):
                if head is None:
                    continue
                lease = lease_of(head, tid)
                status: Status = lease.status(now) if lease is not None else "ownerless"
                if lease is None and not head.records:
                    continue
                out.append(SessionInfo(tid, status, lease, head.latest_id))
        return out

    def sessions(self, thread_ids: Sequence[str] | None = None) -> list[SessionInfo]:
        """Every session (or the given ones) with its status; ``needs_attention`` marks the
        "nobody is responsible" window: expired, stuck in transfer, or never owned."""
        return self._run(self._plan_sessions(thread_ids))

    async def asessions(self, thread_ids: Sequence[str] | None = None) -> list[SessionInfo]:
        return await self._arun(self._plan_sessions(thread_ids))

    def _plan_reclaim(
        self, owner: str, ttl: float, thread_ids: Sequence[str] | None, limit: int | None
    ) -> Plan[list[Lease]]:
        taken: list[Lease] = []
        for info in (yield from self._plan_sessions(thread_ids)):
            if info.lease is None or info.status not in ("expired", "stuck"):
                continue  # owned, in transfer, released (anyone may simply acquire it) or never leased
            try:
                lease = yield from self._acquire(info.thread_id, owner, ttl, False)
            except LeaseHeldError:
                continue  # renewed, or another reclaimer won
            log.warning(
                "session %r: %s took it over at epoch %d (was %s, owner %r)",
                info.thread_id,
                owner,
                lease.epoch,
                info.status,
                info.lease.owner,
            )
            taken.append(lease)
            if limit is not None and len(taken) >= limit:
                break
        return taken

    def reclaim_expired(
        self, owner: str, ttl: float, *, thread_ids: Sequence[str] | None = None, limit: int | None = None
    ) -> list[Lease]:
        """The health check: take over (epoch + 1) every session whose owner stopped renewing or
        whose transfer was never accepted. Resume each from its latest checkpoint with a saver
        bound to the new lease (``saver.with_lease(lease)``): LangGraph replays the pending
        writes of tasks that completed, so they are not executed again."""
        return self._run(self._plan_reclaim(owner, ttl, thread_ids, limit))

    async def areclaim_expired(
        self, owner: str, ttl: float, *, thread_ids: Sequence[str] | None = None, limit: int | None = None
    ) -> list[Lease]:
        return await self._arun(self._plan_reclaim(owner, ttl, thread_ids, limit))


def session_note(
    *,
    source: str,
    target: str | None,
    completed_steps: Sequence[str] = (),
    decisions: Sequence[str] = (),
    irreversible_actions: Sequence[str] = (),
    next_step: str,
    briefing: str = "",
    chain: Sequence[str] = (),
) -> Handoff:
    """The handoff note of a planned transfer between workers: the same :class:`Handoff` record
    agents use, with the session facts as its payload.

    >>> note = session_note(source="worker-a", target="worker-b", completed_steps=["looked up A-1"],
    ...                     irreversible_actions=["refund 20 EUR sent"], next_step="tell the customer")
    >>> note.trigger, note.payload["next_step"]
    ('transfer', 'tell the customer')
    """
    return Handoff(
        source=source,
        target=target or "any",
        briefing=briefing or f"Session handed over by {source}; next: {next_step}",
        payload={
            "completed_steps": list(completed_steps),
            "decisions": list(decisions),
            "irreversible_actions": list(irreversible_actions),
            "next_step": next_step,
        },
        chain=list(chain),
        trigger="transfer",
    )
