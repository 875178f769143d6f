"""ObjectStoreSaver on real Ceph RGW: conformance, graph runs equal to InMemorySaver, races
between threads and OS processes, and the request counts measured at the HTTP level.

Everything that does not look inside boto3 runs on both S3 transports, boto3's ``S3Store`` and
obstore's ``ObstoreS3Store`` (``integration_tests/test_obstore_s3.py`` has obstore's own tests)."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections import Counter
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from conftest import S3_BUCKET, S3_ENDPOINT, make_obstore_s3_store, make_s3_store
from langgraph_handoff import ObjectStoreSaver
from tests.checkpoint.test_request_counts import IN_ORDER, five_nodes
from tests.support.conformance_helpers import SyncRoutedSaver, run_conformance
from tests.support.graph_scenarios import ASYNC_SCENARIOS, DURABILITIES, SYNC_SCENARIOS
from tests.support.processes import process_context
from tests.support.race_helpers import (
    check_linear_history,
    check_thread_race,
    process_racer,
    race_once,
    winner_messages,
)

#: "obstore": its async API on the event loop (the default); "obstore-threads": through its pool
MAKERS = {
    "boto3": make_s3_store,
    "obstore": make_obstore_s3_store,
    "obstore-threads": functools.partial(make_obstore_s3_store, async_io="threads"),
}
SPEC_KINDS = {"boto3": "s3", "obstore": "obstore-s3"}


#: the sync API is the same code on both obstore paths (``async_io`` only routes the async one)
SYNC_PATHS = ["boto3", "obstore"]


@pytest.fixture(params=list(MAKERS))
def transport(request: Any) -> str:
    return str(request.param)


@pytest.fixture
def any_s3_store(transport: str) -> Any:
    store = MAKERS[transport]()
    yield store
    store.close()


@pytest.fixture(params=SYNC_PATHS)
def sync_s3_store(request: Any) -> Any:
    store = MAKERS[str(request.param)]()
    yield store
    store.close()


@pytest.mark.heavy
@pytest.mark.parametrize(
    ("api", "transport"),
    [("async", t) for t in MAKERS] + [("sync", t) for t in SYNC_PATHS],
)
async def test_conformance_on_s3(api: str, transport: str) -> None:
    cls = ObjectStoreSaver if api == "async" else SyncRoutedSaver
    counts = await run_conformance(f"s3-{transport}-{api}", lambda: cls(MAKERS[transport]()))
    assert sum(p for p, _ in counts.values()) == 81


@pytest.mark.heavy
@pytest.mark.parametrize("durability", DURABILITIES)
def test_graph_runs_match_inmemory_on_s3(durability: str, sync_s3_store: Any) -> None:
    saver = ObjectStoreSaver(sync_s3_store)
    for name, run in SYNC_SCENARIOS.items():
        assert run(saver, durability, f"g-{name}") == run(InMemorySaver(), durability, f"g-{name}"), name


@pytest.mark.parametrize("durability", DURABILITIES)
async def test_async_graph_runs_match_inmemory_on_s3(durability: str, any_s3_store: Any) -> None:
    saver = ObjectStoreSaver(any_s3_store)
    for name, run in ASYNC_SCENARIOS.items():
        assert await run(saver, durability, f"a-{name}") == await run(InMemorySaver(), durability, f"a-{name}"), name


@pytest.mark.heavy
async def test_many_concurrent_async_runs_share_one_boto3_client(s3_store: Any) -> None:
    saver = ObjectStoreSaver(s3_store)
    graph = five_nodes().compile(checkpointer=saver)
    client = s3_store.client
    results = await asyncio.gather(
        *(graph.ainvoke({"messages": []}, {"configurable": {"thread_id": f"c{i}"}}) for i in range(40))
    )
    assert all(len(r["messages"]) == 5 for r in results)
    assert s3_store.client is client
    states = await asyncio.gather(*(graph.aget_state({"configurable": {"thread_id": f"c{i}"}}) for i in range(40)))
    assert all(len(s.values["messages"]) == 5 for s in states)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.parametrize("fresh", [False, True], ids=["existing-thread", "new-thread"])
def test_threads_racing_on_s3(fresh: bool, durability: str, sync_s3_store: Any) -> None:
    check_thread_race(sync_s3_store, fresh=fresh, durability=durability)


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("fresh", [False, True], ids=["existing-thread", "new-thread"])
def test_async_runs_racing_on_s3(fresh: bool, durability: str, any_s3_store: Any) -> None:
    """4 racers, each ``ainvoke`` on an event loop of its own thread, sharing one store (on the
    obstore transport: one loop-native connection pool per loop): one wins, history linear."""
    check_thread_race(any_s3_store, fresh=fresh, durability=durability, api="async")


@pytest.mark.heavy
@pytest.mark.parametrize("transport", SYNC_PATHS)
@pytest.mark.parametrize("fresh", [False, True], ids=["existing-thread", "new-thread"])
def test_processes_racing_on_s3(fresh: bool, transport: str) -> None:
    racers = 4
    prefix_key = f"t-{uuid.uuid4().hex}"
    spec = {
        "kind": SPEC_KINDS[transport],
        "bucket": S3_BUCKET,
        "prefix": prefix_key,
        "endpoint_url": S3_ENDPOINT,
    }
    store = MAKERS[transport](prefix=prefix_key)
    ctx = process_context()
    with ctx.Manager() as manager, ctx.Pool(racers) as pool:
        for rnd in range(3):
            thread_id = f"prace-{rnd}"
            prefix: list[str] = []
            if not fresh:
                race_once(ObjectStoreSaver(store), thread_id, "seed", "sync")
                prefix = check_linear_history(ObjectStoreSaver(store), thread_id)
            barrier = manager.Barrier(racers)
            results = pool.starmap(process_racer, [(spec, thread_id, f"p{i}", "sync", barrier) for i in range(racers)])
            outcomes = {f"p{i}": r for i, (r, _pid) in enumerate(results)}
            assert sorted(outcomes.values()) == ["stale"] * (racers - 1) + ["won"], outcomes
            winner = winner_messages(check_linear_history(ObjectStoreSaver(store), thread_id), prefix)
            assert outcomes[winner] == "won"
    store.close()


class HttpCounter:
    """Counts the HTTP requests boto3 actually sends (retries included), by operation."""

    def __init__(self, client: Any) -> None:
        self.counts: Counter[str] = Counter()
        client.meta.events.register("before-send.s3.*", self._on_send)

    def _on_send(self, event_name: str, **kwargs: Any) -> None:
        self.counts[event_name.rsplit(".", 1)[-1]] += 1

    def take(self) -> dict[str, int]:
        out = dict(self.counts)
        self.counts.clear()
        return out


def test_request_counts_on_the_wire(s3_store: Any) -> None:
    saver = ObjectStoreSaver(s3_store)
    graph = five_nodes().compile(checkpointer=saver)
    counter = HttpCounter(s3_store.client)
    cfg = {"configurable": {"thread_id": "counted"}}
    # the store probe, which the first write of a process runs when setup() did not: GET marker,
    # 2 create-only PUTs, GET, 2 If-Match PUTs (+ HEAD: the wrong ETag's 412 is checked for the
    # quoting), DELETE, PUT marker; then the metadata index: GET meta/index, LIST heads/ (no
    # thread yet), PUT meta/index. Pinned here so the counts below are each operation's own.
    saver.setup()
    assert counter.take() == {"GetObject": 3, "PutObject": 6, "HeadObject": 1, "DeleteObject": 1, "ListObjectsV2": 1}
    # in order: the history count below relies on every task's writes being folded (IN_ORDER)
    graph.invoke({"messages": [{"role": "user", "content": "hi"}]}, {**cfg, **IN_ORDER})
    assert counter.take() == {"GetObject": 1, "ListObjectsV2": 1, "PutObject": 13}
    graph.get_state(cfg)
    assert counter.take() == {"GetObject": 1, "ListObjectsV2": 1}
    assert len(list(graph.get_state_history(cfg))) == 7
    assert counter.take() == {"GetObject": 1, "ListObjectsV2": 1}
    saver.delete_thread("counted")  # + the root head: a leased session keeps its epoch; + the index entries
    assert counter.take() == {"GetObject": 1, "ListObjectsV2": 3, "DeleteObjects": 2}


def test_from_url_s3_with_endpoint_and_setup() -> None:
    from conftest import _need_s3

    _need_s3()
    url = f"s3://{S3_BUCKET}/t-{uuid.uuid4().hex}/nested?endpoint_url={S3_ENDPOINT}"
    with ObjectStoreSaver.from_url(url) as saver:
        saver.setup()
        assert saver.store.prefix.endswith("/nested/")
        graph = five_nodes().compile(checkpointer=saver)
        graph.invoke({"messages": []}, {"configurable": {"thread_id": "u"}})
        assert [i.key for i in saver.store.list("heads/")] == ["heads/u/="]
