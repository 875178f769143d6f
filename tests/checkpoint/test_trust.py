"""A saver never writes to a store no probe has passed (langgraph_handoff/checkpoint/trust.py).

Found by a new user: the store check ran only in ``setup()``. Without it a graph wrote happily
to an S3 server that ignores conditional writes, and the README's S3 example never called
``setup()``. Now the saver runs ``setup()``'s probe itself before its first write to a store,
once per process, and keeps the verdict; local stores (ours) are never probed. ``Remote`` below
is a memory store that declares itself remote (a scope of its own), so it is probed as S3 is."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Hashable, Iterator
from typing import Any

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import envelope, keys
from langgraph_handoff.checkpoint import trust
from langgraph_handoff.errors import UnsafeStoreError
from langgraph_handoff.ownership import SessionManager
from langgraph_handoff.probe import PROBE_PREFIX
from langgraph_handoff.stores import CountingStore, LocalStore, MemoryStore
from tests.checkpoint.test_request_counts import IN_ORDER, five_nodes
from tests.stores.test_probe import IgnoresConditions


class Remote(MemoryStore):
    """A store this package does not implement the conditions of: probed before its first write."""

    def trust_scope(self) -> Hashable:
        return self


class UnsafeRemote(IgnoresConditions):
    """Accepts If-None-Match and If-Match and ignores them (moto 4, GCS's S3 API), and is remote."""

    def trust_scope(self) -> Hashable:
        return self


HI = {"messages": [{"role": "user", "content": "hi"}]}
#: the five-node invoke on a warm, probed store (tests/checkpoint/test_request_counts.py)
INVOKE = {"GET": 1, "LIST": 1, "PUT": 13}
#: what the probe adds before the first write on a store never set up: GET marker; 2 create-only
#: PUTs, GET, 2 If-Match PUTs, DELETE on a scratch key; create-only PUT of the marker
FIRST_EVER = {"GET": 2, "PUT": 5, "DELETE": 1}


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, **IN_ORDER}


def counts(store: CountingStore) -> dict[str, int]:
    return {k: v for k, v in store.snapshot().items() if k not in ("requests", "round_trips")}


def plus(*parts: dict[str, int]) -> dict[str, int]:
    total: dict[str, int] = {}
    for part in parts:
        for k, v in part.items():
            total[k] = total.get(k, 0) + v
    return total


@pytest.fixture
def remote() -> Iterator[CountingStore]:
    store = CountingStore(Remote())
    yield store
    trust.forget(store)


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_graph_on_a_store_that_ignores_conditions_writes_nothing_without_setup(api: str) -> None:
    store = UnsafeRemote(create_only=True, if_match=True)
    graph = five_nodes().compile(checkpointer=ObjectStoreSaver(store))
    with pytest.raises(UnsafeStoreError, match="doctor") as refused:
        if api == "sync":
            graph.invoke(HI, cfg())
        else:
            asyncio.run(graph.ainvoke(HI, cfg()))
    assert "second create-only PUT" in str(refused.value)
    assert [o.key for o in store.list("")] == []  # no head, no writes, no marker; scratch key gone
    trust.forget(store)


def test_the_first_invoke_probes_once_and_later_ones_cost_nothing(remote: CountingStore) -> None:
    saver = ObjectStoreSaver(remote)
    five_nodes().compile(checkpointer=saver).invoke(HI, cfg("a"))
    assert counts(remote) == plus(INVOKE, FIRST_EVER), remote.log[:12]
    assert [k for _, k in remote.log[2:10]][-1] == keys.FORMAT_MARKER_KEY  # recorded before the first put
    remote.reset()
    five_nodes().compile(checkpointer=saver).invoke(HI, cfg("b"))
    assert counts(remote) == INVOKE
    remote.reset()
    other = ObjectStoreSaver(remote)  # another saver in the same process, same store: no probe
    five_nodes().compile(checkpointer=other).invoke(HI, cfg("c"))
    assert counts(remote) == INVOKE


def test_a_new_process_on_a_probed_store_pays_one_get(remote: CountingStore) -> None:
    ObjectStoreSaver(remote).setup()
    trust.forget(remote)  # what a new process knows
    remote.reset()
    five_nodes().compile(checkpointer=ObjectStoreSaver(remote)).invoke(HI, cfg())
    assert counts(remote) == plus(INVOKE, {"GET": 1})
    assert not any(key.startswith(PROBE_PREFIX) for _, key in remote.log)


def test_setup_moves_the_probe_to_startup(remote: CountingStore) -> None:
    saver = ObjectStoreSaver(remote)
    saver.setup()
    # + on a store with no thread yet, the metadata index is declared complete: GET meta/index,
    # LIST heads/ (one key), create-only PUT of meta/index
    assert counts(remote) == plus(FIRST_EVER, {"GET": 1, "LIST": 1, "PUT": 1})
    remote.reset()
    five_nodes().compile(checkpointer=saver).invoke(HI, cfg())
    assert counts(remote) == INVOKE


