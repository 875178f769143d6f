"""A member removed and re-spawned under a role this worker cannot build, between two steps of
the worker that holds its lease: step() sees the name on the roster, keeps the lease, and
graph_for raises ConflictError ("this worker cannot run") on every step; step() counts that as
a failed turn, and after max_failures marks the member `failed` -- even with no message at all.
A worker that can build the role never gets it.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.team_helpers import Clock, echo_build, ingested_ids


def test_a_member_respawned_with_a_role_this_worker_lacks_goes_to_a_worker_that_has_it():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("bob", role="echo")
    w = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False)
    w.step()  # holds lead and bob
    ops = Team(saver, "t")
    ops.remove("bob")
    ops.spawn("bob", role="coder")
    for _ in range(3):
        w.step()
    assert team.roster().members["bob"].state == "active", team.roster().members["bob"].reason
    msg = team.send("bob", "fix it", sender="lead")
    w2 = TeamWorker(team, "w2", {"coder": echo_build}, auto_reply=False)
    for _ in range(2):
        w.step()
        w2.step()
    assert ingested_ids(saver, team, "bob") == [msg.id]
