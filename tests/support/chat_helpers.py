"""A one-node chat graph over any saver, for tests of how a growing conversation is stored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph


def answering_chat(saver: Any, state: type, text: Callable[[int, str], str]) -> Any:
    """START -> answer -> END over ``state`` (a ``messages`` channel): the answer to turn N is
    ``text(N, "ai")`` with id ``aN``."""

    def answer(values: dict) -> dict:
        turn = len(values["messages"]) // 2 + 1
        return {"messages": [AIMessage(content=text(turn, "ai"), id=f"a{turn}")]}

    g = StateGraph(state)
    g.add_node("answer", answer)
    g.add_edge(START, "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=saver)


def cfg(thread: str = "t") -> dict:
    return {"configurable": {"thread_id": thread}}


def history(graph: Any, thread: str = "t") -> list[tuple[Any, Any]]:
    """(step, values) of every checkpoint, newest first (ids differ from saver to saver)."""
    return [(s.metadata["step"], s.values) for s in graph.get_state_history(cfg(thread))]


def check_copy_prune_delete(store: Any, saver: Any, build: Callable[[Any], Any]) -> None:
    """Thread ``t``'s latest state survives ``copy_thread`` to ``t2``, ``prune`` of ``t`` and
    then ``delete_thread`` of ``t`` (read back by fresh savers, which hold nothing in memory),
    and ``verify`` finds nothing wrong after each. ``build(saver)`` compiles the graph."""
    from langgraph_handoff import ObjectStoreSaver
    from langgraph_handoff.inspection import verify_store

    want = build(saver).get_state(cfg()).values
    saver.copy_thread("t", "t2")
    saver.prune(["t"])
    assert build(ObjectStoreSaver(store)).get_state(cfg()).values == want
    assert build(ObjectStoreSaver(store)).get_state(cfg("t2")).values == want
    assert verify_store(ObjectStoreSaver(store)).problems == []
    saver.delete_thread("t")
    assert build(ObjectStoreSaver(store)).get_state(cfg("t2")).values == want
    assert verify_store(ObjectStoreSaver(store)).problems == []
