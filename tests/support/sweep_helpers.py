"""TTL sweep races, written once and run on the memory store (tests/checkpoint/test_sweep_races.py) and on
the real S3 server (integration_tests/test_s3_sweep.py).

Each scenario races a real writer against the sweeper at one exact point, with no sleeps and no
timing: the sweeper's store is a :class:`HookStore`, which runs the writer's whole operation
right before a chosen request of the sweeper (its root compare-and-swap, its subgraph swap, its
DeleteObjects). The writer works through the same inner store with a saver of its own, as
another worker would. Time is an injected clock: nobody waits for a TTL to pass.
"""

from __future__ import annotations

import asyncio
import operator
import time
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff._format import keys
from langgraph_handoff.checkpoint import driver
from langgraph_handoff.errors import StoreUnavailableError, ThreadExpiredError
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.stores import CountingStore, StoreBase
from langgraph_handoff.stores.base import DeleteMany, Op, Put
from tests.support.saver_helpers import as_run

TTL = {"default_ttl": 60}


class Clock:
    """The injected clock: starts at the real time (checkpoint ids carry real time too)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += minutes * 60


class HookStore(CountingStore):
    """Counts requests, and runs a hook once right before the first request that matches it."""

    def __init__(self, inner: StoreBase) -> None:
        super().__init__(inner)
        self.hooks: list[tuple[Callable[[Op], bool], Callable[[], None]]] = []
        self.fired: list[str] = []

    def before(self, matches: Callable[[Op], bool], action: Callable[[], None], name: str = "") -> None:
        self.hooks.append((matches, action))
        self.fired.append(f"armed {name}")

    def _note(self, ops: Any) -> None:
        super()._note(ops)
        for op in list(ops):
            for hook in list(self.hooks):
                if hook[0](op):
                    self.hooks.remove(hook)
                    hook[1]()


def is_cas(ns: str = "", thread: str = "t") -> Callable[[Op], bool]:
    """A compare-and-swap (or create-only put) of the head of ``thread`` / ``ns``."""
    key = keys.head_key(thread, ns)
    return lambda op: isinstance(op, Put) and op.key == key


def is_delete(op: Op) -> bool:
    return isinstance(op, DeleteMany)


class Chat(TypedDict, total=False):
    messages: Annotated[list[str], operator.add]


def chat_graph(tag: str, inside: Callable[[], None] | None = None) -> StateGraph:
    def reply(state: Chat) -> Chat:
        if inside is not None:
            inside()
        return {"messages": [f"{tag}:reply"]}

    g = StateGraph(Chat)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def messages(saver: ObjectStoreSaver, thread: str = "t") -> list[str]:
    tup = saver.get_tuple(cfg(thread))
    return list(tup.checkpoint["channel_values"].get("messages", [])) if tup else []


def history_ids(saver: ObjectStoreSaver, thread: str = "t") -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg(thread))]


def no_problems(store: StoreBase) -> None:
    report = verify_store(ObjectStoreSaver(store), None)
    assert not report.problems, report.problems


class Scene:
    """One store, a writer and a sweeper on it, a thread ``t`` written twice and then left idle
    past its TTL."""

    def __init__(self, inner: StoreBase, *, layout: Layout | None = None) -> None:
        self.inner = inner
        self.clock = Clock()
        self.hooked = HookStore(inner)
        self.sweeper = ObjectStoreSaver(self.hooked, ttl=TTL, clock=self.clock)
        self.writer = ObjectStoreSaver(inner, ttl=TTL, clock=self.clock, layout=layout)
        graph = chat_graph("w").compile(checkpointer=self.writer)
        graph.invoke({"messages": ["hi"]}, cfg())
        graph.invoke({"messages": ["again"]}, cfg())
        self.before = history_ids(self.writer)
        self.clock.advance(61)

    def sweep(self, mode: str, **kwargs: Any) -> Any:
        if mode == "async":
            return asyncio.run(self.sweeper.asweep(**kwargs))
        return self.sweeper.sweep(**kwargs)


# --------------------------------------------------------------------------------------------------
# The interleavings
# --------------------------------------------------------------------------------------------------


def writer_lands_before_the_swap(inner: StoreBase, mode: str) -> None:
    """A run continues the thread after the sweeper read the expired head and before its
    compare-and-swap: the swap fails, the sweep skips the thread, nothing is deleted."""
    s = Scene(inner)
    graph = chat_graph("late").compile(checkpointer=s.writer)
    s.hooked.before(is_cas(), lambda: graph.invoke({"messages": ["still here"]}, cfg()), "root swap")
    result = s.sweep(mode)
    assert [(t.thread_id, t.status) for t in result.threads] == [("t", "revived")]
    assert result.deleted == 0 and result.skipped == 1
    assert "DELETE_MANY" not in s.hooked.counts
    assert messages(s.writer)[-2:] == ["still here", "late:reply"]
    assert set(s.before) <= set(history_ids(s.writer))  # the whole old chain is still there
    no_problems(inner)
    # the revived thread is not idle any more: the next sweep keeps it
    assert [t.status for t in s.sweep(mode).threads] == ["kept"]


def sweep_wins_then_run_continues(inner: StoreBase, mode: str) -> None:
    """A run loaded the thread before the sweep and writes after it (durability "exit": no put
    until the end): its put is refused with ThreadExpiredError and stores nothing."""
    s = Scene(inner)
    outcome: list[Any] = []
    graph = chat_graph("slow", inside=lambda: outcome.append(s.sweep(mode))).compile(checkpointer=s.writer)
    with pytest.raises(ThreadExpiredError, match="TTL sweeper deleted the thread"):
        graph.invoke({"messages": ["one more"]}, cfg(), durability="exit")
    assert [t.status for t in outcome[0].threads] == ["deleted"]
    assert ObjectStoreSaver(inner).get_tuple(cfg()) is None
    assert list(inner.list("data/")) == []
    # a new run on the same thread id starts a clean thread
    fresh = ObjectStoreSaver(inner, ttl=TTL, clock=s.clock)
    chat_graph("new").compile(checkpointer=fresh).invoke({"messages": ["hello again"]}, cfg())
    assert messages(fresh) == ["hello again", "new:reply"]
    no_problems(inner)


def run_before_the_sweep_read_keeps_the_thread(inner: StoreBase, mode: str) -> None:
    """A run that stores its input checkpoint before the sweep reads the head re-stamps it: the
    sweep keeps the thread and the run finishes."""
    s = Scene(inner)
    outcome: list[Any] = []
    graph = chat_graph("busy", inside=lambda: outcome.append(s.sweep(mode))).compile(checkpointer=s.writer)
    graph.invoke({"messages": ["working"]}, cfg(), durability="sync")
    assert [t.status for t in outcome[0].threads] == ["kept"]
    assert messages(s.writer)[-1] == "busy:reply"


def new_thread_between_swap_and_delete(inner: StoreBase, mode: str) -> None:
    """After the sweep emptied the head and before it deletes the old objects, another worker
    starts the thread afresh on the empty head, with large values (blobs) and pending writes.
    The sweep deletes only the old thread's objects: the new thread reads back whole."""
    s = Scene(inner, layout=Layout(blob_threshold=1024))
    worker = ObjectStoreSaver(inner, ttl=TTL, clock=s.clock, layout=Layout(blob_threshold=1024))
    big = "x" * 4000

    def new_thread() -> None:
        graph = chat_graph("b").compile(checkpointer=worker)
        graph.invoke({"messages": [big]}, cfg())

    s.hooked.before(is_delete, new_thread, "delete")
    result = s.sweep(mode)
    assert [t.status for t in result.threads] == ["deleted"]
    assert result.threads[0].objects_deleted > 0
    reader = ObjectStoreSaver(inner)
    assert messages(reader) == [big, "b:reply"]
    assert not set(s.before) & set(history_ids(reader))
    assert any("/b/" in i.key for i in inner.list("data/"))  # the new thread's blobs survived
    no_problems(inner)
    # the new thread carried the sweep's cleanup mark over (it landed before the mark was
    # cleared): the next sweep finishes the cleanup, deletes none of the new thread's objects,
    # and clears the mark
    again = s.sweep(mode)
    assert [(t.status, t.objects_deleted) for t in again.threads] == [("cleaned", 0)]
    assert messages(ObjectStoreSaver(inner)) == [big, "b:reply"]
    assert [t.status for t in s.sweep(mode).threads] == ["kept"]
    no_problems(inner)


