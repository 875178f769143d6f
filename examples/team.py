"""Offline demo: an agent team whose worker is killed mid-turn, and nothing is lost or doubled.

1. A lead and two teammates (alice the coder, bob the tester) live on the embedded local store.
   Each is a LangGraph thread with its own memory; the roster and one object per message sit
   beside the checkpoints. A person gives the lead a task with ``Team.send``.
2. Worker A (a process) runs the members. The lead delegates with its ``send_message`` tool: one
   message to alice, one to bob. The sends are recorded in the lead's checkpoint and delivered only
   after it committed (a transactional outbox).
3. Alice's turn starts (her input checkpoint stores the message *and* its ack in one
   compare-and-swap) and worker A is killed with SIGKILL inside it.
4. Worker B (another process) takes every member over when A's lease expires, finishes alice's
   interrupted turn without ingesting her message again, and the team carries on: each teammate's
   final answer goes back to the lead as an automatic reply, and the lead reports.
5. The check: every message sent was ingested exactly once, by its recipient, in order.

No network, no LLM: the models are scripted. ``scripts/demo`` runs it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamState, TeamWorker, team_tools
from langgraph_handoff.testing import ScriptedChatModel

TEAM = "release-42"
TTL = 2.0
TASK = "The nightly build fails on test_io.py. Get it fixed and covered."


def _incoming(messages: list[BaseMessage]) -> list[BaseMessage]:
    out = []
    for m in reversed(messages):
        if m.type != "human":
            break
        out.append(m)
    return out[::-1]


class LeadModel(ScriptedChatModel):
    """Delegates the task, then waits for both teammates and reports."""

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        if messages[-1].type == "tool":
            return AIMessage("Delegated to alice and bob; waiting for their answers.")
        if any(m.name == "human" for m in _incoming(messages)):
            return AIMessage("", tool_calls=[
                {"name": "send_message", "id": "delegate-alice", "type": "tool_call",
                 "args": {"to": "alice", "content": "Fix the failure in test_io.py (a temp-dir race)."}},
                {"name": "send_message", "id": "delegate-bob", "type": "tool_call",
                 "args": {"to": "bob", "content": "Write a regression test for the test_io.py race."}},
            ])  # fmt: skip
        answered = {m.name for m in messages if m.type == "human" and m.name in ("alice", "bob")}
        if answered == {"alice", "bob"}:
            return AIMessage("Release 42 is unblocked: alice fixed test_io.py and bob added a regression test.")
        return AIMessage(f"Noted. Still waiting for {', '.join(sorted({'alice', 'bob'} - answered))}.")


def lead_build(team: Team) -> Any:
    def build(checkpointer: Any) -> Any:
        tools = team_tools(team, "lead")
        model = LeadModel(["(scripted)"]).bind_tools(tools)
        g = StateGraph(TeamState)
        g.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
        g.add_node("tools", ToolNode(tools))
        g.add_edge(START, "model")
        g.add_conditional_edges("model", tools_condition, ["tools", END])
        g.add_edge("tools", "model")
        return g.compile(checkpointer=checkpointer)

    return build


def mate_build(answer: str, die_marker: Path | None) -> Any:
    def build(checkpointer: Any) -> Any:
        def work(state: TeamState) -> dict[str, Any]:
            if die_marker is not None and not die_marker.exists():
                die_marker.touch()
                print("  worker A: killed with SIGKILL inside alice's turn", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            return {"messages": [AIMessage(answer)]}

        g = StateGraph(TeamState)
        g.add_node("work", work)
        g.add_edge(START, "work")
        g.add_edge("work", END)
        return g.compile(checkpointer=checkpointer)

    return build


def builds(team: Team, workdir: Path, *, die: bool) -> dict[str, Any]:
    return {
        "lead": lead_build(team),
        "coder": mate_build("Fixed: test_io.py now uses its own tmp_path.", workdir / "alice-died" if die else None),
        "tester": mate_build("Added test_io_parallel.py: 20 concurrent writers, passes.", None),
    }


def run_worker(store: Path, owner: str, die: bool) -> int:
    team = Team(ObjectStoreSaver.from_url(f"file://{store}"), TEAM)
    worker = TeamWorker(team, owner, builds(team, store.parent, die=die), ttl=TTL, poll=0.05, max_poll=0.5)
    done = store.parent / "done"
    with worker.handle_sigterm():
        worker.run(until=done.exists)
    return 0


def conversation(saver: ObjectStoreSaver, team: Team, name: str) -> list[BaseMessage]:
    tup = saver.get_tuple({"configurable": {"thread_id": team.thread_id(name)}})
    return list(tup.checkpoint["channel_values"]["messages"]) if tup else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--die", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help="working directory (default: a temporary one)")
    args = parser.parse_args(argv)
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="lgh-team-"))
    store = workdir / "store"
    if args.worker:
        return run_worker(store, args.worker, args.die)

    workdir.mkdir(parents=True, exist_ok=True)
    saver = ObjectStoreSaver.from_url(f"file://{store}")
    team = Team(saver, TEAM)
    team.spawn("lead", role="lead", description="plans the release and delegates")
    team.spawn("alice", role="coder", description="fixes code")
    team.spawn("bob", role="tester", description="writes tests")
    print(f"team {TEAM!r} on {store}: " + ", ".join(f"{m.name} ({m.role})" for m in team.members()))
    task = team.send("lead", TASK, sender="human", idempotency_key="nightly-build")
    print(f"human -> lead #{task.id}: {TASK}")

    def spawn(owner: str, die: bool) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, __file__, "--worker", owner, "--dir", str(workdir)] + (["--die"] if die else [])
        return subprocess.Popen(cmd)

    a = spawn("worker-a", die=True)
    a.wait(timeout=120)
    print(f"worker A exited with {a.returncode} (SIGKILL is -9)")
    print("status right after the kill: " + ", ".join(f"{s.name}={s.status}" for s in team.status()))
    time.sleep(TTL + 0.2)  # the demo shows what an operator sees once A's leases have expired
    print("status once A's leases expired: " + ", ".join(f"{s.name}={s.status}" for s in team.status()))
    b = spawn("worker-b", die=False)
    deadline = time.time() + 120
    final = None
    while time.time() < deadline:
        msgs = conversation(saver, team, "lead")
        if msgs and msgs[-1].type == "ai" and str(msgs[-1].content).startswith("Release 42"):
            final = msgs[-1].content
            break
        time.sleep(0.1)
    (workdir / "done").touch()
    b.wait(timeout=60)
    print("worker B took the members over: " + ", ".join(f"{s.name} epoch {s.epoch}" for s in team.status()))

    print("\nwhat each member ingested (sender, message id):")
    ids: Counter[str] = Counter()
    for name in ("lead", "alice", "bob"):
        for m in conversation(saver, team, name):
            if m.type == "human":
                env = m.additional_kwargs["team_message"]
                ids[env["id"]] += 1
                print(f"  {name:5} <- {env['sender']:5} #{env['id']} [{env['type']}] {env['content'][:60]}")
    doubled = [i for i, n in ids.items() if n > 1]
    pending = sum(len(team.inbox(n)) for n in ("lead", "alice", "bob"))
    print(f"\nlead: {final}")
    ok = final is not None and not doubled and pending == 0 and len(ids) == 5
    print(f"result: {'OK' if ok else 'FAILED'}: {len(ids)} messages, each ingested exactly once"
          if ok else f"result: FAILED: final={final!r} doubled={doubled} pending={pending} messages={len(ids)}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
