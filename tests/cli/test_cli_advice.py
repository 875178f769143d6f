"""What a command says to do next names commands and URL parameters, never a Python call.

Found by a new user (issue 47): errors met in the shell advised ``remove('alice')``,
``request_shutdown()``, ``revive('alice')``, ``Team.spawn``, ``saver.delete_thread`` and
``account_name=``; an unknown team did not list the teams (docs/teams.md said it did); ``history``
of a damaged thread gave no ``next:`` line where ``show`` did; ``team revive`` of a healthy member
said "revived" and ``team send --key K`` a second time "sent". The Python API keeps its own advice
(``LangGraphHandoffError.python_advice``); the command line prints the message without it and its
``next:`` line instead (``cli/app.py``'s ``next_step``). Commands run in this process (``main``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format.keys import head_key, team_roster_key
from langgraph_handoff.cli import main
from langgraph_handoff.errors import MemberExistsError, MemberStateError, UnknownTeamError
from langgraph_handoff.teams import Team, TeamWorker
from tests.cli.test_cli import populate
from tests.support.team_helpers import echo_build

PYTHON_CALLS = ("remove(", "request_shutdown", "revive(", "Team.spawn", "saver.delete_thread", "delete_thread")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


@pytest.fixture
def crew(tmp_path: Path) -> tuple[str, Team]:
    url = f"file://{tmp_path / 'store'}"
    team = Team(ObjectStoreSaver.from_url(url), "crew")
    team.spawn("lead", role="r")
    team.spawn("alice", role="r")
    return url, team


def test_team_errors_name_commands_in_the_shell_and_calls_in_python(
    crew: tuple[str, Team], capsys: pytest.CaptureFixture[str]
) -> None:
    url, team = crew
    cases = [
        (("team", "spawn", url, "crew", "alice", "--role", "r"), f"team remove {url} crew alice"),
        (("team", "discard", url, "crew", "alice", "--reason", "x"), f"team status {url} crew"),
        (("team", "status", url, "nope"), f"team spawn {url} nope NAME --role ROLE"),
    ]
    for argv, command in cases:
        code, _, err = run(capsys, *argv)
        next_line = err.splitlines()[-1]
        assert code == 2 and next_line.startswith("langgraph-handoff: next: "), (argv, err)
        assert f"`langgraph-handoff {command}`" in next_line, (argv, err)
        assert not [c for c in PYTHON_CALLS if c in err], (argv, err)
    team.mark_failed("alice", "boom")  # failed, but no unfinished step
    code, _, err = run(capsys, "team", "discard", url, "crew", "alice", "--reason", "x")
    assert code == 2 and f"next: `langgraph-handoff team revive {url} crew alice`" in err
    assert "revive(" not in err
    # the Python API's messages keep the Python calls
    with pytest.raises(MemberExistsError, match=r"remove\('alice'\)"):
        team.spawn("alice", role="r")
    with pytest.raises(MemberStateError, match=r"revive\('alice'\)"):
        team.discard("alice", reason="x")
    team.revive("alice")
    with pytest.raises(MemberStateError, match=r"request_shutdown\('alice'"):
        team.discard("alice", reason="x")


def test_an_unknown_team_lists_the_teams(crew: tuple[str, Team], capsys: pytest.CaptureFixture[str]) -> None:
    """As docs/teams.md says: the valid names, in Python and in the shell; a team whose roster is
    gone (only dead letters left under its keys) is not one of them."""
    url, team = crew
    Team(team.saver, "other").spawn("bob", role="r")
    ghost = Team(team.saver, "ghost")
    ghost.spawn("carol", role="r")
    ghost.send("carol", "hello", sender="ops")
    ghost.remove("carol")  # its message kept as a dead letter
    team.saver.store.delete(team_roster_key("ghost"))
    with pytest.raises(UnknownTeamError) as caught:
        Team(team.saver, "nope").require()
    assert caught.value.teams == ["crew", "other"] and "Its teams: crew, other." in str(caught.value)
    for command in ("status", "dead"):
        code, _, err = run(capsys, "team", command, url, "nope")
        assert code == 2 and "Its teams: crew, other." in err, err


def test_history_of_a_damaged_thread_names_the_next_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``history`` reports a damaged head and exits 1, with the same ``next:`` line as ``show``."""
    url = f"file://{tmp_path / 'store'}"
    populate(url)
    head = tmp_path / "store" / head_key("chat-2", "")
    head.write_bytes(head.read_bytes()[:100])
    expected = f"`langgraph-handoff delete {url} chat-2 --yes --force`"
    code, _, err = run(capsys, "history", url, "chat-2")
    assert code == 1 and "skipped heads/chat-2/=" in err and "next: " in err and expected in err, err
    code, _, err = run(capsys, "show", url, "chat-2")
    assert code == 2 and expected in err and "delete_thread" not in err, err


