"""ObjectStoreMemory: long-term memory as a LangGraph BaseStore on the object store."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore

from langgraph_handoff.errors import InvalidInputError
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.stores import MemoryStore


@pytest.fixture
def memory(store) -> ObjectStoreMemory:  # type: ignore[no-untyped-def]
    return ObjectStoreMemory(store)


def test_put_get_update_delete(memory: ObjectStoreMemory) -> None:
    ns = ("users", "customer-7")
    memory.put(ns, "prefs", {"contact": "email"})
    first = memory.get(ns, "prefs")
    assert first is not None and first.value == {"contact": "email"} and first.namespace == ns
    memory.put(ns, "prefs", {"contact": "phone"})
    second = memory.get(ns, "prefs")
    assert second.value == {"contact": "phone"} and second.created_at == first.created_at
    assert second.updated_at >= first.updated_at
    memory.delete(ns, "prefs")
    assert memory.get(ns, "prefs") is None
    assert memory.get(ns, "never") is None


def test_search_by_prefix_and_filter(memory: ObjectStoreMemory) -> None:
    memory.put(("users", "a"), "prefs", {"contact": "email", "lang": "he"})
    memory.put(("users", "b"), "prefs", {"contact": "phone", "lang": "zh"})
    memory.put(("orgs", "acme"), "prefs", {"contact": "email"})
    assert {i.namespace for i in memory.search(("users",))} == {("users", "a"), ("users", "b")}
    assert [i.namespace for i in memory.search(("users",), filter={"contact": "email"})] == [("users", "a")]
    assert len(memory.search(())) == 3 and len(memory.search((), limit=2)) == 2
    assert len(memory.search((), offset=2)) == 1
    # without an index a query is ignored, as LangGraph's InMemoryStore ignores it (no score)
    found = memory.search(("users",), query="who likes email", filter={"contact": "email"})
    assert [(i.namespace, i.score) for i in found] == [(("users", "a"), None)]


def test_memory_filter_operators() -> None:
    """Memory search understands comparison operators instead of matching them literally.

    Found by an adversarial review of session ownership; fails before commit 596ef7d."""
    memory = ObjectStoreMemory(MemoryStore())
    memory.put(("users", "u1"), "p", {"a": 1})
    memory.put(("users", "u2"), "p", {"a": 2})
    assert [i.namespace for i in memory.search(("users",), filter={"a": {"$gt": 1}})] == [("users", "u2")]
    assert [i.namespace for i in memory.search(("users",), filter={"a": {"$ne": 1}})] == [("users", "u2")]
    assert len(memory.search(("users",), filter={"a": {"$gte": 1, "$lte": 2}})) == 2
    with pytest.raises(InvalidInputError, match="unsupported filter operators"):
        memory.search(("users",), filter={"a": {"$regex": "x"}})


def test_list_namespaces(memory: ObjectStoreMemory) -> None:
    for ns in [("users", "a", "prefs"), ("users", "b", "prefs"), ("orgs", "acme", "notes")]:
        memory.put(ns, "k", {"x": 1})
    assert memory.list_namespaces() == [("orgs", "acme", "notes"), ("users", "a", "prefs"), ("users", "b", "prefs")]
    assert memory.list_namespaces(prefix=("users",)) == [("users", "a", "prefs"), ("users", "b", "prefs")]
    assert memory.list_namespaces(suffix=("notes",)) == [("orgs", "acme", "notes")]
    assert memory.list_namespaces(prefix=("users", "*", "prefs")) == [("users", "a", "prefs"), ("users", "b", "prefs")]
    assert memory.list_namespaces(max_depth=1) == [("orgs",), ("users",)]


def test_any_namespace_and_key_are_stored_safely(memory: ObjectStoreMemory) -> None:
    ns = ("users", "a/b %2e", "מרים", "x" * 300)  # LangGraph itself refuses periods in labels
    memory.put(ns, "../../etc/passwd", {"ok": True})
    assert memory.get(ns, "../../etc/passwd").value == {"ok": True}
    assert ns in memory.list_namespaces()


@pytest.mark.parametrize("bad", [(("a",), "", {})])
def test_bad_keys_are_typed_errors(memory: ObjectStoreMemory, bad: tuple) -> None:
    with pytest.raises(InvalidInputError):
        memory.put(*bad)


def test_bad_namespaces_and_values_are_refused(memory: ObjectStoreMemory) -> None:
    from langgraph.store.base import InvalidNamespaceError

    with pytest.raises(InvalidNamespaceError):  # LangGraph's own check runs first
        memory.put((), "k", {})
    with pytest.raises(InvalidInputError):
        memory.batch([__import__("langgraph.store.base", fromlist=["PutOp"]).PutOp(("a",), "k", ["x"])])


async def test_async_twins(memory: ObjectStoreMemory) -> None:
    await memory.aput(("u",), "k", {"v": 1})
    assert (await memory.aget(("u",), "k")).value == {"v": 1}
    assert [i.key for i in await memory.asearch(("u",))] == ["k"]


def test_two_workers_share_memory_through_the_store(store) -> None:  # type: ignore[no-untyped-def]
    """What a preference learned by one worker is worth to another: the store is the only link."""

    def build(memory: BaseStore) -> Any:
        def remember(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
            text = state["messages"][-1].content
            if text.startswith("remember "):
                store.put(("users", "c7"), "prefs", {"note": text.removeprefix("remember ")})
                return {"messages": [("ai", "noted")]}
            item = store.get(("users", "c7"), "prefs")
            return {"messages": [("ai", item.value["note"] if item else "nothing known")]}

        g = StateGraph(MessagesState)
        g.add_node("remember", remember)
        g.add_edge(START, "remember")
        g.add_edge("remember", END)
        return g.compile(store=memory)

    build(ObjectStoreMemory(store)).invoke({"messages": [("user", "remember prefers email")]})
    other = build(ObjectStoreMemory(store))  # another worker, another conversation
    assert (
        other.invoke({"messages": [("user", "how should we contact them?")]})["messages"][-1].content == "prefers email"
    )
