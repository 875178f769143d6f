"""Real LangGraph runs that exercise a saver the way LangGraph itself calls it.

Each scenario drives a graph through one feature (interrupts inside subgraphs, update_state, time
travel, parallel tasks, Send fan-out, a failing node and its retry) and returns a *transcript*:
results, state snapshots and history, normalised so that two savers can be compared (checkpoint
ids and interrupt ids differ between runs; values, ``next`` and the shape of history must not).

Used by tests/checkpoint/test_graphs.py (memory and local stores) and integration_tests (S3).
"""

from __future__ import annotations

import asyncio
import operator
import sys
import threading
from collections.abc import Callable
from typing import Annotated, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, StateUpdate, interrupt
from typing_extensions import TypedDict

DURABILITIES = ("sync", "async", "exit")

#: LangGraph's ``interrupt()`` (and ``get_config()``) read the run's config from a contextvar,
#: which asyncio passes to a task only from Python 3.11 (``create_task(context=...)``): on 3.10 a
#: node that calls ``interrupt()`` under ``ainvoke`` raises "Called get_config outside of a
#: runnable context", with InMemorySaver too. LangGraph's limitation, not the saver's.
ASYNC_INTERRUPTS = sys.version_info >= (3, 11)
ASYNC_INTERRUPTS_REASON = (
    "LangGraph's interrupt() cannot run under ainvoke on Python 3.10 (contextvars are not passed "
    "to asyncio tasks before 3.11; InMemorySaver fails the same way)"
)


class State(TypedDict, total=False):
    trail: Annotated[list[str], operator.add]
    answer: str


class SubState(TypedDict, total=False):
    trail: Annotated[list[str], operator.add]
    sub_trail: Annotated[list[str], operator.add]
    answer: str


def _norm(value: Any) -> Any:
    """Interrupts and commands carry run-specific ids; keep what a user would see."""
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    if type(value).__name__ == "Interrupt":
        return ("Interrupt", _norm(value.value))
    return value


def _snapshot(st: Any) -> dict[str, Any]:
    return {
        "values": _norm(st.values),
        "next": list(st.next),
        "interrupts": [_norm(i.value) for i in st.interrupts],
        "source": st.metadata.get("source") if st.metadata else None,
        "step": st.metadata.get("step") if st.metadata else None,
        "subtasks": sorted(
            (t.name, _norm(t.state.values) if t.state is not None and hasattr(t.state, "values") else None)
            for t in st.tasks
        ),
    }


def _history_entry(h: Any) -> tuple[Any, ...]:
    return (
        h.metadata.get("source"),
        h.metadata.get("step"),
        _norm(h.values),
        list(h.next),
        h.parent_config is not None,
    )


def snapshot(graph: Any, config: dict[str, Any]) -> dict[str, Any]:
    return _snapshot(graph.get_state(config, subgraphs=True))


def history(graph: Any, config: dict[str, Any]) -> list[Any]:
    return [_history_entry(h) for h in graph.get_state_history(config)]


async def asnapshot(graph: Any, config: dict[str, Any]) -> dict[str, Any]:
    return _snapshot(await graph.aget_state(config, subgraphs=True))


async def ahistory(graph: Any, config: dict[str, Any]) -> list[Any]:
    return [_history_entry(h) async for h in graph.aget_state_history(config)]


# ------------------------------------------------------------------------------------------ graphs


def subgraph_with_interrupt() -> Any:
    """parent: a -> sub(s1 -> s2[interrupt]) -> c."""
    sub = StateGraph(SubState)
    sub.add_node("s1", lambda s: {"sub_trail": ["s1"]})

    def s2(s: SubState) -> dict[str, Any]:
        ok = interrupt("approve?")
        return {"sub_trail": [f"s2:{ok}"], "answer": f"approved={ok}"}

    sub.add_node("s2", s2)
    sub.add_edge(START, "s1")
    sub.add_edge("s1", "s2")
    sub.add_edge("s2", END)

    g = StateGraph(State)
    g.add_node("a", lambda s: {"trail": ["a"]})
    g.add_node("sub", sub.compile())
    g.add_node("c", lambda s: {"trail": ["c"]})
    g.add_edge(START, "a")
    g.add_edge("a", "sub")
    g.add_edge("sub", "c")
    g.add_edge("c", END)
    return g


