"""A member paused at interrupt() ingests nothing until an answer is among the first `batch`
ready messages. If `batch` other messages arrived before the answer, the answer is never in the
selection (select() cuts at `limit`) and the member is stuck forever.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamState, TeamWorker
from tests.support.team_helpers import Clock, conversation, echo_build


def ask_build(checkpointer: Any, member: Any = None) -> Any:
    def ask(state: TeamState) -> dict[str, Any]:
        answer = interrupt("Plan: rewrite the cache. Approve?")
        return {"messages": [("ai", f"plan {answer}")]}

    g = StateGraph(TeamState)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=checkpointer)


def test_answer_after_a_full_batch_of_other_messages_resumes_the_member():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("carol", role="ask")
    w = TeamWorker(team, "w", {"echo": echo_build, "ask": ask_build}, members=["carol"], batch=2)
    team.send("carol", "speed up the cache", sender="lead")
    assert w.step() == 1
    [request] = team.inbox("lead")
    team.send("carol", "fyi 1", sender="ops")
    team.send("carol", "fyi 2", sender="ops")
    team.send("carol", "approved", sender="lead", reply_to=request.id)
    for _ in range(5):
        w.step()
    convo = conversation(saver, team, "carol")
    assert convo[-1].content == "plan approved", [m.content for m in convo]
