#!/usr/bin/env python3
"""Performance worker: ONE saver, ONE phase (cpu, concurrency, latency or memory), in a fresh process.

``bench.py`` starts one of these per (phase, saver), one after another, in the venv the saver needs.
A fresh process per measurement keeps savers from sharing caches, connection pools, allocator state
or resident memory. The workload is the request-count phase's graph (``workload.build_graph``: 5
nodes in sequence, one ~120 B message each) with ``async def`` nodes, driven with ``ainvoke``.

Phases (what is timed excludes a warm-up and the checks that follow it):

* ``cpu``: ``--rounds`` rounds of ``--conversations`` new threads, ``--in-flight`` at a time; client
  CPU of this process (``time.process_time``: user + system, every thread of the process, so a
  transport's thread pool counts; the S3 server and the proxy are other processes and do not).
* ``concurrency``: per level of ``--levels`` conversations in flight, max(``--min-conversations``,
  ``--waves`` x level) new threads; throughput and per-invoke latency.
* ``latency``: sequential invokes, ``--conversations`` threads x 2 turns, per durability mode,
  through the proxy that adds a fixed delay per request; wall time per invoke.
* ``memory``: ``--threads`` conversations invoked, then ``get_state`` on each, twice; resident
  memory (VmRSS) after each step and the second pass's CPU and store requests.

S3 requests are counted by the proxy the saver talks to (``--count-at``): the worker names each
step there as ``PHASE:SAVER|STEP`` and ``bench.py`` reads the counts afterwards.

Usage: python perfwork.py --phase cpu --saver handoff-local --out FILE [--endpoint URL ...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from workload import (  # noqa: E402
    REGION,
    build_graph,
    cfg,
    direct_s3,
    ensure_bucket,
    installed_versions,
    make_serde_shim,
    s3_delete_prefix,
    user_msg,
)

SAVERS = {
    # name: (venv, uses S3, description)
    "inmemory": ("main", False, "LangGraph `InMemorySaver` (reference)"),
    "sqlite-async": ("main", False, "LangGraph `AsyncSqliteSaver` on a temp file (aiosqlite)"),
    "handoff-memory": ("main", False, 'ours: `ObjectStoreSaver.from_url("memory://")`'),
    "handoff-local": ("main", False, 'ours: `ObjectStoreSaver.from_url("file://<temp dir>")` (fsync on)'),
    "handoff-s3-boto3": ("main", True, "ours on S3: `from_url(s3://...&transport=boto3)`"),
    "handoff-s3-obstore": ("main", True, "ours on S3: `from_url(s3://...&transport=obstore)`, async on the loop"),
    "handoff-s3-obstore-threads": (
        "main",
        True,
        "ours on S3: `from_url(s3://...&transport=obstore&async_io=threads)`, async through the pool",
    ),
    "objectstorage": ("main", True, "langgraph-checkpoint-objectstorage 0.1.15 (s3fs), its async API"),
    "s3-peer+shim": ("aio", True, "langgraph-checkpoint-s3 0.1.3 `S3CheckpointSaver` + serde shim"),
    "s3-peer-async+shim": (
        "aio",
        True,
        "langgraph-checkpoint-s3 0.1.3 `AsyncS3CheckpointSaver` (aioboto3) + serde shim",
    ),
}
DURABILITIES = ("sync", "async", "exit")
MESSAGES_AFTER_ONE_TURN = 6  # the user message + one per node


class NotAvailable(Exception):
    """The saver cannot be built in this environment (reported, not a crash)."""


def rss_kib() -> dict[str, int]:
    """VmRSS (resident now) and VmHWM (peak resident) of this process, in KiB."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def cpu_now() -> dict[str, float]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu": time.process_time(), "user": ru.ru_utime, "sys": ru.ru_stime, "wall": time.perf_counter()}


