"""The performance phases of ``bench/run``: cpu, concurrency, latency, memory (see bench/README.md).

``bench.py`` calls :func:`run_phase` for each phase asked for. Every (phase, saver) runs as
``perfwork.py`` in its own process and venv, one after another, so the proxies' current step always
belongs to one worker. Request counts come from the proxy the worker talked to; they are attached
to the worker's result here. :func:`markdown` turns a phase's stored result into its table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from perfwork import SAVERS  # noqa: E402 - stdlib-only at import time

PHASES = ["cpu", "concurrency", "latency", "memory"]
CPU_REFERENCE = "inmemory"
CONC_REFERENCE = "handoff-s3-boto3"
#: every saver that runs in-process or on S3 without a peer's cost (the concurrency phase's list)
LOCAL_AND_OURS = ["inmemory", "sqlite-async", "handoff-memory", "handoff-local"]
OURS_ON_S3 = ["handoff-s3-boto3", "handoff-s3-obstore", "handoff-s3-obstore-threads"]
PEERS_ON_S3 = ["objectstorage", "s3-peer-async+shim", "s3-peer+shim"]
PHASE_SAVERS = {
    "cpu": LOCAL_AND_OURS + OURS_ON_S3 + PEERS_ON_S3,
    # peers left out: objectstorage needs ~0.1 s of CPU per invoke and the aioboto3 peer ~0.7 s, so
    # 128 in flight would take minutes each (their CPU table says why)
    "concurrency": LOCAL_AND_OURS + OURS_ON_S3,
    "latency": OURS_ON_S3 + PEERS_ON_S3,
    "memory": ["handoff-local", "inmemory"],
}
# per-phase worker arguments (see perfwork.py for what each means)
PHASE_ARGS = {
    "cpu": {"conversations": 60, "in_flight": 8, "rounds": 3, "warmup": 8},
    "concurrency": {"levels": "1,8,32,128", "waves": 2, "min_conversations": 32, "warmup": 8},
    "latency": {"conversations": 4, "warmup": 2},
    "memory": {"threads": 1000, "in_flight": 8, "warmup": 8},
}
# --quick: a smoke run of every phase in about a minute (figures too small to quote)
QUICK = {
    "cpu": {"conversations": 16, "rounds": 1, "warmup": 2},
    "concurrency": {"levels": "1,8,32", "waves": 1, "min_conversations": 16, "warmup": 2},
    "latency": {"conversations": 1, "warmup": 1},
    "memory": {"threads": 100, "warmup": 2},
}
# fewer invokes where one invoke costs much more CPU, to keep the whole run within minutes:
# objectstorage ~0.1 s, the aioboto3 peer ~0.6 s (a new aioboto3 client per S3 operation).
# Per-invoke figures stay comparable; each row prints how many invokes it measured.
SLOW = {
    "objectstorage": {"cpu": {"rounds": 1}},
    "s3-peer-async+shim": {
        "cpu": {"conversations": 8, "rounds": 1, "warmup": 1},
        "latency": {"conversations": 1, "warmup": 1},
    },
}
# cache settings for the memory phase: (label, ObjectStoreSaver constructor arguments)
CACHE_CONFIGS = [
    ("default (1024 / 64 MiB)", {}),
    ("cache_size=1", {"cache_size": 1}),
    ("cache_size=100", {"cache_size": 100}),
    ("cache_bytes=1 MiB", {"cache_bytes": 1024 * 1024}),
]
DELAY_MS_DEFAULT = 20


def phase_args(phase: str, a: argparse.Namespace) -> dict:
    return {**PHASE_ARGS[phase], **(QUICK[phase] if getattr(a, "quick", False) else {})}


def python_for(venv: str) -> str:
    return os.environ.get(f"BENCH_PY_{venv.upper()}") or str(HERE / ".venvs" / venv / "bin" / "python")


def proxy_counts(url: str) -> dict:
    return json.load(urllib.request.urlopen(f"{url}/__bench/counts", timeout=30)) if url else {}


def steps_for(counts: dict, prefix: str) -> dict[str, dict]:
    """The proxy's figures for every step ``PREFIX|step`` (ops, non-2xx answers, totals)."""
    out: dict[str, dict] = {}
    for section in ("counts", "errors", "totals"):
        for key, value in counts.get(section, {}).items():
            head, _, step = key.partition("|")
            if head == prefix:
                out.setdefault(step, {})[section] = value
    return out


