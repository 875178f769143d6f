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
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.errors import InvalidUpdateError
from langgraph.types import Command

from langgraph_handoff.errors import (
    ConflictError,
    InvalidConfigError,
    InvalidInputError,
    LeaseHeldError,
    MessageIngestedError,
    OwnershipLostError,
)
from langgraph_handoff.ownership.lease import Lease
from langgraph_handoff.ownership.manager import SessionManager
from langgraph_handoff.ownership.worker import SessionWorker, WorkerStoppingError, _interrupted_step
from langgraph_handoff.teams.acks import ack_rider
from langgraph_handoff.teams.model import EVENT_TYPES, Member, Message, Roster, message_id, next_order
from langgraph_handoff.teams.outbox import OUTBOX_CHANNEL, TURN_KEY, _stream_key, stream_name
from langgraph_handoff.teams.team import Team

__all__ = ["TeamWorker"]

log = logging.getLogger("langgraph_handoff.teams")


class PoisonStepError(ConflictError):
    """A member's unfinished step was attempted ``max_failures`` times by workers that all died
    or failed in it. The member is marked failed; fix the cause, then ``Team.revive`` it."""


#: builds the compiled graph of one role, given the (fenced, acking) saver to use as checkpointer
RoleFactory = Callable[[Any], Any]


