"""`_reply` records the automatic reply with graph.update_state(cfg, {...}) without as_node. For a
member graph whose last superstep ran two nodes in parallel, LangGraph cannot infer the node and
raises InvalidUpdateError ("Ambiguous update"): the committed turn's reply is never paid, the
error counts as a failed turn, and the member is eventually marked failed.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

import operator
from typing import Annotated, Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamState, TeamWorker
from tests.support.team_helpers import Clock, echo_build, ingested


class FanState(TeamState):
    notes: Annotated[list[str], operator.add]


def fan_build(checkpointer: Any, member: Any = None) -> Any:
    g = StateGraph(FanState)
    g.add_node("research", lambda s: {"notes": ["r"]})
    g.add_node("answer", lambda s: {"messages": [AIMessage("the answer")]})
    g.add_edge(START, "research")
    g.add_edge(START, "answer")
    g.add_edge("research", END)
    g.add_edge("answer", END)
    return g.compile(checkpointer=checkpointer)


def test_a_member_whose_graph_ends_in_parallel_nodes_pays_its_automatic_reply():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("bob", role="fan")
    w = TeamWorker(team, "w", {"echo": echo_build, "fan": fan_build}, auto_reply=True)
    team.send("bob", "question", sender="lead")
    for _ in range(3):
        w.step()
    assert team.roster().members["bob"].state == "active"
    assert [m["content"] for m in ingested(saver, team, "lead")] == ["the answer"]


def test_such_a_member_is_not_marked_failed_for_answering():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("bob", role="fan")
    w = TeamWorker(team, "w", {"echo": echo_build, "fan": fan_build}, auto_reply=True, members=["bob"])
    for i in range(3):
        team.send("bob", f"question {i}", sender="lead")
        w.step()
    assert team.roster().members["bob"].state == "active", team.roster().members["bob"].reason
