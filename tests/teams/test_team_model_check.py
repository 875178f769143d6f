"""A model check of the team mailbox protocol: random schedules of sends, retries, receives,
crashes, lease takeovers and clean-up, with the interleaving forced at every store operation,
checked against a reference model of what was sent.

Each actor (a sender, a ``TeamWorker``, a lease-less consumer) runs in its own thread with its own
saver (its own cache, like a process) behind a :class:`Gate`: every store operation it makes waits
until the scheduler grants it, one operation at a time in the whole system. The scheduler waits
until every live actor is blocked at an operation (or done), then picks one at random to run, or
crashes that actor there: its pending and future operations raise :class:`Crash`, a
``BaseException`` nothing in the package catches, so the actor stops dead mid-protocol, as a
SIGKILL would stop a process. Lease expiry is forced by moving a shared fake clock. No sleeps: every
wait is on a condition the scheduler controls.

The reference model: every send that *returned* is ingested by its recipient exactly once; nothing
is ingested that was never sent; each sender's messages to a recipient are ingested in send order.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import MessageIngestedError, StaleWriterError
from langgraph_handoff.stores import MemoryStore, StoreBase
from langgraph_handoff.teams import Team, TeamWorker
from langgraph_handoff.teams.acks import ack_rider
from tests.support.team_harness import InterceptingStore
from tests.support.team_helpers import Clock, echo_build, ingested


class Crash(BaseException):
    """The actor dies here (a SIGKILL at a store operation)."""


@dataclass
class Request:
    actor: str
    kind: str
    key: str
    granted: bool = False
    crashed: bool = False
    done: bool = False


@dataclass
class Actor:
    name: str
    pending: list[Request] = field(default_factory=list)
    finished: bool = False
    crashed: bool = False
    error: BaseException | None = None


class Scheduler:
    def __init__(self, rng: random.Random, *, crash_p: float, max_crashes: int, max_ops: int = 60_000) -> None:
        self.rng, self.crash_p, self.crashes_left, self.max_ops = rng, crash_p, max_crashes, max_ops
        self.cv = threading.Condition()
        self.actors: dict[str, Actor] = {}
        self.ops = 0
        self.crashes: list[tuple[str, str, str]] = []

    def request(self, actor: str, kind: str, key: str) -> None:
        with self.cv:
            a = self.actors[actor]
            if a.crashed:
                raise Crash(actor)
            req = Request(actor, kind, key)
            a.pending.append(req)
            self.cv.notify_all()
            self.cv.wait_for(lambda: req.granted or req.crashed)
            if req.crashed:
                raise Crash(actor)

    def release(self, actor: str) -> None:
        with self.cv:
            a = self.actors[actor]
            for r in a.pending:
                if r.granted and not r.done:
                    r.done = True
                    a.pending.remove(r)
                    break
            self.cv.notify_all()

    def spawn(self, name: str, body: Callable[[], None]) -> threading.Thread:
        with self.cv:
            self.actors[name] = Actor(name)

        def run() -> None:
            try:
                body()
            except Crash:
                pass
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.actors[name].error = exc
            finally:
                with self.cv:
                    self.actors[name].finished = True
                    self.cv.notify_all()

        t = threading.Thread(target=run, name=name, daemon=True)
        t.start()
        return t

    def step(self, between: Callable[[], None]) -> bool:
        """Wait until every live actor is at an operation or done; run or crash one. False when
        every actor has finished."""
        with self.cv:
            self.cv.wait_for(lambda: all(a.finished or any(not r.granted for r in a.pending)
                                         for a in self.actors.values()))  # fmt: skip
            waiting = [a for a in self.actors.values() if not a.finished and any(not r.granted for r in a.pending)]
            if not waiting:
                return False
        between()
        with self.cv:
            actor = self.rng.choice(waiting)
            req = self.rng.choice([r for r in actor.pending if not r.granted])
            self.ops += 1
            assert self.ops < self.max_ops, "the schedule does not terminate"
            if self.crashes_left and actor.name.startswith("w") and self.rng.random() < self.crash_p:
                self.crashes_left -= 1
                actor.crashed = True
                self.crashes.append((actor.name, req.kind, req.key))
                for r in actor.pending:
                    r.crashed = True
                actor.pending.clear()
                self.cv.notify_all()
                return True
            req.granted = True
            self.cv.notify_all()
            self.cv.wait_for(lambda: req.done or actor.finished)
        return True


class Gate(InterceptingStore):
    """One actor's view of the shared store: every operation waits for the scheduler."""

    def __init__(self, inner: StoreBase, sched: Scheduler, actor: str) -> None:
        self.inner, self.sched, self.actor = inner, sched, actor

    def _around(self, kind: str, key: str, call: Callable[[], Any]) -> Any:
        self.sched.request(self.actor, kind, key)
        try:
            return call()
        finally:
            self.sched.release(self.actor)


