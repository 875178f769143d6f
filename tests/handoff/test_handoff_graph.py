"""Handoff graphs: valid history, first-handoff-wins, payload errors back to the model, circuit
breakers, sticky turns, context policies, observability and persistence."""

from __future__ import annotations

import asyncio
import enum
import logging
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import MessagesState
from pydantic import BaseModel, ConfigDict, Field

from langgraph_handoff.errors import InvalidHandoffError
from langgraph_handoff.handoff import (
    HandoffAgent,
    HandoffState,
    assert_valid_history,
    build_handoff_graph,
    create_handoff_graph,
    handoff_log,
    handoff_middleware,
    handoff_to,
    is_handoff_message,
    routing_log,
    validate_history,
)
from langgraph_handoff.handoff.graph import EVENT
from langgraph_handoff.handoff.tools import tool_name_for
from langgraph_handoff.routing import Route, Rule, RuleRouter, SemanticRouter
from langgraph_handoff.testing import ScriptedChatModel, reply, tool_call


class OrderRef(BaseModel):
    order_id: str
    status: str


class OrderId(BaseModel):
    order_id: str


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    return f"order {order_id}: delivered"


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def transfer(target: str, briefing: str = "please take over", **args: Any) -> AIMessage:
    return tool_call(tool_name_for(target), {"briefing": briefing, **args})


def desk(
    after_sales: list, orders: list | None = None, tech: list | None = None, *, cycle: bool = False, **options: Any
):
    """The support desk's four agents on scripted models (``cycle``: each script starts over
    when it runs out, for a graph that serves many runs)."""
    models = {
        "after_sales": ScriptedChatModel(after_sales, cycle=cycle),
        "orders": ScriptedChatModel(orders or ["orders here"], cycle=cycle),
        "tech": ScriptedChatModel(tech or ["tech here"], cycle=cycle),
        "human": ScriptedChatModel(["a human will call you"], cycle=cycle),
    }
    agents = [
        HandoffAgent("after_sales", models["after_sales"], tools=[lookup_order], description="returns"),
        HandoffAgent("orders", models["orders"], payload_schema=OrderRef, description="order changes"),
        HandoffAgent("tech", models["tech"], description="broken devices"),
        HandoffAgent("human", models["human"], description="a person"),
    ]
    options.setdefault("fallback", "human")
    options.setdefault("checkpointer", InMemorySaver())
    graph = create_handoff_graph(agents, **options)
    return graph, models


# -- one handoff, end to end ---------------------------------------------------------------------


def test_handoff_with_payload_reaches_the_receiving_model() -> None:
    graph, m = desk(
        [
            tool_call("lookup_order", {"order_id": "A-1"}),
            transfer(
                "orders",
                "Customer wants the black colour instead",
                payload={"order_id": "A-1", "status": "delivered"},
                reason="order change",
            ),
        ],
        orders=["Done: A-1 now ships in black."],
    )
    result = graph.invoke({"messages": [("user", "swap my headphones for the black ones")]}, cfg())
    assert_valid_history(result["messages"])
    assert result["active_agent"] == "orders" and result["messages"][-1].content == "Done: A-1 now ships in black."
    seen = m["orders"].calls[0]
    briefing = [x for x in seen if is_handoff_message(x)]
    assert len(briefing) == 1 and briefing[-1] is seen[-1]
    assert "Customer wants the black colour instead" in briefing[0].content
    assert '"order_id": "A-1"' in briefing[0].content and '"status": "delivered"' in briefing[0].content
    h = handoff_log(result)[-1]
    assert (h.source, h.target, h.hop, h.chain, h.trigger) == (
        "after_sales",
        "orders",
        1,
        ["after_sales", "orders"],
        "tool",
    )
    assert h.payload == {"order_id": "A-1", "status": "delivered"} and h.reason == "order change"
    assert result["turn_chain"] == ["after_sales", "orders"]
    # the lookup's real result is in the history
    assert any(isinstance(x, ToolMessage) and x.content == "order A-1: delivered" for x in result["messages"])


def test_invalid_payload_goes_back_to_the_model_which_corrects_it() -> None:
    graph, m = desk(
        [
            transfer("orders", payload={"status": "delivered"}),  # order_id missing
            transfer("orders", payload={"order_id": "A-1", "status": "delivered"}),
        ]
    )
    result = graph.invoke({"messages": [("user", "change my order")]}, cfg())
    assert_valid_history(result["messages"])
    errors = [x for x in result["messages"] if isinstance(x, ToolMessage) and x.status == "error"]
    assert len(errors) == 1 and "order_id: Field required" in errors[0].content
    # the model's second call saw the error text
    assert any(
        isinstance(x, ToolMessage) and "order_id: Field required" in x.content for x in m["after_sales"].calls[1]
    )
    assert result["active_agent"] == "orders" and handoff_log(result)[-1].payload["order_id"] == "A-1"


