"""The poison-turn budget lives in each worker's memory (`_failures`). A message whose turn kills
the worker process (OOM, a segfaulting tool, os._exit: simulated by a BaseException escaping
step()) is never counted: every worker that takes the member over dies in turn, forever, and
the member is never marked `failed` nor the lead told.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from typing import Any

from langgraph.graph import END, START, StateGraph

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamState, TeamWorker
from tests.support.team_helpers import Clock


class ProcessDied(BaseException):
    pass


def killer_build(checkpointer: Any, member: Any = None) -> Any:
    def node(state: TeamState) -> dict[str, Any]:
        raise ProcessDied("OOM-killed by a 40 GB tool output")

    g = StateGraph(TeamState)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    return g.compile(checkpointer=checkpointer)


def test_a_turn_that_kills_every_worker_is_eventually_marked_failed():
    clock = Clock()
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=clock)
    team.spawn("lead", role="echo")
    team.spawn("bob", role="killer")
    team.send("bob", "summarise this 40 GB log", sender="lead")
    deaths = 0
    for i in range(6):  # six workers in turn, each a fresh process
        w = TeamWorker(team, f"w{i}", {"killer": killer_build}, members=["bob"], max_failures=3, heartbeat=3600)
        try:
            w.step()
        except ProcessDied:
            deaths += 1
        clock.now += 31  # its lease expires; the next worker takes bob over
        if team.roster().members["bob"].state == "failed":
            break
    assert team.roster().members["bob"].state == "failed", f"{deaths} workers died on the same turn"
