"""``Team``: the roster and the mailboxes of one agent team, on the saver's store.

Every operation is written once as a plan (a generator of store operations, see
:mod:`langgraph_handoff.checkpoint.driver`) and run by a sync or an async front end.

Requests (measured in ``tests/test_teams.py`` with a counting store):

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
import dataclasses
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_handoff.checkpoint import driver, trust
from langgraph_handoff.checkpoint.driver import Batch, Plan, Sleep
from langgraph_handoff.checkpoint.fencing import FENCE_KEY, write_refusal
from langgraph_handoff.errors import (
    ConflictError,
    CorruptObjectError,
    InvalidInputError,
    MemberExistsError,
    OwnershipLostError,
    PreconditionFailedError,
    UnknownOutcomeError,
    UnknownRecipientError,
)
from langgraph_handoff.format import keys
from langgraph_handoff.format import records as rec_io
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.ownership.manager import lease_of
from langgraph_handoff.stores.base import Delete, DeleteMany, Get, ListPage, Put
from langgraph_handoff.teams.acks import DEFAULT_WINDOW, AckState, Selection, select
from langgraph_handoff.teams.model import (
    Member,
    Message,
    MessageType,
    Roster,
    decode_message,
    decode_roster,
    encode_message,
    encode_roster,
    member_thread,
    message_id,
    next_order,
    validate_name,
)
from langgraph_handoff.teams.status import MemberStatus, derive_status, has_next, pending_interrupt

__all__ = ["DeadLetter", "InboxEntry", "Receipt", "Team"]

log = logging.getLogger("langgraph_handoff.teams")

#: attempts of a create-only send whose outcome was unknown (RGW answers a lost race with a 500)
_SEND_ATTEMPTS = 6
#: key, in a member's root head, of the count of attempts to finish one unfinished step
RESUMES_KEY = "team_resumes"
_ROSTER_ATTEMPTS = 12


@dataclass(frozen=True)
class Receipt:
    """What a receive found in one member's inbox (used by :class:`TeamWorker`)."""

    member: str
    ack: AckState
    selection: Selection
    #: objects that could not be read (corrupt): left in place and reported, never dropped
    unreadable: tuple[str, ...] = ()
    #: how many objects the inbox listing returned (diagnostics)
    keys_listed: int = 0


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


def _backoff(attempt: int) -> float:
    return min(0.02 * (2**attempt), 1.0)