def test_missing_briefing_and_disabled_target_are_tool_errors_not_crashes() -> None:
    enabled = {"tech": False}
    models = {
        "a": ScriptedChatModel([tool_call("transfer_to_b", {}), transfer("tech"), "I'll help you myself."]),
        "tech": ScriptedChatModel(["tech"]),
    }
    graph = create_handoff_graph(
        [
            HandoffAgent("a", models["a"]),
            HandoffAgent("b", lambda s: {}),
            HandoffAgent("tech", models["tech"], enabled=lambda: enabled["tech"]),
        ]
    )
    result = graph.invoke({"messages": [("user", "help")]})
    assert_valid_history(result["messages"])
    errors = [x.content for x in result["messages"] if isinstance(x, ToolMessage)]
    assert "needs a 'briefing'" in errors[0] and "not available right now" in errors[1]
    assert result["active_agent"] == "a" and result["messages"][-1].content == "I'll help you myself."
    assert not models["tech"].calls


def test_refused_tool_handoff_goes_back_to_the_model() -> None:
    """A create_agent agent whose middleware tool lacks the target's payload schema: the router's
    refusal goes back to the model, which corrects itself.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""
    from langchain.agents import create_agent

    model = ScriptedChatModel([transfer("orders", payload={}), transfer("orders", payload={"order_id": "A"})])
    support = create_agent(model, tools=[], middleware=[handoff_middleware(["orders"])])  # no schema known here
    orders = ScriptedChatModel(["orders here"])
    graph = create_handoff_graph(
        [HandoffAgent("support", support), HandoffAgent("orders", orders, payload_schema=OrderId)]
    )
    result = graph.invoke({"messages": [("user", "x")]})
    assert result["active_agent"] == "orders" and len(model.calls) == 2
    assert any("order_id: Field required" in str(m.content) for m in model.calls[1])
    assert_valid_history(result["messages"])


def test_payload_schema_with_aliases() -> None:
    """Payload schemas with aliases: the model's alias is accepted and recorded.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""

    class Aliased(BaseModel):
        model_config = ConfigDict(populate_by_name=True)
        order_id: str = Field(alias="orderId")

    a = ScriptedChatModel([transfer("orders", payload={"orderId": "A-1"})])
    graph = create_handoff_graph(
        [HandoffAgent("a", a), HandoffAgent("orders", ScriptedChatModel(["ok"]), payload_schema=Aliased)]
    )
    result = graph.invoke({"messages": [("user", "x")]})
    assert result["active_agent"] == "orders" and handoff_log(result)[-1].payload == {"orderId": "A-1"}


