"""ObjectStoreMemory TTL on real Ceph RGW, through both S3 transports: expiry, refresh on read,
the sweep's marker (RGW ignores a conditional DELETE, so nothing relies on one), and an item
renewed between the sweep's read and its swap, hit exactly by a store hook."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import make_obstore_s3_store, make_s3_store
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.stores import CountingStore
from langgraph_handoff.stores.base import Put
from tests.support.sweep_helpers import Clock, HookStore

NS = ("users", "u1")
MAKERS = {"boto3": make_s3_store, "obstore": make_obstore_s3_store}


@pytest.fixture(params=list(MAKERS))
def s3_store(request: Any) -> Any:
    store = MAKERS[request.param]()
    yield store
    store.close()


def test_expiry_refresh_and_sweep_marker(s3_store: Any) -> None:
    store = CountingStore(s3_store)
    clock = Clock()
    memory = ObjectStoreMemory(store, ttl={"default_ttl": 10}, clock=clock)  # refresh_on_read on
    memory.put(NS, "read", {"n": 1})
    memory.put(NS, "idle", {"n": 2})
    memory.put(NS, "forever", {"n": 3}, ttl=None)
    for _ in range(3):  # "read" is read every 6 minutes; "idle" never
        clock.advance(6)
        assert memory.get(NS, "read") is not None
    assert memory.get(NS, "idle", refresh_ttl=False) is None  # 18 minutes idle: gone at once
    assert sorted(i.key for i in memory.search(NS, refresh_ttl=False)) == ["forever", "read"]

    store.reset()
    assert memory.sweep_ttl() == 1
    # the marker replaces "idle" by compare-and-swap; the search above packed the namespace, so its
    # pack is rebuilt without "idle" and the old one deleted (an expired value stays in no object)
    puts = [key for kind, key in store.log if kind == "PUT"]
    assert len(puts) == 2 and puts[0].endswith("/=k/idle") and "/=p/0-0-2-" in puts[1]
    assert store.snapshot()["DELETE_MANY"] == 1
    assert memory.get(NS, "idle") is None
    store.reset()
    assert memory.sweep_ttl() == 0  # the marker is known by its size, the live items by their ETags
    assert store.snapshot() == {"LIST": 1, "requests": 1, "round_trips": 1}
    clock.advance(11)  # "read" was last refreshed at minute 18: due at 28, now 29
    assert memory.get(NS, "read", refresh_ttl=False) is None
    store.reset()
    assert memory.sweep_ttl() == 1  # "read" is due now: read again, then swapped for a marker
    assert {k: v for k, v in store.snapshot().items() if k in ("GET", "PUT")} == {"GET": 1, "PUT": 2}  # and the pack
    assert [i.key for i in memory.search(NS)] == ["forever"]
    memory.put(NS, "idle", {"n": 4})  # a key written again over its marker lives again
    assert memory.get(NS, "idle").value == {"n": 4}  # type: ignore[union-attr]


def test_an_item_renewed_between_the_sweeps_read_and_swap_survives(s3_store: Any) -> None:
    store = HookStore(s3_store)
    clock = Clock()
    memory = ObjectStoreMemory(store, ttl={"default_ttl": 10}, clock=clock)
    memory.put(NS, "k", {"n": 1})
    clock.advance(11)
    writer = ObjectStoreMemory(s3_store, ttl={"default_ttl": 10}, clock=clock)
    store.before(lambda op: isinstance(op, Put), lambda: writer.put(NS, "k", {"n": 2}), "marker swap")
    assert memory.sweep_ttl() == 0
    assert memory.get(NS, "k").value == {"n": 2}  # type: ignore[union-attr]
