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
    langgraph-handoff delete   URL THREAD --yes
    langgraph-handoff sweep    URL [--dry-run] [--limit N] [--ttl MINUTES] [--strategy delete|keep_latest]
    langgraph-handoff sessions URL [--attention] [--reclaim-as WORKER --ttl S]
    langgraph-handoff migrate  URL --migrations MODULE:NAME [--thread THREAD ...] [--dry-run] [--concurrency N]
    langgraph-handoff team status URL TEAM
    langgraph-handoff team inbox  URL TEAM MEMBER
    langgraph-handoff team send   URL TEAM TO CONTENT --sender NAME [--reply-to ID] [--key KEY]
    langgraph-handoff team dead   URL TEAM

Threads written by a saver with state-schema migrations need ``--migrations module:name`` (the
app's ``SchemaMigrations``); without it such checkpoints are refused, never misread. ``migrate``
rewrites old threads into that schema and the current storage format, while workers keep running.
``URL`` is what ``ObjectStoreSaver.from_url`` takes: ``file:///dir``, ``s3://bucket/prefix`` (with
``?endpoint_url=...``), ``az://container/prefix``, ``gs://bucket/prefix``, ``memory://``. Every command takes ``--json`` for scripts (one JSON
document, or one per line for listings). Exit codes: 0 ok, 1 problems found (``doctor`` on a store
that does not enforce conditional writes, ``verify``, a thread ``sweep`` could not read,
``sessions``, a failed ``migrate``, ``team status`` with a stalled or failed member, ``team dead``
with dead letters), 2 bad input or a store error.

Built on typer (commands from type-annotated functions) and rich (progress and tables), the pair
the issue named: both are small, typed and widely kept up.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Optional
from urllib.parse import unquote, urlparse

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from langgraph_handoff._version import __version__
from langgraph_handoff.checkpoint.plans.migrate import ThreadMigration
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.checkpoint.ttl import ThreadSweep
from langgraph_handoff.errors import InvalidConfigError, LangGraphHandoffError
from langgraph_handoff.format import envelope, keys, records
from langgraph_handoff.migrations import SchemaMigrations

__all__ = ["app", "main"]

