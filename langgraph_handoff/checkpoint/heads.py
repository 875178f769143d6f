"""``saver.heads``: reading and compare-and-swapping heads, for langgraph-handoff's own layers.

Session ownership keeps a thread's lease in its root head, a team worker keeps a member's resume
count there, monitoring walks every root head, the command line counts what a prune would
remove. They used to reach into the saver's private members for it (the head decoder, the head
cache, the namespace listing), and each compare-and-swap had to remember to tell the head cache
what it wrote, or the next put from this process would lose a race against a head it had
written itself. This module is the one way in, so the rule is kept by construction:

* a **read** decodes the head, or takes the copy the cache already holds under the same ETag (an
  ETag names one object state; every head write carries a fresh nonce); it never *records* what
  it read, exactly like the saver's own reads outside a put: a stale cache may cost a request,
  never a wrong answer;
* a **compare-and-swap** (:meth:`SaverHeads.cas`) reads the head, asks the caller for the next
  one, swaps it in, and records what it wrote in the cache (``observe``); a lost race is read
  again and decided again. A caller cannot swap a head without the cache learning of it.

Everything is a sans-I/O plan (:mod:`langgraph_handoff.checkpoint.driver`): the caller composes
it into its own plan with ``yield from`` and runs that sync or async, so both front ends share
one implementation, as the saver's do. Writes are gated by the store probe
(:mod:`langgraph_handoff.checkpoint.trust`) like every saver write.

>>> from langgraph_handoff import ObjectStoreSaver
>>> from langgraph_handoff.checkpoint import driver
>>> from langgraph_handoff._format.head_meta import HeadMeta, ResumeCount
>>> from langgraph_handoff._format.records import Head
>>> saver = ObjectStoreSaver.from_url("memory://")
>>> def count(head):
...     return Head("t", "", {}, {}, (), HeadMeta(team_resumes=ResumeCount("c1", 1)))
>>> written = driver.run(saver.store, saver.heads.cas("t", "", count, contention="t kept changing"))
>>> written.head.meta.team_resumes, saver.heads.remembered("t").etag == written.etag
(ResumeCount(checkpoint='c1', count=1), True)
>>> driver.run(saver.store, saver.heads.namespaces("t"))
['']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from langgraph_handoff._format import keys
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.records import Head
from langgraph_handoff.checkpoint import trust
from langgraph_handoff.checkpoint.driver import Batch, Plan, Sleep
from langgraph_handoff.checkpoint.plans import listing, maintenance, reading
from langgraph_handoff.checkpoint.plans.state import SaverState, backoff
from langgraph_handoff.errors import ConflictError, PreconditionFailedError, UnknownOutcomeError
from langgraph_handoff.stores.base import Get, Put, StoredObject

__all__ = ["HeadRead", "SaverHeads"]


class HeadRead(NamedTuple):
    """A head as read (or written) and the ETag of that object; ``head`` None: there is none."""

    head: Head | None
    etag: str | None


#: what a compare-and-swap asks its caller: the next head, given the current one (None: there is
#: none yet), or None to write nothing
Change = Callable[[Head | None], Head | None]


def plan_cas(
    saver: SaverState,
    thread_id: str,
    ns: str,
    change: Change,
    *,
    landed: Callable[[Head | None], bool] | None = None,
    contention: str,
) -> Plan[HeadRead]:
    """Read the head, ``change`` it, swap it in (``If-Match`` its ETag; ``If-None-Match: *`` to
    create it), and record what was written in the head cache. A lost or unsettled swap backs
    off and decides again on a fresh read; with ``landed``, the fresh head is first asked
    whether the swap landed after all (an unknown outcome that succeeded). ``change`` may raise
    to refuse; returning None ends the plan without writing. After ``layout.max_attempts`` lost
    races: :class:`ConflictError` with ``contention`` as its message.

    Requests: 1 GET + 1 conditional PUT; + 1 GET (``landed``) and a retry per lost race.
    """
    hkey = keys.head_key(thread_id, ns)
    for attempt in range(saver.layout.max_attempts):
        head, etag = reading.head_from(saver, (yield Get(hkey)), thread_id, ns)
        new = change(head)
        if new is None:
            return HeadRead(head, etag)
        body = rec_io.encode_head(new, schema_version=saver.layout.schema_version)
        try:
            new_etag = yield Put(hkey, body, if_match=etag) if etag is not None else Put(hkey, body, if_none_match=True)
        except (PreconditionFailedError, UnknownOutcomeError):
            if landed is not None:
                fresh, fresh_etag = reading.head_from(saver, (yield Get(hkey)), thread_id, ns)
                if landed(fresh):
                    saver._cache.observe(thread_id, ns, fresh, fresh_etag)
                    return HeadRead(fresh, fresh_etag)
            yield Sleep(backoff(saver.layout, attempt))
            continue
        saver._cache.observe(thread_id, ns, new, new_etag)
        return HeadRead(new, new_etag)
    raise ConflictError(contention)


def plan_read_many(saver: SaverState, targets: Sequence[tuple[str, str]]) -> Plan[list[HeadRead]]:
    """The heads of ``targets`` (thread, namespace), read in one round trip."""
    if not targets:
        return []
    objs = yield Batch(tuple(Get(keys.head_key(t, ns)) for t, ns in targets))
    return [HeadRead(*reading.head_from(saver, obj, t, ns)) for (t, ns), obj in zip(targets, objs, strict=True)]


class SaverHeads:
    """The heads of one saver's store, as the package's other layers use them (``saver.heads``).

    Not a user API: it may change with any release. Users read threads through the saver and
    :mod:`langgraph_handoff.inspection`. Every method but :meth:`decode` and :meth:`remembered`
    returns a plan; run it with ``driver.run(saver.store, plan)`` or ``await driver.arun(...)``,
    or ``yield from`` it inside a plan of your own.
    """

    def __init__(self, saver: SaverState) -> None:
        self._saver = saver

    # -- reading ---------------------------------------------------------------------------------
    def decode(self, obj: StoredObject | None, thread_id: str, ns: str = "") -> HeadRead:
        """A head object the caller fetched itself, in a round trip of its own (None: absent).
        No I/O; raises :class:`~langgraph_handoff.errors.CorruptObjectError` if it cannot be read
        or belongs to another thread or namespace (a misplaced object)."""
        return HeadRead(*reading.head_from(self._saver, obj, thread_id, ns))

    def read(self, thread_id: str, ns: str = "") -> Plan[HeadRead]:
        """The head of one namespace (1 GET)."""
        return HeadRead(*reading.head_from(self._saver, (yield Get(keys.head_key(thread_id, ns))), thread_id, ns))

    def read_many(self, targets: Sequence[tuple[str, str]]) -> Plan[list[HeadRead]]:
        """The heads of ``(thread, namespace)`` pairs, in one round trip of GETs."""
        return plan_read_many(self._saver, targets)

    def holds(self, thread_id: str, ns: str, head: Head, checkpoint_id: str) -> Plan[bool]:
        """Whether the namespace whose head is ``head`` holds checkpoint ``checkpoint_id``, in
        the head or in a sealed segment (reads the segment that would hold it, no value)."""
        found = yield from reading.find_container(self._saver, thread_id, ns, head, checkpoint_id)
        return found is not None

    def remembered(self, thread_id: str, ns: str = "") -> HeadRead | None:
        """The head this process last read or wrote for the namespace, if it remembers one (no
        I/O). It may be stale: use it only where a stale head costs a request, never a wrong
        answer (a lease holder skipping a GET, whose write is checked inside a compare-and-swap).
        """
        state = self._saver._cache.get(thread_id, ns)
        return HeadRead(state.head, state.etag) if state.known else None

    # -- writing ---------------------------------------------------------------------------------
    def cas(
        self,
        thread_id: str,
        ns: str,
        change: Change,
        *,
        landed: Callable[[Head | None], bool] | None = None,
        contention: str,
    ) -> Plan[HeadRead]:
        """Compare-and-swap one head (see :func:`plan_cas`); what it wrote is recorded in the head
        cache. Returns the head as stored afterwards with its ETag (the one read, when ``change``
        wrote nothing)."""
        plan = plan_cas(self._saver, thread_id, ns, change, landed=landed, contention=contention)
        return trust.gated(self._saver.store, plan)

    # -- walking ---------------------------------------------------------------------------------
    def ids(self, thread_id: str | None = None) -> Plan[list[tuple[str, str]]]:
        """``(thread, namespace)`` of every head (of one thread, with ``thread_id``), in key
        order, from key listings only. A key under ``heads/`` that is not a head key, or names a
        head too long to sit in its key that cannot be read, is logged (WARNING) and left out."""
        return listing.plan_heads_ids(self._saver, keys.heads_prefix(thread_id))

    def namespaces(self, thread_id: str) -> Plan[list[str]]:
        """Every namespace of a thread that has a head."""
        return listing.plan_namespaces(self._saver, thread_id)

    def prune_count(self, thread_id: str) -> Plan[int]:
        """How many checkpoints ``prune([thread_id], strategy="keep_latest")`` would remove now:
        the rule prune applies, namespace by namespace. Raises what reading a namespace raises
        (:data:`~langgraph_handoff.checkpoint.plans.listing.UNREADABLE` for a damaged one)."""
        return maintenance.plan_prune_count(self._saver, thread_id)
