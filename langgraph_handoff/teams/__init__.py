"""Agent teams: persistent teammates that message each other through durable mailboxes.

* :class:`Team`: roster (compare-and-swap) and mailboxes (one create-only object per message) on
  the saver's store; ``send``, ``broadcast``, ``status``, ``request_shutdown``, dead letters.
  Members' conversations are threads of ``team.member_saver``, in the team's own key space, out
  of reach of every thread id a user passes to the saver (:mod:`~langgraph_handoff.teams.core`;
  stores of 0.2: :mod:`~langgraph_handoff.teams.upgrade`).
* :class:`TeamWorker`: serves members under leases; a batch of messages is one turn, acked in the
  same compare-and-swap as the checkpoint that stores it. Builds get the member
  (:class:`MemberContext`).
* :func:`team_tools` / :func:`TeamMiddleware`: what an agent calls (``send_message``,
  ``broadcast``, ``list_teammates``), recorded in a transactional outbox; :func:`team_prompt`
  tells it who it is and how the team works.
* :mod:`~langgraph_handoff.teams.chains`: why conversations end (answers are not answered
  automatically; a hop budget per conversation, :class:`HopBudgetExceeded`).
* ``Team.request`` / ``Team.wait_reply``: ask from outside the team and wait for the answer.

Guarantees and their tests: docs/teams.md and ``tests/teams/``.
"""

from langgraph_handoff.teams.chains import HopBudgetExceeded
from langgraph_handoff.teams.context import MemberContext, team_prompt
from langgraph_handoff.teams.model import Member, Message, Roster
from langgraph_handoff.teams.outbox import TeamMiddleware, TeamState, team_tools
from langgraph_handoff.teams.status import MemberStatus
from langgraph_handoff.teams.team import DeadLetter, InboxEntry, KeyedStatus, Team
from langgraph_handoff.teams.views import Conversation
from langgraph_handoff.teams.worker import TeamWorker

__all__ = [
    "Conversation",
    "DeadLetter",
    "HopBudgetExceeded",
    "InboxEntry",
    "KeyedStatus",
    "Member",
    "MemberContext",
    "MemberStatus",
    "Message",
    "Roster",
    "Team",
    "TeamMiddleware",
    "TeamState",
    "TeamWorker",
    "team_prompt",
    "team_tools",
]
