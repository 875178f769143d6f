"""The failure event is named by `failed:{incarnation}:{name}:{count}`, the same for every
failure of the same incarnation. After revive(), a second failure within `window` sends an event
under the id the lead already ingested: the lead drops it as a duplicate (or the PUT hits the
still-pending first copy). The lead is told only once.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.team_helpers import Clock, boom_build, echo_build, ingested


def test_the_lead_is_told_about_every_failure():
    clock = Clock()
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=clock)
    team.spawn("lead", role="echo")
    team.spawn("bob", role="boom")
    wb = TeamWorker(team, "wb", {"boom": boom_build}, members=["bob"], max_failures=1, auto_reply=False)
    wl = TeamWorker(team, "wl", {"echo": echo_build}, members=["lead"], auto_reply=False)
    team.send("bob", "poison 1", sender="lead")
    wb.step()
    wl.step()
    assert team.roster().members["bob"].state == "failed"
    clock.now += 60
    team.revive("bob")  # fixed (or so we thought)
    wb.step()  # the old turn fails again on resume
    wl.step()
    wl.step()
    assert team.roster().members["bob"].state == "failed"
    events = [m for m in ingested(saver, team, "lead") if m["type"] == "event"]
    assert len(events) == 2, [(e["id"], e["content"][:40]) for e in events]
