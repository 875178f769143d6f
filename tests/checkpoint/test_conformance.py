"""langgraph-checkpoint-conformance: every capability detected, 81/81, async and sync APIs."""

from __future__ import annotations

from pathlib import Path

import pytest

from langgraph_handoff import LocalStore, MemoryStore, ObjectStoreSaver
from tests.support.conformance_helpers import SyncRoutedSaver, run_conformance


@pytest.mark.parametrize("api", ["async", "sync"])
async def test_memory_store(api: str) -> None:
    cls = ObjectStoreSaver if api == "async" else SyncRoutedSaver
    await run_conformance(f"memory-{api}", lambda: cls(MemoryStore()))


@pytest.mark.parametrize("api", ["async", "sync"])
async def test_local_store(api: str, tmp_path: Path) -> None:
    cls = ObjectStoreSaver if api == "async" else SyncRoutedSaver
    n = iter(range(100))
    await run_conformance(f"local-{api}", lambda: cls(LocalStore(tmp_path / f"s{next(n)}")))


async def test_memory_store_with_tiny_head_window() -> None:
    """The same contract holds when every few checkpoints are sealed into history segments."""
    from langgraph_handoff import Layout

    layout = Layout(head_max_records=2, head_keep=1, blob_threshold=8)
    await run_conformance("memory-sealing", lambda: ObjectStoreSaver(MemoryStore(), layout=layout))


async def test_memory_store_with_every_list_a_tail() -> None:
    """... and when every value that only appended is stored as a tail over a base blob."""
    from langgraph_handoff import Layout

    layout = Layout(tail_min_base=1, head_max_records=3, head_keep=1)
    await run_conformance("memory-tails", lambda: ObjectStoreSaver(MemoryStore(), layout=layout))
