"""``langgraph-handoff index rebuild``: write the metadata index a store-wide filter reads.

A store written before the index existed (or a key added to ``Layout.indexed_metadata`` later)
has threads without entries, so filters on that key read every thread until the index is
declared complete. The rebuild reads every checkpoint once, writes the entries missing and then
declares the keys complete; it is idempotent and safe to stop and run again (the declaration
comes last), and to run while workers write: they keep the index themselves. Every agent team's
members' space has an index of its own and is rebuilt too (``--team`` rebuilds one team's).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from langgraph_handoff.checkpoint import driver
from langgraph_handoff.checkpoint.plans.metadata_index import RebuildReport
from langgraph_handoff.checkpoint.plans.spaces import plan_team_spaces
from langgraph_handoff.cli.app import Commands, InTeam, Json, Migrations, Url, app, open_saver, out, report_damaged
from langgraph_handoff.cli.safe_text import shown
from langgraph_handoff.stores.prefixed import PrefixedStore

index_app = Commands(
    help="The metadata index: store-wide filters on indexed keys read only matching threads.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(index_app, name="index")


@index_app.command("rebuild")
def rebuild(
    url: Url,
    key: Annotated[
        Optional[list[str]],  # noqa: UP045 - typer reads the annotation at run time, on Python 3.10 too
        typer.Option(
            "--key",
            metavar="KEY",
            help="a metadata key to index (repeatable; default: the saver's Layout.indexed_metadata, "
            "user_id, assistant_id and graph_id); every writer must index the same keys",
        ),
    ] = None,
    as_json: Json = False,
    migrations: Migrations = None,
    team: InTeam = None,
) -> None:
    """Write every missing metadata-index entry, then declare the keys complete (idempotent;
    safe to stop and run again, and while workers write). Progress goes to stderr; exit 1 if a
    head could not be read (its namespace has no entries; the others are indexed)."""
    from rich.console import Console

    console = Console(stderr=True)
    damaged = []
    with open_saver(url, migrations, team=team) as saver:
        savers = [("", saver)]
        if team is None and not isinstance(saver.store, PrefixedStore):
            savers += [(p, saver.under(p)) for p in driver.run(saver.store, plan_team_spaces())]
        for space, each in savers:

            def progress(done: int, total: int, space: str = space) -> None:
                if not as_json and (done % 1000 == 0 or done == total):
                    console.print(f"{shown(space or 'store')}: {done} of {total} namespaces")

            report: RebuildReport = each.rebuild_index(key, progress=progress)
            damaged += report.damaged
            row = {"space": space, **report.as_dict()}
            text = (
                f"{shown(space or 'store')}: {report.namespaces} namespaces, {report.checkpoints} checkpoints read, "
                f"{report.created} entries written; complete: {shown(', '.join(report.complete))}"
            )
            out(as_json, row, text)
    report_damaged(as_json, damaged)
    if damaged:
        raise typer.Exit(1)