def test_nested_payload_schema_converts_for_providers() -> None:
    """Nested payload schemas (an enum in a model in the payload) survive a provider's tool conversion.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""

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


# -- several handoffs in one message ---------------------------------------------------------------


def parallel_desk():
    return desk(
        [
            reply(
                "",
                tool_call("lookup_order", {"order_id": "A-1"}),
                transfer("tech", "first"),
                transfer("orders", "second", payload={"order_id": "A-1", "status": "x"}),
            )
        ]
    )


def check_parallel_result(result: dict[str, Any]) -> None:
    msgs = result["messages"]
    assert validate_history(msgs) == []
    ai = next(x for x in msgs if isinstance(x, AIMessage) and len(x.tool_calls) == 3)
    answers = {x.tool_call_id: x for x in msgs if isinstance(x, ToolMessage)}
    assert set(answers) == {c["id"] for c in ai.tool_calls}  # every call answered exactly once
    lookup, first, second = (answers[c["id"]] for c in ai.tool_calls)
    assert lookup.content == "order A-1: delivered"  # sibling tool keeps its real result
    assert first.content == "Handing the conversation to tech."
    assert second.status == "error" and "only the first handoff" in second.content
    assert result["active_agent"] == "tech" and result["turn_chain"] == ["after_sales", "tech"]


def test_first_handoff_wins_and_every_call_is_answered_20_runs() -> None:
    for i in range(20):
        graph, m = parallel_desk()
        result = graph.invoke({"messages": [("user", "it broke, refund or swap")]}, cfg(f"t{i}"))
        check_parallel_result(result)
        assert not m["orders"].calls


async def test_first_handoff_wins_async_20_concurrent_runs() -> None:
    graphs = [parallel_desk()[0] for _ in range(20)]
    results = await asyncio.gather(
        *(g.ainvoke({"messages": [("user", "x")]}, cfg(f"a{i}")) for i, g in enumerate(graphs))
    )
    for result in results:
        check_parallel_result(result)


def test_invalid_first_handoff_lets_the_next_valid_one_win() -> None:
    graph, _ = desk([reply("", transfer("orders", payload={}), transfer("tech", "valid"))])
    result = graph.invoke({"messages": [("user", "x")]}, cfg())
    assert_valid_history(result["messages"])
    assert result["active_agent"] == "tech"


# -- circuit breakers -------------------------------------------------------------------------------


def test_max_handoffs_per_turn_sends_the_conversation_to_the_fallback() -> None:
    chain = ["a", "b", "c", "d", "e"]
    models = {
        n: ScriptedChatModel([transfer(chain[i + 1])] if i + 1 < len(chain) else ["end"]) for i, n in enumerate(chain)
    }
    models["human"] = ScriptedChatModel(["A person will help."])
    graph = create_handoff_graph([HandoffAgent(n, models[n]) for n in [*chain, "human"]], fallback="human")
    result = graph.invoke({"messages": [("user", "go")]})
    assert_valid_history(result["messages"])
    assert result["turn_chain"] == ["a", "b", "c", "d", "human"]
    last = handoff_log(result)[-1]
    assert (last.trigger, last.source, last.target) == ("breaker", "d", "human")
    assert "3 handoffs this turn reached the limit of 3" in last.reason
    assert "d had asked to hand over to e" in last.briefing
    assert not models["e"].calls and result["messages"][-1].content == "A person will help."
    refused = [x for x in result["messages"] if isinstance(x, ToolMessage) and x.status == "error"]
    assert len(refused) == 1 and "Not transferred to e" in refused[0].content


def test_ping_pong_is_cut_to_the_fallback() -> None:
    graph, m = desk([transfer("tech", "it's a device problem")], tech=[transfer("after_sales", "they want money back")])
    result = graph.invoke({"messages": [("user", "my app crashes and I want a refund")]}, cfg())
    assert_valid_history(result["messages"])
    assert result["turn_chain"] == ["after_sales", "tech", "human"]
    last = handoff_log(result)[-1]
    assert last.trigger == "breaker" and last.reason == "ping-pong: after_sales -> tech -> after_sales"
    assert len(m["after_sales"].calls) == 1 and result["messages"][-1].content == "a human will call you"


def test_ping_pong_can_be_allowed() -> None:
    graph, _ = desk([transfer("tech"), "back with after-sales"], tech=[transfer("after_sales")], ping_pong=False)
    result = graph.invoke({"messages": [("user", "x")]}, cfg())
    assert result["turn_chain"] == ["after_sales", "tech", "after_sales"] and result["active_agent"] == "after_sales"


def test_time_budget_is_checked_at_every_handoff() -> None:
    now = [1000.0]

    def slow(messages: list) -> AIMessage:
        now[0] += 31.0  # this agent "takes" 31 s of wall clock
        return transfer("orders", payload={"order_id": "A", "status": "x"})

    graph, m = desk([slow], time_budget=30.0, clock=lambda: now[0])
    result = graph.invoke({"messages": [("user", "x")]}, cfg())
    last = handoff_log(result)[-1]
    assert last.target == "human" and "time budget of 30s for this turn is spent (31.0s of agent time)" in last.reason
    assert not m["orders"].calls


def test_breaker_in_the_fallback_itself_ends_the_turn_with_a_message() -> None:
    models = {"a": ScriptedChatModel([transfer("human")]), "human": ScriptedChatModel([transfer("a")])}
    graph = create_handoff_graph(
        [HandoffAgent("a", models["a"]), HandoffAgent("human", models["human"])], fallback="human"
    )
    result = graph.invoke({"messages": [("user", "x")]})
    assert_valid_history(result["messages"])
    last = result["messages"][-1]
    assert isinstance(last, AIMessage) and last.name == "handoff_router" and "ping-pong" in last.content
    assert result["active_agent"] == "human"


def test_without_fallback_a_breach_ends_the_turn_politely() -> None:
    models = {"a": ScriptedChatModel([transfer("b")]), "b": ScriptedChatModel([transfer("a")])}
    graph = create_handoff_graph([HandoffAgent("a", models["a"]), HandoffAgent("b", models["b"])])
    result = graph.invoke({"messages": [("user", "x")]})
    assert result["messages"][-1].name == "handoff_router" and result["active_agent"] == "b"
    assert_valid_history(result["messages"])


def test_breaker_counts_reset_each_user_turn() -> None:
    graph, _ = desk(
        [transfer("tech"), "after-sales again"],
        tech=["tech answer", transfer("after_sales", "refund please")],
        ping_pong=False,
        max_handoffs_per_turn=1,
    )
    first = graph.invoke({"messages": [("user", "x")]}, cfg())
    assert first["turn_chain"] == ["after_sales", "tech"] and first["turn_hops"] == 1
    second = graph.invoke({"messages": [("user", "y")]}, cfg())  # starts at tech, one more hop allowed
    assert second["turn_chain"] == ["tech", "after_sales"] and handoff_log(second)[-1].trigger == "tool"


def refusing_support_desk(model: ScriptedChatModel, **options: Any) -> Any:
    """A ``create_agent`` support agent on ``model`` whose handoff middleware does not know the
    orders desk's payload schema (so the router refuses its handoffs), the orders desk, and a
    human fallback."""
    from langchain.agents import create_agent

    support = create_agent(model, tools=[], middleware=[handoff_middleware(["orders"])])
    return create_handoff_graph(
        [
            HandoffAgent("support", support),
            HandoffAgent("orders", ScriptedChatModel(["o"]), payload_schema=OrderId),
            HandoffAgent("human", lambda s: {"messages": [AIMessage("human")]}),
        ],
        fallback="human",
        **options,
    )


def test_an_agent_that_keeps_asking_for_a_refused_handoff_reaches_the_fallback() -> None:
    """An agent that keeps asking for a handoff the router refuses reaches the fallback after the first
    try and two retries.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""
    model = ScriptedChatModel([transfer("orders", payload={})], cycle=True)
    graph = refusing_support_desk(model)
    result = graph.invoke({"messages": [("user", "x")]})
    assert len(model.calls) == 3  # the first try and two more
    assert result["active_agent"] == "human" and handoff_log(result)[-1].trigger == "breaker"
    assert_valid_history(result["messages"])


