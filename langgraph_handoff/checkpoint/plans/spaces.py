"""Where a store keeps threads: its root, and each agent team's own space.

A saver at the store's root lists its threads from ``heads/``. The conversations of a team's
members are the threads of a saver on ``teams/{TM}/members/`` (``ObjectStoreSaver.under``,
:mod:`langgraph_handoff.teams.core` says why), which the root's walks never list. So the walks
that must see every thread of a store, ``migrate`` (the format marker it stamps says the whole
store is current) and ``verify``, also walk each team's space, found here; the walks that serve
the users of the root (``list``, ``threads``, ``prune``, ``delete_for_runs``, the TTL sweep) do
not.

Finding the teams costs one LIST per team (of one key each, skipping over everything else the
team holds), and one more for the end.
"""

from __future__ import annotations

from langgraph_handoff._format import keys
from langgraph_handoff.checkpoint.driver import Plan
from langgraph_handoff.stores.base import ListPage

__all__ = ["plan_team_ids", "plan_team_spaces"]


def plan_team_ids() -> Plan[list[str]]:
    """Every team id with an object under ``teams/``, in key order.

    After a key ``teams/{TM}/...`` the listing goes on after ``teams/{TM}0``: ``0`` is the first
    character after ``/``, so every key of that team sorts before it, and every key of a team
    whose segment sorts after ``{TM}`` after it. A key there that no team wrote is skipped.
    """
    found: list[str] = []
    after: str | None = None
    while True:
        page = yield ListPage(keys.TEAMS_ROOT, start_after=after, max_keys=1)
        if not page.items:
            return found
        rest = page.items[0].key[len(keys.TEAMS_ROOT) :]
        segment, slash, _ = rest.partition("/")
        if slash and keys.is_canonical_segment(segment):
            team = keys.decode_segment(segment)
            if team:
                found.append(team)
        # past this team's keys; a key with no "/" after the team is one key, passed alone
        after = keys.TEAMS_ROOT + segment + "0" if slash else page.items[0].key


def plan_team_spaces() -> Plan[list[str]]:
    """The key prefixes of the team spaces that hold threads (a head under ``heads/``)."""
    spaces = []
    for team in (yield from plan_team_ids()):
        prefix = keys.team_members_prefix(team)
        page = yield ListPage(prefix + keys.heads_prefix(), max_keys=1)
        if page.items:
            spaces.append(prefix)
    return spaces
