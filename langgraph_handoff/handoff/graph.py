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
  A -> B -> A ping-pong, an optional ``time_budget`` of agent time per turn, and an agent that
  exceeds the recursion limit. A breach sends the conversation to ``fallback`` with the reason; it
  never raises at the user.

The decisions themselves live in :mod:`langgraph_handoff.handoff.policy`; this module wires them
into nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import numbers
import time
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.callbacks.manager import adispatch_custom_event, dispatch_custom_event
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.config import get_stream_writer
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command

from langgraph_handoff.errors import InvalidHandoffError
from langgraph_handoff.handoff import observe
from langgraph_handoff.handoff.agents import REQUEST_KEY, HandoffAgent, build_tool_agent, tools_for
from langgraph_handoff.handoff.audit import AuditPolicy, audit_records, awrite_audits, write_audits
from langgraph_handoff.handoff.briefing import BriefingCheck
from langgraph_handoff.handoff.model import Handoff, is_handoff_message
from langgraph_handoff.handoff.notify import Notify, notifier
from langgraph_handoff.handoff.policy import MAX_RETRIES, ROUTER, Event, HandoffPolicy, Plan
from langgraph_handoff.handoff.tools import pending_handoff_calls
from langgraph_handoff.routing.decision import RouteDecision

ENTRY = "handoff_entry"
#: name of the custom stream/callback events this graph emits ("route", "handoff", "breaker", "retry")
EVENT = "langgraph_handoff"


def _append(left: list[Any] | None, right: list[Any] | None) -> list[Any]:
    return [*(left or []), *(right or [])]


class HandoffState(TypedDict, total=False):
    """Graph state. ``handoffs``, ``routing`` and ``breakers`` are the audit trail (every
    handoff, routing decision and circuit-breaker trip, across turns); ``turn_*`` describe the
    current user turn. Extend it by subclassing; every key here must stay.

    The audit records are stored as plain JSON-ready dicts (``Handoff.model_dump(mode="json")``),
    not as pydantic objects: a checkpoint then never depends on our class paths (a rename or a
    strict msgpack allowlist cannot make old threads unreadable) and the state serialises to JSON
    as it is. Read them back as models with :func:`handoff_log` and :func:`routing_log`.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    active_agent: str | None
    handoffs: Annotated[list[dict[str, Any]], _append]
    routing: Annotated[list[dict[str, Any]], _append]
    breakers: Annotated[list[dict[str, Any]], _append]
    turn_chain: list[str]
    turn_hops: int
    turn_retries: int
    turn_elapsed: float
    pending_handoffs: list[dict[str, Any]]
    #: the user turn's id, its deadline and the time of its last step (UTC seconds)
    turn_id: str
    turn_deadline_at: float | None
    turn_last_at: float | None


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


def _emit(config: RunnableConfig, events: list[Event], notify: Any = None) -> None:
    observe.record(config, events, notify)
    writer = get_stream_writer()
    for kind, data in events:
        writer({EVENT: kind, **data})
        with contextlib.suppress(RuntimeError):  # no parent run to attach the event to
            dispatch_custom_event(f"{EVENT}.{kind}", data, config=config)


async def _aemit(config: RunnableConfig, events: list[Event], notify: Any = None) -> None:
    observe.record(config, events, notify)
    writer = get_stream_writer()
    for kind, data in events:
        writer({EVENT: kind, **data})
        with contextlib.suppress(RuntimeError):
            await adispatch_custom_event(f"{EVENT}.{kind}", data, config=config)


def _encoder_name(router: Any) -> str | None:
    """The class of the encoder behind ``router``'s semantic stage, if it has one."""
    for candidate in (router, getattr(router, "semantic", None)):
        encoder = getattr(candidate, "encoder", None)
        if encoder is not None:
            return type(encoder).__name__
    return None


def _seed(config: RunnableConfig) -> str | None:
    """The LangGraph task id of this step: the same when the step is replayed."""
    task = (config.get("configurable") or {}).get("__pregel_task_id")
    return str(task) if task else None


