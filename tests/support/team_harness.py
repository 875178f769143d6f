"""Agent-team harness: a lead delegating to teammates on worker processes that get killed, the
raw mailbox protocol raced by duplicate consumers, and the checks run on the store afterwards.

Used by ``tests/teams/test_team_kills.py`` (deterministic kill points, local store),
``integration_tests/test_s3_teams.py`` (the concurrency matrix and chaos on Ceph RGW) and
``bench/teams.py`` (the figures in the README).

**The delegation workload.** An external "human" gives the lead tasks ``task k``. For each, the
lead's scripted model messages one teammate ``do k.1``; the teammate answers ``done k.1`` (its
automatic reply goes back to the lead), and the lead asks for ``do k.2``, then ``do k.3`` (with
``expects_reply=True``: a message sent in answer to the teammate's is otherwise not answered). Tool
call ids are derived from ``(k, round)``, so a re-executed model call sends the same message id.
A delegation is complete when the lead has ingested ``done k.3``.

**Chaos** comes from three sources: the driver SIGKILLs a random worker every few seconds; workers
kill themselves (``os._exit``) right before or after store operations at the protocol's points
(inbox LIST, message GETs, the head CAS that acks, the delete, a delivery PUT); and the driver
SIGSTOPs a worker longer than the lease TTL and SIGCONTs it after its members were taken over,
so it wakes as a zombie mid-turn.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.graph import END, START, StateGraph

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import LocalStore, S3Store, StoreBase
from langgraph_handoff.stores.base import ListResult, StoredObject
from langgraph_handoff.teams import Team, TeamState, TeamWorker, team_tools
from langgraph_handoff.teams.model import message_id
from langgraph_handoff.testing import ScriptedChatModel
from tests.support.processes import Forked
from tests.support.team_helpers import react_graph

KILLED = 137
MATES = ("m1", "m2", "m3", "m4")


def make_store(spec: dict[str, Any]) -> StoreBase:
    if spec["kind"] == "local":
        return LocalStore(spec["path"])
    if spec["kind"] == "s3":
        return S3Store(spec["bucket"], prefix=spec["prefix"], endpoint_url=spec["endpoint_url"])
    raise ValueError(spec)


# -- dying at store operations ----------------------------------------------------------------------------


def point_of(kind: str, key: str) -> str | None:
    """The protocol point a store operation belongs to (None: not one we kill at)."""
    if kind == "LIST" and "/inbox/" in key:
        return "inbox_list"
    if kind == "GET" and "/inbox/" in key:
        return "message_get"
    if kind == "PUT" and "/members/heads/" in key:  # a member's head, in its team's space
        return "head_cas"
    if kind == "DELETE_MANY":
        return "discard"
    if kind == "PUT" and "/inbox/" in key:
        return "deliver"
    return None


class InterceptingStore(StoreBase):
    """Wraps a store and passes every operation through ``_around(kind, key, call)``: the hook
    the kill-point, chaos and model-check stores share."""

    inner: StoreBase

    def trust_scope(self) -> Any:
        return self.inner.trust_scope()  # a wrapper: the inner store's conditions, probed or not

    def _around(self, kind: str, key: str, call: Any) -> Any:
        return call()

    def get(self, key: str) -> StoredObject | None:
        return self._around("GET", key, lambda: self.inner.get(key))

    def put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        return self._around(
            "PUT", key, lambda: self.inner.put(key, body, if_match=if_match, if_none_match=if_none_match)
        )

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        return self._around("DELETE", key, lambda: self.inner.delete(key, if_match=if_match))

    def delete_many(self, keys: Sequence[str]) -> None:
        return self._around("DELETE_MANY", "", lambda: self.inner.delete_many(keys))

    def list_page(self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000) -> ListResult:
        return self._around(
            "LIST", prefix, lambda: self.inner.list_page(prefix, start_after=start_after, max_keys=max_keys)
        )

    def close(self) -> None:
        self.inner.close()


class DyingStore(InterceptingStore):
    """Wraps a store and ``os._exit``s before or after chosen operations: at random (``p`` per
    protocol point) or at exactly the ``die_at``-th operation (``(n, "before"|"after")``)."""

    def __init__(self, inner: StoreBase, *, p: float = 0.0, seed: int = 0,
                 die_at: tuple[int, str] | None = None, log: Path | None = None) -> None:  # fmt: skip
        self.inner, self.p, self.rng, self.die_at, self.log = inner, p, random.Random(seed), die_at, log
        self.count = 0

    def _die(self, where: str, kind: str, key: str) -> None:
        if self.log is not None:
            with open(self.log, "a") as f:
                f.write(json.dumps({"pid": os.getpid(), "where": where, "op": kind, "key": key}) + "\n")
                f.flush()
                os.fsync(f.fileno())
        os._exit(KILLED)

    def _around(self, kind: str, key: str, call: Any) -> Any:
        self.count += 1
        n = self.count
        point = point_of(kind, key)
        if self.die_at == (n, "before") or (point and self.p and self.rng.random() < self.p / 2):
            self._die(f"before {point or kind}", kind, key)
        out = call()
        if self.die_at == (n, "after") or (point and self.p and self.rng.random() < self.p / 2):
            self._die(f"after {point or kind}", kind, key)
        return out


# -- the delegation workload -------------------------------------------------------------------------------

_TASK = re.compile(r"^task (\d+)$")
_DONE = re.compile(r"^done (\d+)\.(\d+)$")
_DO = re.compile(r"^do (\d+)\.(\d+)$")


def _incoming(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The team messages of the current turn: the human messages after the last AI answer."""
    out: list[BaseMessage] = []
    for m in reversed(messages):
        if m.type != "human":
            break
        out.append(m)
    return out[::-1]


