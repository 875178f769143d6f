"""A one-node graph for ``langgraph dev``: it greets by name in the style kept in the store.

The server gives the graph its checkpointer and store (``langgraph.json``), so ``compile()`` takes
neither. Each run appends one greeting; the style comes from the long-term memory item
``("settings",) / "style"``, written through the server's ``/store`` API, so a run shows that
nodes and the API see the same ``ObjectStoreMemory``.
"""

from __future__ import annotations

import operator
from typing import Annotated

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict


class State(TypedDict):
    name: str
    greetings: Annotated[list[str], operator.add]


async def greet(state: State, runtime: Runtime) -> dict[str, list[str]]:
    style = None
    if runtime.store is not None:
        style = await runtime.store.aget(("settings",), "style")
    word = style.value["word"] if style is not None else "Hello"
    return {"greetings": [f"{word}, {state['name']}!"]}


graph = StateGraph(State).add_node("greet", greet).add_edge(START, "greet").add_edge("greet", END).compile()
