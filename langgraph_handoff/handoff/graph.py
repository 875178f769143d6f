"""``create_handoff_graph``: agents that route, hand off among themselves and cannot loop forever.

Shape of the graph::

    START -> handoff_entry -> <agent> -> handoff_router -> <agent> -> handoff_router -> ... -> END

- ``handoff_entry`` starts every user turn. The first turn is routed by your router (rules,
  embeddings, ...); later turns stay with the agent that was active last ("sticky"), except that
  rule hits such as "transfer me to a human" still apply.
- Agents never jump themselves. A handoff is *recorded* (a handoff tool's ToolMessage, or a plain
  node's :func:`handoff_to`) and ``handoff_router`` executes it after the agent's step: it picks the
  first valid request, answers the others, checks the circuit breakers, appends the briefing
  message and moves on. One place decides, so history stays valid and decisions are auditable.
- Circuit breakers: at most ``max_handoffs_per_turn`` handoffs per user turn (default 3), no
  A -> B -> A ping-pong, and an optional wall-clock ``time_budget`` per turn. A breach sends the
  conversation to ``fallback`` with the reason; it never raises at the user.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.callbacks.manager import adispatch_custom_event, dispatch_custom_event
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command

from langgraph_handoff.errors import InvalidHandoffError
from langgraph_handoff.handoff.agents import REQUEST_KEY, HandoffAgent, build_tool_agent, tools_for
from langgraph_handoff.handoff.history import orphaned_call_stubs
from langgraph_handoff.handoff.model import Handoff, is_handoff_message
from langgraph_handoff.handoff.tools import pending_handoff_calls
from langgraph_handoff.routing.decision import RouteDecision
from langgraph_handoff.routing.hybrid import HybridRouter
from langgraph_handoff.routing.rules import RuleRouter

logger = logging.getLogger("langgraph_handoff.handoff")

ENTRY = "handoff_entry"
ROUTER = "handoff_router"
#: name of the custom stream/callback events this graph emits ("route" and "handoff" kinds)
EVENT = "langgraph_handoff"


def _append(left: list[Any] | None, right: list[Any] | None) -> list[Any]:
    return [*(left or []), *(right or [])]


class HandoffState(TypedDict, total=False):
    """Graph state. ``handoffs`` and ``routing`` are the audit trail (every handoff and every
    routing decision, across turns); ``turn_*`` describe the current user turn.

    The audit records are stored as plain JSON-ready dicts (``Handoff.model_dump(mode="json")``),
    not as pydantic objects: a checkpoint then never depends on our class paths (a rename or a
    strict msgpack allowlist cannot make old threads unreadable) and the state serialises to JSON
    as it is. Read them back as models with :func:`handoff_log` and :func:`routing_log`.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    active_agent: str | None
    handoffs: Annotated[list[dict[str, Any]], _append]
    routing: Annotated[list[dict[str, Any]], _append]
    turn_chain: list[str]
    turn_hops: int
    turn_started_at: float
    pending_handoffs: list[dict[str, Any]]


def handoff_log(state: Mapping[str, Any]) -> list[Handoff]:
    """Every handoff recorded in a handoff graph's state, oldest first, as :class:`Handoff` models."""
    return [Handoff.from_data(h) for h in state.get("handoffs") or []]


def routing_log(state: Mapping[str, Any]) -> list[RouteDecision]:
    """Every routing decision recorded in a handoff graph's state, oldest first."""
    return [RouteDecision.from_data(d) for d in state.get("routing") or []]


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return " ".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, str | dict))


def _user_text(messages: Sequence[BaseMessage]) -> str:
    for msg in reversed(messages):
        if isinstance(msg, HumanMessage) and not is_handoff_message(msg):
            return _text(msg)
    return ""