def mate_of(k: int) -> str:
    return MATES[k % len(MATES)]


def lead_model(rounds: int) -> Any:
    def step(messages: list[BaseMessage]) -> AIMessage:
        if messages and messages[-1].type == "tool":
            return AIMessage("ok")
        calls = []
        for m in _incoming(messages):
            for line in str(m.content).splitlines()[1:]:
                task, done = _TASK.match(line), _DONE.match(line)
                if task:
                    k, r = int(task.group(1)), 1
                elif done and int(done.group(2)) < rounds:
                    k, r = int(done.group(1)), int(done.group(2)) + 1
                else:
                    continue
                # a follow-up answers the mate's answer: it asks for a reply explicitly (teams.chains)
                args = {"to": mate_of(k), "content": f"do {k}.{r}", **({"expects_reply": True} if r > 1 else {})}
                calls.append({"name": "send_message", "args": args, "id": f"c{k}-{r}", "type": "tool_call"})
        return AIMessage("", tool_calls=calls) if calls else AIMessage("noted")

    return step


class FunctionChatModel(ScriptedChatModel):
    """A scripted model that answers every call with ``script[0](messages)``, keeping the tool
    call ids the function chose (a cycled script would make fresh ones)."""

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        out = self.script[0](list(messages))
        return out if isinstance(out, AIMessage) else AIMessage(out)


def lead_build(team: Team, rounds: int) -> Any:
    def build(checkpointer: Any, member: Any = None) -> Any:
        return react_graph(checkpointer, FunctionChatModel([lead_model(rounds)]), team_tools(team, "lead"))

    return build


def mate_build(checkpointer: Any, member: Any = None) -> Any:
    def node(state: TeamState) -> dict[str, Any]:
        lines = []
        for m in _incoming(state["messages"]):
            for line in str(m.content).splitlines()[1:]:
                do = _DO.match(line)
                if do:
                    lines.append(f"done {do.group(1)}.{do.group(2)}")
        return {"messages": [AIMessage("\n".join(lines) or "noted")]}

    g = StateGraph(TeamState)
    g.add_node("work", node)
    g.add_edge(START, "work")
    g.add_edge("work", END)
    return g.compile(checkpointer=checkpointer)


