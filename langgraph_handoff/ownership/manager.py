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

from langgraph_handoff import telemetry as T
from langgraph_handoff._format import keys
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.records import Head
from langgraph_handoff.checkpoint import driver, liveness, trust
from langgraph_handoff.checkpoint.driver import Plan
from langgraph_handoff.checkpoint.fencing import fence_of, fenced
from langgraph_handoff.checkpoint.plans.listing import UNREADABLE, OnDamaged, report_damage
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.errors import ConflictError, LeaseHeldError
from langgraph_handoff.handoff.model import Handoff
from langgraph_handoff.ownership import lease as L
from langgraph_handoff.ownership.lease import Lease, Status
from langgraph_handoff.stores.base import Get

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


#: until when each ``(owner, incarnation)`` liveness record read so far keeps its leases alive
Alive = dict[tuple[str, str], float]


def _record_to_read(lease: Lease | None, now: float, alive: Alive) -> tuple[str, str] | None:
    """The liveness record to read before deciding on ``lease``: one only matters for an
    active lease whose own time has passed (:mod:`~langgraph_handoff.checkpoint.liveness`)."""
    if lease is None or lease.state != "active" or not lease.expired(now):
        return None
    ref = lease.liveness_ref
    return ref if ref is not None and ref not in alive else None


def _as_alive(lease: Lease | None, alive: Alive) -> Lease | None:
    """``lease`` with its owner's liveness record's time, when that record was read."""
    ref = lease.liveness_ref if lease is not None else None
    return lease.alive_until(alive[ref]) if lease is not None and ref in alive else lease


def _traced(current: Lease | None, new: Lease, traceparent: str) -> Lease:
    """``new`` carrying the span that decided it: a new owner's lease, or a new transfer."""
    if new.transfer is not None and (
        current is None or current.transfer is None or current.transfer.id != new.transfer.id
    ):
        new = new.model_copy(update={"transfer": new.transfer.model_copy(update={"traceparent": traceparent})})
    if current is None or new.epoch != current.epoch:
        new = new.model_copy(update={"traceparent": traceparent})
    return new


def _noted(what: str, before: Lease | None, after: Lease, now: float, span: T.Span) -> None:
    """Log, trace and count one change of a session's lease. A takeover and an accept also
    record how long the session had no working owner: from the old lease's end (its owner's
    liveness record included) or from the lock of the transfer."""
    if what == "acquire":
        if before is not None and before.epoch == after.epoch:
            span.rename("session renew")
            return  # the owner renewed its own lease
        what = after.via  # acquire or takeover
    unowned = None
    if what == "takeover" and before is not None:
        unowned = max(0.0, now - before.expires_at)
    elif what == "accept" and before is not None and before.transfer is not None:
        unowned = max(0.0, now - before.transfer.started_at)
    transfer = after.transfer or (before.transfer if before is not None else None)
    attrs = {
        T.EVENT: f"session.{what}", T.THREAD: after.thread_id, T.OWNER: after.owner, T.EPOCH: after.epoch,
        T.VIA: what, T.TRANSFER_ID: transfer.id if transfer is not None else None,
        "langgraph_handoff.session.previous_owner": before.owner if before is not None else None,
    }  # fmt: skip
    level = logging.WARNING if what == "takeover" else logging.INFO
    text = {
        "acquire": "%s acquired it at epoch %d",
        "takeover": "%s took it over at epoch %d",
        "begin_transfer": "%s locked it at epoch %d for a transfer",
        "accept": "%s accepted it at epoch %d",
        "release": "%s released it at epoch %d",
        "abort_transfer": "%s took it back at epoch %d (transfer aborted)",
        "retire": "%s retired it at epoch %d",
    }.get(what, what + ": %s at epoch %d")
    suffix = ""
    if what in ("takeover", "accept") and before is not None:
        suffix = f" from {before.owner!r} (epoch {before.epoch}), unowned {unowned:.1f} s"
    elif what == "begin_transfer" and after.transfer is not None:
        suffix = f" {after.transfer.id} to {after.transfer.to_owner or 'any worker'}"
    log.log(level, "session %r: " + text + "%s", after.thread_id, after.owner, after.epoch, suffix, extra=attrs)
    if not T.is_on():
        return
    span.rename(f"session {what}")
    span.set(attrs)
    if what == "takeover" and before is not None:
        span.link(before.traceparent)  # the old owner's acquire: the story goes on here
    elif what == "accept" and before is not None and before.transfer is not None:
        span.link(before.transfer.traceparent)  # the lock on the worker that handed it over
    T.counter(T.M_SESSION_CHANGES, 1, {T.VIA: what})
    if unowned is not None:
        T.histogram(T.M_SESSION_UNOWNED, unowned, {T.VIA: what})


