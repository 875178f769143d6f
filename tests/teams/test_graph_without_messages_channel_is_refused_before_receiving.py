"""TeamWorker requires a `messages` channel ("A graph's state needs a messages channel") but never
checks it: a member graph without one gets its turn input {"messages": [...]} silently dropped by
LangGraph, while the rider acks the messages and the worker deletes them. The messages are
acked, deleted, and in no conversation: lost, with no error.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.team_helpers import Clock, ingested_ids


class Notes(TypedDict, total=False):
    notes: list[str]


def notes_build(checkpointer: Any, member: Any = None) -> Any:
    g = StateGraph(Notes)
    g.add_node("n", lambda s: {"notes": ["ran"]})
    g.add_edge(START, "n")
    g.add_edge("n", END)
    return g.compile(checkpointer=checkpointer)


def test_a_message_is_never_acked_and_deleted_without_entering_a_conversation():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    team.spawn("bob", role="notes")
    w = TeamWorker(team, "w", {"notes": notes_build}, auto_reply=False, max_failures=1)
    msg = team.send("bob", "important", sender="ops")
    w.step()  # the graph is refused before anything is received: the member is failed, with why
    assert [m.id for m in team.inbox("bob")] == [msg.id], "acked, deleted and in no conversation"
    assert ingested_ids(saver, team, "bob") == []
    member = team.roster().members["bob"]
    assert member.state == "failed" and "no 'messages' channel" in member.reason
