"""Two processes sending user messages to one thread with the retry recipe of
docs/checkpointer.md ("When two runs race"), every round forced into a race: each sender reads
the thread's latest state, then waits at a barrier shared across processes before writing, so
both extend the same checkpoint and one of them is refused."""

from __future__ import annotations

import operator
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from langgraph_handoff import ObjectStoreSaver, StaleWriterError
from langgraph_handoff.stores import LocalStore
from tests.support.retry_recipe import send

THREAD = {"configurable": {"thread_id": "customer-42"}}


class Chat(TypedDict):
    log: Annotated[list[str], operator.add]


class RoundSaver(ObjectStoreSaver):
    """Forces one round's race, through ``barrier`` (shared with the other process):

    * ``"same read"``: waits at the barrier after the next read of the latest checkpoint, so both
      processes continue the same checkpoint and one input put loses;
    * ``"hold"``: waits twice after the run's input checkpoint is stored, before its first step is:
      the other process acts on top of that input checkpoint in between;
    * ``"signal input"``: waits once right after the run's input checkpoint is stored.

    The mode sits in a dict, not thread-local and not a plain attribute: LangGraph makes puts from
    its own threads, and under ``LANGGRAPH_STRICT_MSGPACK`` it runs a copy of the saver (its
    ``with_allowlist``) that must see the mode armed on this one."""

    def __init__(self, root: str, barrier: Any) -> None:
        super().__init__(LocalStore(Path(root)))
        self._barrier = barrier
        self._round: dict[str, str | None] = {"mode": None}

    def arm(self, mode: str) -> None:
        self._round["mode"] = mode

    def _take(self, mode: str) -> bool:
        """Whether ``mode`` is armed; disarms it."""
        if self._round["mode"] != mode:
            return False
        self._round["mode"] = None
        return True

    def get_tuple(self, config: Any) -> Any:
        tup = super().get_tuple(config)
        if not config["configurable"].get("checkpoint_id") and self._take("same read"):
            self._barrier.wait(timeout=60)
        return tup

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if metadata.get("source") == "loop" and self._take("hold"):
            self._barrier.wait(timeout=60)  # our input checkpoint is stored
            self._barrier.wait(timeout=60)  # the other process acted on top of it
        out = super().put(config, checkpoint, metadata, new_versions)
        if metadata.get("source") == "input" and self._take("signal input"):
            self._barrier.wait(timeout=60)
        return out


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


def _kind(exc: StaleWriterError, *, resuming: bool) -> str:
    if resuming:
        return "refused while resuming"
    if exc.input_in_thread:
        return "input in the thread"
    return "input stored but dropped" if exc.committed else "nothing stored"


#: how each round races, in turn: both continue the same checkpoint; the holder's input checkpoint
#: is stored and the other process brings new input on top of it (LangGraph drops the holder's
#: input: it must send it again); or the other process resumes from it (its turn answers the
#: holder's input: it must not send it again)
MODES = ("same read", "new input on top", "resume on top")


def sender(root: str, who: str, rounds: int, barrier: Any) -> tuple[dict[str, int], list[str]]:
    """Play ``rounds`` rounds against the other process; what the refusals said, and the
    messages sent."""
    saver = RoundSaver(root, barrier)
    graph = _graph(saver, who)
    seen: Counter[str] = Counter()
    sent: list[str] = []
    for i in range(rounds):
        mode = MODES[i % len(MODES)]
        holder = "AB"[(i // len(MODES)) % 2]
        text = f"{who}-{i}"
        barrier.wait(timeout=60)  # the previous round is over in both processes
        if mode == "same read":
            saver.arm("same read")
        elif who == holder:
            saver.arm("hold")
        else:
            barrier.wait(timeout=60)  # the holder's input checkpoint is stored
            if mode == "resume on top":
                graph.invoke(None, THREAD, durability="sync")
                barrier.wait(timeout=60)
                continue  # this round, only the holder sends a message
            saver.arm("signal input")
        send(graph, text, THREAD, lambda exc, resuming: seen.update([_kind(exc, resuming=resuming)]))
        sent.append(text)
    return dict(seen), sent