class Team:
    """The roster and mailboxes of one team, on ``saver``'s store.

    Each member is an ordinary LangGraph thread ``"{team_id}/{name}"`` (its memory across
    activations); the roster and one create-only object per message live under ``teams/``.

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
        saver: Any,
        team_id: str,
        *,
        window: float = DEFAULT_WINDOW,
        clock: Callable[[], float] = time.time,
    ):
        self.saver = saver
        self.store = saver.store
        self.team_id = validate_name(team_id, "team id")
        #: how long ingested external message ids are remembered (see :mod:`teams.acks`)
        self.window = float(window)
        self.clock = clock
        self._roster: Roster | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Team({self.team_id!r} on {self.store!r})"

    # -- plumbing ------------------------------------------------------------------------------------
    def _run(self, plan: Plan[Any]) -> Any:
        return driver.run(self.store, trust.gated(self.store, plan))  # never on an unprobed store

    async def _arun(self, plan: Plan[Any]) -> Any:
        return await driver.arun(self.store, trust.gated(self.store, plan))

    def thread_id(self, name: str) -> str:
        """The LangGraph thread of member ``name``."""
        return member_thread(self.team_id, name)

    def _remember(self, roster: Roster | None) -> None:
        with self._lock:
            self._roster = roster

    # -- the roster ---------------------------------------------------------------------------------
    def _plan_roster(self) -> Plan[tuple[Roster | None, str | None]]:
        key = keys.team_roster_key(self.team_id)
        obj = yield Get(key)
        roster = decode_roster(obj.body, key=key) if obj is not None else None
        self._remember(roster)
        return roster, (obj.etag if obj is not None else None)

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

    def _spawn(self, name: str, role: str, description: str, lead: bool) -> Plan[Member]:
        name = validate_name(name)
        if not isinstance(role, str) or not role:
            raise InvalidInputError(f"spawn({name!r}) needs a role: the name of the graph that runs this member")
        member = Member(name=name, role=role, description=description, spawned_at=self.clock())

        def decide(roster: Roster) -> Roster:
            if name in roster.members:
                raise MemberExistsError(self.team_id, name)
            return roster.model_copy(update={
                "members": {**roster.members, name: member},
                "lead": name if lead or roster.lead is None else roster.lead,
            })  # fmt: skip

        yield from self._plan_change(decide)
        return member

    def spawn(self, name: str, *, role: str, description: str = "", lead: bool = False) -> Member:
        """Add a member. ``role`` names the graph a :class:`TeamWorker` runs it with. The first
        member (or one spawned with ``lead=True``) is the lead: it gets lifecycle events."""
        return self._run(self._spawn(name, role, description, lead))

    async def aspawn(self, name: str, *, role: str, description: str = "", lead: bool = False) -> Member:
        return await self._arun(self._spawn(name, role, description, lead))

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
        """Put a failed or stopped member back to work (after fixing what made it fail)."""
        return self._run(self._set_state(name, "active", ""))

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
        head, _ = self.saver._head_from((yield Get(keys.head_key(thread, ""))), thread, "")
        ack = AckState.from_extra(head.extra if head is not None else None)
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

    def members(self, *, refresh: bool = False) -> list[Member]:
        roster = self.roster(refresh=refresh)
        return [roster.members[n] for n in roster.names()]

    def roster_names(self, *, refresh: bool = False) -> list[str]:
        return self.roster(refresh=refresh).names()

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
        mid = self.keyed_id(to, sender, idempotency_key) if idempotency_key is not None else secrets.token_hex(10)
        return Message(id=mid, team=self.team_id, sender=sender, to=to, content=content, type=kind,
                       reply_to=reply_to, order=next_order(self.clock), created_at=self.clock(),
                       idempotency_key=idempotency_key, data=data or {})  # fmt: skip

    def keyed_id(self, to: str, sender: str, idempotency_key: str) -> str:
        """The id :meth:`send` gives a message with an idempotency key (known before sending)."""
        return message_id(self.team_id, "ext", sender, to, idempotency_key)

    def _plan_put_message(self, message: Message, *, dead: bool = False) -> Plan[Message]:
        """Store one message create-only. "Already there" means a retry of this very send."""
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
              kind: MessageType, data: dict[str, Any] | None) -> Plan[Message]:  # fmt: skip
        yield from self._plan_check(to)
        message = self._message(to, content, sender, reply_to, idempotency_key, kind, data)
        return (yield from self._plan_put_message(message))

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
    ) -> Message:
        """Send ``content`` to member ``to``: one create-only PUT. Returns the stored message.

        A retry with the same ``idempotency_key`` is harmless: it hits the same object, and if the
        first copy was already ingested and deleted, the recipient still drops the repeat (it
        remembers ingested ids for ``window`` seconds). Without a key every call is a new message.
        Messages from one sender to one recipient are ingested in the order the sends returned.
        """
        return self._run(self._send(to, content, sender, reply_to, idempotency_key, kind, data))

    async def asend(self, to: str, content: str, *, sender: str, reply_to: str | None = None,
                    idempotency_key: str | None = None, kind: MessageType = "message",
                    data: dict[str, Any] | None = None) -> Message:  # fmt: skip
        return await self._arun(self._send(to, content, sender, reply_to, idempotency_key, kind, data))

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

    # -- receiving (the worker's side) ----------------------------------------------------------------
    def _plan_receive(self, name: str, limit: int | None = None, *, holder: bool = False) -> Plan[Receipt | None]:
        """LIST the inbox; if anything is there, GET every message (and the member's head, for
        its ack record) in one round trip, and split them into ready / done / held.

        ``holder``: the caller holds the member's lease, so the head this process last wrote or
        read is current unless the caller was superseded, and it saves the head GET. A stale
        record is harmless: the ack rider checks again inside the checkpoint's CAS.
        """
        prefix = keys.team_inbox_prefix(self.team_id, name)
        listed = yield from _plan_list(prefix)
        if not listed:
            return None
        thread = self.thread_id(name)
        cached = self.saver._cache.get(thread, "") if holder else None
        ops = tuple(Get(i.key) for i in listed)
        if cached is not None and cached.known:
            head, got = cached.head, (yield Batch(ops))
        else:
            got = yield Batch((Get(keys.head_key(thread, "")), *ops))
            head, _ = self.saver._head_from(got[0], thread, "")
            got = got[1:]
        ack = AckState.from_extra(head.extra if head is not None else None)
        messages: list[Message] = []
        unreadable: list[str] = []
        for info, obj in zip(listed, got, strict=True):
            if obj is None:
                continue  # deleted between LIST and GET: ingested by someone else meanwhile
            try:
                m = decode_message(obj.body, key=info.key)
            except CorruptObjectError as exc:
                log.error("team %s: unreadable message %s left in place: %s", self.team_id, info.key, exc)
                unreadable.append(info.key)
                continue
            if m.to != name or m.team != self.team_id or not info.key.endswith("/" + m.id):
                log.error("team %s: message %s is not addressed to %r; left in place", self.team_id, info.key, name)
                unreadable.append(info.key)
                continue
            messages.append(m)
        return Receipt(name, ack, select(messages, ack, limit=limit), tuple(unreadable), len(listed))

    def _plan_count_resume(self, name: str, epoch: int, checkpoint_id: str) -> Plan[int]:
        """Record, in the member's head and fenced by ``epoch``, one more attempt to finish the
        step at ``checkpoint_id``; return how many there have been. Written *before* the attempt
        runs, so a step that kills every worker that runs it is counted too (an in-memory count
        dies with the process)."""
        thread = self.thread_id(name)
        hkey = keys.head_key(thread, "")
        for attempt in range(_ROSTER_ATTEMPTS):
            head, etag = self.saver._head_from((yield Get(hkey)), thread, "")
            if head is None or etag is None:
                return 1
            refusal = write_refusal(head.extra, epoch)
            if refusal is not None:
                raise OwnershipLostError(thread, "", epoch=epoch, current=int(head.extra.get(FENCE_KEY, 0) or 0),
                                         reason=refusal)  # fmt: skip
            seen = head.extra.get(RESUMES_KEY) or {}
            count = int(seen.get("count", 0)) + 1 if seen.get("checkpoint") == checkpoint_id else 1
            written = dataclasses.replace(
                head, extra={**head.extra, RESUMES_KEY: {"checkpoint": checkpoint_id, "count": count}}
            )
            body = rec_io.encode_head(written, schema_version=self.saver.layout.schema_version)
            try:
                new_etag = yield Put(hkey, body, if_match=etag)
            except (PreconditionFailedError, UnknownOutcomeError):
                yield Sleep(_backoff(attempt))
                continue
            self.saver._cache.observe(thread, "", written, new_etag)
            return count
        raise ConflictError(f"the head of {thread!r} kept changing while counting a resume; retry")

    def _plan_discard(self, name: str, messages: Sequence[Message]) -> Plan[None]:
        """Delete ingested messages (only ever after the checkpoint recording them committed).
        Unconditional deletes are safe: keys are unique and objects immutable."""
        ks = tuple(keys.team_inbox_key(self.team_id, name, m.id) for m in messages)
        for i in range(0, len(ks), 1000):
            yield DeleteMany(ks[i : i + 1000])

    def _plan_deliver(self, messages: Sequence[Message]) -> Plan[int]:
        """Deliver outbox messages: in ``seq`` order per recipient (so a dispatcher that dies
        mid-way leaves no gap), recipients in parallel. A removed recipient's copy goes to dead/."""
        roster, _ = yield from self._plan_roster()
        members = roster.members if roster is not None else {}
        by_to: dict[str, list[Message]] = {}
        for m in messages:
            by_to.setdefault(m.to, []).append(m)
        queues = [sorted(v, key=lambda x: x.seq or 0) for v in by_to.values()]
        sent = 0
        while any(queues):
            wave = [q.pop(0) for q in queues if q]
            outcomes = yield Batch(tuple(
                Put((keys.team_inbox_key(self.team_id, m.to, m.id) if m.to in members
                     else keys.team_dead_prefix(self.team_id, m.to) + m.id), encode_message(m), if_none_match=True)
                for m in wave), outcomes=True)  # fmt: skip
            for m, outcome in zip(wave, outcomes, strict=True):
                if isinstance(outcome, UnknownOutcomeError):
                    yield from self._plan_put_message(m, dead=m.to not in members)
                elif isinstance(outcome, BaseException) and not isinstance(outcome, PreconditionFailedError):
                    raise outcome
                sent += 1
        return sent

    # -- reading for people ---------------------------------------------------------------------------
    def _inbox(self, name: str) -> Plan[list[InboxEntry]]:
        validate_name(name)
        receipt = yield from self._plan_receive(name)
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
            for info in (yield from _plan_list(prefix)):
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
        inbox (no status is ever stored): spawning, working, waiting_input, idle, stalled, failed,
        stopping, shutdown."""
        roster = self.roster()
        out = []
        for name in roster.names():
            thread = self.thread_id(name)
            head, _ = self.saver._head_from(self.store.get(keys.head_key(thread, "")), thread, "")
            tup = self.saver.get_tuple({"configurable": {"thread_id": thread}}) if head and head.records else None
            pending = len(_run_list(self.store, keys.team_inbox_prefix(self.team_id, name)))
            out.append(self._derive(roster.members[name], head, tup, pending))
        return out

    async def astatus(self) -> list[MemberStatus]:
        roster = await self.aroster()
        out = []
        for name in roster.names():
            thread = self.thread_id(name)
            head, _ = self.saver._head_from(await self.store.aget(keys.head_key(thread, "")), thread, "")
            tup = (
                await self.saver.aget_tuple({"configurable": {"thread_id": thread}}) if head and head.records else None
            )
            pending = len(await driver.arun(self.store, _plan_list(keys.team_inbox_prefix(self.team_id, name))))
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

    # -- shared memory --------------------------------------------------------------------------------
    @property
    def memory(self) -> ObjectStoreMemory:
        """Long-term memory every member shares, on the same store (use :meth:`namespace`)."""
        return ObjectStoreMemory(self.store)

    def namespace(self, *parts: str) -> tuple[str, ...]:
        """``("team", team_id, *parts)``: where this team's shared memories go."""
        return ("team", self.team_id, *parts)


def _plan_list(prefix: str) -> Plan[list[Any]]:
    items: list[Any] = []
    cursor = None
    while True:
        page = yield ListPage(prefix, start_after=cursor)
        items.extend(page.items)
        if not page.truncated or not page.items:
            return items
        cursor = page.items[-1].key


def _run_list(store: Any, prefix: str) -> list[Any]:
    return driver.run(store, _plan_list(prefix))
