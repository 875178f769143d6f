"""Upgrading a store whose team members' conversations are root threads (written by 0.2): they
move into the team's space, and nothing in flight is lost (``teams.upgrade``).

The store is ``tests/fixtures/team_root_store.tar.gz``, written by the 0.2 code (its generator
says what it holds): alice's worker died with a live lease, bob's stopped cleanly, carol never
ran, messages wait in inboxes, and a user's thread sits beside the team."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.checkpoint import driver
from langgraph_handoff.errors import LeaseHeldError, OwnershipLostError
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.ownership import SessionManager
from langgraph_handoff.stores import CountingStore, LocalStore, MemoryStore
from langgraph_handoff.stores.base import Op, StoreBase
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.migrate_helpers import Tripwire, is_write
from tests.support.team_helpers import echo_build

FIXTURE = Path(__file__).parent.parent / "fixtures" / "team_root_store.tar.gz"
T0 = 1_700_000_000.0  # the fixture's clock (make_team_root_store.T0)
MEMBERS = ["alice", "bob", "carol", "lead"]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def unpack(root: Path) -> LocalStore:
    root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(root, filter="data")
    return LocalStore(root)


def in_memory(tmp: Path) -> MemoryStore:
    source, store = unpack(tmp / "fixture"), MemoryStore()
    for info in source.list(""):
        obj = source.get(info.key)
        assert obj is not None
        store.put(info.key, obj.body)
    return store


def nested(checkpointer: Any, member: Any = None) -> Any:
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, StateGraph

    from langgraph_handoff.teams import TeamState

    inner = StateGraph(TeamState)
    inner.add_node("x", lambda s: {"messages": [AIMessage("inner ack")]})
    inner.add_edge(START, "x")
    inner.add_edge("x", END)
    outer = StateGraph(TeamState)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    outer.add_edge("sub", END)
    return outer.compile(checkpointer=checkpointer)


BUILDS = {"echo": echo_build, "nested": nested}


def at_root(store: StoreBase) -> dict[str, Any]:
    """What the 0.2 layout holds for each member: its conversation and the ack in its root head."""
    saver = ObjectStoreSaver(store)
    out = {}
    for name in MEMBERS:
        thread = f"support/{name}"
        tup = saver.get_tuple({"configurable": {"thread_id": thread}})
        head = saver.heads.decode(store.get(f"heads/support%2f{name}/="), thread).head
        out[name] = (
            tup.checkpoint["channel_values"]["messages"] if tup else None,
            head.meta.team_ack if head else None,
            sorted(ns for _t, ns in driver.run(store, saver.heads.ids(thread))),
        )
    return out


def in_team(team: Team) -> dict[str, Any]:
    """The same, read where the members live now."""
    store = team.member_saver.store
    out = {}
    for name in MEMBERS:
        thread = team.thread_id(name)
        tup = team.member_saver.get_tuple({"configurable": {"thread_id": thread}})
        head = team.member_saver.heads.decode(store.get(f"heads/support%2f{name}/="), thread).head
        ids = [ns for _t, ns in driver.run(store, team.member_saver.heads.ids(thread))]
        out[name] = (
            tup.checkpoint["channel_values"]["messages"] if tup else None,
            head.meta.team_ack if head else None,
            sorted(ids),
        )
    return out


def root_keys(store: StoreBase) -> list[str]:
    return sorted(i.key for i in store.list("") if not i.key.startswith("teams/"))


def test_the_fixture_is_what_0_2_wrote(tmp_path: Path) -> None:
    store = in_memory(tmp_path)
    before = at_root(store)
    assert len(before["alice"][0]) == 16 and before["alice"][1]["hwm"] == {}  # 8 turns, external sends
    assert len(before["bob"][2]) == 2 and before["carol"] == (None, None, [])
    assert any("/s/" in i.key for i in store.list("data/support%2falice/"))  # a sealed segment
    assert all(m.space == "root" for m in Team(ObjectStoreSaver(store), "support").members(refresh=True))


def test_upgrade_moves_every_member_and_loses_nothing_in_flight(tmp_path: Path) -> None:
    store = in_memory(tmp_path)
    before = at_root(store)
    user_thread = ObjectStoreSaver(store).get_tuple({"configurable": {"thread_id": "chat-1"}})
    objects = {n: len([*store.list(f"data/support%2f{n}/"), *store.list(f"heads/support%2f{n}/")]) for n in MEMBERS}
    clock = Clock(T0 + 3600)  # alice's dead worker's lease has expired
    team = Team(ObjectStoreSaver(store), "support", clock=clock)
    moves = {m.member: m for m in team.upgrade()}
    assert {n: m.outcome for n, m in moves.items()} == {
        "alice": "moved", "bob": "moved", "carol": "nothing to move", "lead": "moved"
    }  # fmt: skip
    assert {n: m.copied for n, m in moves.items()} == objects  # every object of each thread, once
    assert [m.space for m in team.members(refresh=True)] == ["team"] * 4

    after = in_team(team)
    for name in ("alice", "bob", "lead"):
        assert after[name] == before[name], name  # the conversation, the ack and every namespace
    assert after["carol"] == (None, None, [])
    # the root holds nothing of the team but retired, empty root heads; the user's thread is untouched
    assert root_keys(store) == sorted(
        ["heads/chat-1/=", *(f"heads/support%2f{n}/=" for n in MEMBERS)] + [i.key for i in store.list("data/chat-1/")]
    )
    root = ObjectStoreSaver(store)
    assert all(root.get_tuple({"configurable": {"thread_id": f"support/{n}"}}) is None for n in MEMBERS)
    assert root.get_tuple({"configurable": {"thread_id": "chat-1"}}) == user_thread
    assert verify_store(root).problems == [] and verify_store(team.member_saver).problems == []

    # in flight: the pending messages are ingested once, the stale copy of an ingested one never
    worker = TeamWorker(team, "new", BUILDS, auto_reply=False)
    assert worker.step() == 2  # "pending for alice", "pending for carol"
    assert worker.step() == 0
    said = [str(m.content).splitlines()[-1] for m in team.conversation("alice").messages]
    assert said.count("turn 7") == 1 and said[-2:] == ["pending for alice", "ack pending for alice"]
    assert [str(m.content).splitlines()[-1] for m in team.conversation("carol").messages] == [
        "pending for carol", "ack pending for carol"
    ]  # fmt: skip
    assert team.inbox("alice", all=True) == [] and team.inbox("carol", all=True) == []
    # a lease in the team's space starts above every epoch the root thread had
    root_epoch = SessionManager(root).get("support/alice").epoch
    assert SessionManager(team.member_saver).get("support/alice").epoch == root_epoch + 1
    worker.stop()

    assert team.upgrade() == []  # nothing left to move


def test_a_new_worker_moves_a_member_before_it_takes_it_and_waits_for_a_live_old_worker(tmp_path: Path) -> None:
    store = in_memory(tmp_path)
    before = at_root(store)
    clock = Clock(T0 + 5)  # alice's old worker is alive (its lease runs to T0 + 30)
    team = Team(ObjectStoreSaver(store), "support", clock=clock)
    worker = TeamWorker(team, "new", BUILDS, auto_reply=False, ttl=30)
    assert worker.step() == 1  # carol's message; alice is left to her old worker
    assert team.roster().members["alice"].space == "root"
    assert at_root(store)["alice"] == before["alice"]  # untouched: it still serves her
    assert team.inbox("alice") != []
    clock.now = T0 + 31  # the old worker is gone
    assert worker.step() == 1  # moved, taken, and the pending message ingested
    assert [m.space for m in team.members(refresh=True)] == ["team"] * 4
    assert in_team(team)["alice"][0][:16] == before["alice"][0]
    worker.stop()


def test_a_worker_of_the_old_release_is_fenced_by_the_move(tmp_path: Path) -> None:
    """What a 0.2 worker does against the root thread after the move, with the same
    operations its code makes there: its held lease can write no more, and looking for free
    members it finds this one held for good."""
    store = in_memory(tmp_path)
    clock = Clock(T0 + 3600)
    root = ObjectStoreSaver(store)
    old_sessions = SessionManager(root, clock=clock)
    stale = old_sessions.get("support/alice")
    assert stale is not None and stale.owner == "old-worker"
    Team(root, "support", clock=clock).upgrade()
    with pytest.raises(LeaseHeldError, match="moved to teams/support/members/"):
        old_sessions.acquire("support/alice", "old-worker-2", 30)
    with pytest.raises(OwnershipLostError):
        echo_build(root.with_lease(stale)).invoke(
            {"messages": [("user", "late turn")]}, {"configurable": {"thread_id": "support/alice"}}
        )


def test_aupgrade(tmp_path: Path) -> None:
    store = in_memory(tmp_path)
    team = Team(ObjectStoreSaver(store), "support", clock=Clock(T0 + 3600))
    moves = asyncio.run(team.aupgrade(["alice"]))
    assert [(m.member, m.outcome) for m in moves] == [("alice", "moved")]
    assert [m.space for m in team.members(refresh=True)] == ["team", "root", "root", "root"]
    assert asyncio.run(team.aupgrade(["alice"])) == []


# -- kills: a child process dies at every write of the upgrade, then a rerun finishes ------------------


def _die_at(root: str, target: int, when: str) -> None:
    seen = [0]
    number: dict[int, int] = {}

    def trip(op: Op, moment: str) -> None:
        if not is_write(op):
            return
        if moment == "before":
            seen[0] += 1
            number[id(op)] = seen[0]
        place = number[id(op)] if moment == "before" else number.pop(id(op))
        if moment == when and place == target:
            os._exit(17)  # before: the write never happens; after: it happened, nothing after it

    Team(ObjectStoreSaver(Tripwire(LocalStore(root), trip)), "support", clock=Clock(T0 + 3600)).upgrade()
    os._exit(0)


def _outcome(store: StoreBase) -> tuple[Any, ...]:
    team = Team(ObjectStoreSaver(store), "support", clock=Clock(T0 + 3600))
    return (
        in_team(team),
        [m.space for m in team.members(refresh=True)],
        root_keys(store),
        sorted(i.key for i in store.list("teams/support/members/")),
    )


@pytest.mark.heavy
def test_killed_at_every_write_then_rerun_finishes_exactly_once(fast_dir: Path) -> None:
    tmp = fast_dir
    reference = unpack(tmp / "reference")
    before = at_root(reference)
    writes = [0]
    counter = Tripwire(
        reference, lambda op, when: writes.__setitem__(0, writes[0] + (is_write(op) and when == "before"))
    )
    Team(ObjectStoreSaver(counter), "support", clock=Clock(T0 + 3600)).upgrade()
    expected = _outcome(reference)
    assert all(expected[0][n] == before[n] for n in ("alice", "bob", "lead"))
    assert writes[0] >= 40, writes[0]  # retire, copy, empty the root, for 4 members; mark the roster
    ctx = multiprocessing.get_context("fork")
    for target in range(1, writes[0] + 1):
        for when in ("before", "after"):
            root = tmp / f"k{target}{when}"
            store = unpack(root)
            child = ctx.Process(target=_die_at, args=(str(root), target, when))
            child.start()
            child.join()
            assert child.exitcode == 17, (target, when)
            rerun = Team(ObjectStoreSaver(store), "support", clock=Clock(T0 + 3600)).upgrade()
            assert all(m.settled for m in rerun), (target, when, rerun)
            assert _outcome(store) == expected, (target, when)
            assert verify_store(ObjectStoreSaver(store).under("teams/support/members/")).problems == []


def _forget_space(team: Team, name: str) -> None:
    """What a process of 0.2 rewriting the roster does: its members have no ``space``."""
    from langgraph_handoff.teams.model import Roster

    def decide(roster: Roster) -> Roster:
        member = roster.members[name].model_copy(update={"space": "root"})
        return roster.model_copy(update={"members": {**roster.members, name: member}})

    team._run(team._plan_change(decide))


def test_a_member_of_this_release_is_never_overwritten_by_a_root_thread_of_its_id() -> None:
    """A 0.2 process rewrote the roster (the member's ``space`` is lost) and a user made a thread
    of the member's id at the root: the upgrade changes neither, says so, and the worker goes on
    serving the member's own conversation."""
    store = MemoryStore()
    root = ObjectStoreSaver(store)
    team = Team(root, "support")
    team.spawn("alice", role="echo")
    team.send("alice", "the real task", sender="ops")
    worker = TeamWorker(team, "w", BUILDS, auto_reply=False)
    assert worker.step() == 1
    mine = team.conversation("alice").messages
    echo_build(root).invoke({"messages": [("user", "planted")]}, {"configurable": {"thread_id": "support/alice"}})
    _forget_space(team, "alice")
    [move] = team.upgrade()
    assert move.outcome == "conflict" and "delete URL support/alice" in move.detail
    assert team.conversation("alice").messages == mine
    planted = root.get_tuple({"configurable": {"thread_id": "support/alice"}})
    assert planted is not None and planted.checkpoint["channel_values"]["messages"][0].content == "planted"
    assert team.roster().members["alice"].space == "root"  # still to be settled by an operator
    team.send("alice", "next", sender="ops")
    assert worker.step() == 1
    said = [str(m.content).splitlines()[-1] for m in team.conversation("alice").messages]
    assert said == ["the real task", "ack the real task", "next", "ack next"]
    root.delete_thread("support/alice")  # the operator's way out: the next upgrade settles it
    assert [m.outcome for m in team.upgrade()] == ["nothing to move"]
    assert team.roster().members["alice"].space == "team"
    worker.stop()


def test_a_lost_space_costs_one_get_when_the_member_moved_before(tmp_path: Path) -> None:
    store = in_memory(tmp_path)
    team = Team(ObjectStoreSaver(store), "support", clock=Clock(T0 + 3600))
    team.upgrade()
    _forget_space(team, "alice")
    counting = CountingStore(store)
    again = Team(ObjectStoreSaver(counting), "support", clock=Clock(T0 + 3600))
    counting.reset()
    assert [(m.member, m.outcome) for m in again.upgrade()] == [("alice", "moved before")]
    assert counting.counts["GET"] == 1 + 1 + 1 and counting.counts["PUT"] == 1  # roster, head; roster CAS
