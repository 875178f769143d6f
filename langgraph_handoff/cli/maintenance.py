"""The ``langgraph-handoff`` commands that change threads: ``prune``, ``copy``, ``delete``,
``sweep`` and ``migrate`` (registered on :data:`langgraph_handoff.cli.app.app`).

A command naming a thread the store does not hold exits 2 with "no thread 'x'" and changes
nothing. A pass over many threads leaves a thread it cannot read as it is, reports it, goes on,
and exits 1 at the end. ``delete`` removes a thread whose heads cannot be read only with
``--force``, without reading them.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Annotated, Any, Optional

import typer

from langgraph_handoff._format import envelope, keys
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff.checkpoint.plans.listing import UNREADABLE
from langgraph_handoff.checkpoint.plans.migrate import ThreadMigration
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.checkpoint.ttl import ThreadSweep
from langgraph_handoff.cli.app import (
    InTeam,
    Json,
    Migrations,
    Url,
    app,
    open_saver,
    out,
    progress_pass,
    report_damaged,
    summary_table,
)
from langgraph_handoff.cli.safe_text import cell, json_text, shown, shown_message, styled
from langgraph_handoff.errors import CorruptObjectError, DamagedObjectsError, LangGraphHandoffError

__all__ = ["copy", "delete", "migrate", "prune", "sweep"]

Thread = Annotated[str, typer.Argument(metavar="THREAD", help="a thread id (`threads` lists them)")]


@app.command()
def prune(
    url: Url,
    thread: Annotated[
        Optional[list[str]],  # noqa: UP045 - typer reads the annotation at run time, on Python 3.10 too
        typer.Option("--thread", metavar="THREAD", help="a thread to prune (repeatable)"),
    ] = None,
    all_threads: Annotated[bool, typer.Option("--all", help="every thread")] = False,
    keep_latest: Annotated[bool, typer.Option("--keep-latest", help="keep only each namespace's latest")] = False,
    older_than: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option("--older-than", metavar="DAYS", help="delete threads whose latest checkpoint is this old"),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="report, change nothing")] = False,
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """Keep only each namespace's latest checkpoint, or delete threads idle for DAYS.

    A thread named with --thread must exist (else exit 2, nothing changed). A thread that cannot
    be read is reported and left as it is, the others are pruned, and the command exits 1.
    """
    from langgraph_handoff.inspection import list_threads, thread_heads

    if keep_latest == (older_than is not None):
        raise typer.BadParameter("choose one of --keep-latest and --older-than DAYS")
    damaged: list[DamagedObject] = []
    with open_saver(url, migrations) as saver:
        if all_threads:
            listing = list_threads(saver)
            unreadable = {d.thread_id for d in listing.damaged}  # left as they are, reported once
            chosen = [str(r["thread_id"]) for r in listing.rows if r["thread_id"] not in unreadable]
            damaged += listing.damaged
        else:
            if not thread:
                raise LangGraphHandoffError("prune needs --thread THREAD (repeatable) or --all")
            chosen = []
            for t in dict.fromkeys(thread):  # every one exists before anything changes
                present = thread_heads(saver, t).require()
                damaged += present.unreadable
                if not present.unreadable:
                    chosen.append(present.thread_id)
        plan: dict[str, Any]
        if older_than is not None:
            cutoff = time.time() - older_than * 86400
            idle = []
            for t in chosen:
                try:
                    latest = saver.get_tuple({"configurable": {"thread_id": t}})
                except UNREADABLE as exc:  # cannot tell how idle it is: left alone
                    damaged.append(DamagedObject.from_error(exc))
                    continue
                stamp = latest.checkpoint.get("ts") if latest else None
                when = datetime.fromisoformat(stamp).timestamp() if stamp else 0.0  # ts carries its UTC offset
                if when < cutoff:
                    idle.append(t)
            plan = {"strategy": "delete idle threads", "threads": idle}
            if not dry_run and idle:
                saver.prune(idle, strategy="delete")
        else:
            counts = {}
            for t in chosen:
                try:
                    counts[t] = _keep_latest_count(saver, t)
                except UNREADABLE as exc:
                    damaged.append(DamagedObject.from_error(exc))
            plan = {"strategy": "keep_latest", "threads": list(counts), "checkpoints_removed": counts}
            if not dry_run and counts:
                try:
                    saver.prune(list(counts), strategy="keep_latest")
                except DamagedObjectsError as exc:  # damaged since it was counted: reported below
                    damaged += exc.damaged
    plan["dry_run"] = dry_run
    if damaged:
        plan["damaged"] = [d.as_dict() for d in damaged]
    verb = "would prune" if dry_run else "pruned"
    out(as_json, plan, f"{verb} ({plan['strategy']}): {', '.join(shown(t) for t in plan['threads']) or 'nothing'}")
    if damaged:
        if not as_json:
            report_damaged(False, damaged)
        raise typer.Exit(1)


def _keep_latest_count(saver: ObjectStoreSaver, thread_id: str) -> int:
    """How many checkpoints ``prune(keep_latest)`` would remove: per namespace, everything but the
    latest and the ancestors a DeltaChannel still needs (the rule prune itself applies)."""
    from langgraph_handoff.checkpoint import driver

    return driver.run(saver.store, saver.heads.prune_count(thread_id))


@app.command()
def copy(
    url: Url,
    source: Annotated[str, typer.Argument(metavar="SOURCE", help="the thread to copy (it must exist)")],
    target: Annotated[str, typer.Argument(metavar="TARGET", help="a new thread id (or one without checkpoints)")],
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """Copy a thread (every namespace, checkpoint, write and value) to a new thread id."""
    from langgraph_handoff.inspection import thread_heads

    with open_saver(url, migrations) as saver:
        thread_heads(saver, source).require()
        saver.copy_thread(source, target)
    out(as_json, {"copied": source, "to": target}, f"copied {source!r} to {target!r}")


@app.command()
def delete(
    url: Url,
    thread_id: Thread,
    yes: Annotated[bool, typer.Option("--yes", help="really delete")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="also when its heads cannot be read (deleted without reading them)")
    ] = False,
    as_json: Json = False,
    migrations: Migrations = None,
    team: InTeam = None,
) -> None:
    """Delete a thread and everything it stored (exit 2 if there is no such thread).

    A thread whose heads cannot be read (truncated, failing their checksum, not ours) is deleted
    only with --force, without reading them; its root head becomes an empty head that fences any
    session lease it may have held. Nothing of another thread is touched. With --team, a member
    of that team (its conversation, and the record of what it ingested: re-sent old messages
    would be ingested again).
    """
    from langgraph_handoff.inspection import thread_heads

    if not yes:
        raise LangGraphHandoffError(f"deleting {thread_id!r} cannot be undone: add --yes")
    with open_saver(url, migrations, team=team) as saver:
        present = thread_heads(saver, thread_id)
        leftovers = 0
        if not present.exists:  # no checkpoints; data objects an interrupted delete left are still removed
            leftovers = len(list(saver.store.list(keys.thread_data_prefix(present.thread_id))))
            if not leftovers:
                present.require()
        unreadable = present.unreadable
        if unreadable and not force:
            first = unreadable[0]
            raise CorruptObjectError(first.key, first.detail, first.reason)
        saver.delete_thread(present.thread_id)
    row: dict[str, Any] = {"deleted": present.thread_id}
    note = ""
    if unreadable:
        row["unread"] = [d.as_dict() for d in unreadable]
        note = f" (without reading {len(unreadable)} damaged head(s): {', '.join(shown(d.key) for d in unreadable)})"
    elif not present.exists:
        row["leftovers"] = leftovers
        note = f" (it held no checkpoints; {leftovers} leftover data object(s) removed)"
    out(as_json, row, f"deleted {present.thread_id!r}{note}")


@app.command()
def sweep(
    url: Url,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="decide and report, delete nothing")] = False,
    limit: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option("--limit", min=1, metavar="N", help="stop after N threads deleted (the next sweep goes on)"),
    ] = None,
    ttl: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option("--ttl", metavar="MINUTES", help="TTL for threads written without one (default: never expire)"),
    ] = None,
    strategy: Annotated[
        str,
        typer.Option(
            "--strategy",
            metavar="delete|keep_latest",
            help="delete expired threads, or keep_latest (prune them to their latest)",
        ),
    ] = "delete",
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """Delete threads idle longer than their TTL (the one their writer stamped, or --ttl).

    Safe while workers run: each deletion is a compare-and-swap on the head version the decision
    was taken on, so a thread revived meanwhile is skipped. Exits 1 if a thread could not be read
    (a damaged head is reported and left as it is; so is a key under heads/ that is not a head's),
    or was emptied but its data objects could not all be deleted (the next sweep deletes them).
    """
    with progress_pass(url, migrations, "checking" if dry_run else "sweeping", as_json) as (saver, progress, bar):

        def reported(outcome: ThreadSweep) -> None:
            progress.advance(bar)
            if as_json:
                print(json_text(outcome.as_dict()), flush=True)
            elif outcome.status == "failed":
                line = styled(("failed", "red"), " ", cell(outcome.thread_id), ": ", shown_message(outcome.error or ""))
                progress.console.print(line)
            elif outcome.error is not None:
                progress.console.print(
                    styled(
                        ("cleanup pending", "yellow"), " ", cell(outcome.thread_id), ": ", shown_message(outcome.error)
                    )
                )

        result = saver.sweep(
            dry_run=dry_run,
            limit=limit,
            default_ttl=ttl,
            strategy=strategy,
            on_start=lambda n: progress.update(bar, total=n),
            on_thread=reported,
        )
        report_damaged(as_json, result.foreign, progress.console)
    summary = result.as_dict()
    title = ("dry run: nothing deleted" if dry_run else "sweep") + f" ({summary['seconds']} s)"
    summary_table(as_json, summary, title + (", stopped at --limit" if result.limited else ""), {
        "examined": "examined", "deleted": "would delete" if dry_run else "deleted", "skipped": "skipped (revived)",
        "kept": "kept", "empty": "empty", "failed": "failed", "damaged": "damaged", "cleaned": "cleaned",
        "cleanup_pending": "cleanup pending", "objects_deleted": "objects deleted",
    })  # fmt: skip
    if result.failed or result.cleanup_pending or result.damaged:
        raise typer.Exit(1)


@app.command()
def migrate(
    url: Url,
    thread: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option("--thread", metavar="THREAD", help="only this thread (repeatable; default: every thread)"),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="run every step, report, write nothing")] = False,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, max=256, metavar="N", help="threads migrated at once")
    ] = 8,
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """Rewrite threads into your current state schema (--migrations) and the current storage format.

    Safe while workers run (every rewrite is a compare-and-swap; a concurrent writer wins and the
    thread is redone), idempotent and resumable (a rerun skips what is current). Exits 1 if any
    thread failed (one that cannot be read is left as it was) or a key under heads/ is not a
    head's; the other threads are still migrated.
    """
    # with --migrations your steps rewrite your values: they are built as your workers build them
    passing = progress_pass(
        url, migrations, "checking" if dry_run else "migrating", as_json, rewrites_values=bool(migrations)
    )
    with passing as (saver, progress, bar):

        def reported(result: ThreadMigration) -> None:
            progress.advance(bar)
            if as_json:
                print(json_text(result.as_dict()), flush=True)
            elif result.status in ("failed", "not found"):
                progress.console.print(
                    styled(
                        (result.status, "red"),
                        " ",
                        cell(result.thread_id + (f" (in {result.space})" if result.space else "")),
                        f": {shown_message(result.error)}" if result.error else "",
                    )
                )
            if not as_json:
                for gap in result.gaps:
                    progress.console.print(
                        styled(
                            ("schema gap", "yellow"),
                            " ",
                            cell(result.thread_id + (f" (in {result.space})" if result.space else "")),
                            f": {gap.checkpoints} checkpoint(s) of schema {gap.version} lack ",
                            cell(", ".join(gap.missing)),
                        )
                    )

        outcome = saver.migrate(
            thread or None,
            dry_run=dry_run,
            concurrency=concurrency,
            on_result=reported,
            on_start=lambda n: progress.update(bar, total=n),
        )
        report_damaged(as_json, outcome.foreign, progress.console)
        schema = saver.migrations.current if saver.migrations else 0
    summary = {**outcome.as_dict(), "schema": schema, "format": envelope.FORMAT_VERSION}
    summary_table(as_json, summary, ("dry run: nothing written" if dry_run else "migration") + f" ({summary['seconds']} s)", {
        "scanned": "scanned", "migrated": "would migrate" if dry_run else "migrated", "current": "already current",
        "failed": "failed", "not_found": "not found", "damaged": "damaged", "gaps": "threads with schema gaps",
        "checkpoints": "checkpoints to upgrade" if dry_run else "checkpoints upgraded",
        "objects": "objects to rewrite" if dry_run else "objects rewritten", "retries": "CAS retries",
    })  # fmt: skip
    if outcome.failed or outcome.damaged or (thread and summary["not_found"]):
        raise typer.Exit(1)
