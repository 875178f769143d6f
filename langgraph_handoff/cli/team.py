"""``langgraph-handoff team spawn|remove|revive|discard|upgrade``: change a team from the shell.

::

    langgraph-handoff team spawn   URL TEAM NAME --role ROLE [--description TEXT] [--lead]
    langgraph-handoff team remove  URL TEAM NAME
    langgraph-handoff team revive  URL TEAM NAME
    langgraph-handoff team discard URL TEAM NAME --reason TEXT [--by NAME]
    langgraph-handoff team upgrade URL [TEAM]...

``spawn`` creates the team with its first member. ``remove`` keeps the member's pending messages
as dead letters (``team dead``). ``revive`` puts a failed member back to work: its unfinished step
runs again. ``discard`` drops that step instead, for a poison message (a turn that fails every
time): recorded on the roster and in the member's conversation, and the lead gets an event.
``upgrade`` moves the conversations of members spawned by 0.2 out of the store's root, where any
user's thread id reached them (:mod:`langgraph_handoff.teams.upgrade`); it exits 1 while a member
is still served by a worker of the older release, or could not be moved.

A team or member that does not exist exits 2 with "no team 'x'" or "no member 'x'" and the valid
names. The commands live here, registered on ``cli.team_app`` by :func:`register`, so the rest
of the command line does not grow with them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Annotated, Any, Optional

import typer

# the arguments every command shares, declared once in cli/app.py
from langgraph_handoff.cli.app import Json, Migrations, Url
from langgraph_handoff.cli.safe_text import shown

__all__ = ["register"]

TeamId = Annotated[str, typer.Argument(metavar="TEAM", help="the team id")]
Name = Annotated[str, typer.Argument(metavar="NAME", help="the member's name")]


def register(
    team_app: typer.Typer,
    saver: Callable[[str, str | None], AbstractContextManager[Any]],
    out: Callable[[bool, Any, str], None],
) -> None:
    """Add the roster commands to ``team_app``; ``saver(url, migrations)`` opens the store and
    ``out(as_json, obj, text)`` prints one result (the command line's own helpers)."""
    from langgraph_handoff.teams import Team

    @team_app.command("spawn")
    def team_spawn(
        url: Url,
        team: TeamId,
        name: Name,
        role: Annotated[
            str, typer.Option("--role", metavar="ROLE", help="the role: which build of the workers runs it")
        ],
        description: Annotated[
            str, typer.Option("--description", metavar="TEXT", help="what it does (its teammates read it)")
        ] = "",
        lead: Annotated[bool, typer.Option("--lead", help="make it the lead (the first member is)")] = False,
        exist_ok: Annotated[
            bool,
            typer.Option(
                "--exist-ok",
                help="a member of that name and role is fine: it is left as it is (a setup script can run again)",
            ),
        ] = False,
        as_json: Json = False,
        migrations: Migrations = None,
    ) -> None:
        """Add a member (the first one creates the team and is its lead). A name the team has
        already is refused, unless --exist-ok and the member has this role."""
        with saver(url, migrations) as s:
            t = Team(s, team)
            existed = exist_ok and name in t.roster().members
            member = t.spawn(name, role=role, description=description, lead=lead, exist_ok=exist_ok)
        text = (
            f"{shown(member.name)} ({shown(member.role)}) is already on team {shown(team)}: nothing changed"
            if existed
            else f"spawned {shown(member.name)} ({shown(member.role)}) on team {shown(team)}"
        )
        out(as_json, {**member.model_dump(mode="json"), "spawned": not existed}, text)

    @team_app.command("remove")
    def team_remove(url: Url, team: TeamId, name: Name, as_json: Json = False, migrations: Migrations = None) -> None:
        """Take a member off the roster; its pending messages are kept as dead letters."""
        with saver(url, migrations) as s:
            t = Team(s, team)
            t.require(name)
            moved = t.remove(name)
        out(as_json, {"member": name, "dead_letters": moved},
            f"removed {shown(name)} from team {shown(team)}; {len(moved)} pending message(s) kept as dead letters")  # fmt: skip

    @team_app.command("revive")
    def team_revive(url: Url, team: TeamId, name: Name, as_json: Json = False, migrations: Migrations = None) -> None:
        """Put a failed or stopped member back to work; its unfinished step runs again."""
        with saver(url, migrations) as s:
            t = Team(s, team)
            before = t.require(name).members[name]
            member = t.revive(name)
        if before.state == "active":  # nothing to revive: the roster already had it at work
            text = (
                f"{shown(name)} was not failed or stopped (it is active): nothing to revive. "
                f"`team status` shows whether it is stalled; a worker that steps takes a stalled member over"
            )
        else:
            text = f"revived {shown(name)}: {shown(member.state)} (was {shown(before.state)})"
        out(as_json, {**member.model_dump(mode="json"), "revived": before.state != "active"}, text)

    @team_app.command("upgrade")
    def team_upgrade(
        url: Url,
        teams: Annotated[
            Optional[list[str]],  # noqa: UP045 - typer reads the annotation at run time, on Python 3.10 too
            typer.Argument(metavar="TEAM", help="the teams to upgrade (default: every team in the store)"),
        ] = None,
        as_json: Json = False,
        migrations: Migrations = None,
    ) -> None:
        """Move the conversations of members spawned by 0.2 into their team's own space.

        Up to 0.2 a member's conversation was the thread TEAM/NAME among the store's threads, which
        any user's thread id reaches. Safe while workers run (a worker of the older release keeps
        a member it serves until it stops: the member is reported as held) and idempotent; new
        workers do the same for each member they take. Exits 1 if a member was held or failed.
        """
        from langgraph_handoff.checkpoint import driver
        from langgraph_handoff.checkpoint.plans.spaces import plan_team_ids

        unsettled = 0
        with saver(url, migrations) as s:
            for team_id in teams or driver.run(s.store, plan_team_ids()):
                t = Team(s, team_id)
                if not teams and not t.roster().members:
                    continue  # found by its keys, with nobody on it (dead letters of a team gone)
                moves = t.upgrade()
                for move in moves:
                    unsettled += not move.settled
                    copied = f" ({move.copied} objects)" if move.copied else ""
                    why = f": {shown(move.detail)}" if move.detail else ""
                    out(as_json, {"team": team_id, **move.as_dict()},
                        f"{shown(team_id)}/{shown(move.member)}: {move.outcome}{copied}{why}")  # fmt: skip
                if not moves and not as_json:
                    out(as_json, {}, f"{shown(team_id)}: nothing to upgrade")
        if unsettled:
            raise typer.Exit(1)

    @team_app.command("discard")
    def team_discard(
        url: Url,
        team: TeamId,
        name: Name,
        reason: Annotated[
            str, typer.Option("--reason", metavar="TEXT", help="why (recorded, and told to the member and the lead)")
        ],
        by: Annotated[str, typer.Option("--by", metavar="NAME", help="who discards (recorded)")] = "operator",
        as_json: Json = False,
        migrations: Migrations = None,
    ) -> None:
        """Drop a failed member's unfinished step (a poison message) and put it back to work."""
        with saver(url, migrations) as s:
            t = Team(s, team)
            t.require(name)
            member = t.discard(name, reason=reason, by=by)
        record = member.discard or {}
        dropped = ", ".join("#" + shown(i) for i in record.get("messages") or []) or "no message"
        out(as_json, member.model_dump(mode="json"),
            f"discarded step {shown(record.get('checkpoint'))} of {shown(name)} ({dropped}); it is active again")  # fmt: skip
