"""README table: "idle poll | 2 (roster GET, inbox LIST)". A worker also re-reads, on every idle
poll, the head of each member it does not hold: an acquire attempt (GET, LeaseHeldError) for a
member another worker serves, and sessions.get for a member that shut down. Both go on forever.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import CountingStore, MemoryStore
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.team_helpers import Clock, echo_build


def snap(store):
    out = store.snapshot()
    out.pop("requests", None)
    return out


def test_an_idle_poll_is_two_requests_with_a_member_served_by_another_worker():
    store = CountingStore(MemoryStore())
    team = Team(ObjectStoreSaver(store), "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("alice", role="echo")
    w2 = TeamWorker(team, "w2", {"echo": echo_build}, members=["alice"], auto_reply=False)
    w2.step()
    w1 = TeamWorker(team, "w1", {"echo": echo_build}, auto_reply=False)
    w1.step()  # takes lead
    assert sorted(w1.leases) == ["t/lead"]
    store.reset()
    assert w1.step() == 0
    assert snap(store) == {"GET": 1, "LIST": 1, "round_trips": 2}


def test_an_idle_poll_is_two_requests_with_a_member_that_shut_down():
    store = CountingStore(MemoryStore())
    team = Team(ObjectStoreSaver(store), "t", clock=Clock())
    team.spawn("lead", role="echo")
    team.spawn("alice", role="echo")
    w = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False)
    w.step()
    team.request_shutdown("alice", sender="ops")
    w.step()
    w.step()
    assert sorted(w.leases) == ["t/lead"]
    store.reset()
    assert w.step() == 0
    assert snap(store) == {"GET": 1, "LIST": 1, "round_trips": 2}
