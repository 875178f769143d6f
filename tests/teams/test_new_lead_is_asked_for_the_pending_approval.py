"""A member waits at interrupt() for the lead's approval; the lead is replaced (removed -- its
pending plan_request becomes a dead letter -- and a new lead spawned). Nobody asks the new lead,
and `_answer` only recognises replies to requests named for the *current* lead, which was never
asked: the member waits forever.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.team_helpers import Clock, ask_build


def test_a_new_lead_is_asked_for_the_pending_approval():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("carol", role="ask")
    w = TeamWorker(team, "w", {"ask": ask_build}, members=["carol"])
    team.send("carol", "speed up the cache", sender="ops")
    w.step()
    team.remove("lead")
    team.spawn("lead2", role="echo", lead=True)
    for _ in range(3):
        w.step()
    asked = [m for m in team.inbox("lead2") if m.type == "plan_request"]
    assert len(asked) == 1, "the new lead was never asked; carol waits forever"
