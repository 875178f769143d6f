"""The fault campaign's racing processes: OS processes taking turns on the same threads through
the fault proxy, then the checker.

Each process builds its own saver (its own head cache, as a real worker would) on the proxy's
address, waits at a barrier with the others, then takes its turns on every shared thread in
turn; its inputs are ``u<process>.<turn>``, so each acknowledged turn is its own. A turn that
loses the race to another process is refused (``StaleWriterError``, a typed error: the caller
reads the thread again and decides) and is not taken again: the race is the point. Each process
writes what it got acknowledged and the errors it saw to a file; the parent, after joining
them all, checks every thread read without faults: each process's acknowledged turns there in
the order they returned, one chain of checkpoints, one more turn that works.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from langgraph_handoff import Layout, ObjectStoreSaver
from tests.support.fault_campaign import Report, attempt, check_store, check_thread, take_turn, turn_graph, under_faults
from tests.support.fault_proxy import FaultProxy
from tests.support.fault_stores import StoreSpec
from tests.support.processes import process_context

__all__ = ["run_racers"]


def racer(spec: StoreSpec, url: str, me: int, threads: list[str], turns: int, barrier: Any, out: str) -> None:
    """One racing process (a ``multiprocessing`` target): its turns, then its record in ``out``."""
    report = Report()
    saver = ObjectStoreSaver(spec(url), layout=Layout(backoff=0.005))
    graph = turn_graph(saver)
    acked: dict[str, list[str]] = {tid: [] for tid in threads}
    barrier.wait(120)  # all start together; a process that never came breaks it, not hangs it
    for turn in range(turns):
        for tid in threads:
            label = f"{me}.{turn}"
            report.invokes += 1
            if attempt(
                report,
                f"process {me} {tid} turn {turn}",
                lambda t=tid, la=label: take_turn(graph, t, la, spec.use_async),
            ):
                acked[tid].append(label)
    saver.store.close()
    Path(out).write_text(json.dumps({
        "acked": acked, "invokes": report.invokes, "typed": dict(report.typed),
        "samples": report.samples, "untyped": report.untyped,
    }))  # fmt: skip


def run_racers(
    proxy: FaultProxy,
    spec: StoreSpec,
    *,
    seed: int,
    processes: int = 3,
    threads: int = 2,
    turns: int = 4,
    rate: float = 0.1,
    partition_seconds: float = 0.3,
) -> Report:
    """``processes`` processes racing ``turns`` turns each on the same ``threads`` threads."""
    report = Report()
    clean = ObjectStoreSaver(spec(proxy.upstream))
    clean.setup()
    ids = [f"r{i}" for i in range(threads)]
    ctx = process_context()
    barrier = ctx.Barrier(processes)
    with tempfile.TemporaryDirectory(prefix="lgh-racers-") as tmp:
        outs = [str(Path(tmp, f"racer-{p}.json")) for p in range(processes)]
        with under_faults(proxy, report, seed=seed, rate=rate, partition_seconds=partition_seconds):
            procs = [
                ctx.Process(target=racer, args=(spec, proxy.url, p, ids, turns, barrier, outs[p]), name=f"racer-{p}")
                for p in range(processes)
            ]
            for proc in procs:
                proc.start()
            for proc in procs:
                proc.join(300)
        records: list[dict[str, Any]] = []
        for p, proc in enumerate(procs):
            if proc.exitcode != 0:
                proc.kill()
                report.dead.append(f"racer {p} ended with exit code {proc.exitcode}")
                continue
            records.append(json.loads(Path(outs[p]).read_text()))
    for record in records:
        report.invokes += record["invokes"]
        report.acknowledged += sum(len(labels) for labels in record["acked"].values())
        report.typed.update(Counter(record["typed"]))
        for name, text in record["samples"].items():
            report.samples.setdefault(name, text)
        report.untyped.extend(record["untyped"])
    graph = turn_graph(clean)
    for tid in ids:
        check_thread(report, clean, tid, [record["acked"][tid] for record in records])
        if not attempt(report, f"{tid} after the faults", lambda t=tid: take_turn(graph, t, "99")):
            report.unusable.append(f"{tid}: a turn after the faults failed")
    check_store(report, clean)
    report.figures["racing processes"] += processes
    clean.store.close()
    return report
