"""The ``langgraph-handoff`` command: inspect, maintain and migrate what a store holds.

::

    langgraph-handoff setup    URL
    langgraph-handoff doctor   URL [--rounds N] [--race [--race-writers N] [--race-rounds N]]
    langgraph-handoff threads  URL
    langgraph-handoff history  URL THREAD [--ns NS] [--limit N]
    langgraph-handoff show     URL THREAD [--checkpoint ID] [--ns NS] [--raw]
    langgraph-handoff diff     URL THREAD FROM_ID TO_ID [--ns NS]
    langgraph-handoff verify   URL [--thread THREAD]
    langgraph-handoff prune    URL (--thread THREAD ... | --all) (--keep-latest | --older-than DAYS) [--dry-run]
    langgraph-handoff copy     URL SOURCE TARGET
    langgraph-handoff delete   URL THREAD --yes [--force]
    langgraph-handoff sweep    URL [--dry-run] [--limit N] [--ttl MINUTES] [--strategy delete|keep_latest]
    langgraph-handoff index rebuild URL [--key KEY ...] [--team TEAM]
    langgraph-handoff audit list URL [--since 1d]   (also: audit show URL ID, audit mark URL ID
                      --verdict ok|wrong [--note TEXT], audit stats URL [--since 30d])
    langgraph-handoff sessions URL [--attention] [--reclaim-as WORKER --ttl S]
    langgraph-handoff migrate  URL --migrations MODULE:NAME [--thread THREAD ...] [--dry-run] [--concurrency N]
    langgraph-handoff team status URL TEAM
    langgraph-handoff team inbox  URL TEAM MEMBER
    langgraph-handoff team send   URL TEAM TO CONTENT --sender NAME [--reply-to ID] [--key KEY]
    langgraph-handoff team dead   URL TEAM

Threads written by a saver with state-schema migrations need ``--migrations module:name`` (the
app's ``SchemaMigrations``, imported from the current directory first); without it such
checkpoints are refused, never misread. ``migrate`` rewrites old threads into that schema and the
current storage format, while workers keep running. ``URL`` is what ``ObjectStoreSaver.from_url``
takes: ``file:///dir``, ``s3://bucket/prefix`` (with ``?endpoint_url=...``),
``az://container/prefix``, ``gs://bucket/prefix``, ``memory://`` (unknown parameters are refused). Every
command takes ``--json`` for scripts (one JSON document, or one per line for listings). Exit
codes: 0 ok, 1 problems found (``doctor`` on a store that does not enforce conditional writes,
``verify``, a thread ``sweep`` or ``migrate`` could not handle, an object ``threads``,
``history``, ``prune``, ``sweep`` or ``migrate`` could not read and skipped, ``sessions``,
``team status`` with a stalled or failed member, ``team dead`` with dead letters), 2 bad input
(a thread or team that does not exist) or a store error; an error is followed by the command to
run next.

The commands live by concern: :mod:`.store` (setup, doctor), :mod:`.threads` (threads,
history, show, diff, verify), :mod:`.maintenance` (prune, copy, delete, sweep, migrate),
:mod:`.index` (index rebuild), :mod:`.audit` (audited handoffs) and
this module (sessions, the team commands, the entry point); :mod:`.app` holds what they share.

Built on typer (commands from type-annotated functions) and rich (progress and tables), the pair
the issue named: both are small, typed and widely kept up.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

# The commands register themselves on `app` when their modules are imported; `--help` lists them
# in this order (the store, reading threads, changing them, then sessions and teams below).
from langgraph_handoff.cli import store  # noqa: F401

# isort: split
from langgraph_handoff.cli import threads  # noqa: F401

# isort: split
from langgraph_handoff.cli import maintenance  # noqa: F401

# isort: split
from langgraph_handoff.cli import index  # noqa: F401

# isort: split
from langgraph_handoff.cli import audit  # noqa: F401

# isort: split
from langgraph_handoff.cli.app import (
    Commands,
    Json,
    Migrations,
    Url,
    app,
    document,
    load_migrations,
    main,
    open_saver,
    out,
    progress_pass,
    report_damaged,
    summary_table,
)
from langgraph_handoff.cli.safe_text import cell, json_text, shown
from langgraph_handoff.cli.team import TeamId
from langgraph_handoff.cli.team import register as register_team_commands
from langgraph_handoff.errors import InvalidConfigError

__all__ = ["app", "main", "team_app"]

#: the shared helpers under the names they had here before the split (the commands below, and
#: modules adding team commands, use them)
_saver, _out, _document, _load_migrations = open_saver, out, document, load_migrations
_pass, _summary = progress_pass, summary_table


Member = Annotated[str, typer.Argument(metavar="MEMBER", help="the member's name")]


@app.command()
def sessions(
    url: Url,
    attention: Annotated[bool, typer.Option("--attention", help="only sessions nobody is responsible for")] = False,
    reclaim_as: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--reclaim-as", metavar="WORKER", help="take over expired sessions as WORKER first"),
    ] = None,
    ttl: Annotated[float, typer.Option("--ttl", metavar="SECONDS", help="lease seconds for --reclaim-as")] = 30.0,
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """List sessions and who owns them, one line each (thread, status, owner, epoch; a JSON
    document per line with --json); exit 1 when some are expired, stuck in transfer or never
    owned, or a session's head cannot be read (a "skipped" line each; {"damaged": ...} with
    --json). With --reclaim-as, first take over the expired ones (one "reclaimed" line each)."""
    from langgraph_handoff.ownership import SessionManager

    with _saver(url, migrations) as saver:
        manager = SessionManager(saver)
        if reclaim_as is not None:
            for lease in manager.reclaim_expired(reclaim_as, ttl):
                row = {"reclaimed": lease.thread_id, "owner": lease.owner, "epoch": lease.epoch}
                text = f"reclaimed {shown(lease.thread_id)}\towner {shown(lease.owner)}\tepoch {lease.epoch}"
                _out(as_json, row, text)
        damaged: list[Any] = []
        infos = manager.sessions(on_damaged=damaged.append)
    for info in infos:
        if info.needs_attention or not attention:
            row = info.as_dict()
            owner = "no owner" if row["owner"] is None else f"owner {shown(row['owner'])}"  # never "owner None"
            text = f"{shown(row['thread_id'])}\t{shown(row['status'])}\t{owner}\tepoch {row['epoch']}"
            _out(as_json, row, text)
    report_damaged(as_json, damaged)  # a head it could not read: nobody can say who owns it
    if damaged or any(i.needs_attention for i in infos):
        raise typer.Exit(1)


team_app = Commands(
    help="Agent teams: members' statuses, inboxes and dead letters; send a message.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(team_app, name="team")
register_team_commands(team_app, open_saver, out)  # team spawn, remove, revive, discard (cli/team.py)


@team_app.command("status")
def team_status(url: Url, team: TeamId, as_json: Json = False, migrations: Migrations = None) -> None:
    """Each member's derived status; exit 1 while any member is stalled or failed."""
    from langgraph_handoff.teams import Team
    from langgraph_handoff.teams.status import ATTENTION

    with _saver(url, migrations) as saver:
        _require_team(saver, team)
        rows = Team(saver, team).status()
    if as_json:
        for r in rows:
            print(json_text(r.as_dict()))
    else:
        table = Table("member", "role", "status", "owner", "epoch", "inbox", "reason")
        for r in rows:
            table.add_row(*map(cell, (r.name, r.role, r.status, r.owner or "-", r.epoch, r.pending, r.reason)))
        Console(width=140).print(table)
    if any(r.status in ATTENTION for r in rows):
        raise typer.Exit(1)


