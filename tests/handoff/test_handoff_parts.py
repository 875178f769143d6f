"""The parts under the graph: history validator, context policies, the handoff tool, the
``create_agent`` middleware and the scripted model."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel

from langgraph_handoff.errors import InvalidHandoffError, InvalidHistoryError
from langgraph_handoff.handoff import (
    BriefingOnly,
    Handoff,
    HandoffAgent,
    LastN,
    StripTools,
    assert_valid_history,
    create_handoff_graph,
    create_handoff_tool,
    handoff_log,
    handoff_middleware,
    validate_history,
)
from langgraph_handoff.handoff.history import orphaned_call_stubs
from langgraph_handoff.handoff.model import validate_payload
from langgraph_handoff.handoff.tools import handoff_pending
from langgraph_handoff.testing import ScriptedChatModel, ScriptExhaustedError, reply, tool_call


def call(*ids: str, content: str = "") -> AIMessage:
    return AIMessage(content, tool_calls=[{"name": "t", "args": {}, "id": i} for i in ids])


def res(i: str) -> ToolMessage:
    return ToolMessage("r", tool_call_id=i)


# -- history ----------------------------------------------------------------------------------------


def test_validator_accepts_valid_histories() -> None:
    assert validate_history([HumanMessage("q"), call("a", "b"), res("b"), res("a"), AIMessage("done")]) == []
    assert validate_history([]) == []


@pytest.mark.parametrize(
    "history,kinds",
    [
        ([call("a", "b"), res("a")], ["orphaned_call"]),
        ([call("a"), HumanMessage("x"), res("a")], ["orphaned_call", "stray_result"]),
        ([res("z")], ["stray_result"]),
        ([call("a"), res("a"), res("a")], ["duplicate_result"]),
        ([call("a"), res("a"), call("a"), res("a")], ["duplicate_call_id"]),
    ],
)
def test_validator_finds_each_defect(history: list, kinds: list[str]) -> None:
    assert [p.kind for p in validate_history(history)] == kinds
    with pytest.raises(InvalidHistoryError) as exc:
        assert_valid_history(history)
    assert len(exc.value.problems) == len(kinds)


def test_stubs_answer_only_the_open_tail() -> None:
    stubs = orphaned_call_stubs([HumanMessage("q"), call("a", "b", "c"), res("b")])
    assert [s.tool_call_id for s in stubs] == ["a", "c"] and all(s.status == "error" for s in stubs)
    assert orphaned_call_stubs([call("a"), res("a"), AIMessage("fine")]) == []


# -- context policies ----------------------------------------------------------------------------


def test_last_n_starts_at_a_user_message_and_never_cuts_a_call_from_its_results() -> None:
    history = [HumanMessage("q"), call("a", "b"), res("a"), res("b"), AIMessage("x")]
    assert LastN(2)(history, "me") == history  # no user message in the window: back to "q"
    assert LastN(10)(history, "me") == history
    longer = [*history, HumanMessage("q2"), call("c"), res("c")]
    assert LastN(3)(longer, "me") == longer[5:]
    assert all(validate_history(LastN(n)(longer, "me")) == [] for n in range(1, 9))
    with pytest.raises(InvalidHandoffError):
        LastN(0)


def test_briefing_only_starts_at_the_briefing_for_this_agent() -> None:
    to_me = Handoff(source="a", target="me", briefing="b1").to_message()
    to_other = Handoff(source="a", target="other", briefing="b2").to_message()
    history = [HumanMessage("q"), to_me, AIMessage("mine"), to_other, AIMessage("theirs")]
    assert BriefingOnly()(history, "me") == history[1:]
    assert BriefingOnly()([HumanMessage("q1"), AIMessage("a"), HumanMessage("q2")], "me")[0].content == "q2"


def test_strip_tools_drops_earlier_tool_traffic_and_keeps_the_current_step() -> None:
    raw = call("b")
    raw.additional_kwargs["tool_calls"] = [{"id": "b", "function": {"name": "t", "arguments": "{}"}}]
    history = [
        HumanMessage("q"),
        call("a", content="let me check"),
        res("a"),
        raw,
        res("b"),
        AIMessage("done"),
        HumanMessage("q2"),
        call("c"),
        res("c"),
    ]
    view = StripTools()(history, "me")
    assert [m.content for m in view] == ["q", "let me check", "done", "q2", "", "r"]
    assert validate_history(view) == [] and not view[1].tool_calls
    assert all("tool_calls" not in m.additional_kwargs for m in view[:3])  # raw OpenAI-style calls go too
    assert view[4].tool_calls  # the current step (after the latest user message) stays whole


# -- payloads and the tool ------------------------------------------------------------------------------


class Ref(BaseModel):
    order_id: str
    qty: int = 1


def test_validate_payload_coerces_and_explains() -> None:
    assert validate_payload(Ref, {"order_id": "A", "qty": "2"}, target="o") == {"order_id": "A", "qty": 2}
    assert validate_payload(Ref, Ref(order_id="B"), target="o") == {"order_id": "B", "qty": 1}
    assert validate_payload(None, None, target="o") is None
    with pytest.raises(InvalidHandoffError, match="qty: Input should be a valid integer"):
        validate_payload(Ref, {"order_id": "A", "qty": "many"}, target="o")
    with pytest.raises(InvalidHandoffError, match="must be an object"):
        validate_payload(None, [1], target="o")


def test_tool_schema_shows_the_targets_payload_fields() -> None:
    t = create_handoff_tool("orders", payload_schema=Ref, description="orders desk")
    schema = t.tool_call_schema if isinstance(t.tool_call_schema, dict) else t.tool_call_schema.model_json_schema()
    assert schema["properties"]["payload"]["properties"]["order_id"]["type"] == "string"
    assert schema["required"] == ["briefing", "payload"]
    assert "orders desk" in t.description


def test_handoff_pending_only_for_successful_handoffs_of_the_last_message() -> None:
    t = create_handoff_tool("x")
    ok = t.invoke({"type": "tool_call", "id": "1", "name": t.name, "args": {"briefing": "b"}})
    bad = t.invoke({"type": "tool_call", "id": "2", "name": t.name, "args": {}})
    ai = AIMessage("", tool_calls=[{"name": t.name, "args": {}, "id": "1"}, {"name": t.name, "args": {}, "id": "2"}])
    assert handoff_pending([ai, ok, bad])
    assert not handoff_pending([ai, bad])
    assert not handoff_pending([ai, ok, bad, AIMessage("later")])


def test_handoff_model_refuses_empty_target_and_renders() -> None:
    with pytest.raises(InvalidHandoffError):
        Handoff(source="a", target=" ")
    msg = Handoff(source=None, target="b", reason="r").to_message()
    assert msg.content.startswith("[Handoff from the user to b]") and msg.name == "handoff"


def test_handoff_tool_ignores_unexpected_argument_keys() -> None:
    """Stray argument keys from a model (``self``, anything) do not break the handoff tool.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""
    t = create_handoff_tool("orders")
    msg = t.invoke({"type": "tool_call", "id": "1", "name": t.name, "args": {"briefing": "b", "self": 1, "x": 2}})
    assert isinstance(msg, ToolMessage) and msg.status == "success"


