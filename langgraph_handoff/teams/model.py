"""What a team stores: members on a roster, and messages. Pure data, no I/O.

* :class:`Member` and :class:`Roster`: who is on the team. The roster is one object moved by
  compare-and-swap; it changes only on spawn, remove, a shutdown request and a failure, never on
  every turn (statuses are *derived*, see :mod:`langgraph_handoff.teams.status`).
* :class:`Message`: one immutable, create-only object per message. Its ``id`` names the object, so
  a retried send hits the same key (the store answers "already there") and never makes a second.

Ids are deterministic where the sender can be: an agent's send is named by its tool call, an
external send by its ``idempotency_key``. Only an external send without a key gets a random id.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from langchain_core.messages import HumanMessage
from pydantic import ConfigDict, Field

from langgraph_handoff._format import envelope
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff._model import Model
from langgraph_handoff.errors import CorruptObjectError, InvalidInputError

__all__ = [
    "EVENT_TYPES",
    "Member",
    "MemberState",
    "Message",
    "MessageType",
    "Roster",
    "decode_message",
    "decode_roster",
    "encode_message",
    "encode_roster",
    "member_thread",
    "message_id",
    "next_order",
    "validate_name",
]

MessageType = Literal[
    "message",
    "broadcast",
    "auto_reply",
    "event",
    "shutdown_request",
    "shutdown_response",
    "plan_request",
    "plan_response",
]
#: Messages the runtime generates (and automatic replies). None of them is ever answered
#: automatically; what else is not, and why every conversation ends: :mod:`teams.chains`.
EVENT_TYPES = frozenset(
    {"auto_reply", "event", "shutdown_request", "shutdown_response", "plan_request", "plan_response"}
)
#: What the roster records about a member (its *status* is derived from this plus its lease and
#: checkpoints): ``active``, ``stop_requested`` (shutdown asked for), ``failed`` (poison turn).
MemberState = Literal["active", "stop_requested", "failed"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def validate_name(name: object, what: str = "member name") -> str:
    """Member and team names: 1-63 characters of ``[A-Za-z0-9_.-]``, starting alphanumeric. They
    appear in tool schemas, in message headers the models read, and in thread ids.

    >>> validate_name("alice")
    'alice'
    >>> validate_name("no spaces")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.InvalidInputError: invalid member name 'no spaces': use 1-63 characters of [A-Za-z0-9_.-], starting with a letter or digit
    """
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidInputError(
            f"invalid {what} {name!r}: use 1-63 characters of [A-Za-z0-9_.-], starting with a letter or digit"
        )
    return name


def member_thread(team_id: str, name: str) -> str:
    """The LangGraph thread id of a member in its team's member saver (``Team.member_saver``):
    its conversation is its memory across activations."""
    return f"{team_id}/{name}"


def message_id(*parts: str) -> str:
    """A key-safe, deterministic message id from what identifies one send.

    >>> message_id("t", "lead", "alice", "call-1") == message_id("t", "lead", "alice", "call-1")
    True
    >>> len(message_id("x"))
    20
    """
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:20]


_order_lock = threading.Lock()
_last_order = 0


def next_order(clock: Callable[[], float] = time.time) -> int:
    """A sender-local, strictly increasing order stamp (nanoseconds of ``clock``). It orders one
    process's sequential external sends to a recipient even if the wall clock steps back; stamps of
    different senders are never compared for correctness (clock skew between them is harmless)."""
    global _last_order
    with _order_lock:
        _last_order = max(_last_order + 1, int(clock() * 1e9))
        return _last_order


class Member(Model):
    """One teammate on the roster."""

    model_config = ConfigDict(frozen=True)

    name: str
    role: str
    description: str = ""
    state: MemberState = "active"
    #: why the roster state changed (the failure, who asked for the shutdown)
    reason: str = ""
    spawned_at: float = 0.0
    #: the pending shutdown request, ``{"id": message id, "sender": name}`` (state stop_requested)
    stop_request: dict[str, str] | None = None
    #: new at every spawn: a re-spawned name starts fresh sequence numbers at its recipients
    incarnation: str = Field(default_factory=lambda: secrets.token_hex(4))
    #: the last unfinished step an operator discarded (``Team.discard``): checkpoint, messages, why
    discard: dict[str, Any] | None = None
    #: where the member's conversation lives: ``"team"``, the team's own key space (every member
    #: spawned since 0.3), or ``"root"``: spawned by 0.2, whose conversation may still be the root
    #: thread ``"{team}/{name}"`` until a worker or ``Team.upgrade`` moves it (``teams.upgrade``)
    space: Literal["root", "team"] = "root"


class Roster(Model):
    """Every member of one team. Stored as one object, changed only by compare-and-swap."""

    model_config = ConfigDict(frozen=True)

    team_id: str
    members: dict[str, Member] = Field(default_factory=dict)
    #: the lead: default recipient of lifecycle events (a failed member, a shutdown response)
    lead: str | None = None
    #: changes on every write, so a recreated roster never repeats an ETag (ABA)
    nonce: str = Field(default_factory=lambda: secrets.token_hex(8))

    def names(self) -> list[str]:
        return sorted(self.members)


class Message(Model):
    """One message between teammates (or from outside the team), as stored.

    ``seq`` is dense per (sender incarnation, recipient) for sends that come from an agent's
    outbox; the recipient ingests them in ``seq`` order and remembers the highest one for good, so
    a re-sent old message is never ingested twice. External sends have no ``seq``: they are ordered
    by ``order`` (the sender's monotonic stamp) and deduplicated by id within a window.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    team: str
    sender: str
    to: str
    content: str
    type: MessageType = "message"
    reply_to: str | None = None
    seq: int | None = None
    #: ``{sender}@{incarnation}``: the stream ``seq`` counts in (None for external senders)
    stream: str | None = None
    order: int = 0
    created_at: float = 0.0
    idempotency_key: str | None = None
    #: the sender's lease epoch when its outbox was committed (diagnostics)
    sender_epoch: int | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    #: the W3C ``traceparent`` of the span that sent it (OpenTelemetry), so that the turn that
    #: ingests it links to the sender's: one story across workers. Stored only when set.
    traceparent: str | None = None
    # The chain (``teams.chains``). Messages stored before these fields existed read as the start
    # of their own conversation at hop 0, owing what the rules owed then: backward compatible,
    # no format step (an older reader ignores them).
    #: the id of the message that started the conversation (``None``: this one did)
    conversation: str | None = None
    #: turns between the start of the conversation and this message (0: sent from outside)
    hop: int = 0
    #: the messages whose turn sent this one, sender -> id (an answer is not answered automatically)
    causes: dict[str, str] = Field(default_factory=dict)
    #: does the sender want an answer? ``None``: derived (a new request yes, an answer no)
    expects_reply: bool | None = None
    #: the outside requests this message descends from that wait for an answer (``Team.request``):
    #: request id -> requester. Told if the conversation is cut by the hop budget.
    origins: dict[str, str] = Field(default_factory=dict)

    @property
    def conversation_id(self) -> str:
        """The conversation this message belongs to (its own id if it started one)."""
        return self.conversation or self.id

    def header(self) -> str:
        """The provenance line a model reads before the content.

        >>> Message(id="m1", team="t", sender="lead", to="a", content="hi", reply_to="m0").header()
        '[message from lead (#m1, reply to #m0)]'
        """
        kind = "" if self.type in ("message", "broadcast") else f" {self.type.replace('_', ' ')}"
        reply = f", reply to #{self.reply_to}" if self.reply_to else ""
        return f"[{kind.strip() + ' ' if kind else ''}message from {self.sender} (#{self.id}{reply})]"

    def as_human_message(self) -> HumanMessage:
        """How the message enters the recipient's conversation: provenance in-band (the model sees
        who wrote it) and the whole envelope in ``additional_kwargs["team_message"]``."""
        return HumanMessage(
            content=f"{self.header()}\n{self.content}",
            name=self.sender,
            id=f"team-{self.id}",
            additional_kwargs={"team_message": self.model_dump(mode="json", exclude={"traceparent"})},
        )


# --------------------------------------------------------------------------------------------------
# Stored form: versioned, checksummed envelopes like every other object of the package
# --------------------------------------------------------------------------------------------------


def encode_roster(roster: Roster) -> bytes:
    return envelope.encode_msgpack(Kind.TEAM_ROSTER, roster.model_dump(mode="json"))


def decode_roster(body: bytes, *, key: str) -> Roster:
    obj, _ = envelope.decode_msgpack(body, key=key, expect=Kind.TEAM_ROSTER)
    try:
        return Roster.model_validate(obj)
    except Exception as exc:  # noqa: BLE001 - pydantic's error, reported as a corrupt object
        raise CorruptObjectError(key, f"not a team roster: {exc}") from None


def encode_message(message: Message) -> bytes:
    data = message.model_dump(mode="json")
    if data.get("traceparent") is None:
        data.pop("traceparent", None)  # stored as before the field existed
    return envelope.encode_msgpack(Kind.TEAM_MESSAGE, data)


def decode_message(body: bytes, *, key: str) -> Message:
    obj, _ = envelope.decode_msgpack(body, key=key, expect=Kind.TEAM_MESSAGE)
    try:
        return Message.model_validate(obj)
    except Exception as exc:  # noqa: BLE001
        raise CorruptObjectError(key, f"not a team message: {exc}") from None
