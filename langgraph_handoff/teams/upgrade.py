"""Moving a member's conversation out of the user's thread-id space (stores written by 0.2).

Up to 0.2 a member's conversation was the thread ``"{team}/{name}"`` at the store's root, where
every thread id a user-facing graph accepts lands (:mod:`.core` says why that was wrong). Now it
is that thread of the team's member saver (``teams/{TM}/members/``). A roster entry written by
0.2 has no ``Member.space`` and reads as ``"root"``: its conversation, its inbox acknowledgement
and its resume count may still be at the root. :func:`plan_move_member` moves them, and is what
a :class:`~langgraph_handoff.teams.TeamWorker` runs before it first takes such a member, and
what ``Team.upgrade`` (``langgraph-handoff team upgrade``) runs for every such member at once.

The move, each step decided again from what is stored, so a rerun after a kill at any point
finishes it and a second mover running at the same time does no harm:

1. **Retire the root session** (``SessionManager.plan_retire``, a compare-and-swap of the root
   head): its lease is held for good by "moved to teams/{TM}/members/" at epoch + 1, carried to
   every namespace head. A worker of the old release that still serves the member is fenced
   (its next put is refused, nothing it did is lost: it committed or it did not), and one that
   looks for free members later finds this one held and never takes it again. While an old
   worker holds a live lease the move waits (``"held"``): that worker serves the member until
   it stops (a stop hands it over, and a lock for a transfer may be retired) or its lease
   expires. Nothing is copied before the root is frozen, so no turn is lost between a copy and
   a cut-over.
2. **Copy** every object of the thread (``data/{T}/...``, then the subgraph heads, then the
   root head last), create-only, to the same keys under the team's prefix: objects already
   there (an earlier, killed run) are left as they are. Data objects are immutable and copied
   as stored (each checked as one of ours first, never decoded further); the root head goes as
   read, its lease released at the retired epoch (so the first worker's acquire is above every
   epoch the thread ever had) and its inbox acknowledgement and resume count with it: messages
   sent and not yet ingested wait in the inbox, which does not move, and are ingested exactly
   once, by the first owner in the team's space.
3. **Empty the root**: its data and subgraph heads are deleted, and its root head is swapped for
   a tombstone that keeps only the retired lease. A user's thread of that id reads as empty
   from then on (and may be written: it is theirs); the member's conversation and
   acknowledgement are no longer there.

If the team's space already holds a conversation for the member that is not this one (its
roster entry lost ``space`` to a process of the old release rewriting the roster, and the
member ran there meanwhile) nothing is copied or deleted: ``"conflict"``, for an operator.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from langgraph_handoff._format import envelope, keys
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.records import Head
from langgraph_handoff.checkpoint.driver import Batch, Plan, under
from langgraph_handoff.checkpoint.fencing import released, session_of, with_session
from langgraph_handoff.errors import LeaseHeldError, PreconditionFailedError
from langgraph_handoff.ownership.manager import SessionManager, lease_of
from langgraph_handoff.stores.base import DeleteMany, Get, Put
from langgraph_handoff.teams.receiving import plan_list

if TYPE_CHECKING:
    from langgraph_handoff.teams.core import TeamCore

__all__ = ["MemberMove", "Outcome", "plan_move_member"]

log = logging.getLogger("langgraph_handoff.teams")

#: ``moved``: this call moved a conversation; ``moved before``: an earlier call did;
#: ``nothing to move``: the root held no conversation (its session is retired all the same);
#: ``held``: a worker of the old release serves the member (try again once it stopped);
#: ``conflict``: the team's space holds another conversation for the member (nothing was changed);
#: ``failed``: an object could not be read or the store failed (``detail``; run it again)
Outcome = Literal["moved", "moved before", "nothing to move", "held", "conflict", "failed"]

_CHUNK = 64


@dataclass(frozen=True)
class MemberMove:
    """What moving one member's conversation did."""

    member: str
    outcome: Outcome
    #: objects copied into the team's space by this call
    copied: int = 0
    #: ``held``: the worker that holds the member's root lease, and until when
    held_by: str | None = None
    until: float | None = None
    detail: str = ""

    @property
    def settled(self) -> bool:
        """Does the member's conversation live in the team's space now (its roster entry may
        say so)? Not while a worker of the old release serves it, nor in a conflict."""
        return self.outcome in ("moved", "moved before", "nothing to move")

    def as_dict(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "outcome": self.outcome,
            "copied": self.copied,
            "held_by": self.held_by,
            "until": self.until,
            "detail": self.detail,
        }


