#!/usr/bin/env python3
"""Store-wide walks on ``file://`` as the store grows: is each one linear in the threads?

    .venv/bin/python bench/file_walks.py                          # 1,000 / 10,000 / 30,000 / 100,000 threads
    .venv/bin/python bench/file_walks.py --sizes 1000,10000 --dir /tmp/walks
    PYTHONPATH=/work/main .venv/bin/python bench/file_walks.py    # the same against another checkout
    .venv/bin/python bench/file_walks.py --memo 1048576           # LocalStore(stat_memo=1048576)

For each size it builds a store of that many threads (reused from ``--dir`` when a store of that
size is there already, so runs against two checkouts time the same files), each written through
the saver's own ``put`` and ``put_writes`` (:data:`TURNS` checkpoints per thread, each with one
task's writes; metadata ``user_id`` one of 100), then times each walk in a fresh saver
("cold": an empty listing memo, with the kernel's caches holding the store: it is read once
first) and again in the same saver ("warm"), ``--repeat`` times, keeping the least of each:

* ``threads``: :func:`~langgraph_handoff.inspection.list_threads` (the CLI's ``threads``);
* ``filtered``: ``list(None, filter={"user_id": ...}, limit=10)`` for a user with no threads, so
  every thread is read (an application listing one user's conversations, unindexed);
* ``sweep``: ``sweep(dry_run=True)`` with a TTL no thread has reached (deletes nothing);
* ``verify``: :func:`~langgraph_handoff.inspection.verify_store` of the whole store.

Before timing, it waits until the newest write is :data:`~langgraph_handoff.stores.stat_memo.
COARSE_SETTLED_NS` old: a store that is being written to keeps its newest directories out of the
memo, and what is measured here is a store at rest. The growth exponent between two sizes is
``log(t2 / t1) / log(n2 / n1)`` of the CPU seconds: 1 is linear, 2 quadratic. Figures in
docs/performance-log.md, "Store-wide walks on ``file://``".
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.inspection import list_threads, verify_store
from langgraph_handoff.stores import LocalStore

_CP_ID = "1ef4f797-8335-6428-8001-{:012x}"
#: checkpoints (each with one task's writes) per thread
TURNS = 3
WALKS = ("threads", "filtered", "sweep", "verify")


def build(root: Path, n: int) -> None:
    """``n`` threads under ``root`` (kept: a marker file says the build finished)."""
    done = root / ".built"
    if done.exists() and done.read_text() == str(n):
        return
    if root.exists() and any(root.iterdir()):
        sys.exit(f"{root} holds something other than a finished build of {n} threads: remove it")
    saver = ObjectStoreSaver(LocalStore(root, fsync=False))
    t0 = time.perf_counter()
    for i in range(n):
        cfg: Any = {"configurable": {"thread_id": f"thread-{i:07d}", "checkpoint_ns": ""}}
        for turn in range(TURNS):  # a short conversation: a checkpoint and a task's writes per turn
            cp: Any = {
                "v": 4,
                "id": _CP_ID.format(i * TURNS + turn),
                "ts": "2026-12-07T00:00:00+00:00",
                "channel_values": {"messages": [f"hello {i}"] * (turn + 1), "step": turn},
                "channel_versions": {"messages": turn + 1, "step": turn + 1},
                "versions_seen": {},
            }
            meta: Any = {"source": "loop", "step": turn, "user_id": f"user-{i % 100}"}
            cfg = saver.put(cfg, cp, meta, {"messages": turn + 1, "step": turn + 1})
            saver.put_writes(cfg, [("messages", f"reply {turn}")], task_id=f"task-{turn}")
    saver.close()
    done.write_text(str(n))
    print(f"built {n} threads in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


def settle(root: Path) -> None:
    """Wait until the store's newest change is older than the memo's window for directories."""
    from langgraph_handoff.stores.stat_memo import COARSE_SETTLED_NS

    newest = max(os.stat(p).st_mtime_ns for p in (root, root / "heads", root / ".built"))
    while time.time_ns() < newest + COARSE_SETTLED_NS + 100_000_000:
        time.sleep(0.1)


def walk(saver: ObjectStoreSaver, name: str) -> int:
    """Run walk ``name``; what it found (to check that every size did the whole walk)."""
    if name == "threads":
        return len(list_threads(saver).rows)
    if name == "filtered":
        return len(list(saver.list(None, filter={"user_id": "nobody"}, limit=10)))
    if name == "sweep":
        return int(saver.sweep(dry_run=True, default_ttl=10**9).kept)
    return verify_store(saver).heads


def warm_kernel(root: Path) -> None:
    """Read every file of the store once, so that the kernel's page, inode and dentry caches hold
    it before timing: "cold" then means an empty listing memo, the same for every size. Without
    this, whether a store was read a minute before (by the previous size's run, a profile) moved
    a cold walk's system time by half."""
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as fh:
                while fh.read(1 << 20):
                    pass


def timed(root: Path, walks: list[str], memo: bool | int = True, repeat: int = 1) -> dict[str, dict[str, float]]:
    """Each walk cold (a fresh saver) then warm (the same saver again): CPU seconds of this
    process, user and system apart (what the exponents use: the wall time of a VM that other
    jobs share varies with them; system time is the kernel's, which slows as its inode and
    dentry caches fill with a million files) and wall seconds."""
    out: dict[str, dict[str, float]] = {}
    for name in walks:
        row: dict[str, float] = {}
        for _ in range(repeat):  # the least of each figure: the run least disturbed by other jobs
            saver = ObjectStoreSaver(LocalStore(root, fsync=False, stat_memo=memo))
            for when in ("cold", "warm"):
                c0, t0 = os.times(), time.perf_counter()
                found = walk(saver, name)
                c1 = os.times()
                got = {"_user": c1.user - c0.user, "_sys": c1.system - c0.system, "_wall": time.perf_counter() - t0}
                got[""] = got["_user"] + got["_sys"]
                for suffix, value in got.items():
                    row[when + suffix] = min(value, row.get(when + suffix, math.inf))
            saver.close()
        row["found"] = found
        out[name] = row
        print(
            f"  {name}: CPU cold {row['cold']:.2f} s (user {row['cold_user']:.2f}, system {row['cold_sys']:.2f}), "
            f"warm {row['warm']:.2f} s (user {row['warm_user']:.2f}, system {row['warm_sys']:.2f}); "
            f"wall cold {row['cold_wall']:.2f} s, warm {row['warm_wall']:.2f} s ({found})",
            file=sys.stderr,
            flush=True,
        )
    return out


def exponent(n1: int, t1: float, n2: int, t2: float) -> float:
    return math.log(t2 / t1) / math.log(n2 / n1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000,10000,30000,100000")
    p.add_argument("--walks", default=",".join(WALKS))
    p.add_argument("--dir", default="/tmp/lgh-file-walks", help="where the stores are built (and kept)")
    p.add_argument("--json", help="append the results to this file")
    p.add_argument("--memo", type=int, help="LocalStore(stat_memo=N): entries the listing memo keeps")
    p.add_argument("--repeat", type=int, default=3, help="runs of each walk; the least figure of each is kept")
    a = p.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    walks = a.walks.split(",")
    import langgraph_handoff

    print(f"# langgraph_handoff from {Path(langgraph_handoff.__file__).parent.parent}")
    results: dict[int, dict[str, dict[str, float]]] = {}
    for n in sizes:
        root = Path(a.dir) / str(n)
        build(root, n)
        settle(root)
        warm_kernel(root)
        results[n] = timed(root, walks, True if a.memo is None else a.memo, a.repeat)
        cells = "  ".join(f"{w} {r['cold']:7.2f} / {r['warm']:7.2f}" for w, r in results[n].items())
        print(f"{n:>7} threads  (CPU s, cold / warm)  {cells}", flush=True)
    for lo, hi in itertools.pairwise(sizes):
        cells = "  ".join(
            f"{w} {exponent(lo, results[lo][w]['cold'], hi, results[hi][w]['cold']):.2f}"
            f" / {exponent(lo, results[lo][w]['warm'], hi, results[hi][w]['warm']):.2f}"
            for w in walks
        )
        print(f"exponent {lo:>6} -> {hi:>6}  (of CPU, cold / warm)  {cells}")
        cells = "  ".join(
            f"{w} {exponent(lo, results[lo][w]['cold_user'], hi, results[hi][w]['cold_user']):.2f}"
            f" / {exponent(lo, results[lo][w]['warm_user'], hi, results[hi][w]['warm_user']):.2f}"
            for w in walks
        )
        print(f"exponent {lo:>6} -> {hi:>6}  (of user CPU alone)     {cells}")
    if a.json:
        with open(a.json, "a") as fh:
            json.dump({"date": time.strftime("%Y-%m-%d"), "results": results}, fh)
            fh.write("\n")


if __name__ == "__main__":
    main()