def test_disabled_fallback_ends_the_turn_and_the_breach_is_recorded() -> None:
    """A disabled fallback is not used, and a refused handoff is recorded in ``breakers`` even when
    the turn ends.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""
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


def test_fallback_message_with_braces_never_raises() -> None:
    """A custom fallback message with braces never raises.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""
    graph = create_handoff_graph(
        [HandoffAgent("a", ScriptedChatModel([transfer("b")])), HandoffAgent("b", ScriptedChatModel([transfer("a")]))],
        fallback_message="Sorry {name} :-} ({reason})",
    )
    last = graph.invoke({"messages": [("user", "x")]})["messages"][-1]
    assert last.content.startswith("Sorry {name} :-} (ping-pong")


def test_time_waiting_at_an_interrupt_is_not_agent_time() -> None:
    """Waiting for a human at an interrupt does not count against the time budget.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""
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


def test_runaway_agent_reaches_the_fallback() -> None:
    """An agent looping inside itself is cut to the fallback, not raised at the user.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""

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


def test_long_handoff_chains_hit_a_breaker_not_the_recursion_limit() -> None:
    """A long handoff chain with a high ``max_handoffs_per_turn`` hit the recursion limit before its
    breaker; the limit now covers every allowed visit.

    Found by the second review round of the handoff and routing code; fails before commit
    c4af24a."""
    names = ["a", "b", "c"]
    agents = [
        HandoffAgent(n, ScriptedChatModel([transfer(names[(i + 1) % 3])], cycle=True)) for i, n in enumerate(names)
    ]
    agents.append(HandoffAgent("human", lambda s: {"messages": [AIMessage("human")]}))
    graph = create_handoff_graph(agents, fallback="human", max_handoffs_per_turn=60, ping_pong=False)
    result = graph.invoke({"messages": [("user", "x")]})
    assert result["active_agent"] == "human" and "60 handoffs" in result["breakers"][0]["reason"]


def test_a_retry_respects_the_time_budget() -> None:
    """A retry after a refused handoff ignored a spent time budget.

    Found by the second review round of the handoff and routing code; fails before commit
    c4af24a."""
    now = [0.0]

    def slow(messages: list) -> AIMessage:
        now[0] += 30.0
        return transfer("orders", payload={})

    model = ScriptedChatModel([slow], cycle=True)
    graph = refusing_support_desk(model, time_budget=25, clock=lambda: now[0])
    result = graph.invoke({"messages": [("user", "x")]})
    assert len(model.calls) == 1 and "time budget of 25s" in result["breakers"][0]["reason"]


# -- routing at the entry, sticky turns --------------------------------------------------------------


ROUTER = SemanticRouter(
    [
        Route(
            "orders", examples=["where is my order", "change my delivery address", "我的订单到哪了", "איפה ההזמנה שלי"]
        ),
        Route("tech", examples=["the app crashes", "wifi will not connect", "蓝牙连不上", "האפליקציה קורסת"]),
    ],
    fallback="human",
)


@pytest.mark.parametrize(
    "text,agent",
    [
        ("where is my order??", "orders"),
        ("我的订单到哪里了", "orders"),
        ("האפליקציה שלי קורסת", "tech"),
        ("tell me a poem about cats", "human"),
    ],
)
def test_entry_routes_the_first_message_and_records_the_scores(text: str, agent: str) -> None:
    graph, _ = desk(["after-sales"], router=ROUTER)
    result = graph.invoke({"messages": [("user", text)]}, cfg())
    assert result["active_agent"] == agent
    decision = routing_log(result)[0]
    assert decision.target == agent and set(decision.scores) == {"orders", "tech"}
    assert handoff_log(result)[0].trigger == "route"


def test_next_turn_stays_with_the_last_active_agent_but_rules_still_apply() -> None:
    router = RuleRouter([Rule("human", commands=["talk to a human"])])
    graph, _ = desk([transfer("orders", payload={"order_id": "A", "status": "x"})], orders=["o1", "o2"], router=router)
    graph.invoke({"messages": [("user", "help")]}, cfg())
    second = graph.invoke({"messages": [("user", "and the invoice?")]}, cfg())
    assert second["active_agent"] == "orders" and routing_log(second)[-1].method == "sticky"
    third = graph.invoke({"messages": [("user", "I want to TALK to a human now")]}, cfg())
    assert third["active_agent"] == "human" and routing_log(third)[-1].method == "rule"
    assert [h.target for h in handoff_log(third)] == ["after_sales", "orders", "human"]


