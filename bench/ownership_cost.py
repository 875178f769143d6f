#!/usr/bin/env python3
"""What ownership costs per turn: client CPU and requests of a turn through ``SessionWorker``
against the same turn on the plain saver, on the same store, in the same run.

Each round runs T turns on N threads both ways, alternating which goes first; the figures are
the medians over the rounds, and the ratio is owned / plain. Client CPU is the process's
(``time.process_time``: every thread, the heartbeat's included). Requests are counted with
``CountingStore`` around the store.

    python bench/ownership_cost.py                         # memory:// and file://
    S3_ENDPOINT_URL=... AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... python bench/ownership_cost.py --s3

Not a test: it prints figures (docs/ownership.md, "What ownership costs").
"""

from __future__ import annotations

import argparse
import operator
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.ownership import SessionManager, SessionWorker
from langgraph_handoff.stores import LocalStore, MemoryStore, ObstoreS3Store, StoreBase
from langgraph_handoff.stores.counting import CountingStore


class S(TypedDict, total=False):
    messages: Annotated[list[str], operator.add]


def build(checkpointer: Any) -> Any:
    g = StateGraph(S)
    g.add_node("agent", lambda s: {"messages": [f"reply to {s['messages'][-1]}"]})
    g.add_edge(START, "agent")
    g.add_edge("agent", END)
    return g.compile(checkpointer=checkpointer)


def _turns(turn: Callable[[str, int], Any], threads: int, turns: int, store: CountingStore) -> tuple[float, float]:
    for i in range(threads):  # warm: every thread exists, every lease is held
        turn(f"t{i}", -1)
    store.reset()
    t0 = time.process_time()
    for n in range(turns):
        for i in range(threads):
            turn(f"t{i}", n)
    done = threads * turns
    return (time.process_time() - t0) / done * 1e6, store.requests / done


def plain(make: Callable[[], StoreBase], threads: int, turns: int) -> tuple[float, float]:
    store = CountingStore(make())
    graph = build(ObjectStoreSaver(store))
    return _turns(
        lambda t, n: graph.invoke({"messages": [f"u{n}"]}, {"configurable": {"thread_id": t}}), threads, turns, store
    )


def owned(make: Callable[[], StoreBase], threads: int, turns: int) -> tuple[float, float]:
    store = CountingStore(make())
    worker = SessionWorker(SessionManager(ObjectStoreSaver(store)), "bench", build, ttl=30)
    try:
        return _turns(lambda t, n: worker.invoke(t, {"messages": [f"u{n}"]}), threads, turns, store)
    finally:
        worker.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=20)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--s3", action="store_true", help="also on S3 (S3_ENDPOINT_URL), obstore transport")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-own-")
    stores: dict[str, Callable[[], StoreBase]] = {
        "memory://": MemoryStore,
        "file://": lambda: LocalStore(os.path.join(tmp, uuid.uuid4().hex)),
    }
    if args.s3:
        url = os.environ["S3_ENDPOINT_URL"]
        stores["s3 (obstore)"] = lambda: ObstoreS3Store(
            "lgh-bench", f"own-{uuid.uuid4().hex[:8]}", endpoint_url=url, create_bucket=True
        )
    print(f"{time.strftime('%Y-%m-%d')}: {args.threads} threads x {args.turns} turns, median of {args.rounds} rounds")
    print(f"{'store':<14} {'plain µs/turn':>14} {'owned µs/turn':>14} {'ratio':>6} {'plain req':>10} {'owned req':>10}")
    for name, make in stores.items():
        p_cpu, o_cpu, p_req, o_req = [], [], [], []
        for r in range(args.rounds):
            order = [(plain, p_cpu, p_req), (owned, o_cpu, o_req)]
            for fn, cpu, req in order if r % 2 == 0 else order[::-1]:
                c, q = fn(make, args.threads, args.turns)
                cpu.append(c)
                req.append(q)
        pc, oc = statistics.median(p_cpu), statistics.median(o_cpu)
        print(
            f"{name:<14} {pc:>14.0f} {oc:>14.0f} {oc / pc:>6.2f} "
            f"{statistics.median(p_req):>10.2f} {statistics.median(o_req):>10.2f}"
        )


if __name__ == "__main__":
    main()
