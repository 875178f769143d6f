"""The fault campaign: graph turns and maintenance through the fault proxy, then a checker.

One round on one store: a seeded share of every request the saver sends is failed on purpose
(resets before and after the server committed, 500 and 503, bodies cut off or cut short under
a matching length) and a partition resets everything for a moment, while conversations take
turns (each turn one ``invoke`` of a small graph) and the maintenance operations run
(``copy_thread``, ``delete_thread``, ``prune``, the TTL sweep). Then the faults stop and the
checker reads the store directly (no proxy) and fails on:

* an **untyped error**: any exception a caller saw that is not a ``LangGraphHandoffError``;
* a **lost turn**: a turn whose ``invoke`` returned (acknowledged) missing from its thread, or
  out of order;
* a **fork**: a thread whose history is not one chain (a checkpoint whose parent is not the
  one before it);
* an **unusable thread**: one more turn on every thread fails once the faults stop, or
  ``verify`` finds a problem in the store.

A turn that failed (a typed error) may or may not have stored its input; it is taken again
later, so its entries may appear twice: the checker asks only that acknowledged turns are all
there, in order. ``integration_tests/test_fault_campaign.py`` runs a short round per store in the
test command; ``scripts/faults`` runs the long campaign and prints its figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import operator
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff.errors import LangGraphHandoffError
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.stores import StoreBase
from tests.support.fault_proxy import FaultProxy

__all__ = [
    "KINDS",
    "Report",
    "attempt",
    "check_store",
    "check_thread",
    "run_round",
    "take_turn",
    "turn_graph",
    "under_faults",
]

#: the fault kinds a round draws from (``status``: 500 or 503)
KINDS = ("reset", "lose", "status", "cut", "shorten")


class _State(TypedDict):
    log: Annotated[list[str], operator.add]


def turn_graph(saver: Any) -> Any:
    """One node that answers input ``uL`` with ``aL``: a turn is one ``invoke``."""

    def model(state: _State) -> dict[str, list[str]]:
        last = state["log"][-1]
        return {"log": [f"a{last[1:]}"]}

    builder = StateGraph(_State)
    builder.add_node("model", model)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    return builder.compile(checkpointer=saver)


@dataclass
class Report:
    """What one round (or several, added up) did and found."""

    invokes: int = 0
    acknowledged: int = 0
    typed: Counter[str] = field(default_factory=Counter)
    #: the first message of each typed error seen, to read what callers were told
    samples: dict[str, str] = field(default_factory=dict)
    injected: Counter[str] = field(default_factory=Counter)
    maintenance: Counter[str] = field(default_factory=Counter)
    untyped: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    forks: list[str] = field(default_factory=list)
    unusable: list[str] = field(default_factory=list)
    #: team messages ingested more than once (or out of order), workers that died of an error
    duplicated: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)
    #: what a scenario did besides turns (kills, takeovers, transfers, threads migrated...)
    figures: Counter[str] = field(default_factory=Counter)

    @property
    def failures(self) -> list[str]:
        return self.untyped + self.lost + self.forks + self.unusable + self.duplicated + self.dead

    def add(self, other: Report) -> None:
        self.invokes += other.invokes
        self.acknowledged += other.acknowledged
        self.typed.update(other.typed)
        for name, text in other.samples.items():
            self.samples.setdefault(name, text)
        self.injected.update(other.injected)
        self.maintenance.update(other.maintenance)
        self.figures.update(other.figures)
        for name in ("untyped", "lost", "forks", "unusable", "duplicated", "dead"):
            getattr(self, name).extend(getattr(other, name))


def attempt(report: Report, what: str, call: Callable[[], Any]) -> bool:
    try:
        call()
    except LangGraphHandoffError as exc:
        report.typed[type(exc).__name__] += 1
        report.samples.setdefault(type(exc).__name__, f"{what}: {exc}"[:400])
        return False
    except Exception as exc:  # noqa: BLE001 - exactly what the campaign is looking for
        report.untyped.append(f"{what}: {type(exc).__name__}: {exc}"[:300])
        return False
    return True


def _partitions(proxy: FaultProxy, stop: threading.Event, rng: random.Random, seconds: float) -> None:
    """Cut everything off for ``seconds`` now and then, until ``stop``."""
    while not stop.wait(rng.uniform(0.5, 2.0)):
        proxy.partition = True
        stop.wait(seconds)
        proxy.partition = False


def take_turn(graph: Any, thread_id: str, label: str, use_async: bool = False) -> Any:
    """One turn (input ``u<label>``) on ``thread_id``, through the async API if ``use_async``."""
    config = {"configurable": {"thread_id": thread_id}}
    state = {"log": [f"u{label}"]}
    if use_async:
        return asyncio.run(graph.ainvoke(state, config))
    return graph.invoke(state, config)


@contextlib.contextmanager
def under_faults(
    proxy: FaultProxy, report: Report, *, seed: int, rate: float, partition_seconds: float = 0.3
) -> Iterator[None]:
    """Within this block, the proxy fails a seeded share ``rate`` of requests (every kind of
    :data:`KINDS`) and now and then cuts everything off for ``partition_seconds``; on leaving
    it, the faults stop and what was injected is added to ``report``."""
    proxy.injected.clear()
    proxy.chaos(seed, rate, KINDS)
    stop = threading.Event()
    cutter = threading.Thread(
        target=_partitions, args=(proxy, stop, random.Random(seed), partition_seconds), daemon=True
    )
    cutter.start()
    try:
        yield
    finally:
        stop.set()
        cutter.join()
        report.injected.update(proxy.injected)
        proxy.clear()


def run_round(
    proxy: FaultProxy,
    make_store: Callable[[str], StoreBase],
    *,
    seed: int,
    threads: int = 3,
    turns: int = 4,
    rate: float = 0.1,
    partition_seconds: float = 0.3,
    use_async: bool = False,
) -> Report:
    """One round on a fresh prefix: ``make_store(url)`` builds the store at ``url`` (the proxy's
    or the server's own) under the same prefix each time it is called."""
    report = Report()
    faulty = ObjectStoreSaver(make_store(proxy.url), layout=Layout(backoff=0.005))
    clean = ObjectStoreSaver(make_store(proxy.upstream))
    clean.setup()
    graph = turn_graph(faulty)
    acked: dict[str, list[int]] = {f"c{i}": [] for i in range(threads)}
    pending = {tid: list(range(turns)) for tid in acked}
    with under_faults(proxy, report, seed=seed, rate=rate, partition_seconds=partition_seconds):
        for _ in range(turns * 3):  # each turn is taken again after a failure, a few times at most
            for tid, left in pending.items():
                if not left:
                    continue
                turn = left[0]
                report.invokes += 1
                if attempt(report, f"{tid} turn {turn}", lambda t=turn, i=tid: take_turn(graph, i, f"{t}", use_async)):
                    report.acknowledged += 1
                    acked[tid].append(turn)
                    left.pop(0)
        for what, call in (
            ("copy_thread", lambda: faulty.copy_thread("c0", f"copy-{seed}")),
            ("prune", lambda: faulty.prune(["c1"], strategy="keep_latest")),
            ("delete_thread", lambda: faulty.delete_thread(f"c{threads - 1}")),
            ("sweep", lambda: faulty.sweep(default_ttl=10_000)),  # reads every head, deletes none
        ):
            report.maintenance[f"{what} {'ok' if attempt(report, what, call) else 'refused'}"] += 1
    _check(report, clean, acked, deleted=f"c{threads - 1}")
    faulty.store.close()
    clean.store.close()
    return report


def _check(report: Report, clean: ObjectStoreSaver, acked: dict[str, list[int]], *, deleted: str) -> None:
    graph = turn_graph(clean)
    for tid, turns in acked.items():
        if tid == deleted:
            continue
        config = {"configurable": {"thread_id": tid}}
        check_thread(report, clean, tid, [[str(t) for t in turns]])
        if not attempt(report, f"{tid} after the faults", lambda c=config: graph.invoke({"log": ["u99"]}, c)):
            report.unusable.append(f"{tid}: a turn after the faults failed")
    check_store(report, clean)


def check_thread(report: Report, clean: ObjectStoreSaver, tid: str, sequences: list[list[str]]) -> None:
    """Fail on a lost acknowledged turn or a fork in ``tid``, read without faults.

    ``sequences``: the labels of the acknowledged turns, one list per writer in the order its
    calls returned (turn ``L`` stored ``uL`` and its answer ``aL``); each list must appear in
    that order, and writers may interleave. A turn that failed may have stored its input anyway,
    so entries nobody acknowledged are allowed anywhere."""
    config = {"configurable": {"thread_id": tid}}
    log = clean.get_tuple(config)
    values = [] if log is None else log.checkpoint["channel_values"].get("log", [])
    for labels in sequences:
        at = 0
        for label in labels:  # acknowledged turns appear in order, each input with its answer
            pair = [f"u{label}", f"a{label}"]
            while at < len(values) - 1 and values[at : at + 2] != pair:
                at += 1
            if values[at : at + 2] != pair:
                report.lost.append(f"{tid}: acknowledged turn {label} missing (log {values})"[:400])
                break
            at += 2
    history = list(clean.list(config))
    for newer, older in itertools.pairwise(history):
        parent = (newer.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        if parent != older.config["configurable"]["checkpoint_id"]:
            report.forks.append(f"{tid}: checkpoint {newer.config['configurable']['checkpoint_id']} forks")
            break


def check_store(report: Report, clean: ObjectStoreSaver) -> None:
    """Fail if ``verify`` finds a problem anywhere in the store (read without faults)."""
    problems = verify_store(clean).problems
    if problems:
        report.unusable.append(f"verify: {problems[:3]}")


def summary(report: Report) -> str:
    """One line: what a round did, injected and saw."""
    return (
        f"invokes {report.invokes}, acknowledged {report.acknowledged}, faults {dict(report.injected)}, "
        f"typed errors {dict(report.typed)}, {dict(report.figures)}, failures {len(report.failures)}"
    )


def table(reports: dict[str, Report]) -> str:
    """The campaign's figures, one line per store (and scenario)."""
    lines = ["store and scenario      invokes  acked  faults  typed errors                            failures"]
    for name, r in reports.items():
        typed = ", ".join(f"{k} {v}" for k, v in r.typed.most_common(2))
        lines.append(
            f"{name:<22} {r.invokes:>8}  {r.acknowledged:>5}  "
            f"{sum(r.injected.values()):>6}  {typed:<38}  {len(r.failures)}"
        )
    return "\n".join(lines)
