"""What the fuzzer found, each pinned by the smallest case that shows it (every one failed before
its fix). Objects are written as a hostile writer would: any msgpack, under a valid checksum."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from langgraph_handoff._format import envelope
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.stores import MemoryStore, StoreBase

NS = ("users", "u1")


def _body(store: StoreBase, key: str) -> Any:
    obj = store.get(key)
    assert obj is not None
    return msgpack.unpackb(envelope.decode(obj.body, key=key).body, raw=False, strict_map_key=False)


def _put_body(store: StoreBase, key: str, body: Any, kind: Kind) -> None:
    store.put(key, envelope.encode(kind, msgpack.packb(body, use_bin_type=True)))


@pytest.mark.parametrize("expires_at", [b"", "k2", [1], float("inf")], ids=["bytes", "text", "list", "inf"])
def test_a_memory_item_whose_expiry_is_not_a_number_is_the_sweeps_damage(expires_at: Any) -> None:
    """Fuzz case 25 of seed 11: the memory sweep took ``float()`` of a stored ``expires_at`` and
    stopped with ``ValueError`` (``inf``: an item that never expires). Now the item is damage,
    reported with its key, and the sweep goes on to expire the others."""
    store = MemoryStore()
    clock = [1_000_000.0]
    memory = ObjectStoreMemory(store, ttl={"default_ttl": 1}, clock=lambda: clock[0])
    for k in ("k0", "k1"):
        memory.put(NS, k, {"note": k})
    (bad,) = [i.key for i in store.list("memory/") if i.key.endswith("/k0")]
    body = _body(store, bad)
    body["expires_at"] = expires_at
    _put_body(store, bad, body, Kind.MEMORY)
    clock[0] += 3600
    swept = ObjectStoreMemory(store, clock=lambda: clock[0]).sweep()
    assert [(d.key, d.reason) for d in swept.damaged] == [(bad, "malformed")]
    assert swept.removed == 1
