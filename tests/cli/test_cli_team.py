"""``langgraph-handoff team spawn|remove|revive|discard`` (``langgraph_handoff/cli/team.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.teams import Team, TeamWorker
from tests.cli.test_cli import cli
from tests.support.team_helpers import echo_build
from tests.teams.test_team_building import picky_build


@pytest.mark.heavy
def test_team_spawn_remove_revive_discard(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'store'}"
    assert cli("setup", url).returncode == 0
    out = cli("team", "spawn", url, "crew", "lead", "--role", "echo", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["name"] == "lead"
    assert cli("team", "spawn", url, "crew", "alice", "--role", "picky", "--description", "eats").returncode == 0
    again = cli("team", "spawn", url, "crew", "alice", "--role", "picky")
    assert again.returncode == 2 and "already has a member named 'alice'" in again.stderr
    team = Team(ObjectStoreSaver.from_url(url), "crew")
    assert team.roster().lead == "lead" and team.roster().members["alice"].description == "eats"

    # a poison message fails alice; revive runs it again; discard drops it
    worker = TeamWorker(team, "w", {"picky": picky_build, "echo": echo_build}, members=["alice"], max_failures=1)
    poison = team.send("alice", "poison", sender="lead")
    worker.step()
    status = cli("team", "status", url, "crew")
    assert status.returncode == 1 and "failed" in status.stdout
    revived = cli("team", "revive", url, "crew", "alice", "--json")
    assert revived.returncode == 0 and json.loads(revived.stdout)["state"] == "active"
    worker.step()  # the poison fails again
    assert team.roster().members["alice"].state == "failed"
    out = cli("team", "discard", url, "crew", "alice", "--reason", "crashes the parser", "--by", "ops")
    assert out.returncode == 0, out.stderr
    assert f"#{poison.id}" in out.stdout and "it is active again" in out.stdout
    record = team.roster().members["alice"].discard
    assert (record["messages"], record["by"], record["reason"]) == ([poison.id], "ops", "crashes the parser")
    worker.step()
    assert cli("team", "status", url, "crew").returncode == 0  # nobody failed any more

    removed = cli("team", "remove", url, "crew", "alice", "--json")
    assert removed.returncode == 0 and json.loads(removed.stdout) == {"member": "alice", "dead_letters": []}
    assert team.roster_names(refresh=True) == ["lead"]


@pytest.mark.heavy
@pytest.mark.parametrize("command", ["remove", "revive", "discard"])
def test_a_missing_team_or_member_exits_non_zero_and_says_so(tmp_path: Path, command: str) -> None:
    url = f"file://{tmp_path / 'store'}"
    assert cli("setup", url).returncode == 0
    extra: list[Any] = ["--reason", "x"] if command == "discard" else []
    no_team = cli("team", command, url, "nope", "alice", *extra)
    assert no_team.returncode == 2 and "no team 'nope'" in no_team.stderr, no_team.stderr
    Team(ObjectStoreSaver.from_url(url), "crew").spawn("lead", role="echo")
    no_member = cli("team", command, url, "crew", "alcie", *extra)
    assert no_member.returncode == 2 and "no member 'alcie'. Valid recipients: lead" in no_member.stderr
    status = cli("team", "status", url, "nope")
    assert status.returncode == 2 and "no team 'nope'" in status.stderr


@pytest.mark.heavy
def test_team_upgrade_moves_a_0_2_store_and_team_reads_the_members(tmp_path: Path) -> None:
    from langgraph_handoff.ownership import SessionManager
    from tests.teams.test_team_upgrade import unpack

    root = tmp_path / "store"
    unpack(root)
    url = f"file://{root}"
    sessions = SessionManager(ObjectStoreSaver.from_url(url))
    old = sessions.acquire("support/alice", "old-worker", 600, force=True)  # a worker of 0.2, alive
    first = cli("team", "upgrade", url)
    assert first.returncode == 1, first.stderr
    lines = first.stdout.splitlines()
    assert "support/alice: held: a worker of an older release ('old-worker') serves it" in lines[0]
    assert lines[1:] == [
        "support/bob: moved (6 objects)", "support/carol: nothing to move", "support/lead: moved (3 objects)"
    ]  # fmt: skip
    sessions.release(old)  # it stopped
    again = cli("team", "upgrade", url, "support", "--json")
    assert again.returncode == 0, again.stderr
    [row] = [json.loads(x) for x in again.stdout.splitlines()]
    assert (row["team"], row["member"], row["outcome"], row["copied"]) == ("support", "alice", "moved", 20)
    assert cli("team", "upgrade", url).stdout.strip() == "support: nothing to upgrade"

    assert [x.split("\t")[0] for x in cli("threads", url).stdout.splitlines()] == ["chat-1"]
    members = cli("threads", url, "--team", "support")
    assert [x.split("\t")[0] for x in members.stdout.splitlines()] == ["support/alice", "support/bob", "support/lead"]
    history = cli("history", url, "support/alice", "--team", "support", "--limit", "1", "--json")
    assert history.returncode == 0 and len(history.stdout.splitlines()) == 1
    assert cli("history", url, "support/alice").returncode == 2  # not one of the store's threads
    verify = cli("verify", url, "--json")
    assert (
        verify.returncode == 0 and json.loads(verify.stdout)["heads"] == 5 + 4
    )  # chat-1, 4 retired; alice, bob x2, lead
    sessions_out = cli("sessions", url)
    assert "support/alice\tretired\towner moved to teams/support/members/" in sessions_out.stdout


@pytest.mark.heavy
def test_damage_in_a_members_thread_names_the_team_in_the_next_step(tmp_path: Path) -> None:
    """The same thread id among the store's own threads is another thread: a repair suggested
    for a member's damaged head must not delete that one."""
    url = f"file://{tmp_path / 'store'}"
    saver = ObjectStoreSaver.from_url(url)
    team = Team(saver, "crew")
    team.spawn("alice", role="echo")
    team.send("alice", "hi", sender="ops")
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False)
    assert worker.step() == 1
    worker.stop()
    echo_build(saver).invoke({"messages": [("user", "mine")]}, {"configurable": {"thread_id": "crew/alice"}})
    key = "teams/crew/members/heads/crew%2falice/="
    saver.store.put(key, saver.store.get(key).body[:-4])  # type: ignore[union-attr]
    read = cli("show", url, "crew/alice", "--team", "crew")
    assert read.returncode == 2
    assert "`langgraph-handoff delete file://" in read.stderr and "crew/alice --yes --force --team crew`" in read.stderr
    gone = cli("delete", url, "crew/alice", "--yes", "--force", "--team", "crew")
    assert gone.returncode == 0, gone.stderr
    assert team.conversation("alice").messages == ()
    users = saver.get_tuple({"configurable": {"thread_id": "crew/alice"}})
    assert users is not None and users.checkpoint["channel_values"]["messages"][0].content == "mine"
