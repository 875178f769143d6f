#!/usr/bin/env python3
"""A fleet on one bucket: worker processes x threads x turns on Ceph RGW beside PostgresSaver,
on the same machine, in the same run.

Why: the single-process benches measure a turn; a deployment runs several worker processes
against one store, races them on the same threads now and then, and runs store-wide jobs over a
store that keeps growing. This measures those three things, each for ours and for PostgresSaver:

* ``throughput``: W worker processes (1, 2, 4 by default; ``--workers 1,2,4,8``) serve
  ``--threads`` threads (thread i belongs to process i mod W), ``--turns`` turns each, started
  together on a barrier. Rows: the plain saver (``graph.invoke``), ``SessionWorker``
  (``langgraph_handoff.ownership``: a lease per thread, one liveness record per worker) and
  ``PostgresSaver``. Figures: turns per second (all processes, first start to last end), client
  CPU per turn (``time.process_time`` of every worker process, all its threads), server CPU per
  turn (RGW's daemons or PostgreSQL's processes, from ``/proc``), requests per turn (ours,
  ``CountingStore``); ratios against PostgresSaver and owned / plain. Every saver runs its turns
  with ``--durability`` (default ``sync``, the worker's own), so owned / plain is ownership alone.
* ``contention``: two processes on the same ``--race-threads`` threads, ``--race-turns`` turns each,
  every turn appending one message of its own; a barrier before every turn makes both start each
  turn of each thread together (``--race-sync start``: one barrier at the start only). Acknowledged turns
  against the messages present in the final states: a lost update is an acknowledged turn whose
  message is not there. Ours is the plain saver (no leases): the loser of a race gets
  ``StaleWriterError``.
* ``store``: the store grows to each of ``--sizes`` threads (one checkpoint each, metadata
  ``user_id``), then, each on a fresh saver (nothing memoised): ``thread_ids()``, the CLI's
  ``threads`` listing (``inspection.list_threads``), a filtered ``list(None, filter={"user_id":
  NEEDLE}, limit=10)`` (that user has 5 threads at every size), a TTL sweep that deletes nothing, and ``verify`` (up to ``--verify-max``
  threads): seconds, client CPU and requests; PostgresSaver's filtered list beside. Only public
  APIs: whatever indexes or faster walks the package gains show here without changing this file.

The one command (any Python 3.10+; it re-runs itself in ``bench/.venvs/long``, the venv of
``bench/long_threads.py``, whose helpers start RGW and PostgreSQL)::

    python3 bench/fleet.py                                   # about 10 min on a busy 2-core VM
    python3 bench/fleet.py --workers 1,2,4,8 --sizes 1000,10000,30000   # bigger
    python3 bench/fleet.py --phases contention --race-turns 20

It writes ``bench/fleet-results.json`` and prints the tables (docs/performance-log.md, "Fleet").
RGW and PostgreSQL are started on free loopback ports and stopped at the end, also on failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import operator
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "fleet-results.json"
BUCKET = "lgh-fleet"
SAVERS = ("plain", "owned", "postgres")
IN_VENV = "LGH_FLEET_IN_VENV"
#: arguments only a worker process uses (not recorded with the results)
WORKER_ARGS = ("role", "saver", "prefix", "index", "of", "dsn", "results", "report_only")


def log(msg: str) -> None:
    print(f"[fleet {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# what every worker process runs
# ------------------------------------------------------------------------------------------------


def build_graph(checkpointer: Any) -> Any:
    """One node answering the last message: the turn is all checkpointing, which is what differs."""
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict, total=False):
        messages: Annotated[list[str], operator.add]

    g = StateGraph(S)
    g.add_node("agent", lambda s: {"messages": [f"re: {s['messages'][-1]}"]})
    g.add_edge(START, "agent")
    g.add_edge("agent", END)
    return g.compile(checkpointer=checkpointer)


def s3_store(prefix: str) -> Any:
    from langgraph_handoff.stores import ObstoreS3Store

    return ObstoreS3Store(BUCKET, prefix, endpoint_url=os.environ["S3_ENDPOINT_URL"])


@contextlib.contextmanager
def turn_runner(
    saver: str, prefix: str, owner: str, dsn: str, durability: str = "sync"
) -> Iterator[tuple[Callable[[str, str], Any], Any]]:
    """``(turn(thread_id, text), counting store or None)`` for one worker process."""
    if saver == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(dsn) as pg:
            graph = build_graph(pg)
            yield (
                lambda t, text: graph.invoke(
                    {"messages": [text]}, {"configurable": {"thread_id": f"{prefix}{t}"}}, durability=durability
                ),
                None,
            )
        return
    from langgraph_handoff import ObjectStoreSaver
    from langgraph_handoff.stores.counting import CountingStore

    store = CountingStore(s3_store(prefix))
    if saver == "plain":
        graph = build_graph(ObjectStoreSaver(store))
        yield (
            lambda t, text: graph.invoke(
                {"messages": [text]}, {"configurable": {"thread_id": t}}, durability=durability
            ),
            store,
        )
        return
    from langgraph_handoff.ownership import SessionManager, SessionWorker

    worker = SessionWorker(SessionManager(ObjectStoreSaver(store)), owner, build_graph, ttl=30, durability=durability)
    yield lambda t, text: worker.invoke(t, {"messages": [text]}), store
    # not stopped: handing 200 sessions over is not a turn; the process ends, the leases expire


def barrier() -> None:
    """Tell the orchestrator this process is ready, and wait until every process is."""
    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        sys.exit("the orchestrator went away")


def worker_main(a: argparse.Namespace) -> None:
    mine = [f"t{i}" for i in range(a.threads) if i % a.of == a.index]
    out: dict[str, Any] = {"index": a.index, "threads": len(mine)}
    with turn_runner(a.saver, a.prefix, f"w{a.index}", a.dsn, a.durability) as (turn, store):
        if a.role == "turns":
            for t in mine:  # warm: every thread exists (and every lease is held) before timing
                turn(t, "hello")
            if store is not None:
                store.reset()
            barrier()
            c0, t0 = time.process_time(), time.monotonic()
            for n in range(a.turns):
                for t in mine:
                    turn(t, f"w{a.index} turn {n}")
            out.update(start=t0, end=time.monotonic(), cpu=time.process_time() - c0, turns=a.turns * len(mine))
            out["requests"] = store.requests if store is not None else None
        else:  # race: every process runs every thread; a turn is acknowledged or refused
            from langgraph_handoff.errors import StaleWriterError

            threads = [f"t{i}" for i in range(a.threads)]
            acked: list[str] = []
            refused_texts: list[str] = []
            refused: dict[str, int] = {}
            if a.race_sync != "turn":
                barrier()
            for n in range(a.turns):
                for t in threads:
                    text = f"p{a.index}:{t}:{n}"
                    if a.race_sync == "turn":
                        barrier()  # both processes start this turn of this thread together
                    try:
                        turn(t, text)
                    except StaleWriterError as exc:
                        refused[type(exc).__name__] = refused.get(type(exc).__name__, 0) + 1
                        refused_texts.append(text)
                        continue
                    acked.append(text)
            out.update(acked=acked, refused=refused, refused_texts=refused_texts)
    print("RESULT " + json.dumps(out), flush=True)


# ------------------------------------------------------------------------------------------------
# the orchestrator
# ------------------------------------------------------------------------------------------------


def proc_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) so far of ``pids`` and all their descendants, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # after the name: state ppid ... utime(12) stime(13) cutime(14) cstime(15)
        stats[int(d.name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / tick)
    keep, grew = set(pids), True
    while grew:
        more = {p for p, (pp, _) in stats.items() if pp in keep} - keep
        keep |= more
        grew = bool(more)
    return sum(stats[p][1] for p in keep if p in stats)


def server_pids(servers: Any, rgw_dir: str) -> dict[str, list[int]]:
    """RGW's daemons (their pid file) and the postmaster (found by the port on its command line)."""
    rgw = [int(line.split()[1]) for line in (Path(rgw_dir) / "pids").read_text().splitlines() if line.strip()]
    port = servers.pg["dsn"].rsplit(":", 1)[1].split("/")[0]
    pg = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                cmd = (d / "cmdline").read_bytes().split(b"\0")
                if cmd and cmd[0].endswith(b"postgres") and f"port={port}".encode() in cmd:
                    pg.append(int(d.name))
    return {"rgw": rgw, "postgres": pg}


