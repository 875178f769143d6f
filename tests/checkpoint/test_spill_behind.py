"""Large values move out of the head *behind* it: one round trip per put, and never a head that
points at a blob that may not exist."""

from __future__ import annotations

import os
from typing import Any

import pytest
from langgraph.checkpoint.base.id import uuid6

from langgraph_handoff import Layout, MemoryStore, ObjectStoreSaver
from langgraph_handoff._format import keys
from langgraph_handoff.migrations import SchemaMigrations
from langgraph_handoff.stores import CountingStore, StoreBase
from langgraph_handoff.stores.base import Op, Put
from tests.support.migrate_helpers import Tripwire, cfg
from tests.support.saver_helpers import Big, Body, FailingBlobs, counting_graph, reads_whole

VALUE = 64 * 1024  # above the 32 KiB spill threshold, below the 1 MiB blob threshold


def _chain(
    saver: ObjectStoreSaver, steps: int, thread: str = "t", start: int = 0, parent: str | None = None
) -> list[tuple[str, bytes]]:
    """Each step replaces a 64 KiB channel value; returns [(checkpoint id, value)]."""
    out = []
    for step in range(start, start + steps):
        value = os.urandom(VALUE)
        cid = str(uuid6(clock_seq=step))
        cp = {"v": 4, "id": cid, "ts": "", "channel_values": {"doc": value, "n": step},
              "channel_versions": {"doc": step + 1, "n": step + 1}, "versions_seen": {}, "updated_channels": None}  # fmt: skip
        conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
        if parent:
            conf["checkpoint_id"] = parent
        saver.put({"configurable": conf}, cp, {"source": "loop", "step": step}, {"doc": step + 1, "n": step + 1})
        parent = cid
        out.append((cid, value))
    return out


def _assert_history(saver: ObjectStoreSaver, expected: list[tuple[str, bytes]], thread: str = "t") -> None:
    for cid, value in expected:
        tup = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_id": cid}})
        assert tup is not None and tup.checkpoint["channel_values"]["doc"] == value


def test_each_put_is_one_round_trip_and_the_head_stays_small() -> None:
    store = CountingStore(MemoryStore())
    saver = ObjectStoreSaver(store)
    written = _chain(saver, 1)
    rounds = []
    for i in range(1, 12):
        store.reset()
        written += _chain(saver, 1, start=i, parent=written[-1][0])
        rounds.append(store.snapshot())
    # from the second put on: the head CAS plus the previous value's spill, in parallel
    assert all(r["round_trips"] == 1 for r in rounds), rounds
    assert all(r["PUT"] == 2 for r in rounds), rounds
    head = store.inner.get(keys.head_key("t", ""))
    assert len(head.body) < 2.5 * VALUE  # the latest value plus one in-flight spill, not 12 values
    store.reset()
    latest = saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert latest.checkpoint["channel_values"]["doc"] == written[-1][1]
    assert store.snapshot() == {"GET": 1, "LIST": 1, "requests": 2, "round_trips": 1}
    _assert_history(ObjectStoreSaver(store.inner), written)


def test_a_failed_spill_loses_nothing() -> None:
    store = FailingBlobs()
    saver = ObjectStoreSaver(store)
    written = _chain(saver, 6)  # every spill fails; every put still succeeds
    assert not [i for i in store.list("data/") if "/b/" in i.key]
    _assert_history(ObjectStoreSaver(store), written)
    store.fail = False
    written += _chain(saver, 4, start=6, parent=written[-1][0])
    assert [i for i in store.list("data/") if "/b/" in i.key]  # the backlog was spilled
    _assert_history(ObjectStoreSaver(store), written)


def test_a_crash_between_head_and_spill_loses_nothing() -> None:
    """The head lands, the process dies before its spill write: the value is still inline."""

    class DropSpills(MemoryStore):
        def run_many(self, ops: Any, *, return_exceptions: bool = False) -> list[Any]:
            kept = [op for op in ops if not (isinstance(op, Put) and "/b/" in op.key)]
            results = super().run_many(kept, return_exceptions=return_exceptions)
            if len(kept) < len(ops):
                raise SystemExit("worker killed after its head write")
            return results

    store = DropSpills()
    written = _chain(ObjectStoreSaver(store), 1)
    with pytest.raises(SystemExit):
        written += _chain(ObjectStoreSaver(store), 1, start=1, parent=written[-1][0])
    _assert_history(ObjectStoreSaver(store), written[:1])
    survivor = ObjectStoreSaver(store)
    latest = survivor.get_tuple({"configurable": {"thread_id": "t"}})
    written.append((latest.config["configurable"]["checkpoint_id"], latest.checkpoint["channel_values"]["doc"]))
    _assert_history(survivor, written)


def test_another_process_never_references_a_blob_it_did_not_see_written() -> None:
    """Process A's last spill never lands (it died); process B, with nothing cached, continues
    the thread. B must write that spill itself before any head stops carrying the value."""
    store = FailingBlobs()
    store.fail = False
    written = _chain(ObjectStoreSaver(store), 3)
    store.fail = True
    written += _chain(ObjectStoreSaver(store), 1, start=3, parent=written[-1][0])  # A's spill lost
    store.fail = False
    b = ObjectStoreSaver(store)
    written += _chain(b, 3, start=4, parent=written[-1][0])
    _assert_history(ObjectStoreSaver(store), written)
    # and once B confirmed it, the head no longer carries the old values
    assert len(store.get(keys.head_key("t", "")).body) < 2.5 * VALUE


