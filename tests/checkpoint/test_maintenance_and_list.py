"""list() semantics the conformance suite does not check, and prune / delete_for_runs /
copy_thread on threads with subgraph namespaces, sealed segments and blob values, also while
readers, copies and writers race them and when the answer to a head swap is lost."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from typing_extensions import TypedDict

from langgraph_handoff import Layout, MemoryStore, ObjectStoreSaver
from langgraph_handoff.errors import ThreadExistsError
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.stores import StoreBase
from langgraph_handoff.stores.base import Get, Op
from tests.support.graph_scenarios import scenario_update_and_time_travel
from tests.support.migrate_helpers import cfg
from tests.support.saver_helpers import (
    Big,
    Doc,
    LostSwapAnswer,
    counting_graph,
    latest_id,
    one_node_graph,
    put,
    reads_whole,
)

SEALING = Layout(head_max_records=3, head_keep=1, blob_threshold=64)


def _put(saver: ObjectStoreSaver, thread: str, ns: str, parent: str | None, step: int, **md: Any) -> str:
    state = {"x": "v" * 100, "step": step}
    return put(saver, thread, parent, step, ns=ns, values=state, versions={"x": 1, "step": step + 1}, **md)


def _ids(tuples: Any) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in tuples]


@pytest.mark.parametrize("layout", [Layout(), SEALING], ids=["wide", "sealed"])
def test_list_orders_globally_and_before_crosses_namespaces(store: StoreBase, layout: Layout) -> None:
    saver = ObjectStoreSaver(store, layout=layout)
    order = []
    parents = {"": None, "sub:1": None}
    for step in range(8):
        ns = "" if step % 2 == 0 else "sub:1"
        parents[ns] = _put(saver, "t", ns, parents[ns], step, run_id=f"run-{step % 3}")
        order.append(parents[ns])
    all_ = _ids(saver.list({"configurable": {"thread_id": "t"}}))
    assert all_ == order[::-1]  # newest first across namespaces (SQL savers' order)
    root = _ids(saver.list({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}))
    assert root == order[-2::-2]  # steps 6, 4, 2, 0
    # before= a *root* id, on the subgraph namespace: what LangGraph's replay does
    before = {"configurable": {"checkpoint_id": order[4]}}
    sub_before = _ids(
        saver.list({"configurable": {"thread_id": "t", "checkpoint_ns": "sub:1"}}, before=before, limit=1)
    )
    assert sub_before == [order[3]]
    # filter applies before limit; a missing key matches None (InMemorySaver's rule)
    run1 = _ids(saver.list({"configurable": {"thread_id": "t"}}, filter={"run_id": "run-1"}, limit=2))
    assert run1 == [order[7], order[4]]
    assert len(list(saver.list(None, filter={"absent": None}))) == 8
    # a specific checkpoint id in the config lists only that one
    assert _ids(saver.list({"configurable": {"thread_id": "t", "checkpoint_id": order[2]}})) == [order[2]]
    # list(None) covers every thread
    _put(saver, "other", "", None, 50)
    assert len(list(saver.list(None))) == 9


@pytest.mark.parametrize("layout", [Layout(), SEALING], ids=["wide", "sealed"])
def test_copy_thread_is_complete_and_refuses_to_merge(store: StoreBase, layout: Layout) -> None:
    saver = ObjectStoreSaver(store, layout=layout)
    scenario_update_and_time_travel(saver, "sync", "src")
    src = list(saver.list({"configurable": {"thread_id": "src"}}))
    saver.copy_thread("src", "dst")
    dst = list(saver.list({"configurable": {"thread_id": "dst"}}))

    def strip(ts: list[Any]) -> list[Any]:
        return [
            (
                t.config["configurable"]["checkpoint_ns"],
                t.config["configurable"]["checkpoint_id"],
                t.checkpoint,
                t.metadata,
                t.pending_writes,
                t.parent_config and t.parent_config["configurable"]["checkpoint_id"],
            )
            for t in ts
        ]

    assert strip(dst) == strip(src) and len(src) > 10
    with pytest.raises(ThreadExistsError):
        saver.copy_thread("src", "dst")
    # the copy is a working thread of its own
    from langgraph.types import Command

    from tests.support.graph_scenarios import subgraph_with_interrupt

    graph = subgraph_with_interrupt().compile(checkpointer=saver)
    graph.invoke(Command(resume="on-copy"), {"configurable": {"thread_id": "dst"}})
    assert len(list(saver.list({"configurable": {"thread_id": "src"}}))) == len(src)


def test_copy_thread_onto_an_emptied_thread() -> None:
    """copy_thread onto a thread emptied by delete_for_runs failed after writing objects.

    Found by an adversarial review of the saver; fails before commit ea58b81."""
    saver = ObjectStoreSaver(MemoryStore())
    put(saver, "dst", None, 0, run_id="gone")
    saver.delete_for_runs(["gone"])
    parent = None
    for i in range(3):
        parent = put(saver, "src", parent, i)
    saver.copy_thread("src", "dst")
    assert len(list(saver.list({"configurable": {"thread_id": "dst"}}))) == 3


@pytest.mark.parametrize("layout", [Layout(), SEALING], ids=["wide", "sealed"])
def test_prune_keep_latest_removes_history_writes_and_orphaned_blobs(store: StoreBase, layout: Layout) -> None:
    saver = ObjectStoreSaver(store, layout=layout)
    scenario_update_and_time_travel(saver, "sync", "t")
    scenario_update_and_time_travel(saver, "sync", "keep-me")
    before = {
        ns: saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ns}})
        for ns in {t.config["configurable"]["checkpoint_ns"] for t in saver.list({"configurable": {"thread_id": "t"}})}
    }
    other_before = list(saver.list({"configurable": {"thread_id": "keep-me"}}))
    saver.prune(["t"])
    after = list(saver.list({"configurable": {"thread_id": "t"}}))
    assert sorted(_ids(after)) == sorted(t.config["configurable"]["checkpoint_id"] for t in before.values())
    for tup in after:
        ns = tup.config["configurable"]["checkpoint_ns"]
        assert tup.checkpoint == before[ns].checkpoint and tup.pending_writes == before[ns].pending_writes
    # only the kept checkpoints' writes, segments and blobs remain under the thread
    kept = set(_ids(after))
    from langgraph_handoff._format import keys

    for info in store.list(keys.thread_data_prefix("t")):
        part = info.key.split("/")[3]
        if part == "w":
            assert keys.parse_writes_key(info.key)[0] in kept, info.key
        elif part == "b":
            assert keys.parse_blob_key(info.key) in kept, info.key
        else:
            pytest.fail(f"left behind: {info.key}")
    assert [t.checkpoint for t in saver.list({"configurable": {"thread_id": "keep-me"}})] == [
        t.checkpoint for t in other_before
    ]
    # and the pruned thread still resumes
    from tests.support.graph_scenarios import subgraph_with_interrupt

    graph = subgraph_with_interrupt().compile(checkpointer=ObjectStoreSaver(store, layout=layout))
    graph.invoke({"trail": ["more"]}, {"configurable": {"thread_id": "t"}})


def test_prune_collects_a_dropped_checkpoints_blobs_by_key() -> None:
    """prune kept every blob of a dropped checkpoint as soon as one of them was still used.

    Found by the eighth review round; fails before commit c5296ee."""
    from langgraph.graph import END, START, StateGraph

    store = MemoryStore()
    small = Layout(blob_threshold=256, spill_threshold=200, head_max_records=6, head_keep=2)
    g = StateGraph(Doc)
    g.add_node("a", lambda s: {"log": ["a"]})  # never touches doc
    g.add_edge(START, "a")
    g.add_edge("a", END)
    graph = g.compile(checkpointer=ObjectStoreSaver(store, layout=small))
    graph.invoke({"log": ["hi " + "x" * 300], "doc": "T" * 1000}, cfg("t"))  # two blobs, one owner
    for i in range(3):
        graph.invoke({"log": [f"turn {i}"]}, cfg("t"))  # the log changes, the doc is shared
    saver = ObjectStoreSaver(store, layout=small)
    saver.prune(["t"])
    report = verify_store(saver)
    assert report.problems == [] and report.unreferenced == []


def test_prune_validates_arguments(store: StoreBase) -> None:
    saver = ObjectStoreSaver(store)
    with pytest.raises(TypeError, match="sequence"):
        saver.prune("t")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown prune strategy"):
        saver.prune(["t"], strategy="oldest")


def test_delete_for_runs_matches_inmemory_semantics(store: StoreBase) -> None:
    saver = ObjectStoreSaver(store, layout=SEALING)
    ids = {}
    parent = None
    for step in range(6):
        parent = ids[step] = _put(saver, "t", "", parent, step, run_id=f"run-{step % 2}")
    sub = _put(saver, "t", "sub:1", None, 10, run_id="run-1")
    _put(saver, "u", "", None, 11, run_id="run-1")
    saver.delete_for_runs(["run-1"])
    left = _ids(saver.list(None))
    assert sorted(left) == sorted(ids[s] for s in (0, 2, 4)) and sub not in left
    # the latest is now run-0's step 4: a run continuing from there is accepted
    _put(saver, "t", "", ids[4], 20)


@pytest.mark.parametrize(
    "layout, size",
    [(Layout(head_max_records=8, head_keep=4), 10), (Layout(), 150_000)],
    ids=["sealed-by-count", "sealed-by-size"],
)
def test_delete_for_runs_keeps_sealed_survivors_visible(layout: Layout, size: int) -> None:
    """delete_for_runs that dropped every checkpoint left in the head hid the sealed survivors:
    run A's checkpoints, sealed into segments, must stay listed, and its last one the latest.

    Found by an adversarial review of the saver; fails before commit ea58b81."""
    saver = ObjectStoreSaver(MemoryStore(), layout=layout)
    a = None
    for step in range(5):
        a = put(saver, "t", a, step, values={"x": os.urandom(size)}, run_id="run-A")
    b = a
    for step in range(5, 10):
        b = put(saver, "t", b, step, values={"x": os.urandom(size)}, run_id="run-B")
    saver.delete_for_runs(["run-B"])
    fresh = ObjectStoreSaver(saver.store, layout=layout)
    assert latest_id(fresh, "t") == a
    assert len(list(fresh.list({"configurable": {"thread_id": "t"}}))) == 5
    put(fresh, "t", a, 20, run_id="run-C")  # run A's lineage continues from its last checkpoint


def test_emptied_namespace_reads_as_empty_and_accepts_a_new_lineage(store: StoreBase) -> None:
    saver = ObjectStoreSaver(store)
    first = _put(saver, "t", "", None, 0, run_id="gone")
    saver.delete_for_runs(["gone"])
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is None
    assert list(saver.list(None)) == []
    from langgraph_handoff import StaleWriterError

    with pytest.raises(StaleWriterError, match="no checkpoints any more"):
        _put(ObjectStoreSaver(store), "t", "", first, 1)  # continuing a deleted checkpoint
    _put(saver, "t", "", None, 2)  # a new run on the emptied thread
    assert len(list(saver.list(None))) == 1


def test_state_history_after_many_steps_equals_inmemory(store: StoreBase) -> None:
    """A long thread crosses many sealed segments; history and state stay exact."""
    from tests.checkpoint.test_request_counts import five_nodes

    def run(saver: Any) -> Any:
        graph = five_nodes().compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "long"}}
        for i in range(12):
            graph.invoke({"messages": [{"role": "user", "content": f"turn {i}"}]}, cfg)
        return [(h.values, h.next, h.metadata["step"]) for h in graph.get_state_history(cfg)]

    assert run(ObjectStoreSaver(store, layout=Layout(head_max_records=10, head_keep=3))) == run(InMemorySaver())


def test_administrative_operations_report_progress(store: StoreBase, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    saver = ObjectStoreSaver(store)
    for t in range(3):
        _put(saver, f"t{t}", "", None, t, run_id=f"run-{t}")
    with caplog.at_level(logging.INFO, logger="langgraph_handoff"):
        saver.delete_for_runs(["run-1"])
        saver.copy_thread("t0", "copy")
    messages = [r.getMessage() for r in caplog.records]
    assert "delete_for_runs: done; 3 namespaces scanned, 1 checkpoints removed" in messages
    assert "copy_thread: 't0' -> 'copy', 1 namespaces" in messages


# -- maintenance racing readers and copies ------------------------------------------------------------


class HookStore(MemoryStore):
    """Runs ``hook`` once, right before the first GET of a blob: a maintenance job in another
    process striking between a reader's head read and its value fetch."""

    hook: Callable[[], None] | None = None

    def _maybe(self, ops: Any) -> None:
        if self.hook and any(isinstance(o, Get) and "/b/" in o.key for o in ops):
            hook, self.hook = self.hook, None
            hook()

    def run_many(self, ops: Any, *, return_exceptions: bool = False) -> list[Any]:
        self._maybe(ops)
        return super().run_many(ops, return_exceptions=return_exceptions)

    def run(self, op: Any) -> Any:
        self._maybe([op])
        return super().run(op)