def plan_move_member(team: TeamCore, name: str) -> Plan[MemberMove]:
    """Move member ``name``'s conversation from the root thread ``"{team}/{name}"`` into the
    team's space (see the module docstring). Runs on the team's store. Requests, for a thread
    of ``n`` objects: 2 GETs + 1-2 CAS to retire (plus one per subgraph namespace), 1 LIST per
    1,000 objects, ``n`` GETs and ``n`` create-only PUTs in rounds of 64, 1 DeleteObjects per
    1,000, 1 CAS; a member moved before costs 1 GET."""
    thread = team.thread_id(name)
    root = team.saver
    head, _ = yield from root.heads.read(thread)
    lease = lease_of(head, thread)
    if lease is not None and lease.retired and (head is None or not head.has_history):
        return MemberMove(name, "moved before")
    where = f"moved to {team.members_prefix}"
    try:
        lease, fresh = yield from SessionManager(root, clock=team.clock).plan_retire(thread, where)
    except LeaseHeldError as exc:
        return MemberMove(name, "held", held_by=exc.owner, until=exc.expires_at,
                          detail=f"a worker of an older release ({exc.owner!r}) serves it; stop it, or wait "
                                 "until its lease expires")  # fmt: skip
    head, _ = yield from root.heads.read(thread)  # frozen now: no leased writer can move it
    if head is None or not head.has_history:
        yield from _empty_root(team, thread)
        return MemberMove(name, "nothing to move" if fresh else "moved before")
    there, _ = yield from team._plan_member_head(name)
    if there is not None:
        if not (yield from _holds(team, thread, there, head)):
            return MemberMove(name, "conflict", detail=(
                f"the team's space already holds another conversation of {name!r}; the old one is left, "
                f"read-only, in thread {thread!r} at the store's root: delete it there once you have what you need "
                f"(langgraph-handoff delete URL {thread} --yes), then run `team upgrade` again"
            ))  # fmt: skip
        copied = 0  # an earlier run copied it whole (the root head goes last)
    else:
        copied = yield from _copy(team, thread, head)
    yield from _empty_root(team, thread)
    log.info("team %s: moved %r's conversation (%d objects) into %s", team.team_id, name, copied, team.members_prefix)
    return MemberMove(name, "moved" if copied else "moved before", copied=copied)


def _holds(team: TeamCore, thread: str, there: Head, head: Head) -> Plan[bool]:
    """Does the team's space hold this conversation (its latest checkpoint at the root)?"""
    latest = head.latest_id
    if latest is None:
        return True
    return (yield from under(team.members_prefix, team.member_saver.heads.holds(thread, "", there, latest)))


def _copy(team: TeamCore, thread: str, head: Head) -> Plan[int]:
    """Copy the root thread's objects into the team's space, create-only: data, subgraph
    heads, and the root head (its lease released) last. Returns how many were written."""
    prefix = team.members_prefix
    root_key = keys.head_key(thread, "")
    data = yield from plan_list(keys.thread_data_prefix(thread))
    heads = [i for i in (yield from plan_list(keys.heads_prefix(thread))) if keys.is_head_key(i.key)]
    copied = 0
    for batch in (data, [i for i in heads if i.key != root_key]):
        for start in range(0, len(batch), _CHUNK):
            chunk = [i.key for i in batch[start : start + _CHUNK]]
            objs = yield Batch(tuple(Get(k) for k in chunk))
            puts = []
            for key, obj in zip(chunk, objs, strict=True):
                if obj is None:
                    continue  # deleted by a mover that finished first: it copied it before
                envelope.decode(obj.body, key=key)  # ours and whole: damage stops the move here
                puts.append(Put(prefix + key, obj.body, if_none_match=True))
            copied += yield from _create(puts)
    meta = with_session(head.meta, released(session_of(head.meta))).replace(ttl=None, swept=None)
    body = rec_io.encode_head(replace(head, meta=meta), schema_version=team.member_saver.layout.schema_version)
    copied += yield from _create([Put(prefix + root_key, body, if_none_match=True)])
    return copied


def _create(puts: list[Put]) -> Plan[int]:
    """Create-only PUTs in one round trip; an object already there (an earlier run) is kept."""
    if not puts:
        return 0
    outcomes = yield Batch(tuple(puts), outcomes=True)
    made = 0
    for outcome in outcomes:
        if isinstance(outcome, PreconditionFailedError):
            continue
        if isinstance(outcome, BaseException):
            raise outcome
        made += 1
    return made


def _empty_root(team: TeamCore, thread: str) -> Plan[None]:
    """Delete the root thread's data and subgraph heads, then swap its root head for a
    tombstone keeping only the retired lease (and fencing epoch)."""
    root_key = keys.head_key(thread, "")
    data = yield from plan_list(keys.thread_data_prefix(thread))
    heads = [i for i in (yield from plan_list(keys.heads_prefix(thread))) if keys.is_head_key(i.key)]
    doomed = [i.key for i in data] + [i.key for i in heads if i.key != root_key]
    for start in range(0, len(doomed), 1000):
        yield DeleteMany(tuple(doomed[start : start + 1000]))

    def tombstone(current: Head | None) -> Head | None:
        lease = lease_of(current, thread)
        if current is None or lease is None or not lease.retired:
            return None  # gone, or an operator took the session back (force): leave it
        if not current.has_history and current.meta == session_of(current.meta):
            return None
        return Head(thread, "", {}, {}, (), session_of(current.meta))

    yield from team.saver.heads.cas(thread, "", tombstone, contention=(
        f"the root thread {thread!r} kept changing while it was emptied; run `team upgrade` again"
    ))  # fmt: skip
