"""Concurrency: racing runs on one thread. Exactly one commits each step, nothing forks, and every
loser gets StaleWriterError. Threads share one saver; processes each build their own."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from langgraph_handoff import LocalStore, MemoryStore, ObjectStoreSaver
from tests.processes import process_context
from tests.race_helpers import (
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