def run_worker(
    phase: str, saver: str, a: argparse.Namespace, run_id: str, workdir: Path, cache=None, index: int = 0
) -> dict:
    venv, uses_s3, _ = SAVERS[saver]
    label, cache_args = cache or ("", {})
    endpoint = count_at = ""
    if uses_s3:
        if phase == "latency":
            endpoint = count_at = a.proxy_delayed
        elif phase == "concurrency":
            endpoint = a.direct  # straight to the server: the Python proxy would be the bottleneck
        else:
            endpoint = count_at = a.proxy
    args = {**phase_args(phase, a), **SLOW.get(saver, {}).get(phase, {})}
    out = workdir / f"{phase}-{saver.replace('+', '-')}-{index}.json"
    out.unlink(missing_ok=True)
    cmd = [python_for(venv), str(HERE / "perfwork.py"), "--phase", phase, "--saver", saver, "--out", str(out)]
    cmd += ["--endpoint", endpoint, "--count-at", count_at, "--direct", a.direct, "--run-id", run_id]
    if phase == "memory" and Path("/dev/shm").is_dir():
        cmd += ["--tmp-dir", "/dev/shm"]  # about the cache, not the disk: no fsync waits
    if cache_args:
        cmd += ["--cache", json.dumps(cache_args)]
    if label:
        cmd += ["--cache-label", label]
    for k, v in args.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    print(f"[bench] {phase}: {saver}{f' [{label}]' if label else ''} ({venv} venv) ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=a.worker_timeout)
        rc, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:  # subprocess.run kills the worker it started
        rc, stderr = (
            "timeout",
            exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or ""),
        )
    took = round(time.perf_counter() - t0, 1)
    res = (
        json.loads(out.read_text())
        if out.exists()
        else {"phase": phase, "saver": saver, "available": True, "ok": False}
    )
    res["worker"] = {"rc": rc, "seconds": took, "args": args}
    if rc != 0:
        tail = stderr.strip().splitlines()[-15:]
        res["worker"]["stderr_tail"] = tail
        res.setdefault("error", f"worker rc={rc}: " + " | ".join(tail[-2:]))
        res["ok"] = False
    status = (
        "ok"
        if res.get("ok")
        else (f"not available: {res.get('reason')}" if res.get("available") is False else f"FAIL {res.get('error')}")
    )
    print(f"[bench] {phase}: {saver} done in {took} s: {status}", file=sys.stderr, flush=True)
    if count_at:
        res["proxy"] = steps_for(proxy_counts(count_at), f"{phase}:{saver}" + (f"[{label}]" if label else ""))
    return res


def cpu_passes(a: argparse.Namespace, run_id: str, workdir: Path) -> list[dict]:
    """The cpu phase, ``--cpu-passes`` times over, the savers' order reversed on every other pass.

    The machine's load drifts while the phase runs (the S3 server, other jobs), and CPU per invoke
    moves with it, by 20 % and more on a busy 2-core machine. A ratio is only fair between figures
    measured close together, so each pass's ratio to the reference is taken within that pass; the
    table reports their median and range, and each saver's rounds from every pass."""
    passes = 1 if getattr(a, "quick", False) else max(1, int(getattr(a, "cpu_passes", 3)))
    by: dict[str, list[dict]] = {s: [] for s in PHASE_SAVERS["cpu"]}
    for n in range(passes):
        order = PHASE_SAVERS["cpu"] if n % 2 == 0 else list(reversed(PHASE_SAVERS["cpu"]))
        for saver in order:
            by[saver].append(run_worker("cpu", saver, a, run_id, workdir, index=n))
    rows = []
    for runs in by.values():
        row = dict(runs[0])
        if all(r.get("ok") for r in runs):
            rounds = [x for r in runs for x in r["data"]["rounds"]]
            values = [x["cpu_ms_per_invoke"] for x in rounds]
            row["data"] = {
                **runs[0]["data"],
                "rounds": rounds,
                "first_pass_rounds": len(runs[0]["data"]["rounds"]),  # the proxy counted these
                "cpu_ms_per_invoke_median": round(statistics.median(values), 3),
                "cpu_ms_per_invoke_min": min(values),
                "cpu_ms_per_invoke_max": max(values),
                "pass_medians": [r["data"]["cpu_ms_per_invoke_median"] for r in runs],
            }
        rows.append(row)
    ref = next((r for r in rows if r["saver"] == CPU_REFERENCE and r.get("ok")), None)
    for row in rows:
        if ref is not None and row.get("ok") and len(row["data"]["pass_medians"]) == len(ref["data"]["pass_medians"]):
            row["data"]["pass_ratios"] = [
                round(x / r, 3) for x, r in zip(row["data"]["pass_medians"], ref["data"]["pass_medians"], strict=True)
            ]
    return rows