BLOBS = Layout(blob_threshold=1024)


def _blob_thread(store: StoreBase) -> list[str]:
    saver = ObjectStoreSaver(store, layout=BLOBS)
    ids, parent = [], None
    for i in range(3):
        parent = put(saver, "t", parent, i, values={"big": os.urandom(4000)}, versions={"big": i + 1}, run_id=f"r{i}")
        ids.append(parent)
    return ids


@pytest.mark.parametrize("operation", ["prune", "delete_for_runs", "delete_thread"])
def test_readers_racing_maintenance_see_the_new_state_not_corruption(operation: str) -> None:
    """A reader racing prune, delete_for_runs or delete_thread (another process, between the
    reader's head read and its value fetch) reported a garbage-collected blob as corruption
    instead of reading the new state.

    Found by an adversarial review of the saver; fails before commit ea58b81."""
    for reading in ("get_tuple-oldest", "get_tuple-latest", "list"):
        store = HookStore()
        ids = _blob_thread(store)
        admin = ObjectStoreSaver(store, layout=BLOBS)
        store.hook = {
            "prune": lambda admin=admin: admin.prune(["t"]),
            "delete_for_runs": lambda admin=admin: admin.delete_for_runs(["r2"]),
            "delete_thread": lambda admin=admin: admin.delete_thread("t"),
        }[operation]
        reader = ObjectStoreSaver(store, layout=BLOBS)
        expected_latest = {"prune": ids[2], "delete_for_runs": ids[1], "delete_thread": None}[operation]
        if reading == "get_tuple-oldest":
            got = reader.get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": ids[0]}})
            assert (
                got is None if operation != "delete_for_runs" else got.config["configurable"]["checkpoint_id"] == ids[0]
            )
        elif reading == "get_tuple-latest":
            assert latest_id(reader, "t") == expected_latest
        else:
            listed = [
                t.config["configurable"]["checkpoint_id"] for t in reader.list({"configurable": {"thread_id": "t"}})
            ]
            survivors = {"prune": ids[2:], "delete_for_runs": ids[:2], "delete_thread": []}[operation]
            assert set(listed) <= set(ids) and set(survivors) <= set(listed) | set(ids[:2])


