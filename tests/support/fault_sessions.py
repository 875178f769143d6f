"""The fault campaign's session ownership: ``SessionWorker`` s serving sessions through the
fault proxy, with heartbeats, a takeover, a zombie and a planned transfer, then the checker.

Lease expiry runs on an injected clock (the heartbeat is called by hand, ``beat()``, between
rounds), so which worker holds what at each step is decided by the script, not by timing:

1. worker ``a`` serves every session a few turns, beating between rounds;
2. ``a`` dies (its heartbeat stops), its leases expire, and ``b`` reclaims them (a takeover,
   epoch + 1) and serves; ``a``'s old graph, a zombie, tries one more turn, which the store must
   refuse (a write it accepted would be a fork of ``b``'s history);
3. ``b`` stops (a planned transfer: lock + note), ``c`` accepts the transfers and serves.

Every step may fail with a typed error under the faults (a session ``b.stop()`` could not hand
over stays ``b``'s until its lease expires). After the faults stop, the leases expire and a last
worker reclaims or accepts every session and takes one more turn on each: a session it cannot
get, or a turn that fails, is an unusable session. Then each thread is checked for lost
acknowledged turns and forks, and the store with ``verify``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff.ownership import SessionManager, SessionWorker
from tests.support.fault_campaign import Report, attempt, check_store, check_thread, turn_graph, under_faults
from tests.support.fault_proxy import FaultProxy
from tests.support.fault_stores import StoreSpec

__all__ = ["run_sessions"]

TTL = 30.0


class _Clock:
    """The leases' clock, moved by the script."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _invoke(worker: SessionWorker, tid: str, label: str, use_async: bool) -> Any:
    state = {"log": [f"u{label}"]}
    if use_async:
        return asyncio.run(worker.ainvoke(tid, state))
    return worker.invoke(tid, state)


def run_sessions(
    proxy: FaultProxy,
    spec: StoreSpec,
    *,
    seed: int,
    sessions: int = 3,
    turns: int = 2,
    rate: float = 0.1,
    partition_seconds: float = 0.3,
) -> Report:
    report = Report()
    clock = _Clock()
    clean = ObjectStoreSaver(spec(proxy.upstream))
    clean.setup()
    clean_sessions = SessionManager(clean, clock=clock)
    ids = [f"s{i}" for i in range(sessions)]
    acked: dict[str, list[str]] = {tid: [] for tid in ids}
    savers: list[ObjectStoreSaver] = []

    def worker(name: str) -> SessionWorker:
        saver = ObjectStoreSaver(spec(proxy.url), layout=Layout(backoff=0.005))
        savers.append(saver)  # heartbeat=1 h: the script beats by hand, no thread does on a timer
        return SessionWorker(SessionManager(saver, clock=clock), name, turn_graph, ttl=TTL, heartbeat=3600)

    def serve(w: SessionWorker) -> None:
        for turn in range(turns):
            for tid in ids:
                label = f"{w.owner}.{turn}"
                report.invokes += 1
                if attempt(
                    report, f"{w.owner} {tid} turn {turn}", lambda t=tid, la=label: _invoke(w, t, la, spec.use_async)
                ):
                    report.acknowledged += 1
                    acked[tid].append(label)
            w.beat()  # the heartbeat: renews what it holds, never raises
            clock.now += TTL / 3

    def tries(what: str, call: Any, n: int = 4) -> Any:
        """``call`` until it works, ``n`` times at most (each failure typed, or counted untyped)."""
        result: list[Any] = []
        for _ in range(n):
            if attempt(report, what, lambda: result.append(call())):
                return result[0]
        return None

    with under_faults(proxy, report, seed=seed, rate=rate, partition_seconds=partition_seconds):
        a = worker("a")
        serve(a)
        a._stopping.set()  # a dies: no heartbeat, no more work
        zombie = dict(a.leases)
        clock.now += TTL + 1
        b = worker("b")
        report.figures["takeovers"] += len(tries("b reclaim", b.reclaim) or [])
        serve(b)
        owners = {tid: clean_sessions.get(tid) for tid in zombie}
        for tid, lease in zombie.items():  # a wakes up and writes with its old lease
            late = turn_graph(a.sessions.saver.with_lease(lease))
            config = {"configurable": {"thread_id": tid}}
            taken = (owners.get(tid) or lease).epoch > lease.epoch  # read without faults
            if attempt(report, f"zombie a {tid}", lambda g=late, c=config: g.invoke({"log": ["uzombie"]}, c)):
                if taken:
                    report.forks.append(f"{tid}: a zombie's turn (epoch {lease.epoch}) was accepted after a takeover")
            elif taken:
                report.figures["zombie turns refused"] += 1
        handed = tries("b stop", b.stop, n=1) or []
        report.figures["sessions handed over"] += len(handed)
        c = worker("c")
        report.figures["transfers accepted"] += len(tries("c accept_transfers", c.accept_transfers) or [])
        serve(c)
        c._stopping.set()
    clock.now += TTL + 1  # every lease left has expired, every transfer is stuck
    last = SessionWorker(SessionManager(clean, clock=clock), "last", turn_graph, ttl=TTL, heartbeat=3600)
    if not attempt(report, "last worker reclaims", lambda: (last.reclaim(), last.accept_transfers())):
        report.unusable.append("reclaiming the sessions after the faults failed")
    for tid in ids:
        if not attempt(report, f"{tid} after the faults", lambda t=tid: last.invoke(t, {"log": ["u99"]})):
            report.unusable.append(f"{tid}: no turn after the faults ({last.sessions.get(tid)})")
    last.stop()
    for tid in ids:
        check_thread(report, clean, tid, [acked[tid]])
    check_store(report, clean)
    for saver in savers:
        saver.store.close()
    clean.store.close()
    return report
