"""The TTL sweep against a writer that revives the thread, at every point that matters, on the
memory store (the same scenarios run on Ceph RGW in integration_tests/test_s3_sweep.py).

Covered interleavings (sweeper S, writer W), each deterministic (a store hook, no sleeps):

* W lands after S read the head, before S's root swap: S skips the thread, nothing deleted;
* W loaded the thread before S and writes after: W gets ThreadExpiredError, stores nothing;
* W's input checkpoint lands before S reads: S keeps the thread;
* W starts a new thread on the emptied head before S deletes: W's objects survive S's delete;
* W's put wrote a large value, lost its swap to S, retried on the emptied head and landed
  before S deletes: the value S had listed under the same key is not deleted;
* W writes in a subgraph namespace after S's root swap: that namespace is left whole, W's next
  root put is refused;
* a refresh_on_read reader lands before S's root swap: S skips the thread;
* S's DeleteObjects fails after its swaps: the next sweep deletes the leftovers (the tombstone's
  ``upto`` mark), and a thread W started on the tombstone meanwhile loses nothing;
* W (durability "sync") stores its task's writes after S deleted the thread, then its put is
  refused: the refusal marks the tombstone and the next sweep deletes the writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import StoreUnavailableError, ThreadExpiredError
from langgraph_handoff.stores import CountingStore, MemoryStore, StoreBase
from tests.support.sweep_helpers import SCENARIOS, TTL, Clock, HookStore, cfg, chat_graph, is_delete, no_problems


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_sweep_race(scenario: Callable[[StoreBase, str], None], mode: str) -> None:
    scenario(MemoryStore(), mode)


# --------------------------------------------------------------------------------------------------
# A sweep that stops between its head swap and its delete
# --------------------------------------------------------------------------------------------------


def _two_runs_then_idle(inner: StoreBase) -> tuple[Clock, ObjectStoreSaver]:
    clock = Clock()
    writer = ObjectStoreSaver(inner, ttl=TTL, clock=clock)
    for text in ("hi", "more"):
        chat_graph("a").compile(checkpointer=writer).invoke({"messages": [text]}, cfg())
    clock.advance(61)
    return clock, writer


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_sweep_whose_delete_fails_is_finished_by_the_next_sweep(mode: str) -> None:
    """Found by review (/tmp/review/test_sweep_leak.py): DeleteObjects failed after the root swap,
    every later sweep saw the emptied head as "empty" and the thread's data stayed forever, while
    the first sweep reported "failed" though the thread was already emptied. The tombstone now
    records the newest checkpoint id the sweep decided on (``swept.upto``): the first sweep
    reports the thread deleted with the cleanup pending, and a later sweep (this process or a
    fresh one) deletes the leftovers and clears the mark."""
    inner = MemoryStore()
    clock, _writer = _two_runs_then_idle(inner)
    hooked = HookStore(inner)
    sweeper = ObjectStoreSaver(hooked, ttl=TTL, clock=clock)

    def boom() -> None:
        raise StoreUnavailableError("DeleteObjects kept failing (transient 503)")

    hooked.before(is_delete, boom, "delete")
    first = asyncio.run(sweeper.asweep()) if mode == "async" else sweeper.sweep()
    (outcome,) = first.threads
    assert outcome.status == "deleted" and outcome.objects_deleted == 0
    assert outcome.error is not None and "StoreUnavailableError" in outcome.error
    assert first.deleted == 1 and first.failed == 0 and first.as_dict()["cleanup_pending"] == 1
    assert list(inner.list("data/")), "the failed delete left the data (expected)"
    clock.advance(24 * 60)
    again = sweeper.sweep()
    assert [(t.thread_id, t.status) for t in again.threads] == [("t", "cleaned")]
    assert again.threads[0].objects_deleted > 0 and list(inner.list("data/")) == []
    # settled: the mark is gone, every sweeper sees a plain empty head (by its size, no GET)
    store = CountingStore(inner)
    assert [t.status for t in ObjectStoreSaver(store, ttl=TTL, clock=clock).sweep().threads] == ["empty"]
    assert store.snapshot() == {"LIST": 1, "requests": 1, "round_trips": 1}
    no_problems(inner)


def test_a_fresh_sweeper_finishes_a_sweep_stopped_after_its_swap() -> None:
    """Found by review: the same leak with no error at all (a process killed, or a cancelled task,
    right after the root swap). A sweeper in another process, with no memory of the first one,
    finds the pending mark in the head and deletes the leftovers."""
    inner = MemoryStore()
    clock, _writer = _two_runs_then_idle(inner)
    hooked = HookStore(inner)
    sweeper = ObjectStoreSaver(hooked, ttl=TTL, clock=clock)

    class Killed(BaseException):
        pass

    def kill() -> None:
        raise Killed

    hooked.before(is_delete, kill, "delete")
    with pytest.raises(Killed):
        sweeper.sweep()
    assert list(inner.list("data/"))
    result = ObjectStoreSaver(inner, ttl=TTL, clock=clock).sweep()
    assert [t.status for t in result.threads] == ["cleaned"] and list(inner.list("data/")) == []


def test_astop_while_the_swap_is_answered_leaves_nothing_behind() -> None:
    """Found by review (/tmp/review/test_astop_mid_sweep_leaks.py): ``astop_ttl_sweeper()`` (the
    Agent Server leaving the factory) cancelled a sweep whose root swap had landed but was not
    answered yet; the DeleteObjects was never sent and no later sweep deleted the data. A barrier,
    not a sleep: the swap's answer waits until the test has stopped the sweeper."""

    class HeldAnswers(MemoryStore):
        def __init__(self) -> None:
            super().__init__()
            self.swap_applied = asyncio.Event()
            self.answer = asyncio.Event()

        async def aput(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
            etag = self.put(key, body, if_match=if_match, if_none_match=if_none_match)
            if key.startswith("heads/") and if_match is not None:
                self.swap_applied.set()
                await self.answer.wait()  # the response is on its way
            return etag

    store = HeldAnswers()
    clock, _writer = _two_runs_then_idle(store)
    sweeper = ObjectStoreSaver(store, ttl=TTL, clock=clock)

    async def main() -> bool:
        await sweeper.astart_ttl_sweeper(10)
        await store.swap_applied.wait()
        return await sweeper.astop_ttl_sweeper(timeout=30)

    assert asyncio.run(main()) is True
    assert list(store.list("data/"))  # stopped between the swap and the delete
    clock.advance(60)
    result = ObjectStoreSaver(store, ttl=TTL, clock=clock).sweep()
    assert [t.status for t in result.threads] == ["cleaned"] and list(store.list("data/")) == []


def test_writes_a_refused_run_stored_are_collected_by_the_next_sweep() -> None:
    """Found by review (/tmp/review/test_expired_run_stores_writes.py): with durability "sync" a
    run continuing a swept thread stores its task's writes (put_writes is not checked against the
    head) before its next put is refused with ThreadExpiredError, whose message said nothing was
    stored; no sweep ever deleted that writes document. The refused put now marks the tombstone
    pending again, and the next sweep deletes the document."""
    inner = MemoryStore()
    clock = Clock()
    writer = ObjectStoreSaver(inner, ttl=TTL, clock=clock)
    sweeper = ObjectStoreSaver(inner, ttl=TTL, clock=clock)
    chat_graph("a").compile(checkpointer=writer).invoke({"messages": ["hi"]}, cfg())
    swept: list[Any] = []

    def slow_node() -> None:  # the node outlives the TTL; a sweeper runs meanwhile
        clock.advance(61)
        swept.append(sweeper.sweep())

    graph = chat_graph("slow", inside=slow_node).compile(checkpointer=writer)
    with pytest.raises(ThreadExpiredError, match="next sweep deletes"):
        graph.invoke({"messages": ["long task"]}, cfg(), durability="sync")
    assert [t.status for t in swept[0].threads] == ["deleted"]
    assert list(inner.list("data/")), "the refused run's writes document is stored (expected)"
    result = ObjectStoreSaver(inner, ttl=TTL, clock=clock).sweep()
    assert [t.status for t in result.threads] == ["cleaned"] and list(inner.list("data/")) == []
    no_problems(inner)
