"""Offline demo: an agent team whose worker is killed mid-turn, and nothing is lost or doubled.

1. A lead and two teammates (alice the coder, bob the tester) live on the embedded local store.
   Each is a LangGraph thread with its own memory; the roster and one object per message sit
   beside the checkpoints. A person asks the lead for something with ``Team.send(...,
   expects_reply=True)`` and later waits for the answer with ``Team.wait_reply``.
2. Worker A (a process) runs the members. Each member's graph is built for that member
   (``build(checkpointer, member)``), with its own tools; nothing names a member in the code. The
   lead delegates with its ``send_message`` tool to the teammate of each role it needs. The sends
   are recorded in the lead's checkpoint and delivered only after it committed (a transactional
   outbox).
3. The coder's turn starts (its input checkpoint stores the message *and* its ack in one
   compare-and-swap) and worker A is killed with SIGKILL inside it.
4. Worker B (another process) takes every member over when A's lease expires, finishes the
   coder's interrupted turn without ingesting its message again, and the team carries on: each
   teammate's final answer goes back to the lead as an automatic reply, and once both answered,
   the lead's report goes back to the person who asked.
5. The check: every message sent was ingested exactly once, by its recipient, in order.

No network, no LLM: the models are scripted. ``scripts/demo`` runs it.
"""

from __future__ import annotations

import argparse
import os
import shutil
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
from pydantic import Field

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import MemberContext, Team, TeamState, TeamWorker
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
    """Delegates the task to the teammate of each role, waits for both, and reports. A real
    model reads who its teammates are from the team prompt (``member.prompt()``)."""

    #: role -> the member of that role, from the roster (filled in by the build)
    staff: dict[str, str] = Field(default_factory=dict)

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        coder, tester = self.staff["coder"], self.staff["tester"]
        if messages[-1].type == "tool":
            return AIMessage(f"Delegated to {coder} and {tester}; waiting for their answers.")
        if any(m.name == "human" for m in _incoming(messages)):
            return AIMessage("", tool_calls=[
                {"name": "send_message", "id": "delegate-coder", "type": "tool_call",
                 "args": {"to": coder, "content": "Fix the failure in test_io.py (a temp-dir race)."}},
                {"name": "send_message", "id": "delegate-tester", "type": "tool_call",
                 "args": {"to": tester, "content": "Write a regression test for the test_io.py race."}},
            ])  # fmt: skip
        answered = {m.name for m in messages if m.type == "human" and m.name in (coder, tester)}
        if answered == {coder, tester}:
            return AIMessage(f"Release 42 is unblocked: {coder} fixed test_io.py and {tester} added a regression test.")
        return AIMessage(f"Noted. Still waiting for {', '.join(sorted({coder, tester} - answered))}.")


def lead_build() -> Any:
    def build(checkpointer: Any, member: MemberContext) -> Any:
        tools = member.tools()  # this member's send_message, broadcast and list_teammates
        model = LeadModel(["(scripted)"], staff={m.role: m.name for m in member.teammates()}).bind_tools(tools)
        g = StateGraph(TeamState)
        g.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
        g.add_node("tools", ToolNode(tools))
        g.add_edge(START, "model")
        g.add_conditional_edges("model", tools_condition, ["tools", END])
        g.add_edge("tools", "model")
        return g.compile(checkpointer=checkpointer)

    return build


def mate_build(answer: str, die_marker: Path | None) -> Any:
    def build(checkpointer: Any, member: MemberContext) -> Any:
        def work(state: TeamState) -> dict[str, Any]:
            if die_marker is not None and not die_marker.exists():
                die_marker.touch()
                print(f"  worker A: killed with SIGKILL inside {member.name}'s turn", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            return {"messages": [AIMessage(answer)]}

        g = StateGraph(TeamState)
        g.add_node("work", work)
        g.add_edge(START, "work")
        g.add_edge("work", END)
        return g.compile(checkpointer=checkpointer)

    return build


def builds(workdir: Path, *, die: bool) -> dict[str, Any]:
    return {
        "lead": lead_build(),
        "coder": mate_build("Fixed: test_io.py now uses its own tmp_path.", workdir / "coder-died" if die else None),
        "tester": mate_build("Added test_io_parallel.py: 20 concurrent writers, passes.", None),
    }


def run_worker(store: Path, owner: str, die: bool) -> int:
    team = Team(ObjectStoreSaver.from_url(f"file://{store}"), TEAM)
    worker = TeamWorker(team, owner, builds(store.parent, die=die), ttl=TTL, poll=0.05, max_poll=0.5)
    done = store.parent / "done"
    with worker.handle_sigterm():
        worker.run(until=done.exists)
    return 0


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
    markers = [workdir / "done", workdir / "coder-died"]  # the workers' stop and kill-once markers
    if store.exists() or any(m.exists() for m in markers):
        # the checks below count this run's messages: an earlier run's conversation (its request,
        # answered and collected) would leave this one waiting for an answer that never comes
        print(f"{workdir} holds an earlier run: starting from an empty store")
        shutil.rmtree(store, ignore_errors=True)
        for marker in markers:
            marker.unlink(missing_ok=True)
    saver = ObjectStoreSaver.from_url(f"file://{store}")
    team = Team(saver, TEAM)
    team.spawn("lead", role="lead", description="plans the release and delegates", exist_ok=True)
    team.spawn("alice", role="coder", description="fixes code", exist_ok=True)
    team.spawn("bob", role="tester", description="writes tests", exist_ok=True)
    print(f"team {TEAM!r} on {store}: " + ", ".join(f"{m.name} ({m.role})" for m in team.members()))
    task = team.send("lead", TASK, sender="human", idempotency_key="nightly-build", expects_reply=True)
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
    answer = team.wait_reply(task, timeout=120)  # the lead's report, once both teammates answered it
    final = answer.content
    (workdir / "done").touch()
    b.wait(timeout=60)
    print("worker B took the members over: " + ", ".join(f"{s.name} epoch {s.epoch}" for s in team.status()))

    print("\nwhat each member ingested (sender, message id):")
    ids: Counter[str] = Counter()
    names = team.roster_names()
    for name in names:
        for m in team.conversation(name).team_messages:
            ids[m.id] += 1
            print(f"  {name:5} <- {m.sender:5} #{m.id} [{m.type}] {m.content[:60]}")
    doubled = [i for i, n in ids.items() if n > 1]
    pending = sum(len(team.inbox(n)) for n in names)
    print(f"\nhuman <- lead #{answer.id} (reply to #{answer.reply_to}): {final}")
    ok = final is not None and not doubled and pending == 0 and len(ids) == 5
    print(f"result: {'OK' if ok else 'FAILED'}: {len(ids)} messages, each ingested exactly once"
          if ok else f"result: FAILED: final={final!r} doubled={doubled} pending={pending} messages={len(ids)}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
