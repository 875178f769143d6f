"""FIFO per (sender, recipient): an agent that sends the lead its plan (outbox) and then calls
interrupt() has its runtime plan_request PUT (in `_paused`) before the committed outbox message is
delivered (`_deliver`), with an earlier order stamp: the lead ingests the request before the
plan that was sent first.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamState, TeamWorker
from langgraph_handoff.teams.model import message_id
from tests.support.team_helpers import echo_build, ingested


class Clock:
    now = 1_000_000.0

    def __call__(self):
        self.now += 0.001
        return self.now


def planner_build(checkpointer: Any, member: Any = None) -> Any:
    def plan(state: TeamState) -> dict[str, Any]:
        return {
            "team_outbox": [
                {
                    "id": message_id("t", "bob", "lead", "call-1"),
                    "to": "lead",
                    "content": "my plan: rewrite the cache",
                    "type": "message",
                    "reply_to": None,
                }
            ],
            "messages": [("ai", "sent the plan")],
        }

    def ask(state: TeamState) -> dict[str, Any]:
        answer = interrupt("Approve the plan I sent you?")
        return {"messages": [("ai", f"plan {answer}")]}

    g = StateGraph(TeamState)
    g.add_node("plan", plan)
    g.add_node("ask", ask)
    g.add_edge(START, "plan")
    g.add_edge("plan", "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=checkpointer)


def test_lead_ingests_the_plan_before_the_plan_request():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("bob", role="planner")
    wb = TeamWorker(team, "wb", {"planner": planner_build}, members=["bob"])
    wl = TeamWorker(team, "wl", {"echo": echo_build}, members=["lead"], auto_reply=False)
    team.send("bob", "speed up the cache", sender="lead")
    wb.step()
    wl.step()
    got = [(m["sender"], m["type"], m["content"]) for m in ingested(saver, team, "lead")]
    assert got == [
        ("bob", "message", "my plan: rewrite the cache"),
        ("bob", "plan_request", "Approve the plan I sent you?"),
    ], got