def test_reroute_always_routes_every_turn() -> None:
    graph, _ = desk(["a1"], orders=["o1"], tech=["t1"], router=ROUTER, reroute="always")
    assert graph.invoke({"messages": [("user", "where is my order")]}, cfg())["active_agent"] == "orders"
    assert graph.invoke({"messages": [("user", "the app crashes")]}, cfg())["active_agent"] == "tech"


def test_entry_substitutes_a_disabled_agent() -> None:
    """The entry router never starts a turn at a disabled agent.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""
    human = ScriptedChatModel(["human"])
    graph = create_handoff_graph(
        [HandoffAgent("triage", ScriptedChatModel(["triage here"])), HandoffAgent("human", human, enabled=False)],
        router=RuleRouter([Rule("human", keywords=["human"])]),
    )
    result = graph.invoke({"messages": [("user", "a human please")]})
    assert result["active_agent"] == "triage" and not human.calls
    assert "'human' is disabled" in result["routing"][-1]["reason"]


def test_every_agent_disabled_ends_the_turn_politely() -> None:
    """A graph whose every agent is disabled still started turns at one.

    Found by the second review round of the handoff and routing code; fails before commit
    c4af24a."""
    a = ScriptedChatModel(["a"])
    graph = create_handoff_graph([HandoffAgent("a", a, enabled=False)])
    result = graph.invoke({"messages": [("user", "x")]})
    assert not a.calls and result["messages"][-1].name == "handoff_router" and result["breakers"]


# -- context policies ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "policy,expect",
    [
        ("full", ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "ToolMessage", "HumanMessage"]),
        ("briefing", ["HumanMessage"]),
        ("no_tools", ["HumanMessage", "HumanMessage"]),
        (2, ["HumanMessage"]),  # the briefing: a view starts at a user message
        (6, ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "ToolMessage", "HumanMessage"]),
    ],
)
def test_context_policy_shapes_what_the_receiver_sees(policy: Any, expect: list[str]) -> None:
    a = ScriptedChatModel([tool_call("lookup_order", {"order_id": "A"}), transfer("b", "the briefing")])
    b = ScriptedChatModel(["ok"])
    graph = create_handoff_graph([HandoffAgent("a", a, tools=[lookup_order]), HandoffAgent("b", b, context=policy)])
    result = graph.invoke({"messages": [("user", "hi")]})
    seen = b.calls[0]
    assert [type(x).__name__ for x in seen] == expect
    assert validate_history(seen) == []
    assert "the briefing" in seen[-1].content
    assert len(result["messages"]) == 7  # the shared transcript keeps everything


def test_retry_feedback_reaches_an_agent_with_a_no_tools_view() -> None:
    """An agent with a ``"no_tools"`` view never saw the error its retry was about.

    Found by the second review round of the handoff and routing code; fails before commit
    c4af24a."""
    from langchain.agents import create_agent

    model = ScriptedChatModel([transfer("orders", payload={}), transfer("orders", payload={"order_id": "A"})])
    support = create_agent(model, tools=[], middleware=[handoff_middleware(["orders"])])
    graph = create_handoff_graph(
        [
            HandoffAgent("support", support, context="no_tools"),
            HandoffAgent("orders", ScriptedChatModel(["o"]), payload_schema=OrderId),
        ]
    )
    assert graph.invoke({"messages": [("user", "x")]})["active_agent"] == "orders"
    assert any("Field required" in str(m.content) for m in model.calls[1])


# -- plain function agents --------------------------------------------------------------------------------


def test_plain_function_agents_hand_off_with_handoff_to() -> None:
    def triage(state: dict) -> dict:
        return handoff_to(
            "orders",
            briefing="order question",
            payload=OrderRef(order_id="Z", status="new"),
            messages=[AIMessage("Let me pass you to orders.")],
        )

    def orders(state: dict) -> dict:
        return {"messages": [AIMessage(f"orders saw: {state['messages'][-1].content.splitlines()[0]}")]}

    graph = create_handoff_graph(
        [HandoffAgent("triage", triage), HandoffAgent("orders", orders, payload_schema=OrderRef)]
    )
    result = graph.invoke({"messages": [("user", "hi")]})
    assert result["messages"][-1].content == "orders saw: [Handoff from triage to orders]"
    assert handoff_log(result)[-1].trigger == "node" and handoff_log(result)[-1].payload == {
        "order_id": "Z",
        "status": "new",
    }


def test_plain_function_with_invalid_request_goes_to_fallback() -> None:
    graph = create_handoff_graph(
        [
            HandoffAgent("triage", lambda s: handoff_to("orders", briefing="x", payload={"bad": 1})),
            HandoffAgent("orders", lambda s: {"messages": [AIMessage("o")]}, payload_schema=OrderRef),
            HandoffAgent("human", lambda s: {"messages": [AIMessage("human here")]}),
        ],
        fallback="human",
    )
    result = graph.invoke({"messages": [("user", "hi")]})
    last = handoff_log(result)[-1]
    assert last.target == "human" and last.trigger == "breaker" and "invalid handoff" in last.reason
    assert "order_id: Field required" in last.reason and result["messages"][-1].content == "human here"


async def test_async_function_agents() -> None:
    async def a(state: dict) -> dict:
        return handoff_to("b", briefing="async")

    async def b(state: dict) -> dict:
        return {"messages": [AIMessage("b done")]}

    graph = create_handoff_graph([HandoffAgent("a", a), HandoffAgent("b", b)])
    result = await graph.ainvoke({"messages": [("user", "hi")]})
    assert result["messages"][-1].content == "b done" and result["turn_chain"] == ["a", "b"]


def test_orphaned_calls_from_a_custom_agent_are_answered() -> None:
    def sloppy(state: dict) -> dict:
        return {"messages": [AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": "c9"}])]}

    result = create_handoff_graph([HandoffAgent("s", sloppy)]).invoke({"messages": [("user", "hi")]})
    assert_valid_history(result["messages"])
    assert result["messages"][-1].tool_call_id == "c9" and "Not executed" in result["messages"][-1].content


def test_messages_a_graph_agent_makes_for_itself_stay_out_of_the_transcript() -> None:
    """A graph agent's own messages (a summarisation middleware's summary, a system message) leaked
    into the shared transcript.

    Found by the second review round of the handoff and routing code; fails before commit
    c4af24a."""
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


def test_allowed_handoffs_limit_the_tools_an_agent_gets() -> None:
    a = ScriptedChatModel(["hi"])
    graph = create_handoff_graph(
        [
            HandoffAgent("a", a, handoffs=["c"]),
            HandoffAgent("b", ScriptedChatModel(["b"])),
            HandoffAgent("c", ScriptedChatModel(["c"])),
        ]
    )
    graph.invoke({"messages": [("user", "x")]})
    assert a.bound_tools == ["transfer_to_c"]


# -- observability -----------------------------------------------------------------------------------------


class MetadataSpy(BaseCallbackHandler):
    def __init__(self) -> None:
        self.chat_metadata: list[dict] = []
        self.custom: list[tuple[str, Any]] = []

    def on_chat_model_start(self, serialized, messages, *, metadata=None, **kw):  # type: ignore[no-untyped-def]
        self.chat_metadata.append(dict(metadata or {}))

    def on_custom_event(self, name, data, **kw):  # type: ignore[no-untyped-def]
        self.custom.append((name, data))


def test_decisions_and_handoffs_are_streamed_logged_and_tagged(caplog: pytest.LogCaptureFixture) -> None:
    graph, _ = desk(["after-sales here"], tech=[transfer("after_sales", "refund request")], router=ROUTER)
    spy = MetadataSpy()
    with caplog.at_level(logging.INFO, logger="langgraph_handoff"):
        chunks = list(
            graph.stream(
                {"messages": [("user", "the app crashes again")]}, {**cfg(), "callbacks": [spy]}, stream_mode="custom"
            )
        )
    kinds = [c[EVENT] for c in chunks]
    assert kinds == ["route", "handoff"]
    assert chunks[0]["scores"] and chunks[0]["method"] == "semantic"
    assert chunks[1]["chain"] == ["tech", "after_sales"] and chunks[1]["briefing"] == "refund request"
    assert [n for n, _ in spy.custom] == ["langgraph_handoff.route", "langgraph_handoff.handoff"]
    assert any(md.get("handoff_agent") == "tech" for md in spy.chat_metadata)
    text, thread, handoff = caplog.text, cfg()["configurable"]["thread_id"], chunks[1]
    assert f"route on {thread} -> tech via semantic" in text
    assert (
        f"handoff {handoff['id']} on {thread}: tech -> after_sales (hop 1, chain tech -> after_sales; "
        "briefing: 14 characters)" in text
    )
    assert "refund request" not in text  # no user text in the logs unless content capture is on
    record = next(r for r in caplog.records if getattr(r, "langgraph_handoff.event", None) == "handoff")
    assert getattr(record, "langgraph_handoff.handoff.id") == handoff["id"]
    assert getattr(record, "gen_ai.conversation.id") == thread
    assert getattr(record, "langgraph_handoff.handoff.chain") == "tech -> after_sales"


def test_function_agents_carry_handoff_metadata() -> None:
    """Function agents' runs lacked the handoff metadata.

    Found by the second review round of the handoff and routing code; fails before commit
    c4af24a."""
    seen: list[dict] = []

    class Spy(BaseCallbackHandler):
        def on_chain_start(self, serialized, inputs, *, metadata=None, **kw):  # type: ignore[no-untyped-def]
            if (metadata or {}).get("handoff_agent"):
                seen.append(metadata)

    graph = create_handoff_graph([HandoffAgent("desk", lambda s: {"messages": [AIMessage("hi")]})])
    graph.invoke({"messages": [("user", "x")]}, {"callbacks": [Spy()]})
    assert any(m["handoff_agent"] == "desk" and m["handoff_chain"] == ["desk"] for m in seen)


# -- persistence ---------------------------------------------------------------------------------------------


def test_state_persists_in_the_object_store_saver(tmp_path) -> None:
    from langgraph_handoff import ObjectStoreSaver

    url = f"file://{tmp_path / 'store'}"
    graph, _ = desk(
        [transfer("orders", "swap", payload={"order_id": "A-1", "status": "delivered"})],
        orders=["done", "second turn"],
        checkpointer=ObjectStoreSaver.from_url(url),
    )
    graph.invoke({"messages": [("user", "swap")]}, cfg("c-1"))
    reloaded = ObjectStoreSaver.from_url(url)  # a new process would do this
    state = graph.builder.compile(checkpointer=reloaded).get_state(cfg("c-1")).values
    assert state["active_agent"] == "orders"
    assert handoff_log(state)[-1].payload == {"order_id": "A-1", "status": "delivered"}
    assert routing_log(state)[0].target == "after_sales"
    assert_valid_history(state["messages"])


def test_handoff_round_trips_through_langgraph_serializer() -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from langgraph_handoff.handoff import SERDE_ALLOWLIST, Handoff

    h = Handoff(source="a", target="b", briefing="ü 中文 עברית", payload={"n": [1, 2]}, chain=["a", "b"], hop=1)
    strict = JsonPlusSerializer(allowed_msgpack_modules=list(SERDE_ALLOWLIST))
    assert strict.loads_typed(strict.dumps_typed(h)) == h
    assert Handoff.model_validate(strict.loads_typed(strict.dumps_typed(h.model_dump(mode="json")))) == h


# -- building ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(agents=[]), "at least one agent"),
        (dict(agents=[HandoffAgent("a", lambda s: {}), HandoffAgent("a", lambda s: {})]), "unique"),
        (dict(agents=[HandoffAgent("handoff_router", lambda s: {})]), "rename"),
        (dict(agents=[HandoffAgent("a", lambda s: {})], fallback="human"), "fallback 'human' is not an agent"),
        (dict(agents=[HandoffAgent("a", lambda s: {}, handoffs=["zz"])]), "unknown agents"),
        (dict(agents=[HandoffAgent("a", lambda s: {})], router=ROUTER), "not agents"),
        (dict(agents=[HandoffAgent("a", lambda s: {})], max_handoffs_per_turn=0), "int >= 1"),
    ],
)
def test_bad_graph_configuration_is_a_typed_error(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidHandoffError, match=match):
        create_handoff_graph(**kwargs)


def test_bad_agent_specs_are_typed_errors() -> None:
    with pytest.raises(InvalidHandoffError):
        HandoffAgent("", lambda s: {})
    with pytest.raises(InvalidHandoffError):
        HandoffAgent("__x", lambda s: {})
    with pytest.raises(InvalidHandoffError):
        _ = HandoffAgent("a", 42).kind
    with pytest.raises(InvalidHandoffError, match="unknown context policy"):
        HandoffAgent("a", lambda s: {}, context="some")


def test_the_user_message_is_never_lost() -> None:
    graph, _ = desk(
        [transfer("tech"), "after-sales again"],
        tech=[transfer("orders", payload={"order_id": "1", "status": "s"})],
        orders=[transfer("after_sales")],
    )
    result = graph.invoke({"messages": [HumanMessage("my exact words")]}, cfg())
    assert result["messages"][0].content == "my exact words"
    assert sum(1 for x in result["messages"] if isinstance(x, HumanMessage) and not is_handoff_message(x)) == 1


def test_agent_names_that_sanitise_alike_get_distinct_tools() -> None:
    """Agent names that sanitise to the same tool name get distinct tools of at most 64 characters.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""
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


