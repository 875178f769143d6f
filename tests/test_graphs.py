"""End-to-end LangGraph runs: our saver must produce exactly what InMemorySaver produces, for every
scenario, durability mode and API (sync invoke, async ainvoke), on the memory and local stores."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import StoreBase
from tests.graph_scenarios import ASYNC_SCENARIOS, DURABILITIES, SYNC_SCENARIOS


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize("scenario", sorted(SYNC_SCENARIOS))
def test_sync_runs_match_inmemory(scenario: str, durability: str, store: StoreBase) -> None:
    run = SYNC_SCENARIOS[scenario]
    expected = run(InMemorySaver(), durability, "thread-1")
    actual = run(ObjectStoreSaver(store), durability, "thread-1")
    assert actual == expected


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize("scenario", sorted(ASYNC_SCENARIOS))
async def test_async_runs_match_inmemory(scenario: str, durability: str, store: StoreBase) -> None:
    run = ASYNC_SCENARIOS[scenario]
    expected = await run(InMemorySaver(), durability, "thread-1")
    actual = await run(ObjectStoreSaver(store), durability, "thread-1")
    assert actual == expected


@pytest.mark.parametrize("durability", DURABILITIES)
def test_runs_match_with_history_sealed_into_segments(durability: str, store: StoreBase) -> None:
    """A two-checkpoint head window forces sealing on almost every put, and blob_threshold=1 puts
    every value in its own object: the graph must not notice."""
    from langgraph_handoff import Layout

    layout = Layout(head_max_records=2, head_keep=1, blob_threshold=1, fold_max_bytes=0)
    for name, run in SYNC_SCENARIOS.items():
        expected = run(InMemorySaver(), durability, f"t-{name}")
        assert run(ObjectStoreSaver(store, layout=layout), durability, f"t-{name}") == expected, name