def test_copy_onto_a_thread_names_the_delete_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"file://{tmp_path / 'store'}"
    populate(url)
    code, _, err = run(capsys, "copy", url, "chat-1", "chat-2")
    assert code == 2 and "already has checkpoints" in err and f"`langgraph-handoff delete {url} chat-2 --yes`" in err
    assert "saver.delete_thread" not in err, err


def test_revive_of_a_healthy_member_says_there_was_nothing_to_revive(
    crew: tuple[str, Team], capsys: pytest.CaptureFixture[str]
) -> None:
    url, team = crew
    code, out, _ = run(capsys, "team", "revive", url, "crew", "alice")
    assert code == 0 and "was not failed or stopped" in out and "nothing to revive" in out, out
    code, out, _ = run(capsys, "team", "revive", url, "crew", "alice", "--json")
    assert code == 0 and json.loads(out)["revived"] is False
    team.mark_failed("alice", "boom")
    code, out, _ = run(capsys, "team", "revive", url, "crew", "alice")
    assert code == 0 and out.startswith("revived alice: active (was failed)"), out


def test_sending_again_with_the_same_key_says_it_was_already_sent(
    crew: tuple[str, Team], capsys: pytest.CaptureFixture[str]
) -> None:
    url, team = crew
    send = ("team", "send", url, "crew", "alice", "fix it", "--sender", "ops", "--key", "k1")
    code, first, _ = run(capsys, *send)
    assert code == 0 and first.startswith("sent #"), first
    code, again, _ = run(capsys, *send)
    assert code == 0 and again.startswith("already sent #") and "nothing new was sent" in again, again
    code, out, _ = run(capsys, *send, "--json")
    assert json.loads(out)["already_sent"] is True and json.loads(out)["ingested"] is False
    assert len(team.inbox_entries("alice")) == 1
    # once alice has ingested it, the same key still sends nothing new, and says so
    worker = TeamWorker(team, "w", {"r": echo_build}, members=["alice"], auto_reply=False)
    worker.step()
    assert team.inbox_entries("alice") == [] and team.keyed_status("alice", sender="ops", idempotency_key="k1") == (
        "ingested"
    )
    code, later, _ = run(capsys, *send)
    assert code == 0 and later.startswith("already sent #") and "has ingested it" in later, later
    assert team.inbox_entries("alice") == []  # no second copy stored
    code, out, _ = run(capsys, *send, "--json")
    assert json.loads(out)["ingested"] is True
    other = ("team", "send", url, "crew", "alice", "fix it", "--sender", "ops", "--key", "k2")
    code, fresh, _ = run(capsys, *other)
    assert code == 0 and fresh.startswith("sent #"), fresh


@pytest.mark.obstore
def test_a_missing_azure_account_names_the_url_parameter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The message named only ``account_name=``, a keyword argument; in a URL it is ``?account_name=``."""
    from langgraph_handoff.errors import InvalidConfigError
    from langgraph_handoff.stores.urls import store_from_url

    for name in ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_CONNECTION_STRING"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(InvalidConfigError, match=r"az://container/prefix\?account_name=ACCOUNT"):
        store_from_url("az://c/p")


def test_spawn_with_exist_ok_leaves_a_member_of_that_role_as_it_is(
    crew: tuple[str, Team], capsys: pytest.CaptureFixture[str]
) -> None:
    url, team = crew
    before = team.roster().members["alice"]
    code, out, _ = run(
        capsys, "team", "spawn", url, "crew", "alice", "--role", "r", "--description", "new", "--exist-ok"
    )
    assert code == 0 and out.startswith("alice (r) is already on team crew: nothing changed"), out
    assert team.roster().members["alice"] == before  # its description stays
    code, out, _ = run(capsys, "team", "spawn", url, "crew", "alice", "--role", "r", "--exist-ok", "--json")
    assert code == 0 and json.loads(out)["spawned"] is False
    code, _, err = run(capsys, "team", "spawn", url, "crew", "alice", "--role", "other", "--exist-ok")
    assert code == 2 and "already has a member named 'alice'" in err  # another role is another member
    code, out, _ = run(capsys, "team", "spawn", url, "crew", "bob", "--role", "r", "--exist-ok", "--json")
    assert code == 0 and json.loads(out)["spawned"] is True and "bob" in team.roster().members