# -- langchain.agents.create_agent ------------------------------------------------------------------------


@tool
def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"{order_id}: shipped"


def test_create_agent_agents_with_the_middleware() -> None:
    from langchain.agents import create_agent

    orders = HandoffAgent("orders", None, payload_schema=Ref, description="orders")
    support_model = ScriptedChatModel(
        [
            reply(
                "",
                tool_call("lookup", {"order_id": "A"}),
                tool_call("transfer_to_orders", {"briefing": "b", "payload": {}}),
            ),
            reply(
                "",
                tool_call("transfer_to_orders", {"briefing": "fixed", "payload": {"order_id": "A"}}),
                tool_call("transfer_to_billing", {"briefing": "second"}),
            ),
        ]
    )
    support = create_agent(support_model, tools=[lookup], middleware=[handoff_middleware([orders, "billing"])])
    orders_agent = create_agent(ScriptedChatModel(["orders: on it"]), tools=[])
    graph = create_handoff_graph(
        [
            HandoffAgent("support", support),
            HandoffAgent("orders", orders_agent, payload_schema=Ref),
            HandoffAgent("billing", create_agent(ScriptedChatModel(["billing"]), tools=[])),
        ]
    )
    result = graph.invoke({"messages": [("user", "hi")]})
    assert_valid_history(result["messages"])
    assert result["active_agent"] == "orders" and result["messages"][-1].content == "orders: on it"
    assert len(support_model.calls) == 2  # the payload error went back to the model once
    assert handoff_log(result)[-1].payload == {"order_id": "A", "qty": 1}
    texts = [m.content for m in result["messages"] if isinstance(m, ToolMessage)]
    assert "A: shipped" in texts and any("only the first handoff" in t for t in texts)


# -- the scripted model ------------------------------------------------------------------------------------


def test_scripted_model_reports_exhaustion_and_can_cycle() -> None:
    m = ScriptedChatModel(["one"])
    m.invoke("a")
    with pytest.raises(ScriptExhaustedError, match="got call 2"):
        m.invoke("b")
    c = ScriptedChatModel([tool_call("t")], cycle=True)
    ids = {c.invoke("x").tool_calls[0]["id"] for _ in range(3)}
    assert len(ids) == 3


def test_scripted_model_replies_can_depend_on_the_conversation() -> None:
    m = ScriptedChatModel([lambda msgs: f"you said {msgs[-1].content}"])
    assert m.invoke("ping").content == "you said ping"


def test_bad_records_raise_typed_errors_not_pydantic_ones() -> None:
    from langgraph_handoff.errors import InvalidRouteError
    from langgraph_handoff.handoff import handoff_log, routing_log
    from langgraph_handoff.routing import Route, RouteDecision

    with pytest.raises(InvalidRouteError):
        Route("")
    with pytest.raises(InvalidRouteError):
        RouteDecision(target="x", method="guess")  # type: ignore[arg-type]
    with pytest.raises(InvalidHandoffError, match="invalid stored Handoff"):
        handoff_log({"handoffs": [{"source": "a"}]})
    with pytest.raises(InvalidRouteError, match="invalid stored RouteDecision"):
        routing_log({"routing": [{"target": "a", "method": 3}]})
