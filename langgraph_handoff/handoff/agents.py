"""What an agent in a handoff graph can be, and the small tool-calling loop we build for models.

An agent is one of:

- a chat model (anything with ``bind_tools``): we build a minimal tool-calling loop around it with
  its tools plus one handoff tool per reachable agent, and stop the loop once a handoff succeeds;
- a compiled graph or any runnable taking ``{"messages": [...]}``, e.g. ``langchain.agents.create_agent``
  with :func:`handoff_middleware` (which adds the handoff tools and the same stop rule);
- a plain function ``(state) -> update`` (a ``StateGraph`` node). It hands off by returning
  :func:`handoff_to`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig, RunnableLambda
from langchain_core.runnables.base import RunnableBindingBase
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from pydantic import BaseModel

from langgraph_handoff.errors import InvalidHandoffError
from langgraph_handoff.handoff.context import ContextPolicy, ContextSpec, as_policy
from langgraph_handoff.handoff.model import validate_payload
from langgraph_handoff.handoff.tools import Enabled, create_handoff_tool, handoff_pending

#: key a plain function node returns its handoff request under (see :func:`handoff_to`)
REQUEST_KEY = "handoff_request"


def handoff_to(
    target: str, *, briefing: str, payload: dict[str, Any] | BaseModel | None = None, reason: str = "", **update: Any
) -> dict[str, Any]:
    """The update a plain function agent returns to hand the conversation on.

    Other keys (``messages`` to say something first, or your own state keys) pass through.

    >>> handoff_to("orders", briefing="Customer asks about A-1", payload={"order_id": "A-1"})["handoff_request"]["target"]
    'orders'
    """
    if isinstance(payload, BaseModel):
        payload = payload.model_dump(mode="json", by_alias=True)
    return {
        **update,
        REQUEST_KEY: {
            "kind": "handoff_request",
            "target": target,
            "briefing": briefing,
            "reason": reason,
            "payload": payload,
        },
    }


@dataclass
class HandoffAgent:
    """One agent of a handoff graph.

    - ``agent``: a chat model, a runnable/compiled graph, or a function (see the module docs).
    - ``description``: what the agent handles; shown to other agents in their handoff tool.
    - ``payload_schema``: pydantic model a handoff *to* this agent must carry as ``payload``.
    - ``context``: what this agent sees when it takes over: ``"full"`` (default), ``"briefing"``,
      ``"no_tools"``, an int (last N messages) or a callable ``(messages, name) -> messages``.
    - ``tools``/``prompt``: for chat-model agents only.
    - ``handoffs``: names this agent may hand off to (``None``: every other agent).
    - ``enabled``: ``False`` or a callable returning ``False`` makes the agent unreachable by
      handoff; models get a readable tool error and the router picks the fallback.
    """

    name: str
    agent: Any
    description: str = ""
    payload_schema: type[BaseModel] | None = None
    context: ContextSpec = None
    tools: Sequence[BaseTool | Callable[..., Any]] = ()
    prompt: str | None = None
    handoffs: Sequence[str] | None = None
    enabled: Enabled = True
    policy: ContextPolicy = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InvalidHandoffError("an agent needs a non-empty name")
        if self.name.startswith("__"):
            raise InvalidHandoffError(
                f"agent name {self.name!r} is reserved (names starting with '__' belong to LangGraph)"
            )
        self.policy = as_policy(self.context)

    @property
    def kind(self) -> str:
        if isinstance(self.agent, BaseChatModel) or _configured_model(self.agent) is not None:
            return "model"
        if isinstance(self.agent, RunnableBindingBase) and isinstance(self.agent.bound, BaseChatModel):
            raise InvalidHandoffError(
                f"agent {self.name!r} is a chat model inside a {type(self.agent).__name__}; give the chat model "
                "itself (or one configured with .bind()/.with_config()), or build your own agent graph around it"
            )
        if isinstance(self.agent, Runnable):
            return "runnable"
        if callable(self.agent):
            return "function"
        raise InvalidHandoffError(
            f"agent {self.name!r} must be a chat model, a runnable/compiled graph or a function, got {type(self.agent).__name__}"
        )

    def is_enabled(self) -> bool:
        return bool(self.enabled() if callable(self.enabled) else self.enabled)

    def validate(self, payload: Any) -> dict[str, Any] | None:
        return validate_payload(self.payload_schema, payload, target=self.name)


def _configured_model(agent: Any) -> RunnableBinding[Any, Any] | None:
    """A chat model configured with ``.bind(...)`` / ``.with_config(...)`` (a ``RunnableBinding``)."""
    if isinstance(agent, RunnableBinding) and isinstance(agent.bound, BaseChatModel):
        return agent
    return None


def _bind_tools(model: Any, tools: list[Any], name: str) -> Any:
    configured = _configured_model(model)
    chat_model: BaseChatModel = model if configured is None else configured.bound  # type: ignore[assignment]
    try:
        bound = chat_model.bind_tools(tools)
    except NotImplementedError:
        # BaseChatModel's default; a bare NotImplementedError from deep inside the graph build
        # tells nobody that it is the model, not the graph, that lacks something
        raise _no_tool_calling(name, chat_model) from None
    if configured is None:
        return bound
    # keep the caller's bound kwargs and config: bind tools on the model, then re-apply them
    return bound.bind(**configured.kwargs).with_config(configured.config or {})


def _no_tool_calling(name: str, model: BaseChatModel) -> InvalidHandoffError:
    return InvalidHandoffError(
        f"agent {name!r} is a chat model without tool calling ({type(model).__name__} does not implement "
        "bind_tools), and a model agent hands off by calling a tool. Use a chat model that supports tool "
        "calling; in tests use langgraph_handoff.testing.ScriptedChatModel (it replies from a script and "
        "supports bind_tools); or make the agent a plain function that returns handoff_to(...)"
    )


def build_tool_agent(
    model: BaseChatModel | RunnableBinding[Any, Any],
    *,
    tools: Sequence[BaseTool | Callable[..., Any]] = (),
    prompt: str | None = None,
    name: str = "agent",
) -> Any:
    """A minimal tool-calling loop: model, tools, repeat; it ends when the model answers without
    tool calls or when a handoff tool succeeded (the graph's router takes it from there).

    All tool calls of one model message run in one ``ToolNode`` step, so each gets its real result.
    """
    bound = _bind_tools(model, list(tools), name) if tools else model
    system: list[AnyMessage] = [SystemMessage(prompt)] if prompt else []

    def call_model(state: MessagesState, config: RunnableConfig) -> dict[str, list[AnyMessage]]:
        return {"messages": [bound.invoke(system + state["messages"], config)]}

    async def acall_model(state: MessagesState, config: RunnableConfig) -> dict[str, list[AnyMessage]]:
        return {"messages": [await bound.ainvoke(system + state["messages"], config)]}

    def after_model(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if getattr(last, "tool_calls", None) else END

    def after_tools(state: MessagesState) -> str:
        return END if handoff_pending(state["messages"]) else "model"

    graph = StateGraph(MessagesState)
    graph.add_node("model", RunnableLambda(call_model, acall_model, name="model"))
    graph.add_edge(START, "model")
    if tools:
        graph.add_node("tools", ToolNode(list(tools)))
        graph.add_conditional_edges("model", after_model, ["tools", END])
        graph.add_conditional_edges("tools", after_tools, ["model", END])
    else:
        graph.add_edge("model", END)
    return graph.compile(name=name)


def handoff_middleware(targets: Sequence[HandoffAgent | str]) -> Any:
    """Middleware for ``langchain.agents.create_agent``: adds one handoff tool per target and ends
    the agent loop right after a successful handoff, so the graph's router can execute it.

    ``pip install langchain`` is needed for this one function; nothing else here imports it.

    Example::

        from langchain.agents import create_agent
        orders = create_agent(model, tools=[lookup_order], middleware=[handoff_middleware([after_sales])])
    """
    from langchain.agents.middleware import AgentMiddleware, hook_config

    from langgraph_handoff.handoff.tools import handoff_tools

    class HandoffMiddleware(AgentMiddleware):
        def __init__(self) -> None:
            super().__init__()
            self.tools = handoff_tools(list(targets))

        @hook_config(can_jump_to=["end"])
        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            return {"jump_to": "end"} if handoff_pending(state["messages"]) else None

        @hook_config(can_jump_to=["end"])
        async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            return self.before_model(state, runtime)

    return HandoffMiddleware()


def tools_for(spec: HandoffAgent, agents: Sequence[HandoffAgent]) -> list[BaseTool]:
    """Handoff tools an agent gets: one per agent it may reach (not itself)."""
    allowed = set(spec.handoffs) if spec.handoffs is not None else None
    return [
        create_handoff_tool(a.name, description=a.description, payload_schema=a.payload_schema, enabled=a.enabled)
        for a in agents
        if a.name != spec.name and (allowed is None or a.name in allowed)
    ]
