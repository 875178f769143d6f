"""Chaos harness for session ownership: worker processes serving many conversations while a
driver SIGKILLs them, and the checks that run on what is left in the store afterwards.

Used by ``integration_tests/test_chaos.py`` (a modest run in CI, on Ceph RGW) and by
``bench/chaos.py`` (a larger run whose figures go in the README).

Each conversation has ``turns`` user turns. A turn is: the scripted model asks for the ``act`` tool,
the tool performs an irreversible side effect, the model answers. Every id is derived from
(conversation, turn), so a re-executed step produces the same message and the transcript can be
compared exactly. Workers also kill *themselves* at the dangerous points:

* inside a tool call, after its side effect and before its result is stored;
* between a task's ``put_writes`` and the next checkpoint ``put``;
* during a planned transfer, right after locking the session.

Side effects use an idempotency key (the tool call id) recorded with ``O_CREAT | O_EXCL`` in an
fsynced ledger, as a payment API's idempotency key would. Every *attempt* is logged too, so the
checks can tell a re-execution the key absorbed (the worker died inside the tool) from a
re-execution of a task whose result was already stored (which replay must prevent: must be 0).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import signal
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import ConflictError, LeaseHeldError, OwnershipLostError, StaleWriterError, StoreError
from langgraph_handoff.ownership import SessionManager, SessionWorker
from tests.support.processes import Forked

# -- the fsynced ledger ---------------------------------------------------------------------------------------


def append(path: Path, record: dict[str, Any]) -> None:
    line = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line torn by SIGKILL mid-write
    return out


def perform_effect(logdir: Path, key: str) -> bool:
    """The irreversible action, at most once per idempotency key: creating the key's record *is*
    the action (one atomic, fsynced step, like a payment API's idempotency key). True if it
    happened now, False if an earlier attempt already did it."""
    effects = logdir / "effects"
    effects.mkdir(exist_ok=True)
    try:
        fd = os.open(effects / key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    os.write(fd, json.dumps({"pid": os.getpid(), "t": time.time()}).encode())
    os.fsync(fd)
    os.close(fd)
    dfd = os.open(effects, os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
    return True


# -- one worker process -----------------------------------------------------------------------------------


@dataclass
class Chaos:
    kill_in_tool: float = 0.0
    kill_after_writes: float = 0.0
    transfer: float = 0.0
    kill_in_transfer: float = 0.0
    rng: random.Random = field(default_factory=random.Random)

    def maybe_die(self, p: float, logdir: Path, where: str, **info: Any) -> None:
        if p > 0 and self.rng.random() < p:
            append(logdir / "selfkills.log", {"pid": os.getpid(), "where": where, "t": time.time(), **info})
            os.kill(os.getpid(), signal.SIGKILL)


class ChaosSaver(ObjectStoreSaver):
    """Logs every stored checkpoint and task write (with the writer's epoch), and may die between
    a task's writes and the next checkpoint."""

    logdir: Path
    chaos: Chaos

    def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[no-untyped-def, override]
        out = super().put(config, checkpoint, metadata, new_versions)
        conf = config["configurable"]
        append(
            self.logdir / "puts.log",
            {
                "thread": conf["thread_id"],
                "ns": conf.get("checkpoint_ns", ""),
                "id": checkpoint["id"],
                "epoch": self._fence[1] if self._fence else None,
                "pid": os.getpid(),
                "t": time.time(),
            },
        )
        return out

    def put_writes(self, config, writes, task_id, task_path=""):  # type: ignore[no-untyped-def, override]
        super().put_writes(config, writes, task_id, task_path)
        conf = config["configurable"]
        calls = [
            v.tool_call_id
            for c, vals in writes
            if c == "messages"
            for v in (vals if isinstance(vals, list) else [vals])
            if isinstance(v, ToolMessage)
        ]
        append(
            self.logdir / "writes.log",
            {
                "thread": conf["thread_id"],
                "checkpoint": conf.get("checkpoint_id"),
                "task": task_id,
                "tool_calls": calls,
                "pid": os.getpid(),
                "t": time.time(),
            },
        )
        self.chaos.maybe_die(self.chaos.kill_after_writes, self.logdir, "after put_writes", thread=conf["thread_id"])


def turn_of(text: str) -> int:
    return int(text[1:])


def build_graph(checkpointer: Any, logdir: Path, chaos: Chaos, owner: str) -> Any:
    def model(state: MessagesState) -> dict[str, Any]:
        thread = state["messages"][0].id.split(":")[0]
        last = state["messages"][-1]
        if isinstance(last, HumanMessage):
            k = turn_of(last.content)
            call = {"name": "act", "args": {"turn": k}, "id": f"{thread}:{k}", "type": "tool_call"}
            return {"messages": [AIMessage("", tool_calls=[call], id=f"{thread}:ai-call:{k}")]}
        k = int(last.tool_call_id.split(":")[1])
        return {"messages": [AIMessage(f"a{k}", id=f"{thread}:ai-final:{k}")]}

    def tools(state: MessagesState) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        key = call["id"].replace(":", "_")
        append(logdir / "attempts.log", {"key": key, "pid": os.getpid(), "owner": owner, "t": time.time()})
        done_now = perform_effect(logdir, key)
        chaos.maybe_die(chaos.kill_in_tool, logdir, "inside a tool call", key=key)
        result = "done" if done_now else "done (idempotent repeat)"
        return {"messages": [ToolMessage(result, tool_call_id=call["id"], name="act", id=f"{call['id']}:tool")]}

    def after_model(state: MessagesState) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", tools)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", after_model, ["tools", END])
    g.add_edge("tools", "model")
    return g.compile(checkpointer=checkpointer)


def expected_transcript(thread: str, turns: int) -> list[tuple[str, str]]:
    out = []
    for k in range(1, turns + 1):
        out += [("human", f"q{k}"), ("ai", ""), ("tool", "done"), ("ai", f"a{k}")]
    return out


def transcript(messages: list[Any]) -> list[tuple[str, str]]:
    return [(m.type, "done" if m.type == "tool" else m.content) for m in messages]


def make_saver(spec: dict[str, Any], logdir: Path, chaos: Chaos) -> ChaosSaver:
    from tests.support.race_helpers import make_store

    saver = ChaosSaver(make_store(spec))
    saver.logdir, saver.chaos = logdir, chaos
    return saver


def worker_main(args: argparse.Namespace) -> int:
    spec = json.loads(args.store)
    logdir = Path(args.logdir)
    chaos = Chaos(
        args.kill_in_tool, args.kill_after_writes, args.transfer, args.kill_in_transfer, random.Random(args.seed)
    )
    saver = make_saver(spec, logdir, chaos)
    sessions = SessionManager(saver)
    owner = args.owner
    worker = SessionWorker(
        sessions,
        owner,
        lambda cp: build_graph(cp, logdir, chaos, owner),
        ttl=args.ttl,
        heartbeat=args.ttl / 4,
        transfer_timeout=args.ttl,
    )
    threads = [f"conv-{i:03d}" for i in range(args.conversations)]
    deadline = time.time() + args.seconds
    rng = random.Random(args.seed + 1)

    def event(kind: str, **info: Any) -> None:
        append(logdir / "leases.log", {"kind": kind, "owner": owner, "pid": os.getpid(), "t": time.time(), **info})

    def finished(thread: str) -> bool:
        return (logdir / "done" / thread).exists()

    def drive(thread: str) -> None:
        worker.settle(thread)  # finish the step a dead owner was in (replaying its stored writes)
        graph = worker.graph_for(worker.leases[thread])
        config = {"configurable": {"thread_id": thread}}
        state = graph.get_state(config)
        if state.next:
            worker.invoke(thread, None)  # an interrupted turn: resume it
            return
        msgs = state.values.get("messages", [])
        done_turns = sum(1 for m in msgs if isinstance(m, AIMessage) and ":ai-final:" in (m.id or ""))
        if done_turns >= args.turns:
            (logdir / "done").mkdir(exist_ok=True)
            (logdir / "done" / thread).touch()
            worker.release(thread)
            event("finished", thread=thread)
            return
        k = done_turns + 1
        worker.invoke(thread, {"messages": [HumanMessage(f"q{k}", id=f"{thread}:human:{k}")]})
        if args.transfer and chaos.rng.random() < args.transfer:
            lease = worker.leases.pop(thread)
            sessions.begin_transfer(lease, timeout=args.ttl)
            event("transfer-begun", thread=thread, epoch=lease.epoch)
            chaos.maybe_die(args.kill_in_transfer, logdir, "during a transfer", thread=thread)

    next_scan = 0.0
    before: dict[str, Any] = {}
    while time.time() < deadline:
        if all(finished(t) for t in threads):
            return 0
        try:
            if time.time() >= next_scan:  # the health check, every ttl/3
                next_scan = time.time() + args.ttl / 3
                infos = sessions.sessions()
                before = {i.thread_id: i for i in infos}
            else:
                infos = []
            for lease in worker.accept_transfers(infos):
                event(
                    "accept",
                    thread=lease.thread_id,
                    epoch=lease.epoch,
                    prev=before[lease.thread_id].lease.owner if lease.thread_id in before else None,
                )
            for lease in worker.reclaim(infos):
                prev = before.get(lease.thread_id)
                event(
                    "takeover",
                    thread=lease.thread_id,
                    epoch=lease.epoch,
                    prev=prev.lease.owner if prev and prev.lease else None,
                )
            if len(worker.leases) < args.per_worker:
                free = [
                    t
                    for t in threads
                    if not finished(t)
                    and t not in worker.leases
                    and (t not in before or before[t].status in ("released", "ownerless"))
                ]
                if free:
                    thread = rng.choice(free)
                    with_lease = worker.lease_for(thread)
                    event("acquire", thread=thread, epoch=with_lease.epoch)
            for thread in list(worker.leases):
                try:
                    drive(thread)
                except (OwnershipLostError, StaleWriterError):
                    worker.leases.pop(thread, None)
                    event("lost", thread=thread)
        except (LeaseHeldError, ConflictError, StoreError) as exc:
            event("retry", error=type(exc).__name__)
        time.sleep(0.02)  # pacing of the serving loop, not synchronisation
    return 3


# -- the driver and the checks -----------------------------------------------------------------------------


@dataclass
class RunConfig:
    store: dict[str, Any]
    logdir: Path
    workers: int = 3
    conversations: int = 30
    turns: int = 4
    ttl: float = 1.5
    seconds: float = 150.0
    kill_every: tuple[float, float] = (1.5, 3.0)
    kill_in_tool: float = 0.04
    kill_after_writes: float = 0.015
    transfer: float = 0.08
    kill_in_transfer: float = 0.5
    per_worker: int = 4
    seed: int = 7
    #: most driver kills in a run (None: no limit); after the last one the fleet finishes undisturbed
    max_kills: int | None = None


def spawn(cfg: RunConfig, owner: str, seed: int) -> Forked:
    """A worker process (forked, not a new interpreter: see tests/support/processes.py)."""
    args = [
        "worker",
        "--store",
        json.dumps(cfg.store),
        "--logdir",
        str(cfg.logdir),
        "--owner",
        owner,
        "--seed",
        str(seed),
        "--conversations",
        str(cfg.conversations),
        "--turns",
        str(cfg.turns),
        "--ttl",
        str(cfg.ttl),
        "--seconds",
        str(cfg.seconds),
        "--kill-in-tool",
        str(cfg.kill_in_tool),
        "--kill-after-writes",
        str(cfg.kill_after_writes),
        "--transfer",
        str(cfg.transfer),
        "--kill-in-transfer",
        str(cfg.kill_in_transfer),
        "--per-worker",
        str(cfg.per_worker),
    ]
    return Forked("tests.support.chaos_harness", args, stderr=cfg.logdir / f"{owner}.err")


def run(cfg: RunConfig) -> dict[str, Any]:
    """Serve every conversation with workers that keep being killed; return the raw outcome."""
    cfg.logdir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(cfg.seed)
    procs: dict[str, Forked] = {}
    n = 0
    for _ in range(cfg.workers):
        n += 1
        procs[f"w{n}"] = spawn(cfg, f"w{n}", cfg.seed * 100 + n)
    start = time.time()
    next_kill = start + rng.uniform(*cfg.kill_every)
    done_dir = cfg.logdir / "done"
    kills, progress_at_kill = 0, -1
    while time.time() - start < cfg.seconds:
        finished = len(list(done_dir.iterdir())) if done_dir.exists() else 0
        if finished >= cfg.conversations:
            break
        for owner, p in list(procs.items()):
            if p.poll() is not None:  # died (killed itself) or finished: keep the fleet at size
                del procs[owner]
                append(cfg.logdir / "exits.log", {"owner": owner, "code": p.returncode, "t": time.time()})
                n += 1
                procs[f"w{n}"] = spawn(cfg, f"w{n}", cfg.seed * 100 + n)
        # A kill waits for progress since the last one (a side effect done, i.e. a turn got to its
        # tool): on a loaded machine a restarted worker takes seconds to import and start, and
        # kills on a fixed clock would starve the run (seen: 23 of 30 conversations in 150 s
        # under two CPU hogs). So the chaos slows down with the work instead of stopping it.
        effects_dir = cfg.logdir / "effects"
        progress = len(list(effects_dir.iterdir())) if effects_dir.exists() else 0
        budget = cfg.max_kills is None or kills < cfg.max_kills
        if time.time() >= next_kill and procs and budget and progress > progress_at_kill:
            progress_at_kill = progress
            owner = rng.choice(sorted(procs))
            procs[owner].send_signal(signal.SIGKILL)
            procs[owner].wait()
            append(cfg.logdir / "kills.log", {"owner": owner, "t": time.time()})
            kills += 1
            del procs[owner]
            n += 1
            procs[f"w{n}"] = spawn(cfg, f"w{n}", cfg.seed * 100 + n)
            next_kill = time.time() + rng.uniform(*cfg.kill_every)
        time.sleep(0.05)
    elapsed = time.time() - start
    for p in procs.values():
        p.send_signal(signal.SIGKILL)
        p.wait()
    return {"elapsed": elapsed, "workers_started": n}


def check(cfg: RunConfig, outcome: dict[str, Any]) -> dict[str, Any]:
    """Read the store and the ledger; return the figures and every violation found."""
    from tests.support.race_helpers import make_store

    saver = ObjectStoreSaver(make_store(cfg.store))
    logdir = cfg.logdir
    violations: list[str] = []
    finished = 0
    forks = 0
    for i in range(cfg.conversations):
        thread = f"conv-{i:03d}"
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        latest = saver.get_tuple(config)
        msgs = latest.checkpoint["channel_values"].get("messages", []) if latest else []
        if transcript(msgs) == expected_transcript(thread, cfg.turns):
            finished += 1
        else:
            violations.append(f"{thread}: transcript {transcript(msgs)}")
        hist = list(saver.list(config))
        ids = [h.config["configurable"]["checkpoint_id"] for h in hist]
        parents = [h.parent_config["configurable"]["checkpoint_id"] if h.parent_config else None for h in hist]
        if parents[:-1] != ids[1:]:
            forks += 1
            violations.append(f"{thread}: history forked")

    # never two owners: each (thread, epoch) has one owner, and committed checkpoints never go
    # back to a lower epoch along a thread's chain
    owners: dict[tuple[str, int], set[str]] = defaultdict(set)
    for e in read(logdir / "leases.log"):
        if "epoch" in e and e["kind"] in ("acquire", "takeover", "accept"):
            owners[(e["thread"], e["epoch"])].add(e["owner"])
    two_owners = [k for k, v in owners.items() if len(v) > 1]
    violations += [f"{t}: epoch {ep} had owners {sorted(owners[(t, ep)])}" for t, ep in two_owners]
    chain_epochs: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for p in read(logdir / "puts.log"):
        if p["ns"] == "" and p["epoch"] is not None:
            chain_epochs[p["thread"]].append((p["t"], p["epoch"]))
    for thread, seq in chain_epochs.items():
        epochs = [e for _, e in sorted(seq)]
        if any(b < a for a, b in itertools.pairwise(epochs)):
            violations.append(f"{thread}: a lower epoch committed after a higher one: {epochs}")

    effects = sorted(p.name for p in (logdir / "effects").iterdir()) if (logdir / "effects").exists() else []
    duplicates = len(effects) - len(set(effects))
    attempts: dict[str, int] = defaultdict(int)
    for a in read(logdir / "attempts.log"):
        attempts[a["key"]] += 1
    # a tool call may run again only while its result is not stored yet (its worker died inside
    # it); once a task's writes are stored, resuming must replay them, never run the tool again
    stored_at: dict[str, float] = {}
    for w in read(logdir / "writes.log"):
        for c in w["tool_calls"]:
            key = c.replace(":", "_")
            stored_at[key] = min(stored_at.get(key, w["t"]), w["t"])
    reruns_after_stored = [a for a in read(logdir / "attempts.log") if a["t"] > stored_at.get(a["key"], float("inf"))]
    violations += [f"tool call {a['key']} ran again after its result was stored" for a in reruns_after_stored]
    missing = [k for k in stored_at if k not in set(effects)]
    violations += [f"{k}: result stored but no effect recorded" for k in missing]
    kills = read(logdir / "kills.log")

    # time to takeover: from a kill to the takeover of each session the killed worker held
    killed_at = {k["owner"]: k["t"] for k in kills}
    exits = {e["owner"]: e["t"] for e in read(logdir / "exits.log") if e.get("code") == -9}
    killed_at.update({o: t for o, t in exits.items() if o not in killed_at})
    takeovers = [e for e in read(logdir / "leases.log") if e["kind"] == "takeover"]
    delays = sorted(
        e["t"] - killed_at[e["prev"]]
        for e in takeovers
        if e.get("prev") in killed_at and e["t"] >= killed_at[e["prev"]]
    )
    selfkills = read(logdir / "selfkills.log")
    return {
        "conversations": cfg.conversations,
        "turns": cfg.turns,
        "finished": finished,
        "workers_started": outcome["workers_started"],
        "driver_kills": len(kills),
        "self_kills": {
            w: sum(1 for s in selfkills if s["where"] == w)
            for w in ("inside a tool call", "after put_writes", "during a transfer")
        },
        "takeovers": len(takeovers),
        "transfers_accepted": sum(1 for e in read(logdir / "leases.log") if e["kind"] == "accept"),
        "tool_attempts": sum(attempts.values()),
        "effects": len(effects),
        "duplicate_effects": duplicates,
        "repeats_absorbed_by_idempotency_key": sum(attempts.values()) - len(set(attempts)),
        "reruns_after_result_stored": len(reruns_after_stored),
        "forks": forks,
        "two_owner_epochs": len(two_owners),
        "takeover_seconds": {
            "n": len(delays),
            "median": delays[len(delays) // 2] if delays else None,
            "max": delays[-1] if delays else None,
        },
        "elapsed": round(outcome["elapsed"], 1),
        "violations": violations,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker")
    w.add_argument("--store", required=True)
    w.add_argument("--logdir", required=True)
    w.add_argument("--owner", required=True)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--conversations", type=int, default=12)
    w.add_argument("--turns", type=int, default=3)
    w.add_argument("--ttl", type=float, default=1.5)
    w.add_argument("--seconds", type=float, default=120)
    w.add_argument("--kill-in-tool", type=float, default=0.0)
    w.add_argument("--kill-after-writes", type=float, default=0.0)
    w.add_argument("--transfer", type=float, default=0.0)
    w.add_argument("--kill-in-transfer", type=float, default=0.0)
    w.add_argument("--per-worker", type=int, default=4)
    args = parser.parse_args()
    return worker_main(args)


if __name__ == "__main__":
    sys.exit(main())