def builds(team: Team, rounds: int) -> dict[str, Any]:
    return {"lead": lead_build(team, rounds), "mate": mate_build}


def setup_team(saver: ObjectStoreSaver, team_id: str) -> Team:
    team = Team(saver, team_id)
    team.spawn("lead", role="lead", lead=True)
    for m in MATES:
        team.spawn(m, role="mate")
    return team


def give_tasks(team: Team, ks: Sequence[int]) -> None:
    for k in ks:
        team.send("lead", f"task {k}", sender="human", idempotency_key=f"task-{k}")


def completed(saver: ObjectStoreSaver, team: Team, rounds: int) -> set[int]:
    return progress(saver, team, rounds)[1]


def progress(saver: ObjectStoreSaver, team: Team, rounds: int) -> tuple[int, set[int]]:
    """How many team messages the lead has ingested, and which delegations are complete."""
    done, seen = set(), 0
    for msg in conversation(saver, team, "lead"):
        if msg.type == "human":
            seen += 1
            for line in str(msg.content).splitlines()[1:]:
                d = _DONE.match(line)
                if d and int(d.group(2)) == rounds:
                    done.add(int(d.group(1)))
    return seen, done


def conversation(saver: ObjectStoreSaver, team: Team, name: str) -> list[BaseMessage]:
    tup = team.member_saver.get_tuple({"configurable": {"thread_id": team.thread_id(name)}})
    return list(tup.checkpoint["channel_values"].get("messages", [])) if tup is not None else []


# -- checks ------------------------------------------------------------------------------------------------


def check_team(saver: ObjectStoreSaver, team: Team, *, rounds: int, tasks: int) -> dict[str, Any]:
    """Everything that must hold after a run, read from the store. ``violations`` must be empty."""
    members = ["lead", *MATES]
    convos = {n: conversation(saver, team, n) for n in members}
    got = {n: [m.additional_kwargs["team_message"] for m in c if m.type == "human" and "team_message" in m.additional_kwargs]
           for n, c in convos.items()}  # fmt: skip
    violations: list[str] = []
    ingested = Counter(g["id"] for gs in got.values() for g in gs)
    dups = {i: c for i, c in ingested.items() if c > 1}
    if dups:
        violations.append(f"ingested twice: {dups}")
    # FIFO and contiguity per stream (agent senders)
    fifo = 0
    for name, gs in got.items():
        by_stream: dict[str, list[int]] = defaultdict(list)
        for g in gs:
            if g.get("stream"):
                by_stream[g["stream"]].append(g["seq"])
        for stream, seqs in by_stream.items():
            if seqs != list(range(1, len(seqs) + 1)):
                fifo += 1
                violations.append(f"{name} ingested {stream} out of order or with a gap: {seqs[:20]}")
    # every agent message comes from its sender's committed history (no zombie sends)
    committed_calls: dict[str, set[str]] = {}
    for name, c in convos.items():
        committed_calls[name] = {tc["id"] for m in c if m.type == "ai" for tc in (m.tool_calls or [])}
    zombie = 0
    for name, gs in got.items():
        for g in gs:
            if g["type"] == "message" and g.get("stream"):
                ok = any(message_id(team.team_id, g["sender"], name, call) == g["id"]
                         for call in committed_calls.get(g["sender"], ()))  # fmt: skip
                if not ok:
                    zombie += 1
                    violations.append(f"{name} ingested {g['id']} from {g['sender']}, not in its committed history")
    # nothing lost: every message sent by an agent (a tool call in committed history) was ingested
    lost = 0
    for sender, calls in committed_calls.items():
        for call in calls:
            k = int(call[1:].split("-")[0])
            mid = message_id(team.team_id, sender, mate_of(k), call)
            if mid not in ingested:
                lost += 1
                violations.append(f"{sender}'s message {mid} (call {call}) to {mate_of(k)} was never ingested")
    tasks_in = {
        int(m.group(1)) for g in got["lead"] if g["sender"] == "human" for m in [_TASK.match(g["content"])] if m
    }
    if len(tasks_in) != tasks:
        violations.append(f"the lead ingested {len(tasks_in)} of {tasks} tasks")
        lost += tasks - len(tasks_in)
    done = completed(saver, team, rounds)
    if len(done) != tasks:
        violations.append(
            f"{len(done)} of {tasks} delegations completed (missing {sorted(set(range(tasks)) - done)[:10]})"
        )
    leftovers = [m for n in members for m in team.inbox(n)]
    if leftovers:
        violations.append(f"{len(leftovers)} messages still pending")
    return {
        "violations": violations,
        "messages_ingested": sum(ingested.values()),
        "distinct_messages": len(ingested),
        "duplicated": sum(c - 1 for c in dups.values()),
        "lost": lost,
        "fifo_violations": fifo,
        "zombie_messages_delivered": zombie,
        "delegations_completed": len(done),
    }


