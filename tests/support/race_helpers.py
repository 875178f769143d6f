"""Racing real LangGraph runs on one thread, from threads or from separate OS processes.

Each racer runs the same 3-node graph on the same thread id. A barrier inside ``get_tuple`` makes
every racer read the thread's state *before any of them writes*, so all of them try to extend the
same checkpoint: a real race, not a lucky schedule. The barrier only orders reads; the writes race
freely through the store.

Outcome per racer: ``"won"``, ``"stale"`` (StaleWriterError) or ``"error: ..."``.
"""

from __future__ import annotations

import asyncio
import operator
import os
import threading
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_handoff import ObjectStoreSaver, StaleWriterError
from langgraph_handoff.errors import PreconditionFailedError, UnknownOutcomeError
from langgraph_handoff.stores import LocalStore, S3Store, StoreBase


class Chat(TypedDict, total=False):
    messages: Annotated[list[str], operator.add]


def build_graph(racer: str) -> StateGraph:
    g = StateGraph(Chat)
    for i in (1, 2, 3):
        g.add_node(f"n{i}", lambda s, i=i: {"messages": [f"{racer}:n{i}"]})
    g.add_edge(START, "n1")
    g.add_edge("n1", "n2")
    g.add_edge("n2", "n3")
    g.add_edge("n3", END)
    return g


class BarrierSaver(ObjectStoreSaver):
    """Waits on ``barrier`` after the first latest-state read of each racer."""

    def __init__(self, store: StoreBase, barrier: Any) -> None:
        super().__init__(store)
        self._barrier = barrier
        self._waited = threading.local()

    def _rendezvous(self, config: Any) -> None:
        if not config["configurable"].get("checkpoint_id") and not getattr(self._waited, "done", False):
            self._waited.done = True
            self._barrier.wait(timeout=60)

    def get_tuple(self, config: Any) -> Any:
        tup = super().get_tuple(config)
        self._rendezvous(config)
        return tup

    async def aget_tuple(self, config: Any) -> Any:
        """The async twin: each async racer runs its own event loop in its own thread, so
        blocking that loop on the barrier holds up no other racer."""
        tup = await super().aget_tuple(config)
        self._rendezvous(config)
        return tup


def make_store(spec: dict[str, Any]) -> StoreBase:
    if spec["kind"] == "local":
        return LocalStore(spec["path"])
    if spec["kind"] == "s3":
        return S3Store(spec["bucket"], prefix=spec["prefix"], endpoint_url=spec["endpoint_url"])
    if spec["kind"] == "obstore-s3":
        from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store

        return ObstoreS3Store(spec["bucket"], prefix=spec["prefix"], endpoint_url=spec["endpoint_url"])
    raise ValueError(spec)


def race_once(saver: ObjectStoreSaver, thread_id: str, racer: str, durability: str, graph: Any = None) -> str:
    graph = graph if graph is not None else build_graph(racer).compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread_id}}
    try:
        graph.invoke({"messages": [f"{racer}:in"]}, cfg, durability=durability)
        return "won"
    except StaleWriterError:
        return "stale"
    except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
        return f"error: {type(exc).__name__}: {exc}"


def process_racer(spec: dict[str, Any], thread_id: str, racer: str, durability: str, barrier: Any) -> tuple[str, int]:
    """Entry point for one OS process (multiprocessing, spawn)."""
    saver = BarrierSaver(make_store(spec), barrier)
    try:
        return race_once(saver, thread_id, racer, durability), os.getpid()
    finally:
        saver.close()


async def arace_once(saver: ObjectStoreSaver, thread_id: str, racer: str, durability: str, graph: Any = None) -> str:
    """:func:`race_once` through ``ainvoke``."""
    graph = graph if graph is not None else build_graph(racer).compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread_id}}
    try:
        await graph.ainvoke({"messages": [f"{racer}:in"]}, cfg, durability=durability)
        return "won"
    except StaleWriterError:
        return "stale"
    except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
        return f"error: {type(exc).__name__}: {exc}"


def race_threads(
    saver: ObjectStoreSaver, thread_id: str, racers: int, durability: str, *, api: str = "sync"
) -> dict[str, str]:
    """Run ``racers`` racer threads sharing ``saver``; returns racer -> outcome. With
    ``api="async"`` each thread runs ``ainvoke`` on an event loop of its own."""
    outcomes: dict[str, str] = {}
    # built here, one at a time: building a StateGraph reads type hints through ``inspect``,
    # whose ``ast.parse`` is not thread-safe on CPython 3.11 ("AST constructor recursion depth
    # mismatch" in one racer once, which then never reached the barrier)
    graphs = {f"r{i}": build_graph(f"r{i}").compile(checkpointer=saver) for i in range(racers)}

    def run(racer: str) -> None:
        if api == "async":
            outcomes[racer] = asyncio.run(arace_once(saver, thread_id, racer, durability, graphs[racer]))
        else:
            outcomes[racer] = race_once(saver, thread_id, racer, durability, graphs[racer])

    threads = [threading.Thread(target=run, args=(f"r{i}",)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def check_linear_history(saver: ObjectStoreSaver, thread_id: str) -> list[str]:
    """Assert the thread has one unbroken chain of checkpoints; return the final messages."""
    hist = list(saver.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}))
    ids = [h.config["configurable"]["checkpoint_id"] for h in hist]
    parents = [h.parent_config["configurable"]["checkpoint_id"] if h.parent_config else None for h in hist]
    assert parents[:-1] == ids[1:], f"history is not one chain (a fork): ids={ids} parents={parents}"
    assert parents[-1] is None
    latest = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    assert latest is not None
    return list(latest.checkpoint["channel_values"].get("messages", []))