RECIPIENTS = ("a", "b")
SENDERS = ("s1", "s2", "s3")
PER_SENDER = 6
TTL = 30.0


def run_schedule(seed: int, *, leases: bool) -> dict[str, Any]:
    rng = random.Random(seed)
    shared = MemoryStore()
    clock = Clock()
    setup = Team(ObjectStoreSaver(shared), "mc", clock=clock)
    for r in RECIPIENTS:
        setup.spawn(r, role="echo")
    sched = Scheduler(rng, crash_p=0.03, max_crashes=3)
    attempted: dict[str, list[str]] = {s: [] for s in SENDERS}
    returned: dict[str, list[str]] = {s: [] for s in SENDERS}
    stop = threading.Event()

    def team_for(actor: str) -> Team:
        return Team(ObjectStoreSaver(Gate(shared, sched, actor)), "mc", clock=clock)

    def sender(name: str) -> Callable[[], None]:
        def body() -> None:
            team = team_for(name)
            for i in range(PER_SENDER):
                to = RECIPIENTS[i % len(RECIPIENTS)]
                key = f"{name}-{i}"
                attempted[name].append(team.keyed_id(to, name, key))
                msg = team.send(to, f"{name} {i}", sender=name, idempotency_key=key)
                returned[name].append(msg.id)
                if rng.random() < 0.2:  # a retry after a lost answer, at once or much later
                    team.send(to, f"{name} {i}", sender=name, idempotency_key=key)
                if i and rng.random() < 0.2:
                    j = rng.randrange(i)
                    team.send(
                        RECIPIENTS[j % len(RECIPIENTS)], f"{name} {j}", sender=name, idempotency_key=f"{name}-{j}"
                    )

        return body

    def worker(name: str) -> Callable[[], None]:
        def body() -> None:
            team = team_for(name)
            # the poison budget is not under test here: expiring leases count as failed attempts
            w = TeamWorker(team, name, {"echo": echo_build}, auto_reply=False, ttl=TTL, heartbeat=10 * TTL,
                           max_failures=1000)  # fmt: skip
            w._stopping.clear()
            while not stop.is_set():
                w.step()

        return body

    def consumer(name: str) -> Callable[[], None]:
        """No lease: receive, turn with the ack rider, delete (the protocol alone)."""

        def body() -> None:
            team = team_for(name)
            while not stop.is_set():
                for r in RECIPIENTS:
                    cfg = {"configurable": {"thread_id": team.thread_id(r)}}
                    plain = echo_build(team.member_saver)
                    if plain.get_state(cfg).tasks:  # a turn a dead consumer left half done
                        with contextlib.suppress(StaleWriterError):
                            plain.invoke(None, cfg, durability="sync")
                    receipt = team.receive(r)
                    if receipt is None:
                        continue
                    if receipt.selection.done:
                        team.delete_ingested(r, receipt.selection.done)
                    ready = receipt.selection.ready
                    if not ready:
                        continue
                    thread = team.thread_id(r)
                    rider = ack_rider(thread, ready, f"{name}-{rng.random()}", clock(), team.window)
                    graph = echo_build(team.member_saver.with_head_rider(thread, rider))
                    try:
                        graph.invoke({"messages": [m.as_human_message() for m in ready]},
                                     {"configurable": {"thread_id": thread}}, durability="sync")  # fmt: skip
                    except (MessageIngestedError, StaleWriterError):
                        continue
                    team.delete_ingested(r, ready)

        return body

    threads = [sched.spawn(s, sender(s)) for s in SENDERS]
    kind = worker if leases else consumer
    n_workers = 2
    threads += [sched.spawn(f"w{i}", kind(f"w{i}")) for i in range(n_workers)]
    restarted = n_workers

    def between() -> None:
        nonlocal restarted
        # a crashed worker is replaced by a new process (a new owner name)
        for a in list(sched.actors.values()):
            if a.crashed and a.finished and not getattr(a, "replaced", False):
                a.replaced = True  # type: ignore[attr-defined]
                restarted += 1
                threads.append(sched.spawn(f"w{restarted}", kind(f"w{restarted}")))
        if leases and rng.random() < 0.03:
            clock.now += TTL + 1  # leases expire: live workers renew or lose, dead ones are taken over
        senders_done = all(sched.actors[s].finished for s in SENDERS)
        if senders_done and not stop.is_set() and _quiet(shared):
            stop.set()

    while sched.step(between):
        pass
    for t in threads:
        t.join(timeout=30)
    errors = {a.name: a.error for a in sched.actors.values() if a.error is not None}
    assert not errors, errors
    return check(ObjectStoreSaver(shared), attempted, returned, sched)


