"""ObjectStoreMemory's semantic index on real Ceph RGW: request counts of put, search and delete
through both S3 transports, a cold reader served by packs, and processes racing writers against
searchers on the same keys (each result's score must be that of its own value)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from conftest import S3_BUCKET, S3_ENDPOINT, make_obstore_s3_store, make_s3_store
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.stores import CountingStore
from tests.support.memory_index_helpers import NS, cosine, embed_one, index, misattributed, race_member
from tests.support.processes import process_context

pytestmark = pytest.mark.s3

MAKERS = {"boto3": make_s3_store, "obstore": make_obstore_s3_store}


@pytest.fixture(params=list(MAKERS))
def s3_store(request: Any) -> Any:
    store = MAKERS[request.param]()
    yield store
    store.close()


def test_put_search_delete_and_a_cold_reader(s3_store: Any) -> None:
    store = CountingStore(s3_store)
    writer = ObjectStoreMemory(store, index=index())
    for i in range(70):
        writer.put(NS, f"k{i}", {"text": "apple" if i % 10 == 3 else "pear", "i": i})
    assert cosine(embed_one("apple"), embed_one("pear")) == 0.0  # apples score 1, pears 0
    store.reset()
    writer.put(NS, "k0", {"text": "pear", "i": 0})
    assert store.snapshot() == {"GET": 1, "PUT": 1, "requests": 2, "round_trips": 2}

    store.reset()
    found = writer.search(NS, query="apple", limit=7)
    assert {r.key for r in found} == {f"k{i}" for i in range(3, 70, 10)} and not misattributed("apple", found)
    # every item was written by this process: the listing, then the pack for the next reader
    assert store.snapshot() == {"LIST": 1, "PUT": 1, "requests": 2, "round_trips": 2}

    cold = ObjectStoreMemory(store, index=index())  # another worker
    store.reset()
    assert [r.key for r in cold.search(NS, query="apple", limit=7)] == [r.key for r in found]
    assert store.snapshot() == {"LIST": 1, "GET": 1, "requests": 2, "round_trips": 2}  # one pack, not 71 items

    writer.put(NS, "k13", {"text": "pear", "i": 13})  # the other worker's write
    store.reset()
    again = cold.search(NS, query="apple", limit=7)
    assert "k13" not in {r.key for r in again} and not misattributed("apple", again)
    assert store.snapshot() == {"LIST": 1, "GET": 1, "PUT": 1, "DELETE_MANY": 1, "requests": 4, "round_trips": 4}

    store.reset()
    cold.delete(NS, "k3")
    assert store.snapshot() == {"DELETE": 2, "LIST": 1, "GET": 1, "PUT": 1, "requests": 5, "round_trips": 5}
    assert "k3" not in {r.key for r in ObjectStoreMemory(store, index=index()).search(NS, query="apple")}


@pytest.mark.heavy
def test_processes_racing_writers_and_searchers_on_s3() -> None:
    """Three writer processes overwrite five keys every round while two searcher processes search
    and rebuild packs, rounds started by a barrier; then fresh readers check every key's value and
    vectors (tests/support/memory_index_helpers.py)."""
    writers, searchers, nkeys, rounds = 3, 2, 5, 6
    url = f"s3://{S3_BUCKET}/t-{uuid.uuid4().hex}?endpoint_url={S3_ENDPOINT}"
    ctx = process_context()
    with ctx.Manager() as manager, ctx.Pool(writers + searchers) as pool:
        barrier, out = manager.Barrier(writers + searchers), manager.Queue()
        args = [
            (url, role, i, rounds, nkeys, barrier, out)
            for role, n in (("writer", writers), ("searcher", searchers))
            for i in range(n)
        ]
        pool.starmap(race_member, args)
        reports = [out.get() for _ in range(searchers * (rounds + 1))]
    store = make_s3_store(prefix=url.split("/")[3].split("?")[0])
    try:
        current = {f"k{k}": ObjectStoreMemory(store).get(NS, f"k{k}").value for k in range(nkeys)}  # type: ignore[union-attr]
        assert {v["writer"] for v in current.values()} <= set(range(writers))
        for final, query, found in reports:
            assert not misattributed(query, [_Result(*f) for f in found])
            if final:
                assert {k: v for k, v, _ in found} == current
        for query in ("w1 r5", "k2"):
            found = ObjectStoreMemory(store, index=index()).search(NS, query=query, limit=10)
            assert {r.key: r.value for r in found} == current and not misattributed(query, found)
    finally:
        store.close()


class _Result:
    def __init__(self, key: str, value: dict[str, Any], score: float | None) -> None:
        self.key, self.value, self.score = key, value, score