def inflight_put_retried_on_the_empty_head(inner: StoreBase, mode: str) -> None:
    """The hardest case: a put writes its large value, loses its head swap to the sweep, sees the
    empty head, and (an explicit update may start from anywhere) writes the value again and lands,
    all before the sweep deletes. The sweep listed that value's object before its swap, under the
    same key; it must not delete it, or the new head would point at nothing."""
    layout = Layout(blob_threshold=1024)
    s = Scene(inner, layout=layout)
    latest = s.writer.get_tuple(cfg())
    assert latest is not None
    cp = dict(latest.checkpoint, id=str(uuid6()), channel_values={"messages": ["y" * 5000]})
    cp["channel_versions"] = {"messages": s.writer.get_next_version(latest.checkpoint["channel_versions"]["messages"])}
    plan = s.writer._plan_put(latest.config, cp, {"source": "update", "step": 9}, cp["channel_versions"])
    stepper = Stepper(inner, plan)
    stepper.run_until(is_cas())  # the value is stored; the head swap comes next
    s.hooked.before(is_delete, stepper.finish, "delete")
    result = s.sweep(mode)
    assert [t.status for t in result.threads] == ["deleted"]
    assert stepper.result is not None and stepper.error is None  # the update landed on the empty head
    got = ObjectStoreSaver(inner).get_tuple(cfg())
    assert got is not None and got.checkpoint["channel_values"]["messages"] == ["y" * 5000]
    no_problems(inner)