# -- worker processes and the chaos driver -----------------------------------------------------------------


@dataclass
class ChaosConfig:
    store: dict[str, Any]
    logdir: Path
    team_id: str = "chaos"
    tasks: int = 20
    rounds: int = 3
    workers: int = 4
    ttl: float = 2.0
    #: probability of dying at each protocol point (half before, half after the operation)
    p_die: float = 0.01
    kill_every: tuple[float, float] = (1.5, 3.0)
    #: chance that a driver action is a SIGSTOP (a zombie) rather than a SIGKILL
    p_stop: float = 0.3
    #: most driver actions in a run (None: no limit). After the last one the fleet finishes
    #: undisturbed, so a slow machine cannot be kept from completing by the chaos itself.
    max_actions: int | None = None
    seconds: float = 300.0
    seed: int = 11
    extra: dict[str, Any] = field(default_factory=dict)


def worker_main(args: argparse.Namespace) -> int:
    spec = json.loads(args.store)
    logdir = Path(args.logdir)
    store = DyingStore(make_store(spec), p=args.p_die, seed=args.seed, log=logdir / "self_kills.log")
    saver = ObjectStoreSaver(store)
    team = Team(saver, args.team)
    worker = TeamWorker(team, args.owner, builds(team, args.rounds), ttl=args.ttl, poll=0.05, max_poll=0.4,
                        max_failures=1000)  # fmt: skip
    stop = logdir / "stop"
    with worker.handle_sigterm():
        worker.run(until=stop.exists)
    return 0


def spawn_worker(cfg: ChaosConfig, owner: str, seed: int) -> Forked:
    """A worker process (forked, not a new interpreter: see tests/support/processes.py)."""
    args = ["worker", "--store", json.dumps(cfg.store),
           "--logdir", str(cfg.logdir), "--owner", owner, "--seed", str(seed), "--team", cfg.team_id,
           "--rounds", str(cfg.rounds), "--ttl", str(cfg.ttl), "--p-die", str(cfg.p_die)]  # fmt: skip
    return Forked("tests.support.team_harness", args, stderr=cfg.logdir / f"{owner}.err")