class _NeedRecord(Exception):  # control flow inside _plan_change, never raised out of it
    def __init__(self, ref: tuple[str, str]) -> None:
        self.ref = ref


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

    def _plan_change(
        self,
        thread_id: str,
        decide: Decide,
        *,
        fence_all: bool = False,
        alive: Alive | None = None,
        by_expiry: bool = False,
        what: str = "",
    ) -> Plan[Lease]:
        """Read the root head, decide, compare-and-swap (``saver.heads.cas``: a lost race decides
        again on a fresh read; an unknown outcome whose lease landed is ours). After a change of
        epoch (or always, with ``fence_all``: acquire and accept, so retrying one finishes an
        interrupted fence pass) the epoch is carried to every subgraph namespace head.

        ``by_expiry``: ``decide`` asks whether the lease lapsed (acquire, retire). Then a lease
        past its own time whose owner keeps a liveness record is decided on with that record's
        time (read first, then the head again: ``alive`` holds the records read). The holder's
        own changes (renew, release, a transfer) never need it. ``what``: the change, as logged,
        traced and counted (:func:`_noted`)."""
        thread_id = keys.validate_thread_id(thread_id)
        if not what or not T.is_on():
            return (yield from self._change(thread_id, decide, fence_all, alive, by_expiry, what, T.OFF))
        with T.span(f"session {what}", {T.THREAD: thread_id}, current=False) as span:
            return (yield from self._change(thread_id, decide, fence_all, alive, by_expiry, what, span))

    def _change(
        self,
        thread_id: str,
        decide: Decide,
        fence_all: bool,
        alive: Alive | None,
        by_expiry: bool,
        what: str,
        span: T.Span,
    ) -> Plan[Lease]:
        decided: list[tuple[Lease | None, Lease, Lease | None]] = []  # (stored, new, judged) of the last decision
        alive = {} if alive is None else alive
        tp = span.traceparent

        def change(head: Head | None) -> Head:
            stored, now = lease_of(head, thread_id), self.clock()
            ref = _record_to_read(stored, now, alive) if by_expiry else None
            if ref is not None:
                raise _NeedRecord(ref)
            current = _as_alive(stored, alive)
            new = decide(current, now)
            base = head if head is not None else Head(thread_id, "", {}, {})
            recorded = fence_of(base.meta)
            if (current is None or new.epoch != current.epoch) and new.epoch <= recorded:
                # a new owner always gets an epoch above every one ever recorded for the thread
                new = new.model_copy(update={"epoch": recorded + 1})
            if tp is not None:
                new = _traced(current, new, tp)
            decided[:] = [(stored, new, current)]
            return replace(base, meta=new.into(base.meta))

        def landed(head: Head | None) -> bool:
            return lease_of(head, thread_id) == decided[0][1]

        attempts = self.saver.layout.max_attempts
        for _ in range(attempts):  # each turn reads one more record; a head names one at a time
            try:
                yield from self.saver.heads.cas(
                    thread_id, "", change, landed=landed,
                    contention=f"the lease of session {thread_id!r} kept changing under us ({attempts} attempts); retry",
                )  # fmt: skip
                break
            except _NeedRecord as need:
                alive.update((yield from liveness.plan_alive_until([need.ref])))
        else:
            raise ConflictError(
                f"the owner of session {thread_id!r} kept changing under us ({attempts} attempts); retry"
            )
        current, new, judged = decided[0]
        if fence_all or current is None or new.epoch != current.epoch:
            yield from self._plan_fence_namespaces(thread_id, new.epoch)
        if what:
            _noted(what, judged, new, self.clock(), span)
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

        lease = yield from self._plan_change(thread_id, decide, fence_all=True, by_expiry=True, what="retire")
        return lease, not (before[0] is not None and before[0].retired)

    def _plan_get(self, thread_id: str) -> Plan[Lease | None]:
        thread_id = keys.validate_thread_id(thread_id)
        head, _ = yield from self.saver.heads.read(thread_id)
        return lease_of(head, thread_id)

    def _run(self, plan: Plan[R]) -> R:
        return trust.run(self.saver.store, plan)  # never on an unprobed store

    async def _arun(self, plan: Plan[R]) -> R:
        return await trust.arun(self.saver.store, plan)

    # -- leases ---------------------------------------------------------------------------------------

    def _acquire(
        self, thread_id: str, owner: str, ttl: float, force: bool, liveness: str | None, alive: Alive | None = None
    ) -> Plan[Lease]:
        lease = yield from self._plan_change(
            thread_id,
            lambda cur, now: L.acquire(cur, thread_id, owner, ttl=ttl, now=now, force=force, liveness=liveness),
            fence_all=True,
            alive=alive,
            by_expiry=True,
            what="acquire",
        )
        return lease

    def acquire(
        self, thread_id: str, owner: str, ttl: float, *, force: bool = False, liveness: str | None = None
    ) -> Lease:
        """Own a session for ``ttl`` seconds: a free, released or expired one (epoch + 1, a
        *takeover* if someone held it), or renew your own. ``LeaseHeldError`` if another owner's
        lease is valid; ``force=True`` takes it anyway (for an operator who knows that worker is gone).
        ``liveness``: the incarnation whose liveness record (:mod:`~langgraph_handoff.checkpoint.liveness`) also keeps the
        lease alive, so that renewing that one record renews it (what ``SessionWorker`` does)."""
        return self._run(self._acquire(thread_id, owner, ttl, force, liveness))

    async def aacquire(
        self, thread_id: str, owner: str, ttl: float, *, force: bool = False, liveness: str | None = None
    ) -> Lease:
        return await self._arun(self._acquire(thread_id, owner, ttl, force, liveness))

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
        return self._run(self._release(lease))

    async def arelease(self, lease: Lease) -> Lease:
        return await self._arun(self._release(lease))

    def _release(self, lease: Lease) -> Plan[Lease]:
        return self._plan_change(lease.thread_id, lambda cur, now: L.release(cur, lease, now=now), what="release")

    def get(self, thread_id: str) -> Lease | None:
        """The session's lease as stored now (one GET)."""
        return self._run(self._plan_get(thread_id))

    async def aget(self, thread_id: str) -> Lease | None:
        return await self._arun(self._plan_get(thread_id))

    # -- worker liveness ------------------------------------------------------------------------------

    def _keep_alive(self, owner: str, incarnation: str, ttl: float, stopped: bool) -> Plan[liveness.WorkerRecord]:
        record = liveness.WorkerRecord(
            L.check_owner(owner), incarnation, self.clock() + (0.0 if stopped else L.check_ttl(ttl)), stopped
        )
        yield from liveness.plan_write(record)
        return record

    def keep_alive(self, owner: str, incarnation: str, ttl: float, *, stopped: bool = False) -> liveness.WorkerRecord:
        """Say that incarnation ``incarnation`` of worker ``owner`` is alive for ``ttl`` more
        seconds (one PUT): every lease taken with ``liveness=incarnation`` holds as long
        (:mod:`~langgraph_handoff.checkpoint.liveness`). ``stopped=True``: the worker stopped,
        and what it still holds may be taken at once."""
        return self._run(self._keep_alive(owner, incarnation, ttl, stopped))

    async def akeep_alive(
        self, owner: str, incarnation: str, ttl: float, *, stopped: bool = False
    ) -> liveness.WorkerRecord:
        return await self._arun(self._keep_alive(owner, incarnation, ttl, stopped))

    # -- planned transfer: lock, transfer, accept -----------------------------------------------------

    def _begin(self, lease: Lease, to_owner: str | None, note: Handoff | None, timeout: float) -> Plan[Lease]:
        data = note.model_dump(mode="json") if note is not None else {}
        out = yield from self._plan_change(
            lease.thread_id,
            lambda cur, now: L.begin_transfer(cur, lease, to_owner=to_owner, note=data, timeout=timeout, now=now),
            what="begin_transfer",
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

    def _accept(
        self, thread_id: str, owner: str, ttl: float, transfer_id: str | None, liveness: str | None
    ) -> Plan[Lease]:
        return self._plan_change(
            thread_id,
            lambda cur, now: L.accept(
                cur, thread_id, owner, transfer_id=transfer_id, ttl=ttl, now=now, liveness=liveness
            ),
            what="accept",
        )

    def accept(
        self, thread_id: str, owner: str, ttl: float, *, transfer_id: str | None = None, liveness: str | None = None
    ) -> Lease:
        """Phase 3: the new owner acknowledges; ownership changes now, at epoch + 1."""
        return self._run(self._accept(thread_id, owner, ttl, transfer_id, liveness))

    async def aaccept(
        self, thread_id: str, owner: str, ttl: float, *, transfer_id: str | None = None, liveness: str | None = None
    ) -> Lease:
        return await self._arun(self._accept(thread_id, owner, ttl, transfer_id, liveness))

    def abort_transfer(self, lease: Lease, ttl: float) -> Lease:
        """The old owner takes its session back after a transfer nobody accepted."""
        return self._run(self._abort(lease, ttl))

    async def aabort_transfer(self, lease: Lease, ttl: float) -> Lease:
        return await self._arun(self._abort(lease, ttl))

    def _abort(self, lease: Lease, ttl: float) -> Plan[Lease]:
        return self._plan_change(
            lease.thread_id, lambda cur, now: L.abort_transfer(cur, lease, ttl=ttl, now=now), what="abort_transfer"
        )

    # -- monitoring and forced takeover ------------------------------------------------------------------

    def _plan_sessions(
        self, thread_ids: Sequence[str] | None, alive: Alive | None = None, on_damaged: OnDamaged | None = None
    ) -> Plan[list[SessionInfo]]:
        """Every session's status; a lease past its own time is judged by its owner's liveness
        record (one GET per record, however many leases name it; ``alive`` keeps them).

        Over every session (``thread_ids=None``) a root head that cannot be read, or holds a
        lease that cannot be, is damage: logged naming its key, handed to ``on_damaged``, and
        the walk goes on, as every store-wide walk does. Asked for given sessions, it raises
        ``CorruptObjectError`` for such a head, as ``get_tuple`` does for its thread."""
        heads = self.saver.heads
        alive = {} if alive is None else alive
        walk = thread_ids is None
        if thread_ids is None:
            ids = [t for t, ns in (yield from heads.ids()) if ns == ""]
        else:
            ids = [keys.validate_thread_id(t) for t in thread_ids]
        now = self.clock()
        out: list[SessionInfo] = []
        for start in range(0, len(ids), 64):
            chunk = ids[start : start + 64]
            objs = yield driver.Batch(tuple(Get(keys.head_key(t, "")) for t in chunk))
            read: list[tuple[str, Head, Lease | None]] = []
            for tid, obj in zip(chunk, objs, strict=True):
                try:
                    head, _ = heads.decode(obj, tid)
                    if head is not None:
                        read.append((tid, head, lease_of(head, tid)))
                except UNREADABLE as exc:
                    if not walk:
                        raise
                    report_damage(DamagedObject.from_error(exc), on_damaged, "the session monitor")
            refs = [r for r in (_record_to_read(lease, now, alive) for _, _, lease in read) if r is not None]
            alive.update((yield from liveness.plan_alive_until(refs)))
            for tid, head, stored in read:
                lease = _as_alive(stored, alive)
                status: Status = lease.status(now) if lease is not None else "ownerless"
                if lease is None and not head.records:
                    continue
                out.append(SessionInfo(tid, status, lease, head.latest_id))
        return out

    def sessions(
        self, thread_ids: Sequence[str] | None = None, *, on_damaged: OnDamaged | None = None
    ) -> list[SessionInfo]:
        """Every session (or the given ones) with its status; ``needs_attention`` marks the
        "nobody is responsible" window: expired, stuck in transfer, or never owned. Over every
        session, a head that cannot be read is skipped, logged and given to ``on_damaged``."""
        return self._run(self._plan_sessions(thread_ids, on_damaged=on_damaged))

    async def asessions(
        self, thread_ids: Sequence[str] | None = None, *, on_damaged: OnDamaged | None = None
    ) -> list[SessionInfo]:
        return await self._arun(self._plan_sessions(thread_ids, on_damaged=on_damaged))

    def _plan_reclaim(
        self, owner: str, ttl: float, thread_ids: Sequence[str] | None, limit: int | None, liveness: str | None
    ) -> Plan[list[Lease]]:
        taken: list[Lease] = []
        alive: Alive = {}
        for info in (yield from self._plan_sessions(thread_ids, alive)):
            if info.lease is None or info.status not in ("expired", "stuck"):
                continue  # owned, in transfer, released (anyone may simply acquire it) or never leased
            try:
                lease = yield from self._acquire(info.thread_id, owner, ttl, False, liveness, alive)
            except LeaseHeldError:
                continue  # renewed, or another reclaimer won
            taken.append(lease)
            if limit is not None and len(taken) >= limit:
                break
        return taken

    def reclaim_expired(
        self,
        owner: str,
        ttl: float,
        *,
        thread_ids: Sequence[str] | None = None,
        limit: int | None = None,
        liveness: str | None = None,
    ) -> list[Lease]:
        """The health check: take over (epoch + 1) every session whose owner stopped renewing or
        whose transfer was never accepted. Resume each from its latest checkpoint with a saver
        bound to the new lease (``saver.with_lease(lease)``): LangGraph replays the pending
        writes of tasks that completed, so they are not executed again."""
        return self._run(self._plan_reclaim(owner, ttl, thread_ids, limit, liveness))

    async def areclaim_expired(
        self,
        owner: str,
        ttl: float,
        *,
        thread_ids: Sequence[str] | None = None,
        limit: int | None = None,
        liveness: str | None = None,
    ) -> list[Lease]:
        return await self._arun(self._plan_reclaim(owner, ttl, thread_ids, limit, liveness))


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
