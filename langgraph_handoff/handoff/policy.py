"""The decisions of a handoff graph, as pure functions of its state (no I/O, no LangGraph).

``HandoffPolicy.entry`` picks the agent that starts a user turn; ``HandoffPolicy.plan`` is what the
``handoff_router`` node does after every agent step: choose the first valid handoff, answer the
others, check the circuit breakers, and say where the conversation goes next. The graph module
only wires these into nodes, for both the sync and the async path.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.graph import END

from langgraph_handoff.errors import InvalidHandoffError
from langgraph_handoff.handoff.agents import HandoffAgent
from langgraph_handoff.handoff.audit import AuditPolicy
from langgraph_handoff.handoff.briefing import BoundCheck, BriefingVerdict
from langgraph_handoff.handoff.history import orphaned_call_stubs
from langgraph_handoff.handoff.model import Handoff
from langgraph_handoff.routing.decision import RouteDecision
from langgraph_handoff.routing.hybrid import HybridRouter
from langgraph_handoff.routing.rules import RuleRouter

logger = logging.getLogger("langgraph_handoff.handoff")

#: name of the router node; it signs the message that ends a turn after a breach
ROUTER = "handoff_router"

#: how often per user turn an agent is sent back to fix a handoff the router refused
MAX_RETRIES = 2

#: names the ids of handoffs and turns derived from a LangGraph task (see ``HandoffPolicy.ids``)
_ID_SPACE = uuid.UUID("6f1d0c2e-5b1a-4f6e-9a51-3c8e2d7b4a90")


def ids(seed: str | None) -> Callable[[str], str]:
    """Ids for what one graph step makes, derived from its LangGraph task id (``seed``): a step
    replayed after a crash or a takeover runs the same task, so it makes the same handoff, with
    the same id (and the same audit decision). Without a seed, fresh random ids.

    >>> make = ids("task-1")
    >>> make("handoff") == ids("task-1")("handoff") != ids("task-2")("handoff")
    True
    """
    if not seed:
        return lambda _: uuid.uuid4().hex
    return lambda what: uuid.uuid5(_ID_SPACE, f"{seed}:{what}").hex


Event = tuple[str, dict[str, Any]]


@dataclass
class Plan:
    """What to do next: ``goto`` (an agent or ``END``), the state ``update`` and the ``events``
    to stream and log."""

    goto: str
    update: dict[str, Any]
    events: list[Event] = field(default_factory=list)


@dataclass
class HandoffPolicy:
    agents: dict[str, HandoffAgent]
    router: Any
    fallback: str | None
    default_agent: str
    max_handoffs_per_turn: int
    ping_pong: bool
    time_budget: float | None
    reroute: Literal["never", "rules", "always"]
    clock: Callable[[], float]
    fallback_message: str
    #: wall-clock seconds a user turn may take (waiting at an interrupt excluded), or None
    turn_deadline: float | None = None
    #: seconds since the epoch (UTC), for the turn deadline: it is kept in state, so it holds
    #: on whichever worker runs the next step
    wall_clock: Callable[[], float] = time.time
    #: the briefing check bound to these agents, or None
    briefing: BoundCheck | None = None
    #: which handoffs are audited, or None
    audit: AuditPolicy | None = None
    #: the router's encoder, named for the record of each routing decision
    encoder: str | None = None

    def handoff(self, make_id: Callable[[str], str], **fields: Any) -> Handoff:
        """A handoff this step makes, with its id and whether it is audited."""
        handoff = Handoff(id=make_id(f"handoff:{fields.get('target')}"), **fields)
        if self.audit is None:
            return handoff
        why = self.audit.why({"trigger": handoff.trigger}, handoff.check, handoff.id)
        return handoff.model_copy(update={"audit": bool(why)}) if why else handoff

    def late(self, state: Mapping[str, Any]) -> str | None:
        """Why the turn is past its deadline, or None."""
        deadline = state.get("turn_deadline_at")
        if self.turn_deadline is None or not isinstance(deadline, int | float):
            return None
        now = self.wall_clock()
        if now <= deadline:
            return None
        return f"turn deadline of {self.turn_deadline:g}s passed ({now - deadline:.1f}s over)"

    @property
    def rules(self) -> RuleRouter | None:
        if isinstance(self.router, RuleRouter):
            return self.router
        if isinstance(self.router, HybridRouter):
            return self.router.rules
        return None

    def router_for(self, state: Mapping[str, Any]) -> Any:
        """The router that runs at the start of this turn, if any."""
        if self.router is None:
            return None
        if state.get("active_agent") in self.agents and self.reroute != "always":
            return self.rules if self.reroute == "rules" else None
        return self.router

    def usable(self, name: str | None, *, besides: str | None = None) -> bool:
        return name is not None and name != besides and name in self.agents and self.agents[name].is_enabled()

    # -- the start of a turn --------------------------------------------------------------------

    def _choose(self, state: Mapping[str, Any], decision: RouteDecision | None) -> RouteDecision:
        active = state.get("active_agent")
        if (decision is None or decision.is_fallback) and active in self.agents:
            return RouteDecision(
                target=active, score=1.0, method="sticky", reason="the next user turn stays with the last active agent"
            )
        if decision is None:
            return RouteDecision(
                target=self.default_agent,
                method="fallback",
                reason="no router: the conversation starts at the default agent",
            )
        if decision.target in self.agents:
            return decision
        # the router has no fallback of its own (target None) or named a non-agent: start where
        # conversations start by default; the graph's ``fallback`` is for tripped breakers
        why = (
            decision.reason or "the router had no target"
        ) + f"; starting at the default agent {self.default_agent!r}"
        return decision.model_copy(update={"target": self.default_agent, "method": "fallback", "reason": why})

    def turn_clock(self, make_id: Callable[[str], str] | None = None) -> dict[str, Any]:
        """The state a new user turn starts its clock with: its id (breaker events are named
        after it), its deadline (UTC seconds) and the time of its last step."""
        now = self.wall_clock()
        deadline = now + self.turn_deadline if self.turn_deadline is not None else None
        return {"turn_id": (make_id or ids(None))("turn"), "turn_deadline_at": deadline, "turn_last_at": now}

    def entry(self, state: Mapping[str, Any], decision: RouteDecision | None, seed: str | None = None) -> Plan:
        make_id = ids(seed)
        chosen = self._choose(state, decision)
        target = chosen.target
        assert target is not None
        if not self.agents[target].is_enabled():
            substitute = next((n for n in [self.fallback, self.default_agent, *self.agents] if self.usable(n)), None)
            if substitute is None:  # nobody can take the turn: say so instead of using a disabled agent
                reason = f"{target!r} is disabled and no agent is available"
                record = {"source": None, "wanted": target, "reason": reason, "target": None, "at": self.clock(),
                          "at_utc": self.wall_clock(), "id": make_id("breaker")}  # fmt: skip
                message = AIMessage(self.fallback_message.replace("{reason}", reason), name=ROUTER)
                ended: dict[str, Any] = {
                    "routing": [chosen.model_dump(mode="json")],
                    "breakers": [record],
                    "messages": [message],
                    "pending_handoffs": [],
                }
                return Plan(END, ended, [("breaker", record)])
            chosen = chosen.model_copy(
                update={
                    "target": substitute,
                    "method": "fallback",
                    "reason": f"{target!r} is disabled; {chosen.reason}".rstrip("; "),
                }
            )
            target = substitute
        update: dict[str, Any] = {
            "active_agent": target,
            "routing": [chosen.model_dump(mode="json")],
            "turn_chain": [target],
            "turn_hops": 0,
            "turn_retries": 0,
            "turn_elapsed": 0.0,
            "pending_handoffs": [],
            **self.turn_clock(make_id),
        }
        if chosen.method != "sticky" and target != state.get("active_agent"):
            handoff = self.handoff(
                make_id, source=state.get("active_agent"), target=target, reason=chosen.reason, chain=[target],
                trigger="route",
            )  # fmt: skip
            update["handoffs"] = [handoff.model_dump(mode="json")]
        return Plan(target, update, [("route", {**chosen.model_dump(mode="json"), "encoder": self.encoder})])

    # -- after an agent step ------------------------------------------------------------------------

    def check_request(self, source: str | None, req: Mapping[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
        """``(error, validated payload)`` for one request."""
        target = req.get("target")
        spec = self.agents.get(target) if isinstance(target, str) else None
        if spec is None:
            return f"unknown agent {target!r}; agents are {sorted(self.agents)}", None
        if target == source:
            return f"{target!r} cannot hand off to itself", None
        src = self.agents.get(source) if source else None
        if src is not None and src.handoffs is not None and target not in src.handoffs:
            return f"{source!r} may only hand off to {list(src.handoffs)}", None
        if not spec.is_enabled():
            return f"agent {target!r} is not available right now", None
        try:
            return None, spec.validate(req.get("payload"))
        except InvalidHandoffError as exc:
            return str(exc), None

    def breaker(self, chain: list[str], hops: int, target: str, elapsed: float) -> str | None:
        if self.time_budget is not None and elapsed > self.time_budget:
            return f"time budget of {self.time_budget:g}s for this turn is spent ({elapsed:.1f}s of agent time)"
        if hops >= self.max_handoffs_per_turn:
            return f"{hops} handoffs this turn reached the limit of {self.max_handoffs_per_turn}"
        if self.ping_pong and len(chain) >= 2 and chain[-2] == target:
            return f"ping-pong: {chain[-2]} -> {chain[-1]} -> {target}"
        return None

    def to_check(self, state: Mapping[str, Any]) -> list[tuple[int, str, str, str]]:
        """The pending requests the briefing check judges before :meth:`plan` runs, as
        ``(index, target, briefing, reason)``: an agent's requests to a known agent. (The check
        may call an encoder, so the graph runs it, in its own sync or async mode.)"""
        if self.briefing is None:
            return []
        out = []
        for i, req in enumerate(state.get("pending_handoffs") or []):
            target = req.get("target")
            if "failure" not in req and isinstance(target, str) and target in self.agents:
                out.append((i, target, str(req.get("briefing") or ""), str(req.get("reason") or "")))
        return out

    def plan(
        self,
        state: Mapping[str, Any],
        verdicts: Mapping[int, BriefingVerdict] | None = None,
        seed: str | None = None,
    ) -> Plan:
        """The ``handoff_router`` node: execute the first valid handoff of the agent's step.
        ``verdicts``: the briefing check of the requests :meth:`to_check` named. ``seed``: the
        step's LangGraph task id, which the ids of what it makes derive from."""
        make_id = ids(seed)
        verdicts = verdicts or {}
        messages: list[BaseMessage] = list(state.get("messages") or [])
        source = state.get("active_agent")
        chain = list(state.get("turn_chain") or ([source] if source else []))
        hops = int(state.get("turn_hops") or 0)
        pending = list(state.get("pending_handoffs") or [])
        out: list[BaseMessage] = list(orphaned_call_stubs(messages))
        if out:
            logger.warning("agent %r left %d tool call(s) unanswered; answered them with stubs", source, len(out))
        update: dict[str, Any] = {"pending_handoffs": [], "messages": out, "turn_last_at": self.wall_clock()}
        late = self.late(state)
        if not pending and late is None:
            return Plan(END, update)

        failure = next((r["failure"] for r in pending if "failure" in r), None) or late
        winner: dict[str, Any] | None = None
        payload: dict[str, Any] | None = None
        verdict: BriefingVerdict | None = None
        problems: list[tuple[dict[str, Any], str]] = []
        final = False  # a problem the model gets no second go at (the briefing check's "fallback")
        events: list[Event] = []
        on_fail = self.briefing.check.on_fail if self.briefing is not None else "retry"
        for i, req in enumerate(pending):
            if "failure" in req:
                continue
            if winner is not None:
                note = f"Not transferred: only the first handoff of a message runs, and it went to {winner['target']}."
                out += _rewrite(messages, req.get("tool_call_id"), note)
                continue
            err, data = self.check_request(source, req)
            judged = verdicts.get(i)
            if err is None and judged is not None:
                events.append(("check", {"source": source, "target": req.get("target"), **judged.as_record()}))
                if not judged.ok and on_fail != "warn":
                    err, final = judged.reason, final or on_fail == "fallback"
            if err is None:
                winner, payload, verdict = req, data, judged
            else:
                problems.append((req, err))

        retries = int(state.get("turn_retries") or 0)
        elapsed = float(state.get("turn_elapsed") or 0.0)
        out_of_time = self.time_budget is not None and elapsed > self.time_budget
        if out_of_time and failure is None and winner is None:
            failure = f"time budget of {self.time_budget:g}s for this turn is spent ({elapsed:.1f}s of agent time)"
        if winner is None and failure is None and problems and not final:
            from_model = all(req.get("tool_call_id") for req, _ in problems)
            if from_model and self.usable(source) and retries < MAX_RETRIES:
                # the model asked for something the router refuses (a tool built without the
                # target's schema, a target disabled since, a briefing that says too little):
                # give it the error and another go
                for req, err in problems:
                    out += _rewrite(
                        messages,
                        req.get("tool_call_id"),
                        f"Not transferred: {err}. Fix the call, or help the user yourself.",
                    )
                update["turn_retries"] = retries + 1
                assert source is not None
                return Plan(
                    source, update, [*events, ("retry", {"source": source, "errors": [e for _, e in problems]})]
                )
        for req, err in problems:
            out += _rewrite(messages, req.get("tool_call_id"), f"Not transferred: {err}.")

        if failure is not None:
            breach: str | None = failure
        elif winner is None:
            breach = "invalid handoff: " + "; ".join(e for _, e in problems)
        else:
            breach = self.breaker(chain, hops, winner["target"], float(state.get("turn_elapsed") or 0.0))
        if breach is None:
            assert winner is not None
            handoff = self.handoff(
                make_id,
                source=source,
                target=winner["target"],
                briefing=winner.get("briefing") or "",
                payload=payload,
                reason=winner.get("reason") or "",
                chain=[*chain, winner["target"]],
                hop=hops + 1,
                trigger="node" if winner.get("tool_call_id") is None else "tool",
                tool_call_id=winner.get("tool_call_id"),
                check=verdict.as_record() if verdict is not None else None,
            )
            return self._move(handoff, update, out, events)
        # the turn is degraded now: the fallback answers without the clock running against it
        update["turn_deadline_at"] = None
        tripped = self._trip(breach, source, chain, hops, winner, payload, messages, update, out, make_id)
        # stable across a replay of this step: a receiver of the notification can drop repeats
        tripped.update["breakers"][0]["id"] = f"{state.get('turn_id') or 'turn'}:{hops}"
        tripped.events[:0] = events
        return tripped

    def _trip(
        self,
        breach: str,
        source: str | None,
        chain: list[str],
        hops: int,
        winner: Mapping[str, Any] | None,
        payload: dict[str, Any] | None,
        messages: Sequence[BaseMessage],
        update: dict[str, Any],
        out: list[BaseMessage],
        make_id: Callable[[str], str],
    ) -> Plan:
        """A circuit breaker tripped: send the conversation to the fallback, or end the turn."""
        wanted = winner["target"] if winner else None
        if winner is not None:
            out += _rewrite(messages, winner.get("tool_call_id"), f"Not transferred to {wanted}: {breach}.")
        target = self.fallback if self.usable(self.fallback, besides=source) else None
        record = {"source": source, "wanted": wanted, "reason": breach, "target": target, "at": self.clock(),
                  "at_utc": self.wall_clock(), "chain": list(chain), "hop": hops}  # fmt: skip
        update["breakers"] = [record]
        events: list[Event] = [("breaker", record)]
        if target is None:
            # no usable fallback (none, disabled, or the fallback itself tripped): end the turn politely
            out.append(AIMessage(self.fallback_message.replace("{reason}", breach), name=ROUTER))
            return Plan(END, update, events)
        briefing = f"Automatic transfer because {breach}."
        if winner is not None:
            briefing += f" {source} had asked to hand over to {wanted}: {winner.get('briefing') or ''}".rstrip()
        handoff = self.handoff(
            make_id,
            source=source,
            target=target,
            briefing=briefing,
            payload=payload,
            reason=breach,
            chain=[*chain, target],
            hop=hops + 1,
            trigger="breaker",
            tool_call_id=winner.get("tool_call_id") if winner else None,
        )
        return self._move(handoff, update, out, events)

    def _move(self, handoff: Handoff, update: dict[str, Any], out: list[BaseMessage], events: list[Event]) -> Plan:
        out.append(handoff.to_message())
        update.update(
            messages=out,
            handoffs=[handoff.model_dump(mode="json")],
            active_agent=handoff.target,
            turn_chain=handoff.chain,
            turn_hops=handoff.hop,
        )
        return Plan(handoff.target, update, [*events, ("handoff", handoff.model_dump(mode="json"))])


def _find_tool_message(messages: Sequence[BaseMessage], call_id: str) -> ToolMessage | None:
    for msg in reversed(messages):
        if isinstance(msg, ToolMessage) and msg.tool_call_id == call_id:
            return msg
    return None


def _rewrite(messages: Sequence[BaseMessage], call_id: str | None, text: str) -> list[ToolMessage]:
    """Replace a handoff tool's "Handing the conversation to X" with what really happened (same
    message id, so ``add_messages`` replaces it in place: still exactly one answer per call)."""
    if not call_id:
        return []
    old = _find_tool_message(messages, call_id)
    if old is None:
        return []
    return [ToolMessage(text, tool_call_id=call_id, name=old.name, id=old.id, status="error", artifact=None)]
