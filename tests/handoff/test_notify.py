"""The ``notify=`` hook's rate limit: at most one event per (kind, agent) every ``every``
seconds to a receiver, the count of trips held back carried by the next event it gets, and a
repeat of a breaker id dropped. A clock moved by hand decides every interval."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_handoff.errors import InvalidHandoffError
from langgraph_handoff.handoff import HandoffAgent, create_handoff_graph, notify
from langgraph_handoff.handoff.notify import BreakerEvent, notifier, rate_limited
from langgraph_handoff.testing import ScriptedChatModel


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def trip(n: int, kind: str = "ping_pong", source: str = "a") -> BreakerEvent:
    return BreakerEvent(f"turn-{n}:1", f"chat-{n}", kind, "a -> b -> a", source, "b", "human")


def test_one_event_per_kind_and_agent_per_interval_and_the_next_one_counts_the_rest() -> None:
    got: list[BreakerEvent] = []
    clock = Clock()
    page = rate_limited(got.append, every=60, clock=clock)
    page(trip(1))
    clock.t += 10
    page(trip(2))
    page(trip(3))
    page(trip(4, source="b"))  # another agent
    page(trip(5, kind="hop_limit"))  # another kind
    clock.t += 49.9  # still inside the minute since trip 1
    page(trip(6))
    clock.t += 0.2
    page(trip(7))
    clock.t += 60
    page(trip(8))
    assert [(e.id, e.suppressed) for e in got] == [
        ("turn-1:1", 0),
        ("turn-4:1", 0),
        ("turn-5:1", 0),
        ("turn-7:1", 3),  # trips 2, 3 and 6 were held back
        ("turn-8:1", 0),  # the count starts again
    ]
    assert got[3].thread_id == "chat-7" and got[3].kind == "ping_pong"


def test_a_repeat_of_a_breaker_id_is_dropped_and_not_counted() -> None:
    got: list[BreakerEvent] = []
    clock = Clock()
    page = rate_limited(got.append, every=0, clock=clock)
    page(trip(1))
    page(trip(1))  # the router's step ran again
    page(trip(2))
    assert [(e.id, e.suppressed) for e in got] == [("turn-1:1", 0), ("turn-2:1", 0)]


def test_rate_limiting_a_limited_receiver_replaces_its_interval() -> None:
    got: list[BreakerEvent] = []
    page = rate_limited(rate_limited(got.append, every=60), every=0)
    assert page.receiver == got.append and page.every == 0


@pytest.mark.parametrize("every", [-1, "60", True])
def test_an_interval_that_is_not_seconds_is_refused(every: Any) -> None:
    with pytest.raises(InvalidHandoffError, match="every must be a number of seconds"):
        rate_limited(print, every=every)


class Inbox:
    def __init__(self) -> None:
        self.events: list[BreakerEvent] = []
        self.arrived = threading.Condition()

    def __call__(self, event: BreakerEvent) -> None:
        with self.arrived:
            self.events.append(event)
            self.arrived.notify_all()

    def wait_for(self, n: int) -> list[BreakerEvent]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.events) >= n, timeout=5)
            return list(self.events)


def _flush() -> None:
    """Wait until the notify pool has delivered everything handed to it: both its threads are
    held at one barrier, so neither is still delivering."""
    barrier = threading.Barrier(3)
    held = [notify._POOL.submit(barrier.wait, 5) for _ in range(2)]
    barrier.wait(5)
    for future in held:
        future.result(5)


def test_the_graph_notifies_each_receiver_rate_limited_by_default() -> None:
    """Each receiver given to ``notify=`` gets a rate limit of its own: :data:`notify.EVERY`
    unless it comes wrapped in ``rate_limited``."""
    plain, unlimited = Inbox(), Inbox()
    send = notifier([plain, rate_limited(unlimited, every=0)])
    assert send is not None
    for event in (trip(1), trip(2), trip(3, kind="hop_limit")):
        send(event)
    _flush()
    # delivered by a pool of two threads: in any order
    assert sorted(e.id for e in plain.events) == ["turn-1:1", "turn-3:1"]
    assert sorted(e.id for e in unlimited.events) == ["turn-1:1", "turn-2:1", "turn-3:1"]


def test_a_breaker_that_trips_every_turn_pages_once_then_says_how_many_it_held_back() -> None:
    wall, clock, inbox = [1_800_000_000.0], Clock(), Inbox()

    def slow(state: dict[str, Any]) -> dict[str, Any]:
        wall[0] += 45  # every turn runs past its 30 s
        return {"messages": [AIMessage("late")]}

    agents = [HandoffAgent("slow", slow), HandoffAgent("human", ScriptedChatModel(["a person"], cycle=True))]
    graph = create_handoff_graph(
        agents, fallback="human", turn_deadline=30, wall_clock=lambda: wall[0],
        notify=rate_limited(inbox, every=300, clock=clock), checkpointer=InMemorySaver(),
    )  # fmt: skip
    for n in range(4):
        out = graph.invoke({"messages": [("user", f"hi {n}")]}, {"configurable": {"thread_id": f"c-{n}"}})
        assert out["breakers"][-1]["reason"].startswith("turn deadline")
        clock.t += 60
    assert [e.suppressed for e in inbox.wait_for(1)] == [0]
    clock.t += 300
    graph.invoke({"messages": [("user", "hi again")]}, {"configurable": {"thread_id": "c-9"}})
    events = inbox.wait_for(2)
    assert [(e.thread_id, e.kind, e.source, e.suppressed) for e in events] == [
        ("c-0", "deadline", "slow", 0),
        ("c-9", "deadline", "slow", 3),
    ]
