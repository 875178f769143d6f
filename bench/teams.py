"""Agent-team figures for the README: requests per message, throughput and latency, redelivery
after a kill, the large chaos run, and the drain-on-read JSONL inbox head to head.

source /tmp/devrgw.env          # a running Ceph RGW (scripts/ceph-rgw-start.sh), or:
.venv/bin/python bench/teams.py --local    # everything on the embedded local store
.venv/bin/python bench/teams.py --only requests,drain --quick

Writes bench/teams-results.json and prints one table per section. Figures are measured in this
run, on this machine; nothing is a timed test.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from langgraph_handoff import ObjectStoreSaver  # noqa: E402
from langgraph_handoff.stores import CountingStore, MemoryStore  # noqa: E402
from langgraph_handoff.teams import Team, TeamWorker  # noqa: E402
from tests.support.team_harness import ChaosConfig, make_store, run_chaos  # noqa: E402
from tests.support.team_helpers import echo_build  # noqa: E402


def store_spec(local: bool) -> dict[str, Any]:
    if local:
        return {"kind": "local", "path": tempfile.mkdtemp(prefix="lgh-team-bench-")}
    endpoint = os.environ.get("S3_ENDPOINT_URL")
    if not endpoint:
        raise SystemExit("set S3_ENDPOINT_URL (source /tmp/devrgw.env) or pass --local")
    from langgraph_handoff.stores import S3Store

    bucket, prefix = os.environ.get("LGH_TEST_BUCKET", "lgh-tests"), f"team-bench-{uuid.uuid4().hex}"
    S3Store(bucket, prefix=prefix, endpoint_url=endpoint, create_bucket=True).close()
    return {"kind": "s3", "bucket": bucket, "prefix": prefix, "endpoint_url": endpoint}


# -- 1. requests per operation (counted at the store) -------------------------------------------------------


def requests() -> dict[str, Any]:
    store = CountingStore(MemoryStore())
    saver = ObjectStoreSaver(store)
    team = Team(saver, "req")
    for n in ("lead", "a", "b", "c", "d"):
        team.spawn(n, role="echo")
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False, members=["a"])
    worker.step()

    def counted(fn: Any) -> dict[str, int]:
        store.reset()
        fn()
        out = store.snapshot()
        out.pop("requests", None)
        return out

    out: dict[str, Any] = {"send": counted(lambda: team.send("a", "x", sender="lead"))}
    worker.step()
    out["broadcast to 4"] = counted(lambda: team.broadcast("all", sender="lead"))
    worker.step()
    out["idle poll (roster + inbox)"] = counted(worker.step)
    plain = echo_build(saver)
    cfg = {"configurable": {"thread_id": "plain"}}
    plain.invoke({"messages": [("user", "warm")]}, cfg, durability="sync")
    turn = counted(lambda: plain.invoke({"messages": [("user", "x")]}, cfg, durability="sync"))
    out["a plain turn without teams"] = turn
    for k in (1, 5, 20):
        for i in range(k):
            team.send("a", f"m{i}", sender="lead")
        got = counted(worker.step)
        extra = {key: got.get(key, 0) - out["idle poll (roster + inbox)"].get(key, 0) - turn.get(key, 0)
                 for key in ("GET", "LIST", "PUT", "DELETE_MANY")}  # fmt: skip
        out[f"receive {k} as one turn: beyond an idle poll and a plain turn"] = extra
    return out


# -- 2. throughput and latency: 4 sender processes into one member -------------------------------------------


def _sender(spec: dict[str, Any], sender: str, n: int, barrier: Any) -> None:
    team = Team(ObjectStoreSaver(make_store(spec)), "tput")
    team.roster()
    barrier.wait()
    for i in range(n):
        team.send("sink", f"{sender} {i}", sender=sender)


def _ingest_times(saver: ObjectStoreSaver, thread: str) -> dict[str, float]:
    """When each team message first appears in the member's committed history (checkpoint ts)."""
    from datetime import datetime

    seen: dict[str, float] = {}
    for tup in reversed(list(saver.list({"configurable": {"thread_id": thread}}))):
        t = datetime.fromisoformat(tup.checkpoint["ts"]).timestamp()
        values = tup.checkpoint["channel_values"]
        msgs = list(values.get("messages") or [])
        start = values.get("__start__") or {}
        msgs += list(start.get("messages") or []) if isinstance(start, dict) else []
        for m in msgs:
            tm = getattr(m, "additional_kwargs", {}).get("team_message")
            if tm and tm["id"] not in seen:
                seen[tm["id"]] = t
    return seen


