"""The ``langgraph-handoff`` command.

Inspect what a store holds without writing code::

    langgraph-handoff setup file:///var/lib/agents
    langgraph-handoff threads s3://agents/prod?endpoint_url=http://127.0.0.1:7480
    langgraph-handoff history file:///var/lib/agents THREAD_ID [--ns NS] [--limit N]
    langgraph-handoff sessions file:///var/lib/agents [--attention] [--reclaim-as WORKER --ttl S]

Schema migration commands arrive with the migration work (see CHANGELOG).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from langgraph_handoff import envelope, keys
from langgraph_handoff._version import __version__
from langgraph_handoff.checkpoint import records
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver
from langgraph_handoff.errors import LangGraphHandoffError

__all__ = ["main"]


def _threads(saver: ObjectStoreSaver) -> int:
    rows: dict[str, list[str]] = {}
    for info in saver.store.list(keys.heads_prefix()):
        obj = saver.store.get(info.key)
        if obj is None:
            continue
        head = records.decode_head(obj.body, key=obj.key)
        if head.records:
            rows.setdefault(head.thread_id, []).append(head.checkpoint_ns)
    for thread_id, namespaces in rows.items():
        print(json.dumps({"thread_id": thread_id, "namespaces": sorted(namespaces)}))
    return 0


def _history(saver: ObjectStoreSaver, thread_id: str, ns: str | None, limit: int | None) -> int:
    conf: dict[str, object] = {"thread_id": thread_id}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    for tup in saver.list({"configurable": conf}, limit=limit):
        md = tup.metadata
        print(
            json.dumps(
                {
                    "checkpoint_id": tup.config["configurable"]["checkpoint_id"],
                    "checkpoint_ns": tup.config["configurable"]["checkpoint_ns"],
                    "parent": (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                    "source": md.get("source"),
                    "step": md.get("step"),
                    "channels": sorted(tup.checkpoint["channel_values"]),
                    "pending_writes": len(tup.pending_writes or []),
                },
                default=str,
            )
        )
    return 0


def _sessions(saver: ObjectStoreSaver, attention: bool, reclaim_as: str | None, ttl: float) -> int:
    """One JSON line per session with its status; exit 1 if any needs attention (for monitors)."""
    from langgraph_handoff.ownership import SessionManager

    manager = SessionManager(saver)
    if reclaim_as is not None:
        for lease in manager.reclaim_expired(reclaim_as, ttl):
            print(json.dumps({"reclaimed": lease.thread_id, "owner": lease.owner, "epoch": lease.epoch}))
    infos = manager.sessions()
    for info in infos:
        if info.needs_attention or not attention:
            print(json.dumps(info.as_dict()))
    return 1 if any(i.needs_attention for i in infos) else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="langgraph-handoff", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"langgraph-handoff {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("setup", help="check a store is reachable and write its format marker")
    p.add_argument("url")
    p = sub.add_parser("threads", help="list the threads a store holds (one JSON object per line)")
    p.add_argument("url")
    p = sub.add_parser("history", help="list a thread's checkpoints, newest first")
    p.add_argument("url")
    p.add_argument("thread_id")
    p.add_argument("--ns", default=None, help="only this checkpoint namespace ('' is the root graph)")
    p.add_argument("--limit", type=int, default=None)
    p = sub.add_parser(
        "sessions",
        help="list sessions and who owns them; exits 1 when some are expired, stuck in transfer or never owned",
    )
    p.add_argument("url")
    p.add_argument("--attention", action="store_true", help="only sessions nobody is responsible for")
    p.add_argument("--reclaim-as", metavar="WORKER", default=None, help="take over expired sessions as WORKER first")
    p.add_argument("--ttl", type=float, default=30.0, help="lease seconds for --reclaim-as (default 30)")
    args = parser.parse_args(argv)
    try:
        with ObjectStoreSaver.from_url(args.url) as saver:
            if args.command == "setup":
                saver.setup()
                print(f"ok: {saver.store!r} is ready (envelope format {envelope.FORMAT_VERSION})")
                return 0
            if args.command == "threads":
                return _threads(saver)
            if args.command == "sessions":
                return _sessions(saver, args.attention, args.reclaim_as, args.ttl)
            return _history(saver, args.thread_id, args.ns, args.limit)
    except LangGraphHandoffError as exc:
        print(f"langgraph-handoff: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
