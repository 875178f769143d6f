"""Write ownership: who may move the head of a (thread, namespace).

The head moves only by compare-and-swap, so two writers can never both succeed from the same
head. What this module decides is whether a ``put`` is *allowed* against the head as it is now,
both on the first attempt and after a lost race (when the saver re-reads and decides again):

* **Runs stepping forward** (a put LangGraph's run loop makes, metadata ``source`` ``"input"`` or
  ``"loop"``) extend a lineage. A put naming parent ``P`` is allowed only if ``P`` is still the
  latest checkpoint. Otherwise another run committed first and this one is stale:
  :class:`StaleWriterError`. Of two runs racing on one thread, exactly one commits each step; the
  other fails loudly instead of forking the thread.
* A put with **no parent** means "I started from an empty namespace". If this saver saw the
  namespace empty (a ``get_tuple`` found no head) and a head exists now, someone else created it
  meanwhile: stale. Callers that never read first (direct API use, the conformance suite) may add
  parentless checkpoints to an existing namespace.
* **Explicit writes** may start from any parent: forks and updates (``"fork"``, ``"update"``), and
  every put that is not a run's (``update_state`` and ``bulk_update_state`` as any node,
  ``__input__`` included, and direct API calls): the caller named the checkpoint it writes on.
  So may a run that LangGraph *addressed* at a superseded checkpoint: new input or a resume on
  an old checkpoint id (read by ``get_tuple``), or a stateful subgraph replayed from its state
  as of the replay point (read by ``list(before=...)``). Its first put branches from there
  (``branches_from_history``).
* Re-putting the id that is already stored (a retry whose first attempt landed) is an upsert.
* A writer carrying a **head rider** (a team turn acking its messages) may not put new input on
  top of an input checkpoint whose input has not run yet (it still holds ``__start__``): LangGraph
  would discard that input, and with it the messages another turn acked in that checkpoint's
  compare-and-swap. Finishing it first (``invoke(None)``, source ``"loop"``) is allowed.
* A refusal says what the refused run left behind: its checkpoints that are stored
  (:func:`left_behind`) and whether its input is in the conversation (:func:`input_in_thread`:
  an input checkpoint's input counts only once a step ran it, because new input on top of it
  makes LangGraph drop it), so a caller retries without sending a message twice or losing it.
* Every new id must sort after the latest: "latest" means "greatest id", and a checkpoint that
  sorts before it could never become visible (:class:`CheckpointOrderError`, a clock-skew symptom).
* A writer **bound to a session lease** (``saver.with_lease(lease)``) may not write a head that
  records a higher fencing epoch, or that its own epoch locked for a transfer or released
  (:class:`OwnershipLostError`). The check is against the head the compare-and-swap replaces, so
  it is atomic with the write.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.constants import START

from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff._format.records import Head, Record
from langgraph_handoff._frozen import fast_init
from langgraph_handoff.errors import (
    CheckpointOrderError,
    ConflictError,
    OwnershipLostError,
    StaleWriterError,
    ThreadExpiredError,
)

__all__ = [
    "LINEAGE_SOURCES",
    "LeaseTerms",
    "PutIntent",
    "check_put",
    "fence_of",
    "fenced",
    "input_in_thread",
    "released",
    "session_of",
    "with_session",
    "write_refusal",
]

#: Reads a record's metadata ``source`` (``None``: it cannot be read without running the serializer)
SourceOf = Callable[[Record], "str | None"]

#: Metadata sources of a run continuing its own lineage; everything else is an explicit fork
#: (and so is every put that is not a run's, whatever its source).
LINEAGE_SOURCES = frozenset({"input", "loop"})


@fast_init
@dataclass(frozen=True)
class PutIntent:
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    source: str | None
    #: this saver saw the namespace empty on a read that has not been "used up" by a put yet
    saw_empty: bool = False
    #: the parent is a superseded checkpoint this run was explicitly addressed at (time travel)
    branches_from_history: bool = False
    #: the session lease epoch this writer holds (``None``: not bound to a lease)
    fence: int | None = None
    #: a LangGraph run makes this put (its config carries the run's ``__pregel_*`` entries); other
    #: puts are explicit writes (``update_state``, ``bulk_update_state``, direct API calls)
    by_run: bool = True
    #: the writer carries a head rider (``with_head_rider``): its new input may not discard an
    #: input that is stored and has not run (whatever rode with that input would be lost)
    keeps_pending_input: bool = False
    #: the run making this put (its metadata's ``run_id``): a refusal names what it left behind
    run_id: str | None = None
    #: the checkpoints this run put in this process (``checkpoint.runs``), for runs without an id
    own: frozenset[str] = frozenset()

    @property
    def continues_lineage(self) -> bool:
        return self.by_run and self.source in LINEAGE_SOURCES and not self.branches_from_history


def check_put(head: Head | None, intent: PutIntent, source_of: SourceOf | None = None) -> ConflictError | None:
    """The conflict that forbids this put against ``head``, or None if it may proceed.
    ``source_of`` reads a record's metadata ``source`` (see :func:`input_in_thread`).

    >>> intent = PutIntent("t", "", "1f0-new", parent_id=None, source="input", saw_empty=True)
    >>> check_put(None, intent) is None
    True
    """
    if head is None and intent.fence is not None and not intent.checkpoint_ns:
        return OwnershipLostError(
            intent.thread_id,
            "",
            epoch=intent.fence,
            current=0,
            reason="the session has no lease any more (its thread was deleted)",
        )
    if head is not None and intent.fence is not None:
        refusal = write_refusal(head.meta, intent.fence)
        if refusal is not None:
            return OwnershipLostError(
                intent.thread_id,
                intent.checkpoint_ns,
                epoch=intent.fence,
                current=fence_of(head.meta),
                reason=refusal,
            )
    swept_at = None
    if head is not None and not head.records:
        mark = head.meta.swept
        swept_at = mark.at if mark is not None else None
        head = None  # an emptied head (everything deleted, or holding only a lease) is an empty namespace
    latest = head.latest_id if head is not None else None
    cid = intent.checkpoint_id
    if head is not None and cid in head.records:
        existing = head.records[cid]
        if not intent.continues_lineage or existing.parent == intent.parent_id:
            return None  # idempotent re-put / upsert of the same checkpoint
        return _stale(intent, latest, f"checkpoint {cid!r} is already stored with another parent", head, source_of)
    if intent.continues_lineage:
        if head is None and intent.parent_id is not None and swept_at is not None:
            return ThreadExpiredError(
                intent.thread_id,
                intent.checkpoint_ns,
                expected_parent=intent.parent_id,
                checkpoint_id=intent.checkpoint_id,
                swept_at=swept_at,
            )
        conflict = _lineage_conflict(head, intent, latest, source_of)
        if conflict is not None:
            return conflict
        if intent.keeps_pending_input and intent.source == "input" and head is not None and intent.parent_id:
            parent = head.records.get(intent.parent_id)
            if parent is not None and START in parent.values:
                return _stale(
                    intent,
                    latest,
                    f"checkpoint {intent.parent_id!r} holds input that has not run yet (another turn's, "
                    "which died or is still running): new input would discard it; finish it first "
                    "(invoke(None))",
                    head,
                    source_of,
                )
    if latest is not None and cid < latest:
        return CheckpointOrderError(intent.thread_id, intent.checkpoint_ns, cid, latest)
    return None


def _lineage_conflict(
    head: Head | None, intent: PutIntent, latest: str | None, source_of: SourceOf | None
) -> StaleWriterError | None:
    """Staleness is checked before id order: a run whose parent was superseded is stale, whatever
    its checkpoint id (with async durability its put may arrive after the winner's newer ones)."""
    if intent.parent_id is None:
        if head is not None and intent.saw_empty:
            return _stale(
                intent,
                latest,
                "this run started from an empty thread, but another run created it meanwhile "
                f"(latest checkpoint {latest!r})",
                head,
                source_of,
            )
        return None
    if head is None:
        return _stale(
            intent,
            None,
            f"this run continues from checkpoint {intent.parent_id!r}, but the thread has no "
            "checkpoints any more (deleted or pruned by someone else)",
        )
    if latest != intent.parent_id:
        return _stale(intent, latest, head=head, source_of=source_of)
    return None


def _stale(
    intent: PutIntent,
    latest: str | None,
    reason: str = "",
    head: Head | None = None,
    source_of: SourceOf | None = None,
) -> StaleWriterError:
    committed = left_behind(head, intent)
    return StaleWriterError(
        intent.thread_id,
        intent.checkpoint_ns,
        expected_parent=intent.parent_id,
        latest=latest,
        checkpoint_id=intent.checkpoint_id,
        reason=reason,
        committed=committed,
        input_in_thread=input_in_thread(head, committed, source_of),
    )


def left_behind(head: Head | None, intent: PutIntent) -> tuple[str, ...]:
    """The checkpoints of the refused put's run that are in ``head`` (oldest first): its parent
    and the parent's ancestors as long as the record says the same run wrote them.

    >>> left_behind(None, PutIntent("t", "", "c3", parent_id="c2", source="loop", run_id="r1"))
    ()
    """
    if head is None or (intent.run_id is None and not intent.own):
        return ()
    found: list[str] = []
    cid = intent.parent_id
    while cid is not None and cid not in found:
        record = head.records.get(cid)
        if record is None:
            break
        by_id = (
            intent.run_id is not None and record.bookkeeping is not None and record.bookkeeping.run_id == intent.run_id
        )
        if not by_id and cid not in intent.own:
            break
        found.append(cid)
        cid = record.parent
    return tuple(reversed(found))


def input_in_thread(head: Head | None, committed: tuple[str, ...], source_of: SourceOf | None = None) -> bool:
    """Whether a refused run's input is part of the thread's latest state, given the checkpoints
    it left behind (``committed``, oldest first, from :func:`left_behind`).

    Why not just "it stored something": a run's first checkpoint holds its input unapplied (in
    ``__start__``), and what the next checkpoint on top of it does decides the input's fate.
    LangGraph *runs* a pending input when a run resumes (``invoke(None)``, a ``"loop"`` step:
    the input is in the conversation, answered by that run's turn), but *drops* it when a run
    brings new input of its own, or when ``update_state`` writes on top (the new checkpoint no
    longer holds it). A refused run whose only checkpoint is its input checkpoint must send its
    input again in the second case and must not in the first. The head says which: the
    checkpoint on top of the run's last one, on the lineage of the latest checkpoint.

    ``source_of`` reads a record's metadata ``source``; when it cannot (``None``), a checkpoint
    that no longer holds the input counts as a step that ran it.

    >>> input_in_thread(None, ())
    False
    """
    if head is None or not committed or head.latest_id is None:
        return False
    last = committed[-1]
    on_top = None  # the checkpoint whose parent is ``last``, on the latest checkpoint's lineage
    cid: str | None = head.latest_id
    while cid is not None and cid != last and cid > last:
        record = head.records.get(cid)
        if record is None:
            return False
        on_top, cid = cid, record.parent
    if cid != last:
        return False  # the run's checkpoints are not on the thread's lineage (it was branched or pruned)
    first = head.records[committed[0]]
    pending = first.values.get(START)
    if len(committed) > 1 or pending is None or pending[0] != first.id:
        return True  # the run ran its input itself (or had none: a resume)
    if on_top is None:
        return True  # its input checkpoint is the latest: the input waits there
    above = head.records[on_top]
    if START in above.values:
        return False  # new input replaced it before it ran
    source = source_of(above) if source_of is not None else None
    return source is None or source == "loop"


def write_refusal(meta: HeadMeta, epoch: int) -> str | None:
    """Why a writer holding ``epoch`` may not write a head carrying ``meta`` (``None``: it may).
    Shared by the saver's put, a team's resume counter and the tests.

    >>> write_refusal(HeadMeta(fence=2, lease={"epoch": 2, "owner": "b"}), 1)
    "the session was taken over (epoch 2, owner 'b')"
    >>> write_refusal(HeadMeta(fence=2, lease={"epoch": 2, "state": "transferring"}), 2)
    'it locked the session for a transfer'
    """
    fence = fence_of(meta)
    lease = LeaseTerms.of(meta)
    if fence > epoch:
        who = lease.owner if lease is not None else None
        return f"the session was taken over (epoch {fence}" + (f", owner {who!r})" if who else ")")
    if lease is not None:
        if lease.epoch != epoch:
            return f"the session's lease is at epoch {lease.epoch}, held by {lease.owner!r}"
        if lease.state == "transferring":
            return "it locked the session for a transfer"
        if lease.state == "released":
            return "it released the session"
    return None


# --------------------------------------------------------------------------------------------------
# The session fields of a head (``HeadMeta.lease`` and ``HeadMeta.fence``), as the layers below
# ``ownership`` read and keep them: ``ownership/lease.py`` writes the lease and reads it strictly.
# --------------------------------------------------------------------------------------------------


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


@dataclass(frozen=True)
class LeaseTerms:
    """What the write rule and the TTL sweep read of a session lease stored in a root head, read
    leniently: they must never fail on a lease they cannot read (the session monitor, which reads
    it strictly through ``ownership.Lease``, reports it instead). An epoch that is not an integer
    reads as 0 (no writer holds it), a state that is not a string as ``"active"``, a time that is
    not a finite number as unknown (None).

    >>> meta = HeadMeta(lease={"epoch": 3, "owner": "a", "state": "transferring", "expires_at": 90,
    ...                        "transfer": {"deadline": 120.0}})
    >>> LeaseTerms.of(meta)
    LeaseTerms(epoch=3, owner='a', state='transferring', expires_at=90.0, transfer_deadline=120.0, liveness=None)
    >>> LeaseTerms.of(HeadMeta()) is None
    True
    """

    epoch: int
    owner: str | None
    #: ``"active"``, ``"transferring"`` or ``"released"`` (as ``ownership.lease.State``)
    state: str
    expires_at: float | None
    #: the deadline of a transfer under way (when the lease records one)
    transfer_deadline: float | None
    #: the incarnation whose liveness record also keeps an active lease alive (``SessionWorker``)
    liveness: str | None = None

    @property
    def liveness_ref(self) -> tuple[str, str] | None:
        """``(owner, incarnation)`` of the liveness record keeping this active lease alive."""
        if self.state != "active" or self.owner is None or self.liveness is None:
            return None
        return self.owner, self.liveness

    @classmethod
    def of(cls, meta: HeadMeta) -> LeaseTerms | None:
        raw = meta.lease
        if raw is None:
            return None
        epoch, owner, state = raw.get("epoch", 0), raw.get("owner"), raw.get("state", "active")
        transfer = raw.get("transfer")
        return cls(
            epoch=epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 0,
            owner=owner if isinstance(owner, str) else None,
            state=state if isinstance(state, str) else "active",
            expires_at=_finite(raw.get("expires_at")),
            transfer_deadline=_finite(transfer.get("deadline")) if isinstance(transfer, Mapping) else None,
            liveness=raw.get("liveness") if isinstance(raw.get("liveness"), str) else None,
        )


def fence_of(meta: HeadMeta) -> int:
    """The fencing epoch recorded in a head (0: none)."""
    return meta.fence or 0


def fenced(meta: HeadMeta, epoch: int) -> HeadMeta:
    """``meta`` with its fencing epoch raised to ``epoch`` (never lowered).

    >>> fenced(HeadMeta(fence=3), 2).fence, fenced(HeadMeta(), 2).fence
    (3, 2)
    """
    return meta if fence_of(meta) >= epoch else meta.replace(fence=epoch)


def session_of(meta: HeadMeta) -> HeadMeta:
    """Only the session fields of ``meta``: what a session keeps through a delete, a sweep or a
    copy of its thread (the next owner must get a higher epoch, a superseded one stays refused)."""
    return HeadMeta(lease=meta.lease, fence=meta.fence)


def with_session(meta: HeadMeta, session: HeadMeta) -> HeadMeta:
    """``meta`` with the session fields of ``session`` instead of its own."""
    return meta.replace(lease=session.lease, fence=session.fence)


def released(meta: HeadMeta) -> HeadMeta:
    """``meta`` with its lease (if any) released: what a tombstone keeps of a live session.

    >>> released(HeadMeta(lease={"epoch": 1, "state": "active", "transfer": {}})).lease
    {'epoch': 1, 'state': 'released', 'transfer': None}
    """
    if meta.lease is None:
        return meta
    return meta.replace(lease={**meta.lease, "state": "released", "transfer": None})
