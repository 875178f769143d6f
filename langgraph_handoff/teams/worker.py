"""``TeamWorker``: serve a team's members under leases, one turn per batch of messages.

A worker is a :class:`~langgraph_handoff.ownership.SessionWorker` whose sessions are team
members. Each :meth:`TeamWorker.step`:

1. reads the roster and takes the members nobody serves (free, released, expired: epoch + 1; or a
   transfer from a worker that was stopped);
2. for each member it holds: finishes a step a dead owner left unfinished (``settle``), delivers
   what that member's committed outbox still holds, then receives: LIST the inbox, GET the new
   messages, and runs **one turn** with all of them as input. The turn's saver is bound to the
   lease (fenced) and carries the ack (``teams.acks``), so the input checkpoint stores the
   messages and records them as consumed in one compare-and-swap;
3. after the turn committed: deletes the ingested message objects, sends the automatic reply if
   one is owed, and delivers the turn's outbox.

A crash anywhere loses nothing and ingests nothing twice: before the input checkpoint commits,
nothing is acked and the next owner reads the same messages; after it, the next owner's
``settle`` finishes the turn without re-ingesting, and delivers the outbox from the committed
state.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage, RemoveMessage
from langgraph.graph import END
from langgraph.types import Command

from langgraph_handoff import telemetry
from langgraph_handoff._format import keys
from langgraph_handoff._format.head_meta import HeadMeta, ResumeCount
from langgraph_handoff._format.records import Head
from langgraph_handoff.checkpoint import driver, trust
from langgraph_handoff.checkpoint.driver import Plan
from langgraph_handoff.checkpoint.fencing import fence_of, write_refusal
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.errors import (
    ConflictError,
    InvalidConfigError,
    InvalidInputError,
    LeaseHeldError,
    MessageIngestedError,
    OwnershipLostError,
    StoreUnavailableError,
    UnknownOutcomeError,
)
from langgraph_handoff.handoff.history import orphaned_call_stubs
from langgraph_handoff.ownership.lease import Lease
from langgraph_handoff.ownership.manager import SessionManager
from langgraph_handoff.ownership.worker import SessionWorker, WorkerStoppingError, _interrupted_step
from langgraph_handoff.teams import answers, receiving
from langgraph_handoff.teams.acks import ack_rider
from langgraph_handoff.teams.chains import Chain, chain_of
from langgraph_handoff.teams.context import MemberContext, call_build, is_legacy_build, warn_legacy
from langgraph_handoff.teams.model import Member, Message, Roster
from langgraph_handoff.teams.outbox import CHAIN_KEY, OUTBOX_CHANNEL, TURN_KEY, _stream_key
from langgraph_handoff.teams.team import Team

__all__ = ["DEFAULT_CAPACITY", "TeamWorker", "plan_count_resume"]

log = logging.getLogger("langgraph_handoff.teams")


class PoisonStepError(ConflictError):
    """A member's unfinished step was attempted ``max_failures`` times by workers that all died
    or failed in it. The member is marked failed; fix the cause, then ``Team.revive`` it."""


def plan_count_resume(saver: ObjectStoreSaver, thread_id: str, epoch: int, checkpoint_id: str) -> Plan[int]:
    """Record, in a member's root head and fenced by ``epoch``, one more attempt to finish the
    step at ``checkpoint_id``, and return how many there have been (``HeadMeta.team_resumes``:
    this module owns it). Written *before* the attempt runs, so a step that kills every worker
    that runs it is counted too (an in-memory count dies with the process). One
    compare-and-swap of the head (``saver.heads.cas``): 1 GET + 1 PUT; nothing without a head."""
    counted = 1

    def change(head: Head | None) -> Head | None:
        nonlocal counted
        if head is None:
            return None
        refusal = write_refusal(head.meta, epoch)
        if refusal is not None:
            raise OwnershipLostError(thread_id, "", epoch=epoch, current=fence_of(head.meta), reason=refusal)
        seen = head.meta.team_resumes
        counted = seen.count + 1 if seen is not None and seen.checkpoint == checkpoint_id else 1
        return replace(head, meta=head.meta.replace(team_resumes=ResumeCount(checkpoint_id, counted)))

    contention = f"the head of {thread_id!r} kept changing while counting a resume; retry"
    yield from saver.heads.cas(thread_id, "", change, contention=contention)
    return counted


#: builds the compiled graph of one member of a role: ``build(checkpointer, member)`` with the
#: (fenced, acking) saver and the :class:`MemberContext` (``build(checkpointer)`` is deprecated)
RoleFactory = Callable[..., Any]
#: members a worker takes on its own before it leaves the rest to other workers (see ``capacity``)
DEFAULT_CAPACITY = 4


#: what a store raises when it is failing or unreachable, rather than refusing on purpose: a
#: worker waits it out instead of dying or blaming the message it was running
OUTAGES: tuple[type[Exception], ...] = (StoreUnavailableError, UnknownOutcomeError)
#: the longest a worker waits between two tries while the store is failing (seconds)
MAX_OUTAGE_BACKOFF = 30.0


class _Pacer:
    """The waits of a worker's loop (shared by ``run`` and ``arun``): idle steps back off from
    ``poll`` to ``max_poll``; a store outage backs off from ``poll`` to
    :data:`MAX_OUTAGE_BACKOFF`, logged once when it starts and every tenth try after."""

    def __init__(self, poll: float, max_poll: float) -> None:
        self.poll, self.max_poll = poll, max_poll
        self.delay = poll
        self.failing = 0

    def after(self, busy: int) -> float:
        """The wait after a step that worked; 0 when it was busy."""
        if self.failing:
            log.warning("the store answers again after %d failed steps", self.failing)
            self.failing = 0
        self.delay = self.poll if busy else min(self.delay * 2, self.max_poll)
        return 0.0 if busy else self.delay

    def outage(self, owner: str, exc: Exception) -> float:
        """The wait after a step the store failed."""
        self.failing += 1
        wait: float = min(self.poll * 2.0 ** min(self.failing - 1, 20), MAX_OUTAGE_BACKOFF)
        if self.failing == 1 or self.failing % 10 == 0:
            log.warning("%s: the store is failing (%d steps so far), retrying in %.1f s: %s: %s",
                        owner, self.failing, wait, type(exc).__name__, exc)  # fmt: skip
        return wait


def _ingested(ready: list[Message], now: float) -> None:
    """Count a committed turn's messages, and how long each took from its send."""
    if not telemetry.is_on():
        return
    telemetry.counter(telemetry.M_TEAM_MESSAGES, len(ready), {telemetry.EVENT: "ingested"})
    for m in ready:
        if m.created_at:
            telemetry.histogram(telemetry.M_TEAM_DELIVERY, max(0.0, now - m.created_at))