def run_phase(phase: str, a: argparse.Namespace, run_id: str, workdir: Path) -> dict:
    t0 = time.time()
    rows = []
    if phase == "cpu":
        rows = cpu_passes(a, run_id, workdir)
    for saver in PHASE_SAVERS[phase] if phase != "cpu" else []:
        if phase == "memory" and saver.startswith("handoff-"):
            rows += [run_worker(phase, saver, a, run_id, workdir, c, i) for i, c in enumerate(CACHE_CONFIGS)]
        else:
            rows.append(run_worker(phase, saver, a, run_id, workdir))
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "runtime_s": round(time.time() - t0, 1),
        "server": a.server,
        "direct": a.direct,
        "machine": f"{os.cpu_count()} cores, {os.uname().sysname} {os.uname().release}",
        "load_average_before_after": [a.load_before, list(os.getloadavg())],
        "args": phase_args(phase, a),
        "quick": bool(getattr(a, "quick", False)),
        "delay_ms": a.delay_ms if phase == "latency" else None,
        "cpu_passes": max((len(r.get("data", {}).get("pass_medians", [])) for r in rows), default=0)
        if phase == "cpu"
        else None,
    }
    return {"meta": meta, "rows": rows}


# ------------------------------------------------------------------------------------------------
# markdown
# ------------------------------------------------------------------------------------------------


def num(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}".replace(",", " ")