def cpu_since(t0: dict[str, float]) -> dict[str, float]:
    t1 = cpu_now()
    return {k: t1[k] - t0[k] for k in t0}


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    s = sorted(values)
    return s[min(len(s), max(1, math.ceil(q / 100 * len(s)))) - 1]


class Marker:
    """Names the current step at the counting proxy (no-op without one)."""

    def __init__(self, url: str, phase: str, saver: str) -> None:
        self.url, self.prefix = url, f"{phase}:{saver}"

    def __call__(self, step: str) -> None:
        if self.url:
            name = urllib.parse.quote(f"{self.prefix}|{step}")
            urllib.request.urlopen(f"{self.url}/__bench/phase?name={name}", timeout=10).read()


# ------------------------------------------------------------------------------------------------
# savers
# ------------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def open_saver(a: argparse.Namespace, info: dict, **cache: int):
    """Yield the saver ``a.saver``; ``info`` receives how it was built. Raises NotAvailable."""
    name = a.saver
    tmp = tempfile.mkdtemp(prefix=f"perf-{name}-", dir=a.tmp_dir or None)
    bucket = "bench-perf-" + name.replace("+", "-")
    prefix = f"{a.run_id}/{a.phase}"
    s3 = direct_s3(a.direct) if SAVERS[name][1] else None
    if s3 is not None:
        ensure_bucket(s3, bucket)  # directly on the server: never counted
    try:
        if name == "inmemory":
            from langgraph.checkpoint.memory import InMemorySaver

            yield InMemorySaver()
        elif name == "sqlite-async":
            try:
                import aiosqlite  # noqa: F401
                from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
            except ImportError as exc:
                raise NotAvailable(f"{exc}") from exc
            async with AsyncSqliteSaver.from_conn_string(os.path.join(tmp, "perf.db")) as saver:
                yield saver
        elif name.startswith("handoff-"):
            from langgraph_handoff import ObjectStoreSaver

            if name == "handoff-memory":
                url = "memory://"
            elif name == "handoff-local":
                url = f"file://{tmp}/store"
            else:
                transport = name.split("-")[2]
                query = {"endpoint_url": a.endpoint, "transport": transport}
                if name.endswith("-threads"):
                    query["async_io"] = "threads"
                q = urllib.parse.urlencode(query)
                url = f"s3://{bucket}/{prefix}?{q}"
                if transport == "obstore":
                    try:
                        from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store  # noqa: F401
                    except ImportError as exc:
                        raise NotAvailable(f"langgraph_handoff.stores.obstore_s3: {type(exc).__name__}: {exc}") from exc
            saver = ObjectStoreSaver.from_url(url)
            if cache:  # from_url has no cache arguments: the same store, a saver built with them
                saver = ObjectStoreSaver(saver.store, **cache)
            store = type(saver.store).__name__
            info.update(url=url.replace(a.endpoint, "<endpoint>") if a.endpoint else url, store=store)
            if name.startswith("handoff-s3-obstore") and store != "ObstoreS3Store":
                raise NotAvailable(f"from_url ignored transport=obstore and built a {store}")
            if name == "handoff-s3-boto3" and store != "S3Store":
                raise NotAvailable(f"from_url built a {store} for transport=boto3")
            async with saver:
                yield saver
        elif name == "objectstorage":
            from langgraph_checkpoint_objectstorage import ObjectStorageSaver

            yield ObjectStorageSaver.from_conn_string(
                f"s3://{bucket}/{prefix}",
                key=os.environ["AWS_ACCESS_KEY_ID"],
                secret=os.environ["AWS_SECRET_ACCESS_KEY"],
                client_kwargs={"endpoint_url": a.endpoint, "region_name": REGION},
            )
        elif name == "s3-peer+shim":
            import boto3
            from langgraph_checkpoint_s3 import S3CheckpointSaver

            client = boto3.client("s3", endpoint_url=a.endpoint, region_name=REGION)
            yield S3CheckpointSaver(bucket, prefix=prefix + "/", s3_client=client, serde=make_serde_shim())
        elif name == "s3-peer-async+shim":
            from langgraph_checkpoint_s3 import AsyncS3CheckpointSaver

            # it builds a new aioboto3 client per operation from its session, with no endpoint
            # argument: botocore's AWS_ENDPOINT_URL_S3 points those clients at the proxy
            os.environ["AWS_ENDPOINT_URL_S3"] = a.endpoint
            yield AsyncS3CheckpointSaver(bucket, prefix=prefix + "/", serde=make_serde_shim())
        else:
            raise SystemExit(f"unknown saver {name}")
    finally:
        if s3 is not None:
            with contextlib.suppress(Exception):
                s3_delete_prefix(s3, bucket, f"{a.run_id}/")
        shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# workload helpers