def winner_messages(messages: list[str], prefix: list[str]) -> str:
    """The racer whose run produced everything after ``prefix``; asserts it is exactly one run."""
    tail = messages[len(prefix) :]
    assert messages[: len(prefix)] == prefix, f"seed state changed: {messages}"
    owners = {m.split(":")[0] for m in tail}
    assert len(owners) == 1, f"messages from several racers were mixed: {tail}"
    (owner,) = owners
    assert tail == [f"{owner}:in", f"{owner}:n1", f"{owner}:n2", f"{owner}:n3"], tail
    return owner


def race_cas(store: StoreBase, rounds: int, racers: int, *, api: str = "sync") -> dict[str, int]:
    """``racers`` threads compare-and-swap one key from the same ETag, each round behind a barrier;
    exactly one must win and its body be stored. Returns the outcome counts.

    With ``api="async"`` each racer thread runs its own event loop, opens its connection with a
    GET first, then waits on the barrier and sends its ``aput``, so the compare-and-swaps leave
    together."""
    tally = {"won": 0, "lost-412": 0, "unknown-5xx": 0}
    lock = threading.Lock()

    async def acas(i: int, key: str, etag: str, barrier: threading.Barrier) -> None:
        await store.aget(key)  # the connection is open before the start
        barrier.wait(timeout=60)
        await store.aput(key, f"racer-{i}".encode(), if_match=etag)

    def cas(i: int, key: str, etag: str, barrier: threading.Barrier) -> None:
        if api == "async":
            asyncio.run(acas(i, key, etag, barrier))
            return
        barrier.wait(timeout=60)
        store.put(key, f"racer-{i}".encode(), if_match=etag)

    for rnd in range(rounds):
        key = f"race-{api}/{rnd}"
        etag = store.put(key, b"start", if_none_match=True)
        barrier = threading.Barrier(racers)
        winners: list[int] = []

        def racer(
            i: int, key: str = key, etag: str = etag, barrier: threading.Barrier = barrier, winners: list[int] = winners
        ) -> None:
            try:
                cas(i, key, etag, barrier)
                outcome = "won"
            except PreconditionFailedError:
                outcome = "lost-412"
            except UnknownOutcomeError:
                outcome = "unknown-5xx"
            with lock:
                tally[outcome] += 1
                if outcome == "won":
                    winners.append(i)

        threads = [threading.Thread(target=racer, args=(i,)) for i in range(racers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(winners) == 1, f"round {rnd}: {len(winners)} winners"
        assert store.get(key).body == f"racer-{winners[0]}".encode()  # type: ignore[union-attr]
    return tally


def check_thread_race(
    store: StoreBase, *, fresh: bool, durability: str = "sync", rounds: int = 3, api: str = "sync"
) -> None:
    """4 racers run one thread at once behind a barrier, ``rounds`` times: one wins, the others
    are refused as stale, and the stored history is the winner's, linear. With ``fresh=False``
    the thread has a seeded checkpoint first, so the race is on a compare-and-swap of its head;
    with ``fresh=True`` it is on the create-only first write."""
    racers = 4
    for rnd in range(rounds):
        thread_id = f"race-{rnd}"
        saver = BarrierSaver(store, threading.Barrier(racers))
        prefix: list[str] = []
        if not fresh:
            race_once(ObjectStoreSaver(store), thread_id, "seed", "sync")
            prefix = check_linear_history(ObjectStoreSaver(store), thread_id)
        outcomes = race_threads(saver, thread_id, racers, durability, api=api)
        assert sorted(outcomes.values()) == ["stale"] * (racers - 1) + ["won"], outcomes
        winner = winner_messages(check_linear_history(ObjectStoreSaver(store), thread_id), prefix)
        assert outcomes[winner] == "won"


def race_create_only(store: StoreBase, rounds: int, racers: int) -> None:
    """``racers`` threads create one key behind a barrier, ``rounds`` times: exactly one wins,
    the others lose with ``PreconditionFailedError`` (whatever status the server used: 412, or
    Azure's 409 BlobAlreadyExists), and the winner's body is stored."""
    for rnd in range(rounds):
        key = f"create/{rnd}"
        barrier = threading.Barrier(racers)
        outcomes: list[str] = []

        def racer(i: int, key: str = key, barrier: threading.Barrier = barrier, outcomes: list[str] = outcomes) -> None:
            barrier.wait()
            try:
                store.put(key, f"racer-{i}".encode(), if_none_match=True)
                outcomes.append(f"won:{i}")
            except PreconditionFailedError:
                outcomes.append("lost")

        threads = [threading.Thread(target=racer, args=(i,)) for i in range(racers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [o for o in outcomes if o.startswith("won")]
        assert len(winners) == 1 and outcomes.count("lost") == racers - 1, outcomes
        assert store.get(key).body == f"racer-{winners[0][4:]}".encode()  # type: ignore[union-attr]