def _run_sync_not_supported(name: str) -> Callable[[Any], Any]:
    def sync(_: Any) -> Any:
        raise InvalidHandoffError(f"agent {name!r} is an async function: run the graph with ainvoke/astream")

    return sync


def _resuming(config: RunnableConfig) -> bool:
    """Does this step resume a run that stopped (at an interrupt, or a crash)? LangGraph marks
    such a run in its config; the time it waited is not the turn's."""
    return bool((config.get("configurable") or {}).get("__pregel_resuming"))


def _agent_node(spec: HandoffAgent, runnable: Any, policy: HandoffPolicy) -> RunnableLambda[Any, Any]:
    """Wrap an agent: give it its context view, collect its new messages and handoff requests,
    and add its run time to the turn's agent time (the time budget's clock). With a turn
    deadline, the agent does not start once it has passed, and on the async path runs under the
    time left."""
    clock = policy.clock

    def view_of(state: Mapping[str, Any]) -> list[BaseMessage]:
        return spec.policy(list(state.get("messages") or []), spec.name)

    function: Any = None
    if spec.kind == "function":
        fn = spec.agent
        if inspect.iscoroutinefunction(fn):
            function = RunnableLambda(_run_sync_not_supported(spec.name), fn, name=spec.name)
        else:
            function = RunnableLambda(fn, name=spec.name)

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

    def collect(state: Mapping[str, Any], view: list[BaseMessage], out: Any, started: float) -> dict[str, Any]:
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
            else:
                # a graph returns its whole message list: keep the replies and tool results it
                # added. Messages it made for itself (a summarisation middleware's summary, a
                # rewritten prompt) shape its own view only, not the shared transcript.
                seen = {m.id for m in view}
                new = [m for m in msgs if getattr(m, "id", None) not in seen and isinstance(m, AIMessage | ToolMessage)]
        elif out is None:
            new = []
        else:
            raise InvalidHandoffError(
                f"agent {spec.name!r} returned {type(out).__name__}; return a state update dict "
                "(use handoff_to(...) to hand off, not Command)"
            )
        # sign the agent's replies, so transcripts (and providers that read ``name``) know who spoke
        new = [m.model_copy(update={"name": spec.name}) if isinstance(m, AIMessage) and not m.name else m for m in new]
        requests = [
            {**req, "tool_call_id": cid}
            for cid, req in pending_handoff_calls([m for m in new if isinstance(m, BaseMessage)])
        ]
        if explicit is not None:
            requests.append({**explicit, "tool_call_id": None})
        return {**extra, "messages": new, "pending_handoffs": requests, "turn_elapsed": elapsed(state, started)}

    def elapsed(state: Mapping[str, Any], started: float) -> float:
        return float(state.get("turn_elapsed") or 0.0) + max(0.0, clock() - started)

    def runaway(state: Mapping[str, Any], started: float, exc: GraphRecursionError) -> dict[str, Any]:
        # the agent looped inside itself (e.g. retrying a tool forever): nothing it did is kept,
        # and the router sends the conversation to the fallback instead of raising at the user
        reason = f"agent {spec.name!r} did not finish within the recursion limit ({exc})"
        return {"pending_handoffs": [{"failure": reason}], "turn_elapsed": elapsed(state, started)}

    def window(state: dict[str, Any], config: RunnableConfig) -> tuple[dict[str, Any], float | None]:
        """The turn's clock for this step: a resumed step moves the deadline on by the time the
        run waited (at an interrupt, or for a worker to take it over), and the seconds left."""
        now, deadline, last = policy.wall_clock(), state.get("turn_deadline_at"), state.get("turn_last_at")
        if policy.turn_deadline is None or not isinstance(deadline, int | float):
            return {}, None
        clock_update: dict[str, Any] = {}
        if isinstance(last, int | float) and _resuming(config):
            deadline += max(0.0, now - last)
            clock_update["turn_deadline_at"] = deadline
        return clock_update, deadline - now

    def too_late(state: Mapping[str, Any], started: float, clock_update: dict[str, Any]) -> dict[str, Any]:
        reason = f"turn deadline of {policy.turn_deadline:g}s passed while {spec.name!r} worked (its work is dropped)"
        return {"pending_handoffs": [{"failure": reason}], "turn_elapsed": elapsed(state, started),
                "turn_last_at": policy.wall_clock(), **clock_update}  # fmt: skip

    def finished(out: dict[str, Any], clock_update: dict[str, Any]) -> dict[str, Any]:
        return {**out, "turn_last_at": policy.wall_clock(), **clock_update}

    def run(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        started, view = clock(), view_of(state)
        clock_update, left = window(state, config)
        if left is not None and left <= 0:
            return too_late(state, started, clock_update)  # the router degrades the turn
        try:
            with observe.agent_turn(spec.name, config, state):
                if spec.kind == "function":  # as a child run, so it carries the handoff metadata too
                    out = function.invoke({**state, "messages": view}, child_config(config, state))
                else:
                    out = runnable.invoke({"messages": view}, child_config(config, state))
        except GraphRecursionError as exc:
            return runaway(state, started, exc)
        return finished(collect(state, view, out, started), clock_update)

    async def arun(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        started, view = clock(), view_of(state)
        clock_update, left = window(state, config)
        if left is not None and left <= 0:
            return too_late(state, started, clock_update)
        try:
            with observe.agent_turn(spec.name, config, state):
                if spec.kind == "function":
                    call = function.ainvoke({**state, "messages": view}, child_config(config, state))
                else:
                    call = runnable.ainvoke({"messages": view}, child_config(config, state))
                # the agent runs under the time left: cancelled at the deadline, its work dropped
                out = await asyncio.wait_for(call, timeout=left)
        except GraphRecursionError as exc:
            return runaway(state, started, exc)
        except asyncio.TimeoutError:
            if left is None or policy.late({**state, **clock_update}) is None:
                raise  # the agent's own time-out, not the turn's
            return too_late(state, started, clock_update)
        return finished(collect(state, view, out, started), clock_update)

    return RunnableLambda(run, arun, name=spec.name)


DEFAULT_FALLBACK_MESSAGE = (
    "I'm sorry, I couldn't pass your request to the right team ({reason}). A colleague will pick it up from here."
)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_options(
    *,
    max_handoffs_per_turn: Any,
    time_budget: Any,
    reroute: Any,
    clock: Any,
    fallback_message: Any,
    state_schema: Any,
    turn_deadline: Any = None,
    wall_clock: Any = time.time,
) -> None:
    if turn_deadline is not None and (not _is_number(turn_deadline) or turn_deadline <= 0):
        raise InvalidHandoffError(f"turn_deadline must be a number of seconds > 0, or None; got {turn_deadline!r}")
    if not callable(wall_clock):
        raise InvalidHandoffError("wall_clock must be a callable returning seconds since the epoch, like time.time")
    if (
        not isinstance(max_handoffs_per_turn, int)
        or isinstance(max_handoffs_per_turn, bool)
        or max_handoffs_per_turn < 1
    ):
        raise InvalidHandoffError(f"max_handoffs_per_turn must be an int >= 1, got {max_handoffs_per_turn!r}")
    if time_budget is not None and (not _is_number(time_budget) or time_budget <= 0):
        raise InvalidHandoffError(f"time_budget must be a number of seconds > 0, or None; got {time_budget!r}")
    if reroute not in ("never", "rules", "always"):
        raise InvalidHandoffError(f"reroute must be 'never', 'rules' or 'always', got {reroute!r}")
    if not callable(clock):
        raise InvalidHandoffError("clock must be a callable returning seconds, like time.time")
    if not isinstance(fallback_message, str):
        raise InvalidHandoffError("fallback_message must be a string; '{reason}' in it is replaced by the breach")
    try:
        declared = set(typing.get_type_hints(state_schema))
    except Exception as exc:  # noqa: BLE001 - any failure here means the schema is not usable
        raise InvalidHandoffError(f"state_schema must be a TypedDict extending HandoffState: {exc}") from None
    missing = sorted(set(HandoffState.__annotations__) - declared)
    if missing:
        raise InvalidHandoffError(
            f"state_schema lacks the handoff keys {missing}: subclass HandoffState to add your own keys"
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
    clock: Callable[[], float] = time.monotonic,
    fallback_message: str = DEFAULT_FALLBACK_MESSAGE,
    state_schema: type[Any] = HandoffState,
    turn_deadline: float | None = None,
    notify: Notify | Sequence[Notify] | None = None,
    wall_clock: Callable[[], float] = time.time,
    briefing_check: BriefingCheck | None = None,
    audit: AuditPolicy | float | None = None,
) -> StateGraph[Any]:
    """The uncompiled :class:`~langgraph.graph.StateGraph` behind :func:`create_handoff_graph`
    (add your own nodes or edges, then ``compile``)."""
    specs = (
        [a if isinstance(a, HandoffAgent) else HandoffAgent(name, a) for name, a in agents.items()]
        if isinstance(agents, Mapping)
        else list(agents)
    )
    if not specs:
        raise InvalidHandoffError("create_handoff_graph needs at least one agent")
    if not all(isinstance(s, HandoffAgent) for s in specs):
        raise InvalidHandoffError("agents must be HandoffAgent specs, or a {name: agent} mapping")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise InvalidHandoffError(f"agent names must be unique, got {names}")
    for reserved in (ENTRY, ROUTER):
        if reserved in names:
            raise InvalidHandoffError(f"{reserved!r} is the name of a node of the handoff graph; rename that agent")
    kinds = {s.name: s.kind for s in specs}  # raises for agents of an unsupported type
    by_name = {s.name: s for s in specs}
    for s in specs:
        unknown = [t for t in (s.handoffs or []) if t not in by_name]
        if unknown:
            raise InvalidHandoffError(f"agent {s.name!r} may hand off to unknown agents {unknown}; agents are {names}")
    if fallback is not None and fallback not in by_name:
        raise InvalidHandoffError(f"fallback {fallback!r} is not an agent; agents are {names}")
    if default_agent is not None and default_agent not in by_name:
        raise InvalidHandoffError(f"default_agent {default_agent!r} is not an agent; agents are {names}")
    _check_options(
        max_handoffs_per_turn=max_handoffs_per_turn,
        time_budget=time_budget,
        reroute=reroute,
        clock=clock,
        fallback_message=fallback_message,
        state_schema=state_schema,
        turn_deadline=turn_deadline,
        wall_clock=wall_clock,
    )
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

    if briefing_check is not None and not isinstance(briefing_check, BriefingCheck):
        raise InvalidHandoffError(
            f"briefing_check must be a BriefingCheck or None, got {type(briefing_check).__name__}"
        )
    policy = HandoffPolicy(
        briefing=briefing_check.bind(specs, router) if briefing_check is not None else None,
        audit=AuditPolicy.of(audit),
        encoder=_encoder_name(router),
        agents=by_name,
        router=router,
        fallback=fallback,
        default_agent=default_agent or names[0],
        max_handoffs_per_turn=max_handoffs_per_turn,
        ping_pong=ping_pong,
        time_budget=float(time_budget) if time_budget is not None else None,
        reroute=reroute,
        clock=clock,
        fallback_message=fallback_message,
        turn_deadline=float(turn_deadline) if turn_deadline is not None else None,
        wall_clock=wall_clock,
    )
    send = notifier(notify)

    def done(state: dict[str, Any], config: RunnableConfig, plan: Plan) -> Command[Any]:
        """What every step of the router does with its plan: time the turn, tell the operator,
        audit, and go on."""
        observe.turn_step(state, plan, policy.clock)
        _emit(config, plan.events, send)
        write_audits(policy.audit, audit_records(policy.audit, config, state, plan.events))
        return Command(goto=plan.goto, update=plan.update)

    async def adone(state: dict[str, Any], config: RunnableConfig, plan: Plan) -> Command[Any]:
        observe.turn_step(state, plan, policy.clock)
        await _aemit(config, plan.events, send)
        await awrite_audits(policy.audit, audit_records(policy.audit, config, state, plan.events))
        return Command(goto=plan.goto, update=plan.update)

    def entry(state: dict[str, Any], config: RunnableConfig) -> Command[Any]:
        chosen = policy.router_for(state)
        decision = chosen.route(_user_text(state.get("messages") or [])) if chosen is not None else None
        return done(state, config, policy.entry(state, decision, _seed(config)))

    async def aentry(state: dict[str, Any], config: RunnableConfig) -> Command[Any]:
        chosen = policy.router_for(state)
        decision = await chosen.aroute(_user_text(state.get("messages") or [])) if chosen is not None else None
        return await adone(state, config, policy.entry(state, decision, _seed(config)))

    def handoff_router(state: dict[str, Any], config: RunnableConfig) -> Command[Any]:
        bound = policy.briefing
        verdicts = {i: bound.verdict(t, b, r) for i, t, b, r in policy.to_check(state)} if bound else None
        return done(state, config, policy.plan(state, verdicts, _seed(config)))

    async def ahandoff_router(state: dict[str, Any], config: RunnableConfig) -> Command[Any]:
        bound = policy.briefing
        verdicts = {i: await bound.averdict(t, b, r) for i, t, b, r in policy.to_check(state)} if bound else None
        return await adone(state, config, policy.plan(state, verdicts, _seed(config)))

    graph: StateGraph[Any, Any, Any, Any] = StateGraph(state_schema)
    graph.add_node(ENTRY, RunnableLambda(entry, aentry, name=ENTRY), destinations=tuple(names))  # type: ignore[type-var]
    graph.add_node(ROUTER, RunnableLambda(handoff_router, ahandoff_router, name=ROUTER), destinations=(*names, END))  # type: ignore[type-var]
    for spec in specs:
        runnable = None
        if kinds[spec.name] == "model":
            tools = [*spec.tools, *tools_for(spec, specs)]
            names_here = [str(getattr(t, "name", None) or getattr(t, "__name__", "")) for t in tools]
            clash = sorted({n for n in names_here if names_here.count(n) > 1})
            if clash:
                raise InvalidHandoffError(f"agent {spec.name!r} would get several tools named {clash}; rename them")
            runnable = build_tool_agent(spec.agent, tools=tools, prompt=spec.prompt, name=spec.name)
        elif kinds[spec.name] == "runnable":
            runnable = spec.agent
        graph.add_node(spec.name, _agent_node(spec, runnable, policy))
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
    ``time_budget`` (seconds of agent time per user turn; waiting at an interrupt does not count),
    ``turn_deadline`` (wall-clock seconds per user turn, waiting at an interrupt excluded, checked
    at every step; async agents are cancelled at it), ``notify`` (called in the background with a
    :class:`~langgraph_handoff.handoff.notify.BreakerEvent` on every breaker trip), ``wall_clock``,
    ``reroute`` (``"rules"``), ``default_agent``, ``fallback_message``, ``state_schema``, ``clock``,
    ``briefing_check`` (a :class:`~langgraph_handoff.handoff.BriefingCheck` run on every handoff
    an agent asks for) and ``audit`` (an :class:`~langgraph_handoff.handoff.AuditPolicy`, or a
    rate such as ``0.5``: which handoffs are kept for a person to check).

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
    if not isinstance(recursion_limit, int) or isinstance(recursion_limit, bool) or recursion_limit < 10:
        raise InvalidHandoffError(f"recursion_limit must be an int >= 10, got {recursion_limit!r}")
    graph = build_handoff_graph(agents, router=router, fallback=fallback, **options)
    # a turn takes 1 entry step + 2 steps (agent, router) per agent visit: the first agent, every
    # allowed handoff, every retry and the fallback. The breakers must trip before this limit.
    visits = options.get("max_handoffs_per_turn", 3) + MAX_RETRIES + 2
    return graph.compile(checkpointer=checkpointer, name=name).with_config(
        recursion_limit=max(recursion_limit, 1 + 2 * visits)
    )
