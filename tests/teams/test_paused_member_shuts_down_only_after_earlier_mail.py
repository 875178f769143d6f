"""request_shutdown on a member paused at interrupt(): `_answer` ingests nothing (no answer among
the messages), `more` is False, so `_shut_down` answers shutdown_response and releases the lease
although neither the message sent before the request nor the request itself was ingested
(README: "the member ingests what was sent before, answers shutdown_response and releases").

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.team_helpers import Clock, ask_build, ingested_ids


def test_a_paused_member_does_not_claim_shutdown_with_messages_sent_before_unread():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("carol", role="ask")
    w = TeamWorker(team, "w", {"ask": ask_build}, members=["carol"])
    team.send("carol", "speed up the cache", sender="lead")
    w.step()  # carol pauses and asks the lead
    note = team.send("carol", "important: do not touch prod", sender="lead")
    req = team.request_shutdown("carol", sender="lead")
    for _ in range(3):
        w.step()
    responded = [m for m in team.inbox("lead") if m.type == "shutdown_response"]
    if responded:  # it claims to have shut down: then it must have ingested what was sent before
        assert {note.id, req.id} <= set(ingested_ids(saver, team, "carol")), [m.content for m in team.inbox("carol")]