class TeamWorker(SessionWorker):
    """Run a team's members: ingest their messages as turns, deliver what they send.

    ``builds`` maps each role to ``build(checkpointer, member) -> compiled graph``: ``member`` is a
    :class:`MemberContext` (name, role, teammates, ``tools()``, ``middleware()``, ``prompt()``), so
    two members of one role each get their own tools. A graph's state needs a ``messages``
    channel; give it ``team_outbox`` too (``TeamState``, or ``member.middleware()`` for
    ``create_agent``) to use the team tools' transactional sends.

    ``capacity`` (default :data:`DEFAULT_CAPACITY`, 4) is how many members the worker takes on
    its own. Beyond it, it takes a free member only once messages have waited for it for
    ``2 * max_poll`` seconds with no worker taking it: long enough for a worker with room to go
    first. So a fleet started together spreads the members out (each worker runs its members'
    turns one after another), and a lone worker still serves the whole team. ``capacity=None``
    takes every free member at once (a single worker for a small team); ``members=[...]`` pins
    members to a worker.

    >>> from langgraph.graph import StateGraph, START, END
    >>> from langgraph_handoff import ObjectStoreSaver
    >>> from langgraph_handoff.teams import Team, TeamState
    >>> def echo(checkpointer, member):
    ...     g = StateGraph(TeamState)
    ...     g.add_node("echo", lambda s: {"messages": [("ai", "got: " + s["messages"][-1].content.splitlines()[-1])]})
    ...     g.add_edge(START, "echo"); g.add_edge("echo", END)
    ...     return g.compile(checkpointer=checkpointer)
    >>> team = Team(ObjectStoreSaver.from_url("memory://"), "t")
    >>> _ = team.spawn("lead", role="echo"); _ = team.spawn("bob", role="echo")
    >>> _ = team.send("bob", "ping", sender="lead")
    >>> worker = TeamWorker(team, "worker-a", {"echo": echo})
    >>> worker.step()       # bob ingests "ping" and auto-replies; lead ingests the reply (unanswered)
    2
    >>> worker.step()
    0
    >>> lead = team.member_saver.get_tuple({"configurable": {"thread_id": "t/lead"}})
    >>> [m.content.splitlines()[-1] for m in lead.checkpoint["channel_values"]["messages"]]
    ['got: ping', 'got: got: ping']
    >>> worker.stop()
    ['t/bob', 't/lead']
    """

    def __init__(
        self,
        team: Team,
        owner: str,
        builds: Mapping[str, RoleFactory],
        *,
        ttl: float = 30.0,
        heartbeat: float | None = None,
        poll: float = 0.2,
        max_poll: float = 5.0,
        batch: int = 50,
        auto_reply: bool = True,
        max_failures: int = 3,
        capacity: int | None = DEFAULT_CAPACITY,
        members: Sequence[str] | None = None,
    ):
        for what, value, low in (("batch", batch, 1), ("max_failures", max_failures, 1)):
            if not isinstance(value, int) or value < low:
                raise InvalidInputError(f"TeamWorker({what}={value!r}): use an integer of at least {low}")
        if not (poll > 0 and max_poll >= poll):
            raise InvalidInputError(f"TeamWorker(poll={poll!r}, max_poll={max_poll!r}): need 0 < poll <= max_poll")
        if capacity is not None and (not isinstance(capacity, int) or capacity < 1):
            raise InvalidInputError(f"TeamWorker(capacity={capacity!r}): use None or an integer of at least 1")
        # the members' conversations, leases and acks live in the team's own space (teams.core)
        super().__init__(SessionManager(team.member_saver, clock=team.clock), owner, self._no_build, ttl=ttl,
                         heartbeat=heartbeat)  # fmt: skip
        self.team = team
        self.builds = dict(builds)
        self._legacy = {role: is_legacy_build(build) for role, build in self.builds.items()}
        for role, legacy in sorted(self._legacy.items()):
            if legacy:
                warn_legacy(role)
        #: idle backoff: ``poll`` after a busy step, doubling to ``max_poll`` while idle
        self.poll, self.max_poll = float(poll), float(max_poll)
        #: most messages ingested in one turn (the rest wait for the next step, in order)
        self.batch = int(batch)
        #: send a turn's final answer to whoever triggered it, if the agent did not message them
        self.auto_reply = auto_reply
        #: consecutive failed turns after which a member is marked ``failed`` and the lead told
        self.max_failures = int(max_failures)
        #: members this worker takes on its own; more only when they wait unserved (see above)
        self.capacity = capacity
        #: serve only these members (``None``: every member)
        self.only = set(members) if members is not None else None
        self._members: dict[str, Member] = {}
        #: members seen free with messages waiting while this worker was at capacity: since when
        self._unserved: dict[str, float] = {}
        self._graphs: dict[tuple[str, int, str], Any] = {}
        self._roster_nonce = ""
        self._riders: dict[str, Callable[[HeadMeta], HeadMeta]] = {}
        self._delivered: dict[str, dict[str, int]] = {}
        self._failures: dict[str, int] = {}
        self._fresh: set[str] = set()
        self._skip_until: dict[str, float] = {}
        self._shut: dict[str, str] = {}
        #: members paused at an ``interrupt()``: name -> [(interrupt id, value)], and whom we asked
        self._waiting: dict[str, list[tuple[str, Any]]] = {}
        self._asked: dict[str, str | None] = {}
        self._step_lock = threading.Lock()

    def _run(self, plan: Plan[Any]) -> Any:
        """Run one of the worker's own plans on the team's store (probed before a first write)."""
        return trust.run(self.team.store, plan)

    @staticmethod
    def _no_build(saver: Any) -> Any:  # pragma: no cover - graph_for is overridden
        raise AssertionError("TeamWorker builds graphs per role")

    # -- graphs ------------------------------------------------------------------------------------------
    def _name(self, thread_id: str) -> str:
        return thread_id.split("/", 1)[1]

    def _ride(self, thread_id: str) -> Callable[[HeadMeta], HeadMeta]:
        def ride(meta: HeadMeta) -> HeadMeta:
            rider = self._riders.get(thread_id)
            return rider(meta) if rider is not None else meta

        return ride

    def graph_for(self, lease: Lease) -> Any:
        """The member's graph on a saver fenced by ``lease`` that also carries the current turn's
        ack (compiled once per lease epoch and roster version)."""
        key = (lease.thread_id, lease.epoch, self._roster_nonce)
        graph = self._graphs.get(key)
        if graph is None:
            member = self._members.get(self._name(lease.thread_id))
            role = member.role if member is not None else None
            if member is None or role not in self.builds:
                raise ConflictError(
                    f"member {self._name(lease.thread_id)!r} has role {role!r}, which this worker cannot run "
                    f"(it builds {sorted(self.builds)}); give TeamWorker a build for it"
                )
            saver = self.sessions.saver.with_lease(lease).with_head_rider(lease.thread_id, self._ride(lease.thread_id))
            graph = call_build(self.builds[role], saver, MemberContext(self.team, member), self._legacy[role])
            if "messages" not in getattr(graph, "channels", {}):
                raise InvalidConfigError(
                    f"the graph of role {role!r} has no 'messages' channel, so team messages would be "
                    "acked and lost: give its state a messages channel (TeamState, MessagesState)"
                )
            self._graphs = {k: v for k, v in self._graphs.items() if k[0] != lease.thread_id}
            self._graphs[key] = graph
        return graph

    # -- taking members ----------------------------------------------------------------------------------
    def _take(self, roster: Roster) -> None:
        """Acquire the members nobody serves (up to ``capacity``, then the ones left unserved). A
        member another worker holds is looked at again only after a third of its lease (or its
        expiry), and a member that shut down only after the roster changes, so idle polls stay
        cheap in a fleet."""
        now = self.team.clock()
        with self._lock:
            held = set(self.leases)
        self._members = dict(roster.members)
        for name in roster.names():
            member = roster.members[name]
            thread = self.team.thread_id(name)
            if thread in held or member.state == "failed" or member.role not in self.builds:
                continue
            if self.only is not None and name not in self.only:
                continue
            if self._skip_until.get(name, 0.0) > now:
                continue
            if self.capacity is not None and len(held) >= self.capacity and not self._left_unserved(name, now):
                continue
            if member.space != "team" and not self._moved(name, now):
                continue
            if member.state == "stop_requested":
                if self._shut.get(name) == roster.nonce:
                    continue
                current = self.sessions.get(thread)
                if current is not None and current.state == "released":
                    self._shut[name] = roster.nonce  # it shut down: only revive() brings it back
                    continue
            try:
                lease = self.sessions.acquire(thread, self.owner, self.ttl)
            except LeaseHeldError as exc:
                if exc.state != "being transferred":
                    self._skip_until[name] = min(exc.expires_at, now + self.ttl / 3)
                    continue
                try:
                    lease = self.sessions.accept(thread, self.owner, self.ttl)
                except ConflictError:
                    continue
            self._skip_until.pop(name, None)
            self._unserved.pop(name, None)
            self._hold(lease)
            self._fresh.add(name)
            held.add(thread)

    def _moved(self, name: str, now: float) -> bool:
        """Move the conversation of a member spawned by 0.2 into the team's space before taking
        it (``teams.upgrade``): False while a worker of the old release still serves it (looked
        at again as a held lease would be), or when the move failed (logged; retried after a
        lease's time)."""
        try:
            moves = self.team.upgrade([name])
        except Exception as exc:  # noqa: BLE001 - the store is down, or the member went: next step
            log.warning("%s: could not move %r's conversation: %s: %s", self.owner, name, type(exc).__name__, exc)
            self._skip_until[name] = now + self.ttl
            return False
        move = next((m for m in moves if m.member == name), None)
        if move is None or move.settled:
            return True
        if move.outcome == "conflict":
            log.error("%s: team %s: %s", self.owner, self.team.team_id, move.detail)
            return True  # the member's conversation in the team's space is the one it has been running
        if move.outcome == "held":
            log.info("%s: %r is served by %r (an older release) until it stops", self.owner, name, move.held_by)
            self._skip_until[name] = min(move.until or now, now + self.ttl / 3)
        else:
            self._skip_until[name] = now + self.ttl
        return False

    def _left_unserved(self, name: str, now: float) -> bool:
        """At capacity: has ``name`` had messages waiting, with no live lease, for ``2 * max_poll``
        seconds (so the workers with room had their chance)? One head GET (once per third of the
        lease of a member another worker holds, as for an acquire) and one inbox LIST, at most
        once per ``max_poll`` per free member."""
        lease = self.sessions.get(self.team.thread_id(name))
        if lease is not None and lease.state == "active" and not lease.expired(now):
            self._unserved.pop(name, None)
            self._skip_until[name] = min(lease.expires_at, now + self.ttl / 3)
            return False
        waiting = bool(self._run(receiving.plan_list(keys.team_inbox_prefix(self.team.team_id, name))))
        if not waiting:
            self._unserved.pop(name, None)
            self._skip_until[name] = now + self.max_poll
            return False
        since = self._unserved.setdefault(name, now)
        if now - since >= 2 * self.max_poll:
            return True
        self._skip_until[name] = min(since + 2 * self.max_poll, now + self.max_poll)
        return False

    # -- one round ---------------------------------------------------------------------------------------
    def step(self) -> int:
        """One round: take free members, then for each held member finish, deliver, receive and
        run one turn. Returns the number of messages ingested."""
        if self.stopping:
            return 0
        with self._step_lock:
            roster = self.team.roster()
            self._roster_nonce = roster.nonce  # graphs (and their tools' roster enum) follow the roster
            self._take(roster)
            with self._lock:
                held = sorted(self.leases.items())
            total = 0
            for thread, lease in held:
                if self.stopping:
                    break  # SIGTERM: stop() hands the rest over; nothing here is a failed turn
                name = self._name(thread)
                member = roster.members.get(name)
                if member is None or member.state == "failed" or member.role not in self.builds:
                    self.release(thread)  # removed, failed, or re-spawned in a role this worker cannot run
                    continue
                try:
                    total += self._serve(member, lease, roster)
                    self._failures.pop(name, None)
                except WorkerStoppingError:
                    break
                except OwnershipLostError:
                    log.warning("%s lost member %r", self.owner, name)
                    with self._lock:
                        self.leases.pop(thread, None)
                except MessageIngestedError as exc:
                    log.warning("%s: %s", self.owner, exc)  # another consumer had them: nothing lost
                except OUTAGES as exc:
                    self._outage_in_turn(member, thread, exc)
                except Exception as exc:  # noqa: BLE001 - a failing turn must not stop the other members
                    self._failed_turn(member, thread, exc)
            return total

    def settle(self, thread_id: str, config: dict[str, Any] | None = None) -> Any:
        """:meth:`SessionWorker.settle`, counted: each attempt to finish a step a previous owner
        left unfinished is recorded in the member's head first. A step that every worker dies
        in (a poison message that crashes the process) marks the member failed after
        ``max_failures`` attempts instead of killing the fleet one worker at a time."""
        if self._needs_settling(thread_id):
            lease = self.lease_for(thread_id)
            graph, cfg = self.graph_for(lease), self._config(thread_id, config)
            state = graph.get_state(cfg)
            if _interrupted_step(graph, state):
                name = self._name(thread_id)
                cid = state.config["configurable"]["checkpoint_id"]
                member = self.team.roster(refresh=False).members.get(name)
                if member is not None and (member.discard or {}).get("checkpoint") == cid:
                    self._discard_step(member, graph, cfg, state)
                    self._settled(thread_id)
                    return None
                plan = plan_count_resume(self.team.member_saver, thread_id, lease.epoch, cid)
                count = self._run(driver.under(self.team.members_prefix, plan))
                if count > self.max_failures:
                    raise PoisonStepError(
                        f"{count - 1} attempts to finish step {cid} of {name!r} did not complete "
                        "(the workers running it died or failed)"
                    )
        return super().settle(thread_id, config)

    def _discard_step(self, member: Member, graph: Any, cfg: dict[str, Any], state: Any) -> None:
        """Carry out ``Team.discard``: end the unfinished step without running it (its input, if it
        had not run, is dropped; messages it had already taken in are removed), close any tool
        call it left open, say so in the conversation, and tell the lead."""
        record = member.discard or {}
        graph.update_state(cfg, None, as_node=END)  # LangGraph: clear the checkpoint's tasks
        messages = list(graph.get_state(cfg).values.get("messages") or [])
        dropped = set(record.get("messages") or ())
        removed = [RemoveMessage(id=m.id) for m in messages if m.id and m.id.removeprefix("team-") in dropped]
        kept = [m for m in messages if not (m.id and m.id.removeprefix("team-") in dropped)]
        note = AIMessage(f"[This step was discarded by {record.get('by') or 'an operator'}: "
                         f"{record.get('reason') or 'no reason given'}. It did not finish; "
                         f"message(s) {', '.join('#' + i for i in sorted(dropped)) or '(none)'} were dropped.]")  # fmt: skip
        answers.update_state(graph, cfg, {"messages": [*removed, *orphaned_call_stubs(kept), note]})
        log.warning("%s: discarded step %s of %r (%s)", self.owner, record.get("checkpoint"), member.name,
                    record.get("reason"))  # fmt: skip
        lead = self.team.roster(refresh=False).lead
        if lead is not None and lead != member.name:
            self.team.send(lead, f"{member.name}: {note.content}", sender=member.name, kind="event",
                           idempotency_key=f"discarded:{record.get('checkpoint')}",
                           data={"event": "step_discarded", **record})  # fmt: skip

    def _outage_in_turn(self, member: Member, thread: str, exc: Exception) -> None:
        """The store failed during a member's turn (or its clean-up): not the message's fault, so
        it counts toward no failure. The next step settles what was committed (a committed turn
        is never run again: its ack rides the checkpoint) and retries the rest."""
        log.warning("%s: the store failed during the turn of %r (retried at the next step): %s: %s",
                    self.owner, member.name, type(exc).__name__, exc)  # fmt: skip
        with self._lock:
            self._unsettled.add(thread)
        self._fresh.add(member.name)

    def _failed_turn(self, member: Member, thread: str, exc: Exception) -> None:
        """Count a failed turn. The next step finishes the failed step first and then pays and
        delivers what the committed state holds (as after a takeover). At ``max_failures`` in a
        row the member is marked failed and the lead told. Never raises: one member's trouble
        must not stop the others."""
        count = self._failures.get(member.name, 0) + 1
        if isinstance(exc, PoisonStepError):
            count = self.max_failures  # counted in the store across workers already
        self._failures[member.name] = count
        log.warning("%s: turn of %r failed (%d/%d): %s: %s", self.owner, member.name, count, self.max_failures,
                    type(exc).__name__, exc)  # fmt: skip
        with self._lock:
            self._unsettled.add(thread)
        self._fresh.add(member.name)
        if count < self.max_failures:
            return
        reason = f"{count} turns in a row failed; last: {type(exc).__name__}: {exc}"
        try:
            self.team.mark_failed(member.name, reason)
            lead = self.team.roster(refresh=False).lead
            if lead is not None and lead != member.name:
                self.team.send(lead, f"{member.name} failed and was stopped: {reason}", sender=member.name,
                               kind="event", idempotency_key=f"failed:{secrets.token_hex(8)}")  # fmt: skip
        except Exception as err:  # noqa: BLE001 - removed meanwhile, or the store is down: log, go on
            log.warning("%s: could not mark %r failed: %s: %s", self.owner, member.name, type(err).__name__, err)
        self._failures.pop(member.name, None)
        self.release(thread)

    def _serve(self, member: Member, lease: Lease, roster: Roster) -> int:
        name, thread = member.name, lease.thread_id
        self.settle(thread)  # a dead owner's unfinished step first (never re-ingests)
        graph = self.graph_for(self.leases.get(thread, lease))
        cfg = self._config(thread, None)
        if name in self._fresh:  # new to this worker: pay and deliver what the committed state holds
            state = graph.get_state(cfg)
            interrupts = [(i.id, i.value) for t in state.tasks for i in t.interrupts]
            if OUTBOX_CHANNEL in getattr(graph, "channels", {}):
                if not interrupts:  # a paused turn owes its replies only once it ends
                    answers.pay_owed(self.team, member, graph, cfg, state.values)
                self._deliver(member, lease, graph, cfg)
            self._paused(member, interrupts, answers.state_chain(state.values))
            self._fresh.discard(name)
        elif name in self._waiting and self._asked.get(name) != roster.lead:
            # the lead changed: ask the new one
            self._paused(member, self._waiting[name], answers.state_chain(graph.get_state(cfg).values))
        waiting = name in self._waiting
        # a paused member looks for the answer among everything pending, not just one batch
        # the lease holder knows the member's head from its own last write: no head GET
        known = self.team.member_saver.heads.remembered(thread)
        limit = None if waiting else self.batch
        receipt = self._run(receiving.plan_receive(self.team.member_saver, self.team.team_id, name, limit,
                                                   known=known))  # fmt: skip
        ingested = 0
        if receipt is not None:
            sel = receipt.selection
            if sel.done:
                self.team.delete_ingested(name, sel.done)
            if sel.held:
                log.info("%s: %d message(s) of %r wait for an earlier one", self.owner, len(sel.held), name)
            if sel.ready and waiting:
                ingested = self._answer(member, lease, graph, sel.ready, roster)
            elif sel.ready:
                self._turn(member, lease, graph, sel.ready)
                ingested = len(sel.ready)
        more = receipt is not None and bool(
            receipt.selection.held
            or len(receipt.selection.ready) >= self.batch
            or (receipt.selection.ready and not ingested)  # paused, no answer yet: they wait
        )
        if member.state == "stop_requested" and member.stop_request and not more:
            self._shut_down(member, thread)  # after ingesting everything that was sent before
        return ingested

    def _turn(self, member: Member, lease: Lease, graph: Any, ready: list[Message]) -> None:
        name, thread = member.name, lease.thread_id
        turn = secrets.token_hex(8)
        chain = chain_of(ready)
        cfg = self._config(thread, {"configurable": {TURN_KEY: turn, CHAIN_KEY: chain.as_dict()}})
        payload: dict[str, Any] = {"messages": [m.as_human_message() for m in ready]}
        owed = answers.owed_by(self.team, name, ready, self.auto_reply)
        outbox = OUTBOX_CHANNEL in getattr(graph, "channels", {})
        if outbox:
            # Committed with the input: what was delivered (trims the outbox), who is owed a reply
            # (cleared by the agent's own send to them, or by the automatic reply), the turn's
            # chain (stamped on what it sends) and whose messages it heard.
            payload[OUTBOX_CHANNEL] = answers.turn_note(self._delivered.get(name) or {}, owed, ready)
        self._riders[thread] = ack_rider(thread, ready, turn, self.team.clock(), self.team.window)
        attrs = {
            telemetry.TEAM: self.team.team_id, telemetry.MEMBER: name, telemetry.ROLE: member.role,
            telemetry.THREAD: thread, telemetry.MESSAGES: len(ready), telemetry.OWNER: self.owner,
            "langgraph_handoff.team.conversations": sorted({m.conversation or m.id for m in ready}),
        }  # fmt: skip
        # the senders' spans, on whatever worker or process sent each message
        with telemetry.span(f"team.turn {name}", attrs, links=[m.traceparent for m in ready]):
            try:
                result = graph.invoke(payload, cfg, durability=self.durability)
            finally:
                self._riders.pop(thread, None)
            # committed: the messages are in the conversation and acked
            _ingested(ready, self.team.clock())
            self.team.delete_ingested(name, ready)
            self._after(member, lease, graph, cfg, ready, result, owed)

    def _after(self, member: Member, lease: Lease, graph: Any, cfg: dict[str, Any], ready: list[Message],
               result: Any, owed: dict[str, str]) -> None:  # fmt: skip
        """After a committed turn: pay replies and deliver, then ask for approval if it paused
        (in that order, so the lead gets what the agent sent before the question)."""
        interrupts = list((result or {}).get("__interrupt__") or []) if isinstance(result, dict) else []
        paused = bool(interrupts)  # no final answer yet: replies wait for the resume
        outbox = OUTBOX_CHANNEL in getattr(graph, "channels", {})
        values = result if isinstance(result, dict) and OUTBOX_CHANNEL in result else None
        if outbox:
            if not paused and answers.pay_owed(self.team, member, graph, cfg, values):
                values = None  # the reply was added to the outbox: read it back
            self._deliver(member, lease, graph, cfg, values)
        elif owed and not paused:  # a graph without an outbox: direct sends, named by the trigger
            answers.direct_replies(self.team, member, owed, result, graph, cfg, ready)
        self._paused(member, [(i.id, i.value) for i in interrupts], chain_of(ready))

    # -- plan approval: interrupt() and Command(resume=...) ----------------------------------------------
    def _request_key(self, member: Member, interrupt_id: str) -> str:
        return f"plan:{self.team.thread_id(member.name)}:{interrupt_id}"

    def _paused(self, member: Member, interrupts: list[tuple[str, Any]], chain: Chain) -> None:
        """Record whether the member waits at ``interrupt()``; if it does, ask the lead: one
        ``plan_request`` per interrupt, named by it and the lead (asking again after a takeover
        sends nothing new). The answer is any message replying to it (or a ``plan_response``)."""
        if not interrupts:
            self._waiting.pop(member.name, None)
            self._asked.pop(member.name, None)
            return
        self._waiting[member.name] = list(interrupts)
        lead = self.team.roster(refresh=False).lead
        self._asked[member.name] = lead
        if lead is None or lead == member.name:
            return  # nobody to ask on the team: a person answers (`team send ... --kind plan_response`)
        for iid, value in interrupts:
            content = value if isinstance(value, str) else json.dumps(value, default=str)
            self.team.send(lead, content, sender=member.name, idempotency_key=self._request_key(member, iid),
                           kind="plan_request", chain=chain,
                           data={"interrupt_id": iid, "reply_with": "send_message(..., reply_to=this id)"})  # fmt: skip

    def _answer(self, member: Member, lease: Lease, graph: Any, ready: list[Message], roster: Roster) -> int:
        """A member paused at ``interrupt()`` resumes with the messages that answer its requests:
        ``Command(resume=...)`` (a map by interrupt id when it waits at several). Every ready
        message enters the conversation in that same commit (so no stream skips a message).
        Without an answer nothing is ingested."""
        name, thread = member.name, lease.thread_id
        waiting = self._waiting[name]
        # requests went to whoever was lead then: accept a reply to any of them
        by_request = {self.team.keyed_id(asked, name, self._request_key(member, iid)): iid
                      for asked in roster.members for iid, _ in waiting}  # fmt: skip
        found: dict[str, str] = {}
        for m in ready:
            iid = by_request.get(m.reply_to or "")
            if iid is None and m.type == "plan_response":
                iid = next((i for i, _ in waiting if i not in found), None)
            if iid is not None and iid not in found:
                found[iid] = m.content
        if not found:
            return 0
        resume: Any = next(iter(found.values())) if len(waiting) == 1 else found
        turn = secrets.token_hex(8)
        cfg = self._config(thread, {"configurable": {TURN_KEY: turn, CHAIN_KEY: chain_of(ready).as_dict()}})
        owed = answers.owed_by(self.team, name, [m for m in ready if m.reply_to not in by_request],
                               self.auto_reply)  # fmt: skip
        update: dict[str, Any] = {"messages": [m.as_human_message() for m in ready]}
        if OUTBOX_CHANNEL in getattr(graph, "channels", {}):
            update[OUTBOX_CHANNEL] = answers.turn_note(self._delivered.get(name) or {}, owed, ready)
        self._riders[thread] = ack_rider(thread, ready, turn, self.team.clock(), self.team.window)
        try:
            result = graph.invoke(Command(resume=resume, update=update), cfg, durability=self.durability)
        finally:
            self._riders.pop(thread, None)
        self.team.delete_ingested(name, ready)
        self._after(member, lease, graph, cfg, ready, result, owed)
        return len(ready)

    def _deliver(
        self, member: Member, lease: Lease, graph: Any, cfg: dict[str, Any], values: dict[str, Any] | None = None
    ) -> None:
        """Deliver the committed outbox entries this worker has not delivered yet."""
        if OUTBOX_CHANNEL not in getattr(graph, "channels", {}):
            return
        if values is None:
            values = graph.get_state(cfg).values
        marks = self._delivered.setdefault(member.name, {})
        messages, outside, todo = answers.deliverable(self.team, member, lease, values, marks)
        if not messages:
            return
        self.team.deliver(messages, outside=outside)
        for e in todo:
            marks[_stream_key(e)] = max(marks.get(_stream_key(e), 0), e["seq"])

    def _shut_down(self, member: Member, thread: str) -> None:
        """Answer the shutdown request (idempotent: named by the request) and release."""
        request = member.stop_request or {}
        requester = request.get("sender")
        if requester and requester != member.name and requester in self.team.roster(refresh=False).members:
            self.team.send(requester, f"{member.name} has shut down.", sender=member.name, kind="shutdown_response",
                           reply_to=request.get("id"), idempotency_key=f"shutdown-response:{request.get('id')}")  # fmt: skip
        self.release(thread)
        log.info("%s: %r shut down", self.owner, member.name)

    # -- loops -------------------------------------------------------------------------------------------
    def run(self, *, until: Callable[[], bool] | None = None) -> list[str]:
        """Step until :meth:`stop` or ``SIGTERM`` (inside :meth:`handle_sigterm`) or ``until()``;
        idle steps back off from ``poll`` to ``max_poll``. Then hands the members over.

        An outage never ends it: a step the store fails (``StoreUnavailableError``, an unknown
        outcome) is logged and tried again after a back-off doubling from ``poll`` to
        :data:`MAX_OUTAGE_BACKOFF`, and the worker picks up where it was when the store answers
        again (``tests/teams/test_worker_outages.py``)."""
        pacer = _Pacer(self.poll, self.max_poll)
        while not self.stopping and not (until is not None and until()):
            try:
                busy = self.step()
            except OUTAGES as exc:
                self._stopping.wait(pacer.outage(self.owner, exc))
                continue
            delay = pacer.after(busy)
            if delay:
                self._stopping.wait(delay)
        return self.stop() if not self._handed else []

    async def astep(self) -> int:
        """:meth:`step` on a worker thread, for asyncio programs."""
        return await asyncio.to_thread(self.step)

    async def arun(self, *, until: Callable[[], bool] | None = None) -> list[str]:
        """Async twin of :meth:`run`: steps in a worker thread, sleeps on the event loop."""
        pacer = _Pacer(self.poll, self.max_poll)
        while not self.stopping and not (until is not None and until()):
            try:
                busy = await self.astep()
            except OUTAGES as exc:
                await asyncio.sleep(pacer.outage(self.owner, exc))
                continue
            delay = pacer.after(busy)
            if delay:
                await asyncio.sleep(delay)
        return self.stop() if not self._handed else []

    _handed = False

    def stop(
        self, *, to_owner: str | None = None, next_step: str = "continue the conversation", drain: float | None = None
    ) -> list[str]:
        self._handed = True
        with self._step_lock:  # let a running step finish its turn first
            return super().stop(to_owner=to_owner, next_step=next_step, drain=drain)
