"""The support-desk handoff graph checkpointed on real Ceph RGW: a conversation moves between
two workers (two savers on one bucket prefix) and its handoff chain, payload and routing
decisions survive, sync and async."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from conftest import make_s3_store
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.handoff import assert_valid_history, handoff_log, routing_log

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import support_desk


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def test_conversation_moves_between_workers_on_s3() -> None:
    prefix = f"desk-{uuid.uuid4().hex}"
    worker_a = support_desk.build(ObjectStoreSaver(make_s3_store(prefix)))
    worker_b = support_desk.build(ObjectStoreSaver(make_s3_store(prefix)))
    first = worker_a.invoke(
        {"messages": [HumanMessage("the headphones from A-1001 arrived scratched, exchange please")]}, cfg("c-1")
    )
    assert first["turn_chain"] == ["after_sales", "orders"]
    second = worker_b.invoke({"messages": [HumanMessage("when will it arrive?")]}, cfg("c-1"))
    assert second["active_agent"] == "orders" and routing_log(second)[-1].method == "sticky"
    assert handoff_log(second)[1].payload == {"order_id": "A-1001", "status": "delivered"}
    assert_valid_history(second["messages"])
    history = list(worker_a.get_state_history(cfg("c-1")))
    assert len(history) >= 8 and history[0].values["messages"] == second["messages"]


async def test_ping_pong_to_human_async_on_s3() -> None:
    prefix = f"desk-{uuid.uuid4().hex}"
    graph = support_desk.build(ObjectStoreSaver(make_s3_store(prefix)))
    result = await graph.ainvoke(
        {"messages": [HumanMessage("after the update the app shows error E42, refund me")]}, cfg("c-2")
    )
    last = handoff_log(result)[-1]
    assert last.trigger == "breaker" and last.target == "human" and last.reason.startswith("ping-pong")
    reloaded = support_desk.build(ObjectStoreSaver(make_s3_store(prefix)))
    state = (await reloaded.aget_state(cfg("c-2"))).values
    assert [h.target for h in handoff_log(state)] == ["tech_support", "after_sales", "human"]


def test_long_term_memory_on_s3() -> None:
    from langgraph_handoff.memory import ObjectStoreMemory

    prefix = f"mem-{uuid.uuid4().hex}"
    a, b = ObjectStoreMemory(make_s3_store(prefix)), ObjectStoreMemory(make_s3_store(prefix))
    a.put(("customers", "c7"), "contact", {"channel": "email"})
    assert b.get(("customers", "c7"), "contact").value == {"channel": "email"}
    assert [i.key for i in b.search(("customers",), filter={"channel": "email"})] == ["contact"]
    assert b.list_namespaces() == [("customers", "c7")]


def test_schema_migration_on_s3() -> None:
    from tests.checkpoint.test_migrations import CFG, migrations, v1_graph, v3_graph

    prefix = f"mig-{uuid.uuid4().hex}"
    v1_graph(ObjectStoreSaver(make_s3_store(prefix))).invoke({"log": ["hi"]}, CFG)
    saver = ObjectStoreSaver(make_s3_store(prefix), migrations=migrations())
    assert v3_graph(saver).get_state(CFG).values == {"log": ["hi", "a"], "subject": "refund", "language": "en"}
    assert v3_graph(saver).invoke({"log": ["again"]}, CFG)["log"][-1] == "b: refund in en"