@pytest.mark.parametrize("api", ["sync", "async"])
def test_large_state_graph_matches_inmemory(api: str, store: StoreBase) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from tests.support.graph_scenarios import SYNC_SCENARIOS

    layout = Layout(spill_threshold=64)  # every non-trivial value spills
    for name, run in SYNC_SCENARIOS.items():
        assert run(ObjectStoreSaver(store, layout=layout), "sync", f"s-{name}") == run(
            InMemorySaver(), "sync", f"s-{name}"
        )


# -- blob collection and spill memory against running writers ----------------------------------------


_SPILLY = Layout(blob_threshold=100_000, spill_threshold=200)


def test_prune_keeps_a_blob_a_writer_spills_meanwhile() -> None:
    """prune dropped the value's owner but kept the value inline; a writer's turn between prune's
    head swap and its blob collection spilled it to the owner's key, prune deleted that key, and
    the writer's next put referenced it.

    Found by the ninth review round; fails before commit a0ca2ab."""
    store = MemoryStore()
    graph = counting_graph(Big, ObjectStoreSaver(store, layout=_SPILLY))
    graph.invoke({"big": "B" * 1000}, cfg("t"))
    for _ in range(3):
        graph.invoke({}, cfg("t"))
    worker = counting_graph(Big, ObjectStoreSaver(store, layout=_SPILLY))
    fired: list[int] = []

    def turn_before_collection(op: Op, when: str) -> None:
        if when == "before" and not fired and getattr(op, "prefix", "").endswith("/b/"):
            fired.append(1)
            worker.invoke({"big": "C" * 1000}, cfg("t"))  # B is no longer the latest's: spilled

    ObjectStoreSaver(Tripwire(store, turn_before_collection), layout=_SPILLY).prune(["t"])
    worker.invoke({}, cfg("t"))  # the confirmed spill becomes a blob reference
    assert fired
    reads_whole(store, ObjectStoreSaver(store, layout=_SPILLY))


def test_migrate_keeps_a_blob_a_running_worker_remembers_written() -> None:
    """A new-code worker spilled an old checkpoint's value and remembers the blob written;
    migrate renamed the channel, held the same bytes inline under the same owner and deleted the
    blob; the worker's next turn referenced it.

    Found by the ninth review round; fails before commit a0ca2ab."""
    from langgraph_handoff.migrations import rename_channel

    m = SchemaMigrations()
    m.register(1)(rename_channel("big", "body"))
    store = MemoryStore()
    counting_graph(Big, ObjectStoreSaver(store, layout=_SPILLY)).invoke({"big": "X" * 1000}, cfg("t"))
    worker = counting_graph(Body, ObjectStoreSaver(store, migrations=m, layout=_SPILLY))
    worker.invoke({"body": "Y" * 1000}, cfg("t"))  # X is no longer the latest's: spilled
    worker.invoke({}, cfg("t"))  # ... and confirmed
    ObjectStoreSaver(store, migrations=m, layout=_SPILLY).migrate_thread("t")
    worker.invoke({}, cfg("t"))
    reads_whole(store, ObjectStoreSaver(store, migrations=m, layout=_SPILLY))


def test_a_thread_deleted_and_copied_back_under_a_running_worker() -> None:
    """The worker remembered a blob written; the copy brought back the same checkpoint ids (the
    same blob keys) with the value inline, and the worker's next put referenced the deleted blob.

    Found by the tenth review round; fails before commit 8d3d56f."""
    store = MemoryStore()
    counting_graph(Big, ObjectStoreSaver(store, layout=_SPILLY)).invoke({"big": "B" * 1000}, cfg("src"))
    counting_graph(Big, ObjectStoreSaver(store, layout=_SPILLY)).update_state(cfg("src"), {"big": "C" * 1000})
    admin = ObjectStoreSaver(store, layout=_SPILLY)
    admin.copy_thread("src", "t")
    worker = counting_graph(Big, ObjectStoreSaver(store, layout=_SPILLY))
    worker.invoke({}, cfg("t"))  # writes B's spill under t and remembers it
    worker.invoke({}, cfg("t"))  # B becomes a reference to that blob
    admin.delete_thread("t")
    admin.copy_thread("src", "t")  # back to the copy: B inline again, the blob gone
    worker.invoke({}, cfg("t"))
    reads_whole(store, ObjectStoreSaver(store, layout=_SPILLY))


def test_a_restore_that_recreates_the_same_head_bytes_is_not_mistaken_for_it() -> None:
    """Content-hash ETags: a delete and a copy back recreated the worker's last head byte for
    byte, so its next compare-and-swap succeeded without a re-read and it trusted blobs it
    remembered writing, which the delete had removed (ABA).

    Found by the eleventh review round; fails before commit da15759."""
    store = MemoryStore()
    worker_saver = ObjectStoreSaver(store)
    worker = counting_graph(Big, worker_saver)
    admin = ObjectStoreSaver(store)
    worker.invoke({"big": "B" * 40000}, cfg("t"))
    worker.update_state(cfg("t"), {"big": "C" * 40000})  # B superseded: its blob written, remembered
    etag = store.get("heads/t/=").etag  # type: ignore[union-attr]
    admin.copy_thread("t", "bak")
    admin.delete_thread("t")
    admin.copy_thread("bak", "t")
    assert store.get("heads/t/=").etag != etag  # type: ignore[union-attr]
    worker.invoke({}, cfg("t"))
    reads_whole(store, ObjectStoreSaver(store))