app = typer.Typer(
    name="langgraph-handoff",
    help="Inspect, maintain and migrate what a langgraph-handoff store holds.",
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# The arguments every command shares, declared once.
Url = Annotated[
    str,
    typer.Argument(
        help="file:///dir, s3://bucket/prefix[?endpoint_url=...], az://container/prefix, gs://bucket/prefix "
        "or memory:// (unknown parameters are refused)"
    ),
]
Json = Annotated[bool, typer.Option("--json", help="machine-readable output")]
Migrations = Annotated[
    Optional[str],  # noqa: UP045 - typer reads the annotation at run time, on Python 3.10 too
    typer.Option(
        "--migrations",
        metavar="MODULE:NAME",
        help="your SchemaMigrations (e.g. myapp.schema:migrations), to read and migrate migrated threads",
    ),
]
Ns = Annotated[str, typer.Option("--ns", help="checkpoint namespace ('' is the root graph)")]


def _load_migrations(spec: str | None) -> SchemaMigrations | None:
    """``module:attribute`` naming a SchemaMigrations object (the app's, so the CLI reads what it writes)."""
    if spec is None:
        return None
    module, _, name = spec.partition(":")
    try:
        obj = getattr(importlib.import_module(module), name or "migrations")
    except (ImportError, AttributeError) as exc:
        raise InvalidConfigError(f"--migrations {spec!r}: {exc}") from None
    if not isinstance(obj, SchemaMigrations):
        raise InvalidConfigError(f"--migrations {spec!r} is a {type(obj).__name__}, not a SchemaMigrations")
    return obj


@contextmanager
def _saver(url: str, migrations: str | None, *, create: bool = False) -> Iterator[ObjectStoreSaver]:
    """The saver for ``url``. A ``file://`` directory that does not exist is an error (a typo
    would otherwise create an empty store and report nothing to do), except for ``setup``."""
    parsed = urlparse(url)
    if parsed.scheme.lower() == "file" and not create:
        path = Path(unquote(parsed.netloc + parsed.path))  # as from_url reads it
        if not path.is_dir():
            raise InvalidConfigError(f"no store at {str(path)!r}: check the path (or create it with `setup`)")
    with ObjectStoreSaver.from_url(url, migrations=_load_migrations(migrations)) as saver:
        yield saver


def _out(as_json: bool, obj: Any, text: str) -> None:
    print(json.dumps(obj, ensure_ascii=False, default=str) if as_json else text)


def _document(as_json: bool, obj: Any) -> None:
    print(json.dumps(obj, indent=None if as_json else 2, ensure_ascii=False, default=str))


def _thread_rows(saver: ObjectStoreSaver) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for info in saver.store.list(keys.heads_prefix()):
        obj = saver.store.get(info.key)
        if obj is None:
            continue
        head = records.decode_head(obj.body, key=obj.key)
        if head.records:
            row = rows.setdefault(head.thread_id, {"thread_id": head.thread_id, "namespaces": [], "latest": None})
            row["namespaces"].append(head.checkpoint_ns)
            if head.checkpoint_ns == "":
                row["latest"] = head.latest_id
    return rows


def _version(value: bool) -> None:
    if value:
        print(f"langgraph-handoff {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Inspect, maintain and migrate what a langgraph-handoff store holds."""


@app.command()
def setup(url: Url, as_json: Json = False, migrations: Migrations = None) -> None:
    """Check a store is reachable and write its format marker."""
    with _saver(url, migrations, create=True) as saver:
        saver.setup()
        _out(
            as_json,
            {"ok": True, "store": repr(saver.store), "format": envelope.FORMAT_VERSION},
            f"ok: {saver.store!r} is ready (envelope format {envelope.FORMAT_VERSION})",
        )


@app.command()
def doctor(
    url: Url,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="timed rounds per operation")] = 5,
    as_json: Json = False,
    race: Annotated[bool, typer.Option("--race", help="also race concurrent conditional PUTs (atomicity)")] = False,
    race_writers: Annotated[int, typer.Option("--race-writers", min=2, help="writers at once, with --race")] = 16,
    race_rounds: Annotated[int, typer.Option("--race-rounds", min=1, help="rounds per kind, with --race")] = 20,
) -> None:
    """Probe the store: create-only and compare-and-swap PUTs, ETag quoting, conditional delete,
    list-after-write, median latency per operation (exit 1 on a store that cannot be trusted).
    `--race` also sends the same conditional PUT from many threads at once, round after round,
    and fails a store that lets two writers win (a check-then-write that is not atomic)."""
    from langgraph_handoff.checkpoint import driver
    from langgraph_handoff.probe import plan_report
    from langgraph_handoff.probe import race as run_race

    with _saver(url, None, create=True) as saver:
        quoting = getattr(saver.store, "quoting", None)
        report = driver.run(saver.store, plan_report(repr(saver.store), rounds=rounds, quoting=quoting))
        raced = run_race(saver.store, writers=race_writers, rounds=race_rounds) if race and report.trusted else None
    latency = ", ".join(f"{op} {ms:g} ms" for op, ms in report.latency_ms.items())
    problems = report.problems + (raced.problems if raced else [])
    text = (
        f"{report.store}\n"
        f"  create-only PUT (If-None-Match: *): {report.create_only}\n"
        f"  compare-and-swap PUT (If-Match):    {report.compare_and_swap}\n"
        f"  ETag quoting in If-Match:           {report.etag_quoting}\n"
        f"  conditional DELETE:                 {report.conditional_delete} (never relied upon)\n"
        f"  list after write:                   {report.list_after_write}\n"
        f"  median latency:                     {latency}\n"
        + (
            f"  {'concurrent compare-and-swap PUT:':<36}{raced.compare_and_swap.verdict}\n"
            f"  {'concurrent create-only PUT:':<36}{raced.create_only.verdict}\n"
            if raced
            else ""
        )
        + ("ok: the saver can use this store" if not problems else "UNSAFE: " + "; ".join(problems))
    )
    _out(as_json, {**report.to_dict(), **({"race": raced.to_dict()} if raced else {})}, text)
    if problems:
        raise typer.Exit(1)


@app.command()
def threads(url: Url, as_json: Json = False, migrations: Migrations = None) -> None:
    """List the threads a store holds."""
    with _saver(url, migrations) as saver:
        for row in _thread_rows(saver).values():
            row["namespaces"] = sorted(row["namespaces"])
            _out(as_json, row, f"{row['thread_id']}\t{len(row['namespaces'])} namespace(s)\tlatest {row['latest']}")


