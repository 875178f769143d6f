"""`_failed_turn` runs inside step()'s `except Exception` handler and does store operations that
can raise (mark_failed, the event send). If the member was removed while its last allowed turn
failed, mark_failed raises UnknownRecipientError out of step(): the rest of the members are not
served in that step, and run() (no try around step) dies.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from typing import Any

from langgraph.graph import END, START, StateGraph

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamState, TeamWorker
from tests.support.team_helpers import Clock, echo_build, ingested_ids


def test_a_failing_member_removed_meanwhile_does_not_abort_the_step():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    other = Team(saver, "t")  # an operator elsewhere

    def boom_build(checkpointer: Any, member: Any = None) -> Any:
        def node(state: TeamState) -> dict[str, Any]:
            other.remove("bob")  # the operator removes bob while his (last allowed) turn fails
            raise RuntimeError("tool crashed")

        g = StateGraph(TeamState)
        g.add_node("n", node)
        g.add_edge(START, "n")
        g.add_edge("n", END)
        return g.compile(checkpointer=checkpointer)

    team.spawn("lead", role="echo")
    team.spawn("bob", role="boom")
    team.spawn("carol", role="echo")
    w = TeamWorker(team, "w", {"echo": echo_build, "boom": boom_build}, max_failures=1, auto_reply=False)
    w.step()
    team.send("bob", "poison", sender="ops")
    msg = team.send("carol", "hello", sender="ops")
    w.step()  # must not raise
    assert ingested_ids(saver, team, "carol") == [msg.id]
