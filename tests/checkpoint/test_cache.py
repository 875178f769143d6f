"""The head cache is an optimisation only: a stale cache may cost a request, never a wrong answer."""

from __future__ import annotations

from langgraph.checkpoint.base.id import uuid6

from langgraph_handoff import MemoryStore, ObjectStoreSaver, StaleWriterError
from langgraph_handoff.stores import CountingStore
from tests.support.saver_helpers import as_run


def _cp(step: int) -> dict:
    return {"v": 4, "id": str(uuid6(clock_seq=step)), "ts": "", "channel_values": {"n": step},
            "channel_versions": {"n": step + 1}, "versions_seen": {}, "updated_channels": None}  # fmt: skip


def test_a_lagging_cache_never_causes_a_false_stale_writer_error() -> None:
    """Regression (seen racing on Ceph RGW): the cache is shared by threads, and another thread's
    older read can land after our newer write. The next put must re-read before refusing."""
    store = CountingStore(MemoryStore())
    saver = ObjectStoreSaver(store)
    cfg1 = saver.put(as_run({"configurable": {"thread_id": "t"}}), _cp(1), {"source": "input"}, {"n": 2})
    lagging = saver._cache.get("t", "")  # what an older concurrent read would have recorded
    cfg2 = saver.put(as_run(cfg1), _cp(2), {"source": "loop"}, {"n": 3})
    saver._cache.observe("t", "", lagging.head, lagging.etag)  # ... landing late
    store.reset()
    cfg3 = saver.put(as_run(cfg2), _cp(3), {"source": "loop"}, {"n": 4})
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}).config == cfg3
    assert [k for k, _ in store.log][:2] == ["GET", "PUT"]  # one re-read, then the CAS


def test_a_real_conflict_is_still_refused_after_the_re_read() -> None:
    saver = ObjectStoreSaver(MemoryStore())
    cfg1 = saver.put(as_run({"configurable": {"thread_id": "t"}}), _cp(1), {"source": "input"}, {"n": 2})
    lagging = saver._cache.get("t", "")
    saver.put(as_run(cfg1), _cp(2), {"source": "loop"}, {"n": 3})
    saver._cache.observe("t", "", lagging.head, lagging.etag)  # the cache now agrees with cfg1...
    try:
        saver.put(as_run(cfg1), _cp(3), {"source": "loop"}, {"n": 4})  # ... but the store does not
        raise AssertionError("a stale continuation was accepted")
    except StaleWriterError as exc:
        assert exc.expected_parent == cfg1["configurable"]["checkpoint_id"]


def test_cache_is_bounded_by_bytes_and_eviction_only_costs_a_read() -> None:
    store = CountingStore(MemoryStore())
    saver = ObjectStoreSaver(store, cache_bytes=200_000)
    big = "x" * 50_000
    for i in range(10):
        cp = dict(_cp(i), channel_values={"doc": big + str(i)}, channel_versions={"doc": 1})
        saver.put({"configurable": {"thread_id": f"t{i}"}}, cp, {"source": "input"}, {"doc": 1})
    assert saver._cache.bytes <= 200_000 and 1 <= len(saver._cache) < 10
    store.reset()
    tup = saver.get_tuple({"configurable": {"thread_id": "t0"}})  # evicted long ago: still correct
    assert tup.checkpoint["channel_values"]["doc"] == big + "0"
    assert store.snapshot()["requests"] == 2
