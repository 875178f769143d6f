"""A refused run says what it left behind, and the documented retry never sends a user message
twice.

With ``durability="sync"`` a run commits its input checkpoint before its first step; a run that
starts later extends it and answers both inputs; the first run's step is then refused
(``StaleWriterError``) though its input is in the thread. The docs said a refused run "stores
nothing", so a caller retrying after the error sent its message twice. Now the error carries
``committed`` (the run's checkpoints that are stored) and ``input_in_thread``, and the recipe in
docs/checkpointer.md ("When two runs race") uses them. Two runs race on threads, their order
forced by a barrier and a gate on one saver's store (no sleeps)."""

from __future__ import annotations

import asyncio
import operator
import threading
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import StaleWriterError
from langgraph_handoff.stores import MemoryStore
from tests.support.retry_recipe import asend, send


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def _graph(saver: ObjectStoreSaver, before_answer: Any = None) -> Any:
    def model(state: State, config: RunnableConfig) -> dict[str, list[str]]:
        who = config["configurable"]["who"]
        if before_answer is not None:
            before_answer(who)
        return {"log": [f"answered by {who}"]}

    builder = StateGraph(State)
    builder.add_node("model", model)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    return builder.compile(checkpointer=saver)


def _config(who: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": "t", "who": who}}


def test_a_run_refused_after_its_input_committed_says_so_and_is_not_sent_twice() -> None:
    store = MemoryStore()
    in_node = threading.Event()
    both = threading.Barrier(2, timeout=30)

    def before_answer(who: str) -> None:
        if who == "A":
            in_node.set()
        both.wait()  # A's step runs only once B has committed its input on top of A's

    graph = _graph(ObjectStoreSaver(store), before_answer)
    errors: list[StaleWriterError] = []
    results: list[Any] = []
    b_done = threading.Event()

    def refused_then_wait(exc: StaleWriterError, _resuming: bool) -> None:
        # the recipe reads the thread once B's turn is over, as a caller retrying after
        # the other run would; without this a slow B left its own step pending, and A's
        # retry ran it again
        errors.append(exc)
        assert b_done.wait(30)

    a = threading.Thread(target=lambda: results.append(send(graph, "a", _config("A"), refused_then_wait)))
    a.start()
    assert in_node.wait(30)
    graph.invoke({"log": ["b"]}, _config("B"), durability="sync")
    b_done.set()
    a.join(30)
    (refused,) = errors
    assert refused.input_in_thread and len(refused.committed) == 2  # its input, and its step 0
    assert "its input is in the conversation: do not send it again" in str(refused)
    history = {t.config["configurable"]["checkpoint_id"] for t in graph.get_state_history(_config("A"))}
    assert set(refused.committed) <= history
    # B's turn answered A's input too, and the recipe sent nothing again
    assert results[0]["log"] == ["a", "b", "answered by B"]
    assert graph.get_state(_config("A")).values["log"] == ["a", "b", "answered by B"]


class Gated(MemoryStore):
    """Once ``armed``, holds the next head write until ``release`` is set (LangGraph puts from
    its own threads, so the write held is the first after arming: the racing run's)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.waiting = threading.Event()
        self.armed = False

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        if key.startswith("heads/") and self.armed:
            self.armed = False
            self.waiting.set()
            assert self.release.wait(30)
        return super().put(key, body, if_match=if_match, if_none_match=if_none_match)


def test_a_run_refused_before_anything_of_it_was_stored_says_so_and_sends_once() -> None:
    store = Gated()
    graph = _graph(ObjectStoreSaver(store))
    graph.invoke({"log": ["hello"]}, _config("B"), durability="sync")
    results: list[Any] = []
    a = threading.Thread(target=lambda: results.append(send(graph, "a", _config("A"))))
    store.armed = True
    a.start()
    assert store.waiting.wait(30)  # A read the thread and holds its input's write
    graph.invoke({"log": ["b"]}, _config("B"), durability="sync")
    store.release.set()
    a.join(30)
    log = results[0]["log"]
    assert log.count("a") == 1 and log.count("b") == 1
    assert log == ["hello", "answered by B", "b", "answered by B", "a", "answered by A"]


def test_the_refusal_names_nothing_when_nothing_of_the_run_is_there() -> None:
    store = Gated()
    graph = _graph(ObjectStoreSaver(store))
    graph.invoke({"log": ["hello"]}, _config("B"), durability="sync")
    errors: list[StaleWriterError] = []

    def run_a() -> None:
        try:
            graph.invoke({"log": ["a"]}, _config("A"), durability="sync")
        except StaleWriterError as exc:
            errors.append(exc)

    a = threading.Thread(target=run_a)
    store.armed = True
    a.start()
    assert store.waiting.wait(30)
    graph.invoke({"log": ["b"]}, _config("B"), durability="sync")
    store.release.set()
    a.join(30)
    (refused,) = errors
    assert refused.committed == () and not refused.input_in_thread
    assert "Nothing of this run is in the thread" in str(refused)


class HoldsFirstStep(ObjectStoreSaver):
    """Once ``armed`` is set, holds the next ``"loop"`` put (a run's first step, right after its
    input checkpoint was stored) until ``release`` is set. The flags are events, which a shallow
    copy shares: under ``LANGGRAPH_STRICT_MSGPACK`` the compiled graph runs a copy of the saver
    (its ``with_allowlist``), made before the test arms it."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.armed = threading.Event()
        self.held = threading.Event()
        self.release = threading.Event()

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if self.armed.is_set() and metadata.get("source") == "loop":
            self.armed.clear()
            self.held.set()
            assert self.release.wait(30)
        return super().put(config, checkpoint, metadata, new_versions)


def _new_input(graph: Any) -> None:
    graph.invoke({"log": ["b"]}, _config("B"), durability="sync")


def _resume(graph: Any) -> None:
    graph.invoke(None, _config("B"), durability="sync")


def _update(graph: Any) -> None:
    graph.update_state(_config("B"), {"log": ["note"]}, as_node="model")


# What the next writer does on top of a run's input checkpoint, before that run's first step is
# stored: whether the run's input is then in the thread, and the conversation the recipe ends with
ON_TOP = {
    # LangGraph drops an input that has not run when new input arrives: send it again
    "new input": (_new_input, False, ["hello", "answered by B", "b", "answered by B", "a", "answered by A"]),
    # a resume runs the pending input: the other run's turn answered it, so never send it again
    "resume": (_resume, True, ["hello", "answered by B", "a", "answered by B"]),
    # update_state on top drops the pending input too
    "update_state": (_update, False, ["hello", "answered by B", "note", "a", "answered by A"]),
}


@pytest.mark.parametrize("on_top", sorted(ON_TOP))
def test_a_run_whose_input_checkpoint_alone_is_stored_says_whether_its_input_ran(on_top: str) -> None:
    act, in_thread, final = ON_TOP[on_top]
    saver = HoldsFirstStep(MemoryStore())
    graph = _graph(saver)
    graph.invoke({"log": ["hello"]}, _config("B"), durability="sync")
    errors: list[StaleWriterError] = []
    results: list[Any] = []
    saver.armed.set()
    a = threading.Thread(
        target=lambda: results.append(send(graph, "a", _config("A"), lambda exc, _: errors.append(exc)))
    )
    a.start()
    assert saver.held.wait(30)  # A's input checkpoint is stored; its step 0 is held
    act(graph)
    saver.release.set()
    a.join(30)
    (refused,) = errors
    assert len(refused.committed) == 1  # its input checkpoint
    assert refused.input_in_thread is in_thread
    expected = "do not send it again" if in_thread else "but its input is not in the conversation"
    assert expected in str(refused)
    assert graph.get_state(_config("A")).values["log"] == final  # "a" exactly once, never lost


class AHoldsFirstStep(ObjectStoreSaver):
    """:class:`HoldsFirstStep` for ``ainvoke``: holds the next ``"loop"`` ``aput``."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.armed = threading.Event()
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if self.armed.is_set() and metadata.get("source") == "loop":
            self.armed.clear()
            self.held.set()
            await asyncio.wait_for(self.release.wait(), 30)
        return await super().aput(config, checkpoint, metadata, new_versions)


async def test_the_async_twin_says_so_too_and_the_recipe_sends_the_dropped_input_again() -> None:
    saver = AHoldsFirstStep(MemoryStore())
    graph = _graph(saver)
    await graph.ainvoke({"log": ["hello"]}, _config("B"), durability="sync")
    saver.armed.set()
    errors: list[StaleWriterError] = []
    a = asyncio.create_task(asend(graph, "a", _config("A"), lambda exc, _: errors.append(exc)))
    await asyncio.wait_for(saver.held.wait(), 30)  # A's input checkpoint is stored
    await graph.ainvoke({"log": ["b"]}, _config("B"), durability="sync")  # new input drops it
    saver.release.set()
    await asyncio.wait_for(a, 30)
    (refused,) = errors
    assert len(refused.committed) == 1 and not refused.input_in_thread
    final = (await graph.aget_state(_config("A"))).values["log"]
    assert final == ["hello", "answered by B", "b", "answered by B", "a", "answered by A"]
