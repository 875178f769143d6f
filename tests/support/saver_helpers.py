"""Small pieces shared by the saver's tests: a checkpoint written straight through ``put`` (no
graph), the id of a thread's latest checkpoint, tiny graphs over a large value, a store that
loses the answer to a head swap, a whole-store read check, a store whose blob writes fail, and
one that keeps every head written."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Annotated, Any

from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_handoff import MemoryStore, ObjectStoreSaver
from langgraph_handoff.errors import StoreUnavailableError, UnknownOutcomeError
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.stores import StoreBase
from langgraph_handoff.stores.base import Op, Put
from langgraph_handoff.stores.counting import CountingStore

#: the entry LangGraph's run loop adds to every config it hands a saver (its runtime): a put whose
#: config carries one is a run's, which the write rule holds to its lineage
AS_RUN: dict[str, Any] = {"__pregel_runtime": None}


def as_run(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` as a LangGraph run passes it to the saver."""
    return {**config, "configurable": {**config["configurable"], **AS_RUN}}


def put(saver: Any, thread: str, parent: str | None, step: int, *, ns: str = "", values: dict | None = None,
        versions: dict | None = None, new_versions: dict | None = None, source: str = "loop",
        cid: str | None = None, by_run: bool = True, **md: Any) -> str:  # fmt: skip
    """One checkpoint on ``thread`` (namespace ``ns``) after ``parent``, as LangGraph's loop would
    put it (``by_run=False``: as ``update_state`` or a direct API call would); ``md`` is extra
    metadata (``run_id=...``). Returns its id."""
    cid = cid or str(uuid6(clock_seq=step))
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns, **(AS_RUN if by_run else {})}
    if parent:
        conf["checkpoint_id"] = parent
    values = {"x": "v", "step": step} if values is None else values
    versions = {k: 1 for k in values} if versions is None else versions
    cp = {"v": 4, "id": cid, "ts": "", "channel_values": values, "channel_versions": versions,
          "versions_seen": {}, "updated_channels": None}  # fmt: skip
    md = {"source": source, "step": step, "parents": {}, **md}
    saver.put({"configurable": conf}, cp, md, versions if new_versions is None else new_versions)
    return cid


def latest_id(saver: Any, thread: str) -> str | None:
    tup = saver.get_tuple({"configurable": {"thread_id": thread}})
    return tup and tup.config["configurable"]["checkpoint_id"]


class Big(TypedDict, total=False):
    """A large value and a turn counter."""

    big: str
    n: int


class Body(TypedDict, total=False):
    """``Big`` once a migration renamed ``big`` to ``body``."""

    body: str
    n: int


class Doc(TypedDict, total=False):
    """A log every turn appends to, and a document most turns leave alone."""

    log: Annotated[list[str], operator.add]
    doc: str


def one_node_graph(schema: Any, saver: ObjectStoreSaver, node: Any) -> Any:
    """START -> ``node`` -> END over ``schema``, checkpointed by ``saver``."""
    g = StateGraph(schema)
    g.add_node("a", node)
    g.add_edge(START, "a")
    g.add_edge("a", END)
    return g.compile(checkpointer=saver)


def counting_graph(schema: Any, saver: ObjectStoreSaver) -> Any:
    """A one-node graph that only counts turns (``n``): the other channels are whatever the input
    sets."""
    return one_node_graph(schema, saver, lambda s: {"n": s.get("n", 0) + 1})


class LostSwapAnswer(CountingStore):
    """The head swap lands, a worker writes on top, and the answer to the swap is lost."""

    def __init__(self, inner: StoreBase, on_top: Any) -> None:
        super().__init__(inner)
        self.on_top, self.armed = on_top, True

    def run(self, op: Op) -> Any:
        if self.armed and isinstance(op, Put) and op.key == "heads/t/=" and op.if_match:
            self.armed = False
            super().run(op)
            self.on_top()
            raise UnknownOutcomeError(op.key, "HTTP 500")
        return super().run(op)


def reads_whole(store: StoreBase, saver: ObjectStoreSaver) -> None:
    """Every checkpoint and value of thread ``t`` reads, and verify finds no problem."""
    list(saver.list({"configurable": {"thread_id": "t"}}))
    assert verify_store(saver).problems == []


class FailingBlobs(MemoryStore):
    """A store whose blob writes fail while ``fail`` is set (think: a flaky network for the
    second request)."""

    fail = True

    def put(self, key: str, body: bytes, **kw: Any) -> str:
        if self.fail and "/b/" in key:
            raise StoreUnavailableError(f"injected failure writing {key}")
        return super().put(key, body, **kw)


class HeadsWritten(CountingStore):
    """Counts requests, and keeps the body of every head written, however it reaches the store
    (one ``put`` or a batch)."""

    def __init__(self, inner: StoreBase) -> None:
        super().__init__(inner)
        self.heads: list[bytes] = []

    def _note(self, ops: Sequence[Op]) -> None:
        super()._note(ops)
        self.heads += [op.body for op in ops if isinstance(op, Put) and op.key.startswith("heads/")]
