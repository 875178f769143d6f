"""The ``langgraph-handoff`` commands that change threads: ``prune``, ``copy``, ``delete``,
``sweep`` and ``migrate``."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from langgraph_handoff.checkpoint.plans.migrate import ThreadMigration
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.checkpoint.ttl import ThreadSweep
from langgraph_handoff.cli_app import (
    Json,
    Migrations,
    Url,
    _out,
    _pass,
    _saver,
    _summary,
    app,
)
from langgraph_handoff.cli_threads import _thread_rows
from langgraph_handoff.errors import LangGraphHandoffError
from langgraph_handoff.format import envelope


@app.command()
def prune(
    url: Url,
    thread: Annotated[Optional[list[str]], typer.Option("--thread", help="a thread to prune (repeatable)")] = None,  # noqa: UP045
    all_threads: Annotated[bool, typer.Option("--all", help="every thread")] = False,
    keep_latest: Annotated[bool, typer.Option("--keep-latest", help="keep only each namespace's latest")] = False,
    older_than: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option("--older-than", metavar="DAYS", help="delete threads idle this long"),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="report, change nothing")] = False,
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """Keep only the latest checkpoint, or delete threads idle for DAYS."""
    if keep_latest == (older_than is not None):
        raise typer.BadParameter("choose one of --keep-latest and --older-than DAYS")
    with _saver(url, migrations) as saver:
        chosen = sorted(_thread_rows(saver)) if all_threads else list(thread or [])
        if not chosen:
            raise LangGraphHandoffError("prune needs --thread THREAD (repeatable) or --all")
        if older_than is not None:
            cutoff = time.time() - older_than * 86400
            idle = []
            for t in chosen:
                latest = saver.get_tuple({"configurable": {"thread_id": t}})
                stamp = latest.checkpoint.get("ts") if latest else None
                when = datetime.fromisoformat(stamp).timestamp() if stamp else 0.0  # ts carries its UTC offset
                if when < cutoff:
                    idle.append(t)
            plan: dict[str, Any] = {"strategy": "delete idle threads", "threads": idle}
            if not dry_run and idle:
                saver.prune(idle, strategy="delete")
        else:
            plan = {
                "strategy": "keep_latest",
                "threads": chosen,
                "checkpoints_removed": {t: _keep_latest_count(saver, t) for t in chosen},
            }
            if not dry_run:
                saver.prune(chosen, strategy="keep_latest")
    plan["dry_run"] = dry_run
    verb = "would prune" if dry_run else "pruned"
    _out(as_json, plan, f"{verb} ({plan['strategy']}): {', '.join(plan['threads']) or 'nothing'}")


def _keep_latest_count(saver: ObjectStoreSaver, thread_id: str) -> int:
    """How many checkpoints ``prune(keep_latest)`` would remove: per namespace, everything but the
    latest and the ancestors a DeltaChannel still needs (the rule prune itself applies)."""
    from langgraph_handoff.checkpoint import driver

    removed = 0
    for ns in driver.run(saver.store, saver._plan_namespaces(thread_id)):
        head, _etag, segments = driver.run(saver.store, saver._plan_load_namespace(thread_id, ns))
        if head is None:
            continue
        everything = {i: r for seg in segments.values() for i, r in seg.records.items()} | dict(head.records)
        removed += len(saver._keep_latest_drop(everything))
    return removed


@app.command()
def copy(
    url: Url,
    source: Annotated[str, typer.Argument(metavar="SOURCE")],
    target: Annotated[str, typer.Argument(metavar="TARGET")],
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """Copy a thread (every namespace) to a new thread id."""
    with _saver(url, migrations) as saver:
        saver.copy_thread(source, target)
    _out(as_json, {"copied": source, "to": target}, f"copied {source!r} to {target!r}")


@app.command()
def delete(
    url: Url,
    thread_id: Annotated[str, typer.Argument(metavar="THREAD")],
    yes: Annotated[bool, typer.Option("--yes", help="really delete")] = False,
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """Delete a thread and everything it stored."""
    if not yes:
        raise LangGraphHandoffError(f"deleting {thread_id!r} cannot be undone: add --yes")
    with _saver(url, migrations) as saver:
        saver.delete_thread(thread_id)
    _out(as_json, {"deleted": thread_id}, f"deleted {thread_id!r}")


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
        str, typer.Option("--strategy", help="delete expired threads, or keep_latest (prune them to their latest)")
    ] = "delete",
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """Delete threads idle longer than their TTL (the one their writer stamped, or --ttl).

    Safe while workers run: each deletion is a compare-and-swap on the head version the decision
    was taken on, so a thread revived meanwhile is skipped. Exits 1 if a thread could not be read,
    or was emptied but its data objects could not all be deleted (the next sweep deletes them).
    """
    with _pass(url, migrations, "checking" if dry_run else "sweeping", as_json) as (saver, progress, bar):

        def reported(outcome: ThreadSweep) -> None:
            progress.advance(bar)
            if as_json:
                print(json.dumps(outcome.as_dict()), flush=True)
            elif outcome.status == "failed":
                progress.console.print(f"[red]failed[/red] {escape(outcome.thread_id)}: {escape(outcome.error or '')}")
            elif outcome.error is not None:
                progress.console.print(
                    f"[yellow]cleanup pending[/yellow] {escape(outcome.thread_id)}: {escape(outcome.error)}"
                )

        result = saver.sweep(
            dry_run=dry_run,
            limit=limit,
            default_ttl=ttl,
            strategy=strategy,
            on_start=lambda n: progress.update(bar, total=n),
            on_thread=reported,
        )
    summary = result.as_dict()
    title = ("dry run: nothing deleted" if dry_run else "sweep") + f" ({summary['seconds']} s)"
    _summary(as_json, summary, title + (", stopped at --limit" if result.limited else ""), {
        "examined": "examined", "deleted": "would delete" if dry_run else "deleted", "skipped": "skipped (revived)",
        "kept": "kept", "empty": "empty", "failed": "failed", "cleaned": "cleaned",
        "cleanup_pending": "cleanup pending", "objects_deleted": "objects deleted",
    })  # fmt: skip
    if result.failed or result.cleanup_pending:
        raise typer.Exit(1)


@app.command()
def migrate(
    url: Url,
    thread: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option("--thread", help="only this thread (repeatable; default: every thread)"),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="run every step, report, write nothing")] = False,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=256, help="threads migrated at once")] = 8,
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """Rewrite threads into your current state schema (--migrations) and the current storage format.

    Safe while workers run (every rewrite is a compare-and-swap; a concurrent writer wins and the
    thread is redone), idempotent and resumable (a rerun skips what is current). Exits 1 if any
    thread failed; the others are still migrated.
    """
    with _pass(url, migrations, "checking" if dry_run else "migrating", as_json) as (saver, progress, bar):

        def reported(result: ThreadMigration) -> None:
            progress.advance(bar)
            if as_json:
                print(json.dumps(result.as_dict()), flush=True)
            elif result.status in ("failed", "not found"):
                progress.console.print(
                    f"[red]{result.status}[/red] {escape(result.thread_id)}"
                    + (f": {escape(result.error)}" if result.error else "")
                )

        outcome = saver.migrate(
            thread or None,
            dry_run=dry_run,
            concurrency=concurrency,
            on_result=reported,
            on_start=lambda n: progress.update(bar, total=n),
        )
        schema = saver.migrations.current if saver.migrations else 0
    summary = {**outcome.as_dict(), "schema": schema, "format": envelope.FORMAT_VERSION}
    _summary(as_json, summary, ("dry run: nothing written" if dry_run else "migration") + f" ({summary['seconds']} s)", {
        "scanned": "scanned", "migrated": "would migrate" if dry_run else "migrated", "current": "already current",
        "failed": "failed", "not_found": "not found", "checkpoints": "checkpoints upgraded",
        "objects": "objects rewritten", "retries": "CAS retries",
    })  # fmt: skip
    if outcome.failed or (thread and summary["not_found"]):
        raise typer.Exit(1)