def throughput(spec: dict[str, Any], senders: int, per: int) -> dict[str, Any]:
    saver = ObjectStoreSaver(make_store(spec))
    team = Team(saver, "tput")
    team.spawn("sink", role="echo")
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False, poll=0.01, max_poll=0.05, batch=50)
    worker.step()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(senders + 1)
        procs = [ctx.Process(target=_sender, args=(spec, f"s{i}", per, barrier)) for i in range(senders)]
        for p in procs:
            p.start()
        barrier.wait()
        start = time.time()
        total = senders * per
        ingested = 0
        while ingested < total and time.time() - start < 300:
            ingested += worker.step()
        elapsed = time.time() - start
        for p in procs:
            p.join()
    worker._stopping.set()
    created = {m["id"]: m["created_at"] for m in _team_messages(saver, team, "sink")}
    when = _ingest_times(team.member_saver, team.thread_id("sink"))
    lat = sorted(when[i] - created[i] for i in created if i in when)
    return {
        "senders": senders, "messages": total, "ingested": ingested, "seconds": round(elapsed, 2),
        "messages_per_second": round(ingested / elapsed, 1),
        "latency_ms_p50": round(1000 * statistics.median(lat), 1),
        "latency_ms_p99": round(1000 * lat[int(0.99 * (len(lat) - 1))], 1),
    }  # fmt: skip


def _team_messages(saver: ObjectStoreSaver, team: Team, name: str) -> list[dict[str, Any]]:
    tup = team.member_saver.get_tuple({"configurable": {"thread_id": team.thread_id(name)}})
    if tup is None:
        return []
    messages = tup.checkpoint["channel_values"].get("messages", [])
    return [m.additional_kwargs["team_message"] for m in messages
            if m.type == "human" and "team_message" in m.additional_kwargs]  # fmt: skip


# -- 3. redelivery after a kill ----------------------------------------------------------------------------


def _serve_forever(spec: dict[str, Any], owner: str, ttl: float) -> None:
    team = Team(ObjectStoreSaver(make_store(spec)), "redeliver")
    TeamWorker(team, owner, {"echo": echo_build}, auto_reply=False, ttl=ttl, poll=0.05, max_poll=0.2).run()


def redelivery(spec: dict[str, Any], trials: int, ttl: float) -> dict[str, Any]:
    """A worker holds the member and is SIGKILLed; a message is sent at once; a second worker
    (already running, polling) ingests it after the lease expires: kill -> ingested."""
    saver = ObjectStoreSaver(make_store(spec))
    team = Team(saver, "redeliver")
    team.spawn("m", role="echo")
    ctx = multiprocessing.get_context("spawn")
    times = []
    for trial in range(trials):
        holder = ctx.Process(target=_serve_forever, args=(spec, f"holder{trial}", ttl))
        holder.start()
        from langgraph_handoff.ownership import SessionManager

        sessions = SessionManager(team.member_saver)
        while True:  # wait until the holder owns the member (the event itself, polled)
            lease = sessions.get(team.thread_id("m"))
            if lease is not None and lease.owner == f"holder{trial}" and lease.state == "active":
                break
            time.sleep(0.02)
        standby = ctx.Process(target=_serve_forever, args=(spec, f"standby{trial}", ttl))
        standby.start()
        time.sleep(1.0)  # let the standby start polling (it finds the member held)
        os.kill(holder.pid, signal.SIGKILL)
        holder.join()
        killed = time.time()
        msg = team.send("m", f"after kill {trial}", sender="ops")
        while msg.id not in {g["id"] for g in _team_messages(saver, team, "m")}:
            time.sleep(0.02)
        times.append(time.time() - killed)
        os.kill(standby.pid, signal.SIGKILL)
        standby.join()
        while True:  # the standby's lease must expire before the next holder can acquire
            lease = sessions.get(team.thread_id("m"))
            if lease is None or lease.expires_at < time.time():
                break
            time.sleep(0.05)
    return {"ttl_s": ttl, "trials": trials, "redelivery_s_p50": round(statistics.median(times), 2),
            "redelivery_s_max": round(max(times), 2)}  # fmt: skip


