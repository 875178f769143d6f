"""Plan approval with two interrupts: the lead answers both requests; both answers arrive in the
same receive. `_answer` resumes only the interrupt of the first answer, and ingests every ready
message -- including the second answer -- as plain conversation. The member pauses again at the
second interrupt and waits for an answer that was already consumed: stuck for good.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

import operator
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamState, TeamWorker
from tests.support.team_helpers import Clock


class TwoState(TeamState):
    done: Annotated[list[str], operator.add]


def two_build(checkpointer: Any, member: Any = None) -> Any:
    def a(state):
        return {"done": [f"a:{interrupt('Approve plan A?')}"]}

    def b(state):
        return {"done": [f"b:{interrupt('Approve plan B?')}"]}

    g = StateGraph(TwoState)
    g.add_node("a", a)
    g.add_node("b", b)
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge("a", END)
    g.add_edge("b", END)
    return g.compile(checkpointer=checkpointer)


def test_two_answers_resume_both_interrupts():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("carol", role="two")
    w = TeamWorker(team, "w", {"two": two_build}, members=["carol"])
    team.send("carol", "go", sender="lead")
    w.step()
    requests = team.inbox("lead")
    assert sorted(r.content for r in requests) == ["Approve plan A?", "Approve plan B?"]
    for r in requests:
        team.send("carol", "yes " + r.content[-2], sender="lead", reply_to=r.id)
    for _ in range(4):
        w.step()
    state = team.member_saver.get_tuple({"configurable": {"thread_id": "t/carol"}}).checkpoint["channel_values"]
    assert sorted(state.get("done", [])) == ["a:yes A", "b:yes B"], (state.get("done"), w._waiting)
