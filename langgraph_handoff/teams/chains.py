"""Why team conversations end: the chain every message carries, who owes whom an answer, and the
hop budget. Pure rules, no I/O (the worker and the outbox reducer apply them).

Two agents that answer each other can talk forever: an automatic reply alone cannot loop (it is
never answered automatically), but an agent that *explicitly* answers an automatic reply restarts
the exchange every round. Two rules end every conversation:

1. **An answer is not answered automatically.** A message that replies to one of ours
   (``reply_to``), or that was sent from a turn one of our messages triggered, is an answer: its
   recipient owes no automatic reply, unless the sender asked for one (``expects_reply=True``).
2. **A hop budget.** Every message carries its chain: the ``conversation`` it belongs to (the id
   of the message that started it) and its ``hop`` (0 for a message from outside the team; a
   message sent from a turn is one hop further than the furthest message that turn ingested).
   A message past ``max_hops`` is not delivered; the first one past it becomes a
   ``hop_budget_exceeded`` event for the lead (and for every outside requester the message descends
   from that waits for an answer). Anything an agent sends in reaction to that event is further
   still, and is dropped without another event, so the breaker itself cannot loop.

Rule 2 alone bounds every conversation; rule 1 makes the common ping-pong stop after one round
instead of at the budget.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ConfigDict

from langgraph_handoff._model import Model
from langgraph_handoff.teams.model import Message

__all__ = [
    "DEFAULT_MAX_HOPS",
    "HOP_BUDGET_EVENT",
    "RUNTIME_TYPES",
    "Chain",
    "HopBudgetExceeded",
    "asks_for_answer",
    "budget_verdict",
    "chain_of",
    "owes_reply",
]

#: the default hop budget of a conversation: 8 request/answer round trips between agents
DEFAULT_MAX_HOPS = 16
#: ``Message.data["event"]`` of the event a dropped message becomes
HOP_BUDGET_EVENT = "hop_budget_exceeded"
#: messages the runtime sends on its own (lifecycle, plan approval): delivered whatever their hop,
#: because an agent cannot make more of them than it makes turns of its own (which the budget
#: bounds). Automatic replies are *not* among them: they are what loops.
RUNTIME_TYPES = frozenset({"event", "plan_request", "shutdown_request", "shutdown_response"})


@dataclass(frozen=True)
class Chain:
    """Where a turn stands: the conversation it continues, its hop, and who triggered it.

    >>> c = Chain("m0", 3, {"alice": "m3"}, {"m0": "ops"})
    >>> c.next()
    {'conversation': 'm0', 'hop': 4, 'causes': {'alice': 'm3'}, 'origins': {'m0': 'ops'}}
    """

    conversation: str | None = None
    hop: int = 0
    #: sender -> id of its last message among those that triggered the turn
    causes: Mapping[str, str] = field(default_factory=dict)
    #: the outside requests (id -> requester) the turn's messages descend from: all of them, so a
    #: requester hears of a cut even when a batch mixed its conversation with another
    origins: Mapping[str, str] = field(default_factory=dict)

    def next(self) -> dict[str, Any]:
        """The chain fields of a message sent from this turn."""
        return {"conversation": self.conversation, "hop": self.hop + 1, "causes": dict(self.causes),
                "origins": dict(self.origins)}  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {"conversation": self.conversation, "hop": self.hop, "causes": dict(self.causes),
                "origins": dict(self.origins)}  # fmt: skip

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> Chain:
        """From :meth:`as_dict` (``None`` or ``{}``: a chain at hop 0, as for an old checkpoint)."""
        raw = raw or {}
        return cls(raw.get("conversation"), int(raw.get("hop") or 0), dict(raw.get("causes") or {}),
                   dict(raw.get("origins") or {}))  # fmt: skip


def chain_of(messages: Sequence[Message]) -> Chain:
    """The chain of a turn that ingests ``messages``: it continues the conversation furthest
    along (the highest hop; the first such message on a tie), so a batch never resets a count.

    >>> def m(i, hop, sender="a", conv=None):
    ...     return Message(id=i, team="t", sender=sender, to="b", content="", hop=hop, conversation=conv)
    >>> c = chain_of([m("x", 0), m("y", 4, "c", "root")])
    >>> (c.conversation, c.hop, dict(c.causes))
    ('root', 4, {'a': 'x', 'c': 'y'})
    >>> chain_of([m("x", 0)]).conversation    # a message from outside starts its own
    'x'
    """
    if not messages:
        return Chain()
    top = max(messages, key=lambda m: m.hop)  # max() keeps the first of equal hops
    causes: dict[str, str] = {}
    origins: dict[str, str] = {}
    for m in messages:
        causes[m.sender] = m.id
        origins.update(m.origins)
    return Chain(top.conversation_id, top.hop, causes, origins)


def owes_reply(message: Message, me: str, members: Collection[str]) -> bool:
    """Does ``me`` owe the sender of ``message`` an automatic reply (its final answer)?

    Never for messages the runtime generates or for automatic replies; never for an *answer* (it
    replies to something, or its turn was triggered by one of ``me``'s messages) unless its sender
    asked for one. An outside sender is owed one only if it asked (``Team.request``).

    >>> def m(**kw):
    ...     return Message(**{"id": "x", "team": "t", "sender": "a", "to": "b", "content": "", **kw})
    >>> owes_reply(m(), "b", {"a", "b"})                          # a new request
    True
    >>> owes_reply(m(causes={"b": "y"}), "b", {"a", "b"})         # sent from a turn b triggered
    False
    >>> owes_reply(m(reply_to="y"), "b", {"a", "b"})              # an explicit answer
    False
    >>> owes_reply(m(causes={"b": "y"}, expects_reply=True), "b", {"a", "b"})   # a follow-up question
    True
    >>> owes_reply(m(type="auto_reply", expects_reply=True), "b", {"a", "b"})
    False
    >>> owes_reply(m(sender="ops"), "b", {"a", "b"}), owes_reply(m(sender="ops", expects_reply=True), "b", {"b"})
    (False, True)
    """
    if message.sender == me or message.type == "auto_reply" or message.type in RUNTIME_TYPES:
        return False
    if message.type == "plan_response":
        return False
    if message.sender not in members:
        return message.expects_reply is True
    if message.expects_reply is not None:
        return message.expects_reply
    return message.reply_to is None and me not in message.causes


def asks_for_answer(to: str, chain: Chain, reply_to: str | None, expects_reply: bool | None) -> bool:
    """Will ``to`` owe an answer to a message sent from a turn at ``chain``? The sender's view of
    :func:`owes_reply`, from the same facts, so a member waits only for answers that will come.

    >>> asks_for_answer("b", Chain("c", 1, {"b": "m1"}), None, None)   # answering b
    False
    >>> asks_for_answer("b", Chain("c", 1, {"ops": "m1"}), None, None)  # asking b
    True
    """
    if expects_reply is not None:
        return expects_reply
    return reply_to is None and to not in chain.causes


Verdict = Literal["deliver", "event", "drop"]


def budget_verdict(message: Message, max_hops: int) -> Verdict:
    """What delivery does with ``message``: deliver it, turn it into a budget event (the first hop
    past the budget), or drop it (further still: a reaction to that event).

    >>> def m(hop, kind="message"):
    ...     return Message(id="x", team="t", sender="a", to="b", content="", hop=hop, type=kind)
    >>> [budget_verdict(m(h), 4) for h in (4, 5, 6)]
    ['deliver', 'event', 'drop']
    >>> budget_verdict(m(9, "event"), 4)
    'deliver'
    """
    if message.type in RUNTIME_TYPES or message.hop <= max_hops:
        return "deliver"
    return "event" if message.hop == max_hops + 1 else "drop"


class HopBudgetExceeded(Model):
    """The typed record of a conversation cut by the hop budget (``Message.data`` of the event;
    read it back with :meth:`from_message`).

    >>> e = HopBudgetExceeded(conversation="m0", max_hops=4, hop=5, sender="a", to="b", message_id="x",
    ...                       message_type="auto_reply", content="thanks!")
    >>> HopBudgetExceeded.from_message(Message(id="e", team="t", sender="a", to="lead", content="",
    ...                                        type="event", data=e.as_data())).to
    'b'
    """

    model_config = ConfigDict(frozen=True)

    event: Literal["hop_budget_exceeded"] = "hop_budget_exceeded"
    conversation: str
    max_hops: int
    hop: int
    sender: str
    to: str
    message_id: str
    message_type: str
    content: str

    def as_data(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def describe(self) -> str:
        return (
            f"conversation #{self.conversation} reached the team's hop budget ({self.max_hops}): {self.sender}'s "
            f"{self.message_type.replace('_', ' ')} to {self.to} (#{self.message_id}, hop {self.hop}) was not "
            "delivered, and nothing sent in reaction to it will be. If the exchange was useful, raise "
            "Team(max_hops=...); if the agents were answering each other's answers, tell them not to."
        )

    @classmethod
    def from_message(cls, message: Message) -> HopBudgetExceeded | None:
        """The record an event message carries, or ``None`` if it is another kind of message."""
        if message.type != "event" or (message.data or {}).get("event") != HOP_BUDGET_EVENT:
            return None
        return cls.from_data(message.data)