def run_chaos(cfg: ChaosConfig) -> dict[str, Any]:
    """Run the delegation workload under chaos until every delegation completed (or time is up)."""
    cfg.logdir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(cfg.seed)
    saver = ObjectStoreSaver(make_store(cfg.store))
    team = setup_team(saver, cfg.team_id)
    procs: dict[str, Forked] = {}
    stopped: dict[str, float] = {}
    n = 0
    for _ in range(cfg.workers):
        n += 1
        procs[f"w{n}"] = spawn_worker(cfg, f"w{n}", cfg.seed * 1000 + n)
    start = time.time()
    give_tasks(team, range(cfg.tasks))
    sent_at = time.time()
    kills = zombies = 0
    next_action = start + rng.uniform(*cfg.kill_every)
    finished_at = None
    progress_at_action = -1
    while time.time() - start < cfg.seconds:
        seen, done = progress(saver, team, cfg.rounds)
        if len(done) >= cfg.tasks:
            finished_at = time.time()
            break
        now = time.time()
        for owner, t in list(stopped.items()):
            if now >= t:  # wake the zombie: its members were taken over meanwhile
                procs[owner].send_signal(signal.SIGCONT)
                del stopped[owner]
        for owner, p in list(procs.items()):
            if p.poll() is not None:  # killed itself at a protocol point: keep the fleet at size
                del procs[owner]
                stopped.pop(owner, None)
                n += 1
                procs[f"w{n}"] = spawn_worker(cfg, f"w{n}", cfg.seed * 1000 + n)
        # The next kill or stop waits for progress since the last one (the lead ingested more),
        # so on a loaded machine, where a restarted worker takes long to start, the chaos slows
        # down with the work instead of starving it; and it stops after max_actions.
        budget = cfg.max_actions is None or kills + zombies < cfg.max_actions
        if now >= next_action and procs and budget and seen > progress_at_action:
            progress_at_action = seen
            owner = rng.choice(sorted(set(procs) - set(stopped)) or sorted(procs))
            if rng.random() < cfg.p_stop and owner not in stopped:
                procs[owner].send_signal(signal.SIGSTOP)
                stopped[owner] = now + cfg.ttl * 1.5 + rng.uniform(0, 1)
                zombies += 1
            else:
                procs[owner].send_signal(signal.SIGCONT)
                procs[owner].send_signal(signal.SIGKILL)
                procs[owner].wait()
                del procs[owner]
                stopped.pop(owner, None)
                kills += 1
                n += 1
                procs[f"w{n}"] = spawn_worker(cfg, f"w{n}", cfg.seed * 1000 + n)
            next_action = now + rng.uniform(*cfg.kill_every)
        time.sleep(0.05)
    (cfg.logdir / "stop").touch()
    for p in procs.values():
        p.send_signal(signal.SIGCONT)
    deadline = time.time() + 10
    for p in procs.values():
        try:
            p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    self_kills = Counter()
    log = cfg.logdir / "self_kills.log"
    if log.exists():
        for line in log.read_text().splitlines():
            try:
                self_kills[json.loads(line)["where"]] += 1
            except (json.JSONDecodeError, KeyError):
                continue
    figures = check_team(saver, team, rounds=cfg.rounds, tasks=cfg.tasks)
    leases = [_lease(saver, team, m) for m in ["lead", *MATES]]
    figures.update({
        "seconds": round((finished_at or time.time()) - sent_at, 1),
        "finished": finished_at is not None,
        "workers_started": n,
        "driver_kills": kills,
        "zombies": zombies,
        "self_kills": dict(self_kills),
        # every change of owner raised a member's epoch by one
        "ownership_changes": sum(lease.epoch - 1 for lease in leases if lease is not None),
    })  # fmt: skip
    saver.close()
    return figures


def _lease(saver: ObjectStoreSaver, team: Team, name: str) -> Any:
    from langgraph_handoff.ownership import SessionManager

    return SessionManager(team.member_saver).get(team.thread_id(name))


def main() -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker")
    w.add_argument("--store", required=True)
    w.add_argument("--logdir", required=True)
    w.add_argument("--owner", required=True)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--team", required=True)
    w.add_argument("--rounds", type=int, default=3)
    w.add_argument("--ttl", type=float, default=2.0)
    w.add_argument("--p-die", type=float, default=0.0)
    args = ap.parse_args()
    return worker_main(args)


if __name__ == "__main__":
    sys.exit(main())


# -- the raw protocol raced: senders x recipients, two consumers per inbox, no leases ----------------------


