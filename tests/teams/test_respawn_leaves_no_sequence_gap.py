"""A member removed and re-spawned (new incarnation) keeps its thread and so its outbox's
per-recipient counters: its first message in the new stream gets seq N+1 while the recipient
expects seq 1 of the new stream, so it is held forever.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.team_helpers import Clock, echo_build, ingested


def test_respawned_sender_auto_reply_is_ingested():
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("bob", role="echo")
    w = TeamWorker(team, "w", {"echo": echo_build})
    team.send("bob", "first", sender="lead")
    w.step()  # bob ingests, auto-replies to lead through its outbox (stream bob@inc1, seq 1)
    w.step()
    assert [m["content"] for m in ingested(saver, team, "lead")] == ["ack first"]
    team.remove("bob")
    w.step()  # releases bob
    team.spawn("bob", role="echo")  # same name, new incarnation, same thread
    team.send("bob", "second", sender="lead")
    for _ in range(4):
        w.step()
    held = [(e.state, e.message.stream, e.message.seq) for e in team.inbox_entries("lead")]
    assert [m["content"] for m in ingested(saver, team, "lead")] == ["ack first", "ack second"], held


def test_respawned_recipient_gets_later_messages_of_a_stream_whose_earlier_seq_was_buried():
    """The recipient side: seq 1 of bob's stream went to dead/ with the removed lead; after lead
    is re-spawned, bob's seq 2 to it waits for seq 1 forever."""
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("bob", role="echo")
    wb = TeamWorker(team, "wb", {"echo": echo_build}, members=["bob"])
    wl = TeamWorker(team, "wl", {"echo": echo_build}, members=["lead"])
    team.send("bob", "first", sender="lead")
    wb.step()  # bob's auto reply (bob@inc seq 1) waits in lead's inbox
    team.remove("lead")  # -> dead letter
    team.spawn("lead", role="echo")
    team.send("bob", "second", sender="lead")
    wb.step()  # auto reply seq 2
    for _ in range(3):
        wl.step()
    held = [(e.state, e.message.seq) for e in team.inbox_entries("lead")]
    assert [m["content"] for m in ingested(saver, team, "lead")] == ["ack second"], held