def test_configured_chat_model_is_a_model_agent() -> None:
    """Chat models configured with ``.bind()``/``.with_config()`` are model agents; other wrappers
    are refused.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""
    base = ScriptedChatModel([transfer("b")])
    graph = create_handoff_graph(
        [HandoffAgent("a", base.bind(temperature=0)), HandoffAgent("b", ScriptedChatModel(["b"]))]
    )
    assert graph.invoke({"messages": [("user", "x")]})["active_agent"] == "b"
    assert base.bound_tools == ["transfer_to_b"]
    with pytest.raises(InvalidHandoffError, match="RunnableRetry"):
        create_handoff_graph([HandoffAgent("a", ScriptedChatModel(["x"]).with_retry())])


def test_chat_model_without_tool_calling_is_a_typed_error_naming_the_fix() -> None:
    """A chat model without ``bind_tools`` (langchain_core's ``GenericFakeChatModel``, the first
    thing a user tries) is refused at build time with a typed error that names the fix, not a bare
    ``NotImplementedError``; also when configured with ``.bind()``. Fails before the fix (issue 47)."""
    fake = GenericFakeChatModel(messages=iter([AIMessage("hi")]))
    for agent in (fake, fake.bind(stop=["x"])):
        with pytest.raises(InvalidHandoffError, match="ScriptedChatModel") as caught:
            create_handoff_graph([HandoffAgent("a", agent), HandoffAgent("b", lambda s: {})])
        assert "'a'" in str(caught.value) and "GenericFakeChatModel does not implement bind_tools" in str(caught.value)
    # alone, with no tools to bind, it is a valid agent and answers
    graph = create_handoff_graph([HandoffAgent("a", GenericFakeChatModel(messages=iter([AIMessage("hi")])))])
    assert graph.invoke({"messages": [("user", "x")]})["messages"][-1].content == "hi"


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
    """Breaker settings are checked when the graph is built.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""
    with pytest.raises(InvalidHandoffError):
        create_handoff_graph([HandoffAgent("a", lambda s: {})], **options)


