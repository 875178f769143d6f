"""The ``langgraph-handoff`` command.

Inspect what a store holds without writing code::

    langgraph-handoff setup file:///var/lib/agents
    langgraph-handoff threads s3://agents/prod?endpoint_url=http://127.0.0.1:7480
    langgraph-handoff history file:///var/lib/agents THREAD_ID [--ns NS] [--limit N]

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
    args = parser.parse_args(argv)
    try:
        with ObjectStoreSaver.from_url(args.url) as saver:
            if args.command == "setup":
                saver.setup()
                print(f"ok: {saver.store!r} is ready (envelope format {envelope.FORMAT_VERSION})")
                return 0
            if args.command == "threads":
                return _threads(saver)
            return _history(saver, args.thread_id, args.ns, args.limit)
    except LangGraphHandoffError as exc:
        print(f"langgraph-handoff: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
