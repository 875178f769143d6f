#!/usr/bin/env python3
"""Benchmark orchestrator: runs every variant's worker, merges the proxy's counts, writes the report.

Started by ``bench/run`` once the S3 server and the counting proxy are up. Each variant runs as
``workload.py`` in its own process and venv, one after another, so the proxy's current phase always
belongs to exactly one worker. Ratios are taken against ``handoff-s3`` (our saver, sync API) from
the same run, on the same server, through the same proxy.

``--phases`` picks what runs: ``requests`` (the above) and the performance phases of ``perf.py``
(``cpu``, ``concurrency``, ``latency``, ``memory``); all of them by default.

Outputs: ``results.json`` (everything, raw counts included) and ``RESULTS.md`` (the tables, also
printed on stdout). A phase that did not run keeps its section from the previous ``results.json``,
with that run's date, so ``--phases latency`` updates one section and leaves the others alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import perf  # noqa: E402 - stdlib-only at import time
from workload import VARIANTS  # noqa: E402 - stdlib-only at import time

ORDER = [
    "handoff-s3",
    "handoff-s3-async",
    "handoff-local",
    "inmemory",
    "sqlite",
    "objectstorage",
    "s3-peer",
    "s3-peer+shim",
]
REFERENCE = "handoff-s3"
PHASES = ["invoke", "get_state", "history"]
SHORT = {
    "GetObject": "GET",
    "PutObject": "PUT",
    "PutObject(If-None-Match)": "PUT(If-None-Match)",
    "PutObject(If-Match)": "PUT(If-Match)",
    "HeadObject": "HEAD",
    "ListObjectsV2": "LIST",
    "DeleteObject": "DELETE",
    "DeleteObjects": "DeleteObjects",
    "HeadBucket": "HeadBucket",
}


def python_for(venv: str) -> str:
    return os.environ.get(f"BENCH_PY_{venv.upper()}") or str(HERE / ".venvs" / venv / "bin" / "python")


def run_worker(name: str, a: argparse.Namespace, run_id: str, workdir: Path) -> dict:
    venv = VARIANTS[name][0]
    out = workdir / f"{name}.json"
    cmd = [
        python_for(venv),
        str(HERE / "workload.py"),
        "--variant",
        name,
        "--proxy",
        a.proxy,
        "--direct",
        a.direct,
        "--run-id",
        f"{run_id}-{name.replace('+', '-')}",
        "--threads",
        str(a.threads),
        "--out",
        str(out),
    ]
    if name == REFERENCE:
        cmd.append("--large")
    print(f"[bench] {name} ({venv} venv) ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=a.worker_timeout)
        rc, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:  # subprocess.run kills the worker it started
        rc, stderr = (
            "timeout",
            (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or ""),
        )
    took = round(time.perf_counter() - t0, 2)
    print(f"[bench] {name} done in {took} s (rc={rc})", file=sys.stderr, flush=True)
    result = json.loads(out.read_text()) if out.exists() else {"variant": name, "venv": venv, "phases": {}}
    result["worker"] = {"rc": rc, "seconds": took}
    if rc != 0:
        result["worker"]["stderr_tail"] = stderr.strip().splitlines()[-15:]
    return result


def merge_counts(results: dict[str, dict], counts: dict) -> None:
    """Attach the proxy's per-phase counts (``variant|phase``) to each phase of each result."""
    for key, ops in counts["counts"].items():
        variant, _, phase = key.partition("|")
        if variant not in results or phase == "idle":
            continue
        ph = results[variant]["phases"].setdefault(phase, {})
        ph["requests"] = dict(sorted(ops.items(), key=lambda kv: -kv[1]))
        ph["requests_total"] = sum(ops.values())
        ph["non_2xx"] = counts["errors"].get(key, {})
        ph["wire"] = counts["totals"].get(key, {})
    for res in results.values():
        for phase, ph in res["phases"].items():
            ph.setdefault("requests_total", 0)
            ph.setdefault("requests", {})
            if res.get("api") and ph.get("ok") and phase in PHASES:
                ph["requests_per_call"] = round(ph["requests_total"] / res["threads"], 2)


