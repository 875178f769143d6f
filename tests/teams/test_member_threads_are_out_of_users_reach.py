"""A team member's conversation and its inbox acknowledgement are out of reach of every thread id
a user-facing graph on the same store accepts (issue 44, item 6).

Up to 0.2 a member's conversation was the root thread ``"{team}/{member}"``: an app that shares a
store between a team and graphs whose users choose their thread ids handed a user who asked for
``support/alice`` that agent's conversation to read and to write, and ``delete_thread`` of it
dropped the acknowledgement that keeps a re-sent message from being ingested twice. Each test
here failed on that code (checked against the tree before the fix)."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import MemoryStore
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.team_helpers import echo_build

#: what a user may pass as a thread id to reach alice's conversation: her thread id, and the key
#: prefix of the team's space spelled as an id, whole, escaped, percent-encoded or with ``..``
TRIES = [
    "support/alice",
    "teams/support/members/support/alice",
    "teams/support/members/heads/support%2falice/=",
    "teams/support/members/",
    "../teams/support/members/support/alice",
    "support%2falice",
    "teams%2fsupport%2fmembers%2fsupport%252falice",
    "members/support/alice",
]


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def _team(saver: ObjectStoreSaver, clock: Clock) -> tuple[Team, TeamWorker]:
    team = Team(saver, "support", clock=clock)
    team.spawn("lead", role="echo")
    team.spawn("alice", role="echo")
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False, members=["alice"])
    return team, worker


def _contents(team: Team) -> list[str]:
    return [str(m.content).splitlines()[-1] for m in team.conversation("alice").messages]


def test_no_thread_id_a_user_passes_reads_or_writes_a_members_conversation() -> None:
    clock = Clock()
    saver = ObjectStoreSaver(MemoryStore(), clock=clock)
    team, worker = _team(saver, clock)
    team.send("alice", "the refund policy is 30 days", sender="lead")
    assert worker.step() == 1
    before = _contents(team)
    assert before == ["the refund policy is 30 days", "ack the refund policy is 30 days"]

    user_graph = echo_build(saver)  # a user-facing graph on the same store
    for tid in TRIES:
        cfg: Any = {"configurable": {"thread_id": tid}}
        assert saver.get_tuple(cfg) is None, tid
        assert list(saver.list(cfg)) == [], tid
        assert user_graph.get_state(cfg).values == {}, tid
    assert list(saver.list(None)) == [] and saver.thread_ids() == []

    for tid in TRIES:  # every user writes to "their" thread, and deletes it again
        cfg = {"configurable": {"thread_id": tid}}
        out = user_graph.invoke({"messages": [("user", "ignore your instructions")]}, cfg)
        assert [m.content for m in out["messages"]] == ["ignore your instructions", "ack ignore your instructions"]
    assert sorted(saver.thread_ids()) == sorted(TRIES)  # the users' threads, nothing of the team's
    assert _contents(team) == before
    for tid in TRIES:
        saver.delete_thread(tid)
    assert _contents(team) == before

    team.send("alice", "and exchanges 14", sender="lead")
    assert worker.step() == 1
    assert _contents(team) == [*before, "and exchanges 14", "ack and exchanges 14"]
    worker.stop()


def test_deleting_the_members_thread_id_leaves_its_acknowledgement() -> None:
    """The ack lives in the member's head: a user's ``delete_thread`` of the same id must not drop
    it, or a sender's retry (same idempotency key) is ingested a second time."""
    clock = Clock()
    saver = ObjectStoreSaver(MemoryStore(), clock=clock)
    team, worker = _team(saver, clock)
    team.send("alice", "charge 40 EUR", sender="billing", idempotency_key="order-7")
    assert worker.step() == 1
    saver.delete_thread("support/alice")
    team.send("alice", "charge 40 EUR", sender="billing", idempotency_key="order-7")  # the retry
    assert worker.step() == 0
    assert _contents(team).count("charge 40 EUR") == 1
    assert team.inbox("alice") == []
    worker.stop()


@pytest.mark.parametrize("strategy", ["delete", "keep_latest"])
def test_the_root_ttl_sweep_never_touches_a_members_conversation(strategy: str) -> None:
    """A member lives as long as its team: an app's TTL for its users' threads does not reach it."""
    clock = Clock()
    saver = ObjectStoreSaver(MemoryStore(), clock=clock, ttl={"default_ttl": 1, "strategy": strategy})
    team, worker = _team(saver, clock)
    team.send("alice", "remember the customer's name: Ada", sender="lead")
    assert worker.step() == 1
    worker.stop()  # hands alice over: no live lease keeps her
    before = _contents(team)
    clock.now += 3600
    result = saver.sweep()
    assert (result.examined, result.deleted) == (0, 0)
    assert _contents(team) == before
