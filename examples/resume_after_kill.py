"""Offline demo: a worker dies mid-conversation, another process resumes the thread, and a stale
worker that raced it is refused instead of forking the conversation.

Everything runs on the embedded local store (a directory), no network, no LLM:

1. worker A takes a refund request, looks up the order and stops at a human-approval interrupt;
   then it is killed with SIGKILL, as a redeploy or OOM would;
2. worker C (a slow replica) resumes the same thread: the approval step is saved, then C starts
   the refund, but its payment call hangs;
3. worker B resumes the thread too, continues from C's saved approval, refunds and notifies;
4. C's payment call returns. C tries to save its step, but the thread has moved on:
   StaleWriterError. Its step is refused, so the conversation has one history, not two.

Run it with ``scripts/demo`` (or ``python examples/resume_after_kill.py``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import operator
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from langgraph_handoff import LocalStore, ObjectStoreSaver, StaleWriterError

THREAD = "customer-42/refund"


class Ticket(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    order: dict[str, Any]
    approved: bool


def build_graph(worker: str, go_file: str | None) -> StateGraph:
    def intake(s: Ticket) -> dict[str, Any]:
        return {"log": [f"[{worker}] intake: customer asks for a refund of order A-1001"]}

    def lookup(s: Ticket) -> dict[str, Any]:
        order = {"order_id": "A-1001", "amount": 59.90, "status": "delivered"}
        return {"order": order, "log": [f"[{worker}] lookup: order {order['order_id']} {order['status']}"]}

    def approval(s: Ticket) -> dict[str, Any]:
        decision = interrupt({"question": "Refund 59.90 for order A-1001?", "order": s["order"]})
        return {"approved": decision == "approve", "log": [f"[{worker}] approval: human said {decision!r}"]}

    def refund(s: Ticket) -> dict[str, Any]:
        print(f"REFUND-STARTED {worker}", flush=True)
        if go_file:  # a payment call that hangs until the demo lets it return
            while not os.path.exists(go_file):
                time.sleep(0.05)
        return {"log": [f"[{worker}] refund: 59.90 paid back"]}

    def notify(s: Ticket) -> dict[str, Any]:
        return {"log": [f"[{worker}] notify: customer told the refund is on its way"]}

    g = StateGraph(Ticket)
    for name, fn in [
        ("intake", intake),
        ("lookup", lookup),
        ("approval", approval),
        ("refund", refund),
        ("notify", notify),
    ]:
        g.add_node(name, fn)
    g.add_edge(START, "intake")
    g.add_edge("intake", "lookup")
    g.add_edge("lookup", "approval")
    g.add_edge("approval", "refund")
    g.add_edge("refund", "notify")
    g.add_edge("notify", END)
    return g


def worker(store_dir: str, name: str, action: str, go_file: str | None) -> int:
    """One worker process. ``action`` is ``start`` or ``resume``."""
    saver = ObjectStoreSaver(LocalStore(store_dir))
    graph = build_graph(name, go_file).compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": THREAD}}
    try:
        if action == "start":
            graph.invoke({"log": [f"[{name}] customer: 'I want my money back for A-1001'"]}, cfg, durability="sync")
            state = graph.get_state(cfg)
            print(
                "PAUSED " + json.dumps({"next": list(state.next), "asks": state.interrupts[0].value["question"]}),
                flush=True,
            )
            while True:  # a live worker holding the conversation, until it is killed
                time.sleep(1)
        result = graph.invoke(Command(resume="approve"), cfg, durability="sync")
        print("DONE " + json.dumps(result["log"][-2:]), flush=True)
        return 0
    except StaleWriterError as exc:
        print(f"REFUSED {exc}", flush=True)
        return 3


def _spawn(store_dir: str, name: str, action: str, go_file: str | None = None) -> subprocess.Popen[str]:
    cmd = [sys.executable, __file__, "--worker", name, "--action", action, "--store", store_dir]
    if go_file:
        cmd += ["--go-file", go_file]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def _wait_line(proc: subprocess.Popen[str], prefix: str) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(prefix):
            return line.strip()
    raise RuntimeError(f"worker exited (rc={proc.wait()}) before printing {prefix!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", help="store directory (default: a new temporary directory)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--action", help=argparse.SUPPRESS)
    parser.add_argument("--go-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.store, args.worker, args.action, args.go_file)

    store_dir = args.store or tempfile.mkdtemp(prefix="langgraph-handoff-demo-")
    go_file = os.path.join(store_dir, ".payment-returns")
    print(f"store: {store_dir}  (LocalStore, the embedded default)\nthread: {THREAD}\n")

    a = _spawn(store_dir, "worker-A", "start")
    print(f"1. worker A (pid {a.pid}): {_wait_line(a, 'PAUSED')}")
    a.send_signal(signal.SIGKILL)
    a.wait()
    print(f"   worker A killed with SIGKILL (exit {a.returncode}) while waiting for the human\n")

    c = _spawn(store_dir, "worker-C", "resume", go_file)
    _wait_line(c, "REFUND-STARTED")
    print(f"2. worker C (pid {c.pid}) resumed the thread and saved the approval; its payment call hangs")

    b = _spawn(store_dir, "worker-B", "resume")
    b_done = _wait_line(b, "DONE")
    b.wait()
    print(f"3. worker B (pid {b.pid}) resumed from C's saved step and finished: {b_done[5:]}")

    Path(go_file).touch()
    c_out = _wait_line(c, "REFUSED")
    c.wait()
    print(f"4. worker C's payment call returned; saving its step was refused (exit {c.returncode}):\n   {c_out[8:]}\n")

    saver = ObjectStoreSaver(LocalStore(store_dir))
    history = list(saver.list({"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}))
    chain_ok = all(
        h.parent_config
        and h.parent_config["configurable"]["checkpoint_id"] == nxt.config["configurable"]["checkpoint_id"]
        for h, nxt in itertools.pairwise(history)
    )
    latest = history[0].checkpoint["channel_values"]
    print(f"history: {len(history)} checkpoints, one unbroken chain: {chain_ok}")
    for line in latest["log"]:
        print("   " + line)
    ok = a.returncode == -signal.SIGKILL and b.returncode == 0 and c.returncode == 3 and chain_ok
    ok = ok and not any(line.startswith("[worker-C] refund") for line in latest["log"])
    print("\nresult:", "OK: resumed after the kill, the stale worker was refused, no fork" if ok else "UNEXPECTED")
    if not args.store:
        shutil.rmtree(store_dir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
