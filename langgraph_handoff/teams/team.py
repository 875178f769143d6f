"""``Team``: the roster and the mailboxes of one agent team, on the saver's store.

Every operation is written once as a plan (a generator of store operations, see
:mod:`langgraph_handoff.checkpoint.driver`) and run by a sync or an async front end.

Requests (measured in ``tests/teams/test_teams.py`` with a counting store):

==================  =========================================================================
``send``            1 create-only PUT (the roster is cached; an unknown name re-reads it once)
``broadcast``       1 PUT per recipient, in parallel
receive (worker)    1 LIST of the inbox; if it is not empty, 1 GET per message, in one round
                    trip (the lease holder knows its ack record from the head it last wrote)
ack                 0: it rides the member's checkpoint put (``teams.acks``)
clean-up            1 DeleteObjects per 1,000 ingested messages, after the ack committed
``spawn``/``remove``  1 GET + 1 CAS of the roster (``remove`` also moves pending messages to
                    ``dead/``)
``status``          1 GET of the roster, then per member: the checkpoint read + 1 LIST
==================  =========================================================================
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any, Literal

from langgraph_handoff import telemetry
from langgraph_handoff._format import keys
from langgraph_handoff.checkpoint.driver import Batch, Plan, Sleep
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.errors import (
    ConflictError,
    CorruptObjectError,
    InvalidInputError,
    LangGraphHandoffError,
    MemberExistsError,
    MemberStateError,
    PreconditionFailedError,
    UnknownOutcomeError,
    UnknownRecipientError,
)
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.stores.base import Delete, Get, Put
from langgraph_handoff.teams.acks import DEFAULT_WINDOW, AckState
from langgraph_handoff.teams.chains import DEFAULT_MAX_HOPS, Chain, HopBudgetExceeded, budget_verdict
from langgraph_handoff.teams.model import (
    Member,
    Message,
    MessageType,
    Roster,
    decode_message,
    encode_message,
    encode_roster,
    message_id,
    next_order,
    validate_name,
)
from langgraph_handoff.teams.receiving import Receipt, plan_delete_ingested, plan_receive
from langgraph_handoff.teams.receiving import plan_list as _plan_list
from langgraph_handoff.teams.requests import TeamRequests, check_wait
from langgraph_handoff.teams.status import has_next
from langgraph_handoff.teams.upgrade import MemberMove, plan_move_member
from langgraph_handoff.teams.views import DeadLetter, InboxEntry, TeamViews, conversation_of, last_turn_inputs

__all__ = ["DeadLetter", "InboxEntry", "KeyedStatus", "Receipt", "Team"]

#: what became of a message sent with an idempotency key (:meth:`Team.keyed_status`)
KeyedStatus = Literal["waiting", "ingested"]

log = logging.getLogger("langgraph_handoff.teams")

#: attempts of a create-only send whose outcome was unknown (RGW answers a lost race with a 500)
_SEND_ATTEMPTS = 6
_ROSTER_ATTEMPTS = 12


def _backoff(attempt: int) -> float:
    return min(0.02 * 2.0**attempt, 1.0)


class Team(TeamViews, TeamRequests):
    """The roster and mailboxes of one team, on ``saver``'s store.

    Each member's conversation (its memory across activations) is the LangGraph thread
    ``"{team_id}/{name}"`` of :attr:`member_saver`: a saver on the team's own key space
    (``teams/{TM}/members/``), which no thread id passed to ``saver`` reaches. The roster and one
    create-only object per message live under ``teams/`` too.

    >>> from langgraph_handoff import ObjectStoreSaver
    >>> team = Team(ObjectStoreSaver.from_url("memory://"), "release-42")
    >>> team.spawn("lead", role="lead").name
    'lead'
    >>> _ = team.spawn("alice", role="coder", description="fixes flaky tests")
    >>> team.roster_names()
    ['alice', 'lead']
    >>> msg = team.send("alice", "ci flakes on RGW; fix it", sender="lead")
    >>> [m.content for m in team.inbox("alice")]
    ['ci flakes on RGW; fix it']
    >>> team.send("alcie", "typo", sender="lead")
    Traceback (most recent call last):
    ...
    langgraph_handoff.errors.UnknownRecipientError: team 'release-42' has no member 'alcie'. Valid recipients: alice, lead.
    """

    def __init__(
        self,
        saver: ObjectStoreSaver,
        team_id: str,
        *,
        window: float = DEFAULT_WINDOW,
        max_hops: int = DEFAULT_MAX_HOPS,
        clock: Callable[[], float] = time.time,
    ):
        if isinstance(max_hops, bool) or not isinstance(max_hops, int) or max_hops < 1:
            raise InvalidInputError(f"Team(max_hops={max_hops!r}): use an integer of at least 1")
        self.saver = saver
        self.store = saver.store
        self.team_id = validate_name(team_id, "team id")
        self.member_saver = saver.under(keys.team_members_prefix(self.team_id))
        #: how long ingested external message ids are remembered (see :mod:`teams.acks`)
        self.window = float(window)
        #: the hop budget of a conversation (:mod:`teams.chains`): messages further than this many
        #: turns from where the conversation started are not delivered. Give every process the same.
        self.max_hops = max_hops
        self.clock = clock
        self._roster: Roster | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Team({self.team_id!r} on {self.store!r})"

    # -- plumbing ------------------------------------------------------------------------------------
    # -- the roster ---------------------------------------------------------------------------------
    def _plan_change(self, decide: Callable[[Roster], Roster | None]) -> Plan[Roster]:
        """Read, decide, compare-and-swap the roster; ``decide`` returns ``None`` for no change."""
        key = keys.team_roster_key(self.team_id)
        for attempt in range(_ROSTER_ATTEMPTS):
            current, etag = yield from self._plan_roster()
            new = decide(current if current is not None else Roster(team_id=self.team_id))
            if new is None:
                return current if current is not None else Roster(team_id=self.team_id)
            new = new.model_copy(update={"nonce": secrets.token_hex(8)})
            body = encode_roster(new)
            try:
                yield Put(key, body, if_match=etag) if etag is not None else Put(key, body, if_none_match=True)
            except (PreconditionFailedError, UnknownOutcomeError):
                landed, _ = yield from self._plan_roster()
                if landed is not None and landed.nonce == new.nonce:
                    return new  # our write landed after all
                yield Sleep(_backoff(attempt))
                continue
            self._remember(new)
            return new
        raise ConflictError(f"the roster of team {self.team_id!r} kept changing under us; retry")

    def _spawn(self, name: str, role: str, description: str, lead: bool, exist_ok: bool) -> Plan[Member]:
        name = validate_name(name)
        if not isinstance(role, str) or not role:
            raise InvalidInputError(f"spawn({name!r}) needs a role: the name of the graph that runs this member")
        member = Member(name=name, role=role, description=description, spawned_at=self.clock(), space="team")

        def decide(roster: Roster) -> Roster | None:
            existing = roster.members.get(name)
            if existing is not None:
                if exist_ok and existing.role == role:
                    return None  # already there, as asked: the roster stays as it is
                raise MemberExistsError(self.team_id, name, existing.role if exist_ok else None)
            return roster.model_copy(update={
                "members": {**roster.members, name: member},
                "lead": name if lead or roster.lead is None else roster.lead,
            })  # fmt: skip

        roster = yield from self._plan_change(decide)
        return roster.members[name]

    def spawn(
        self, name: str, *, role: str, description: str = "", lead: bool = False, exist_ok: bool = False
    ) -> Member:
        """Add a member. ``role`` names the graph a :class:`TeamWorker` runs it with. The first
        member (or one spawned with ``lead=True``) is the lead: it gets lifecycle events.

        A name the roster holds raises :class:`~langgraph_handoff.errors.MemberExistsError`, unless
        ``exist_ok=True`` and it has this ``role``: then the member as it is is returned and
        nothing changes (its description, lead and state stay), so a setup script can run again.
        The same name with another role is another member, and still an error."""
        return self._run(self._spawn(name, role, description, lead, exist_ok))

    async def aspawn(
        self, name: str, *, role: str, description: str = "", lead: bool = False, exist_ok: bool = False
    ) -> Member:
        return await self._arun(self._spawn(name, role, description, lead, exist_ok))

    def _set_state(
        self, name: str, state: str, reason: str, stop_request: dict[str, str] | None = None
    ) -> Plan[Member]:
        validate_name(name)

        def decide(roster: Roster) -> Roster | None:
            member = roster.members.get(name)
            if member is None:
                raise UnknownRecipientError(self.team_id, name, roster.names())
            if member.state == state and member.stop_request == stop_request:
                return None
            changed = Member(**{**member.model_dump(), "state": state, "reason": reason, "stop_request": stop_request})
            return roster.model_copy(update={"members": {**roster.members, name: changed}})

        roster = yield from self._plan_change(decide)
        return roster.members[name]

    def mark_failed(self, name: str, reason: str) -> Member:
        """Record that ``name``'s turns keep failing (the worker calls this; a human can too)."""
        return self._run(self._set_state(name, "failed", reason))

    def revive(self, name: str) -> Member:
        """Put a failed or stopped member back to work (after fixing what made it fail). Its
        unfinished step runs again; if that step is what fails, :meth:`discard` it instead."""
        return self._run(self._set_state(name, "active", ""))

    async def arevive(self, name: str) -> Member:
        return await self._arun(self._set_state(name, "active", ""))

    def require(self, name: str | None = None) -> Roster:
        """Check that the team exists on the store (and has member ``name``): typed errors that say
        "no team 'x'" or "no member 'x'" instead of an empty answer."""
        return self._run(self._plan_require(name))

    def _plan_discard_step(self, name: str, reason: str, by: str, tup: Any) -> Plan[Member]:
        validate_name(name)
        roster = yield from self._plan_require(name)
        if roster.members[name].state != "failed" or tup is None or not has_next(tup):
            raise MemberStateError(self.team_id, name, roster.members[name].state)
        ingested = [m.id for m in last_turn_inputs(conversation_of(name, tup).messages)]
        record = {"checkpoint": tup.config["configurable"]["checkpoint_id"], "messages": ingested, "by": by,
                  "reason": reason, "at": self.clock()}  # fmt: skip

        def decide(roster: Roster) -> Roster:
            member = roster.members.get(name)
            if member is None:
                raise UnknownRecipientError(self.team_id, name, roster.names())
            why = f"step {record['checkpoint']} discarded by {by}: {reason}"
            changed = Member(**{**member.model_dump(), "state": "active", "reason": why, "discard": record})
            return roster.model_copy(update={"members": {**roster.members, name: changed}})

        roster = yield from self._plan_change(decide)
        return roster.members[name]

    def discard(self, name: str, *, reason: str, by: str = "operator") -> Member:
        """Drop the unfinished step of a failed member (a poison message: a turn that fails every
        time it runs) and put the member back to work. Recorded in the roster (``Member.discard``,
        and ``reason``); the worker that takes the member ends the step without running it, removes
        the messages that step had ingested from the conversation, adds a note saying what was
        dropped and why, and sends the lead an event. Raises
        :class:`~langgraph_handoff.errors.MemberStateError` (an ``InvalidInputError``) if the member
        is not failed or has no unfinished step."""
        self.upgrade([validate_name(name)])  # a member of 0.2 has its unfinished step at the root until moved
        tup = self.member_saver.get_tuple({"configurable": {"thread_id": self.thread_id(name)}})
        return self._run(self._plan_discard_step(name, reason, by, tup))

    async def adiscard(self, name: str, *, reason: str, by: str = "operator") -> Member:
        await self.aupgrade([validate_name(name)])
        tup = await self.member_saver.aget_tuple({"configurable": {"thread_id": self.thread_id(name)}})
        return await self._arun(self._plan_discard_step(name, reason, by, tup))

    # -- moving conversations of 0.2 out of the user's thread ids (teams.upgrade) ---------------------
    def _plan_upgrade(self, names: Sequence[str] | None) -> Plan[list[MemberMove]]:
        roster = yield from self._plan_require()
        for name in names or ():
            if validate_name(name) not in roster.members:
                raise UnknownRecipientError(self.team_id, name, roster.names())
        moves: list[MemberMove] = []
        for name in names if names is not None else roster.names():
            if roster.members[name].space == "team":
                continue
            try:
                moves.append((yield from plan_move_member(self, name)))
            except LangGraphHandoffError as exc:  # one member's damage: reported, the others go on
                log.error("team %s: could not move %r's conversation: %s", self.team_id, name, exc)
                moves.append(MemberMove(name, "failed", detail=f"{type(exc).__name__}: {exc}"))
        settled = {m.member for m in moves if m.settled}

        def decide(roster: Roster) -> Roster | None:
            changed = {n: m.model_copy(update={"space": "team"}) for n, m in roster.members.items()
                       if n in settled and m.space != "team"}  # fmt: skip
            return roster.model_copy(update={"members": {**roster.members, **changed}}) if changed else None

        if settled:
            yield from self._plan_change(decide)
        return moves

    def upgrade(self, names: Sequence[str] | None = None) -> list[MemberMove]:
        """Move the conversations of members spawned by 0.2 (``Member.space == "root"``; default:
        every such member, or those of ``names``) from the root thread ``"{team}/{name}"``, where
        any user's thread id could reach them, into the team's space, and record the move on the
        roster (:mod:`langgraph_handoff.teams.upgrade` has how, and why a kill or a worker of
        the old release at any point loses nothing). Workers do it themselves for a member they
        are about to take; this does it for all at once (``langgraph-handoff team upgrade``).
        Idempotent. Returns one :class:`~langgraph_handoff.teams.upgrade.MemberMove` per member
        considered: a member still served by a worker of the old release is ``"held"``."""
        return self._run(self._plan_upgrade(names))

    async def aupgrade(self, names: Sequence[str] | None = None) -> list[MemberMove]:
        return await self._arun(self._plan_upgrade(names))

    def _remove(self, name: str) -> Plan[list[str]]:
        validate_name(name)

        def decide(roster: Roster) -> Roster | None:
            if name not in roster.members:
                return None
            rest = {n: m for n, m in roster.members.items() if n != name}
            lead = roster.lead if roster.lead != name else None
            return roster.model_copy(update={"members": rest, "lead": lead})

        yield from self._plan_change(decide)
        return (yield from self._plan_bury(name))

    def _plan_bury(self, name: str) -> Plan[list[str]]:
        """Move ``name``'s pending messages to ``dead/``: copy create-only, then delete. Messages
        its last turn already ingested (acked, delete pending) are deleted, not buried. Stops if
        the name is back on the roster (a spawn raced the remove): those messages are its."""
        moved: list[str] = []
        prefix = keys.team_inbox_prefix(self.team_id, name)
        dead = keys.team_dead_prefix(self.team_id, name)
        listed = yield from _plan_list(prefix)
        if not listed:
            return moved
        thread = self.thread_id(name)
        head, _ = yield from self._plan_member_head(name)
        ack = AckState.of(head.meta if head is not None else None, thread)
        for info in listed:
            roster, _ = yield from self._plan_roster()
            if roster is not None and name in roster.members:
                break
            obj = yield Get(info.key)
            if obj is None:
                continue
            try:
                consumed = ack.consumed(decode_message(obj.body, key=info.key))
            except CorruptObjectError:
                consumed = False  # unreadable: kept as a dead letter, reported as such
            if not consumed:
                target = dead + info.key[len(prefix) :]
                with contextlib.suppress(PreconditionFailedError):  # moved before: a retried remove
                    yield Put(target, obj.body, if_none_match=True)
                moved.append(target)
            yield Delete(info.key)
        return moved

    def remove(self, name: str) -> list[str]:
        """Take ``name`` off the roster. Its pending messages are kept as dead letters (returned:
        their new keys) and reported by :meth:`dead_letters`; later sends to it are refused."""
        return self._run(self._remove(name))

    async def aremove(self, name: str) -> list[str]:
        return await self._arun(self._remove(name))

    def members(self, *, refresh: bool = False) -> list[Member]:
        roster = self.roster(refresh=refresh)
        return [roster.members[n] for n in roster.names()]

    def roster_names(self, *, refresh: bool = False) -> list[str]:
        return self.roster(refresh=refresh).names()

    def check_recipient(self, name: str) -> Member:
        """The member ``name``, or :class:`UnknownRecipientError` naming the valid ones."""
        return self._run(self._plan_check(name))

    # -- sending ------------------------------------------------------------------------------------
    def _message(
        self,
        to: str,
        content: str,
        sender: str,
        reply_to: str | None,
        idempotency_key: str | None,
        kind: MessageType,
        data: dict[str, Any] | None,
        chain: Chain | None = None,
        expects_reply: bool | None = None,
        asks: bool = False,
    ) -> Message:
        if not isinstance(content, str):
            raise InvalidInputError(f"a team message's content is text, got {type(content).__name__}")
        if not isinstance(sender, str) or not sender:
            raise InvalidInputError("send(..., sender=...) needs the sender's name (a member, or who is outside)")
        if idempotency_key is not None and (not isinstance(idempotency_key, str) or not idempotency_key):
            raise InvalidInputError(f"an idempotency key is a non-empty string, got {idempotency_key!r}")
        if reply_to is not None and not isinstance(reply_to, str):
            raise InvalidInputError(f"reply_to is a message id (a string), got {reply_to!r}")
        try:
            json.dumps(data or {})
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"a message's data must be JSON (it is stored as such): {exc}") from None
        if expects_reply is not None and not isinstance(expects_reply, bool):
            raise InvalidInputError(f"expects_reply is True, False or None, got {expects_reply!r}")
        mid = self.keyed_id(to, sender, idempotency_key) if idempotency_key is not None else secrets.token_hex(10)
        fields = chain.next() if chain is not None else {"origins": {mid: sender} if asks else {}}
        return Message(id=mid, team=self.team_id, sender=sender, to=to, content=content, type=kind,
                       reply_to=reply_to, order=next_order(self.clock), created_at=self.clock(),
                       idempotency_key=idempotency_key, data=data or {}, expects_reply=expects_reply,
                       traceparent=telemetry.current_traceparent(), **fields)  # fmt: skip

    def keyed_id(self, to: str, sender: str, idempotency_key: str) -> str:
        """The id :meth:`send` gives a message with an idempotency key (known before sending)."""
        return message_id(self.team_id, "ext", sender, to, idempotency_key)

    def _plan_keyed_status(self, to: str, sender: str, idempotency_key: str) -> Plan[KeyedStatus | None]:
        yield from self._plan_check(to)
        message_id = self.keyed_id(to, sender, idempotency_key)
        if (yield Get(keys.team_inbox_key(self.team_id, to, message_id))) is not None:
            return "waiting"
        head, _ = yield from self._plan_member_head(to)
        ack = AckState.of(head.meta if head is not None else None, self.thread_id(to))
        return "ingested" if message_id in ack.recent else None

    def keyed_status(self, to: str, *, sender: str, idempotency_key: str) -> KeyedStatus | None:
        """What became of the message ``sender`` sent ``to`` with ``idempotency_key``:
        ``"waiting"`` in the inbox, ``"ingested"`` by the member (remembered for ``window``
        seconds after), or ``None``: never sent, or ingested longer ago than that. 2 GETs at most
        (and the roster's, when this object has not read it yet).
        A send with the same key while it is ``"waiting"`` or ``"ingested"`` stores nothing new
        for the member (``langgraph-handoff team send --key`` says so).

        >>> team = Team(ObjectStoreSaver.from_url("memory://"), "crew")
        >>> _ = team.spawn("alice", role="coder")
        >>> team.keyed_status("alice", sender="ops", idempotency_key="k1") is None
        True
        >>> _ = team.send("alice", "hi", sender="ops", idempotency_key="k1")
        >>> team.keyed_status("alice", sender="ops", idempotency_key="k1")
        'waiting'
        """
        return self._run(self._plan_keyed_status(to, sender, idempotency_key))

    async def akeyed_status(self, to: str, *, sender: str, idempotency_key: str) -> KeyedStatus | None:
        """Async twin of :meth:`keyed_status`."""
        return await self._arun(self._plan_keyed_status(to, sender, idempotency_key))

    def _plan_put_message(self, message: Message, *, dead: bool = False, key: str | None = None) -> Plan[Message]:
        """Store one message create-only. "Already there" means a retry of this very send."""
        if key is None:
            key = (
                keys.team_dead_prefix(self.team_id, message.to) + message.id
                if dead
                else keys.team_inbox_key(self.team_id, message.to, message.id)
            )
        body = encode_message(message)
        for attempt in range(_SEND_ATTEMPTS):
            try:
                yield Put(key, body, if_none_match=True)
                return message
            except PreconditionFailedError:
                return message  # stored by an earlier attempt of the same send
            except UnknownOutcomeError:
                yield Sleep(_backoff(attempt))  # may have landed: the same create-only PUT settles it
        raise UnknownOutcomeError(key, f"send to {message.to!r} did not settle in {_SEND_ATTEMPTS} attempts")

    def _send(self, to: str, content: str, sender: str, reply_to: str | None, idempotency_key: str | None,
              kind: MessageType, data: dict[str, Any] | None, *, chain: Chain | None = None,
              expects_reply: bool | None = None) -> Plan[Message]:  # fmt: skip
        """Send from outside a turn (``chain=None``: the start of a conversation; an outside sender
        that asks for an answer is an origin) or from inside one (``chain``: budget-checked)."""
        yield from self._plan_check(to)
        with self._lock:
            members = self._roster.members if self._roster is not None else {}
        asks = bool(expects_reply) and chain is None and sender not in members  # an outside request
        message = self._message(to, content, sender, reply_to, idempotency_key, kind, data, chain, expects_reply,
                                asks)  # fmt: skip
        if chain is None:
            stored = yield from self._plan_put_message(message)
            telemetry.counter(telemetry.M_TEAM_MESSAGES, 1, {telemetry.EVENT: "sent"})
            return stored
        with self._lock:
            roster = self._roster  # _plan_check left it current for ``to``: no second roster read
        yield from self._plan_deliver([message], roster=roster)
        return message

    def _plan_request(self, to: str, content: str, sender: str, idempotency_key: str | None, timeout: float,
                      poll: float) -> Plan[Message]:  # fmt: skip
        check_wait(timeout, poll)
        request = yield from self._send(to, content, sender, None, idempotency_key, "message", None,
                                        expects_reply=True)  # fmt: skip
        return (yield from self._plan_wait_reply(to, sender, request.id, timeout, poll))

    def request(self, to: str, content: str, *, sender: str, timeout: float = 60.0,
                idempotency_key: str | None = None, poll: float = 0.1) -> Message:  # fmt: skip
        """Send ``content`` to member ``to`` and wait for its answer (its final answer of the turn
        that handled the request, or of a later turn if it asked teammates first). For callers
        outside the team; an agent never waits inside its turn (it uses ``send_message``).

        Returns the answer (a :class:`Message` with ``reply_to`` = the request's id). Raises
        :class:`~langgraph_handoff.errors.ReplyTimeoutError` after ``timeout`` seconds (the answer
        is kept: :meth:`wait_reply` collects it later) and
        :class:`~langgraph_handoff.errors.HopBudgetExceededError` if the conversation was cut by
        the hop budget. With an ``idempotency_key`` a retried request is the same message.
        """
        return self._run(self._plan_request(to, content, sender, idempotency_key, timeout, poll))

    async def arequest(self, to: str, content: str, *, sender: str, timeout: float = 60.0,
                       idempotency_key: str | None = None, poll: float = 0.1) -> Message:  # fmt: skip
        """Async twin of :meth:`request` (the polls sleep on the event loop)."""
        return await self._arun(self._plan_request(to, content, sender, idempotency_key, timeout, poll))

    def send(
        self,
        to: str,
        content: str,
        *,
        sender: str,
        reply_to: str | None = None,
        idempotency_key: str | None = None,
        kind: MessageType = "message",
        data: dict[str, Any] | None = None,
        expects_reply: bool | None = None,
        chain: Chain | None = None,
    ) -> Message:
        """Send ``content`` to member ``to``: one create-only PUT. Returns the stored message.

        A retry with the same ``idempotency_key`` is harmless: it hits the same object, and if the
        first copy was already ingested and deleted, the recipient still drops the repeat (it
        remembers ingested ids for ``window`` seconds). Without a key every call is a new message.
        Messages from one sender to one recipient are ingested in the order the sends returned.

        The message starts a conversation (hop 0). A sender outside the team gets no answer unless
        it asks for one (``expects_reply=True``; then collect it with :meth:`wait_reply`, or use
        :meth:`request`, which does both). A send from inside a member's turn (a team tool, a
        worker asking for approval) passes the turn's ``chain`` instead: the message continues
        that conversation one hop further, checked against the hop budget and delivered as a
        turn's outbox is (:meth:`deliver`).
        """
        return self._run(self._send(to, content, sender, reply_to, idempotency_key, kind, data, chain=chain,
                                    expects_reply=expects_reply))  # fmt: skip

    async def asend(self, to: str, content: str, *, sender: str, reply_to: str | None = None,
                    idempotency_key: str | None = None, kind: MessageType = "message",
                    data: dict[str, Any] | None = None, expects_reply: bool | None = None,
                    chain: Chain | None = None) -> Message:  # fmt: skip
        return await self._arun(self._send(to, content, sender, reply_to, idempotency_key, kind, data, chain=chain,
                                           expects_reply=expects_reply))  # fmt: skip

    def _broadcast(self, content: str, sender: str, idempotency_key: str | None) -> Plan[list[Message]]:
        roster, _ = yield from self._plan_roster()
        members = roster.members if roster is not None else {}
        names = [n for n in sorted(members) if n != sender and members[n].state == "active"]
        messages = [
            self._message(n, content, sender, None, None if idempotency_key is None else f"{idempotency_key}:{n}",
                          "broadcast", None)
            for n in names
        ]  # fmt: skip
        outcomes = yield Batch(
            tuple(Put(keys.team_inbox_key(self.team_id, m.to, m.id), encode_message(m), if_none_match=True)
                  for m in messages), outcomes=True)  # fmt: skip
        for m, outcome in zip(messages, outcomes, strict=True):
            if isinstance(outcome, UnknownOutcomeError):
                yield from self._plan_put_message(m)  # settle the unknown ones one by one
            elif isinstance(outcome, BaseException) and not isinstance(outcome, PreconditionFailedError):
                raise outcome
        return messages

    def broadcast(self, content: str, *, sender: str, idempotency_key: str | None = None) -> list[Message]:
        """Send ``content`` to every active member but ``sender``: one PUT each, in parallel. Not
        atomic: each copy is its own message, each delivered exactly once."""
        return self._run(self._broadcast(content, sender, idempotency_key))

    async def abroadcast(self, content: str, *, sender: str, idempotency_key: str | None = None) -> list[Message]:
        return await self._arun(self._broadcast(content, sender, idempotency_key))

    def _request_shutdown(self, name: str, sender: str, reason: str) -> Plan[Message]:
        yield from self._plan_check(name)
        message = self._message(name, reason or "Please finish up and shut down.", sender, None,
                                f"shutdown:{secrets.token_hex(4)}", "shutdown_request", None)  # fmt: skip
        yield from self._plan_put_message(message)
        yield from self._set_state(name, "stop_requested", reason or f"requested by {sender}",
                                   {"id": message.id, "sender": sender})  # fmt: skip
        return message

    def request_shutdown(self, name: str, *, sender: str, reason: str = "") -> Message:
        """Ask ``name`` to stop: the roster says ``stop_requested`` and a ``shutdown_request``
        message goes to its inbox. Its worker ingests what is pending, answers
        ``shutdown_response`` to ``sender`` and releases the member (status ``shutdown``)."""
        return self._run(self._request_shutdown(name, sender, reason))

    async def arequest_shutdown(self, name: str, *, sender: str, reason: str = "") -> Message:
        return await self._arun(self._request_shutdown(name, sender, reason))

    # -- receiving and delivering (what a worker does; public for consumers of your own) ---------------
    def receive(self, name: str, *, limit: int | None = None) -> Receipt | None:
        """What a consumer of ``name``'s inbox would ingest now (None: the inbox is empty): 1
        LIST, then 1 GET per message and the member's head in one round trip, split against the
        member's ack into ready (at most ``limit``), done and held. A consumer of your own ingests
        ``ready`` in a turn on :attr:`member_saver` carrying :func:`~langgraph_handoff.teams.acks.ack_rider`, then
        calls :meth:`delete_ingested`; :class:`TeamWorker` does all of it."""
        return self._run(plan_receive(self.member_saver, self.team_id, validate_name(name), limit))

    async def areceive(self, name: str, *, limit: int | None = None) -> Receipt | None:
        return await self._arun(plan_receive(self.member_saver, self.team_id, validate_name(name), limit))

    def delete_ingested(self, name: str, messages: Sequence[Message]) -> None:
        """Delete messages ``name`` ingested: only ever after the checkpoint recording them (and
        their ack) committed, or they are lost. 1 DeleteObjects per 1,000."""
        self._run(plan_delete_ingested(self.team_id, validate_name(name), messages))

    async def adelete_ingested(self, name: str, messages: Sequence[Message]) -> None:
        await self._arun(plan_delete_ingested(self.team_id, validate_name(name), messages))

    def deliver(self, messages: Sequence[Message], *, outside: Collection[str] = ()) -> int:
        """Deliver messages a member's committed turn sent (its outbox, an automatic reply): in
        ``seq`` order per recipient, recipients in parallel, create-only, so delivering again is
        harmless. Ids in ``outside`` are answers to outside requesters. Past the hop budget a
        message becomes an event instead. Returns how many were delivered."""
        return self._run(self._plan_deliver(messages, outside))

    async def adeliver(self, messages: Sequence[Message], *, outside: Collection[str] = ()) -> int:
        return await self._arun(self._plan_deliver(messages, outside))

    def _plan_deliver(
        self, messages: Sequence[Message], outside: Collection[str] = (), roster: Roster | None = None
    ) -> Plan[int]:
        """Deliver messages sent from turns: in ``seq`` order per recipient (so a dispatcher that
        dies mid-way leaves no gap), recipients in parallel. A removed recipient's copy goes to
        dead/; ids in ``outside`` are answers to outside requesters (``outside/``). A message past
        the hop budget is not delivered: the first hop past it becomes an event (``teams.chains``).
        ``roster``: one the caller just read (else it is read here)."""
        if roster is None:
            roster, _ = yield from self._plan_roster()
        members = roster.members if roster is not None else {}
        deliver: list[Message] = []
        events: list[tuple[Message, str]] = []
        for m in messages:
            verdict = budget_verdict(m, self.max_hops)
            if verdict == "deliver":
                deliver.append(m)
                continue
            log.warning("team %s: %s's %s #%s to %s is past the hop budget (hop %d > %d): not delivered%s",
                        self.team_id, m.sender, m.type, m.id, m.to, m.hop, self.max_hops,
                        "" if verdict == "event" else " (a reaction to the budget event)")  # fmt: skip
            telemetry.counter(telemetry.M_TEAM_MESSAGES, 1, {telemetry.EVENT: "hop_cut"})
            if verdict == "event":
                events += self._budget_events(m, roster.lead if roster is not None else None, members)
        by_to: dict[str, list[Message]] = {}
        for m in deliver:
            by_to.setdefault(m.to, []).append(m)
        queues = [sorted(v, key=lambda x: x.seq or 0) for v in by_to.values()]
        sent = 0

        def where(m: Message) -> str:
            if m.id in outside:
                return keys.team_outside_prefix(self.team_id, m.to, m.reply_to or m.conversation_id) + m.id
            if m.to in members:
                return keys.team_inbox_key(self.team_id, m.to, m.id)
            return keys.team_dead_prefix(self.team_id, m.to) + m.id

        while any(queues):
            wave = [q.pop(0) for q in queues if q]
            outcomes = yield Batch(tuple(Put(where(m), encode_message(m), if_none_match=True) for m in wave),
                                   outcomes=True)  # fmt: skip
            for m, outcome in zip(wave, outcomes, strict=True):
                if isinstance(outcome, UnknownOutcomeError):
                    yield from self._plan_put_message(m, key=where(m))
                elif isinstance(outcome, BaseException) and not isinstance(outcome, PreconditionFailedError):
                    raise outcome
                sent += 1
                what = "sent" if m.id in outside or m.to in members else "dead_letter"
                telemetry.counter(telemetry.M_TEAM_MESSAGES, 1, {telemetry.EVENT: what})
        for event, key in events:
            yield from self._plan_put_message(event, key=key)
        return sent

    def _budget_events(self, m: Message, lead: str | None, members: Collection[str]) -> list[tuple[Message, str]]:
        """The events of a message cut by the hop budget: to each outside requester it descends
        from (its ``request`` fails at once) and to the lead (to the sender if there is none). One
        per request (or conversation) and recipient: the id is derived from both."""
        record = HopBudgetExceeded(conversation=m.conversation_id, max_hops=self.max_hops, hop=m.hop, sender=m.sender,
                                   to=m.to, message_id=m.id, message_type=m.type, content=m.content[:2000])  # fmt: skip
        targets: list[tuple[str, str, str]] = [
            (who, rid, keys.team_outside_prefix(self.team_id, who, rid))
            for rid, who in sorted(m.origins.items()) if who not in members
        ]  # fmt: skip
        if lead is not None and lead in members:
            targets.append((lead, record.conversation, keys.team_inbox_prefix(self.team_id, lead)))
        elif not targets and m.sender in members:
            targets.append((m.sender, record.conversation, keys.team_inbox_prefix(self.team_id, m.sender)))
        out = []
        for to, about, prefix in targets:
            eid = message_id(self.team_id, "hop-budget", about, to)
            event = Message(id=eid, team=self.team_id, sender=m.sender, to=to, content=record.describe(), type="event",
                            conversation=record.conversation, hop=m.hop, origins=dict(m.origins), order=next_order(self.clock),
                            created_at=self.clock(), data=record.as_data(),
                            traceparent=telemetry.current_traceparent())  # fmt: skip
            out.append((event, prefix + eid))
        return out

    # -- shared memory --------------------------------------------------------------------------------
    @property
    def memory(self) -> ObjectStoreMemory:
        """Long-term memory every member shares, on the same store (use :meth:`namespace`)."""
        return ObjectStoreMemory(self.store)

    def namespace(self, *parts: str) -> tuple[str, ...]:
        """``("team", team_id, *parts)``: where this team's shared memories go."""
        return ("team", self.team_id, *parts)