class TeamWorker(SessionWorker):
    """Run a team's members: ingest their messages as turns, deliver what they send.

    ``builds`` maps each role to ``build(checkpointer) -> compiled graph``. A graph's state needs
    a ``messages`` channel; give it ``team_outbox`` too (``TeamState``, or ``TeamMiddleware`` for
    ``create_agent``) to use the team tools' transactional sends.

    >>> from langgraph.graph import StateGraph, START, END
    >>> from langgraph_handoff import ObjectStoreSaver
    >>> from langgraph_handoff.teams import Team, TeamState
    >>> def echo(checkpointer):
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
    >>> lead = team.saver.get_tuple({"configurable": {"thread_id": "t/lead"}})
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
        capacity: int | None = None,
        members: Sequence[str] | None = None,
    ):
        for what, value, low in (("batch", batch, 1), ("max_failures", max_failures, 1)):
            if not isinstance(value, int) or value < low:
                raise InvalidInputError(f"TeamWorker({what}={value!r}): use an integer of at least {low}")
        if not (poll > 0 and max_poll >= poll):
            raise InvalidInputError(f"TeamWorker(poll={poll!r}, max_poll={max_poll!r}): need 0 < poll <= max_poll")
        if capacity is not None and (not isinstance(capacity, int) or capacity < 1):
            raise InvalidInputError(f"TeamWorker(capacity={capacity!r}): use None or an integer of at least 1")
        super().__init__(SessionManager(team.saver, clock=team.clock), owner, self._no_build, ttl=ttl,
                         heartbeat=heartbeat)  # fmt: skip
        self.team = team
        self.builds = dict(builds)
        #: idle backoff: ``poll`` after a busy step, doubling to ``max_poll`` while idle
        self.poll, self.max_poll = float(poll), float(max_poll)
        #: most messages ingested in one turn (the rest wait for the next step, in order)
        self.batch = int(batch)
        #: send a turn's final answer to whoever triggered it, if the agent did not message them
        self.auto_reply = auto_reply
        #: consecutive failed turns after which a member is marked ``failed`` and the lead told
        self.max_failures = int(max_failures)
        #: most members this worker holds at once (``None``: no limit)
        self.capacity = capacity
        #: serve only these members (``None``: every member)
        self.only = set(members) if members is not None else None
        self._roles: dict[str, str] = {}
        self._graphs: dict[tuple[str, int, str], Any] = {}
        self._roster_nonce = ""
        self._riders: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}
        self._delivered: dict[str, dict[str, int]] = {}
        self._failures: dict[str, int] = {}
        self._fresh: set[str] = set()
        self._skip_until: dict[str, float] = {}
        self._shut: dict[str, str] = {}
        #: members paused at an ``interrupt()``: name -> [(interrupt id, value)], and whom we asked
        self._waiting: dict[str, list[tuple[str, Any]]] = {}
        self._asked: dict[str, str | None] = {}
        self._step_lock = threading.Lock()

    @staticmethod
    def _no_build(saver: Any) -> Any:  # pragma: no cover - graph_for is overridden
        raise AssertionError("TeamWorker builds graphs per role")

    # -- graphs ------------------------------------------------------------------------------------------
    def _name(self, thread_id: str) -> str:
        return thread_id.split("/", 1)[1]

    def _ride(self, thread_id: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def ride(extra: dict[str, Any]) -> dict[str, Any]:
            rider = self._riders.get(thread_id)
            return rider(extra) if rider is not None else extra

        return ride

    def graph_for(self, lease: Lease) -> Any:
        """The member's graph on a saver fenced by ``lease`` that also carries the current turn's
        ack (compiled once per lease epoch and roster version)."""
        key = (lease.thread_id, lease.epoch, self._roster_nonce)
        graph = self._graphs.get(key)
        if graph is None:
            role = self._roles.get(self._name(lease.thread_id))
            if role not in self.builds:
                raise ConflictError(
                    f"member {self._name(lease.thread_id)!r} has role {role!r}, which this worker cannot run "
                    f"(it builds {sorted(self.builds)}); give TeamWorker a build for it"
                )
            saver = self.sessions.saver.with_lease(lease).with_head_rider(lease.thread_id, self._ride(lease.thread_id))
            graph = self.builds[role](saver)
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
        """Acquire every member nobody serves (up to ``capacity``). A member another worker holds
        is looked at again only after a third of its lease (or its expiry), and a member that shut
        down only after the roster changes, so idle polls stay cheap in a fleet."""
        now = self.team.clock()
        with self._lock:
            held = set(self.leases)
        for name in roster.names():
            member = roster.members[name]
            thread = self.team.thread_id(name)
            self._roles[name] = member.role
            if thread in held or member.state == "failed" or member.role not in self.builds:
                continue
            if self.only is not None and name not in self.only:
                continue
            if self.capacity is not None and len(held) >= self.capacity:
                return
            if self._skip_until.get(name, 0.0) > now:
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
            self._hold(lease)
            self._fresh.add(name)
            held.add(thread)

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
                count = self.team._run(self.team._plan_count_resume(name, lease.epoch, cid))
                if count > self.max_failures:
                    raise PoisonStepError(
                        f"{count - 1} attempts to finish step {cid} of {name!r} did not complete "
                        "(the workers running it died or failed)"
                    )
        return super().settle(thread_id, config)

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
                    self._reply(member, graph, cfg, state.values)
                self._deliver(member, lease, graph, cfg)
            self._paused(member, interrupts)
            self._fresh.discard(name)
        elif name in self._waiting and self._asked.get(name) != roster.lead:
            self._paused(member, self._waiting[name])  # the lead changed: ask the new one
        waiting = name in self._waiting
        # a paused member looks for the answer among everything pending, not just one batch
        receipt = self.team._run(self.team._plan_receive(name, limit=None if waiting else self.batch, holder=True))
        ingested = 0
        if receipt is not None:
            sel = receipt.selection
            if sel.done:
                self.team._run(self.team._plan_discard(name, sel.done))
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

    def _owed(self, member: Member, ready: list[Message]) -> dict[str, str]:
        """Who this turn owes an automatic reply: each member who sent one of ``ready`` (not an
        automatic reply or an event), mapped to the id of their last message."""
        if not self.auto_reply:
            return {}
        roster = self.team.roster(refresh=False)
        return {m.sender: m.id for m in ready
                if m.type not in EVENT_TYPES and m.sender != member.name and m.sender in roster.members}  # fmt: skip

    def _turn(self, member: Member, lease: Lease, graph: Any, ready: list[Message]) -> None:
        name, thread = member.name, lease.thread_id
        turn = secrets.token_hex(8)
        cfg = self._config(thread, {"configurable": {TURN_KEY: turn}})
        payload: dict[str, Any] = {"messages": [m.as_human_message() for m in ready]}
        owed = self._owed(member, ready)
        outbox = OUTBOX_CHANNEL in getattr(graph, "channels", {})
        if outbox:
            # Committed with the input: what was delivered (trims the outbox) and who is owed a
            # reply (cleared by the agent's own send to them, or by the automatic reply).
            payload[OUTBOX_CHANNEL] = {"dispatched": dict(self._delivered.get(name) or {}), "owe": owed}
        self._riders[thread] = ack_rider(thread, ready, turn, self.team.clock(), self.team.window)
        try:
            result = graph.invoke(payload, cfg, durability=self.durability)
        finally:
            self._riders.pop(thread, None)
        # committed: the messages are in the conversation and acked
        self.team._run(self.team._plan_discard(name, ready))
        self._after(member, lease, graph, cfg, ready, result, owed)

    def _after(self, member: Member, lease: Lease, graph: Any, cfg: dict[str, Any], ready: list[Message],
               result: Any, owed: dict[str, str]) -> None:  # fmt: skip
        """After a committed turn: pay replies and deliver, then ask for approval if it paused
        (in that order, so the lead gets what the agent sent before the question)."""
        name = member.name
        interrupts = list((result or {}).get("__interrupt__") or []) if isinstance(result, dict) else []
        paused = bool(interrupts)  # no final answer yet: replies wait for the resume
        outbox = OUTBOX_CHANNEL in getattr(graph, "channels", {})
        values = result if isinstance(result, dict) and OUTBOX_CHANNEL in result else None
        if outbox:
            if not paused and self._reply(member, graph, cfg, values):
                values = None  # the reply was added to the outbox: read it back
            self._deliver(member, lease, graph, cfg, values)
        elif owed and not paused:  # a graph without an outbox: direct sends, named by the trigger
            final = _final_answer((result or {}).get("messages") or graph.get_state(cfg).values.get("messages") or [])
            for to, trigger in owed.items():
                self.team.send(to, final or f"[{name} ended its turn without an answer]", sender=name,
                               kind="auto_reply", reply_to=trigger, idempotency_key=f"auto:{trigger}")  # fmt: skip
        self._paused(member, [(i.id, i.value) for i in interrupts])

    # -- plan approval: interrupt() and Command(resume=...) ----------------------------------------------
    def _request_key(self, member: Member, interrupt_id: str) -> str:
        return f"plan:{self.team.thread_id(member.name)}:{interrupt_id}"

    def _paused(self, member: Member, interrupts: list[tuple[str, Any]]) -> None:
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
            self.team.send(lead, content, sender=member.name, kind="plan_request",
                           idempotency_key=self._request_key(member, iid),
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
        answers: dict[str, str] = {}
        for m in ready:
            iid = by_request.get(m.reply_to or "")
            if iid is None and m.type == "plan_response":
                iid = next((i for i, _ in waiting if i not in answers), None)
            if iid is not None and iid not in answers:
                answers[iid] = m.content
        if not answers:
            return 0
        resume: Any = next(iter(answers.values())) if len(waiting) == 1 else answers
        turn = secrets.token_hex(8)
        cfg = self._config(thread, {"configurable": {TURN_KEY: turn}})
        owed = self._owed(member, [m for m in ready if m.reply_to not in by_request and m.type != "plan_response"])
        update: dict[str, Any] = {"messages": [m.as_human_message() for m in ready]}
        if OUTBOX_CHANNEL in getattr(graph, "channels", {}):
            update[OUTBOX_CHANNEL] = {"dispatched": dict(self._delivered.get(name) or {}), "owe": owed}
        self._riders[thread] = ack_rider(thread, ready, turn, self.team.clock(), self.team.window)
        try:
            result = graph.invoke(Command(resume=resume, update=update), cfg, durability=self.durability)
        finally:
            self._riders.pop(thread, None)
        self.team._run(self.team._plan_discard(name, ready))
        self._after(member, lease, graph, cfg, ready, result, owed)
        return len(ready)

    def _reply(self, member: Member, graph: Any, cfg: dict[str, Any], values: dict[str, Any] | None) -> bool:
        """Pay the automatic replies the committed state still owes: the turn's final answer to
        each member who triggered it and was not messaged by it. Recorded in the outbox by one
        fenced update, so a worker that dies before or after it neither loses nor doubles the
        reply: the next owner finds the obligation (or the entry) in the committed state."""
        if values is None:
            values = graph.get_state(cfg).values
        owed = (values.get(OUTBOX_CHANNEL) or {}).get("owed") or {}
        if not owed:
            return False
        final = _final_answer(values.get("messages") or []) or f"[{member.name} ended its turn without an answer]"
        entries = [{"id": message_id(self.team.team_id, member.name, "auto", trigger), "to": to, "content": final,
                    "type": "auto_reply", "reply_to": trigger, "created_at": self.team.clock(),
                    "stream": stream_name(self.team, member.name, to)}
                   for to, trigger in sorted(owed.items())]  # fmt: skip
        _update_outbox(graph, cfg, entries)
        return True

    def _deliver(
        self, member: Member, lease: Lease, graph: Any, cfg: dict[str, Any], values: dict[str, Any] | None = None
    ) -> None:
        """Deliver the committed outbox entries this worker has not delivered yet."""
        if OUTBOX_CHANNEL not in getattr(graph, "channels", {}):
            return
        if values is None:
            values = graph.get_state(cfg).values
        box = values.get(OUTBOX_CHANNEL) or {}
        marks = self._delivered.setdefault(member.name, {})
        todo = [e for e in box.get("pending", []) if e["seq"] > marks.get(_stream_key(e), 0)]
        if not todo:
            return
        messages = [
            Message(id=e["id"], team=self.team.team_id, sender=member.name, to=e["to"], content=e["content"],
                    type=e.get("type") or "message", reply_to=e.get("reply_to"), seq=e["seq"],
                    stream=e.get("stream") or f"{member.name}@{member.incarnation}", order=next_order(self.team.clock),
                    created_at=float(e.get("created_at") or 0.0), sender_epoch=lease.epoch)
            for e in todo
        ]  # fmt: skip
        self.team._run(self.team._plan_deliver(messages))
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
        idle steps back off from ``poll`` to ``max_poll``. Then hands the members over."""
        delay = self.poll
        while not self.stopping and not (until is not None and until()):
            busy = self.step()
            delay = self.poll if busy else min(delay * 2, self.max_poll)
            if not busy:
                self._stopping.wait(delay)
        return self.stop() if not self._handed else []

    async def astep(self) -> int:
        """:meth:`step` on a worker thread, for asyncio programs."""
        return await asyncio.to_thread(self.step)

    async def arun(self, *, until: Callable[[], bool] | None = None) -> list[str]:
        """Async twin of :meth:`run`: steps in a worker thread, sleeps on the event loop."""
        delay = self.poll
        while not self.stopping and not (until is not None and until()):
            busy = await self.astep()
            delay = self.poll if busy else min(delay * 2, self.max_poll)
            if not busy:
                await asyncio.sleep(delay)
        return self.stop() if not self._handed else []

    _handed = False

    def stop(self, *, to_owner: str | None = None, next_step: str = "continue the conversation") -> list[str]:
        self._handed = True
        with self._step_lock:  # let a running step finish its turn first
            return super().stop(to_owner=to_owner, next_step=next_step)


def _update_outbox(graph: Any, cfg: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    """Record outbox entries in one fenced checkpoint (``update_state``). When the last step ran
    several nodes in parallel LangGraph cannot tell which one the update comes from; any of them
    will do (they all ended the run), so name the first."""
    try:
        graph.update_state(cfg, {OUTBOX_CHANNEL: entries})
    except InvalidUpdateError:
        seen = graph.checkpointer.get_tuple(cfg).checkpoint.get("versions_seen") or {}
        last = {n: max(v.values(), default=None) for n, v in seen.items() if n in graph.nodes and v}
        top = max((v for v in last.values() if v is not None), default=None)
        node = sorted(n for n, v in last.items() if v == top)[0]
        graph.update_state(cfg, {OUTBOX_CHANNEL: entries}, as_node=node)


def _final_answer(messages: Sequence[Any]) -> str | None:
    for m in reversed(messages):
        if isinstance(m, AIMessage):
            if m.tool_calls:
                return None
            content = m.content
            if not isinstance(content, str):  # content blocks: keep the text ones
                content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
            return content or None
    return None
