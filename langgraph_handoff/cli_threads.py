"""The ``langgraph-handoff`` commands that read threads: ``threads``, ``history``, ``show``,
``diff`` and ``verify``."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.cli_app import (
    Json,
    Migrations,
    Ns,
    Url,
    _document,
    _out,
    _saver,
    app,
)
from langgraph_handoff.errors import LangGraphHandoffError
from langgraph_handoff.format import keys, records


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