def subgraph_revived_after_the_root_swap(inner: StoreBase, mode: str) -> None:
    """A thread with a subgraph namespace; a run writes in the subgraph after the sweep swapped
    the root and before it swaps the subgraph. The subgraph is left whole; the run's next root
    put is refused."""
    s = Scene(inner)
    ns = "child:1"
    root = s.writer.get_tuple(cfg())
    assert root is not None
    sub = {"configurable": {"thread_id": "t", "checkpoint_ns": ns}}
    first = _checkpoint({"n": 1})
    s.writer.put(as_run(sub), first, {"source": "loop", "step": 0, "parents": {"": root.config["configurable"]["checkpoint_id"]}}, {"n": 1})  # fmt: skip
    s.clock.advance(61)  # both namespaces idle past the TTL
    second = _checkpoint({"n": 2})

    def write_in_subgraph() -> None:
        parent = {"configurable": {**sub["configurable"], "checkpoint_id": first["id"]}}
        s.writer.put(as_run(parent), second, {"source": "loop", "step": 1}, {"n": 2})

    s.hooked.before(is_cas(ns), write_in_subgraph, "subgraph swap")
    result = s.sweep(mode)
    (thread,) = result.threads
    assert thread.status == "deleted" and thread.revived_namespaces == [ns]
    reader = ObjectStoreSaver(inner)
    assert reader.get_tuple(cfg()) is None
    assert [t.checkpoint["id"] for t in reader.list(sub)] == [second["id"], first["id"]]
    with pytest.raises(ThreadExpiredError):
        s.writer.put(as_run(root.config), _checkpoint({"messages": ["late"]}), {"source": "loop", "step": 5}, {})
    no_problems(inner)


def refreshing_reader_revives(inner: StoreBase, mode: str) -> None:
    """refresh_on_read: a reader's get_tuple between the sweep's read and its swap re-stamps the
    head; the sweep skips the thread."""
    s = Scene(inner)
    reader = ObjectStoreSaver(inner, ttl={**TTL, "refresh_on_read": True}, clock=s.clock)
    s.hooked.before(is_cas(), lambda: reader.get_tuple(cfg()), "root swap")
    result = s.sweep(mode)
    assert [t.status for t in result.threads] == ["revived"]
    assert history_ids(reader) == s.before