@app.command()
def history(
    url: Url,
    thread_id: Annotated[str, typer.Argument(metavar="THREAD")],
    ns: Annotated[Optional[str], typer.Option("--ns", help="only this namespace ('' is the root graph)")] = None,  # noqa: UP045
    limit: Annotated[Optional[int], typer.Option("--limit")] = None,  # noqa: UP045
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """List a thread's checkpoints, newest first."""
    conf: dict[str, object] = {"thread_id": thread_id}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    with _saver(url, migrations) as saver:
        for tup in saver.list({"configurable": conf}, limit=limit):
            md = tup.metadata
            row = {
                "checkpoint_id": tup.config["configurable"]["checkpoint_id"],
                "checkpoint_ns": tup.config["configurable"]["checkpoint_ns"],
                "parent": (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                "source": md.get("source"),
                "step": md.get("step"),
                "channels": sorted(tup.checkpoint["channel_values"]),
                "pending_writes": len(tup.pending_writes or []),
            }
            text = (
                f"{row['checkpoint_id']}  step {row['step']!s:>3}  {row['source']!s:<6}  {', '.join(row['channels'])}"
            )
            _out(as_json, row, text)


@app.command()
def show(
    url: Url,
    thread_id: Annotated[str, typer.Argument(metavar="THREAD")],
    checkpoint: Annotated[Optional[str], typer.Option("--checkpoint", help="a checkpoint id (default: latest)")] = None,  # noqa: UP045
    ns: Ns = "",
    raw: Annotated[bool, typer.Option("--raw", help="the stored head as it is (records, references, lease)")] = False,
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """One checkpoint's values, metadata and pending writes (the latest by default)."""
    from langgraph_handoff.inspect import show_checkpoint

    with _saver(url, migrations) as saver:
        if not raw:
            _document(as_json, show_checkpoint(saver, thread_id, checkpoint, ns))
            return
        obj = saver.store.get(keys.head_key(thread_id, ns))
        if obj is None:
            raise LangGraphHandoffError(f"thread {thread_id!r} namespace {ns!r} has no head")
        head = records.decode_head(obj.body, key=obj.key)
        _document(
            as_json,
            {
                "key": obj.key,
                "etag": obj.etag,
                "bytes": len(obj.body),
                "format": head.format_version,
                "extra": head.extra,
                "segments": [s.__dict__ for s in head.segments],
                "records": [
                    {
                        "id": r.id,
                        "parent": r.parent,
                        "schema": r.schema,
                        "values": {c: list(v) for c, v in r.values.items()},
                        "folded_writes": sorted(r.writes),
                    }
                    for _, r in sorted(head.records.items(), reverse=True)
                ],
            },
        )


@app.command()
def diff(
    url: Url,
    thread_id: Annotated[str, typer.Argument(metavar="THREAD")],
    from_id: Annotated[str, typer.Argument(metavar="FROM_ID")],
    to_id: Annotated[str, typer.Argument(metavar="TO_ID")],
    ns: Ns = "",
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """What changed between two checkpoints of a thread."""
    from langgraph_handoff.inspect import diff_checkpoints

    with _saver(url, migrations) as saver:
        _document(as_json, diff_checkpoints(saver, thread_id, from_id, to_id, ns))


@app.command()
def verify(
    url: Url,
    thread: Annotated[Optional[str], typer.Option("--thread", help="only this thread")] = None,  # noqa: UP045
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """Read every object: checksums, versions, dangling references (exit 1 on problems)."""
    from langgraph_handoff.inspect import verify_store

    with _saver(url, migrations) as saver:
        report = verify_store(saver, thread)
    text = (
        f"checked {report.heads} heads, {report.segments} segments, {report.writes} writes, {report.blobs} blobs: "
        + ("ok" if not report.problems else f"{len(report.problems)} problem(s)")
        + "".join(f"\n  {p.kind}: {p.key}: {p.detail}" for p in report.problems)
        + f"\nstorage formats: {dict(sorted(report.formats.items()))}, "
        f"state schemas: {dict(sorted(report.schemas.items()))}"
        + (
            f"\n{len(report.unreferenced)} unreferenced object(s) (harmless; delete_thread removes them)"
            if report.unreferenced
            else ""
        )
    )
    _out(as_json, report.as_dict(), text)
    if report.problems:
        raise typer.Exit(1)


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


@contextmanager
def _pass(
    url: str, migrations: str | None, what: str, as_json: bool
) -> Iterator[tuple[ObjectStoreSaver, Progress, TaskID]]:
    """The saver and a progress bar on stderr for a pass over every thread (``sweep``,
    ``migrate``); the bar's total is set once the pass knows how many threads there are. Hidden
    with ``--json``."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with _saver(url, migrations) as saver, Progress(*columns, console=Console(stderr=True), disable=as_json) as bar:
        yield saver, bar, bar.add_task(what, total=None)


def _summary(as_json: bool, summary: dict[str, Any], title: str, columns: dict[str, str]) -> None:
    """A pass's summary: one JSON line with ``--json``, else a one-row table of ``columns``
    (summary field -> column name)."""
    if as_json:
        print(json.dumps({"summary": summary}))
        return
    table = Table(title=title)
    for name in columns.values():
        table.add_column(name, justify="right")
    table.add_row(*(str(summary[field]) for field in columns))
    Console(width=120).print(table)


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
def sessions(
    url: Url,
    attention: Annotated[bool, typer.Option("--attention", help="only sessions nobody is responsible for")] = False,
    reclaim_as: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--reclaim-as", metavar="WORKER", help="take over expired sessions as WORKER first"),
    ] = None,
    ttl: Annotated[float, typer.Option("--ttl", help="lease seconds for --reclaim-as")] = 30.0,
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """List sessions and who owns them; exit 1 when some are expired, stuck in transfer or never owned."""
    from langgraph_handoff.ownership import SessionManager

    with _saver(url, migrations) as saver:
        manager = SessionManager(saver)
        if reclaim_as is not None:
            for lease in manager.reclaim_expired(reclaim_as, ttl):
                print(json.dumps({"reclaimed": lease.thread_id, "owner": lease.owner, "epoch": lease.epoch}))
        infos = manager.sessions()
    for info in infos:
        if info.needs_attention or not attention:
            row = info.as_dict()
            text = f"{row['thread_id']}\t{row['status']}\towner {row['owner']}\tepoch {row['epoch']}"
            print(json.dumps(row) if as_json or reclaim_as else text)
    if any(i.needs_attention for i in infos):
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


team_app = typer.Typer(
    help="Agent teams: members' statuses, inboxes and dead letters; send a message.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(team_app, name="team")
TeamId = Annotated[str, typer.Argument(help="the team id")]


@team_app.command("status")
def team_status(url: Url, team: TeamId, as_json: Json = False, migrations: Migrations = None) -> None:
    """Each member's derived status; exit 1 while any member is stalled or failed."""
    from langgraph_handoff.teams import ATTENTION, Team

    with _saver(url, migrations) as saver:
        rows = Team(saver, team).status()
    if as_json:
        for r in rows:
            print(json.dumps(r.as_dict(), ensure_ascii=False))
    else:
        table = Table("member", "role", "status", "owner", "epoch", "inbox", "reason")
        for r in rows:
            table.add_row(r.name, r.role, r.status, r.owner or "-", str(r.epoch), str(r.pending), escape(r.reason))
        Console(width=140).print(table)
    if any(r.status in ATTENTION for r in rows):
        raise typer.Exit(1)


@team_app.command("inbox")
def team_inbox(url: Url, team: TeamId, member: str, as_json: Json = False, migrations: Migrations = None) -> None:
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
        _out(as_json, row, f"{e.state}\t#{m.id}\t{m.type}\tfrom {m.sender}\t{m.content[:80]!r}")


@team_app.command("send")
def team_send(
    url: Url,
    team: TeamId,
    to: str,
    content: str,
    sender: Annotated[str, typer.Option("--sender", help="who is writing (a member, or a name outside the team)")],
    reply_to: Annotated[Optional[str], typer.Option("--reply-to", metavar="ID")] = None,  # noqa: UP045
    key: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--key", help="idempotency key: running the command again sends nothing new"),
    ] = None,
    kind: Annotated[
        str, typer.Option("--kind", help="message, or plan_response to answer a member waiting for approval")
    ] = "message",
    as_json: Json = False,
    migrations: Migrations = None,
) -> None:
    """Send one message (one create-only PUT). An unknown recipient is refused with the valid names."""
    from langgraph_handoff.teams import Team

    if kind not in ("message", "plan_response"):
        raise InvalidConfigError(f"--kind {kind!r}: use message or plan_response")
    with _saver(url, migrations) as saver:
        msg = Team(saver, team).send(
            to,
            content,
            sender=sender,
            reply_to=reply_to,
            idempotency_key=key,
            kind=kind,  # type: ignore[arg-type]
        )
    _out(as_json, msg.model_dump(mode="json"), f"sent #{msg.id} to {to}")


@team_app.command("dead")
def team_dead(url: Url, team: TeamId, as_json: Json = False, migrations: Migrations = None) -> None:
    """Messages for removed members (kept, never dropped); exit 1 if there are any."""
    from langgraph_handoff.teams import Team

    with _saver(url, migrations) as saver:
        letters = Team(saver, team).dead_letters()
    for d in letters:
        m = d.message
        row = {"member": d.member, "where": d.where, "key": d.key, "message": m.model_dump(mode="json") if m else None}
        text = f"{d.where}\t{d.member}\t" + (
            f"#{m.id} from {m.sender}: {m.content[:80]!r}" if m else f"unreadable {d.key}"
        )
        _out(as_json, row, text)
    if letters:
        raise typer.Exit(1)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 problems found, 2 bad input)."""
    try:
        app(args=list(argv) if argv is not None else None, prog_name="langgraph-handoff")
    except SystemExit as exc:  # typer ends every run this way, with the command's exit code
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except LangGraphHandoffError as exc:
        print(f"langgraph-handoff: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
