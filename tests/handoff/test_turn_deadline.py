"""The wall-clock deadline of a user turn, and the ``notify=`` hook.

Before: ``time_budget`` was checked only when an agent handed off, so a slow agent that never
handed off was never stopped, and a breaker trip told nobody but a WARNING line."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from langgraph_handoff.errors import InvalidHandoffError
from langgraph_handoff.handoff import HandoffAgent, create_handoff_graph
from langgraph_handoff.handoff.notify import BreakerEvent
from langgraph_handoff.testing import ScriptedChatModel


class Wall:
    """A wall clock moved by hand."""

    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


class Inbox:
    def __init__(self) -> None:
        self.events: list[BreakerEvent] = []
        self.got = threading.Event()

    def __call__(self, event: BreakerEvent) -> None:
        self.events.append(event)
        self.got.set()


def _desk(slow: Any, wall: Wall, inbox: Inbox, **kw: Any) -> Any:
    agents = [
        HandoffAgent("slow", slow, description="takes its time"),
        HandoffAgent(
            "human", ScriptedChatModel(["a person will take it from here"], cycle=True), description="a person"
        ),
    ]
    return create_handoff_graph(
        agents, fallback="human", turn_deadline=30, wall_clock=wall, notify=inbox, checkpointer=InMemorySaver(), **kw
    )


def test_a_slow_agent_that_never_hands_off_is_stopped_at_the_next_boundary() -> None:
    wall, inbox = Wall(), Inbox()

    def slow(state: dict[str, Any]) -> dict[str, Any]:
        wall.t += 45  # the model took 45 s
        return {"messages": [AIMessage("here is my late answer")]}

    out = _desk(slow, wall, inbox).invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "c-1"}})
    assert out["messages"][-1].content == "a person will take it from here"
    assert [b["reason"][:25] for b in out["breakers"]] == ["turn deadline of 30s pass"]
    assert inbox.got.wait(5)
    event = inbox.events[0]
    assert (event.thread_id, event.kind, event.source, event.fallback) == ("c-1", "deadline", "slow", "human")
    assert event.id == f"{out['turn_id']}:0" and event.at_utc == wall.t


async def test_on_the_async_path_the_agent_is_cancelled_at_the_deadline_and_its_work_dropped() -> None:
    inbox = Inbox()
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def stuck(state: dict[str, Any]) -> dict[str, Any]:
        started.set()
        try:
            await asyncio.Event().wait()  # it would never finish
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {"messages": [AIMessage("never")]}

    agents = [
        HandoffAgent("stuck", stuck),
        HandoffAgent("human", ScriptedChatModel(["a person will take it from here"])),
    ]
    # the real wall clock: the agent gets 0.5 s, and it never finishes, so the outcome cannot
    # depend on the machine's speed
    graph = create_handoff_graph(agents, fallback="human", turn_deadline=0.5, notify=inbox)
    out = await graph.ainvoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "c-2"}})
    assert started.is_set() and cancelled.is_set()
    assert all(m.content != "never" for m in out["messages"])
    assert out["messages"][-1].content == "a person will take it from here"
    assert inbox.got.wait(5) and inbox.events[0].kind == "deadline"


def test_waiting_at_an_interrupt_does_not_count() -> None:
    wall, inbox = Wall(), Inbox()

    def asks(state: dict[str, Any]) -> dict[str, Any]:
        answer = interrupt("approve the refund?")
        wall.t += 5
        return {"messages": [AIMessage(f"done: {answer}")]}

    graph = _desk(asks, wall, inbox)
    cfg = {"configurable": {"thread_id": "c-3"}}
    graph.invoke({"messages": [("user", "refund please")]}, cfg)
    wall.t += 600  # the human took ten minutes to answer
    out = graph.invoke(Command(resume="yes"), cfg)
    assert out["messages"][-1].content == "done: yes"
    assert out.get("breakers", []) == [] and inbox.events == []


def test_a_turn_within_its_deadline_is_left_alone() -> None:
    wall, inbox = Wall(), Inbox()

    def quick(state: dict[str, Any]) -> dict[str, Any]:
        wall.t += 3
        return {"messages": [AIMessage("ok")]}

    graph = _desk(quick, wall, inbox)
    cfg = {"configurable": {"thread_id": "c-4"}}
    for _ in range(3):  # every turn gets its own 30 s
        out = graph.invoke({"messages": [("user", "hi")]}, cfg)
        wall.t += 100
    assert out["messages"][-1].content == "ok" and out.get("breakers", []) == []


def test_a_receiver_that_fails_never_breaks_the_turn() -> None:
    wall = Wall()
    failed = threading.Event()

    def broken(event: BreakerEvent) -> None:
        failed.set()
        raise RuntimeError("the pager is down")

    def slow(state: dict[str, Any]) -> dict[str, Any]:
        wall.t += 45
        return {"messages": [AIMessage("late")]}

    agents = [HandoffAgent("slow", slow), HandoffAgent("human", ScriptedChatModel(["a person"]))]
    graph = create_handoff_graph(agents, fallback="human", turn_deadline=30, wall_clock=wall, notify=[broken])
    assert graph.invoke({"messages": [("user", "hi")]})["messages"][-1].content == "a person"
    assert failed.wait(5)


@pytest.mark.parametrize("bad", [{"turn_deadline": 0}, {"turn_deadline": "30"}, {"notify": "pager"}])
def test_bad_options_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidHandoffError):
        create_handoff_graph([HandoffAgent("a", ScriptedChatModel(["x"]))], **bad)