def _signal_stored_writes(saver: BaseCheckpointSaver, events: dict[str, threading.Event]) -> None:
    """Set ``events[item]`` once the saver has *stored* a task write ``{"trail": [item]}``.

    LangGraph commits a finished task's writes in a callback after the node returns; if a sibling
    fails first, the loop may shut down before that commit (LangGraph logs "cannot schedule new
    futures after shutdown") and the writes are gone, with any saver. Waiting for the stored
    writes, not for the node function, makes the run the same for every saver.
    """
    put_writes, aput_writes = saver.put_writes, saver.aput_writes

    def note(writes: Any) -> None:
        for channel, value in writes:
            if channel == "trail":
                for item in value:
                    if item in events:
                        events[item].set()

    def hooked(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        put_writes(config, writes, task_id, task_path)
        note(writes)

    async def ahooked(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        await aput_writes(config, writes, task_id, task_path)
        note(writes)

    saver.put_writes = hooked  # type: ignore[method-assign]
    saver.aput_writes = ahooked  # type: ignore[method-assign]


def parallel_with_failure(saver: BaseCheckpointSaver, durability: str) -> Any:
    """x, y, z in parallel; y fails once (after x's and z's writes are stored), then succeeds.

    With ``durability="exit"`` nothing is stored mid-run, so there is no stored state to wait
    for: y then runs after x (sequentially) and z is left out, which keeps the run deterministic.
    """
    calls = {"y": 0}
    done = {"x": threading.Event(), "z": threading.Event()}
    parallel = durability != "exit"
    if parallel:
        _signal_stored_writes(saver, done)

    def y(s: State) -> dict[str, Any]:
        calls["y"] += 1
        if calls["y"] == 1:
            if parallel:
                for ev in done.values():
                    assert ev.wait(30), "sibling writes were never stored"
            raise ValueError("boom")
        return {"trail": ["y"]}

    g = StateGraph(State)
    g.add_node("x", lambda s: {"trail": ["x"]})
    g.add_node("y", y)
    g.add_node("z", lambda s: {"trail": ["z"]})
    g.add_node("join", lambda s: {"answer": ",".join(sorted(s["trail"]))})
    if parallel:
        for n in ("x", "y", "z"):
            g.add_edge(START, n)
            g.add_edge(n, "join")
    else:
        g.add_edge(START, "x")
        g.add_edge("x", "y")
        g.add_edge("y", "join")
    g.add_edge("join", END)
    return g


def send_fanout() -> Any:
    """Send API: one task per item, results reduced."""

    def route(s: State) -> list[Send]:
        return [Send("work", {"trail": [f"item{i}"]}) for i in range(4)]

    g = StateGraph(State)
    g.add_node("plan", lambda s: {"trail": ["plan"]})
    g.add_node("work", lambda s: {"trail": [s["trail"][-1].upper()]})
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", route, ["work"])
    g.add_edge("work", END)
    return g


# ---------------------------------------------------------------------------------------- scenarios


def scenario_interrupt_resume(saver: BaseCheckpointSaver, durability: str, thread: str) -> list[Any]:
    graph = subgraph_with_interrupt().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    out: list[Any] = []
    out.append(_norm(graph.invoke({"trail": ["in"]}, cfg, durability=durability)))
    out.append(snapshot(graph, cfg))
    out.append(_norm(graph.invoke(Command(resume="yes"), cfg, durability=durability)))
    out.append(snapshot(graph, cfg))
    out.append(history(graph, cfg))
    return out


def scenario_update_and_time_travel(saver: BaseCheckpointSaver, durability: str, thread: str) -> list[Any]:
    graph = subgraph_with_interrupt().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    out: list[Any] = []
    graph.invoke({"trail": ["in"]}, cfg, durability=durability)
    graph.invoke(Command(resume="yes"), cfg, durability=durability)
    # update_state as if node c had written it
    graph.update_state(cfg, {"answer": "edited"}, as_node="c")
    out.append(snapshot(graph, cfg))
    # time travel: back to the checkpoint before "sub" ran, replay from there (a fork)
    hist = list(graph.get_state_history(cfg))
    before_sub = next(h for h in hist if h.next == ("sub",))
    out.append(_norm(graph.invoke(None, before_sub.config, durability=durability)))
    out.append(snapshot(graph, cfg))
    out.append(_norm(graph.invoke(Command(resume="again"), cfg, durability=durability)))
    out.append(snapshot(graph, cfg))
    # update_state on an old checkpoint (explicit fork from the past)
    graph.update_state(before_sub.config, {"trail": ["forked"]})
    out.append(snapshot(graph, cfg))
    out.append(history(graph, cfg))
    return out


def scenario_parallel_error_retry(saver: BaseCheckpointSaver, durability: str, thread: str) -> list[Any]:
    graph = parallel_with_failure(saver, durability).compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    out: list[Any] = []
    try:
        graph.invoke({"trail": ["in"]}, cfg, durability=durability)
        out.append("no error")
    except ValueError as exc:
        out.append(f"raised {exc}")
    out.append(snapshot(graph, cfg))
    out.append(_norm(graph.invoke(None, cfg, durability=durability)))
    out.append(snapshot(graph, cfg))
    out.append(history(graph, cfg))
    return out


def scenario_send_fanout(saver: BaseCheckpointSaver, durability: str, thread: str) -> list[Any]:
    graph = send_fanout().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    out = [_norm(graph.invoke({"trail": ["in"]}, cfg, durability=durability))]
    out.append(snapshot(graph, cfg))
    out.append(_norm(graph.invoke({"trail": ["again"]}, cfg, durability=durability)))
    out.append(history(graph, cfg))
    return out


async def ascenario_interrupt_resume(saver: BaseCheckpointSaver, durability: str, thread: str) -> list[Any]:
    graph = subgraph_with_interrupt().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    out: list[Any] = []
    out.append(_norm(await graph.ainvoke({"trail": ["in"]}, cfg, durability=durability)))
    out.append(await asnapshot(graph, cfg))
    out.append(_norm(await graph.ainvoke(Command(resume="yes"), cfg, durability=durability)))
    out.append(await asnapshot(graph, cfg))
    await graph.aupdate_state(cfg, {"answer": "edited"}, as_node="c")
    out.append(await asnapshot(graph, cfg))
    out.append(await ahistory(graph, cfg))
    return out


async def ascenario_parallel_error_retry(saver: BaseCheckpointSaver, durability: str, thread: str) -> list[Any]:
    graph = parallel_with_failure(saver, durability).compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    out: list[Any] = []
    try:
        await graph.ainvoke({"trail": ["in"]}, cfg, durability=durability)
    except ValueError as exc:
        out.append(f"raised {exc}")
    out.append(await asnapshot(graph, cfg))
    out.append(_norm(await graph.ainvoke(None, cfg, durability=durability)))
    out.append(await ahistory(graph, cfg))
    return out


def ask_graph() -> Any:
    """a -> ask[interrupt] -> b."""
    g = StateGraph(State)
    g.add_node("a", lambda s: {"trail": ["a"]})
    g.add_node("ask", lambda s: {"answer": interrupt("?")})
    g.add_node("b", lambda s: {"trail": ["b:" + s.get("answer", "")]})
    g.add_edge(START, "a")
    g.add_edge("a", "ask")
    g.add_edge("ask", "b")
    g.add_edge("b", END)
    return g


def scenario_run_from_old_checkpoint(saver: BaseCheckpointSaver, durability: str, thread: str) -> list[Any]:
    """Runs addressed at a checkpoint the thread has moved past branch from it (time travel):
    with new input, with a resume of its old interrupt, and with ``None``."""
    graph = ask_graph().compile(checkpointer=saver)
    out: list[Any] = []
    actions = {
        "input": {"trail": ["in2"]},
        "resume": Command(resume="again"),
        "none": None,
    }
    for name, payload in actions.items():
        cfg = {"configurable": {"thread_id": f"{thread}-{name}"}}
        graph.invoke({"trail": ["in"]}, cfg, durability=durability)
        waiting = graph.get_state(cfg).config  # the checkpoint paused at "ask"
        graph.invoke(Command(resume="yes"), cfg, durability=durability)  # the thread moves on
        out.append(_norm(graph.invoke(payload, waiting, durability=durability)))
        out.append(snapshot(graph, cfg))
        out.append(history(graph, cfg))
    return out


def scenario_update_state_as_input_copy_and_bulk(saver: BaseCheckpointSaver, durability: str, thread: str) -> list[Any]:
    """``update_state`` as ``__input__`` (on the latest checkpoint and on a superseded one),
    as ``__copy__``, and ``bulk_update_state`` from a superseded checkpoint whose first superstep
    is ``__input__``: explicit writes, each accepted wherever it starts."""
    graph = ask_graph().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    out: list[Any] = []
    graph.invoke({"trail": ["in"]}, cfg, durability=durability)
    graph.invoke(Command(resume="yes"), cfg, durability=durability)
    past = next(h for h in graph.get_state_history(cfg) if h.next == ("ask",)).config
    graph.update_state(cfg, {"trail": ["latest-as-input"]}, as_node="__input__")
    out.append(snapshot(graph, cfg))
    out.append(_norm(graph.invoke(None, cfg, durability=durability)))
    graph.update_state(past, {"trail": ["past-as-input"]}, as_node="__input__")
    out.append(snapshot(graph, cfg))
    graph.update_state(past, None, as_node="__copy__")
    out.append(snapshot(graph, cfg))
    graph.bulk_update_state(
        past, [[StateUpdate({"trail": ["bulk-input"]}, "__input__")], [StateUpdate({"trail": ["bulk-a"]}, "a")]]
    )
    out.append(snapshot(graph, cfg))
    out.append(_norm(graph.invoke(None, cfg, durability=durability)))
    out.append(history(graph, cfg))
    return out


class Counted(TypedDict, total=False):
    seen: Annotated[list[str], operator.add]
    rounds: int


def stateful_subgraph_graph(loop: bool = False) -> Any:
    """parent: p -> sub (compile(checkpointer=True): its state persists across invocations of the
    thread) [-> p again while ``loop`` and fewer than 2 rounds]."""
    sub = StateGraph(Counted)
    sub.add_node("s", lambda s: {"seen": [f"s{len(s.get('seen', []))}"]})
    sub.add_edge(START, "s")
    g = StateGraph(Counted)
    g.add_node("p", lambda s: {"rounds": s.get("rounds", 0) + 1})
    g.add_node("sub", sub.compile(checkpointer=True))
    g.add_edge(START, "p")
    g.add_edge("p", "sub")
    if loop:
        g.add_conditional_edges("sub", lambda s: "p" if s["rounds"] % 2 else END, ["p", END])
    return g


def scenario_stateful_subgraph_replay_and_fork(saver: BaseCheckpointSaver, durability: str, thread: str) -> list[Any]:
    """Time travel through a stateful subgraph: LangGraph loads the subgraph's state as of the
    replay point with ``list(before=...)`` and writes on from that superseded checkpoint. The
    subgraph must run again, from its old state, on a replay, on a fork, and in a loop. (The two
    runs that make the history are durable per step: with ``exit`` there is no step to go back to.)"""
    out: list[Any] = []
    for loop in (False, True):
        graph = stateful_subgraph_graph(loop).compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": f"{thread}-{loop}"}}
        graph.invoke({"seen": []}, cfg, durability="sync")
        graph.invoke({"seen": []}, cfg, durability="sync")
        second = next(h for h in graph.get_state_history(cfg) if h.next == ("p",))  # the 2nd run's start
        out.append(_norm(graph.invoke(None, second.config, durability=durability)))  # replay
        out.append(snapshot(graph, cfg))
        forked = graph.update_state(second.config, {"seen": ["forked"]})
        out.append(_norm(graph.invoke(None, forked, durability=durability)))  # fork
        out.append(snapshot(graph, cfg))
        out.append(history(graph, cfg))
    return out


async def ascenario_stateful_subgraph_replay_and_fork(
    saver: BaseCheckpointSaver, durability: str, thread: str
) -> list[Any]:
    """The async twin: LangGraph loads the replayed subgraph's state with ``alist(before=...)``."""
    out: list[Any] = []
    for loop in (False, True):
        graph = stateful_subgraph_graph(loop).compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": f"{thread}-{loop}"}}
        await graph.ainvoke({"seen": []}, cfg, durability="sync")
        await graph.ainvoke({"seen": []}, cfg, durability="sync")
        starts = [h async for h in graph.aget_state_history(cfg) if h.next == ("p",)]
        second = starts[0]  # the 2nd run's start
        out.append(_norm(await graph.ainvoke(None, second.config, durability=durability)))
        out.append(await asnapshot(graph, cfg))
        forked = await graph.aupdate_state(second.config, {"seen": ["forked"]})
        out.append(_norm(await graph.ainvoke(None, forked, durability=durability)))
        out.append(await asnapshot(graph, cfg))
        out.append(await ahistory(graph, cfg))
    return out


SYNC_SCENARIOS: dict[str, Callable[[BaseCheckpointSaver, str, str], list[Any]]] = {
    "interrupt_resume": scenario_interrupt_resume,
    "update_and_time_travel": scenario_update_and_time_travel,
    "parallel_error_retry": scenario_parallel_error_retry,
    "send_fanout": scenario_send_fanout,
    "run_from_old_checkpoint": scenario_run_from_old_checkpoint,
    "update_state_as_input_copy_and_bulk": scenario_update_state_as_input_copy_and_bulk,
    "stateful_subgraph_replay_and_fork": scenario_stateful_subgraph_replay_and_fork,
}

ASYNC_SCENARIOS = {
    "interrupt_resume": ascenario_interrupt_resume,
    "parallel_error_retry": ascenario_parallel_error_retry,
    "stateful_subgraph_replay_and_fork": ascenario_stateful_subgraph_replay_and_fork,
}


def check_runs_match_inmemory(saver: BaseCheckpointSaver) -> None:
    """Every sync scenario gives the same states and history on ``saver`` as on InMemorySaver."""
    from langgraph.checkpoint.memory import InMemorySaver

    for name, run in SYNC_SCENARIOS.items():
        assert run(saver, "sync", f"g-{name}") == run(InMemorySaver(), "sync", f"g-{name}"), name


async def acheck_runs_match_inmemory(saver: BaseCheckpointSaver) -> None:
    """The async scenarios, likewise."""
    from langgraph.checkpoint.memory import InMemorySaver

    for name, run in ASYNC_SCENARIOS.items():
        assert await run(saver, "async", f"a-{name}") == await run(InMemorySaver(), "async", f"a-{name}"), name


def run_async(coro: Any) -> Any:
    return asyncio.run(coro)


def with_subgraph(checkpointer: Any, state: Any, key: str) -> Any:
    """A graph whose one node is a compiled subgraph appending "x" to ``key``: it gives a thread
    a second checkpoint namespace."""
    inner = StateGraph(state)
    inner.add_node("x", lambda s: {key: ["x"]})
    inner.add_edge(START, "x")
    inner.add_edge("x", END)
    outer = StateGraph(state)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    outer.add_edge("sub", END)
    return outer.compile(checkpointer=checkpointer)
