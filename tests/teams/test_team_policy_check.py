"""Every team conversation ends, whatever the agents do: a randomized check of agent policies.

Beside the protocol's model check (``tests/teams/test_team_model_check.py``, which proves messages are
ingested exactly once under crashes), this one checks what the *agents* can make of the protocol.
Each seed builds a team of ``N`` members whose scripted agents pick, for every message they
ingest, one of: answer it (``send_message`` to the sender with ``reply_to``), only print (their
final answer goes back automatically if it is owed), send something new to a random teammate,
broadcast, or follow up (``expects_reply=True``); budget events are reacted to as well. Outside
senders start ``E`` conversations, some as requests that wait for an answer. A worker steps until
nothing is pending.

**The bound.** A message sent from a turn is one hop further than the furthest message the turn
ingested, and nothing past ``max_hops = B`` is delivered (the first hop past it becomes one event
per conversation and recipient; a reaction to that event is further still and is dropped). Each
delivered message is ingested once and causes at most ``N`` messages in the turn that ingests it
(a broadcast to ``N - 1`` teammates plus one automatic reply), and no turn starts a conversation.
So at most ``E * N**h`` messages have hop ``h``, and every run delivers at most
``E * (N**(B+1) - 1) / (N - 1)`` messages plus ``2 * E`` events, and goes quiet within that many
busy worker steps (each busy step ingests at least one). The check asserts, for every seed: the
run goes quiet within the bound; no delivered message is past the budget; events only at hop
``B + 1``, at most one per conversation and recipient; every message belongs to a conversation an
outside sender started; nothing ingested twice, nothing left pending; and every outside request
was answered or its requester got the budget event (a ``ReplyTimeoutError`` fails the seed).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import HopBudgetExceededError
from langgraph_handoff.stores import MemoryStore
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.team_harness import FunctionChatModel, _incoming
from tests.support.team_helpers import ingested, react_graph

MEMBERS = ("lead", "m1", "m2", "m3")
ACTIONS = ("answer", "print", "new", "broadcast", "follow_up")
WEIGHTS = (3, 3, 2, 1, 1)
SEEDS = 120


def policy_agent(seed: int) -> Any:
    """A member whose choices come from its own seeded generator (deterministic per seed)."""

    def build(checkpointer: Any, member: Any) -> Any:
        rng = random.Random(f"{seed}:{member.name}")
        calls = [0]

        def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
            calls[0] += 1
            return {"name": name, "args": args, "id": f"{member.name}-{calls[0]}", "type": "tool_call"}

        def step(messages: list[BaseMessage]) -> AIMessage:
            if messages[-1].type == "tool":
                return AIMessage(f"{member.name} done")
            out = []
            for m in _incoming(messages):
                env = m.additional_kwargs["team_message"]
                sender = env["sender"]
                others = [n for n in MEMBERS if n != member.name]
                if env["type"] == "event":  # a budget event: react half of the time
                    if rng.random() < 0.5:
                        out.append(call("send_message", {"to": rng.choice(others), "content": "about that event"}))
                    continue
                action = rng.choices(ACTIONS, WEIGHTS)[0]
                to_sender = sender in MEMBERS
                if action == "answer" and to_sender:
                    out.append(call("send_message", {"to": sender, "content": "answer", "reply_to": env["id"]}))
                elif action == "follow_up" and to_sender:
                    out.append(call("send_message", {"to": sender, "content": "and?", "expects_reply": True}))
                elif action == "new":
                    out.append(call("send_message", {"to": rng.choice(others), "content": "new"}))
                elif action == "broadcast":
                    out.append(call("broadcast", {"content": "all"}))
            return AIMessage("", tool_calls=out) if out else AIMessage(f"{member.name} printed")

        return react_graph(checkpointer, FunctionChatModel([step]), member.tools())

    return build


def bound(externals: int, budget: int, n: int = len(MEMBERS)) -> int:
    """Most messages and events a run can deliver (the module docstring)."""
    return externals * (n ** (budget + 1) - 1) // (n - 1) + 2 * externals


def run_seed(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    budget = rng.randint(1, 6)
    team = Team(ObjectStoreSaver(MemoryStore()), "p", max_hops=budget)
    for name in MEMBERS:
        team.spawn(name, role="agent", lead=name == "lead")
    externals = rng.randint(1, 3)
    requests = []
    for i in range(externals):
        asks = rng.random() < 0.5
        m = team.send(rng.choice(MEMBERS), f"task {i}", sender=f"user{i}", expects_reply=asks or None)
        if asks:
            requests.append(m)
    worker = TeamWorker(team, "w", {"agent": policy_agent(seed)}, capacity=None)
    limit = bound(externals, budget)
    busy = 0
    while worker.step() > 0 or any(team.inbox(n) for n in MEMBERS):
        busy += 1
        assert busy <= limit, f"seed {seed}: still busy after {limit} steps (budget {budget})"
    got = [g for n in MEMBERS for g in ingested(team.saver, team, n)]
    ids = Counter(g["id"] for g in got)
    assert [i for i, c in ids.items() if c > 1] == [], f"seed {seed}: ingested twice"
    roots = {g["id"] for g in got if g["sender"].startswith("user")}
    assert len(roots) == externals
    events = [g for g in got if g["type"] == "event"]
    content = [g for g in got if g["type"] != "event"]
    assert max(g["hop"] for g in content) <= budget, f"seed {seed}: a message past the budget was delivered"
    assert {g["hop"] for g in events} <= {budget + 1}
    assert {(g["conversation"] or g["id"]) for g in got} <= roots, f"seed {seed}: a conversation from nowhere"
    assert not [k for k, c in Counter((g["conversation"], g["to"]) for g in events).items() if c > 1]
    assert len(content) + len(events) <= limit
    outcomes: Counter[str] = Counter()
    for r in requests:  # each request was answered, or its requester was told of the cut
        try:
            team.wait_reply(r, timeout=0)
            outcomes["answered"] += 1
        except HopBudgetExceededError:
            outcomes["cut"] += 1
    return {"budget": budget, "busy_steps": busy, "delivered": len(content), "events": len(events),
            "bound": limit, **outcomes}  # fmt: skip


@pytest.mark.heavy
@pytest.mark.parametrize("block", range(4))
def test_every_conversation_ends_within_the_bound(block: int) -> None:
    """``SEEDS`` seeds in 4 blocks (so the xdist workers share them)."""
    runs = [run_seed(seed) for seed in range(block, SEEDS, 4)]
    assert all(r["busy_steps"] <= r["bound"] for r in runs)


def test_the_policy_check_is_not_vacuous() -> None:
    """Over a few seeds the budget is hit (events), requests are answered, and runs go deeper
    than one exchange, so the assertions above are exercised."""
    runs = [run_seed(seed) for seed in range(10)]
    assert sum(r["events"] for r in runs) >= 3, runs
    assert sum(r.get("answered", 0) for r in runs) >= 1 and sum(r.get("cut", 0) for r in runs) >= 1, runs
    assert max(r["delivered"] for r in runs) >= 10, runs