def test_copy_thread_racing_a_prune_of_its_source_copies_a_consistent_snapshot() -> None:
    """copy_thread racing a prune of its source wrote a copy that referenced blobs it never
    copied.

    Found by an adversarial review of the saver; fails before commit ea58b81."""
    store = HookStore()
    _blob_thread(store)  # thread "t"
    store.hook = lambda: ObjectStoreSaver(store, layout=BLOBS).prune(["t"])
    saver = ObjectStoreSaver(store, layout=BLOBS)
    saver.copy_thread("t", "copy")
    fresh = ObjectStoreSaver(store, layout=BLOBS)
    copied = list(fresh.list({"configurable": {"thread_id": "copy"}}))
    source = list(fresh.list({"configurable": {"thread_id": "t"}}))
    assert [t.checkpoint for t in copied] == [t.checkpoint for t in source] and len(copied) == 1


# -- rewrites whose answer is lost while a worker writes on top -------------------------------------------


def _delete_run_r1_with_a_lost_answer() -> tuple[StoreBase, Layout]:
    """Six runs on one thread (segments mixing runs), then delete_for_runs(["r1"]) whose head
    swap lands while a worker takes a turn on top, and whose answer is lost."""
    tiny = Layout(head_max_records=5, head_keep=1)
    store = MemoryStore()
    worker = counting_graph(Big, ObjectStoreSaver(store, layout=tiny))
    for i in range(6):
        worker.invoke({"n": 0} if i == 0 else {}, {"configurable": {"thread_id": "t"}, "metadata": {"run_id": f"r{i}"}})
    ObjectStoreSaver(LostSwapAnswer(store, lambda: worker.invoke({}, cfg("t"))), layout=tiny).delete_for_runs(["r1"])
    return store, tiny