def matrix_sender(spec: dict[str, Any], team_id: str, sender: str, recipients: list[str], n: int, seed: int,
                  barrier: Any) -> list[tuple[str, str]]:  # fmt: skip
    """Send ``n`` messages round-robin; 10 % are re-sent at once (a lost answer) and 5 % re-sent
    later (after the first copy was probably ingested and deleted). Returns ``(to, id)`` in send
    order (re-sends not repeated)."""
    rng = random.Random(seed)
    team = Team(ObjectStoreSaver(make_store(spec)), team_id)
    team.roster()
    sent: list[tuple[str, str, str]] = []
    barrier.wait()
    for i in range(n):
        to = recipients[i % len(recipients)]
        key = f"{sender}-{i}"
        msg = team.send(to, f"{sender} {i}", sender=sender, idempotency_key=key)
        sent.append((to, msg.id, key))
        if rng.random() < 0.10:
            team.send(to, f"{sender} {i}", sender=sender, idempotency_key=key)
        if sent and rng.random() < 0.05:
            old_to, _, old_key = sent[rng.randrange(len(sent))]
            team.send(old_to, f"{sender} {old_key.rsplit('-', 1)[1]}", sender=sender, idempotency_key=old_key)
    team.saver.close()
    return [(to, mid) for to, mid, _ in sent]


def matrix_consumer(spec: dict[str, Any], team_id: str, members: list[str], seed: int, done: Any,
                    barrier: Any) -> dict[str, int]:  # fmt: skip
    """A consumer with no lease: receive, run one turn with the ack rider, delete after commit.
    Two of these serve every inbox at once; the head CAS must keep them from ingesting twice."""
    import secrets as _secrets

    from langgraph_handoff.errors import MessageIngestedError, StaleWriterError
    from langgraph_handoff.teams.acks import ack_rider
    from tests.support.team_helpers import echo_build

    rng = random.Random(seed)
    saver = ObjectStoreSaver(make_store(spec))
    team = Team(saver, team_id)
    stats = Counter()
    barrier.wait()
    idle_after_done = 0
    while idle_after_done < 2:
        finished = done.is_set()
        busy = 0
        for name in rng.sample(members, len(members)):
            receipt = team.receive(name)
            if receipt is None:
                continue
            if receipt.selection.done:
                team.delete_ingested(name, receipt.selection.done)
            ready = receipt.selection.ready
            if not ready:
                continue
            thread = team.thread_id(name)
            rider = ack_rider(thread, ready, _secrets.token_hex(8), team.clock(), team.window)
            graph = echo_build(team.member_saver.with_head_rider(thread, rider))
            try:
                graph.invoke({"messages": [m.as_human_message() for m in ready]},
                             {"configurable": {"thread_id": thread}}, durability="sync")  # fmt: skip
            except (MessageIngestedError, StaleWriterError) as exc:
                stats[type(exc).__name__] += 1
                continue
            team.delete_ingested(name, ready)
            stats["turns"] += 1
            stats["ingested"] += len(ready)
            busy += 1
        idle_after_done = idle_after_done + 1 if finished and not busy else 0
    saver.close()
    return dict(stats)


def check_matrix(saver: ObjectStoreSaver, team: Team, sent: list[list[tuple[str, str]]],
                 senders: list[str]) -> dict[str, Any]:  # fmt: skip
    """Per recipient: ingested ids == sent ids, none twice, each sender's in send order."""
    violations: list[str] = []
    recipients = sorted({to for s in sent for to, _ in s})
    total = lost = dup = fifo = 0
    for name in recipients:
        got = [m.additional_kwargs["team_message"] for m in conversation(saver, team, name)
               if m.type == "human" and "team_message" in m.additional_kwargs]  # fmt: skip
        ids = [g["id"] for g in got]
        want = {mid for s in sent for to, mid in s if to == name}
        total += len(want)
        c = Counter(ids)
        dup += sum(v - 1 for v in c.values() if v > 1)
        lost += len(want - set(ids))
        for sender, s in zip(senders, sent, strict=True):
            order = [mid for to, mid in s if to == name]
            seen = [g["id"] for g in got if g["sender"] == sender]
            if seen != order:
                fifo += 1
                violations.append(f"{name}: {sender}'s messages out of order")
    if lost or dup:
        violations.append(f"lost {lost}, duplicated {dup}")
    return {"violations": violations, "sent": total, "lost": lost, "duplicated": dup, "fifo_violations": fifo}
