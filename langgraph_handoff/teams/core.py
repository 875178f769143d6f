"""What every part of a :class:`~langgraph_handoff.teams.team.Team` reads: its store and the
plan runners over it, the members' threads, and the roster as this object last saw it.

**Where a member's conversation lives.** Each member's conversation is the LangGraph thread
``"{team}/{name}"`` of :attr:`TeamCore.member_saver`, a saver on the team's own key space
(``teams/{TM}/members/``, :meth:`ObjectStoreSaver.under`), not of the saver the team was made
with. Any string is a thread id a user-facing graph on the same store accepts, so a member's
thread at the store's root was one a user could name: asking for thread ``"support/alice"``
read and wrote that agent's conversation and its inbox acknowledgement (kept in the same head).
No thread id passed to the root saver reaches ``teams/``. Members spawned before that release
are moved on their first take by a worker, or by ``Team.upgrade`` (:mod:`.upgrade`).

``Team`` is assembled from this base and its mixins (``views``: inboxes, statuses and
conversations; ``requests``: waiting for answers), each in its own module; they share only what
is here, so none of them declares another's methods.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from langgraph_handoff._format import keys
from langgraph_handoff.checkpoint import driver, trust
from langgraph_handoff.checkpoint.driver import Plan
from langgraph_handoff.checkpoint.heads import HeadRead
from langgraph_handoff.checkpoint.plans.spaces import plan_team_ids
from langgraph_handoff.errors import UnknownRecipientError, UnknownTeamError
from langgraph_handoff.stores.base import Get, StoreBase
from langgraph_handoff.teams.model import Member, Roster, decode_roster, member_thread, validate_name

if TYPE_CHECKING:
    from langgraph_handoff.checkpoint.saver import ObjectStoreSaver

__all__ = ["TeamCore"]

R = TypeVar("R")


class TeamCore:
    """The store, the plan runners and the roster's read side of a team (set up by ``Team``)."""

    saver: ObjectStoreSaver
    #: the saver of the members' conversations, on the team's own key space (see above)
    member_saver: ObjectStoreSaver
    store: StoreBase
    team_id: str
    clock: Callable[[], float]
    _roster: Roster | None
    _lock: threading.Lock

    def _run(self, plan: Plan[R]) -> R:
        return trust.run(self.store, plan)  # never on an unprobed store

    async def _arun(self, plan: Plan[R]) -> R:
        return await trust.arun(self.store, plan)

    def thread_id(self, name: str) -> str:
        """The LangGraph thread of member ``name`` in :attr:`member_saver` (not in ``saver``)."""
        return member_thread(self.team_id, name)

    @property
    def members_prefix(self) -> str:
        """The key prefix of :attr:`member_saver`'s store: ``teams/{TM}/members/``."""
        return keys.team_members_prefix(self.team_id)

    def _plan_member_head(self, name: str) -> Plan[HeadRead]:
        """Member ``name``'s root head, read from a plan on the team's store (1 GET)."""
        return driver.under(self.members_prefix, self.member_saver.heads.read(self.thread_id(name)))

    def _remember(self, roster: Roster | None) -> None:
        with self._lock:
            self._roster = roster

    def _plan_roster(self) -> Plan[tuple[Roster | None, str | None]]:
        key = keys.team_roster_key(self.team_id)
        obj = yield Get(key)
        roster = decode_roster(obj.body, key=key) if obj is not None else None
        self._remember(roster)
        return roster, (obj.etag if obj is not None else None)

    def _plan_require(self, name: str | None = None) -> Plan[Roster]:
        """The roster, or :class:`UnknownTeamError`; with ``name``, also that member, or
        :class:`UnknownRecipientError`."""
        roster, _ = yield from self._plan_roster()
        if roster is None:
            raise UnknownTeamError(self.team_id, (yield from _plan_team_names()))
        if name is not None and name not in roster.members:
            raise UnknownRecipientError(self.team_id, name, roster.names())
        return roster

    def roster(self, *, refresh: bool = True) -> Roster:
        """The roster (``refresh=False``: the copy this object last saw, if any)."""
        with self._lock:
            cached = self._roster
        if cached is None or refresh:
            cached = self._run(self._plan_roster())[0]
        return cached if cached is not None else Roster(team_id=self.team_id)

    async def aroster(self, *, refresh: bool = True) -> Roster:
        with self._lock:
            cached = self._roster
        if cached is None or refresh:
            cached = (await self._arun(self._plan_roster()))[0]
        return cached if cached is not None else Roster(team_id=self.team_id)

    def _plan_check(self, name: str) -> Plan[Member]:
        validate_name(name)
        with self._lock:
            roster = self._roster
        if roster is None or name not in roster.members:
            roster, _ = yield from self._plan_roster()  # a miss re-reads once: a fresh spawn is found
        members = roster.members if roster is not None else {}
        if name not in members:
            raise UnknownRecipientError(self.team_id, name, list(members))
        return members[name]


#: at most this many team ids are looked at to name the valid teams in :class:`UnknownTeamError`
TEAMS_NAMED = 20


def _plan_team_names() -> Plan[list[str]]:
    """The teams that exist on the store (a roster each), to name in an unknown team's error:
    keys under ``teams/`` can also be the dead letters of a team whose roster is gone, which is
    no team to name. Only on that error path: one LIST per team, and one GET each."""
    names = []
    for team_id in (yield from plan_team_ids())[:TEAMS_NAMED]:
        if (yield Get(keys.team_roster_key(team_id))) is not None:
            names.append(team_id)
    return names
