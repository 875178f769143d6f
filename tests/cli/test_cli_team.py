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
