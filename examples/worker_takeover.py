"""Offline demo: a worker dies mid-conversation and another worker takes the session over.

1. worker A owns the session (a lease, epoch 1) and answers the first question;
2. on the second question it calls the refund tool, the refund goes out, and A is killed with
   SIGKILL before the tool's result is stored;
3. worker B (another process) runs the health check: once A's lease expires it takes the session
   over (epoch 2), finishes the interrupted turn (the refund is *not* sent again: the idempotency
   key absorbs the repeat) and answers the third question;
4. a late write from A's epoch is refused: OwnershipLostError, nothing stored.

Session context vs long-term memory: the conversation and its checkpoints belong to the session
and move with its lease; the customer's contact preference, learned by A in the first turn, is
long-term memory. It goes to a shared ``BaseStore`` (``ObjectStoreMemory``, on the same local
store), keyed by customer, not by thread, and B reads it from there: nothing about it travels in
the session or its handoff.

Everything runs on the embedded local store, no network, no LLM. ``scripts/demo`` runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import OwnershipLostError
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.ownership import SessionManager, SessionWorker

THREAD = "customer-7/chat"
TTL = 2.0
QUESTIONS = [
    "Where is order A-1001? And please only ever contact me by email.",
    "It arrived broken, please refund it.",
    "Thanks! How will you confirm it?",
]
ANSWERS = [
    "A-1001 was delivered yesterday. Noted: email only.",
    "Your refund of 59.90 is on its way.",
    "By email, as you prefer: a confirmation follows today.",
]
CUSTOMER = ("customers", "customer-7")  # long-term memory is keyed by customer, not by session


def build(checkpointer: Any, ledger: Path, die_in_refund: bool, memory: BaseStore) -> Any:
    def model(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
        last = state["messages"][-1]
        k = sum(1 for m in state["messages"] if isinstance(m, HumanMessage))
        if k == 1 and "email" in str(last.content):
            store.put(CUSTOMER, "contact", {"channel": "email"})  # a fact that outlives the session
        if k == 3:
            pref = store.get(CUSTOMER, "contact")
            channel = pref.value["channel"] if pref else "phone"
            text = f"By {channel}, as you prefer: a confirmation follows today."
            return {"messages": [AIMessage(text, id=f"ai-{k}")]}
        if isinstance(last, HumanMessage) and k == 2:
            call = {
                "name": "refund",
                "args": {"order": "A-1001", "amount": 59.9},
                "id": "refund-A-1001",
                "type": "tool_call",
            }
            return {"messages": [AIMessage("", tool_calls=[call], id=f"ai-call-{k}")]}
        return {"messages": [AIMessage(ANSWERS[k - 1] if k <= len(ANSWERS) else "...", id=f"ai-{k}")]}

    def refund(state: MessagesState) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        try:  # the payment provider's idempotency key: one refund per key, whoever asks
            fd = os.open(ledger / call["id"], os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            os.write(fd, json.dumps({"amount": call["args"]["amount"], "pid": os.getpid()}).encode())
            os.fsync(fd)
            os.close(fd)
            result = "refund sent"
        except FileExistsError:
            result = "refund already sent (idempotency key)"
        if die_in_refund:
            os.kill(os.getpid(), signal.SIGKILL)  # the worker dies before the result is stored
        return {"messages": [ToolMessage(result, tool_call_id=call["id"], id="tool-refund")]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("refund", refund)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", lambda s: "refund" if s["messages"][-1].tool_calls else END, ["refund", END])
    g.add_edge("refund", "model")
    return g.compile(checkpointer=checkpointer, store=memory)


def show(messages: list[Any], start: int = 0) -> None:
    for m in messages[start:]:
        if isinstance(m, HumanMessage):
            print(f"   user: {m.content}")
        elif isinstance(m, AIMessage) and m.content:
            print(f"   agent: {m.content}")
        elif isinstance(m, ToolMessage):
            print(f"   (tool: {m.content})")


def worker_a(store: Path, ledger: Path) -> None:
    sessions = SessionManager(ObjectStoreSaver.from_url(f"file://{store}"))
    memory = ObjectStoreMemory(sessions.saver.store)
    worker = SessionWorker(sessions, "worker-a", lambda cp: build(cp, ledger, True, memory), ttl=TTL)
    out = worker.invoke(THREAD, {"messages": [HumanMessage(QUESTIONS[0], id="q1")]})
    (store.parent / "lease-a.json").write_text(worker.leases[THREAD].model_dump_json())
    show(out["messages"])
    sys.stdout.flush()
    worker.invoke(THREAD, {"messages": [HumanMessage(QUESTIONS[1], id="q2")]})  # dies inside refund
    print("   (worker A survived: BUG)")


def worker_b(store: Path, ledger: Path, died_at: float) -> None:
    sessions = SessionManager(ObjectStoreSaver.from_url(f"file://{store}"))
    memory = ObjectStoreMemory(sessions.saver.store)
    worker = SessionWorker(sessions, "worker-b", lambda cp: build(cp, ledger, False, memory), ttl=TTL)
    while not (taken := worker.reclaim()):  # the health check, as a watchdog would run it
        time.sleep(0.1)
    lease = taken[0]
    print(
        f"   worker B took the session over {time.time() - died_at:.1f}s after worker A died "
        f"(epoch {lease.epoch}, was worker-a's; the lease lapses {TTL:g}s after A's last renewal)"
    )
    before = len(worker.graph_for(lease).get_state({"configurable": {"thread_id": THREAD}}).values["messages"])
    out = worker.invoke(THREAD, {"messages": [HumanMessage(QUESTIONS[2], id="q3")]})
    show(out["messages"], before)
    worker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--role", choices=["a", "b"], help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help="working directory (default: a temporary one)")
    parser.add_argument("--died-at", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    base = args.dir or Path(tempfile.mkdtemp(prefix="takeover-"))
    store, ledger = base / "store", base / "refunds"
    ledger.mkdir(parents=True, exist_ok=True)
    if args.role == "a":
        worker_a(store, ledger)
        return 0
    if args.role == "b":
        worker_b(store, ledger, args.died_at)
        return 0
    try:
        me = [sys.executable, __file__, "--dir", str(base)]
        print(f"1. worker A owns {THREAD!r} (lease epoch 1, ttl {TTL:g}s)")
        a = subprocess.run([*me, "--role", "a"], capture_output=True, text=True, timeout=120)
        died_at = time.time()
        print(a.stdout.rstrip())
        print(f"   user: {QUESTIONS[1]}")
        print(
            f"2. worker A called the refund tool and was killed with SIGKILL (exit {a.returncode}); "
            f"refunds sent so far: {len(list(ledger.iterdir()))}"
        )
        print("3. worker B's health check waits for A's lease to expire")
        b = subprocess.run([*me, "--role", "b", "--died-at", str(died_at)], capture_output=True, text=True, timeout=120)
        print(b.stdout.rstrip() or b.stderr)
        from langgraph_handoff.ownership import Lease

        old = Lease.model_validate_json((base / "lease-a.json").read_text())
        saver = ObjectStoreSaver.from_url(f"file://{store}")
        zombie = build(saver.with_lease(old), ledger, False, ObjectStoreMemory(saver.store))
        try:
            zombie.invoke(
                {"messages": [HumanMessage("late message", id="zombie")]},
                {"configurable": {"thread_id": THREAD}},
                durability="sync",
            )
            print("4. A's late write was accepted: BUG")
            return 1
        except OwnershipLostError as exc:
            print(f"4. a late write with worker A's lease was refused: {str(exc)[:110]}...")
        pref = ObjectStoreMemory.from_url(f"file://{store}").get(CUSTOMER, "contact")
        print(f"   long-term memory (shared store, keyed by customer): {pref.value if pref else None}")
        saver = ObjectStoreSaver.from_url(f"file://{store}")
        msgs = saver.get_tuple({"configurable": {"thread_id": THREAD}}).checkpoint["channel_values"]["messages"]
        asked = [m.content for m in msgs if isinstance(m, HumanMessage)]
        answered = [m.content for m in msgs if isinstance(m, AIMessage) and m.content]
        ok = asked == QUESTIONS and answered == ANSWERS and len(list(ledger.iterdir())) == 1 and a.returncode == -9
        print(
            f"result: {'OK' if ok else 'FAILED'}: {len(asked)} questions, {len(answered)} answers, "
            f"{len(list(ledger.iterdir()))} refund, nothing lost, repeated or written by the dead worker"
        )
        return 0 if ok else 1
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
