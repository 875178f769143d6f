#!/usr/bin/env python3
"""A store-wide filtered list, ``list(None, filter={"user_id": U})``, as the store grows.

What an application does to list one user's conversations. Each store holds N threads of two
checkpoints, ten threads per user; the query asks for one user's (10 threads, 20 checkpoints).
For this package it runs on a saver built afresh (another process: nothing cached), and is
printed with its requests (``CountingStore``) and wall time:

* ``handoff``: with the metadata index (declared complete by ``setup()`` on the fresh store);
* ``handoff-walk``: the same query on a key that is not indexed (``tag``, one value per user
  as well): what every filter cost before the index, and what an unindexed filter costs now;
* ``sqlite``: ``SqliteSaver`` on a temp file (``json_extract`` over the table);
* ``postgres``: ``PostgresSaver`` when ``--postgres-dsn`` names a server (``metadata @>``).

Run with this package's venv; SqliteSaver and PostgresSaver (``langgraph-checkpoint-sqlite``,
``langgraph-checkpoint-postgres``, ``psycopg``) must be importable (they are not dependencies of
this package: put them on ``PYTHONPATH``)::

    python bench/metadata_index.py --sizes 1000,10000 --url memory://
    python bench/metadata_index.py --sizes 1000,10000 --url 's3://bench/mdx?endpoint_url=http://127.0.0.1:7480'
    python bench/metadata_index.py --sizes 100000 --url file:///tmp/mdx --savers handoff,sqlite

The store is filled with direct ``put`` calls (no graph), the same checkpoints for every saver.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langgraph.checkpoint.base.id import uuid6

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import CountingStore
from langgraph_handoff.stores.urls import store_from_url

PER_USER = 10


def checkpoint(cid: str, step: int) -> dict[str, Any]:
    return {"v": 4, "id": cid, "ts": "2026-12-07T00:00:00+00:00", "channel_values": {"messages": f"turn {step}"},
            "channel_versions": {"messages": step}, "versions_seen": {}, "updated_channels": None}  # fmt: skip


def fill(saver: Any, n: int, start: int = 0, workers: int = 1) -> None:
    """Threads ``start`` .. ``n - 1``: two checkpoints each, user ``u{i // PER_USER}``."""

    def one(i: int) -> None:
        user = f"u{i // PER_USER:06}"
        md = {"source": "loop", "step": 1, "parents": {}, "user_id": user, "tag": "x" + user}
        cfg = {"configurable": {"thread_id": f"thread-{i:06}", "checkpoint_ns": ""}}
        first = saver.put(cfg, checkpoint(str(uuid6()), 1), md, {"messages": 1})
        saver.put(first, checkpoint(str(uuid6()), 2), {**md, "step": 2}, {"messages": 2})

    if workers <= 1:
        for i in range(start, n):
            one(i)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, range(start, n)))


def timed(query: Callable[[], list[Any]]) -> tuple[float, int]:
    t0 = time.perf_counter()
    found = query()
    return time.perf_counter() - t0, len(found)


def run_handoff(url: str, sizes: list[int], walk_max: int, workers: int) -> list[dict[str, Any]]:
    rows = []
    store = CountingStore(store_from_url(url))
    saver = ObjectStoreSaver(store)
    saver.setup()  # a fresh store: the metadata index is declared complete
    have = 0
    for n in sizes:
        t0 = time.perf_counter()
        fill(saver, n, have, workers)
        built = time.perf_counter() - t0
        have = n
        needle = f"u{(n // PER_USER) // 2:06}"
        for name, flt in (("handoff", {"user_id": needle}), ("handoff-walk", {"tag": "x" + needle})):
            if name == "handoff-walk" and n > walk_max:
                continue
            fresh = ObjectStoreSaver(store)  # another process: nothing remembered
            store.reset()
            seconds, found = timed(lambda f=flt, s=fresh: list(s.list(None, filter=f)))
            rows.append({"saver": name, "threads": n, "found": found, "seconds": round(seconds, 4),
                         "requests": store.requests, "round_trips": store.snapshot()["round_trips"],
                         "build_s": round(built, 1)})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    return rows


def run_sql(kind: str, sizes: list[int], dsn: str | None) -> list[dict[str, Any]]:
    rows = []
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = os.path.join(tempfile.mkdtemp(prefix="mdx-sqlite-"), "db.sqlite")
        saver: Any = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
        saver.setup()
    else:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver

        conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=0)
        for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints", "checkpoint_migrations"):
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        saver = PostgresSaver(conn)
        saver.setup()
    have = 0
    for n in sizes:
        t0 = time.perf_counter()
        fill(saver, n, have)
        built = time.perf_counter() - t0
        have = n
        needle = f"u{(n // PER_USER) // 2:06}"
        seconds, found = timed(lambda u=needle: list(saver.list(None, filter={"user_id": u})))
        rows.append({"saver": kind, "threads": n, "found": found, "seconds": round(seconds, 4), "requests": None,
                     "round_trips": None, "build_s": round(built, 1)})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="thread counts, ascending (the store grows)")
    ap.add_argument("--url", default="memory://", help="the store for this package's saver")
    ap.add_argument("--savers", default="handoff,sqlite,postgres")
    ap.add_argument("--postgres-dsn", default=os.environ.get("MDX_POSTGRES_DSN"))
    ap.add_argument("--walk-max", type=int, default=10_000, help="largest store the unindexed walk runs on")
    ap.add_argument("--workers", type=int, default=1, help="threads filling the store (this package's)")
    ap.add_argument("--json", help="append the rows to this file")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    savers = args.savers.split(",")
    rows: list[dict[str, Any]] = []
    if "handoff" in savers:
        rows += run_handoff(args.url, sizes, args.walk_max, args.workers)
    if "sqlite" in savers:
        rows += run_sql("sqlite", sizes, None)
    if "postgres" in savers:
        if args.postgres_dsn:
            rows += run_sql("postgres", sizes, args.postgres_dsn)
        else:
            print("postgres: skipped (no --postgres-dsn)", file=sys.stderr)
    print(f"\n{'saver':<14}{'threads':>9}{'found':>7}{'seconds':>10}{'requests':>10}")
    for r in rows:
        print(f"{r['saver']:<14}{r['threads']:>9}{r['found']:>7}{r['seconds']:>10}{r['requests'] or '-':>10}")
    if args.json:
        with open(args.json, "a") as fh:
            for r in rows:
                fh.write(json.dumps({**r, "url": args.url if r["saver"].startswith("handoff") else None}) + "\n")


if __name__ == "__main__":
    main()
