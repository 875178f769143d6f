"""SIGTERM during a step (handle_sigterm sets `stopping`) makes every member served later in that
step fail its turn: `_serve` -> `settle` -> `lease_for` raises WorkerStoppingError, which step()
handles as a failed turn (`_failed_turn`). With max_failures=1 the member is marked `failed`
and the lead gets a failure event, instead of the member being handed over.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

import os
import signal
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamState, TeamWorker
from tests.support.team_helpers import Clock, echo_build


def sigterm_build(checkpointer: Any, member: Any = None) -> Any:
    def node(state: TeamState) -> dict[str, Any]:
        os.kill(os.getpid(), signal.SIGTERM)  # a redeploy, mid-turn
        return {"messages": [AIMessage("ok")]}

    g = StateGraph(TeamState)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    return g.compile(checkpointer=checkpointer)


def test_sigterm_mid_step_hands_members_over_and_fails_none():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    team.spawn("a", role="term")
    team.spawn("b", role="echo")
    w = TeamWorker(team, "w", {"term": sigterm_build, "echo": echo_build}, max_failures=1, auto_reply=False)
    with w.handle_sigterm():
        w.step()  # takes a and b
        team.send("a", "work", sender="ops")
        w.step()  # a's turn receives SIGTERM; b is served after it in the same step
        assert w.stopping
        handed = w.stop()
    roster = team.roster()
    assert roster.members["b"].state == "active", roster.members["b"].reason
    assert [m.type for m in team.inbox("a")] == []
    assert "t/b" in handed