def ratio(x: float | None, ref: float | None) -> float | None:
    if x is None or ref in (None, 0):
        return None
    return round(x / ref, 2)


def add_ratios(results: dict[str, dict]) -> None:
    ref = results.get(REFERENCE)
    if not ref:
        return
    for res in results.values():
        r = res["ratios_vs_" + REFERENCE.replace("-", "_")] = {}
        for phase in PHASES:
            mine, theirs = res["phases"].get(phase, {}), ref["phases"].get(phase, {})
            if mine.get("ok") and theirs.get("ok"):
                r[f"{phase}_wall"] = ratio(mine["wall_s"], theirs["wall_s"])
                r[f"{phase}_requests"] = ratio(mine["requests_total"], theirs["requests_total"])


# ------------------------------------------------------------------------------------------------
# markdown
# ------------------------------------------------------------------------------------------------


def fmt_num(x: float | int | None, digits: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:,.{digits}f}".replace(",", " ")
    return f"{int(x):,}".replace(",", " ")


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def fmt_ops(ops: dict, per: int) -> str:
    if not ops:
        return "0"
    parts = []
    for op, n in ops.items():
        v = n / per
        parts.append(f"{SHORT.get(op, op)} {fmt_num(v if not float(v).is_integer() else int(v))}")
    return ", ".join(parts)


def failure(res: dict) -> str | None:
    for phase, ph in res["phases"].items():
        if ph.get("ok") is False:
            return f"{phase}: {ph.get('error')}"
    if res["worker"]["rc"] != 0:
        return f"worker rc={res['worker']['rc']}: " + " | ".join(res["worker"].get("stderr_tail", [])[-3:])
    return None


