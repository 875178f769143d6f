"""The ``langgraph-handoff`` commands that read threads: ``threads``, ``history``, ``show``,
``diff`` and ``verify`` (registered on :data:`langgraph_handoff.cli.app.app`).

A command naming a thread the store does not hold exits 2 with "no thread 'x'". A walk over many
threads reports each object it cannot read and goes on; it exits 1 at the end.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, Optional

import typer

from langgraph_handoff._format import keys, records
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff.checkpoint.plans.listing import UNREADABLE
from langgraph_handoff.cli.app import (
    AllowTypes,
    InTeam,
    Json,
    Migrations,
    Ns,
    Url,
    app,
    document,
    open_saver,
    out,
    place,
    report_damaged,
    report_next_step,
)
from langgraph_handoff.cli.safe_text import shown, shown_message
from langgraph_handoff.errors import CorruptObjectError, InvalidConfigError

__all__ = ["diff", "history", "show", "threads", "verify"]

Thread = Annotated[str, typer.Argument(metavar="THREAD", help="a thread id (`threads` lists them)")]


@app.command()
def threads(url: Url, as_json: Json = False, migrations: Migrations = None, team: InTeam = None) -> None:
    """List the threads that hold checkpoints: namespaces, latest root checkpoint id.

    A head that cannot be read (truncated, failing its checksum, not ours) or a key under heads/
    that is not a head's is reported and skipped (`{"damaged": ...}` lines with --json); the
    command then exits 1. An agent team's members are not among them: --team TEAM lists those.
    No thread at all is said on stderr ("no threads under prefix 'prod/' of s3://agents"), exit 0.
    """
    from langgraph_handoff.inspection import list_threads

    with open_saver(url, migrations, team=team) as saver:
        found = list_threads(saver)
    if not found.rows and not found.damaged:  # nothing printed would look like a listing that worked
        where = f"of team {team!r} in {place(url)}" if team is not None else place(url)
        print(
            f"langgraph-handoff: no threads {where} (`verify` tells an empty store from the wrong place)",
            file=sys.stderr,
        )
    for row in found.rows:
        text = f"{shown(row['thread_id'])}\t{len(row['namespaces'])} namespace(s)\tlatest {shown(row['latest'])}"
        out(as_json, row, text)
    report_damaged(as_json, found.damaged)
    if found.damaged:
        raise typer.Exit(1)


@app.command()
def history(
    url: Url,
    thread_id: Thread,
    ns: Annotated[
        Optional[str],  # noqa: UP045 - typer reads the annotation at run time, on Python 3.10 too
        typer.Option("--ns", metavar="NS", help="only this namespace ('' is the root graph)"),
    ] = None,
    limit: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option("--limit", min=1, metavar="N", help="at most N checkpoints of each namespace, its newest"),
    ] = None,
    as_json: Json = False,
    migrations: Migrations = None,
    allow_types: AllowTypes = None,
    team: InTeam = None,
) -> None:
    """List a thread's checkpoints, namespace by namespace (the root graph's first), each newest
    first; --limit N keeps each namespace's N newest.

    Columns: namespace ('(root)' for the root graph), checkpoint id, step, source, channels with a
    value. A namespace whose head cannot be read is reported and skipped (exit 1).
    """
    from langgraph_handoff.inspection import thread_heads

    with open_saver(url, migrations, allow_types=allow_types, team=team) as saver:
        present = thread_heads(saver, thread_id).require()
        if ns is not None and ns not in present.namespaces:
            for d in present.unreadable:
                if _ns_of(d) == ns:  # the one namespace asked for cannot be read: say so, as a read does
                    raise CorruptObjectError(d.key, d.detail, d.reason)
            known = ", ".join(repr(n) for n in present.namespaces) or "none readable"
            raise InvalidConfigError(
                f"thread {thread_id!r} has no checkpoints in namespace {ns!r} (its namespaces: {known})"
            )
        damaged = list(present.unreadable) if ns is None else []
        for namespace in [ns] if ns is not None else present.namespaces:
            conf = {"configurable": {"thread_id": present.thread_id, "checkpoint_ns": namespace}}
            try:
                for tup in saver.list(conf, limit=limit):  # type: ignore[arg-type]
                    _history_row(as_json, tup)
            except UNREADABLE as exc:  # a segment or value of this namespace: the others still show
                damaged.append(DamagedObject.from_error(exc))
    report_damaged(as_json, damaged)
    report_next_step(damaged, url, migrations, team)
    if damaged:
        raise typer.Exit(1)


def _ns_of(damaged: DamagedObject) -> str | None:
    parts = damaged.key.split("/")
    return keys.decode_segment(parts[2]) if len(parts) == 3 and keys.is_head_key(damaged.key) else None


def _history_row(as_json: bool, tup: Any) -> None:
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
        f"{shown(row['checkpoint_ns']) or '(root)'}  {shown(row['checkpoint_id'])}  step {shown(row['step']):>3}  "
        f"{shown(row['source']):<6}  {', '.join(shown(c) for c in row['channels'])}"
    )
    out(as_json, row, text)


@app.command()
def show(
    url: Url,
    thread_id: Thread,
    checkpoint: Annotated[
        Optional[str],  # noqa: UP045 - typer reads the annotation at run time, on Python 3.10 too
        typer.Option("--checkpoint", metavar="ID", help="a checkpoint id (default: latest)"),
    ] = None,
    ns: Ns = "",
    raw: Annotated[bool, typer.Option("--raw", help="the stored head as it is (records, references, lease)")] = False,
    as_json: Json = False,
    migrations: Migrations = None,
    allow_types: AllowTypes = None,
    team: InTeam = None,
) -> None:
    """One checkpoint's values, metadata and pending writes as JSON (the latest by default).

    Values are built strictly: LangGraph's safe types and those --allow-type names; any other
    type a stored value names shows as the arguments it was stored with (never imported)."""
    from langgraph_handoff.inspection import show_checkpoint, thread_heads

    with open_saver(url, migrations, allow_types=allow_types, team=team) as saver:
        if not raw:
            document(as_json, show_checkpoint(saver, thread_id, checkpoint, ns))
            return
        obj = saver.store.get(keys.head_key(keys.validate_thread_id(thread_id), ns))
        if obj is None:
            thread_heads(saver, thread_id).require()
            raise InvalidConfigError(f"thread {thread_id!r} has no head in namespace {ns!r}")
        head = records.decode_head(obj.body, key=obj.key)
        document(
            as_json,
            {
                "key": obj.key,
                "etag": obj.etag,
                "bytes": len(obj.body),
                "format": head.format_version,
                "extra": head.meta.wire(),  # the metadata as stored (_format/head_meta.py)
                "segments": [s.__dict__ for s in head.segments],
                "archive": None if head.archive is None else head.archive.__dict__,
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
    thread_id: Thread,
    from_id: Annotated[str, typer.Argument(metavar="FROM_ID")],
    to_id: Annotated[str, typer.Argument(metavar="TO_ID")],
    ns: Ns = "",
    as_json: Json = False,
    migrations: Migrations = None,
    allow_types: AllowTypes = None,
    team: InTeam = None,
) -> None:
    """What changed between two checkpoints of a thread, channel by channel (items appended to a
    list are shown as appended). Values are built as `show` builds them."""
    from langgraph_handoff.inspection import diff_checkpoints

    with open_saver(url, migrations, allow_types=allow_types, team=team) as saver:
        document(as_json, diff_checkpoints(saver, thread_id, from_id, to_id, ns))


@app.command()
def verify(
    url: Url,
    thread: Annotated[Optional[str], typer.Option("--thread", metavar="THREAD", help="only this thread")] = None,  # noqa: UP045
    as_json: Json = False,
    migrations: Migrations = None,
    team: InTeam = None,
) -> None:
    """Read every object: the format marker, checksums, versions, dangling references, keys under
    heads/ that are not heads', checkpoints missing from the metadata index (exit 1 on problems,
    and on a place that is not a store: objects none of which is langgraph-handoff's, or none).
    Every team's members' threads are checked too; --team TEAM checks only that team's (--thread
    then names one of them)."""
    from langgraph_handoff.inspection import thread_heads, verify_store

    with open_saver(url, migrations, team=team) as saver:
        if thread is not None:
            thread_heads(saver, thread).require()
        report = verify_store(saver, thread)
    marker = report.marker
    text = (
        f"checked {report.heads} heads, {report.segments} segments, {report.writes} writes, {report.blobs} blobs: "
        + ("ok" if not report.problems else f"{len(report.problems)} problem(s)")
        + "".join(f"\n  {shown(p.kind)}: {shown(p.key)}: {shown_message(p.detail)}" for p in report.problems)
        + f"\nstorage formats: {shown(dict(sorted(report.formats.items())))}, "
        f"state schemas: {shown(dict(sorted(report.schemas.items())))}"
        + (
            f", format marker: format {shown(marker['format'])}"
            if marker
            else ", format marker: none (`setup` writes one)"
        )
        + (
            f"\n{len(report.unreferenced)} unreferenced object(s) (harmless; delete_thread removes them)"
            if report.unreferenced
            else ""
        )
        + (
            f"\n{report.stale_index_entries} stale metadata-index entr(y/ies) (harmless: a filtered list reads "
            "their namespace for nothing)"
            if report.stale_index_entries
            else ""
        )
    )
    if report.empty:
        text += (
            "\nno store here: no format marker and no object at all (the wrong directory or prefix, or a store "
            "whose threads were all deleted and that `setup` never marked)"
        )
    out(as_json, report.as_dict(), text)
    if report.problems or report.empty:
        raise typer.Exit(1)