@dataclass
class _Settings:
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

    @property
    def rules(self) -> RuleRouter | None:
        if isinstance(self.router, RuleRouter):
            return self.router
        if isinstance(self.router, HybridRouter):
            return self.router.rules
        return None

    # -- pure decisions, shared by the sync and async nodes -----------------------------------

    def entry(self, state: Mapping[str, Any], decision: RouteDecision | None) -> tuple[str, RouteDecision]:
        active = state.get("active_agent")
        if (decision is None or decision.is_fallback) and active in self.agents:
            return active, RouteDecision(
                target=active, score=1.0, method="sticky", reason="the next user turn stays with the last active agent"
            )
        if decision is None:
            return self.default_agent, RouteDecision(
                target=self.default_agent,
                method="fallback",
                reason="no router: the conversation starts at the default agent",
            )
        if decision.target in self.agents:
            return decision.target, decision
        # the router has no fallback of its own (target None) or named a non-agent: start where
        # conversations start by default; the graph's ``fallback`` is for tripped breakers
        target = self.default_agent
        why = (decision.reason or "the router had no target") + f"; starting at the default agent {target!r}"
        return target, RouteDecision(
            target=target,
            method="fallback",
            reason=why,
            scores=decision.scores,
            score=decision.score,
            threshold=decision.threshold,
            margin=decision.margin,
        )

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
            return f"agent {target!r} is disabled", None
        try:
            return None, spec.validate(req.get("payload"))
        except InvalidHandoffError as exc:
            return str(exc), None

    def breaker(self, chain: list[str], hops: int, target: str, started: float | None, now: float) -> str | None:
        if self.time_budget is not None and started is not None and now - started > self.time_budget:
            return f"time budget of {self.time_budget:g}s for this turn is spent ({now - started:.1f}s elapsed)"
        if hops >= self.max_handoffs_per_turn:
            return f"{hops} handoffs this turn reached the limit of {self.max_handoffs_per_turn}"
        if self.ping_pong and len(chain) >= 2 and chain[-2] == target:
            return f"ping-pong: {chain[-2]} -> {chain[-1]} -> {target}"
        return None


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