def markdown(results: dict[str, dict], meta: dict) -> str:
    n = meta["threads"]
    ref_key = "ratios_vs_" + REFERENCE.replace("-", "_")
    lines = [
        "# Checkpoint saver benchmark",
        "",
        f"* date: {meta['date']}; total runtime {meta['runtime_s']} s; generated by `bench/run`",
        f"* server: {meta['server']} at {meta['direct']}, reached through the counting proxy (127.0.0.1)",
        f"* machine: {meta['machine']}",
        f"* workload: {n} threads x 1 invoke of a 5-node graph (one ~120 B message per node, default durability), "
        f"then get_state and list(get_state_history) per thread; wall times are for all {n} threads, "
        "requests are per call, counted at the proxy (server side)",
        f"* ratios (in brackets) are against `{REFERENCE}` from this run: < 1 means fewer requests / faster than ours",
        "",
        f"| variant | API | invoke x{n} s | req / invoke | get_state x{n} s | req / get_state | history x{n} s | req / history | bytes / thread | objects / thread | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, res in results.items():
        ph, rt = res["phases"], res.get(ref_key, {})
        cells = [f"`{name}`", res.get("api", "?")]
        for phase in PHASES:
            p = ph.get(phase, {})
            if p.get("ok"):
                cells.append(f"{p['wall_s']:.2f} ({fmt_ratio(rt.get(f'{phase}_wall'))})")
                cells.append(f"{fmt_num(p['requests_per_call'])} ({fmt_ratio(rt.get(f'{phase}_requests'))})")
            else:
                cells += ["FAIL" if p else "-", "-"]
        usage = res.get("usage", {})
        partial = " (partial)" if not res["phases"].get("invoke", {}).get("ok") else ""
        cells.append(fmt_num(round(usage["bytes"] / n)) + partial if "bytes" in usage else "-")
        objs = usage.get("objects", usage.get("rows"))
        cells.append((fmt_num(objs / n) + (" rows" if "rows" in usage else "") + partial) if objs is not None else "-")
        err = failure(res)
        cells.append(f"**FAIL** {err}" if err else "ok")
        lines.append("| " + " | ".join(cells) + " |")

    lines += [
        "",
        "Requests per call by S3 operation (server side):",
        "",
        "| variant | invoke | get_state | history | uploaded B / invoke | time inside S3 server s (invoke / get_state / history) | non-2xx answers (whole phase) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, res in results.items():
        if not any(res["phases"].get(p, {}).get("requests_total") for p in ["setup", *PHASES]):
            continue
        cells, errs = [f"`{name}`"], []
        for phase in PHASES:
            p = res["phases"].get(phase, {})
            if p.get("ok"):
                cells.append(fmt_ops(p["requests"], n))
            elif p:
                cells.append(f"failed after {p.get('threads_done', '?')} threads: {fmt_ops(p['requests'], 1)} in total")
            else:
                cells.append("-")
            errs += [f"{phase}: {k} x{v}" for k, v in p.get("non_2xx", {}).items()]
        inv = res["phases"].get("invoke", {})
        cells.append(fmt_num(round(inv.get("wire", {}).get("request_body_bytes", 0) / n)) if inv.get("ok") else "-")
        cells.append(
            " / ".join(f"{res['phases'].get(p, {}).get('wire', {}).get('upstream_seconds', 0):.2f}" for p in PHASES)
        )
        cells.append("; ".join(errs) or "none")
        lines.append("| " + " | ".join(cells) + " |")

    calls = {
        name: res["phases"].get("invoke", {}).get("saver_calls")
        for name, res in results.items()
        if res["phases"].get("invoke", {}).get("ok")
    }
    distinct = {", ".join(f"{k} {fmt_num(v / n)}" for k, v in sorted(c.items())) for c in calls.values() if c}
    if distinct:
        lines += [
            "",
            "Saver calls LangGraph made per invoke, identical for every variant that finished "
            "(sync / async API): " + " / ".join(sorted(distinct, key=lambda s: s.startswith("a"))),
        ]

    ph = results.get(REFERENCE, {}).get("phases", {})
    for large in results.get(REFERENCE, {}).get("large") or []:
        tag = large["tag"]
        lines += [
            "",
            f"Large state (`{REFERENCE}` only, `{tag}`): one thread, 5 nodes x {large['kib_per_node']} KiB of "
            f"incompressible text, final state {fmt_num(large.get('state_bytes'))} B serialized; then one small `update_state`.",
            "",
            "| step | wall s | saver calls | requests | requests ÷ put calls | uploaded B | uploaded B ÷ put calls | downloaded B |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for step in ("invoke", "update_state", "get_state"):
            p = ph.get(f"{tag}:{step}", {})
            puts = p.get("saver_calls", {}).get("put", 0)
            wire = p.get("wire", {})
            lines.append(
                "| "
                + " | ".join(
                    [
                        step + ("" if p.get("ok", True) else f" **FAIL** {p.get('error')}"),
                        f"{p.get('wall_s', 0):.3f}",
                        ", ".join(f"{k} {v}" for k, v in p.get("saver_calls", {}).items()),
                        fmt_ops(p.get("requests", {}), 1),
                        fmt_num(round(p.get("requests_total", 0) / puts, 2)) if puts else "-",
                        fmt_num(wire.get("request_body_bytes")),
                        fmt_num(round(wire.get("request_body_bytes", 0) / puts)) if puts else "-",
                        fmt_num(wire.get("response_body_bytes")),
                    ]
                )
                + " |"
            )
        u = large.get("usage", {})
        if u and large.get("state_bytes"):
            lines.append(
                f"\nStored for this thread: {fmt_num(u['bytes'])} B in {u['objects']} objects "
                f"({u['bytes'] / large['state_bytes']:.2f}x the final state)."
            )
    if results.get(REFERENCE, {}).get("large"):
        lines.append(
            '\n"÷ put calls" divides everything the step sent (get_tuple and put_writes included) by its put calls.'
        )

    fails = [(name, failure(res)) for name, res in results.items() if failure(res)]
    if fails:
        lines += ["", "Failures (text as raised):", ""]
        for name, err in fails:
            at = next((ph.get("raised_at") for ph in results[name]["phases"].values() if ph.get("ok") is False), None)
            lines.append(f"* `{name}`: {err}" + (f" (raised at `{at}`)" if at else ""))

    lines += ["", "Versions:", ""]
    for venv in ("main", "aio"):
        v = next((r["versions"] for r in results.values() if r.get("venv") == venv and r.get("versions")), None)
        if v:
            lines.append(f"* {venv} venv: " + ", ".join(f"{k} {x}" for k, x in v.items()))
    lines += ["", "Variants:", ""] + [f"* `{k}`: {VARIANTS[k][2]} ({VARIANTS[k][0]} venv)" for k in results]
    return "\n".join(lines) + "\n"


ALL_PHASES = ["requests", *perf.PHASES]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--proxy-delayed", default="", help="a second counting proxy that delays each request")
    ap.add_argument("--delay-ms", type=float, default=perf.DELAY_MS_DEFAULT, help="that proxy's delay (for the report)")
    ap.add_argument("--direct", required=True)
    ap.add_argument("--server", default="S3 server")
    ap.add_argument("--phases", default=",".join(ALL_PHASES), help=f"comma-separated, from {','.join(ALL_PHASES)}")
    ap.add_argument("--threads", type=int, default=50, help="requests phase: threads")
    ap.add_argument("--only", default="", help="requests phase: comma-separated variants (default: all)")
    ap.add_argument("--quick", action="store_true", help="performance phases: a smoke run with small counts")
    ap.add_argument("--cpu-passes", type=int, default=3, help="cpu phase: passes over all savers (ratios per pass)")
    ap.add_argument("--worker-timeout", type=int, default=600)
    ap.add_argument("--out-dir", default=str(HERE))
    a = ap.parse_args()
    phases = [p for p in a.phases.split(",") if p]
    unknown = sorted(set(phases) - set(ALL_PHASES))
    if unknown:
        ap.error(f"unknown phase(s) {', '.join(unknown)}: choose from {', '.join(ALL_PHASES)}")
    if "latency" in phases and not a.proxy_delayed:
        ap.error("the latency phase needs --proxy-delayed (bench/run starts one)")
    a.load_before = list(os.getloadavg())
    out = Path(a.out_dir)
    previous = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    doc = {k: previous[k] for k in ("meta", "variants", "proxy_counts") if k in previous}
    doc["perf"] = dict(previous.get("perf", {}))
    run_id = time.strftime("bench-%Y%m%d-%H%M%S")
    workdir = out / ".work"
    workdir.mkdir(parents=True, exist_ok=True)
    if "requests" in phases:
        t0 = time.time()
        names = [v for v in a.only.split(",") if v] or ORDER
        results = {name: run_worker(name, a, run_id, workdir) for name in names}
        counts = json.load(urllib.request.urlopen(f"{a.proxy}/__bench/counts", timeout=30))
        merge_counts(results, counts)
        add_ratios(results)
        doc["meta"] = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "runtime_s": round(time.time() - t0, 1),
            "server": a.server,
            "direct": a.direct,
            "threads": a.threads,
            "reference": REFERENCE,
            "machine": f"{os.cpu_count()} cores, {os.uname().sysname} {os.uname().release}",
        }
        doc["variants"] = results
        doc["proxy_counts"] = counts
    for phase in perf.PHASES:
        if phase in phases:
            doc["perf"][phase] = perf.run_phase(phase, a, f"{run_id}-{phase}", workdir)
            a.load_before = list(os.getloadavg())
    md = markdown(doc["variants"], doc["meta"]) if "variants" in doc else "# Checkpoint saver benchmark\n"
    if doc["perf"]:
        md += "\n# Performance phases\n" + perf.markdown(doc["perf"])
    (out / "results.json").write_text(json.dumps(doc, indent=1))
    (out / "RESULTS.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
