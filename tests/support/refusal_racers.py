"""Two processes sending user messages to one thread with the retry recipe of
docs/checkpointer.md ("When two runs race"), every round forced into a race: each sender reads
the thread's latest state, then waits at a barrier shared across processes before writing, so
both extend the same checkpoint and one of them is refused."""

from __future__ import annotations

import operator
import threading
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from langgraph_handoff import ObjectStoreSaver, StaleWriterError
from langgraph_handoff.stores import LocalStore

THREAD = {"configurable": {"thread_id": "customer-42"}}


class Chat(TypedDict):
    log: Annotated[list[str], operator.add]


class RoundSaver(ObjectStoreSaver):
    """Once armed, waits at ``barrier`` after its next read of the latest checkpoint."""

    def __init__(self, root: str, barrier: Any) -> None:
        super().__init__(LocalStore(Path(root)))
        self._barrier = barrier
        self._armed = threading.local()

    def arm(self) -> None:
        self._armed.on = True

    def get_tuple(self, config: Any) -> Any:
        tup = super().get_tuple(config)
        if getattr(self._armed, "on", False) and not config["configurable"].get("checkpoint_id"):
            self._armed.on = False
            self._barrier.wait(timeout=60)
        return tup


def _graph(saver: ObjectStoreSaver, who: str) -> Any:
    def model(state: Chat, config: RunnableConfig) -> dict[str, list[str]]:
        return {"log": [f"answered by {who}"]}

    return (
        StateGraph(Chat)
        .add_node("model", model)
        .add_edge(START, "model")
        .add_edge("model", END)
        .compile(checkpointer=saver)
    )


def send(graph: Any, text: str) -> tuple[Any, int]:
    """The recipe, looped: never sends ``text`` again once it is in the thread. Returns the
    state and how many refusals it met."""
    payload: Any = {"log": [text]}
    refused = 0
    while True:
        try:
            return graph.invoke(payload, THREAD, durability="sync"), refused
        except StaleWriterError as exc:
            refused += 1
            if exc.input_in_thread or payload is None:
                if not graph.get_state(THREAD).next:  # answered by the other run
                    return graph.get_state(THREAD).values, refused
                payload = None  # resume what is pending; never send the message again
            # else nothing of ours is there: send it again


def sender(root: str, who: str, rounds: int, barrier: Any) -> int:
    """Send ``rounds`` messages, each round racing the other process; the refusals met."""
    saver = RoundSaver(root, barrier)
    graph = _graph(saver, who)
    total = 0
    for i in range(rounds):
        saver.arm()
        _, refused = send(graph, f"{who}-{i}")
        total += refused
    return total
