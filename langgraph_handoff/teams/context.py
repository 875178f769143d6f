"""What a member's graph is built with: :class:`MemberContext`, and the prompt that tells an agent
who it is, who its teammates are and how the team talks.

A :class:`~langgraph_handoff.teams.TeamWorker` builds one graph per *member* (per lease and roster
version), but ``builds`` is keyed by *role*, and two members may share a role. So a builder gets
the member as well as the checkpointer: ``build(checkpointer, member)``, and makes the member's
own tools from it (``member.tools()``). Tools made for a fixed name would send as that name from
every member of the role: a message from bob would reach the lead as "from alice".
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langgraph_handoff.teams.model import Member

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from langgraph_handoff.teams.team import Team

__all__ = ["MemberContext", "call_build", "is_legacy_build", "team_prompt"]


@dataclass(frozen=True)
class MemberContext:
    """The member a graph is built for, with its team: ``build(checkpointer, member)``.

    >>> from langgraph_handoff import ObjectStoreSaver
    >>> from langgraph_handoff.teams import Team
    >>> team = Team(ObjectStoreSaver.from_url("memory://"), "t")
    >>> _ = team.spawn("lead", role="lead"); _ = team.spawn("bob", role="coder")
    >>> bob = MemberContext(team, team.roster().members["bob"])
    >>> (bob.name, bob.role, [m.name for m in bob.teammates()])
    ('bob', 'coder', ['lead'])
    >>> [t.name for t in bob.tools()]
    ['send_message', 'broadcast', 'list_teammates']
    """

    team: Team
    member: Member

    @property
    def name(self) -> str:
        return self.member.name

    @property
    def role(self) -> str:
        return self.member.role

    def teammates(self) -> list[Member]:
        """The other members, as the roster was when the graph was built."""
        return [m for m in self.team.members() if m.name != self.name]

    def tools(self, *, mode: Literal["outbox", "immediate"] = "outbox") -> list[BaseTool]:
        """This member's ``send_message``, ``broadcast`` and ``list_teammates`` (``team_tools``)."""
        from langgraph_handoff.teams.outbox import team_tools

        return team_tools(self.team, self.name, mode=mode)

    def middleware(self, *, mode: Literal["outbox", "immediate"] = "outbox") -> Any:
        """``TeamMiddleware`` for this member (``create_agent``): tools, outbox and the prompt."""
        from langgraph_handoff.teams.outbox import TeamMiddleware

        return TeamMiddleware(self.team, self.name, mode=mode)

    def prompt(self) -> str:
        """The team prompt for this member (:func:`team_prompt`): add it to your system prompt."""
        return team_prompt(self.team, self.name)


def team_prompt(team: Team, me: str) -> str:
    """What an agent must know to work on the team: its name and role, its teammates, and how
    messages come and go. ``TeamMiddleware`` adds it to the system prompt of every model call; a
    custom graph adds it itself (``MemberContext.prompt``). Reads the roster this process last saw.

    >>> from langgraph_handoff import ObjectStoreSaver
    >>> from langgraph_handoff.teams import Team
    >>> team = Team(ObjectStoreSaver.from_url("memory://"), "release-42")
    >>> _ = team.spawn("lead", role="lead"); _ = team.spawn("alice", role="coder", description="fixes tests")
    >>> print(team_prompt(team, "alice").splitlines()[0])
    You are alice, the coder on team release-42 (fixes tests). The lead is lead.
    """
    roster = team.roster(refresh=False)
    member = roster.members.get(me)
    role = member.role if member is not None else "member"
    what = f" ({member.description})" if member is not None and member.description else ""
    lead = "You are the lead." if roster.lead == me else f"The lead is {roster.lead}." if roster.lead else ""
    mates = [m for n, m in sorted(roster.members.items()) if n != me]
    lines = [f"You are {me}, the {role} on team {team.team_id}{what}. {lead}".rstrip()]
    if mates:
        lines.append("Your teammates:")
        lines += [f"- {m.name} ({m.role}){': ' + m.description if m.description else ''}"
                  + ("" if m.state == "active" else f" [{m.state}]") for m in mates]  # fmt: skip
    else:
        lines.append("You have no teammates yet.")
    lines += [
        "How the team works:",
        '- Messages reach you as user messages that start with "[message from NAME (#id)]". NAME is who wrote it.',
        "- To message a teammate call send_message(to, content); pass reply_to=<id> when you answer a message. "
        "It is delivered once your turn is saved.",
        "- Never wait inside your turn: end it. Answers arrive later as new messages.",
        "- Whoever asked you gets your final answer automatically if you end your turn without messaging them "
        "(after the teammates you asked meanwhile have answered you). Do not also send it yourself.",
        "- Do not answer an answer just to acknowledge it, and do not ask a teammate for something you were asked "
        f"by them. A conversation ends after {team.max_hops} messages; nothing past that is delivered.",
    ]
    return "\n".join(lines)


# -- builders: build(checkpointer, member), and the one-argument form of earlier versions -------------


def is_legacy_build(build: Callable[..., Any]) -> bool:
    """Does ``build`` take only the checkpointer (the form before ``build(checkpointer, member)``)?"""
    try:
        params = list(inspect.signature(build).parameters.values())
    except (TypeError, ValueError):  # a builtin or C callable: assume the current form
        return False
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) < 2


def warn_legacy(role: str) -> None:
    warnings.warn(
        f"TeamWorker builds[{role!r}] takes only the checkpointer: give it a second parameter, "
        "build(checkpointer, member), and make the member's tools from it (member.tools(), "
        "member.middleware()). A one-argument build cannot tell two members of one role apart; "
        "this form will be removed in a future release.",
        DeprecationWarning,
        stacklevel=3,
    )


def call_build(build: Callable[..., Any], checkpointer: Any, member: MemberContext, legacy: bool) -> Any:
    return build(checkpointer) if legacy else build(checkpointer, member)
