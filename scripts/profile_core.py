"""CPU the saver itself costs, next to LangGraph's ``InMemorySaver``.

Runs the 5-node graph of ``tests/checkpoint/test_request_counts.py`` on ``memory://`` (no network: what is
left is our own logic) and prints CPU milliseconds per operation, measured with
``time.process_time`` / ``time.thread_time`` over many iterations:

* ``invoke``: one whole ``graph.invoke`` on a fresh thread (1 get_tuple, 7 puts, 6 put_writes);
* ``ainvoke``: the same through ``graph.ainvoke`` (the async twins);
* ``turn 8``: one more ``invoke`` on a thread that already holds 7 turns (a 50-record head);
* ``put`` / ``put_writes`` / ``get_tuple``: the calls made inside those invokes, each timed on the
  thread that runs it (``time.thread_time``), averaged over every call;
* ``get_state``: ``graph.get_state(cfg)`` after a run (get_tuple of the latest plus LangGraph's
  own work).

Usage::

    .venv/bin/python scripts/profile_core.py            # figures
    .venv/bin/python scripts/profile_core.py -n 500     # more iterations
    .venv/bin/python scripts/profile_core.py --profile invoke   # cProfile of ours, top 30

The machine is shared: compare figures taken in the same conditions, and take the best of a few
runs (``--repeat``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import itertools
import operator
import pstats
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_handoff import ObjectStoreSaver


class Chat(TypedDict, total=False):
    messages: Annotated[list[dict[str, str]], operator.add]


def five_nodes() -> StateGraph:
    """The graph of ``tests/checkpoint/test_request_counts.py``."""
    g = StateGraph(Chat)
    names = [f"n{i}" for i in range(1, 6)]
    for n in names:
        g.add_node(n, lambda s, n=n: {"messages": [{"role": "ai", "content": f"{n} " + "x" * 100}]})
    g.add_edge(START, names[0])
    for a, b in itertools.pairwise(names):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g


class Timed:
    """Wraps a saver's methods so each call's CPU is added up (on the thread that runs it)."""

    METHODS = ("put", "put_writes", "get_tuple")

    def __init__(self, saver: Any) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.on = False
        for name in self.METHODS:
            setattr(saver, name, self._wrap(name, getattr(saver, name)))

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                if self.on:
                    self.cpu[name] += time.thread_time() - start
                    self.calls[name] += 1

        return timed

    def reset(self) -> None:
        self.cpu.clear()
        self.calls.clear()

    def per_call_ms(self, key: str) -> float:
        return 1000 * self.cpu[key] / max(1, self.calls[key])


def _cfg(i: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t{i}"}}


def _input(i: int) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"hi {i}"}]}


def measure(make: Callable[[], Any], n: int) -> dict[str, float]:
    """CPU ms per operation for one saver kind."""
    out: dict[str, float] = {}
    saver = make()
    timed = Timed(saver)
    graph = five_nodes().compile(checkpointer=saver)
    for i in range(20):  # warm up imports, caches, code paths
        graph.invoke(_input(i), _cfg(f"w{i}"))
    # invoke on fresh threads (default durability, as an application runs it)
    timed.reset()
    timed.on = True
    start = time.process_time()
    for i in range(n):
        graph.invoke(_input(i), _cfg(i))
    out["invoke"] = 1000 * (time.process_time() - start) / n
    timed.on = False
    for key in ("put", "put_writes", "get_tuple"):
        out[key] = timed.per_call_ms(key)

    # ainvoke on fresh threads
    async def arun() -> float:
        for i in range(20):
            await graph.ainvoke(_input(i), _cfg(f"aw{i}"))
        start = time.process_time()
        for i in range(n):
            await graph.ainvoke(_input(i), _cfg(f"a{i}"))
        return 1000 * (time.process_time() - start) / n

    out["ainvoke"] = asyncio.run(arun())
    # turn 8 of a conversation: the thread already holds 7 turns
    turns = max(20, n // 8)
    for i in range(turns):
        for k in range(7):
            graph.invoke(_input(k), _cfg(f"c{i}"))
    start = time.process_time()
    for i in range(turns):
        graph.invoke(_input(7), _cfg(f"c{i}"))
    out["turn 8"] = 1000 * (time.process_time() - start) / turns
    # get_state of a thread after one run
    start = time.process_time()
    for i in range(n):
        graph.get_state(_cfg(i))
    out["get_state"] = 1000 * (time.process_time() - start) / n
    return out


def _recorded_calls(saver: Any, turns: int) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """The saver calls ``turns`` invokes on one thread make (LangGraph runs them on other
    threads, where cProfile does not look), to replay them on the profiling thread."""
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    for name in Timed.METHODS:
        fn = getattr(saver, name)

        def record(*args: Any, _name: str = name, _fn: Callable[..., Any] = fn, **kwargs: Any) -> Any:
            calls.append((_name, args, kwargs))
            return _fn(*args, **kwargs)

        setattr(saver, name, record)
    graph = five_nodes().compile(checkpointer=saver)
    for k in range(turns):
        graph.invoke(_input(k), _cfg("recorded"), durability="sync")
    for name in Timed.METHODS:
        delattr(saver, name)
    return calls


def _replay(saver: Any, calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]], thread_id: str) -> None:
    for name, args, kwargs in calls:
        config = {**args[0], "configurable": {**args[0]["configurable"], "thread_id": thread_id}}
        getattr(saver, name)(config, *args[1:], **kwargs)


def profile(make: Callable[[], Any], what: str, n: int, top: int) -> None:
    saver = make()
    graph = five_nodes().compile(checkpointer=saver)
    for i in range(n):
        graph.invoke(_input(i), _cfg(i))
    prof = cProfile.Profile()
    if what in ("calls", "calls8"):
        turns = 1 if what == "calls" else 8
        calls = _recorded_calls(make(), turns)
        per_turn = len(calls) // turns
        for i in range(n):  # the first 7 turns unprofiled, then the last turn's calls
            _replay(saver, calls[:-per_turn], f"r{i}")
        prof.enable()
        for i in range(n):
            _replay(saver, calls[-per_turn:], f"r{i}")
        prof.disable()
    elif what == "invoke":
        prof.enable()
        for i in range(n):
            graph.invoke(_input(i), _cfg(f"p{i}"), durability="sync")
        prof.disable()
    elif what == "turn8":
        for i in range(n):
            for k in range(6):
                graph.invoke(_input(k), _cfg(i))
        prof.enable()
        for i in range(n):
            graph.invoke(_input(7), _cfg(i), durability="sync")
        prof.disable()
    elif what == "get_state":
        prof.enable()
        for i in range(n):
            graph.get_state(_cfg(i))
        prof.disable()
    elif what == "get_tuple":
        prof.enable()
        for i in range(n):
            saver.get_tuple(_cfg(i))
        prof.disable()
    else:
        raise SystemExit(f"unknown --profile {what!r}: calls, calls8, invoke, turn8, get_state or get_tuple")
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


SAVERS: dict[str, Callable[[], Any]] = {
    "InMemorySaver": InMemorySaver,
    "ObjectStoreSaver(memory://)": lambda: ObjectStoreSaver.from_url("memory://"),
}
ROWS = ("invoke", "ainvoke", "turn 8", "put", "put_writes", "get_tuple", "get_state")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=300, help="iterations per figure (default 300)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per saver; the best is kept (default 3)")
    parser.add_argument(
        "--profile", metavar="WHAT", help="cProfile ours: calls, calls8, invoke, turn8, get_state or get_tuple"
    )
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    if args.profile:
        profile(SAVERS["ObjectStoreSaver(memory://)"], args.profile, args.n, args.top)
        return
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.repeat):
        for name, make in SAVERS.items():
            got = measure(make, args.n)
            best[name] = {k: min(v, best.get(name, {}).get(k, v)) for k, v in got.items()}
    base, ours = best["InMemorySaver"], best["ObjectStoreSaver(memory://)"]
    print(f"CPU ms per operation, best of {args.repeat} x {args.n} (5-node graph, memory://)")
    print(f"{'':12} {'InMemorySaver':>14} {'ours':>9} {'ours - base':>12} {'ratio':>7}")
    for row in ROWS:
        b, o = base[row], ours[row]
        print(f"{row:12} {b:14.3f} {o:9.3f} {o - b:12.3f} {o / b if b else float('nan'):6.2f}x")


if __name__ == "__main__":
    main()
