"""Concurrency: racing runs on one thread. Exactly one commits each step, nothing forks, and every
loser gets StaleWriterError. Threads share one saver; processes each build their own."""

from __future__ import annotations

import operator
import threading
import uuid
from pathlib import Path
from typing import Annotated, Any

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_handoff import LocalStore, MemoryStore, ObjectStoreSaver, StaleWriterError
from tests.support.processes import process_context
from tests.support.race_helpers import (
    BarrierSaver,
    check_linear_history,
    process_racer,
    race_once,
    race_threads,
    winner_messages,
)

RACERS = 4
ROUNDS = 5


def _seed(saver: ObjectStoreSaver, thread_id: str) -> list[str]:
    race_once(saver, thread_id, "seed", "sync")
    return check_linear_history(saver, thread_id)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.parametrize("fresh", [False, True], ids=["existing-thread", "new-thread"])
@pytest.mark.parametrize("kind", ["memory", "local"])
def test_threads_racing_on_one_thread(kind: str, fresh: bool, durability: str, tmp_path: Path) -> None:
    store = MemoryStore() if kind == "memory" else LocalStore(tmp_path)
    for rnd in range(ROUNDS):
        thread_id = f"race-{rnd}"
        barrier = threading.Barrier(RACERS)
        saver = BarrierSaver(store, barrier)  # one saver shared by all racer threads
        prefix = [] if fresh else _seed(ObjectStoreSaver(store), thread_id)
        outcomes = race_threads(saver, thread_id, RACERS, durability)
        results = sorted(outcomes.values())
        assert results == ["stale"] * (RACERS - 1) + ["won"], outcomes
        winner = winner_messages(check_linear_history(ObjectStoreSaver(store), thread_id), prefix)
        assert outcomes[winner] == "won"


@pytest.mark.heavy
@pytest.mark.parametrize("durability", ["sync", "exit"])
@pytest.mark.parametrize("fresh", [False, True], ids=["existing-thread", "new-thread"])
def test_processes_racing_on_one_thread(fresh: bool, durability: str, tmp_path: Path) -> None:
    """Separate OS processes, each with its own saver over the same LocalStore directory."""
    spec = {"kind": "local", "path": str(tmp_path / "store")}
    store = LocalStore(spec["path"])
    ctx = process_context()
    tally = {"won": 0, "stale": 0}
    with ctx.Manager() as manager, ctx.Pool(RACERS) as pool:
        for rnd in range(3):
            thread_id = f"prace-{rnd}-{uuid.uuid4().hex[:6]}"
            prefix = [] if fresh else _seed(ObjectStoreSaver(store), thread_id)
            barrier = manager.Barrier(RACERS)
            args = [(spec, thread_id, f"p{i}", durability, barrier) for i in range(RACERS)]
            results = pool.starmap(process_racer, args)
            outcomes = {f"p{i}": r for i, (r, _pid) in enumerate(results)}
            assert len({pid for _r, pid in results}) > 1, "racers did not run in separate processes"
            assert sorted(outcomes.values()) == ["stale"] * (RACERS - 1) + ["won"], outcomes
            winner = winner_messages(check_linear_history(ObjectStoreSaver(store), thread_id), prefix)
            assert outcomes[winner] == "won"
            tally["won"] += 1
            tally["stale"] += RACERS - 1
    assert tally == {"won": 3, "stale": 3 * (RACERS - 1)}


class _Who(TypedDict, total=False):
    who: str
    trail: Annotated[list[str], operator.add]


@pytest.mark.parametrize("read", ["get_state_by_id", "state_history", "list_before"])
def test_a_users_read_of_the_losers_parent_never_lets_the_loser_commit(read: str) -> None:
    """Only a run's own addressed read (``get_tuple`` by id, a replay's ``list(before=...)``) lets
    its next put branch from a superseded checkpoint. A user reading that checkpoint while the
    race is on (``get_state`` by id, the history, ``list(before=...)``) makes no run's put an
    explicit one: the run that lost is still refused, and the thread stays linear.

    Run A holds in its node (an Event) after storing its input checkpoint; run B commits on top
    of it; the user reads A's parent; then A goes on."""
    saver = ObjectStoreSaver(MemoryStore())
    holding, go_on = threading.Event(), threading.Event()

    def node(state: _Who) -> dict[str, Any]:
        if state["who"] == "A":
            holding.set()
            assert go_on.wait(10), "the test never released run A"
        return {"trail": [state["who"]]}

    graph = StateGraph(_Who).add_node("n", node).add_edge(START, "n").add_edge("n", END).compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}}
    graph.invoke({"who": "seed"}, cfg, durability="sync")
    outcome: dict[str, BaseException | None] = {}

    def run_a() -> None:
        try:
            graph.invoke({"who": "A"}, cfg, durability="sync")
            outcome["A"] = None
        except BaseException as exc:  # noqa: BLE001 - the test asserts on it
            outcome["A"] = exc

    racer = threading.Thread(target=run_a)
    racer.start()
    assert holding.wait(10)
    a_parent = graph.get_state(cfg).config  # A's input checkpoint, which A's next put names
    graph.invoke({"who": "B"}, cfg, durability="sync")  # B commits on top of it
    if read == "get_state_by_id":
        graph.get_state(a_parent)
    elif read == "state_history":
        list(graph.get_state_history(cfg))
    else:
        list(
            saver.list(
                cfg,
                before={
                    "configurable": {"checkpoint_id": graph.get_state(cfg).config["configurable"]["checkpoint_id"]}
                },
            )
        )
    go_on.set()
    racer.join(10)
    assert isinstance(outcome["A"], StaleWriterError), outcome
    assert graph.get_state(cfg).values["trail"] == ["seed", "B"]
    ids = [h.config["configurable"]["checkpoint_id"] for h in graph.get_state_history(cfg)]
    parents = [
        h.parent_config["configurable"]["checkpoint_id"] for h in graph.get_state_history(cfg) if h.parent_config
    ]
    assert parents == ids[1:], "the history forked"
