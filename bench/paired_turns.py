#!/usr/bin/env python3
"""Paired long threads: several savers run the same thread turn by turn, in lockstep.

Why: ``long_threads.py`` runs one saver after another, a minute or two each. On a shared VM the
machine's speed drifts by more than the gaps the long-thread targets ask about: in the run of
2026-12-04 14:50, ours on ``memory://`` (no I/O at all) read slower than ours on ``file://`` at
turn 1,000 of the same workload. Here each saver has a process of its own (its own heap, caches
and collector, as in ``long_threads.py``), and the processes take turns: turn ``t`` on every
saver, one process at a time (the others block on a pipe), before turn ``t + 1`` on any, with
the order rotated each turn. A drift of the machine then falls on every saver alike, and the
ratio of each turn's CPU to the reference saver's is a paired measurement.

CPU is ``time.process_time`` around one sync ``invoke`` (every thread of that process, so
LangGraph's background writer counts), as in ``longwork.py``; the thread and its workloads are
``longwork.Workload``'s. Per window (the turns ``long_threads.py`` reports: 41-50 ... 901-1,000)
it prints each saver's mean CPU per turn, the ratio of means to the reference, and the median
of the per-turn ratios.

Usage (the venv needs this package, ``langgraph-checkpoint-sqlite`` and, for S3, a server)::

    python bench/paired_turns.py --workload delta-1000 --savers handoff-file,sqlite
    S3_ENDPOINT_URL=http://127.0.0.1:17411 python bench/paired_turns.py \\
        --workload delta-1000 --savers handoff-memory,handoff-file,handoff-s3,sqlite --turns 1000

Results are appended to ``bench/paired-results.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from longwork import CHECKPOINTS, window  # noqa: E402 - stdlib-only at import time

#: (first, last) turn of each window ``long_threads.py`` reports
WINDOWS = tuple((turn - window(turn) + 1, turn) for turn in CHECKPOINTS)


def worker(a: argparse.Namespace) -> None:
    """One saver's thread: wait for ``turn N`` on stdin, run it, answer ``cpu_ms wall_ms``."""
    import longwork as lw

    args = argparse.Namespace(
        saver=a.saver,
        tmp_dir=None,
        run_id=f"paired-{os.getpid()}",
        workload=a.workload,
        endpoint=a.endpoint,
        direct=a.endpoint,
        count_at=None,
        tag=None,
        latency_ms=0,
        pg_dsn=None,
    )
    with lw.open_saver(args) as (saver, _meter, _name):
        wl = lw.Workload(a.workload, saver, lw.Words())
        cfg = wl.config()
        inputs = [None] + [wl.input(t) for t in range(1, a.turns + 1)]  # built outside the timed part
        print("ready", flush=True)
        for line in sys.stdin:
            cmd = line.split()
            if cmd[0] == "stop":
                break
            turn = int(cmd[1])
            _, cpu, wall = lw.timed(lambda t=turn: wl.graph.invoke(inputs[t], cfg))
            if turn in (2, a.turns):  # a saver that lost the conversation must not look fast (untimed)
                wl.check(wl.graph.get_state(wl.state_config()).values, turn)
            print(f"{cpu:.4f} {wall:.4f}", flush=True)


def run(a: argparse.Namespace) -> dict[str, Any]:
    savers = a.savers.split(",")
    if a.reference not in savers:
        raise SystemExit(f"--reference {a.reference} is not among --savers")
    procs = {}
    for s in savers:
        cmd = [sys.executable, __file__, "--worker", "--saver", s, "--workload", a.workload, "--turns", str(a.turns)]
        if a.endpoint:
            cmd += ["--endpoint", a.endpoint]
        procs[s] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        for s, p in procs.items():
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise SystemExit(f"{s}: worker did not start")
        cpu: dict[str, list[float]] = {s: [] for s in savers}
        started = time.monotonic()
        for turn in range(1, a.turns + 1):
            k = turn % len(savers)
            for s in savers[k:] + savers[:k]:  # rotate who goes first
                p = procs[s]
                assert p.stdin is not None and p.stdout is not None
                p.stdin.write(f"turn {turn}\n")
                answer = p.stdout.readline().split()
                if len(answer) != 2:
                    raise SystemExit(f"{s}: worker failed at turn {turn}")
                cpu[s].append(float(answer[0]))
            if turn % 100 == 0:
                print(f"[paired] {a.workload}: turn {turn}, {time.monotonic() - started:.0f} s", file=sys.stderr)
    finally:
        for p in procs.values():
            if p.poll() is None and p.stdin is not None:
                p.stdin.write("stop\n")
                p.stdin.close()
        for p in procs.values():
            p.wait(timeout=120)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "workload": a.workload,
        "turns": a.turns,
        "reference": a.reference,
        "savers": savers,
        "cpu_ms": {s: [round(x, 3) for x in xs] for s, xs in cpu.items()},
        "machine": os.uname().release + f", {os.cpu_count()} cores",
    }


def windows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per window and saver: mean CPU per turn, ratio of means and median per-turn ratio to the
    reference.

    >>> r = {"turns": 50, "reference": "b", "cpu_ms": {"a": [2.0] * 50, "b": [4.0] * 49 + [40.0]}}
    >>> [(w["saver"], round(w["mean_ms"], 1), round(w["ratio_of_means"], 2), w["median_ratio"]) for w in windows(r)]
    [('a', 2.0, 0.26, 0.5), ('b', 7.6, 1.0, 1.0)]
    """
    out = []
    ref = result["cpu_ms"][result["reference"]]
    for lo, hi in WINDOWS:
        if hi > result["turns"]:
            continue
        for s, xs in result["cpu_ms"].items():
            mean = statistics.fmean(xs[lo - 1 : hi])
            out.append(
                {
                    "window": [lo, hi],
                    "saver": s,
                    "mean_ms": mean,
                    "ratio_of_means": mean / statistics.fmean(ref[lo - 1 : hi]),
                    "median_ratio": statistics.median(
                        x / y for x, y in zip(xs[lo - 1 : hi], ref[lo - 1 : hi], strict=True)
                    ),
                }
            )
    return out


def markdown(result: dict[str, Any]) -> str:
    rows = windows(result)
    lines = [
        f"`{result['workload']}`, {result['date']}, savers in lockstep, reference `{result['reference']}`: "
        "CPU ms per turn (mean), ratio of means, median of per-turn ratios",
        "",
        "| saver | " + " | ".join(f"turns {lo}-{hi}" for lo, hi in WINDOWS if hi <= result["turns"]) + " |",
        "|---|" + "---|" * sum(1 for _, hi in WINDOWS if hi <= result["turns"]),
    ]
    for s in result["savers"]:
        cells = [
            f"{r['mean_ms']:.1f} ({r['ratio_of_means']:.2f}x, {r['median_ratio']:.2f}x)"
            for r in rows
            if r["saver"] == s
        ]
        lines.append(f"| `{s}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", default="delta-1000")
    ap.add_argument("--savers", default="handoff-memory,handoff-file,sqlite")
    ap.add_argument("--reference", default="sqlite")
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--endpoint", default=os.environ.get("S3_ENDPOINT_URL"))
    ap.add_argument("--out", default=str(HERE / "paired-results.json"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--saver", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a)
        return
    result = run(a)
    print(markdown(result))
    path = Path(a.out)
    runs = json.loads(path.read_text()) if path.exists() else []
    runs.append(result)
    path.write_text(json.dumps(runs, indent=1) + "\n")


if __name__ == "__main__":
    main()