def test_a_lost_answer_to_a_rewrite_does_not_delete_the_segments_it_stored() -> None:
    """prune / delete_for_runs deleted segments the stored head lists when the answer to a landed swap
    was lost and a worker wrote on top.

    Found by the tenth review round; fails before commit 8d3d56f."""
    store, tiny = _delete_run_r1_with_a_lost_answer()
    reads_whole(store, ObjectStoreSaver(store, layout=tiny))


def test_a_deleted_runs_checkpoints_do_not_linger_after_a_lost_answer() -> None:
    """delete_for_runs whose head swap landed unseen under a worker's turn found nothing left to
    drop on its next attempt and never collected the replaced segments (holding the deleted
    run's checkpoints) or its writes.

    Found by the eleventh review round; fails before commit da15759."""
    store, tiny = _delete_run_r1_with_a_lost_answer()
    fresh = ObjectStoreSaver(store, layout=tiny)
    reads_whole(store, fresh)
    assert verify_store(fresh).unreferenced == []
    assert all(t.metadata.get("run_id") != "r1" for t in fresh.list(cfg("t")))


class _Two(TypedDict, total=False):
    doc: str
    other: str
    n: int


def _alternating(saver: ObjectStoreSaver) -> Any:
    def a(state: dict[str, Any]) -> dict[str, Any]:
        n = state.get("n", 0) + 1
        return {"n": n, **({"other": chr(65 + n % 26) * 600} if n % 3 == 0 else {})}

    return one_node_graph(_Two, saver, a)


