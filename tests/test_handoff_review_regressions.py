"""Regressions for the bugs an adversarial review of the handoff and routing code reproduced.
Each test failed before its fix."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import MessagesState
from pydantic import BaseModel, ConfigDict, Field

from langgraph_handoff.errors import InvalidHandoffError, InvalidRouteError
from langgraph_handoff.handoff import (
    HandoffAgent,
    HandoffState,
    assert_valid_history,
    build_handoff_graph,
    create_handoff_graph,
    create_handoff_tool,
    handoff_log,
    handoff_middleware,
    handoff_to,
)
from langgraph_handoff.handoff.tools import tool_name_for
from langgraph_handoff.routing import Route, Rule, RuleRouter, SemanticRouter, evaluate
from langgraph_handoff.testing import ScriptedChatModel, tool_call


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def transfer(target: str, briefing: str = "over to you", **args: Any) -> AIMessage:
    return tool_call(tool_name_for(target), {"briefing": briefing, **args})


class Ref(BaseModel):
    order_id: str


# 1. a create_agent agent whose middleware tool lacks the target's schema: the router's refusal
#    goes back to the model, which corrects itself; an agent that keeps failing reaches the fallback
def test_refused_tool_handoff_goes_back_to_the_model() -> None:
    from langchain.agents import create_agent

    model = ScriptedChatModel([transfer("orders", payload={}), transfer("orders", payload={"order_id": "A"})])
    support = create_agent(model, tools=[], middleware=[handoff_middleware(["orders"])])  # no schema known here
    orders = ScriptedChatModel(["orders here"])
    graph = create_handoff_graph([HandoffAgent("support", support), HandoffAgent("orders", orders, payload_schema=Ref)])
    result = graph.invoke({"messages": [("user", "x")]})
    assert result["active_agent"] == "orders" and len(model.calls) == 2
    assert any("order_id: Field required" in str(m.content) for m in model.calls[1])
    assert_valid_history(result["messages"])


def test_an_agent_that_keeps_asking_for_a_refused_handoff_reaches_the_fallback() -> None:
    from langchain.agents import create_agent

    model = ScriptedChatModel([transfer("orders", payload={})], cycle=True)
    support = create_agent(model, tools=[], middleware=[handoff_middleware(["orders"])])
    graph = create_handoff_graph(
        [
            HandoffAgent("support", support),
            HandoffAgent("orders", ScriptedChatModel(["o"]), payload_schema=Ref),
            HandoffAgent("human", lambda s: {"messages": [AIMessage("human")]}),
        ],
        fallback="human",
    )
    result = graph.invoke({"messages": [("user", "x")]})
    assert len(model.calls) == 3  # the first try and two more
    assert result["active_agent"] == "human" and handoff_log(result)[-1].trigger == "breaker"
    assert_valid_history(result["messages"])


# 2. payload schemas with aliases
def test_payload_schema_with_aliases() -> None:
    class Aliased(BaseModel):
        model_config = ConfigDict(populate_by_name=True)
        order_id: str = Field(alias="orderId")

    a = ScriptedChatModel([transfer("orders", payload={"orderId": "A-1"})])
    graph = create_handoff_graph(
        [HandoffAgent("a", a), HandoffAgent("orders", ScriptedChatModel(["ok"]), payload_schema=Aliased)]
    )
    result = graph.invoke({"messages": [("user", "x")]})
    assert result["active_agent"] == "orders" and handoff_log(result)[-1].payload == {"orderId": "A-1"}


# 3. nested payload schemas survive a provider's tool conversion
def test_nested_payload_schema_converts_for_providers() -> None:
    class Kind(enum.Enum):
        HOME = "home"
        WORK = "work"

    class Address(BaseModel):
        street: str
        kind: Kind

    class Change(BaseModel):
        order_id: str
        new_address: Address

    a = ScriptedChatModel(
        [transfer("orders", payload={"order_id": "A", "new_address": {"street": "s", "kind": "home"}})]
    )
    graph = create_handoff_graph(
        [HandoffAgent("a", a), HandoffAgent("orders", ScriptedChatModel(["ok"]), payload_schema=Change)]
    )
    result = graph.invoke({"messages": [("user", "x")]})
    assert result["active_agent"] == "orders"
    payload = a.bound_tool_schemas[0]["function"]["parameters"]["properties"]["payload"]
    assert payload["properties"]["new_address"]["properties"]["kind"]["enum"] == ["home", "work"]


# 4. agent names that sanitise to the same tool name
def test_agent_names_that_sanitise_alike_get_distinct_tools() -> None:
    a = ScriptedChatModel([transfer("退货")])
    graph = create_handoff_graph(
        [
            HandoffAgent("a", a),
            HandoffAgent("退货", ScriptedChatModel(["returns desk"])),
            HandoffAgent("换货", ScriptedChatModel(["exchange desk"])),
        ]
    )
    result = graph.invoke({"messages": [("user", "x")]})
    assert result["messages"][-1].content == "returns desk"
    assert len(set(a.bound_tools)) == 2 and all(len(n) <= 64 for n in a.bound_tools)
    assert tool_name_for("after sales") != tool_name_for("after.sales")
    assert tool_name_for("x" * 100) != tool_name_for("x" * 101)


# 5. chat models configured with .bind()/.with_config() are models; other wrappers are refused
def test_configured_chat_model_is_a_model_agent() -> None:
    base = ScriptedChatModel([transfer("b")])
    graph = create_handoff_graph(
        [HandoffAgent("a", base.bind(temperature=0)), HandoffAgent("b", ScriptedChatModel(["b"]))]
    )
    assert graph.invoke({"messages": [("user", "x")]})["active_agent"] == "b"
    assert base.bound_tools == ["transfer_to_b"]
    with pytest.raises(InvalidHandoffError, match="RunnableRetry"):
        create_handoff_graph([HandoffAgent("a", ScriptedChatModel(["x"]).with_retry())])


# 6 + 10. a disabled fallback is not used, and a refused handoff is recorded even when the turn ends
def test_disabled_fallback_ends_the_turn_and_the_breach_is_recorded() -> None:
    human = ScriptedChatModel(["human"])
    graph = create_handoff_graph(
        [
            HandoffAgent("a", ScriptedChatModel([transfer("b")])),
            HandoffAgent("b", ScriptedChatModel([transfer("a")])),
            HandoffAgent("human", human, enabled=False),
        ],
        fallback="human",
    )
    result = graph.invoke({"messages": [("user", "x")]})
    assert not human.calls and result["messages"][-1].name == "handoff_router"
    (trip,) = result["breakers"]
    assert trip["source"] == "b" and trip["wanted"] == "a" and trip["target"] is None and "ping-pong" in trip["reason"]


# 7. a custom fallback message with braces
def test_fallback_message_with_braces_never_raises() -> None:
    graph = create_handoff_graph(
        [HandoffAgent("a", ScriptedChatModel([transfer("b")])), HandoffAgent("b", ScriptedChatModel([transfer("a")]))],
        fallback_message="Sorry {name} :-} ({reason})",
    )
    last = graph.invoke({"messages": [("user", "x")]})["messages"][-1]
    assert last.content.startswith("Sorry {name} :-} (ping-pong")


# 8. breaker settings are checked when the graph is built
@pytest.mark.parametrize(
    "options",
    [
        {"time_budget": "30"},
        {"time_budget": -1},
        {"max_handoffs_per_turn": "3"},
        {"max_handoffs_per_turn": None},
        {"recursion_limit": "x"},
        {"fallback_message": 3},
        {"clock": 5},
    ],
)
def test_bad_breaker_settings_are_refused_at_build(options: dict) -> None:
    with pytest.raises(InvalidHandoffError):
        create_handoff_graph([HandoffAgent("a", lambda s: {})], **options)


# 9. waiting for a human at an interrupt does not count against the time budget
def test_time_waiting_at_an_interrupt_is_not_agent_time() -> None:
    from langgraph.types import Command, interrupt

    now = [0.0]

    @tool
    def approve(amount: int) -> str:
        """Ask a human."""
        return f"human said {interrupt({'approve': amount})}"

    triage = ScriptedChatModel([tool_call("approve", {"amount": 20}), transfer("billing", "refund approved")])
    graph = create_handoff_graph(
        [
            HandoffAgent("triage", triage, tools=[approve]),
            HandoffAgent("billing", ScriptedChatModel(["billing"])),
            HandoffAgent("human", ScriptedChatModel(["human"])),
        ],
        fallback="human",
        time_budget=60,
        clock=lambda: now[0],
        checkpointer=InMemorySaver(),
    )
    graph.invoke({"messages": [("user", "refund")]}, cfg())
    now[0] = 300.0  # the human answered five minutes later
    result = graph.invoke(Command(resume="yes"), cfg())
    assert result["active_agent"] == "billing" and result["turn_elapsed"] < 60


# 11. a state schema without the handoff keys is refused; a subclass works
def test_state_schema_must_extend_handoff_state() -> None:
    with pytest.raises(InvalidHandoffError, match="subclass HandoffState"):
        build_handoff_graph([HandoffAgent("a", lambda s: {})], state_schema=MessagesState)

    class Mine(HandoffState, total=False):
        customer_tier: str

    def a(state: dict) -> dict:
        return handoff_to("b", briefing="x", customer_tier="gold")

    graph = build_handoff_graph(
        [HandoffAgent("a", a), HandoffAgent("b", lambda s: {"messages": [AIMessage(s["customer_tier"])]})],
        state_schema=Mine,
    ).compile()
    assert graph.invoke({"messages": [("user", "x")]})["messages"][-1].content == "gold"


# 12. the entry router never starts a turn at a disabled agent
def test_entry_substitutes_a_disabled_agent() -> None:
    human = ScriptedChatModel(["human"])
    graph = create_handoff_graph(
        [HandoffAgent("triage", ScriptedChatModel(["triage here"])), HandoffAgent("human", human, enabled=False)],
        router=RuleRouter([Rule("human", keywords=["human"])]),
    )
    result = graph.invoke({"messages": [("user", "a human please")]})
    assert result["active_agent"] == "triage" and not human.calls
    assert "'human' is disabled" in result["routing"][-1]["reason"]


# 13. fit never lowers a bar that no labelled message speaks about
def test_fit_with_only_off_topic_labels_keeps_rejecting() -> None:
    routes = [
        Route("orders", examples=["where is my order", "track my parcel", "order status please"]),
        Route("tech", examples=["the app crashes", "wifi will not connect", "bluetooth does not pair"]),
    ]
    r = SemanticRouter(routes, fallback="human")
    before = dict(r.thresholds)
    r.fit([("a happy dog", None), ("the capital of France", None)])
    assert all(r.thresholds[k] >= before[k] for k in before)
    assert r.route("a happy dog").is_fallback


# 14 + 15. bad router input is a typed error, not misrouting or a bare exception
def test_router_input_is_checked() -> None:
    r = SemanticRouter([Route("orders", examples=["where is my order"])])
    with pytest.raises(InvalidRouteError, match="name no route"):
        evaluate(r, [("where is it", "ordres")])
    for bad in (None, 42):
        with pytest.raises(InvalidRouteError):
            r.route(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidRouteError):
            RuleRouter([Rule("h", keywords=["x"])]).route(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidRouteError, match="list of strings"):
        Rule("human", keywords="human")  # type: ignore[arg-type]
    with pytest.raises(InvalidRouteError, match="list of strings"):
        Route("orders", examples="where is my order")  # type: ignore[arg-type]
    with pytest.raises(InvalidRouteError, match="must be a number"):
        SemanticRouter([Route("orders", examples=["x"])], threshold="high")  # type: ignore[arg-type]
    with pytest.raises(InvalidRouteError, match="must be a number"):
        SemanticRouter([Route("orders", examples=["x"])], margin="wide")  # type: ignore[arg-type]


# minor: stray argument keys from a model
def test_handoff_tool_ignores_unexpected_argument_keys() -> None:
    t = create_handoff_tool("orders")
    msg = t.invoke({"type": "tool_call", "id": "1", "name": t.name, "args": {"briefing": "b", "self": 1, "x": 2}})
    assert isinstance(msg, ToolMessage) and msg.status == "success"


# an agent looping inside itself is cut to the fallback, not raised at the user
def test_runaway_agent_reaches_the_fallback() -> None:
    @tool
    def poll() -> str:
        """Poll forever."""
        return "not yet"

    looping = ScriptedChatModel([tool_call("poll")], cycle=True)
    graph = create_handoff_graph(
        [HandoffAgent("a", looping, tools=[poll]), HandoffAgent("human", lambda s: {"messages": [AIMessage("human")]})],
        fallback="human",
        recursion_limit=20,
    )
    result = graph.invoke({"messages": [("user", "x")]})
    assert (
        result["active_agent"] == "human"
        and "did not finish within the recursion limit" in result["breakers"][0]["reason"]
    )
    assert_valid_history(result["messages"])


# -- second review round ------------------------------------------------------------------------------------


def test_long_handoff_chains_hit_a_breaker_not_the_recursion_limit() -> None:
    names = ["a", "b", "c"]
    agents = [
        HandoffAgent(n, ScriptedChatModel([transfer(names[(i + 1) % 3])], cycle=True)) for i, n in enumerate(names)
    ]
    agents.append(HandoffAgent("human", lambda s: {"messages": [AIMessage("human")]}))
    graph = create_handoff_graph(agents, fallback="human", max_handoffs_per_turn=60, ping_pong=False)
    result = graph.invoke({"messages": [("user", "x")]})
    assert result["active_agent"] == "human" and "60 handoffs" in result["breakers"][0]["reason"]


def test_a_retry_respects_the_time_budget() -> None:
    from langchain.agents import create_agent

    now = [0.0]

    def slow(messages: list) -> AIMessage:
        now[0] += 30.0
        return transfer("orders", payload={})

    model = ScriptedChatModel([slow], cycle=True)
    support = create_agent(model, tools=[], middleware=[handoff_middleware(["orders"])])
    graph = create_handoff_graph(
        [
            HandoffAgent("support", support),
            HandoffAgent("orders", ScriptedChatModel(["o"]), payload_schema=Ref),
            HandoffAgent("human", lambda s: {"messages": [AIMessage("human")]}),
        ],
        fallback="human",
        time_budget=25,
        clock=lambda: now[0],
    )
    result = graph.invoke({"messages": [("user", "x")]})
    assert len(model.calls) == 1 and "time budget of 25s" in result["breakers"][0]["reason"]


def test_retry_feedback_reaches_an_agent_with_a_no_tools_view() -> None:
    from langchain.agents import create_agent

    model = ScriptedChatModel([transfer("orders", payload={}), transfer("orders", payload={"order_id": "A"})])
    support = create_agent(model, tools=[], middleware=[handoff_middleware(["orders"])])
    graph = create_handoff_graph(
        [
            HandoffAgent("support", support, context="no_tools"),
            HandoffAgent("orders", ScriptedChatModel(["o"]), payload_schema=Ref),
        ]
    )
    assert graph.invoke({"messages": [("user", "x")]})["active_agent"] == "orders"
    assert any("Field required" in str(m.content) for m in model.calls[1])


def test_messages_a_graph_agent_makes_for_itself_stay_out_of_the_transcript() -> None:
    from langchain_core.messages import HumanMessage, SystemMessage
    from langgraph.graph import END as G_END
    from langgraph.graph import START as G_START
    from langgraph.graph import MessagesState, StateGraph

    def summarising_agent(state: MessagesState) -> dict:
        return {
            "messages": [
                HumanMessage("Here is a summary of the conversation to date: ..."),
                SystemMessage("internal"),
                AIMessage("the reply"),
            ]
        }

    g = StateGraph(MessagesState)
    g.add_node("agent", summarising_agent)
    g.add_edge(G_START, "agent")
    g.add_edge("agent", G_END)
    result = create_handoff_graph([HandoffAgent("a", g.compile())]).invoke({"messages": [("user", "x")]})
    assert [m.content for m in result["messages"]] == ["x", "the reply"]


def test_evaluate_accepts_a_hybrid_routers_rule_targets_and_the_decider_reads_spaced_names() -> None:
    from langgraph_handoff.routing import HybridRouter, LLMDecider

    semantic = SemanticRouter(
        [Route("orders", examples=["where is my order"]), Route("after sales", examples=["refund"])]
    )
    router = HybridRouter(rules=[Rule("human", keywords=["human"])], semantic=semantic)
    assert evaluate(router, [("a human please", "human"), ("where is my order", "orders")]).accuracy == 1.0
    decider = LLMDecider(ScriptedChatModel(["After Sales."]))
    assert decider("x", semantic.routes) == "after sales"


def test_function_agents_carry_handoff_metadata() -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    seen: list[dict] = []

    class Spy(BaseCallbackHandler):
        def on_chain_start(self, serialized, inputs, *, metadata=None, **kw):  # type: ignore[no-untyped-def]
            if (metadata or {}).get("handoff_agent"):
                seen.append(metadata)

    graph = create_handoff_graph([HandoffAgent("desk", lambda s: {"messages": [AIMessage("hi")]})])
    graph.invoke({"messages": [("user", "x")]}, {"callbacks": [Spy()]})
    assert any(m["handoff_agent"] == "desk" and m["handoff_chain"] == ["desk"] for m in seen)


def test_every_agent_disabled_ends_the_turn_politely() -> None:
    a = ScriptedChatModel(["a"])
    graph = create_handoff_graph([HandoffAgent("a", a, enabled=False)])
    result = graph.invoke({"messages": [("user", "x")]})
    assert not a.calls and result["messages"][-1].name == "handoff_router" and result["breakers"]
