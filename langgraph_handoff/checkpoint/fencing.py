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
* Every new id must sort after the latest: "latest" means "greatest id", and a checkpoint that
  sorts before it could never become visible (:class:`CheckpointOrderError`, a clock-skew symptom).
* A writer **bound to a session lease** (``saver.with_lease(lease)``) may not write a head that
  records a higher fencing epoch, or that its own epoch locked for a transfer or released
  (:class:`OwnershipLostError`). The check is against the head the compare-and-swap replaces, so
  it is atomic with the write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langgraph.constants import START

from langgraph_handoff.checkpoint.ttl import swept_of
from langgraph_handoff.errors import (
    CheckpointOrderError,
    ConflictError,
    OwnershipLostError,
    StaleWriterError,
    ThreadExpiredError,
)
from langgraph_handoff.format.records import Head, fast_init

__all__ = ["FENCE_KEY", "LEASE_KEY", "LINEAGE_SOURCES", "PutIntent", "check_put", "write_refusal"]

#: key of the session lease in a thread's root head (extra fields), and of the fencing epoch in
#: every head of the thread (see :mod:`langgraph_handoff.ownership`)
LEASE_KEY = "lease"
FENCE_KEY = "fence"

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

    @property
    def continues_lineage(self) -> bool:
        return self.by_run and self.source in LINEAGE_SOURCES and not self.branches_from_history


def check_put(head: Head | None, intent: PutIntent) -> ConflictError | None:
    """The conflict that forbids this put against ``head``, or None if it may proceed.

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
        refusal = write_refusal(head.extra, intent.fence)
        if refusal is not None:
            return OwnershipLostError(
                intent.thread_id,
                intent.checkpoint_ns,
                epoch=intent.fence,
                current=int(head.extra.get(FENCE_KEY, 0) or 0),
                reason=refusal,
            )
    swept_at = None
    if head is not None and not head.records:
        swept_at = swept_of(head.extra)[0]
        head = None  # an emptied head (everything deleted, or holding only a lease) is an empty namespace
    latest = head.latest_id if head is not None else None
    cid = intent.checkpoint_id
    if head is not None and cid in head.records:
        existing = head.records[cid]
        if not intent.continues_lineage or existing.parent == intent.parent_id:
            return None  # idempotent re-put / upsert of the same checkpoint
        return _stale(intent, latest, f"checkpoint {cid!r} is already stored with another parent")
    if intent.continues_lineage:
        if head is None and intent.parent_id is not None and swept_at is not None:
            return ThreadExpiredError(
                intent.thread_id,
                intent.checkpoint_ns,
                expected_parent=intent.parent_id,
                checkpoint_id=intent.checkpoint_id,
                swept_at=swept_at,
            )
        conflict = _lineage_conflict(head, intent, latest)
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
                )
    if latest is not None and cid < latest:
        return CheckpointOrderError(intent.thread_id, intent.checkpoint_ns, cid, latest)
    return None


def _lineage_conflict(head: Head | None, intent: PutIntent, latest: str | None) -> StaleWriterError | None:
    """Staleness is checked before id order: a run whose parent was superseded is stale, whatever
    its checkpoint id (with async durability its put may arrive after the winner's newer ones)."""
    if intent.parent_id is None:
        if head is not None and intent.saw_empty:
            return _stale(
                intent,
                latest,
                "this run started from an empty thread, but another run created it meanwhile "
                f"(latest checkpoint {latest!r})",
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
        return _stale(intent, latest)
    return None


def _stale(intent: PutIntent, latest: str | None, reason: str = "") -> StaleWriterError:
    return StaleWriterError(
        intent.thread_id,
        intent.checkpoint_ns,
        expected_parent=intent.parent_id,
        latest=latest,
        checkpoint_id=intent.checkpoint_id,
        reason=reason,
    )


def write_refusal(extra: dict[str, Any], epoch: int) -> str | None:
    """Why a writer holding ``epoch`` may not write a head whose extra fields are ``extra``
    (``None``: it may). Shared by the saver's put and the tests."""
    fence = int(extra.get(FENCE_KEY, 0) or 0)
    if fence > epoch:
        lease = extra.get(LEASE_KEY) or {}
        who = lease.get("owner")
        return f"the session was taken over (epoch {fence}" + (f", owner {who!r})" if who else ")")
    lease = extra.get(LEASE_KEY)
    if isinstance(lease, dict):
        if int(lease.get("epoch", 0)) != epoch:
            return f"the session's lease is at epoch {lease.get('epoch')}, held by {lease.get('owner')!r}"
        if lease.get("state") == "transferring":
            return "it locked the session for a transfer"
        if lease.get("state") == "released":
            return "it released the session"
    return None
