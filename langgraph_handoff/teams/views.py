"""What people read about a team: inboxes, dead letters, derived statuses and a member's
conversation. Read-only: nothing here writes to the store.

:class:`TeamViews` is a mixin of :class:`~langgraph_handoff.teams.Team`; it lives apart from the
roster and mailbox protocol (``teams/team.py``) because none of it takes part in delivery.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages

from langgraph_handoff._format import keys
from langgraph_handoff.checkpoint import driver
from langgraph_handoff.checkpoint.driver import Batch, Plan
from langgraph_handoff.errors import CorruptObjectError, InvalidInputError
from langgraph_handoff.ownership.manager import lease_of
from langgraph_handoff.stores.base import Get
from langgraph_handoff.teams.core import TeamCore
from langgraph_handoff.teams.model import Member, Message, decode_message, validate_name
from langgraph_handoff.teams.receiving import plan_list, plan_receive
from langgraph_handoff.teams.status import MemberStatus, derive_status, has_next, pending_interrupt

if TYPE_CHECKING:
    pass

__all__ = ["Conversation", "DeadLetter", "InboxEntry", "TeamViews", "conversation_of", "last_turn_inputs"]

log = logging.getLogger("langgraph_handoff.teams")


@dataclass(frozen=True)
class InboxEntry:
    message: Message
    #: "pending", "held" (waits for an earlier seq), or "ingested" (acked, delete pending)
    state: str


@dataclass(frozen=True)
class DeadLetter:
    """A message nobody will ingest: its recipient was removed. Kept, never dropped."""

    member: str
    key: str
    message: Message | None
    #: "dead" (moved by ``remove``) or "orphaned" (sent to the old inbox after the remove)
    where: str


@dataclass(frozen=True)
class Conversation:
    """A member's conversation as its latest checkpoint holds it.

    The first checkpoint of a turn stores the ingested messages as input that has not run yet
    (LangGraph keeps them in ``__start__``, and ``messages`` does not exist before the first turn
    ran): they are already the member's (acked) and are listed here at the end, so a reader never
    has to know where LangGraph keeps them.
    """

    member: str
    messages: tuple[BaseMessage, ...]
    #: the checkpoint read (``None``: the member has not ingested anything yet)
    checkpoint_id: str | None
    #: how many of ``messages`` are input of a step that has not run yet
    unrun: int = 0

    @property
    def team_messages(self) -> list[Message]:
        """The team messages the member ingested, in order, as stored envelopes."""
        out = []
        for m in self.messages:
            env = m.additional_kwargs.get("team_message") if m.type == "human" else None
            if env is None:
                continue
            try:
                out.append(Message.from_data(env))
            except InvalidInputError as exc:  # an envelope an older or newer version wrote oddly
                log.warning("conversation of %r: unreadable team message envelope skipped: %s", self.member, exc)
        return out

    @property
    def final_answer(self) -> str | None:
        """The member's last answer, if its conversation ends with one (not a tool call)."""
        last = self.messages[-1] if self.messages else None
        if not isinstance(last, AIMessage) or last.tool_calls:
            return None
        return last.text or None


def last_turn_inputs(messages: Sequence[BaseMessage]) -> list[Message]:
    """The team messages the last turn ingested: the last run of them in a conversation."""
    block: list[Message] = []
    for m in reversed(messages):
        env = m.additional_kwargs.get("team_message") if m.type == "human" else None
        if env is not None:
            block.append(Message.from_data(env))
        elif block:
            break
    return block[::-1]


def conversation_of(member: str, tup: Any) -> Conversation:
    """The :class:`Conversation` in a checkpoint tuple (``None``: no checkpoint yet)."""
    if tup is None:
        return Conversation(member, (), None)
    values = tup.checkpoint.get("channel_values") or {}
    done = list(values.get("messages") or [])
    start = values.get("__start__")
    unrun: list[BaseMessage] = []
    if isinstance(start, dict) and start.get("messages"):
        raw = start["messages"]
        unrun = convert_to_messages(raw if isinstance(raw, list) else [raw])
    return Conversation(member, tuple(done + unrun), tup.config["configurable"]["checkpoint_id"], len(unrun))


