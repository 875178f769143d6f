"""The saver's own API: construction from URLs, setup, context managers, versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from langgraph_handoff import LocalStore, MemoryStore, ObjectStoreSaver
from langgraph_handoff._format import keys
from langgraph_handoff.errors import InvalidConfigError


def test_from_url_memory_file_and_errors(tmp_path: Path) -> None:
    a = ObjectStoreSaver.from_url("memory://shared-name")
    b = ObjectStoreSaver.from_url("memory://shared-name")
    assert a.store is b.store  # named memory stores are shared in-process
    assert ObjectStoreSaver.from_url("memory://").store is not ObjectStoreSaver.from_url("memory://").store
    with ObjectStoreSaver.from_url(f"file://{tmp_path}/store") as saver:
        assert isinstance(saver.store, LocalStore) and saver.store.root == (tmp_path / "store").resolve()
    for bad in ["ftp://x/y", "file://", "s3:///prefix-without-bucket"]:
        with pytest.raises(InvalidConfigError):
            ObjectStoreSaver.from_url(bad)
    with pytest.raises(TypeError, match="store must be"):
        ObjectStoreSaver("memory://")  # type: ignore[arg-type]


def test_setup_is_idempotent_sync_and_async() -> None:
    import asyncio

    store = MemoryStore()
    saver = ObjectStoreSaver(store)
    saver.setup()
    marker = store.get(keys.FORMAT_MARKER_KEY)
    asyncio.run(saver.asetup())
    assert store.get(keys.FORMAT_MARKER_KEY) == marker


async def test_async_context_manager_closes_the_store() -> None:
    closed = []

    class Tracking(MemoryStore):
        def close(self) -> None:
            closed.append(True)

    async with ObjectStoreSaver(Tracking()) as saver:
        assert await saver.aget_tuple({"configurable": {"thread_id": "t"}}) is None
    assert closed == [True]


def test_next_versions_are_ordered_as_strings_and_unique_across_branches() -> None:
    saver = ObjectStoreSaver(MemoryStore())
    v = None
    seen = []
    for _ in range(12):
        v = saver.get_next_version(v, None)
        seen.append(v)
    assert seen == sorted(seen) and seen[9] > seen[8]  # "10" sorts after "9": zero-padded
    assert int(seen[-1].split(".")[0]) == 12
    # two branches stepping from the same version get different versions
    assert saver.get_next_version(seen[3], None) != saver.get_next_version(seen[3], None)
    assert saver.get_next_version(7, None).startswith("0" * 31 + "8.")  # accepts int versions too
