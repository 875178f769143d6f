"""remove() moves every object in the inbox to dead/, including messages the member already
ingested (acked in its checkpoint) whose delete has not happened yet: dead_letters() then
reports, as never delivered, a message that is in the member's conversation. Whoever replays
dead letters delivers it a second time.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamState, TeamWorker
from tests.support.team_helpers import Clock, ingested_ids


def test_a_message_ingested_before_the_remove_is_not_a_dead_letter():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    ops = Team(saver, "t")

    def build(checkpointer: Any, member: Any = None) -> Any:
        def node(state: TeamState) -> dict[str, Any]:
            ops.remove("bob")  # an operator removes bob while his turn runs (input already committed)
            return {"messages": [AIMessage("done")]}

        g = StateGraph(TeamState)
        g.add_node("n", node)
        g.add_edge(START, "n")
        g.add_edge("n", END)
        return g.compile(checkpointer=checkpointer)

    team.spawn("bob", role="r")
    w = TeamWorker(team, "w", {"r": build}, auto_reply=False)
    msg = team.send("bob", "task", sender="ops")
    w.step()
    assert ingested_ids(saver, team, "bob") == [msg.id]
    dead = [d.message.id for d in team.dead_letters() if d.message]
    assert msg.id not in dead, "an ingested message is reported as a dead letter"
