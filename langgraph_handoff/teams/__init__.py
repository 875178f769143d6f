"""Agent teams: persistent teammates that message each other through durable mailboxes.

* :class:`Team`: roster (compare-and-swap) and mailboxes (one create-only object per message) on
  the saver's store; ``send``, ``broadcast``, ``status``, ``request_shutdown``, dead letters.
* :class:`TeamWorker`: serves members under leases; a batch of messages is one turn, acked in the
  same compare-and-swap as the checkpoint that stores it. Builds get the member
  (:class:`MemberContext`).
* :func:`team_tools` / :func:`TeamMiddleware`: what an agent calls (``send_message``,
  ``broadcast``, ``list_teammates``), recorded in a transactional outbox; :func:`team_prompt`
  tells it who it is and how the team works.
* :mod:`~langgraph_handoff.teams.chains`: why conversations end (answers are not answered
  automatically; a hop budget per conversation, :class:`HopBudgetExceeded`).
* ``Team.request`` / ``Team.wait_reply``: ask from outside the team and wait for the answer.

Guarantees and their tests: docs/teams.md and ``tests/test_teams*.py``.
"""

from langgraph_handoff.teams.acks import AckState, Selection, ack_rider, select
from langgraph_handoff.teams.chains import DEFAULT_MAX_HOPS, Chain, HopBudgetExceeded
from langgraph_handoff.teams.context import MemberContext, team_prompt
from langgraph_handoff.teams.model import Member, Message, Roster, member_thread
from langgraph_handoff.teams.outbox import OUTBOX_CHANNEL, TeamMiddleware, TeamState, outbox_reducer, team_tools
from langgraph_handoff.teams.status import ATTENTION, MemberStatus, derive_status
from langgraph_handoff.teams.team import DeadLetter, InboxEntry, Team
from langgraph_handoff.teams.views import Conversation
from langgraph_handoff.teams.worker import DEFAULT_CAPACITY, TeamWorker

__all__ = [
    "ATTENTION",
    "DEFAULT_CAPACITY",
    "DEFAULT_MAX_HOPS",
    "OUTBOX_CHANNEL",
    "AckState",
    "Chain",
    "Conversation",
    "DeadLetter",
    "HopBudgetExceeded",
    "InboxEntry",
    "Member",
    "MemberContext",
    "MemberStatus",
    "Message",
    "Roster",
    "Selection",
    "Team",
    "TeamMiddleware",
    "TeamState",
    "TeamWorker",
    "ack_rider",
    "derive_status",
    "member_thread",
    "outbox_reducer",
    "select",
    "team_prompt",
    "team_tools",
]
