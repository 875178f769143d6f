"""The walks over a whole store and the team spaces (``checkpoint/plans/spaces.py``): ``migrate``
and ``verify`` at the root include every team member's thread exactly once; ``list(None)``,
``thread_ids``, ``prune`` and the TTL sweep, which serve the users of the root, include none."""

from __future__ import annotations

from pathlib import Path

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import envelope, keys
from langgraph_handoff.checkpoint import driver
from langgraph_handoff.checkpoint.plans.spaces import plan_team_ids, plan_team_spaces
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.stores import CountingStore, MemoryStore, StoreBase
from langgraph_handoff.teams import Team, TeamWorker
from tests.support.migrate_helpers import FIXTURE_THREADS, formats, seen, unpack_fixture
from tests.support.team_helpers import echo_build


def test_every_team_is_found_once_with_one_list_per_team() -> None:
    store = CountingStore(MemoryStore())
    names = ["a", "a-b", "a.b", "a0", "a_1", "Ab", "b", "z9"]
    for name in names:
        team = Team(ObjectStoreSaver(store), name)
        team.spawn("lead", role="echo")
        team.send("lead", "x" * 10, sender="ops")
    store.put("teams/stray", b"not a team")  # a key with no team segment: passed over
    store.put("teams/not.canonical/x", b"?")
    store.reset()
    # in key order: "teams/a%2eb/" < "teams/a-b/" < "teams/a/" < "teams/a0/"
    assert driver.run(store, plan_team_ids()) == sorted(names, key=lambda n: keys.team_prefix(n))
    assert store.counts["LIST"] == len(names) + 3  # one per team, the two strays, and the end
    assert driver.run(store, plan_team_spaces()) == []  # nobody ran a turn: no member thread yet


def _team_with_turns(store: StoreBase) -> Team:
    team = Team(ObjectStoreSaver(store), "crew")
    team.spawn("lead", role="echo")
    team.spawn("alice", role="echo")
    team.send("alice", "hello", sender="lead")
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False)
    assert worker.step() == 1
    worker.stop()
    return team


def test_verify_at_the_root_checks_the_members_threads_and_names_their_keys() -> None:
    store = MemoryStore()
    team = _team_with_turns(store)
    root = ObjectStoreSaver(store)
    echo_build(root).invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "chat-1"}})
    report = verify_store(root)
    assert report.problems == [] and report.heads == 3  # chat-1, crew/alice, crew/lead (no turn: a lease)
    assert verify_store(root, "crew/alice").heads == 0  # a thread id of the root's users: not hers
    key = "teams/crew/members/" + keys.head_key("crew/alice", "")
    obj = store.get(key)
    assert obj is not None
    store.put(key, obj.body[:-3])  # damage her head
    [problem] = verify_store(root).problems
    assert problem.key == key and problem.kind == "CorruptObjectError"
    assert [p.key for p in verify_store(team.member_saver).problems] == [keys.head_key("crew/alice", "")]


def test_list_threads_prune_and_sweep_at_the_root_leave_members_out() -> None:
    clock = [1_700_000_000.0]
    store = MemoryStore()
    team = Team(ObjectStoreSaver(store, clock=lambda: clock[0]), "crew", clock=lambda: clock[0])
    team.spawn("alice", role="echo")
    for i in range(3):
        team.send("alice", f"m{i}", sender="ops")
        worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False, batch=1)
        worker.step()
        worker.stop()
    root = ObjectStoreSaver(store, ttl={"default_ttl": 1}, clock=lambda: clock[0])
    history = len(list(team.member_saver.list({"configurable": {"thread_id": "crew/alice"}})))
    assert list(root.list(None)) == [] and root.thread_ids() == []
    root.prune(root.thread_ids())
    root.delete_for_runs(["any"])
    clock[0] += 7200
    assert root.sweep().examined == 0
    assert len(list(team.member_saver.list({"configurable": {"thread_id": "crew/alice"}}))) == history


def test_migrate_at_the_root_migrates_a_team_space_and_only_then_stamps_the_marker(tmp_path: Path) -> None:
    """An old-format thread in a team's space is migrated by the root's ``migrate`` (reported with
    its space), and the marker is stamped only once it is current too."""
    store = unpack_fixture(tmp_path / "store")
    space = "teams/crew/members/"
    for info in [*store.list("heads/"), *store.list("data/")]:  # the fixture's threads, as one team's members
        obj = store.get(info.key)
        assert obj is not None
        store.put(space + info.key, obj.body)
    Team(ObjectStoreSaver(store), "crew").spawn("lead", role="echo")  # the roster: a team lives here
    expected = seen(ObjectStoreSaver(store).under(space), FIXTURE_THREADS)
    summary = ObjectStoreSaver(store).migrate()
    by_space = {(r.space, r.thread_id): r.status for r in summary.results}
    assert by_space == {
        **{("", t): "migrated" for t in FIXTURE_THREADS},
        **{(space, t): "migrated" for t in FIXTURE_THREADS},
    }
    assert summary.marked
    member = ObjectStoreSaver(store).under(space)
    assert seen(member, FIXTURE_THREADS) == expected
    current = envelope.FORMAT_VERSION
    assert {k: v for k, v in formats(store).items() if k != "BLOB"} == {
        k: {current} for k in formats(store) if k != "BLOB"
    }
    rerun = ObjectStoreSaver(store, migrations=None).migrate(dry_run=True)
    assert sorted((r.space, r.thread_id) for r in rerun.results) == sorted(by_space)  # each once, none missed