# -- 4. chaos ----------------------------------------------------------------------------------------------


def chaos(spec: dict[str, Any], tasks: int, rounds: int) -> dict[str, Any]:
    logdir = Path(tempfile.mkdtemp(prefix="lgh-team-chaos-"))
    cfg = ChaosConfig(store=spec, logdir=logdir, tasks=tasks, rounds=rounds, workers=4, ttl=2.0, p_die=0.01,
                      seconds=1200)  # fmt: skip
    figures = run_chaos(cfg)
    figures["violations"] = figures["violations"][:20]
    return {"tasks": tasks, "rounds": rounds, "workers": 4, **figures}


# -- 5. head to head: the drain-on-read JSONL inbox ----------------------------------------------------------


def _jsonl_sender(path: str, sender: str, n: int, barrier: Any) -> None:
    barrier.wait()
    for i in range(n):
        with open(path, "a") as f:  # one append per message, as the seed's send does
            f.write(json.dumps({"from": sender, "i": i}) + "\n")


def _jsonl_reader(path: str, stop: Any, out: Any, barrier: Any) -> None:
    got: list[str] = []
    p = Path(path)
    barrier.wait()
    while True:
        done = stop.is_set()
        if p.exists():
            content = p.read_text()
            p.write_text("")  # the drain: whatever was appended since read_text() is gone
            got += [line for line in content.splitlines() if line.strip()]
        if done:
            break
    out.put(got)


def drain(senders: int, per: int, spec: dict[str, Any]) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    rows = {}
    with ctx.Manager() as manager:
        path = os.path.join(tempfile.mkdtemp(prefix="lgh-jsonl-"), "inbox.jsonl")
        barrier, stop, out = manager.Barrier(senders + 2), manager.Event(), manager.Queue()
        reader = ctx.Process(target=_jsonl_reader, args=(path, stop, out, barrier))
        procs = [ctx.Process(target=_jsonl_sender, args=(path, f"s{i}", per, barrier)) for i in range(senders)]
        reader.start()
        for p in procs:
            p.start()
        barrier.wait()
        start = time.time()
        for p in procs:
            p.join()
        stop.set()
        got = out.get()
        reader.join()
        elapsed = time.time() - start
        c = Counter(got)
        total = senders * per
        rows["drain-on-read JSONL (one file, read then truncate)"] = {
            "sent": total, "ingested": len(set(got)), "lost": total - len(set(got)),
            "lost_pct": round(100 * (total - len(set(got))) / total, 1),
            "duplicated": sum(v - 1 for v in c.values() if v > 1), "seconds": round(elapsed, 2),
        }  # fmt: skip
    ours = throughput(spec, senders, per)
    saver = ObjectStoreSaver(make_store(spec))
    got_ids = [m["id"] for m in _team_messages(saver, Team(saver, "tput"), "sink")]
    total = senders * per
    rows[f"langgraph-handoff Team ({spec['kind']} store, TeamWorker)"] = {
        "sent": total, "ingested": len(set(got_ids)), "lost": total - len(set(got_ids)),
        "lost_pct": round(100 * (total - len(set(got_ids))) / total, 1),
        "duplicated": len(got_ids) - len(set(got_ids)), "seconds": ours["seconds"],
    }  # fmt: skip
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--local", action="store_true", help="the embedded local store instead of S3")
    ap.add_argument("--only", default="requests,throughput,redelivery,chaos,drain")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "teams-results.json")
    args = ap.parse_args()
    only = set(args.only.split(","))
    q = args.quick
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count()}
    if "requests" in only:
        results["requests"] = requests()
    spec = store_spec(args.local)
    results["store"] = spec["kind"]
    if "throughput" in only:
        results["throughput"] = [throughput(store_spec(args.local), s, (40 if q else 200) // s) for s in (1, 4)]
    if "redelivery" in only:
        results["redelivery"] = redelivery(store_spec(args.local), 2 if q else 5, ttl=2.0)
    if "chaos" in only:
        results["chaos"] = chaos(store_spec(args.local), 10 if q else 100, 3)
    if "drain" in only:
        results["drain"] = drain(4, 50 if q else 500, store_spec(args.local))
    print(json.dumps(results, indent=1))
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
