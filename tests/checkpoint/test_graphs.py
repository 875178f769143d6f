"""End-to-end LangGraph runs: our saver must produce exactly what InMemorySaver produces, for every
scenario, durability mode and API (sync invoke, async ainvoke), on the memory and local stores."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_handoff import MemoryStore, ObjectStoreSaver
from langgraph_handoff.stores import StoreBase
from tests.support.graph_scenarios import (
    ASYNC_INTERRUPTS,
    ASYNC_INTERRUPTS_REASON,
    ASYNC_SCENARIOS,
    DURABILITIES,
    SYNC_SCENARIOS,
)
from tests.support.saver_helpers import put


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize("scenario", sorted(SYNC_SCENARIOS))
def test_sync_runs_match_inmemory(scenario: str, durability: str, store: StoreBase) -> None:
    run = SYNC_SCENARIOS[scenario]
    expected = run(InMemorySaver(), durability, "thread-1")
    actual = run(ObjectStoreSaver(store), durability, "thread-1")
    assert actual == expected


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(
            name,
            marks=pytest.mark.skipif(
                name == "interrupt_resume" and not ASYNC_INTERRUPTS, reason=ASYNC_INTERRUPTS_REASON
            ),
        )
        for name in sorted(ASYNC_SCENARIOS)
    ],
)
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


def test_upsert_keeps_values_children_inherit() -> None:
    """Re-putting a checkpoint id (first with a channel rewritten under its version, then with no
    channels at all) dropped payloads its children still pointed at; InMemorySaver keeps them.

    Found by an adversarial review of the saver; fails before commit ea58b81."""

    def scenario(saver: Any) -> list[Any]:
        p = put(saver, "t", None, 0, values={"x": "parent-x"}, versions={"x": 1}, source="input")
        c = put(saver, "t", p, 1, values={"x": "parent-x", "y": "child-y"}, versions={"x": 1, "y": 2},
                new_versions={"y": 2})  # fmt: skip
        seen = []
        # the parent again: first with x rewritten under its version, then with no channels at all
        for values, new in (({"x": "REWRITTEN"}, {"x": 1}), ({}, {})):
            put(saver, "t", None, 0, cid=p, values=values, versions=new, new_versions=new, source="update")
            seen.append(
                saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": c}}).checkpoint["channel_values"]
            )
        return seen

    assert scenario(ObjectStoreSaver(MemoryStore())) == scenario(InMemorySaver())