def test_a_segment_sealed_on_top_and_replaced_before_it_is_read_stops_the_collection() -> None:
    """prune's swap landed unseen, a worker's turn on top sealed a segment, and another admin job
    replaced that segment right after prune's re-read: prune skipped the missing segment and
    collected a blob the replacement still references.

    Found by the twelfth review round; fails before commit ccfafb3."""
    from langgraph_handoff.stores.base import Get

    layout = Layout(blob_threshold=100_000, spill_threshold=200, head_max_records=3, head_keep=1)
    store = MemoryStore()
    graph = _alternating(ObjectStoreSaver(store, layout=layout))

    def run(g: Any, rid: str, inp: dict[str, Any]) -> None:
        g.invoke(inp, {"configurable": {"thread_id": "t"}, "metadata": {"run_id": rid}})

    run(graph, "r0", {"doc": "B" * 1000})
    for i in range(5):
        run(graph, f"r{i + 1}", {"doc": f"X{i}" * 300} if i == 1 else {})
    worker = _alternating(ObjectStoreSaver(store, layout=layout))
    state = {"late": False}

    class Racing(LostSwapAnswer):
        def run(self, op: Op) -> Any:
            out = super().run(op)
            if state["late"] and isinstance(op, Get) and op.key == "heads/t/=":
                state["late"] = False  # just after prune's re-read: another admin job
                ObjectStoreSaver(store, layout=layout).delete_for_runs(["r5"])
            return out

    def on_top() -> None:
        run(worker, "w", {"doc": "W" * 800})  # seals a segment
        state["late"] = True

    ObjectStoreSaver(Racing(store, on_top), layout=layout).prune(["t"])
    reads_whole(store, ObjectStoreSaver(store, layout=layout))