# ------------------------------------------------------------------------------------------------


async def run_conversations(graph, threads: list[str], in_flight: int, **kw: Any) -> list[float]:
    """One ``ainvoke`` per thread, at most ``in_flight`` at a time; per-invoke latencies (s).
    Every invoke runs to the end even if one fails; then the first failure is raised."""
    sem = asyncio.Semaphore(in_flight)
    latencies: list[float] = []

    async def one(thread: str) -> None:
        async with sem:
            t0 = time.perf_counter()
            await graph.ainvoke(user_msg(thread), cfg(thread), **kw)
            latencies.append(time.perf_counter() - t0)

    outcomes = await asyncio.gather(*(one(t) for t in threads), return_exceptions=True)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    if errors:
        raise errors[0]
    return latencies


async def check_stored(graph, threads: list[str], turns: int = 1) -> None:
    """A saver that dropped checkpoints would look fast: read back a few threads (untimed)."""
    want = MESSAGES_AFTER_ONE_TURN * turns
    for t in threads:
        got = len((await graph.aget_state(cfg(t))).values.get("messages", []))
        if got != want:
            raise AssertionError(f"thread {t}: {got} messages stored, expected {want}")


def sample(threads: list[str]) -> list[str]:
    return [threads[0], threads[len(threads) // 2], threads[-1]]


def latency_stats(lat: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(pct(lat, 50) * 1000, 2),
        "p99_ms": round(pct(lat, 99) * 1000, 2),
        "mean_ms": round(statistics.fmean(lat) * 1000, 2),
        "max_ms": round(max(lat) * 1000, 2),
    }


# ------------------------------------------------------------------------------------------------
# phases
# ------------------------------------------------------------------------------------------------


async def phase_cpu(a, graph, mark) -> dict:
    mark("warmup")
    warm = [f"cpu-warm-{i}" for i in range(a.warmup)]
    await run_conversations(graph, warm, a.in_flight)
    await check_stored(graph, sample(warm))
    rounds = []
    for r in range(a.rounds):
        threads = [f"cpu-r{r}-{i}" for i in range(a.conversations)]
        gc.collect()
        mark(f"round{r}")
        t0 = cpu_now()
        lat = await run_conversations(graph, threads, a.in_flight)
        d = cpu_since(t0)
        mark("check")
        await check_stored(graph, sample(threads))
        n = len(threads)
        rounds.append(
            {
                "invokes": n,
                "cpu_ms_per_invoke": round(d["cpu"] / n * 1000, 3),
                "user_ms_per_invoke": round(d["user"] / n * 1000, 3),
                "sys_ms_per_invoke": round(d["sys"] / n * 1000, 3),
                "wall_s": round(d["wall"], 3),
                "p50_ms": round(pct(lat, 50) * 1000, 2),
            }
        )
    mark("idle")
    cpu = [r["cpu_ms_per_invoke"] for r in rounds]
    return {
        "rounds": rounds,
        "cpu_ms_per_invoke_median": round(statistics.median(cpu), 3),
        "cpu_ms_per_invoke_min": min(cpu),
        "cpu_ms_per_invoke_max": max(cpu),
        "conversations": a.conversations,
        "in_flight": a.in_flight,
        "warmup": a.warmup,
    }


async def phase_concurrency(a, graph, mark) -> dict:
    mark("warmup")
    warm = [f"conc-warm-{i}" for i in range(a.warmup)]
    await run_conversations(graph, warm, min(8, a.warmup or 1))
    levels = []
    for level in a.levels:
        n = max(a.min_conversations, a.waves * level)
        threads = [f"conc-{level}-{i}" for i in range(n)]
        gc.collect()
        mark(f"level{level}")
        t0 = cpu_now()
        lat = await run_conversations(graph, threads, level)
        d = cpu_since(t0)
        mark("check")
        await check_stored(graph, sample(threads))
        levels.append(
            {
                "in_flight": level,
                "invokes": n,
                "wall_s": round(d["wall"], 3),
                "invokes_per_s": round(n / d["wall"], 1),
                "cpu_ms_per_invoke": round(d["cpu"] / n * 1000, 3),
                **latency_stats(lat),
            }
        )
    mark("idle")
    return {"levels": levels, "warmup": a.warmup}


async def phase_latency(a, graph, mark) -> dict:
    mark("warmup")
    await run_conversations(graph, [f"lat-warm-{i}" for i in range(a.warmup)], 1)
    modes = {}
    for durability in DURABILITIES:
        per_turn: dict[int, list[float]] = {1: [], 2: []}
        threads = [f"lat-{durability}-{i}" for i in range(a.conversations)]
        for thread in threads:
            for turn in (1, 2):
                mark(f"{durability}|turn{turn}")
                t0 = time.perf_counter()
                await graph.ainvoke(user_msg(thread), cfg(thread), durability=durability)
                per_turn[turn].append(time.perf_counter() - t0)
        mark("check")
        await check_stored(graph, sample(threads), turns=2)
        modes[durability] = {
            f"turn{t}": {"invokes": len(v), "median_ms": round(statistics.median(v) * 1000, 1), **latency_stats(v)}
            for t, v in per_turn.items()
        }
    mark("idle")
    return {"modes": modes, "conversations": a.conversations, "warmup": a.warmup}


async def phase_memory(a, graph, saver, mark) -> dict:
    from langgraph_handoff.stores.counting import CountingStore

    await run_conversations(graph, [f"mem-warm-{i}" for i in range(a.warmup)], 8)
    gc.collect()
    steps = {"baseline": rss_kib()}
    threads = [f"mem-{i}" for i in range(a.threads)]
    t0 = cpu_now()
    await run_conversations(graph, threads, a.in_flight)
    invoke = cpu_since(t0)
    gc.collect()
    steps["after_invokes"] = rss_kib()
    out: dict[str, Any] = {
        "threads": a.threads,
        "invoke_cpu_ms": round(invoke["cpu"] / len(threads) * 1000, 3),
    }
    store = getattr(saver, "store", None)
    for p in (1, 2):
        counting = None
        if p == 2 and store is not None:
            # count the second pass's requests: the saver's own store, wrapped for this pass only
            counting = saver.store = CountingStore(store)
        gc.collect()
        t0 = cpu_now()
        for t in threads:
            n = len(graph.get_state(cfg(t)).values["messages"])
            if n != MESSAGES_AFTER_ONE_TURN:
                raise AssertionError(f"thread {t}: {n} messages")
        d = cpu_since(t0)
        if counting is not None:
            saver.store = store
            out["pass2_requests_per_get_state"] = round(counting.requests / len(threads), 3)
            out["pass2_requests"] = dict(counting.counts)
            del counting
        gc.collect()
        steps[f"after_get_state_pass{p}"] = rss_kib()
        out[f"pass{p}_cpu_ms_per_get_state"] = round(d["cpu"] / len(threads) * 1000, 4)
        out[f"pass{p}_wall_s"] = round(d["wall"], 3)
    cache = getattr(saver, "_cache", None)
    if cache is not None:  # our HeadCache: what it holds by its own estimate
        with contextlib.suppress(Exception):
            out["cache_namespaces"] = len(cache)
        with contextlib.suppress(Exception):
            out["cache_bytes_estimate"] = int(cache.bytes)
    base = steps["baseline"]["VmRSS"]
    out["rss_kib"] = steps
    out["rss_delta_mib"] = {k: round((v["VmRSS"] - base) / 1024, 1) for k, v in steps.items() if k != "baseline"}
    out["baseline_rss_mib"] = round(base / 1024, 1)
    out["peak_rss_mib"] = round(max(v["VmHWM"] for v in steps.values()) / 1024, 1)
    return out


# ------------------------------------------------------------------------------------------------


def versions() -> dict:
    return installed_versions(
        (
            "langgraph",
            "langgraph-checkpoint",
            "langgraph-handoff",
            "boto3",
            "obstore",
            "aiosqlite",
            "langgraph-checkpoint-sqlite",
            "langgraph-checkpoint-objectstorage",
            "langgraph-checkpoint-s3",
            "aioboto3",
        )
    )


async def amain(a: argparse.Namespace) -> dict:
    venv, uses_s3, description = SAVERS[a.saver]
    result: dict[str, Any] = {"phase": a.phase, "saver": a.saver, "venv": venv, "description": description}
    if a.cache_label:
        result["cache"] = a.cache_label
    if uses_s3 and not a.endpoint:
        result.update(available=False, reason="no S3 endpoint given")
        return result
    mark = Marker(a.count_at if uses_s3 else "", a.phase, a.saver + (f"[{a.cache_label}]" if a.cache_label else ""))
    info: dict[str, Any] = {}
    cache = json.loads(a.cache) if a.cache else {}
    try:
        async with open_saver(a, info, **cache) as saver:
            result.update(info)
            graph = build_graph(saver, async_nodes=True)
            if a.phase == "cpu":
                data = await phase_cpu(a, graph, mark)
            elif a.phase == "concurrency":
                data = await phase_concurrency(a, graph, mark)
            elif a.phase == "latency":
                data = await phase_latency(a, graph, mark)
            else:
                data = await phase_memory(a, graph, saver, mark)
        result.update(available=True, ok=True, data=data)
    except NotAvailable as exc:
        result.update(info, available=False, reason=str(exc))
    except NotImplementedError as exc:  # a saver without the async API cannot serve ainvoke
        result.update(info, available=False, reason=f"no async API: NotImplementedError: {exc}")
    except Exception as exc:  # noqa: BLE001 - a saver's failure is a result
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        result.update(
            info,
            available=True,
            ok=False,
            error=f"{type(exc).__name__}: {first}",
            raised_at=f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno}",
        )
    finally:
        with contextlib.suppress(Exception):
            mark("idle")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phase", required=True, choices=["cpu", "concurrency", "latency", "memory"])
    ap.add_argument("--saver", required=True, choices=sorted(SAVERS))
    ap.add_argument("--endpoint", default="", help="S3 endpoint the saver talks to (a proxy or the server)")
    ap.add_argument("--count-at", default="", help="counting proxy to name steps at (usually = endpoint)")
    ap.add_argument("--direct", default="", help="the S3 server itself, for buckets and clean-up")
    ap.add_argument("--run-id", default=time.strftime("perf-%Y%m%d-%H%M%S"))
    ap.add_argument("--tmp-dir", default="", help="where local stores and SQLite files go")
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--conversations", type=int, default=60)
    ap.add_argument("--in-flight", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--levels", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32, 128])
    ap.add_argument("--waves", type=int, default=3)
    ap.add_argument("--min-conversations", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1000)
    ap.add_argument("--cache", default="", help='JSON constructor args, e.g. {"cache_size": 100}')
    ap.add_argument("--cache-label", default="")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    result = asyncio.run(amain(a))
    result["versions"] = versions()
    Path(a.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
