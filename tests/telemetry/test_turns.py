"""``langgraph_handoff.turn.duration``: one data point per user turn of a handoff graph, on the
graph's own clock (moved by hand here), with the entry agent and whether a breaker tripped."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_handoff.handoff import HandoffAgent, create_handoff_graph
from langgraph_handoff.testing import ScriptedChatModel
from tests.support.otel import Otel


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _turns(otel: Otel) -> dict[tuple[str, bool], tuple[int, float]]:
    """(entry agent, tripped) -> (turns, seconds in all)."""
    out: dict[tuple[str, bool], tuple[int, float]] = {}
    data = otel.reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == "langgraph_handoff.turn.duration":
                    assert m.unit == "s"
                    for p in m.data.data_points:
                        attrs = dict(p.attributes)
                        assert set(attrs) == {"gen_ai.agent.name", "langgraph_handoff.breaker.tripped"}
                        out[(attrs["gen_ai.agent.name"], attrs["langgraph_handoff.breaker.tripped"])] = (p.count, p.sum)
    return out


def _desk(clock: Clock, wall: Clock) -> Any:
    def slow(state: dict[str, Any]) -> dict[str, Any]:
        said = str(state["messages"][-1].content)
        clock.t += 2.5 if "quick" in said else 40.0
        wall.t += 2.5 if "quick" in said else 40.0
        return {"messages": [AIMessage("done")]}

    def human(state: dict[str, Any]) -> dict[str, Any]:
        clock.t += 1.0
        return {"messages": [AIMessage("a person will take it from here")]}

    agents = [HandoffAgent("slow", slow), HandoffAgent("human", human)]
    return create_handoff_graph(
        agents, default_agent="slow", fallback="human", turn_deadline=30, clock=clock,
        wall_clock=wall, checkpointer=InMemorySaver(),
    )  # fmt: skip


def test_each_user_turn_is_timed_with_its_entry_agent_and_whether_a_breaker_tripped(otel: Otel) -> None:
    clock, wall = Clock(100.0), Clock(1_800_000_000.0)
    graph = _desk(clock, wall)
    cfg = {"configurable": {"thread_id": "c-1"}}
    graph.invoke({"messages": [("user", "quick one")]}, cfg)
    graph.invoke({"messages": [("user", "quick again")]}, cfg)
    out = graph.invoke({"messages": [("user", "a hard one")]}, cfg)  # past the 30 s deadline
    assert out["breakers"][-1]["reason"].startswith("turn deadline")
    assert _turns(otel) == {("slow", False): (2, 5.0), ("slow", True): (1, 41.0)}


async def test_the_async_path_times_turns_too(otel: Otel) -> None:
    clock, wall = Clock(100.0), Clock(1_800_000_000.0)
    await _desk(clock, wall).ainvoke({"messages": [("user", "quick one")]}, {"configurable": {"thread_id": "c-2"}})
    assert _turns(otel) == {("slow", False): (1, 2.5)}


def test_a_turn_that_starts_at_a_model_agent_is_named_for_it(otel: Otel) -> None:
    agents = [HandoffAgent("tech", ScriptedChatModel(["fixed"], cycle=True), description="devices")]
    graph = create_handoff_graph(agents, checkpointer=InMemorySaver())
    graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "c-3"}})
    assert [key for key in _turns(otel)] == [("tech", False)]