def spawn(a: argparse.Namespace, role: str, saver: str, prefix: str, threads: int, turns: int, index: int, of: int):
    cmd = [sys.executable, __file__, "--role", role, "--saver", saver, "--prefix", prefix]
    cmd += ["--threads", str(threads), "--turns", str(turns), "--index", str(index), "--of", str(of), "--dsn", a.dsn]
    cmd += ["--durability", a.durability, "--race-sync", a.race_sync]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def run_together(procs: list[subprocess.Popen], on_go: Callable[[], None], barriers: int = 1) -> list[dict]:
    """``barriers`` times: wait until every process is READY, release them at once; then collect
    their RESULT lines. ``on_go`` runs once, before the first release."""
    for n in range(barriers):
        for p in procs:
            line = p.stdout.readline() if p.stdout else ""
            if line.strip() != "READY":
                for q in procs:
                    q.kill()
                sys.exit(f"a worker failed before the barrier (rc={p.wait()})")
        if n == 0:
            on_go()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("GO\n")
            p.stdin.flush()
    results = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            sys.exit(f"a worker failed (rc={p.returncode})")
        results.append(json.loads(next(x for x in out.splitlines() if x.startswith("RESULT "))[7:]))
    return results


def phase_throughput(a: argparse.Namespace, pids: dict[str, list[int]]) -> list[dict]:
    """Every (saver, worker count) ``--rounds`` times; within a round the savers' order alternates,
    so a change in the machine's load does not always fall on the same saver."""
    rows = []
    for rnd in range(a.rounds):
        for k, w in enumerate(a.workers):
            for saver in a.savers if (rnd + k) % 2 == 0 else a.savers[::-1]:
                rows.append(throughput_run(a, pids, saver, w, rnd))
    return rows