def delete_fails_then_the_next_sweep_finishes(inner: StoreBase, mode: str) -> None:
    """The DeleteObjects after the swaps fails: the thread is emptied ("deleted", with the error),
    its tombstone keeps the cleanup mark, and the next sweep deletes the leftovers ("cleaned")."""
    s = Scene(inner)

    def boom() -> None:
        raise StoreUnavailableError("DeleteObjects kept failing")

    s.hooked.before(is_delete, boom, "delete")
    (first,) = s.sweep(mode).threads
    assert first.status == "deleted" and first.error is not None and first.objects_deleted == 0
    assert list(inner.list(keys.thread_data_prefix("t")))
    (again,) = s.sweep(mode).threads
    assert again.status == "cleaned" and again.objects_deleted > 0
    assert list(inner.list(keys.thread_data_prefix("t"))) == []
    assert [t.status for t in ObjectStoreSaver(inner, ttl=TTL, clock=s.clock).sweep().threads] == ["empty"]
    no_problems(inner)


def refused_run_writes_are_collected(inner: StoreBase, mode: str) -> None:
    """A run (durability "sync") loaded the thread before the sweep and finishes its task after it:
    its writes document is stored, its next put refused; the refusal marks the tombstone and the
    next sweep deletes the document."""
    s = Scene(inner)

    def slow_task() -> None:  # the task outlives the TTL; the sweeper runs meanwhile
        s.clock.advance(61)
        assert [t.status for t in s.sweep(mode).threads] == ["deleted"]

    graph = chat_graph("slow", inside=slow_task).compile(checkpointer=s.writer)
    with pytest.raises(ThreadExpiredError):
        graph.invoke({"messages": ["one more"]}, cfg(), durability="sync")
    assert list(inner.list(keys.thread_data_prefix("t")))
    assert [t.status for t in s.sweep(mode).threads] == ["cleaned"]
    assert list(inner.list(keys.thread_data_prefix("t"))) == []
    no_problems(inner)


SCENARIOS = [
    writer_lands_before_the_swap,
    sweep_wins_then_run_continues,
    run_before_the_sweep_read_keeps_the_thread,
    new_thread_between_swap_and_delete,
    inflight_put_retried_on_the_empty_head,
    subgraph_revived_after_the_root_swap,
    refreshing_reader_revives,
    delete_fails_then_the_next_sweep_finishes,
    refused_run_writes_are_collected,
]


def _checkpoint(values: dict[str, Any]) -> dict[str, Any]:
    return {
        "v": 4,
        "id": str(uuid6()),
        "ts": "2024-01-01T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": dict.fromkeys(values, 1),
        "versions_seen": {},
    }


class Stepper:
    """Drives a saver plan one store request at a time, so a test can stop it at an exact point."""

    def __init__(self, store: StoreBase, plan: driver.Plan[Any]) -> None:
        self.store, self.plan = store, plan
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False
        self.step: Any = None
        self._advance(None, None)

    def _advance(self, value: Any, error: BaseException | None) -> None:
        try:
            self.step = self.plan.throw(error) if error is not None else self.plan.send(value)
        except StopIteration as stop:
            self.done, self.result = True, stop.value
        except Exception as exc:  # noqa: BLE001 - kept for the test to assert on
            self.done, self.error = True, exc

    def once(self) -> None:
        try:
            value = driver._perform(self.store, self.step)
        except Exception as exc:  # noqa: BLE001 - handed back to the plan, as the driver does
            self._advance(None, exc)
        else:
            self._advance(value, None)

    def run_until(self, matches: Callable[[Op], bool]) -> None:
        while not self.done and not (not isinstance(self.step, driver.Batch) and matches(self.step)):
            self.once()
        assert not self.done, f"the plan ended before the step: {self.error or self.result}"

    def finish(self) -> None:
        while not self.done:
            self.once()
