#!/usr/bin/env python3
"""What telemetry costs per turn: client CPU of a short-thread turn on memory:// and file://
with telemetry off, and on with the OpenTelemetry SDK recording every span (an in-memory
exporter) and every metric (an in-memory reader), in the same process, paired.

Each round runs T turns on N threads in each mode, alternating which goes first; the figures
are medians over the rounds, and the ratio is on / off. ``off`` is what a user without the
``otel`` extra, or with ``LANGGRAPH_HANDOFF_TELEMETRY=off``, or without an SDK set up, runs.

    python bench/telemetry_cost.py [--rounds 7]
    python bench/telemetry_cost.py --store-spans   # "on" makes a span per store request too
    python bench/telemetry_cost.py --baseline /path/to/older/checkout   # off here against there

``--baseline``: instead, runs the same turns with telemetry off in a fresh process on this
checkout and on another one (a release without telemetry), alternating, and prints the ratio:
what telemetry costs a user who does not turn it on.

Not a test: it prints figures (docs/observability.md, "What it costs").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langgraph_handoff import ObjectStoreSaver, telemetry

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ownership_cost import build  # the same one-node graph, turn for turn

from langgraph_handoff.stores import LocalStore, MemoryStore, StoreBase


def turns(make: Callable[[], StoreBase], threads: int, count: int) -> float:
    graph = build(ObjectStoreSaver(make()))
    for i in range(threads):
        graph.invoke({"messages": ["u"]}, {"configurable": {"thread_id": f"t{i}"}})
    t0 = time.process_time()
    for n in range(count):
        for i in range(threads):
            graph.invoke({"messages": [f"u{n}"]}, {"configurable": {"thread_id": f"t{i}"}})
    return (time.process_time() - t0) / (threads * count) * 1e6


_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2])
import os; os.environ["LANGGRAPH_HANDOFF_TELEMETRY"] = "off"
from telemetry_cost import turns, STORES
print(turns(STORES()[sys.argv[3]], int(sys.argv[4]), int(sys.argv[5])))
"""


def STORES() -> dict[str, Callable[[], StoreBase]]:
    tmp = tempfile.mkdtemp(prefix="bench-otel-")
    return {"memory://": MemoryStore, "file://": lambda: LocalStore(os.path.join(tmp, uuid.uuid4().hex))}


def baseline(other: str, args: argparse.Namespace) -> None:
    import subprocess

    here = str(Path(__file__).resolve().parents[1])
    bench = str(Path(__file__).resolve().parent)
    print(f"{time.strftime('%Y-%m-%d')}: telemetry off, this checkout against {other}; median of {args.rounds}")
    print(f"{'store':<10} {'before µs':>10} {'after µs':>10} {'after/before':>13}")
    for name in STORES():
        cpu: dict[str, list[float]] = {"before": [], "after": []}
        for r in range(args.rounds):
            order = [("before", other), ("after", here)]
            for mode, root in order if r % 2 == 0 else order[::-1]:
                cmd = [sys.executable, "-c", _CHILD, root, bench, name, str(args.threads), str(args.turns)]
                cpu[mode].append(float(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout))
        a, b = statistics.median(cpu["before"]), statistics.median(cpu["after"])
        print(f"{name:<10} {a:>10.0f} {b:>10.0f} {b / a:>13.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", help="another checkout: compare telemetry off here against it")
    ap.add_argument("--threads", type=int, default=20)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--store-spans", action="store_true", help="on: a span per store request too")
    args = ap.parse_args()
    if args.baseline:
        baseline(args.baseline, args)
        return
    stores = STORES()
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

    def off() -> None:
        telemetry.configure(enabled=False)

    def on() -> None:
        telemetry.configure(enabled=True, tracer_provider=tracer_provider, meter_provider=meter_provider)
        telemetry.configure(store_spans=args.store_spans)

    spanned = ", store spans on" if args.store_spans else ""
    print(
        f"{time.strftime('%Y-%m-%d')}: {args.threads} threads x {args.turns} turns, median of {args.rounds} rounds{spanned}"
    )
    print(f"{'store':<10} {'off µs/turn':>12} {'on µs/turn':>12} {'on/off':>7}")
    for name, make in stores.items():
        cpu: dict[str, list[float]] = {"off": [], "on": []}
        for r in range(args.rounds):
            order = [("off", off), ("on", on)]
            for mode, switch in order if r % 2 == 0 else order[::-1]:
                switch()
                cpu[mode].append(turns(make, args.threads, args.turns))
                spans.clear()
        a, b = statistics.median(cpu["off"]), statistics.median(cpu["on"])
        print(f"{name:<10} {a:>12.0f} {b:>12.0f} {b / a:>7.2f}")
    telemetry.configure(enabled=True, store_spans=False)


if __name__ == "__main__":
    main()