def throughput_run(a: argparse.Namespace, pids: dict[str, list[int]], saver: str, w: int, rnd: int) -> dict:
    prefix = f"tp-{saver}-{w}-{uuid.uuid4().hex[:6]}/"
    server = pids["postgres" if saver == "postgres" else "rgw"]
    procs = [spawn(a, "turns", saver, prefix, a.threads, a.turns, i, w) for i in range(w)]
    before: list[float] = []
    res = run_together(procs, lambda: before.append(proc_cpu(server)))
    server_cpu = proc_cpu(server) - before[0]
    turns = sum(r["turns"] for r in res)
    wall = max(r["end"] for r in res) - min(r["start"] for r in res)
    req = [r["requests"] for r in res if r["requests"] is not None]
    row = {
        "saver": saver,
        "workers": w,
        "round": rnd,
        "turns": turns,
        "wall_s": wall,
        "turns_per_s": turns / wall,
        "client_cpu_ms_per_turn": sum(r["cpu"] for r in res) / turns * 1e3,
        "server_cpu_ms_per_turn": server_cpu / turns * 1e3,
        "requests_per_turn": sum(req) / turns if req else None,
        "load": os.getloadavg()[0],
    }
    log(
        f"throughput round {rnd} {saver} x{w}: {row['turns_per_s']:.0f} turns/s, client "
        f"{row['client_cpu_ms_per_turn']:.2f} ms/turn, server {row['server_cpu_ms_per_turn']:.2f} ms/turn "
        f"(load {row['load']:.1f})"
    )
    return row


def medians(rows: list[dict]) -> dict[tuple[str, int], dict]:
    """The median of each figure over the rounds, per (saver, workers)."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["saver"], r["workers"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        m: dict[str, Any] = {"rounds": len(rs)}
        for f in ("turns_per_s", "client_cpu_ms_per_turn", "server_cpu_ms_per_turn", "requests_per_turn", "load"):
            xs = [r[f] for r in rs if r[f] is not None]
            m[f] = statistics.median(xs) if xs else None
        out[key] = m
    return out


def final_messages(saver: str, prefix: str, dsn: str, threads: int) -> set[str]:
    """Every user message present in the final states of the race's threads."""
    with turn_runner_state(saver, prefix, dsn) as get:
        present: set[str] = set()
        for i in range(threads):
            present.update(m for m in get(f"t{i}") if not m.startswith("re: "))
        return present


@contextlib.contextmanager
def turn_runner_state(saver: str, prefix: str, dsn: str) -> Iterator[Callable[[str], list[str]]]:
    if saver == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(dsn) as pg:
            graph = build_graph(pg)
            yield lambda t: graph.get_state({"configurable": {"thread_id": f"{prefix}{t}"}}).values["messages"]
        return
    from langgraph_handoff import ObjectStoreSaver

    graph = build_graph(ObjectStoreSaver(s3_store(prefix)))
    yield lambda t: graph.get_state({"configurable": {"thread_id": t}}).values["messages"]