def _quiet(store: StoreBase) -> bool:
    """Nothing left to ingest, and no member in the middle of a step (read past the gates)."""
    if any(True for _ in store.list("teams/mc/inbox/")):
        return False
    saver = ObjectStoreSaver(store).under("teams/mc/members/")
    for r in RECIPIENTS:
        tup = saver.get_tuple({"configurable": {"thread_id": f"mc/{r}"}})
        if tup is not None and any(
            k == "__start__" or k.startswith("branch:to:") for k in tup.checkpoint["channel_values"]
        ):
            return False
    return True


def check(saver: ObjectStoreSaver, attempted: dict[str, list[str]], returned: dict[str, list[str]],
          sched: Scheduler) -> dict[str, Any]:  # fmt: skip
    team = Team(saver, "mc")
    got = {r: ingested(saver, team, r) for r in RECIPIENTS}
    ids = [g["id"] for gs in got.values() for g in gs]
    dups = {i: n for i, n in Counter(ids).items() if n > 1}
    assert dups == {}, f"ingested twice: {dups}; crashes {sched.crashes}"
    missing = {i for s in returned.values() for i in s} - set(ids)
    assert missing == set(), f"sent and never ingested: {missing}; crashes {sched.crashes}"
    phantom = set(ids) - {i for s in attempted.values() for i in s}
    assert phantom == set(), phantom
    for r, gs in got.items():
        for s, order in attempted.items():
            seen = [g["id"] for g in gs if g["sender"] == s]
            assert seen == [i for i in order if i in seen], f"{r}: {s} out of order"
    from langgraph_handoff.ownership import SessionManager

    leases = [SessionManager(team.member_saver).get(f"mc/{r}") for r in RECIPIENTS]
    changes = sum(lease.epoch - 1 for lease in leases if lease is not None)
    return {"ops": sched.ops, "crashes": len(sched.crashes), "ingested": len(ids), "owner_changes": changes}


@pytest.mark.parametrize("seed", range(40))
def test_model_check_with_leases(seed: int) -> None:
    figures = run_schedule(seed, leases=True)
    assert figures["ingested"] == len(SENDERS) * PER_SENDER  # senders never crash: every send returned


@pytest.mark.parametrize("seed", range(40))
def test_model_check_without_leases(seed: int) -> None:
    run_schedule(1000 + seed, leases=False)


def test_the_model_check_does_crash_workers_and_force_takeovers() -> None:
    """The schedules above are not vacuous: workers die mid-protocol and members change owner."""
    runs = [run_schedule(seed, leases=True) for seed in range(100, 105)]
    assert sum(r["crashes"] for r in runs) >= 5 and sum(r["owner_changes"] for r in runs) >= 5, runs