def _plan(
    settings: _Settings, state: Mapping[str, Any]
) -> tuple[str, dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """What ``handoff_router`` does: ``(goto, state update, events)``. Pure apart from the clock."""
    messages: list[BaseMessage] = list(state.get("messages") or [])
    source = state.get("active_agent")
    chain = list(state.get("turn_chain") or ([source] if source else []))
    hops = int(state.get("turn_hops") or 0)
    pending = list(state.get("pending_handoffs") or [])
    out: list[BaseMessage] = list(orphaned_call_stubs(messages))
    if out:
        logger.warning("agent %r left %d tool call(s) unanswered; answered them with stubs", source, len(out))
    update: dict[str, Any] = {"pending_handoffs": []}
    if not pending:
        update["messages"] = out
        return END, update, []

    winner: dict[str, Any] | None = None
    payload: dict[str, Any] | None = None
    problems: list[str] = []
    for req in pending:
        if winner is not None:
            out += _rewrite(
                messages,
                req.get("tool_call_id"),
                f"Not transferred: only the first handoff of a message runs, and it went to {winner['target']}.",
            )
            continue
        err, data = settings.check_request(source, req)
        if err is None:
            winner, payload = req, data
        else:
            problems.append(err)
            out += _rewrite(messages, req.get("tool_call_id"), f"Not transferred: {err}.")

    now = settings.clock()
    breach = (
        settings.breaker(chain, hops, winner["target"], state.get("turn_started_at"), now)
        if winner is not None
        else "invalid handoff: " + "; ".join(problems)
    )
    events: list[tuple[str, dict[str, Any]]] = []
    if breach is None:
        assert winner is not None
        target = winner["target"]
        handoff = Handoff(
            source=source,
            target=target,
            briefing=winner.get("briefing") or "",
            payload=payload,
            reason=winner.get("reason") or "",
            chain=[*chain, target],
            hop=hops + 1,
            trigger="node" if winner.get("tool_call_id") is None else "tool",
            tool_call_id=winner.get("tool_call_id"),
        )
    else:
        wanted = winner["target"] if winner else None
        if winner is not None:
            out += _rewrite(messages, winner.get("tool_call_id"), f"Not transferred to {wanted}: {breach}.")
        target = settings.fallback if settings.fallback and settings.fallback != source else END
        if target == END:
            # the fallback itself (or a graph without one) tripped a breaker: end the turn politely
            out.append(AIMessage(settings.fallback_message.format(reason=breach), name=ROUTER))
            logger.warning("handoff by %r stopped, turn ended: %s", source, breach)
            events.append(("breaker", {"source": source, "wanted": wanted, "reason": breach, "target": None}))
            update.update(messages=out)
            return END, update, events
        briefing = f"Automatic transfer because {breach}."
        if winner is not None:
            briefing += f" {source} had asked to hand over to {wanted}: {winner.get('briefing') or ''}".rstrip()
        handoff = Handoff(
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
        events.append(("breaker", {"source": source, "wanted": wanted, "reason": breach, "target": target}))
        logger.warning("circuit breaker: %s; %r -> fallback %r", breach, source, target)
    out.append(handoff.to_message())
    events.append(("handoff", handoff.model_dump(mode="json")))
    logger.info(
        "handoff %s -> %s (hop %d, chain %s): %s",
        handoff.source,
        handoff.target,
        handoff.hop,
        " -> ".join(handoff.chain),
        handoff.briefing[:200],
    )
    update.update(
        messages=out,
        handoffs=[handoff.model_dump(mode="json")],
        active_agent=target,
        turn_chain=handoff.chain,
        turn_hops=hops + 1,
    )
    return target, update, events


def _emit(config: RunnableConfig, events: list[tuple[str, dict[str, Any]]]) -> None:
    writer = get_stream_writer()
    for kind, data in events:
        writer({EVENT: kind, **data})
        with contextlib.suppress(RuntimeError):  # no parent run to attach the event to
            dispatch_custom_event(f"{EVENT}.{kind}", data, config=config)


async def _aemit(config: RunnableConfig, events: list[tuple[str, dict[str, Any]]]) -> None:
    writer = get_stream_writer()
    for kind, data in events:
        writer({EVENT: kind, **data})
        with contextlib.suppress(RuntimeError):
            await adispatch_custom_event(f"{EVENT}.{kind}", data, config=config)


def _entry_update(
    settings: _Settings, state: Mapping[str, Any], decision: RouteDecision | None
) -> tuple[str, dict[str, Any], list[Any]]:
    target, decision = settings.entry(state, decision)
    update: dict[str, Any] = {
        "active_agent": target,
        "routing": [decision.model_dump(mode="json")],
        "turn_chain": [target],
        "turn_hops": 0,
        "turn_started_at": settings.clock(),
        "pending_handoffs": [],
    }
    events: list[tuple[str, dict[str, Any]]] = [("route", decision.model_dump(mode="json"))]
    if decision.method != "sticky" and target != state.get("active_agent"):
        handoff = Handoff(
            source=state.get("active_agent"),
            target=target,
            reason=decision.reason,
            chain=[target],
            hop=0,
            trigger="route",
        )
        update["handoffs"] = [handoff.model_dump(mode="json")]
    logger.info("route -> %s via %s (%s) scores=%s", target, decision.method, decision.reason, decision.scores)
    return target, update, events


def _agent_node(spec: HandoffAgent, runnable: Any) -> RunnableLambda:
    """Wrap an agent: give it its context view, collect its new messages and handoff requests."""

    def view_of(state: Mapping[str, Any]) -> list[BaseMessage]:
        return spec.policy(list(state.get("messages") or []), spec.name)

    def child_config(config: RunnableConfig, state: Mapping[str, Any]) -> RunnableConfig:
        last = (state.get("handoffs") or [None])[-1]
        last_id = last.get("id") if isinstance(last, Mapping) else None
        return {  # same callbacks, so the agent's runs nest under this node; plus handoff metadata
            **config,
            "metadata": {
                **(config.get("metadata") or {}),
                "handoff_agent": spec.name,
                "handoff_chain": list(state.get("turn_chain") or []),
                "handoff_hop": int(state.get("turn_hops") or 0),
                **({"handoff_id": last_id} if last_id else {}),
            },
        }

    def collect(view: list[BaseMessage], out: Any) -> dict[str, Any]:
        explicit: dict[str, Any] | None = None
        extra: dict[str, Any] = {}
        if isinstance(out, BaseMessage):
            new: list[Any] = [out]
        elif isinstance(out, Mapping):
            out = dict(out)
            explicit = out.pop(REQUEST_KEY, None)
            msgs = out.pop("messages", [])
            msgs = [msgs] if isinstance(msgs, BaseMessage | tuple | str) else list(msgs or [])
            if spec.kind == "function":
                new, extra = msgs, out
            else:  # a graph returns the whole message list: keep what it added
                seen = {m.id for m in view}
                new = [m for m in msgs if getattr(m, "id", None) not in seen]
        elif out is None:
            new = []
        else:
            raise InvalidHandoffError(f"agent {spec.name!r} returned {type(out).__name__}; return a state update dict")
        # sign the agent's replies, so transcripts (and providers that read ``name``) know who spoke
        new = [m.model_copy(update={"name": spec.name}) if isinstance(m, AIMessage) and not m.name else m for m in new]
        requests = [
            {**req, "tool_call_id": cid}
            for cid, req in pending_handoff_calls([m for m in new if isinstance(m, BaseMessage)])
        ]
        if explicit is not None:
            requests.append({**explicit, "tool_call_id": None})
        return {**extra, "messages": new, "pending_handoffs": requests}

    def run(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        view = view_of(state)
        if spec.kind == "function":
            out = spec.agent({**state, "messages": view})
        else:
            out = runnable.invoke({"messages": view}, child_config(config, state))
        return collect(view, out)

    async def arun(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        view = view_of(state)
        if spec.kind == "function":
            out = spec.agent({**state, "messages": view})
            if hasattr(out, "__await__"):
                out = await out
        else:
            out = await runnable.ainvoke({"messages": view}, child_config(config, state))
        return collect(view, out)

    return RunnableLambda(run, arun, name=spec.name)


DEFAULT_FALLBACK_MESSAGE = (
    "I'm sorry, I couldn't pass your request to the right team ({reason}). A colleague will pick it up from here."
)


def build_handoff_graph(
    agents: Sequence[HandoffAgent] | Mapping[str, Any],
    *,
    router: Any = None,
    fallback: str | None = None,
    default_agent: str | None = None,
    max_handoffs_per_turn: int = 3,
    ping_pong: bool = True,
    time_budget: float | None = None,
    reroute: Literal["never", "rules", "always"] = "rules",
    clock: Callable[[], float] = time.time,
    fallback_message: str = DEFAULT_FALLBACK_MESSAGE,
    state_schema: type[Any] = HandoffState,
) -> StateGraph:
    """The uncompiled :class:`~langgraph.graph.StateGraph` behind :func:`create_handoff_graph`
    (add your own nodes or edges, then ``compile``)."""
    specs = (
        [a if isinstance(a, HandoffAgent) else HandoffAgent(name, a) for name, a in agents.items()]
        if isinstance(agents, Mapping)
        else list(agents)
    )
    if not specs:
        raise InvalidHandoffError("create_handoff_graph needs at least one agent")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise InvalidHandoffError(f"agent names must be unique, got {names}")
    for reserved in (ENTRY, ROUTER):
        if reserved in names:
            raise InvalidHandoffError(f"{reserved!r} is the name of a node of the handoff graph; rename that agent")
    by_name = {s.name: s for s in specs}
    for s in specs:
        unknown = [t for t in (s.handoffs or []) if t not in by_name]
        if unknown:
            raise InvalidHandoffError(f"agent {s.name!r} may hand off to unknown agents {unknown}; agents are {names}")
    if fallback is not None and fallback not in by_name:
        raise InvalidHandoffError(f"fallback {fallback!r} is not an agent; agents are {names}")
    if default_agent is not None and default_agent not in by_name:
        raise InvalidHandoffError(f"default_agent {default_agent!r} is not an agent; agents are {names}")
    if max_handoffs_per_turn < 1:
        raise InvalidHandoffError("max_handoffs_per_turn must be at least 1")
    if reroute not in ("never", "rules", "always"):
        raise InvalidHandoffError(f"reroute must be 'never', 'rules' or 'always', got {reroute!r}")
    route_names = {r.name for r in getattr(router, "routes", [])} | set(getattr(router, "targets", []) or [])
    if getattr(router, "rules", None) is not None and hasattr(router.rules, "targets"):
        route_names |= set(router.rules.targets)
    stray = sorted(route_names - set(names))
    if stray:
        raise InvalidHandoffError(f"router routes {stray} are not agents; agents are {names}")
    if router is not None and not (hasattr(router, "route") and hasattr(router, "aroute")):
        raise InvalidHandoffError(
            "router must have route(text) and aroute(text) (a RuleRouter, SemanticRouter, HybridRouter, ...)"
        )

    settings = _Settings(
        agents=by_name,
        router=router,
        fallback=fallback,
        default_agent=default_agent or names[0],
        max_handoffs_per_turn=max_handoffs_per_turn,
        ping_pong=ping_pong,
        time_budget=time_budget,
        reroute=reroute,
        clock=clock,
        fallback_message=fallback_message,
    )

    def pick(state: Mapping[str, Any], text: str) -> Any:
        """Which router (if any) runs on this turn."""
        if router is None:
            return None
        if state.get("active_agent") in by_name and reroute != "always":
            return settings.rules if reroute == "rules" else None
        return router

    def entry(state: dict[str, Any], config: RunnableConfig) -> Command:
        text = _user_text(state.get("messages") or [])
        chosen = pick(state, text)
        decision = chosen.route(text) if chosen is not None else None
        target, update, events = _entry_update(settings, state, decision)
        _emit(config, events)
        return Command(goto=target, update=update)

    async def aentry(state: dict[str, Any], config: RunnableConfig) -> Command:
        text = _user_text(state.get("messages") or [])
        chosen = pick(state, text)
        decision = await chosen.aroute(text) if chosen is not None else None
        target, update, events = _entry_update(settings, state, decision)
        await _aemit(config, events)
        return Command(goto=target, update=update)

    def handoff_router(state: dict[str, Any], config: RunnableConfig) -> Command:
        goto, update, events = _plan(settings, state)
        _emit(config, events)
        return Command(goto=goto, update=update)

    async def ahandoff_router(state: dict[str, Any], config: RunnableConfig) -> Command:
        goto, update, events = _plan(settings, state)
        await _aemit(config, events)
        return Command(goto=goto, update=update)

    graph: StateGraph[Any, Any, Any, Any] = StateGraph(state_schema)
    graph.add_node(ENTRY, RunnableLambda(entry, aentry, name=ENTRY), destinations=tuple(names))  # type: ignore[type-var]
    graph.add_node(ROUTER, RunnableLambda(handoff_router, ahandoff_router, name=ROUTER), destinations=(*names, END))  # type: ignore[type-var]
    for spec in specs:
        runnable = None
        if spec.kind == "model":
            runnable = build_tool_agent(
                spec.agent, tools=[*spec.tools, *tools_for(spec, specs)], prompt=spec.prompt, name=spec.name
            )
        elif spec.kind == "runnable":
            runnable = spec.agent
        graph.add_node(spec.name, _agent_node(spec, runnable))
        graph.add_edge(spec.name, ROUTER)
    graph.add_edge(START, ENTRY)
    return graph


def create_handoff_graph(
    agents: Sequence[HandoffAgent] | Mapping[str, Any],
    *,
    router: Any = None,
    fallback: str | None = None,
    checkpointer: Any = None,
    recursion_limit: int = 100,
    name: str = "handoff_graph",
    **options: Any,
) -> Any:
    """Compile a multi-agent graph with routing, handoffs, circuit breakers and an audit trail.

    ``agents`` are :class:`HandoffAgent` specs (or ``{name: agent}``). ``router`` routes the first
    message of a conversation (``None``: the first agent, or ``default_agent``). ``fallback``
    receives the conversation when a circuit breaker trips or a handoff is invalid. Other options
    are those of :func:`build_handoff_graph`: ``max_handoffs_per_turn`` (3), ``ping_pong`` (True),
    ``time_budget`` (seconds per user turn), ``reroute`` (``"rules"``), ``default_agent``, ``clock``.

    ``recursion_limit`` replaces LangGraph's default of 10,007 steps, which lets a looping graph
    run for minutes and gigabytes before it stops (see the survey); the breakers stop loops long
    before either limit.

    >>> from langgraph_handoff.testing import ScriptedChatModel, tool_call
    >>> triage = ScriptedChatModel([tool_call("transfer_to_billing", {"briefing": "Card charged twice"})])
    >>> billing = ScriptedChatModel(["I have refunded the duplicate charge."])
    >>> graph = create_handoff_graph([HandoffAgent("triage", triage), HandoffAgent("billing", billing)])
    >>> result = graph.invoke({"messages": [("user", "I was charged twice")]})
    >>> result["active_agent"], [h.target for h in handoff_log(result)], result["messages"][-1].content
    ('billing', ['triage', 'billing'], 'I have refunded the duplicate charge.')
    """
    graph = build_handoff_graph(agents, router=router, fallback=fallback, **options)
    return graph.compile(checkpointer=checkpointer, name=name).with_config(recursion_limit=recursion_limit)