def phase_contention(a: argparse.Namespace) -> list[dict]:
    rows = []
    for saver in ("postgres", "plain"):
        prefix = f"race-{saver}-{uuid.uuid4().hex[:6]}/"
        procs = [spawn(a, "race", saver, prefix, a.race_threads, a.race_turns, i, 2) for i in range(2)]
        res = run_together(procs, lambda: None, a.race_threads * a.race_turns if a.race_sync == "turn" else 1)
        present = final_messages(saver, prefix, a.dsn, a.race_threads)
        row: dict[str, Any] = {"saver": saver, "processes": [], "attempted": a.race_threads * a.race_turns * 2}
        for r in res:
            acked = set(r["acked"])
            row["processes"].append(
                {
                    "acked": len(acked),
                    "refused": r["refused"],
                    "acked_missing": len(acked - present),
                    # a refused turn's input may be in the thread all the same (StaleWriterError.input_in_thread)
                    "refused_present": len(set(r["refused_texts"]) & present),
                }
            )
        row["acked"] = sum(p["acked"] for p in row["processes"])
        row["lost"] = sum(p["acked_missing"] for p in row["processes"])
        row["present"] = len(present)
        log(f"contention {saver}: {row['acked']} acked, {row['lost']} lost, {row['processes']}")
        rows.append(row)
    return rows


def _measure(fn: Callable[[], Any], store: Any = None) -> dict[str, Any]:
    if store is not None:
        store.reset()
    c0, t0 = time.process_time(), time.monotonic()
    value = fn()
    out = {"s": time.monotonic() - t0, "cpu_s": time.process_time() - c0, "value": value}
    if store is not None:
        out["requests"] = store.requests
    return out


#: the user whose threads the filtered list looks for: 5 threads at every store size, fewer than
#: its ``limit=10``, so a list that reads threads to filter them reads every one, and a list that
#: finds them another way reads 5
NEEDLE = "needle"


def user_of(i: int) -> str:
    """Thread i's ``user_id``: one of 1,000 users, except 5 of the first 1,000 threads (NEEDLE's)."""
    return NEEDLE if i < 1000 and i % 200 == 0 else f"u{i % 1000}"


def grow_ours(prefix: str, start: int, stop: int) -> None:
    """Threads start..stop-1, one checkpoint each, with a ``user_id`` (:func:`user_of`)."""
    from langgraph.checkpoint.base import empty_checkpoint

    from langgraph_handoff import ObjectStoreSaver

    saver = ObjectStoreSaver(s3_store(prefix))

    def one(i: int) -> None:
        cp = empty_checkpoint()
        version = saver.get_next_version(None, None)
        cp["channel_values"] = {"messages": [f"hello from {i}"]}
        cp["channel_versions"] = {"messages": version}
        meta = {"source": "input", "step": -1, "parents": {}, "user_id": user_of(i)}
        saver.put({"configurable": {"thread_id": f"t{i}", "checkpoint_ns": ""}}, cp, meta, {"messages": version})

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(one, range(start, stop)))


def grow_pg(pg: Any, start: int, stop: int) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    for i in range(start, stop):
        cp = empty_checkpoint()
        version = pg.get_next_version(None, None)
        cp["channel_values"] = {"messages": [f"hello from {i}"]}
        cp["channel_versions"] = {"messages": version}
        meta = {"source": "input", "step": -1, "parents": {}, "user_id": user_of(i)}
        pg.put({"configurable": {"thread_id": f"t{i}", "checkpoint_ns": ""}}, cp, meta, {"messages": version})


def phase_store(a: argparse.Namespace) -> list[dict]:
    from langgraph.checkpoint.postgres import PostgresSaver

    from langgraph_handoff import ObjectStoreSaver
    from langgraph_handoff.inspection import list_threads, verify_store
    from langgraph_handoff.stores.counting import CountingStore

    prefix = f"store-{uuid.uuid4().hex[:6]}/"
    rows, have = [], 0
    flt = {"user_id": NEEDLE}
    with PostgresSaver.from_conn_string(a.dsn) as pg:
        for size in a.sizes:
            t0 = time.monotonic()
            grow_ours(prefix, have, size)
            built_ours = time.monotonic() - t0
            t0 = time.monotonic()
            grow_pg(pg, have, size)
            built_pg = time.monotonic() - t0
            have = size
            log(f"store: {size} threads (built in {built_ours:.0f} s on RGW, {built_pg:.0f} s on PostgreSQL)")

            def fresh() -> tuple[Any, Any]:
                store = CountingStore(s3_store(prefix))
                return ObjectStoreSaver(store), store

            row: dict[str, Any] = {"threads": size, "load": os.getloadavg()[0]}
            s, st = fresh()
            row["thread_ids"] = _measure(lambda s=s: len(s.thread_ids()), st)
            s, st = fresh()
            row["threads_cli"] = _measure(lambda s=s: len(list_threads(s).rows), st)
            s, st = fresh()
            row["filtered_list"] = _measure(lambda s=s: len(list(s.list(None, filter=flt, limit=10))), st)
            assert row["filtered_list"]["value"] == 5, row["filtered_list"]
            s, st = fresh()
            row["sweep"] = _measure(lambda s=s: s.sweep().deleted, st)
            if size <= a.verify_max:
                s, st = fresh()
                row["verify"] = _measure(lambda s=s: len(verify_store(s).problems), st)
            row["pg_filtered_list"] = _measure(lambda: len(list(pg.list(None, filter=flt, limit=10))))
            assert row["pg_filtered_list"]["value"] == 5, row["pg_filtered_list"]
            log("store: " + ", ".join(f"{k} {v['s']:.1f} s" for k, v in row.items() if isinstance(v, dict)))
            rows.append(row)
    return rows


