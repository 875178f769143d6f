"""derive_status says `shutdown` for any stop_requested member whose lease is not live, although
the documented meaning is "shutdown requested and the lease released". A member whose worker died
(lease expired, not released) with the shutdown request and other work still pending shows as
`shutdown` -- not `stalled` -- so nothing (the CLI's ATTENTION exit code) flags it, and the
requester never gets its shutdown_response until a worker takes it over.

Found by an adversarial review of the first teams code (2026-11-30); failed on commit 46b14db.
"""

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.team_helpers import Clock, echo_build


def test_a_dead_workers_member_with_a_pending_shutdown_request_is_not_reported_shut_down():
    clock = Clock()
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t", clock=clock)
    team.spawn("lead", role="echo")
    team.spawn("alice", role="echo")
    w = TeamWorker(team, "w", {"echo": echo_build}, members=["alice"], ttl=30)
    w.step()  # w holds alice ... and then dies (SIGKILL: no release)
    team.send("alice", "finish the report", sender="lead")
    team.request_shutdown("alice", sender="lead")
    clock.now += 31
    st = {s.name: s for s in team.status()}["alice"]
    assert st.pending == 2
    assert st.status != "shutdown", st