def test_reads_never_probe(remote: CountingStore) -> None:
    """A reader with read-only credentials (``langgraph-handoff threads``, ``get_state``) must
    not have to write a probe object."""
    saver = ObjectStoreSaver(remote)
    graph = five_nodes().compile(checkpointer=saver)
    assert graph.get_state(cfg()).values == {}
    assert list(graph.get_state_history(cfg())) == []
    assert saver.thread_ids() == []
    assert set(counts(remote)) <= {"GET", "LIST"} and trust.verdict(remote) is None


def test_local_stores_are_never_probed(tmp_path: Any) -> None:
    # (a local directory reads the head before it lists the latest's writes: none on a new thread)
    for inner, invoke in ((MemoryStore(), INVOKE), (LocalStore(tmp_path), {"GET": 1, "PUT": 13})):
        store = CountingStore(inner)
        five_nodes().compile(checkpointer=ObjectStoreSaver(store)).invoke(HI, cfg())
        assert counts(store) == invoke and trust.verdict(store) is True
        assert store.get(keys.FORMAT_MARKER_KEY) is None


def test_a_failed_probe_is_kept_and_refuses_at_once_until_setup_probes_again() -> None:
    store = CountingStore(UnsafeRemote(if_match=True))
    saver = ObjectStoreSaver(store)
    graph = five_nodes().compile(checkpointer=saver)
    with pytest.raises(UnsafeStoreError, match="wrong If-Match"):
        graph.invoke(HI, cfg())
    store.reset()
    with pytest.raises(UnsafeStoreError, match="wrong If-Match"):  # the kept verdict: no probe, no write
        saver.put_writes(
            {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": str(uuid.UUID(int=1))}},
            [("c", 1)],
            "task",
        )
    assert counts(store) == {}
    store.inner.ignore_if_match = False  # type: ignore[attr-defined]  # the operator fixes the server
    saver.setup()
    graph.invoke(HI, cfg())
    assert saver.get_tuple(cfg()) is not None
    trust.forget(store)


@pytest.mark.parametrize("api", ["sync", "async"])
def test_racing_first_writers_share_one_probe(api: str, remote: CountingStore) -> None:
    """Eight first writes at once (threads behind a barrier, or tasks on one loop): one probe."""
    saver = ObjectStoreSaver(remote)
    writers = 8
    if api == "sync":
        barrier = threading.Barrier(writers)

        def write(i: int) -> None:
            barrier.wait()
            saver.put_writes({"configurable": {"thread_id": f"t{i}", "checkpoint_ns": "",
                                               "checkpoint_id": str(uuid.UUID(int=i + 1))}}, [("c", i)], "task")  # fmt: skip

        threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:

        async def all_at_once() -> None:
            await asyncio.gather(*(saver.aput_writes({"configurable": {"thread_id": f"t{i}", "checkpoint_ns": "",
                                   "checkpoint_id": str(uuid.UUID(int=i + 1))}}, [("c", i)], "task")
                                   for i in range(writers)))  # fmt: skip

        asyncio.run(all_at_once())
    probes = {key for kind, key in remote.log if key.startswith(PROBE_PREFIX)}
    assert len(probes) == 1, probes
    assert sum(1 for kind, key in remote.log if kind == "PUT" and key.startswith("data/")) == writers


def test_session_leases_are_gated_too() -> None:
    """Leases are compare-and-swaps of the head: a SessionManager on an unprobed store probes."""
    store = UnsafeRemote(create_only=True)
    with pytest.raises(UnsafeStoreError):
        SessionManager(ObjectStoreSaver(store)).acquire("t", "worker-1", ttl=60)
    assert [o.key for o in store.list("")] == []
    trust.forget(store)


def test_the_probe_draws_nothing_from_uuid4(remote: CountingStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """LangGraph's suite patches ``uuid.uuid4`` with a fixed sequence in one test; a probe that
    drew from it would shift the sequence."""

    def no_uuid4() -> uuid.UUID:
        raise AssertionError("the probe drew from uuid.uuid4")

    saver = ObjectStoreSaver(remote)
    monkeypatch.setattr(uuid, "uuid4", no_uuid4)
    saver.put_writes({"configurable": {"thread_id": "t", "checkpoint_ns": "",
                                       "checkpoint_id": str(uuid.UUID(int=1))}}, [("c", 1)], "task")  # fmt: skip
    assert trust.verdict(remote) is True


def test_recording_a_probe_keeps_the_markers_format_version() -> None:
    """``setup()`` (and so the first write) rewrote an old store's marker with the current
    format version while adding the probe record: the store then claimed a format its data was
    not in, which only ``migrate`` may say (``mark_format``)."""
    store = Remote()
    store.put(
        keys.FORMAT_MARKER_KEY,
        envelope.encode(envelope.Kind.MARKER, envelope.packb({"package": "x"}), format_version=1),
    )
    ObjectStoreSaver(store).setup()
    obj = store.get(keys.FORMAT_MARKER_KEY)
    assert obj is not None
    marker, env = envelope.decode_msgpack(obj.body, key=obj.key, expect=envelope.Kind.MARKER)
    assert (env.format_version, marker["package"], marker["probe"]["passed"] > 0) == (1, "x", True)
    trust.forget(store)