# ------------------------------------------------------------------------------------------------
# tables
# ------------------------------------------------------------------------------------------------


def tables(data: dict) -> str:
    lines = [f"fleet bench, {data['meta']['date']}; {data['meta']['machine']}; load {data['meta']['load']}"]
    tp = data.get("throughput") or []
    if tp:
        by = medians(tp)
        lines += [
            "",
            f"median of {max(r['round'] for r in tp) + 1} round(s)",
            "workers | saver    | turns/s | client ms/turn | server ms/turn | req/turn | vs PG: turns/s, client CPU",
        ]
        for w in sorted({r["workers"] for r in tp}):
            pg = by.get(("postgres", w))
            for s in SAVERS:
                r = by.get((s, w))
                if r is None:
                    continue
                vs = (
                    f"{r['turns_per_s'] / pg['turns_per_s']:.2f}x, "
                    f"{r['client_cpu_ms_per_turn'] / pg['client_cpu_ms_per_turn']:.2f}x"
                    if pg
                    else "-"
                )
                req = f"{r['requests_per_turn']:.2f}" if r["requests_per_turn"] is not None else "-"
                lines.append(
                    f"{w:>7} | {s:<8} | {r['turns_per_s']:>7.0f} | {r['client_cpu_ms_per_turn']:>14.2f} | "
                    f"{r['server_cpu_ms_per_turn']:>14.2f} | {req:>8} | {vs}"
                )
            p, o = by.get(("plain", w)), by.get(("owned", w))
            paired = sorted(
                x["client_cpu_ms_per_turn"] / y["client_cpu_ms_per_turn"]
                for x in tp
                for y in tp
                if x["saver"] == "owned" and y["saver"] == "plain" and x["workers"] == y["workers"] == w
                if x["round"] == y["round"]
            )
            if paired:
                lines.append(
                    f"{w:>7} | owned/plain client CPU within each round: " + ", ".join(f"{x:.2f}x" for x in paired)
                )
            if p and o:
                lines.append(
                    f"{w:>7} | owned/plain: client CPU {o['client_cpu_ms_per_turn'] / p['client_cpu_ms_per_turn']:.2f}x,"
                    f" turns/s {o['turns_per_s'] / p['turns_per_s']:.2f}x,"
                    f" +{o['requests_per_turn'] - p['requests_per_turn']:.2f} requests/turn"
                )
        cpu = [
            by[("owned", w)]["client_cpu_ms_per_turn"] / by[("plain", w)]["client_cpu_ms_per_turn"]
            for w in {r["workers"] for r in tp}
            if ("owned", w) in by and ("plain", w) in by
        ]
        if cpu:
            lines.append(f"owned/plain client CPU per turn, median over worker counts: {statistics.median(cpu):.2f}x")
    for r in data.get("contention") or []:
        lines.append(
            f"contention {r['saver']}: {r['attempted']} turns attempted, {r['acked']} acknowledged, "
            f"{r['lost']} acknowledged but missing from the final states; per process: {r['processes']}"
        )
    st = data.get("store") or []
    if st:
        ops = ["thread_ids", "threads_cli", "filtered_list", "sweep", "verify", "pg_filtered_list"]
        lines += ["", "threads | " + " | ".join(ops) + "   (seconds, requests)"]
        for r in st:
            cells = []
            for op in ops:
                m = r.get(op)
                cells.append(
                    "-"
                    if m is None
                    else (f"{m['s']:.1f} s" if m["s"] >= 1 else f"{m['s'] * 1e3:.0f} ms")
                    + (f", {m['requests']}" if "requests" in m else "")
                )
            lines.append(f"{r['threads']:>7} | " + " | ".join(cells))
    return "\n".join(lines)