def test_state_schema_must_extend_handoff_state() -> None:
    """A state schema without the handoff keys is refused; a subclass of HandoffState works.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""
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


# -- property campaign: random mixes of tool calls in one message --------------------------------------------


@pytest.mark.heavy
def test_random_parallel_call_mixes_keep_history_valid_and_pick_the_first_valid_handoff() -> None:
    """300 random assistant messages mixing ordinary calls, valid handoffs and invalid ones (bad
    payload), in random order. Invariants: every call answered exactly once, ordinary results
    real, the first *valid* handoff wins, nobody else runs.

    One graph serves every run, each on a thread of its own, as a deployed graph does: the
    after_sales model looks the run's message up by the run number in the user's message
    (compiling 300 graphs took two thirds of this test's time)."""
    import random

    rng = random.Random(20261130)
    plans: dict[str, tuple[AIMessage, str | None]] = {}
    for run in range(300):
        calls, expected = [], None
        for _ in range(rng.randint(1, 5)):
            kind = rng.choice(["lookup", "orders_ok", "orders_bad", "tech"])
            if kind == "lookup":
                calls.append(tool_call("lookup_order", {"order_id": f"O{run}"}))
            elif kind == "orders_ok":
                calls.append(transfer("orders", payload={"order_id": "A", "status": "s"}))
                expected = expected or "orders"
            elif kind == "orders_bad":
                calls.append(transfer("orders", payload={"order_id": "A"}))
            else:
                calls.append(transfer("tech"))
                expected = expected or "tech"
        plans[f"run {run}"] = (reply("", *calls), expected)

    def after_sales(messages: list) -> AIMessage | str:
        asked = next(x for x in messages if isinstance(x, HumanMessage)).content
        calls, expected = plans[asked]
        if isinstance(messages[-1], HumanMessage):
            return calls
        # called again: only right when no handoff was valid (the model saw the errors/results)
        assert expected is None, f"{asked}: after_sales ran again after a valid handoff to {expected}"
        return "done"

    graph, m = desk([after_sales], cycle=True)
    orphans = 0
    for run in range(300):
        calls_before = {n: len(m[n].calls) for n in ("orders", "tech")}
        result = graph.invoke({"messages": [("user", f"run {run}")]}, cfg(f"r{run}"))
        expected = plans[f"run {run}"][1]
        problems = validate_history(result["messages"])
        orphans += sum(p.kind == "orphaned_call" for p in problems)
        assert problems == [], (run, problems)
        assert result["active_agent"] == (expected or "after_sales"), run
        ai = next(x for x in result["messages"] if isinstance(x, AIMessage) and x.tool_calls)
        answers = {x.tool_call_id: x for x in result["messages"] if isinstance(x, ToolMessage)}
        for c in ai.tool_calls:
            if c["name"] == "lookup_order":
                assert answers[c["id"]].content == f"order O{run}: delivered"
        ran = {n for n in ("orders", "tech") if len(m[n].calls) > calls_before[n]}
        assert ran == ({expected} if expected else set()), run
    assert orphans == 0


# -- human in the loop inside an agent --------------------------------------------------------------------------


def test_an_agent_can_interrupt_for_a_human_and_resume() -> None:
    from langgraph.types import Command, interrupt

    def approver(state: dict) -> dict:
        answer = interrupt({"question": "approve refund?"})
        return {"messages": [AIMessage(f"refund {answer}")]}

    graph = create_handoff_graph(
        [
            HandoffAgent("triage", ScriptedChatModel([transfer("approver", "refund 20 EUR")])),
            HandoffAgent("approver", approver),
        ],
        checkpointer=InMemorySaver(),
    )
    first = graph.invoke({"messages": [("user", "refund please")]}, cfg())
    assert first["__interrupt__"][0].value == {"question": "approve refund?"}
    done = graph.invoke(Command(resume="approved"), cfg())
    assert done["messages"][-1].content == "refund approved" and done["active_agent"] == "approver"
    assert_valid_history(done["messages"])
    assert len(handoff_log(done)) == 2  # the resume did not replay the handoff
