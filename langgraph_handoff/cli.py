"""The ``langgraph-handoff`` command: inspect and maintain what a store holds.

::

    langgraph-handoff setup    URL
    langgraph-handoff threads  URL
    langgraph-handoff history  URL THREAD [--ns NS] [--limit N]
    langgraph-handoff show     URL THREAD [--checkpoint ID] [--ns NS] [--raw]
    langgraph-handoff diff     URL THREAD FROM_ID TO_ID [--ns NS]
    langgraph-handoff verify   URL [--thread THREAD]
    langgraph-handoff prune    URL (--thread THREAD ... | --all) (--keep-latest | --older-than DAYS) [--dry-run]
    langgraph-handoff copy     URL SOURCE TARGET
    langgraph-handoff delete   URL THREAD --yes
    langgraph-handoff sessions URL [--attention] [--reclaim-as WORKER --ttl S]

Threads written by a saver with state-schema migrations need ``--migrations module:name`` (the
app's ``SchemaMigrations``); without it such checkpoints are refused, never misread.
``URL`` is what ``ObjectStoreSaver.from_url`` takes: ``file:///dir``, ``s3://bucket/prefix`` (with
``?endpoint_url=...``), ``memory://``. Every command takes ``--json`` for scripts (one JSON
document, or one per line for listings). Exit codes: 0 ok, 1 problems found (``verify``,
``sessions``), 2 bad input or a store error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langgraph_handoff import envelope, keys
from langgraph_handoff._version import __version__
from langgraph_handoff.checkpoint import records
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.errors import LangGraphHandoffError

__all__ = ["main"]


def _out(args: argparse.Namespace, obj: Any, text: str) -> None:
    print(json.dumps(obj, ensure_ascii=False, default=str) if args.json else text)


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


def _threads(saver: ObjectStoreSaver, args: argparse.Namespace) -> int:
    for row in _thread_rows(saver).values():
        row["namespaces"] = sorted(row["namespaces"])
        _out(args, row, f"{row['thread_id']}\t{len(row['namespaces'])} namespace(s)\tlatest {row['latest']}")
    return 0


def _history(saver: ObjectStoreSaver, args: argparse.Namespace) -> int:
    conf: dict[str, object] = {"thread_id": args.thread_id}
    if args.ns is not None:
        conf["checkpoint_ns"] = args.ns
    for tup in saver.list({"configurable": conf}, limit=args.limit):
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
        text = f"{row['checkpoint_id']}  step {row['step']!s:>3}  {row['source']!s:<6}  {', '.join(row['channels'])}"
        _out(args, row, text)
    return 0


def _show(saver: ObjectStoreSaver, args: argparse.Namespace) -> int:
    from langgraph_handoff.inspect import show_checkpoint

    if args.raw:
        obj = saver.store.get(keys.head_key(args.thread_id, args.ns))
        if obj is None:
            raise LangGraphHandoffError(f"thread {args.thread_id!r} namespace {args.ns!r} has no head")
        head = records.decode_head(obj.body, key=obj.key)
        raw = {
            "key": obj.key,
            "etag": obj.etag,
            "bytes": len(obj.body),
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
        }
        print(json.dumps(raw, indent=None if args.json else 2, ensure_ascii=False, default=str))
        return 0
    view = show_checkpoint(saver, args.thread_id, args.checkpoint, args.ns)
    print(json.dumps(view, indent=None if args.json else 2, ensure_ascii=False, default=str))
    return 0


def _diff(saver: ObjectStoreSaver, args: argparse.Namespace) -> int:
    from langgraph_handoff.inspect import diff_checkpoints

    result = diff_checkpoints(saver, args.thread_id, args.from_id, args.to_id, args.ns)
    print(json.dumps(result, indent=None if args.json else 2, ensure_ascii=False, default=str))
    return 0


def _verify(saver: ObjectStoreSaver, args: argparse.Namespace) -> int:
    from langgraph_handoff.inspect import verify_store

    report = verify_store(saver, args.thread)
    text = (
        f"checked {report.heads} heads, {report.segments} segments, {report.writes} writes, {report.blobs} blobs: "
        + ("ok" if not report.problems else f"{len(report.problems)} problem(s)")
        + "".join(f"\n  {p.kind}: {p.key}: {p.detail}" for p in report.problems)
    )
    _out(args, report.as_dict(), text)
    return 1 if report.problems else 0


def _prune(saver: ObjectStoreSaver, args: argparse.Namespace) -> int:
    rows = _thread_rows(saver)
    threads = sorted(rows) if args.all else list(args.thread or [])
    if not threads:
        raise LangGraphHandoffError("prune needs --thread THREAD (repeatable) or --all")
    if args.older_than is not None:
        cutoff = time.time() - args.older_than * 86400
        idle = []
        for t in threads:
            latest = saver.get_tuple({"configurable": {"thread_id": t}})
            stamp = latest.checkpoint.get("ts") if latest else None
            when = datetime.fromisoformat(stamp).timestamp() if stamp else 0.0  # ts carries its UTC offset
            if when < cutoff:
                idle.append(t)
        plan: dict[str, Any] = {"strategy": "delete idle threads", "threads": idle}
        if not args.dry_run and idle:
            saver.prune(idle, strategy="delete")
    else:
        plan = {
            "strategy": "keep_latest",
            "threads": threads,
            "checkpoints_removed": {t: _keep_latest_count(saver, t) for t in threads},
        }
        if not args.dry_run:
            saver.prune(threads, strategy="keep_latest")
    plan["dry_run"] = args.dry_run
    verb = "would prune" if args.dry_run else "pruned"
    _out(args, plan, f"{verb} ({plan['strategy']}): {', '.join(plan['threads']) or 'nothing'}")
    return 0


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


def _sessions(saver: ObjectStoreSaver, args: argparse.Namespace) -> int:
    """One line per session with its status; exit 1 if any needs attention (for monitors)."""
    from langgraph_handoff.ownership import SessionManager

    manager = SessionManager(saver)
    if args.reclaim_as is not None:
        for lease in manager.reclaim_expired(args.reclaim_as, args.ttl):
            print(json.dumps({"reclaimed": lease.thread_id, "owner": lease.owner, "epoch": lease.epoch}))
    infos = manager.sessions()
    for info in infos:
        if info.needs_attention or not args.attention:
            row = info.as_dict()
            text = f"{row['thread_id']}\t{row['status']}\towner {row['owner']}\tepoch {row['epoch']}"
            print(json.dumps(row) if args.json or args.reclaim_as else text)
    return 1 if any(i.needs_attention for i in infos) else 0


def _load_migrations(spec: str | None) -> Any:
    """``module:attribute`` naming a SchemaMigrations object (the app's, so the CLI reads what it writes)."""
    if spec is None:
        return None
    import importlib

    from langgraph_handoff.errors import InvalidConfigError
    from langgraph_handoff.migrations import SchemaMigrations

    module, _, name = spec.partition(":")
    try:
        obj = getattr(importlib.import_module(module), name or "migrations")
    except (ImportError, AttributeError) as exc:
        raise InvalidConfigError(f"--migrations {spec!r}: {exc}") from None
    if not isinstance(obj, SchemaMigrations):
        raise InvalidConfigError(f"--migrations {spec!r} is a {type(obj).__name__}, not a SchemaMigrations")
    return obj


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="langgraph-handoff", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"langgraph-handoff {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("url", help="file:///dir, s3://bucket/prefix[?endpoint_url=...] or memory://")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.add_argument(
            "--migrations",
            metavar="MODULE:NAME",
            default=None,
            help="your SchemaMigrations (e.g. myapp.schema:migrations), to read migrated threads",
        )
        return p

    command("setup", "check a store is reachable and write its format marker")
    command("threads", "list the threads a store holds")
    p = command("history", "list a thread's checkpoints, newest first")
    p.add_argument("thread_id")
    p.add_argument("--ns", default=None, help="only this checkpoint namespace ('' is the root graph)")
    p.add_argument("--limit", type=int, default=None)
    p = command("show", "one checkpoint's values, metadata and pending writes (the latest by default)")
    p.add_argument("thread_id")
    p.add_argument("--checkpoint", default=None)
    p.add_argument("--ns", default="")
    p.add_argument("--raw", action="store_true", help="the stored head as it is (records, references, lease)")
    p = command("diff", "what changed between two checkpoints of a thread")
    p.add_argument("thread_id")
    p.add_argument("from_id")
    p.add_argument("to_id")
    p.add_argument("--ns", default="")
    p = command("verify", "read every object: checksums, versions, dangling references (exit 1 on problems)")
    p.add_argument("--thread", default=None)
    p = command("prune", "keep only the latest checkpoint, or delete threads idle for DAYS")
    p.add_argument("--thread", action="append", help="a thread to prune (repeatable)")
    p.add_argument("--all", action="store_true", help="every thread")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--keep-latest", action="store_true")
    how.add_argument("--older-than", type=float, metavar="DAYS")
    p.add_argument("--dry-run", action="store_true")
    p = command("copy", "copy a thread (every namespace) to a new thread id")
    p.add_argument("source")
    p.add_argument("target")
    p = command("delete", "delete a thread and everything it stored")
    p.add_argument("thread_id")
    p.add_argument("--yes", action="store_true", help="really delete")
    p = command(
        "sessions", "list sessions and who owns them; exits 1 when some are expired, stuck in transfer or never owned"
    )
    p.add_argument("--attention", action="store_true", help="only sessions nobody is responsible for")
    p.add_argument("--reclaim-as", metavar="WORKER", default=None, help="take over expired sessions as WORKER first")
    p.add_argument("--ttl", type=float, default=30.0, help="lease seconds for --reclaim-as (default 30)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        with ObjectStoreSaver.from_url(args.url, migrations=_load_migrations(args.migrations)) as saver:
            if args.command == "setup":
                saver.setup()
                _out(
                    args,
                    {"ok": True, "store": repr(saver.store), "format": envelope.FORMAT_VERSION},
                    f"ok: {saver.store!r} is ready (envelope format {envelope.FORMAT_VERSION})",
                )
                return 0
            if args.command == "copy":
                saver.copy_thread(args.source, args.target)
                _out(args, {"copied": args.source, "to": args.target}, f"copied {args.source!r} to {args.target!r}")
                return 0
            if args.command == "delete":
                if not args.yes:
                    raise LangGraphHandoffError(f"deleting {args.thread_id!r} cannot be undone: add --yes")
                saver.delete_thread(args.thread_id)
                _out(args, {"deleted": args.thread_id}, f"deleted {args.thread_id!r}")
                return 0
            handlers = {
                "threads": _threads,
                "history": _history,
                "show": _show,
                "diff": _diff,
                "verify": _verify,
                "prune": _prune,
                "sessions": _sessions,
            }
            return handlers[args.command](saver, args)
    except LangGraphHandoffError as exc:
        print(f"langgraph-handoff: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