def orchestrate(a: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE))
    from long_threads import Servers

    phases = set(a.phases.split(","))
    data: dict[str, Any] = {}
    load_start = os.getloadavg()
    t_start = time.monotonic()
    rgw_dir = tempfile.mkdtemp(prefix="fleet-rgw.")
    servers_args = argparse.Namespace(rgw_dir=rgw_dir, mon_port=0, rgw_port=0, pg_port=0)
    with Servers(servers_args, sys.executable) as servers:
        servers.start_rgw()
        servers.start_postgres()
        a.dsn = servers.pg["dsn"]
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(a.dsn) as pg:
            pg.setup()
        from langgraph_handoff.stores import ObstoreS3Store

        ObstoreS3Store(BUCKET, "", endpoint_url=os.environ["S3_ENDPOINT_URL"], create_bucket=True)
        pids = server_pids(servers, rgw_dir)
        if "throughput" in phases:
            data["throughput"] = phase_throughput(a, pids)
        if "contention" in phases:
            data["contention"] = phase_contention(a)
        if "store" in phases:
            data["store"] = phase_store(a)
        server_desc, pg_version = servers.server_desc, servers.pg["version"]
    data["meta"] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "runtime_s": round(time.monotonic() - t_start),
        "machine": f"{os.cpu_count()}-core VM shared with other jobs, {platform.system()} {platform.release()}",
        "load": " -> ".join("/".join(f"{x:.1f}" for x in la) for la in (load_start, os.getloadavg())),
        "server": server_desc,
        "postgres": pg_version,
        "args": {k: v for k, v in vars(a).items() if k not in WORKER_ARGS},
    }
    Path(a.results).write_text(json.dumps(data, indent=1, default=str))
    print(tables(data))
    log(f"done in {data['meta']['runtime_s']} s; wrote {a.results}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phases", default="throughput,contention,store")
    ap.add_argument("--workers", default="1,2,4", help="worker process counts, e.g. 1,2,4,8")
    ap.add_argument("--savers", default=",".join(SAVERS), help="throughput: any of plain,owned,postgres")
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--turns", type=int, default=3, help="timed turns per thread (after one warm turn)")
    ap.add_argument("--rounds", type=int, default=2, help="throughput rounds; the tables give medians")
    ap.add_argument(
        "--durability",
        default="sync",
        help="LangGraph durability of every saver's turns (default: SessionWorker's, so owned/plain is ownership alone)",
    )
    ap.add_argument("--race-threads", type=int, default=40)
    ap.add_argument("--race-turns", type=int, default=10)
    ap.add_argument(
        "--race-sync",
        choices=["turn", "start"],
        default="turn",
        help="contention: a barrier before every turn (both processes start each turn of each thread "
        "together), or one at the start only",
    )
    ap.add_argument("--sizes", default="1000,10000", help="store sizes in threads, e.g. 1000,10000,30000")
    ap.add_argument("--verify-max", type=int, default=10000, help="run verify only up to this many threads")
    ap.add_argument("--results", default=str(RESULTS))
    ap.add_argument("--report-only", action="store_true", help="print the tables of --results")
    # a worker process's own arguments
    ap.add_argument("--role", default="", help=argparse.SUPPRESS)
    ap.add_argument("--saver", default="", help=argparse.SUPPRESS)
    ap.add_argument("--prefix", default="", help=argparse.SUPPRESS)
    ap.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--of", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--dsn", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.report_only:
        print(tables(json.loads(Path(a.results).read_text())))
        return
    if a.role:
        worker_main(a)
        return
    if not os.environ.get(IN_VENV):  # re-run in the bench venv (PostgresSaver, psycopg, obstore)
        sys.path.insert(0, str(HERE))
        from long_threads import VENVS, ensure_venv

        py = ensure_venv("long", VENVS["long"])
        os.environ[IN_VENV] = "1"
        os.execv(py, [py, __file__, *sys.argv[1:]])
    a.workers = [int(x) for x in a.workers.split(",") if x]
    a.savers = [x for x in a.savers.split(",") if x]
    if not set(a.savers) <= set(SAVERS):
        sys.exit(f"--savers: any of {','.join(SAVERS)}")
    a.sizes = [int(x) for x in a.sizes.split(",") if x]
    orchestrate(a)


if __name__ == "__main__":
    main()