def ops_text(ops: dict, per: float) -> str:
    short = {
        "PutObject(If-None-Match)": "PUT(INM)",
        "PutObject(If-Match)": "PUT(IM)",
        "PutObject": "PUT",
        "GetObject": "GET",
        "HeadObject": "HEAD",
        "ListObjectsV2": "LIST",
        "HeadBucket": "HeadBucket",
    }
    parts = sorted(ops.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{short.get(k, k)} {num(v / per, 1).removesuffix('.0')}" for k, v in parts) or "0"


def status(row: dict) -> str | None:
    if row.get("available") is False:
        return f"not available: {row.get('reason')}"
    if not row.get("ok"):
        return f"**FAIL** {row.get('error')}" + (f" (at `{row['raised_at']}`)" if row.get("raised_at") else "")
    return None


def name_of(row: dict) -> str:
    return f"`{row['saver']}`"


def header(title: str, meta: dict, what: list[str]) -> list[str]:
    la = meta.get("load_average_before_after") or [None, None]
    load = " -> ".join("/".join(f"{x:.1f}" for x in v) if v else "?" for v in la)
    return [
        f"## {title}",
        "",
        f"* date: {meta['date']}; this phase took {meta['runtime_s']} s; machine: {meta['machine']}; "
        f"load average (1/5/15 min) before -> after: {load}",
        *what,
        "",
    ]


def md_cpu(sec: dict) -> list[str]:
    meta, rows = sec["meta"], sec["rows"]
    p = meta["args"]
    ref = next(
        (r["data"]["cpu_ms_per_invoke_median"] for r in rows if r["saver"] == CPU_REFERENCE and r.get("ok")), None
    )
    lines = header(
        "Client CPU per invoke",
        meta,
        [
            f"* workload: {meta.get('cpu_passes') or 1} passes (a fresh worker process per saver and pass, the "
            f"savers' order reversed on every other pass) x {p['rounds']} rounds x {p['conversations']} new threads, "
            f"1 `ainvoke` each, {p['in_flight']} in flight, after {p['warmup']} warm-up invokes; 5-node graph (async "
            "nodes, one ~120 B message each)",
            "* CPU: `time.process_time()` of the worker process around each round (user + system, all its threads); "
            "the S3 server and the proxy are other processes. Median of all rounds, min-max in brackets",
            f"* ratio: to `{CPU_REFERENCE}` within each pass (load drifts between passes), median of the passes, "
            "min-max in brackets; requests: counted at the proxy in the first pass, per invoke",
        ],
    )
    lines += [
        "| saver | CPU ms / invoke | ratio | user / sys ms | requests / invoke | wall s / round | invokes measured | status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        st = status(r)
        if st:
            lines.append(f"| {name_of(r)} | - | - | - | - | - | - | {st} |")
            continue
        d = r["data"]
        rounds = d["rounds"]
        n = sum(x["invokes"] for x in rounds)
        counted = d.get("first_pass_rounds", len(rounds))
        n_counted = sum(x["invokes"] for x in rounds[:counted])
        reqs = ops = "-"
        if r.get("proxy"):
            tot: dict[str, int] = {}
            for i in range(counted):
                for op, c in r["proxy"].get(f"round{i}", {}).get("counts", {}).items():
                    tot[op] = tot.get(op, 0) + c
            reqs = num(sum(tot.values()) / n_counted)
            ops = ops_text(tot, n_counted)
        elif not SAVERS[r["saver"]][1]:
            reqs = "0 (no S3)"
        med = d["cpu_ms_per_invoke_median"]
        spread = f" ({num(d['cpu_ms_per_invoke_min'])}-{num(d['cpu_ms_per_invoke_max'])})" if len(rounds) > 1 else ""
        user = statistics.median(x["user_ms_per_invoke"] for x in rounds)
        sys_ = statistics.median(x["sys_ms_per_invoke"] for x in rounds)
        wall = statistics.median(x["wall_s"] for x in rounds)
        pass_ratios = d.get("pass_ratios")
        if pass_ratios:
            ratio = f"{statistics.median(pass_ratios):.1f}x"
            ratio += f" ({min(pass_ratios):.1f}-{max(pass_ratios):.1f})" if len(pass_ratios) > 1 else ""
        else:
            ratio = f"{med / ref:.1f}x" if ref else "-"
        lines.append(
            f"| {name_of(r)} | {num(med)}{spread} | {ratio} | {num(user)} / {num(sys_)} | {reqs}"
            + (f" ({ops})" if ops != "-" else "")
            + f" | {num(wall, 2)} | {n} | ok |"
        )
    return lines


def md_concurrency(sec: dict) -> list[str]:
    meta, rows = sec["meta"], sec["rows"]
    p = meta["args"]
    levels = [int(x) for x in str(p["levels"]).split(",")]
    by = {r["saver"]: r for r in rows}
    ref = by.get(CONC_REFERENCE, {})
    ref_tp = (
        {lv["in_flight"]: lv["invokes_per_s"] for lv in ref.get("data", {}).get("levels", [])} if ref.get("ok") else {}
    )
    lines = header(
        "Concurrency",
        meta,
        [
            f"* workload: per level, max({p['min_conversations']}, {p['waves']} x level) new threads, 1 `ainvoke` each, "
            f"that many in flight (an `asyncio.Semaphore`); {p['warmup']} warm-up invokes first",
            "* S3 savers talk to the S3 server directly (no proxy: a Python hop would be the bottleneck); the server, "
            "its OSD and the client share the same 2 cores",
            "* each cell: throughput (invokes/s; ratio to "
            f"`{CONC_REFERENCE}` at that level) · latency per invoke p50 / p99 in ms (from the invoke's start, "
            "after its slot was free); p99 is nearest-rank, so below 100 invokes it is the slowest one",
        ],
    )
    lines += ["| saver | " + " | ".join(f"{lv} in flight" for lv in levels) + " | CPU ms / invoke (at 8) | status |"]
    lines += ["|---|" + "---|" * len(levels) + "---|---|"]
    for r in rows:
        st = status(r)
        if st:
            lines.append(f"| {name_of(r)} | " + " | ".join("-" for _ in levels) + f" | - | {st} |")
            continue
        got = {lv["in_flight"]: lv for lv in r["data"]["levels"]}
        cells = []
        for lv in levels:
            x = got.get(lv)
            if not x:
                cells.append("-")
                continue
            rt = f" ({x['invokes_per_s'] / ref_tp[lv]:.2f}x)" if ref_tp.get(lv) else ""
            cells.append(f"{num(x['invokes_per_s'])}/s{rt} · {num(x['p50_ms'], 0)} / {num(x['p99_ms'], 0)}")
        cpu8 = got.get(8, {}).get("cpu_ms_per_invoke")
        lines.append(f"| {name_of(r)} | " + " | ".join(cells) + f" | {num(cpu8)} | ok |")
    n = ", ".join(f"{lv}: {max(p['min_conversations'], p['waves'] * lv)}" for lv in levels)
    lines += ["", f"Invokes per level: {n}."]
    return lines


def md_latency(sec: dict) -> list[str]:
    meta, rows = sec["meta"], sec["rows"]
    p, delay = meta["args"], meta.get("delay_ms")
    lines = header(
        f"Latency with {delay:g} ms per request",
        meta,
        [
            f"* each S3 request waits {delay:g} ms at a second proxy before it is forwarded (one cloud region's round "
            "trip; see bench/README.md for what this does not model)",
            f"* workload: {p['conversations']} threads x 2 turns, one `ainvoke` at a time, per durability mode, after "
            f"{p['warmup']} warm-up invokes; turn 1 starts a new thread, turn 2 continues it",
            "* ms: median wall time per invoke; requests: per invoke, counted at that proxy. Requests sent side by "
            f"side overlap their waits, so ms ≈ {delay:g} x (requests one after another) + client and server time",
        ],
    )
    lines += [
        "| saver | durability | turn 1 ms | turn 1 requests | turn 2 ms | turn 2 requests | invokes | status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        st = status(r)
        if st:
            lines.append(f"| {name_of(r)} | - | - | - | - | - | - | {st} |")
            continue
        for mode, m in r["data"]["modes"].items():
            cells = []
            for turn in ("turn1", "turn2"):
                t = m[turn]
                ops = r.get("proxy", {}).get(f"{mode}|{turn}", {}).get("counts", {})
                cells += [
                    num(t["median_ms"]),
                    f"{num(sum(ops.values()) / t['invokes'])} ({ops_text(ops, t['invokes'])})",
                ]
            n = m["turn1"]["invokes"] + m["turn2"]["invokes"]
            lines.append(f"| {name_of(r)} | `{mode}` | " + " | ".join(cells) + f" | {n} | ok |")
    return lines


def md_memory(sec: dict) -> list[str]:
    meta, rows = sec["meta"], sec["rows"]
    p = meta["args"]
    lines = header(
        "Memory of cached threads",
        meta,
        [
            f"* workload: a fresh worker process; {p['warmup']} warm-up invokes, then {p['threads']} new threads x 1 "
            f"`ainvoke` ({p['in_flight']} in flight), then `get_state` on each thread, twice (sync API, one at a time)",
            "* ours on a `LocalStore` in /dev/shm (tmpfs: the page cache is not in the process's RSS), so the figures "
            "are about the saver's head cache, not a transport; `InMemorySaver` holds every checkpoint by design",
            "* RSS: VmRSS from /proc/self/status after `gc.collect()`; deltas against the baseline after warm-up. "
            "Python rarely returns freed memory to the OS, so RSS shows the high-water mark of the heap",
            "* cache estimate: the saver's own accounting (`HeadCache`: namespaces held, approximate bytes)",
            "* pass 2: CPU and store requests (counted by wrapping the saver's store in `CountingStore` for that pass)",
        ],
    )
    lines += [
        "| saver | cache | RSS baseline MiB | Δ after invokes MiB | Δ after get_state MiB | cache holds (threads, est. MiB) "
        "| pass 2 CPU ms / get_state | pass 2 requests / get_state | invoke CPU ms | status |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cache = r.get("cache") or "-"
        st = status(r)
        if st:
            lines.append(f"| {name_of(r)} | {cache} | - | - | - | - | - | - | - | {st} |")
            continue
        d = r["data"]
        held = f"{d['cache_namespaces']}, {num(d['cache_bytes_estimate'] / 2**20)}" if "cache_namespaces" in d else "-"
        reqs = "-"
        if "pass2_requests_per_get_state" in d:
            reqs = f"{num(d['pass2_requests_per_get_state'])} ({ops_text(d['pass2_requests'], p['threads'])})"
        lines.append(
            f"| {name_of(r)} | {cache} | {num(d['baseline_rss_mib'])} | {num(d['rss_delta_mib']['after_invokes'])} "
            f"| {num(d['rss_delta_mib']['after_get_state_pass1'])} | {held} | {num(d['pass2_cpu_ms_per_get_state'], 2)} "
            f"| {reqs} | {num(d['invoke_cpu_ms'])} | ok |"
        )
    return lines


RENDER = {"cpu": md_cpu, "concurrency": md_concurrency, "latency": md_latency, "memory": md_memory}


def markdown(perf: dict[str, Any]) -> str:
    lines: list[str] = []
    for phase in PHASES:
        if phase in perf:
            lines += ["", *RENDER[phase](perf[phase])]
    savers = sorted({r["saver"] for sec in perf.values() for r in sec["rows"]}, key=list(SAVERS).index)
    if savers:
        lines += ["", "Savers in these phases:", ""] + [
            f"* `{s}`: {SAVERS[s][2]} ({SAVERS[s][0]} venv)" for s in savers
        ]
        vers = {}
        for sec in perf.values():
            for r in sec["rows"]:
                vers.setdefault(r.get("venv"), r.get("versions"))
        for venv, v in vers.items():
            if v:
                lines.append(f"* {venv} venv: " + ", ".join(f"{k} {x}" for k, x in v.items()))
    return "\n".join(lines) + "\n"