def _require_team(saver: Any, team: str) -> None:
    """A team exists once its roster does (its first member was spawned); UnknownTeamError names
    the teams there are."""
    from langgraph_handoff.teams import Team

    Team(saver, team).require()


@team_app.command("inbox")
def team_inbox(url: Url, team: TeamId, member: Member, as_json: Json = False, migrations: Migrations = None) -> None:
    """A member's inbox in the order it will ingest it: pending, held (waiting for an earlier
    message of the same sender) and ingested (acked, delete pending)."""
    from langgraph_handoff.teams import Team

    with _saver(url, migrations) as saver:
        t = Team(saver, team)
        t.check_recipient(member)
        entries = t.inbox_entries(member)
    for e in entries:
        m = e.message
        row = {"state": e.state, **m.model_dump(mode="json")}
        _out(
            as_json,
            row,
            f"{shown(e.state)}\t#{shown(m.id)}\t{shown(m.type)}\tfrom {shown(m.sender)}\t{m.content[:80]!r}",
        )


@team_app.command("send")
def team_send(
    url: Url,
    team: TeamId,
    to: Annotated[str, typer.Argument(metavar="TO", help="the member it is for")],
    content: Annotated[str, typer.Argument(metavar="CONTENT", help="the message")],
    sender: Annotated[
        str, typer.Option("--sender", metavar="NAME", help="who is writing (a member, or a name outside the team)")
    ],
    reply_to: Annotated[Optional[str], typer.Option("--reply-to", metavar="ID")] = None,  # noqa: UP045
    key: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--key", metavar="KEY", help="idempotency key: running the command again sends nothing new"),
    ] = None,
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            metavar="message|plan_response",
            help="message, or plan_response to answer a member waiting for approval",
        ),
    ] = "message",
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """Send one message (one create-only PUT). An unknown recipient is refused with the valid names."""
    from langgraph_handoff.teams import Team

    if kind not in ("message", "plan_response"):
        raise InvalidConfigError(f"--kind {kind!r}: use message or plan_response")
    with _saver(url, migrations) as saver:
        t = Team(saver, team)
        # the same key sends nothing new: say so, and store no second copy of an ingested one
        earlier = None if key is None else t.keyed_status(to, sender=sender, idempotency_key=key)
        if key is not None and earlier == "ingested":
            mid = t.keyed_id(to, sender, key)
            text = (
                f"already sent #{shown(mid)} to {shown(to)} (key {shown(key)}), and {shown(to)} has ingested it: "
                "nothing new was sent"
            )
            _out(as_json, {"id": mid, "team": team, "to": to, "sender": sender, "already_sent": True,
                           "ingested": True}, text)  # fmt: skip
            return
        msg = t.send(
            to,
            content,
            sender=sender,
            reply_to=reply_to,
            idempotency_key=key,
            kind=kind,  # type: ignore[arg-type]
        )
    if earlier is not None:
        text = f"already sent #{shown(msg.id)} to {shown(to)} (key {shown(key)}), still waiting: nothing new was sent"
    else:
        text = f"sent #{shown(msg.id)} to {shown(to)}"
    _out(as_json, {**msg.model_dump(mode="json"), "already_sent": earlier is not None, "ingested": False}, text)


@team_app.command("dead")
def team_dead(url: Url, team: TeamId, as_json: Json = False, migrations: Migrations = None) -> None:
    """Messages for removed members (kept, never dropped); exit 1 if there are any."""
    from langgraph_handoff.teams import Team

    with _saver(url, migrations) as saver:
        _require_team(saver, team)
        letters = Team(saver, team).dead_letters()
    for d in letters:
        m = d.message
        row = {"member": d.member, "where": d.where, "key": d.key, "message": m.model_dump(mode="json") if m else None}
        text = f"{shown(d.where)}\t{shown(d.member)}\t" + (
            f"#{shown(m.id)} from {shown(m.sender)}: {m.content[:80]!r}" if m else f"unreadable {shown(d.key)}"
        )
        _out(as_json, row, text)
    if letters:
        raise typer.Exit(1)