class TeamViews(TeamCore):
    """Inboxes, dead letters, statuses and conversations (a mixin of ``Team``)."""

    # -- inboxes and dead letters -------------------------------------------------------------------
    def _inbox(self, name: str) -> Plan[list[InboxEntry]]:
        validate_name(name)
        receipt = yield from plan_receive(self.member_saver, self.team_id, name)
        if receipt is None:
            return []
        sel = receipt.selection
        out = [InboxEntry(m, "pending") for m in sel.ready] + [InboxEntry(m, "held") for m in sel.held]
        out += [InboxEntry(m, "ingested") for m in sel.done]
        return out

    def inbox(self, name: str, *, all: bool = False) -> list[Message]:
        """Messages waiting for ``name``, in the order it will ingest them (``all=True`` also lists
        copies already ingested whose delete has not happened yet)."""
        return [e.message for e in self._run(self._inbox(name)) if all or e.state != "ingested"]

    def inbox_entries(self, name: str) -> list[InboxEntry]:
        """Every object in ``name``'s inbox with its state: pending, held or ingested."""
        return self._run(self._inbox(name))

    async def ainbox(self, name: str, *, all: bool = False) -> list[Message]:
        return [e.message for e in await self._arun(self._inbox(name)) if all or e.state != "ingested"]

    def _dead_letters(self) -> Plan[list[DeadLetter]]:
        roster, _ = yield from self._plan_roster()
        members = roster.members if roster is not None else {}
        found: list[tuple[str, str, str]] = []
        for where, prefix in (("dead", keys.team_dead_prefix(self.team_id)),
                              ("orphaned", keys.team_inbox_prefix(self.team_id))):  # fmt: skip
            for info in (yield from plan_list(prefix)):
                member = keys.decode_segment(info.key[len(prefix) :].split("/", 1)[0]) or "?"
                if where == "dead" or member not in members:
                    found.append((where, member, info.key))
        objs = (yield Batch(tuple(Get(k) for _, _, k in found))) if found else []
        out = []
        for (where, member, key), obj in zip(found, objs, strict=True):
            message = None
            if obj is not None:
                try:
                    message = decode_message(obj.body, key=key)
                except CorruptObjectError:
                    message = None
            out.append(DeadLetter(member, key, message, where))
        return out

    def dead_letters(self) -> list[DeadLetter]:
        """Messages for members that were removed: moved to ``dead/`` by :meth:`remove`, or sent
        to the old inbox after it (a sender racing the remove). Nothing is dropped."""
        return self._run(self._dead_letters())

    # -- status ---------------------------------------------------------------------------------------
    def status(self) -> list[MemberStatus]:
        """Each member's status, derived from the roster, its lease, its latest checkpoint and its
        inbox (no status is ever stored): spawning, working, waiting_input, idle, handed_over,
        stalled, failed, stopping, shutdown. A team that does not exist raises
        :class:`~langgraph_handoff.errors.UnknownTeamError` (not an empty list: a misspelt team id
        would look like a team with nobody on it)."""
        roster = self._run(self._plan_require())
        out = []
        for name in roster.names():
            thread = self.thread_id(name)
            head, _ = driver.run(self.store, self._plan_member_head(name))
            tup = (
                self.member_saver.get_tuple({"configurable": {"thread_id": thread}}) if head and head.records else None
            )
            pending = len(driver.run(self.store, plan_list(keys.team_inbox_prefix(self.team_id, name))))
            out.append(self._derive(roster.members[name], head, tup, pending))
        return out

    async def astatus(self) -> list[MemberStatus]:
        roster = await self._arun(self._plan_require())
        out = []
        for name in roster.names():
            thread = self.thread_id(name)
            head, _ = await driver.arun(self.store, self._plan_member_head(name))
            tup = (
                await self.member_saver.aget_tuple({"configurable": {"thread_id": thread}})
                if head and head.records
                else None
            )
            pending = len(await driver.arun(self.store, plan_list(keys.team_inbox_prefix(self.team_id, name))))
            out.append(self._derive(roster.members[name], head, tup, pending))
        return out

    def _derive(self, member: Member, head: Any, tup: Any, pending: int) -> MemberStatus:
        thread = self.thread_id(member.name)
        lease = lease_of(head, thread)
        return derive_status(
            member,
            lease,
            has_checkpoint=tup is not None,
            next_tasks=has_next(tup),
            interrupted=pending_interrupt(tup),
            pending=pending,
            now=self.clock(),
            last_checkpoint_id=tup.config["configurable"]["checkpoint_id"] if tup is not None else None,
        )

    # -- conversations --------------------------------------------------------------------------------
    def conversation(self, name: str) -> Conversation:
        """Member ``name``'s conversation (its latest checkpoint), from the very first one on:
        messages ingested by a turn that has not run yet included. An unknown name raises
        :class:`UnknownRecipientError`.

        >>> from langgraph_handoff import ObjectStoreSaver
        >>> from langgraph_handoff.teams import Team
        >>> team = Team(ObjectStoreSaver.from_url("memory://"), "t")
        >>> _ = team.spawn("alice", role="coder")
        >>> team.conversation("alice").messages
        ()
        """
        self._run(self._plan_check(name))
        tup = self.member_saver.get_tuple({"configurable": {"thread_id": self.thread_id(name)}})
        return conversation_of(name, tup)

    async def aconversation(self, name: str) -> Conversation:
        await self._arun(self._plan_check(name))
        tup = await self.member_saver.aget_tuple({"configurable": {"thread_id": self.thread_id(name)}})
        return conversation_of(name, tup)
