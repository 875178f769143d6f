"""Run langgraph-checkpoint-conformance against a saver factory, via the async API and via the
sync API (the suite only calls async methods, so a subclass routes them to the sync ones)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from langgraph_handoff import ObjectStoreSaver


class SyncRoutedSaver(ObjectStoreSaver):
    """Every async method runs the *sync* method in a worker thread."""

    async def aput(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.put, *a, **k)

    async def aput_writes(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.put_writes, *a, **k)

    async def aget_tuple(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.get_tuple, *a, **k)

    async def alist(self, *a: Any, **k: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        for item in await asyncio.to_thread(lambda: list(self.list(*a, **k))):
            yield item

    async def adelete_thread(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.delete_thread, *a, **k)

    async def adelete_for_runs(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.delete_for_runs, *a, **k)

    async def acopy_thread(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.copy_thread, *a, **k)

    async def aprune(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.prune, *a, **k)


TOTAL_TESTS = 81  # 58 base + 23 extended in langgraph-checkpoint-conformance 0.0.2


async def run_conformance(name: str, make: Callable[[], ObjectStoreSaver]) -> dict[str, tuple[int, int]]:
    """Validate and return ``{capability: (passed, failed)}``; asserts a full pass."""

    @checkpointer_test(name=name)
    async def factory() -> AsyncIterator[ObjectStoreSaver]:
        saver = make()
        yield saver
        saver.close()

    report = await validate(factory, progress=ProgressCallbacks.quiet())
    counts = {cap: (r.tests_passed, r.tests_failed) for cap, r in report.results.items()}
    failures = {cap: r.failures for cap, r in report.results.items() if r.failures}
    detected = {cap for cap, r in report.results.items() if r.detected}
    assert detected == {c.value for c in ALL_CAPABILITIES}, f"not detected: {ALL_CAPABILITIES - detected}"
    assert report.passed_all() and report.passed_all_base(), failures
    assert sum(p for p, _ in counts.values()) == TOTAL_TESTS, counts
    return counts
