#!/usr/bin/env python3
"""Long threads: one conversation of 1,000 turns per saver, CPU, bytes and requests per turn.

The one command (any Python 3.10+; it needs nothing but the standard library itself)::

    python3 bench/long_threads.py                      # everything (about 2 hours on a busy 2-core VM)
    python3 bench/long_threads.py --quick              # smoke run: 50 turns, every saver and workload
    python3 bench/long_threads.py --workloads list --savers handoff-memory,sqlite --turns 200
    python3 bench/long_threads.py --report-only        # tables, markdown and plots from the JSON

What it does, in order:

1. creates or reuses two venvs in ``bench/.venvs/``: ``long`` (this package, SqliteSaver,
   PostgresSaver with psycopg, langgraph-checkpoint-objectstorage, obstore, matplotlib) and
   ``aio`` (langgraph-checkpoint-s3, the same as ``bench/run``'s); a venv is reinstalled only
   when its requirements or ``pyproject.toml`` change;
2. starts a throw-away Ceph RGW (``scripts/ceph-rgw-start.sh``) unless ``S3_ENDPOINT_URL`` is set,
   the counting proxy (``proxy.py``) in front of it, and a PostgreSQL (Debian's, installed with
   apt if missing) in a temp dir on a free loopback port, initialised as the ``postgres`` user;
3. runs every (workload, saver) as ``longwork.py`` in its own fresh process, one after another,
   the same turns for everyone; then the short-thread comparison (``--mode short``, 3 passes in
   alternated order: ``InMemorySaver``, ``InMemorySaver`` waiting ``--short-latency-ms`` per call,
   ours on RGW) and the profiles (``--mode profile``, ours on ``memory://``);
4. stops what it started (by PID / ``pg_ctl``), also on failure or Ctrl-C;
5. prints the tables and the target ratios, and writes ``bench/long-threads-results.json`` (raw:
   every turn of every run), ``bench/LONG_THREADS.md`` and ``docs/img/long-threads-*.png``.

A (workload, saver) that did not run this time keeps its previous result in the JSON (with its
own date; ``LONG_THREADS.md`` marks such rows "earlier run" with that date in every table), so a
subset can be re-run; ``--fresh`` starts from nothing. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from longwork import (  # noqa: E402 - stdlib-only at import time
    ALL_SAVERS,
    CHECKPOINTS,
    MESSAGES_PER_TURN,
    SAVERS,
    WORKLOADS,
    window,
)

RESULTS = HERE / "long-threads-results.json"
MARKDOWN = HERE / "LONG_THREADS.md"
PLOTS = ROOT / "docs" / "img"
WORKDIR = HERE / ".work" / "long-threads"

LANGGRAPH = ["langgraph==1.2.24", "langgraph-checkpoint==4.3.2"]
VENVS = {
    # boto3 pinned as in bench/run: objectstorage[s3] -> s3fs 2026.9.0 -> aiobotocore 3.10
    "long": [
        "-e",
        str(ROOT),
        *LANGGRAPH,
        "langgraph-checkpoint-sqlite",
        "langgraph-checkpoint-postgres",
        "psycopg[binary]",
        "langgraph-checkpoint-objectstorage[s3]==0.1.15",
        "s3fs==2026.9.0",
        "boto3==1.43.117",
        "obstore>=0.12",
        "matplotlib",
        "py-spy",
    ],
    "aio": [*LANGGRAPH, "langgraph-checkpoint-s3==0.1.3"],  # the same as bench/run's: shared
}
OURS = ["handoff-memory", "handoff-file", "handoff-s3"]
REFERENCE = "sqlite"
#: InMemorySaver waiting --short-latency-ms per call (a label: the worker runs "inmemory")
LATENT = "inmemory+latency"
#: InMemorySaver making ours' requests on S3: the floor of any saver making them (longwork.floor_s3_saver)
FLOOR = "s3-floor"
#: the short phase's rows: label -> the saver its worker runs
SHORT_SAVERS = {"inmemory": "inmemory", LATENT: "inmemory", FLOOR: FLOOR, "handoff-s3": "handoff-s3"}
PROFILE_WORKLOADS = ["delta-100", "list"]
#: minutes of wall time a worker may take before it stops after the current turn (a slow peer
#: then reports the turns it reached); generous for everyone else
BUDGET_MIN = {"objectstorage": 25, "s3-peer+shim": 25}
DEFAULT_BUDGET_MIN = 60


def log(msg: str) -> None:
    print(f"[long_threads {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# venvs
# ------------------------------------------------------------------------------------------------


def ensure_venv(name: str, reqs: list[str]) -> str:
    """bench/.venvs/NAME with REQS installed; skipped when the same requirements (and the same
    pyproject.toml) were installed before. The stamp is computed as bench/run computes it."""
    d = HERE / ".venvs" / name
    py = d / "bin" / "python"
    stamp = hashlib.sha256(
        ("".join(r + "\n" for r in reqs) + (ROOT / "pyproject.toml").read_text()).encode()
    ).hexdigest()[:16]
    stamp_file = d / ".bench-stamp"
    if stamp_file.exists() and stamp_file.read_text().strip() == stamp and py.exists():
        log(f"venv {name}: up to date")
        return str(py)
    log(f"venv {name}: installing {' '.join(reqs)}")
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(d)], check=True)
    with open(d / "pip.log", "w") as out:
        rc = subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *reqs], stdout=out, stderr=out
        ).returncode
    if rc != 0:
        sys.exit(f"venv {name}: pip install failed, see {d / 'pip.log'}")
    subprocess.run([str(py), "-m", "pip", "check"], check=True)
    stamp_file.write_text(stamp + "\n")
    return str(py)


# ------------------------------------------------------------------------------------------------
# servers
# ------------------------------------------------------------------------------------------------


def free_port(preferred: int = 0) -> int:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", preferred))
    except OSError:
        s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def apt_install(*packages: str) -> None:
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    log(f"installing {' '.join(packages)} from Debian")
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True)
    subprocess.run(
        [*sudo, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
        check=True,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        stdout=subprocess.DEVNULL,
    )


class Servers(contextlib.ExitStack):
    """RGW, the counting proxy and PostgreSQL, each stopped on exit (in reverse order)."""

    def __init__(self, a: argparse.Namespace, py: str) -> None:
        super().__init__()
        self.a, self.py = a, py
        self.s3: dict[str, str] = {}
        self.proxy = ""
        self.server_desc = ""
        self.pg: dict[str, str] = {}

    def start_rgw(self) -> None:
        if os.environ.get("S3_ENDPOINT_URL"):
            self.s3 = {"endpoint": os.environ["S3_ENDPOINT_URL"]}
            self.server_desc = "S3 server given by S3_ENDPOINT_URL"
            return
        if not shutil.which("radosgw"):
            apt_install("radosgw", "ceph-mon", "ceph-osd", "ceph-common")
        rgw_dir = self.a.rgw_dir or tempfile.mkdtemp(prefix="long-threads-rgw.")
        env = {
            **os.environ,
            "CEPH_RGW_DIR": rgw_dir,
            "MON_PORT": str(free_port(self.a.mon_port)),
            "RGW_PORT": str(free_port(self.a.rgw_port)),
        }
        log(f"starting Ceph RGW in {rgw_dir} (mon {env['MON_PORT']}, rgw {env['RGW_PORT']})")
        out = subprocess.run([str(ROOT / "scripts" / "ceph-rgw-start.sh")], env=env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"RGW did not start:\n{out.stderr[-2000:]}")
        self.callback(self._stop_rgw, rgw_dir)
        for line in out.stdout.splitlines():
            if line.startswith("export "):
                k, _, v = line[len("export ") :].partition("=")
                os.environ[k] = v.strip("'\"")
        self.s3 = {"endpoint": os.environ["S3_ENDPOINT_URL"]}
        version = subprocess.run(["radosgw", "--version"], capture_output=True, text=True).stdout.split()
        self.server_desc = f"Ceph RGW {version[2] if len(version) > 2 else '?'} (memstore OSD), started by the bench"

    def _stop_rgw(self, rgw_dir: str) -> None:
        subprocess.run([str(ROOT / "scripts" / "ceph-rgw-stop.sh"), rgw_dir], stderr=subprocess.DEVNULL, check=False)
        log("RGW stopped")

    def start_proxy(self) -> None:
        fd, ready = tempfile.mkstemp(prefix="long-threads-proxy.")
        with os.fdopen(fd, "w") as out:
            cmd = [self.py, str(HERE / "proxy.py"), "--upstream", self.s3["endpoint"]]
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        self.callback(self._stop_proc, proc, "proxy")
        for _ in range(100):
            text = Path(ready).read_text()
            if text.startswith("READY"):
                self.proxy = f"http://127.0.0.1:{text.split()[1]}"
                break
            time.sleep(0.1)
        os.unlink(ready)
        if not self.proxy:
            sys.exit("the counting proxy did not start")
        log(f"proxy {proc.pid} on {self.proxy} -> {self.s3['endpoint']}")

    @staticmethod
    def _stop_proc(proc: subprocess.Popen, name: str) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
            log(f"{name} ({proc.pid}) stopped")

    def start_postgres(self) -> None:
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
        if not bins:
            apt_install("postgresql")
            bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
        bindir = bins[-1].parent
        as_user: list[str] = []
        base = Path(tempfile.mkdtemp(prefix="long-threads-pg."))
        if os.geteuid() == 0:  # initdb refuses to run as root: the cluster belongs to "postgres"
            as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(base, "postgres", "postgres")
        data, sock = base / "data", base / "sock"
        port = free_port(self.a.pg_port)
        run = lambda *cmd: subprocess.run([*as_user, *cmd], check=True, capture_output=True, text=True)  # noqa: E731
        run("mkdir", "-p", str(sock))
        run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale")
        opts = (
            f"-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={sock} "
            "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
        )
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-o", opts, "-w", "start")
        self.callback(self._stop_postgres, as_user, bindir, data, base)
        psql = [*as_user, str(bindir / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-q"]
        subprocess.run([*psql, "-c", "create role bench login", "-c", "create database bench owner bench"], check=True)
        subprocess.run([*psql, "-d", "bench", "-c", "create extension pg_stat_statements"], check=True)
        version = run(str(bindir / "postgres"), "--version").stdout.strip()
        self.pg = {
            "dsn": f"postgresql://bench@127.0.0.1:{port}/bench",
            "admin_dsn": f"postgresql://postgres@127.0.0.1:{port}/bench",
            "version": version,
        }
        log(f"{version} on 127.0.0.1:{port} (data in {data})")

    def _stop_postgres(self, as_user: list[str], bindir: Path, data: Path, base: Path) -> None:
        subprocess.run(
            [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], capture_output=True
        )
        shutil.rmtree(base, ignore_errors=True)
        log("PostgreSQL stopped")


# ------------------------------------------------------------------------------------------------
# workers
# ------------------------------------------------------------------------------------------------


def run_worker(
    a, pys: dict[str, str], servers: Servers, mode: str, workload: str, saver: str, label: str = "", **extra: Any
) -> dict:
    venv, uses_s3, _ = ALL_SAVERS[saver]
    tag = f"{mode}-{workload}-{label or saver}".replace("+", "-")
    out = WORKDIR / f"{tag}.json"
    out.unlink(missing_ok=True)
    cmd = [pys[venv], str(HERE / "longwork.py"), "--mode", mode, "--workload", workload, "--saver", saver]
    cmd += ["--out", str(out), "--run-id", f"{a.run_id}-{tag}", "--tag", f"{a.run_id}:{tag}"]
    if uses_s3 and servers.s3:
        if mode == "short":  # client CPU only: straight to the server, counted by CountingStore
            cmd += ["--endpoint", servers.s3["endpoint"], "--direct", servers.s3["endpoint"]]
        else:
            cmd += ["--endpoint", servers.proxy, "--count-at", servers.proxy, "--direct", servers.s3["endpoint"]]
    if saver == "postgres" and servers.pg:
        cmd += ["--pg-dsn", servers.pg["dsn"], "--pg-admin-dsn", servers.pg["admin_dsn"]]
    for k, v in extra.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    log(f"{mode} {workload} {saver} ({venv} venv) ...")
    load_before = os.getloadavg()
    t0 = time.monotonic()
    timeout = float(extra.get("budget_s") or 0) * 1.5 + 1800
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rc, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = "timeout"
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    took = round(time.monotonic() - t0, 1)
    res = json.loads(out.read_text()) if out.exists() else {"saver": saver, "workload": workload, "ok": False}
    res.update(mode=mode, workload=workload, saver=saver, date=time.strftime("%Y-%m-%d %H:%M:%S %Z"), run_id=a.run_id)
    res["worker"] = {"rc": rc, "seconds": took, "args": extra, "load_before_after": [load_before, os.getloadavg()]}
    if rc != 0:
        tail = stderr.strip().splitlines()[-12:]
        res["worker"]["stderr_tail"] = tail
        res.setdefault("error", f"worker rc={rc}: " + " | ".join(tail[-2:]))
        res["ok"] = False
    status = "ok" if res.get("ok") else f"FAILED: {res.get('reason') or res.get('error')}"
    done = f", {res.get('turns_done')} turns" if mode != "short" and res.get("ok") else ""
    log(f"{mode} {workload} {saver}: {status} in {took} s{done}")
    return res


def short_passes(a, pys, servers) -> dict:
    """The 5-node graph's client CPU per sync invoke, ours on RGW against InMemorySaver, and
    against InMemorySaver made to wait ``--short-latency-ms`` per call (what waiting on a store
    alone costs LangGraph; see ``longwork.latent_inmemory_saver``): a fresh process per saver and
    pass, the order reversed on every other pass, ratios taken within each pass."""
    passes = []
    n = 1 if a.quick else a.short_passes
    args = {"conversations": 12 if a.quick else 60, "warmup": 2 if a.quick else 8}
    latency = a.short_latency_ms
    if latency is None:  # as long as ours waits per request on this server, this time
        cal = run_worker(a, pys, servers, "short", "delta-100", "handoff-s3", label="handoff-s3-calibration", **args)
        latency = cal.get("wait_ms_per_request") if cal.get("ok") else None
        log(f"short: InMemorySaver waits {latency} ms per call (ours' wait per request on RGW)")
        if not latency:
            sys.exit("short: could not measure ours' wait per request on RGW; give --short-latency-ms")
    extra = {LATENT: {"latency_ms": latency}}
    for p in range(n):
        order = list(SHORT_SAVERS) if p % 2 == 0 else list(reversed(SHORT_SAVERS))
        passes.append(
            {
                s: run_worker(
                    a, pys, servers, "short", "delta-100", SHORT_SAVERS[s], label=s, **args, **extra.get(s, {})
                )
                for s in order
            }
        )

    def ratios_to(ref: str, of: str = "handoff-s3") -> list[float]:
        return [
            round(p[of]["cpu_ms_per_invoke"] / p[ref]["cpu_ms_per_invoke"], 3)
            for p in passes
            if p[of].get("ok") and p[ref].get("ok")
        ]

    ratios, latent, floor = ratios_to("inmemory"), ratios_to(LATENT), ratios_to(FLOOR)
    floor_over = ratios_to("inmemory", of=FLOOR)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "args": args,
        "latency_ms": latency,
        "latency_from": "given" if a.short_latency_ms is not None else "ours' wait per request, calibration pass",
        "passes": passes,
        "ratios": ratios,
        "ratio_median": statistics.median(ratios) if ratios else None,
        "latent_ratios": latent,
        "latent_ratio_median": statistics.median(latent) if latent else None,
        "floor_ratios": floor,
        "floor_ratio_median": statistics.median(floor) if floor else None,
        "floor_over_inmemory": floor_over,
        "floor_over_inmemory_median": statistics.median(floor_over) if floor_over else None,
    }


# ------------------------------------------------------------------------------------------------
# figures from a run
# ------------------------------------------------------------------------------------------------


def mean(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def at(run: dict, turn: int) -> dict | None:
    """The figures of the window ending at ``turn`` (None when the run did not get there)."""
    if not run.get("ok") or run.get("turns_done", 0) < turn:
        return None
    s, w = run["series"], window(turn)
    lo, hi = turn - w, turn
    samples = dict((t, b) for t, b in run.get("stored_samples", []))
    cp = run.get("checkpoints", {}).get(str(turn), {})
    stored = None
    if lo in samples and hi in samples:
        stored = (samples[hi] - samples[lo]) / w
    out = {
        "window": [lo + 1, hi],
        "cpu_ms": mean(s["cpu_ms"][lo:hi]),
        "wall_ms": mean(s["wall_ms"][lo:hi]),
        "requests": mean(s["requests"][lo:hi]),
        "written": mean(s["written"][lo:hi]),
        "stored": stored,
        "rss_mib": cp.get("rss_kib", {}).get("VmRSS", 0) / 1024 or None,
    }
    for what in ("get_state", "history"):
        if what in cp:
            out[f"{what}_cpu_ms"] = statistics.median(cp[what]["cpu_ms"])
            out[f"{what}_wall_ms"] = statistics.median(cp[what]["wall_ms"])
            reqs = cp[what].get("requests") or cp[what].get("store_requests")
            out[f"{what}_requests"] = statistics.median(reqs) if reqs else None
    return out


def turns_of(data: dict) -> list[int]:
    asked = max((r.get("turns_asked", 0) for r in data.get("runs", [])), default=0)
    return sorted({c for c in CHECKPOINTS if c <= asked} | ({asked} if asked and asked not in CHECKPOINTS else set()))


def fmt(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "-"
    if abs(x) >= 100:
        digits = 0
    return f"{x:,.{digits}f}".replace(",", " ")


def kib(x: float | None) -> str:
    return "-" if x is None else fmt(x / 1024, 1 if abs(x) < 100 * 1024 else 0)


def ratio(x: float | None, y: float | None) -> str:
    return "-" if not x or not y else f"{x / y:.1f}x" if x / y < 100 else f"{x / y:,.0f}x"


def run_for(data: dict, workload: str, saver: str) -> dict | None:
    for r in data.get("runs", []):
        if r["workload"] == workload and r["saver"] == saver:
            return r
    return None


def _run_start(run_id: str | None) -> str | None:
    """``lt-YYYYMMDD-HHMMSS`` as ``YYYY-MM-DD HH:MM:SS`` (the run's start, in the rows' clock)."""
    if not run_id or not run_id.startswith("lt-") or len(run_id) != 18:
        return None
    d, t = run_id[3:11], run_id[12:]
    return f"{d[:4]}-{d[4:6]}-{d[6:]} {t[:2]}:{t[2:4]}:{t[4:]}"


def from_this_run(r: dict, meta: dict) -> bool:
    """Whether a row was measured by the run that wrote ``meta`` (rows that were not re-run keep
    their earlier result and date). Rows written before rows carried ``run_id`` are judged by date."""
    if not meta.get("run_id"):
        return True
    if r.get("run_id"):
        return r["run_id"] == meta["run_id"]
    start = _run_start(meta["run_id"])
    return bool(start and str(r.get("date", ""))[:19] >= start)


def saver_cell(r: dict, meta: dict) -> str:
    """The saver's name, with the date of its measurement when it is not from this run."""
    if from_this_run(r, meta):
        return f"`{r['saver']}`"
    return f"`{r['saver']}` (earlier run, {str(r.get('date', '?'))[:16]})"


def row_note(r: dict) -> str:
    if not r.get("ok"):
        return f"**failed**: {r.get('reason') or r.get('error')}"
    note = []
    full = max(CHECKPOINTS)
    if r.get("turns_asked", full) < full:
        note.append(f"run to {r['turns_asked']} turns only, to keep the whole run near 2 hours")
    if r.get("turns_done", 0) < r.get("turns_asked", 0):
        note.append(f"stopped at turn {r['turns_done']}: {r.get('stop_reason') or 'see JSON'}")
    return "; ".join(note)


def tables(data: dict) -> list[str]:
    turns = turns_of(data)
    meta = data.get("meta", {})
    lines: list[str] = []
    head = "| saver | " + " | ".join(f"turn {t:,}".replace(",", " ") for t in turns)
    sep = "|---|" + "---|" * len(turns)
    for wl, (_, _, _, desc) in WORKLOADS.items():
        runs = [run_for(data, wl, s) for s in SAVERS]
        runs = [r for r in runs if r is not None]
        if not runs:
            continue
        lines += ["", f"### `{wl}`: {desc}", ""]
        lines += ["**CPU ms per turn** (wall ms per turn); peak RSS of the worker process; notes", ""]
        lines += [head + " | peak RSS MiB | notes |", sep + "---|---|"]
        for r in runs:
            cells = []
            for t in turns:
                x = at(r, t)
                cells.append("-" if x is None else f"{fmt(x['cpu_ms'])} ({fmt(x['wall_ms'])})")
            rss = fmt(r.get("peak_rss_kib", 0) / 1024, 0) if r.get("ok") else "-"
            lines.append(f"| {saver_cell(r, meta)} | " + " | ".join(cells) + f" | {rss} | {row_note(r)} |")
        lines += ["", "**Bytes per turn**, KiB: written / stored growth; **requests per turn**", ""]
        lines += [head + " |", sep]
        for r in runs:
            cells = []
            for t in turns:
                x = at(r, t)
                if x is None:
                    cells.append("-")
                    continue
                req = "n/a" if x["requests"] is None else fmt(x["requests"])
                cells.append(f"{kib(x['written'])} / {kib(x['stored'])} · {req} req")
            lines.append(f"| {saver_cell(r, meta)} | " + " | ".join(cells) + " |")
        lines += ["", "**`get_state`** and **`get_state_history(limit=10)`**: CPU ms (wall ms), median of 3", ""]
        lines += [head + " |", sep]
        for r in runs:
            cells = []
            for t in turns:
                x = at(r, t)
                if x is None or "get_state_cpu_ms" not in x:
                    cells.append("-")
                    continue
                cells.append(
                    f"{fmt(x['get_state_cpu_ms'], 2)} ({fmt(x['get_state_wall_ms'], 2)}) · "
                    f"{fmt(x['history_cpu_ms'])} ({fmt(x['history_wall_ms'])})"
                )
            lines.append(f"| {saver_cell(r, meta)} | " + " | ".join(cells) + " |")
    return lines


RATIO_METRICS = [
    ("cpu_ms", "CPU per turn"),
    ("stored", "stored bytes per turn (growth of what the saver keeps)"),
    ("get_state_cpu_ms", "`get_state` CPU"),
    ("history_cpu_ms", "`get_state_history(limit=10)` CPU"),
]


def ratio_tables(data: dict) -> list[str]:
    turns = turns_of(data)
    meta = data.get("meta", {})
    lines: list[str] = []
    for key, title in RATIO_METRICS:
        lines += ["", f"### Ours against `SqliteSaver`: {title} (same window of the same run)", ""]
        lines += ["| workload | ours on | " + " | ".join(f"turn {t}" for t in turns) + " |"]
        lines += ["|---|---|" + "---|" * len(turns)]
        for wl in WORKLOADS:
            ref = run_for(data, wl, REFERENCE)
            for s in OURS:
                r = run_for(data, wl, s)
                if r is None or ref is None or from_this_run(r, meta) != from_this_run(ref, meta):
                    continue  # a ratio across two runs would compare two machines' speeds
                cells = []
                for t in turns:
                    x, y = at(r, t), at(ref, t)
                    cells.append(ratio(x and x.get(key), y and y.get(key)))
                lines.append(f"| `{wl}` | `{s.removeprefix('handoff-')}` | " + " | ".join(cells) + " |")
    first = turns[0]
    lines += ["", f"### Growth along the thread: turn N against turn {first}, per saver", ""]
    lines += [
        "CPU per turn · bytes written per turn · stored bytes per turn, at the last turn count each saver reached "
        "(a `-` where it did not get past the first)",
        "",
        "| saver | " + " | ".join(f"`{wl}`" for wl in WORKLOADS) + " |",
        "|---|" + "---|" * len(WORKLOADS),
    ]
    for s in SAVERS:
        cells = []
        for wl in WORKLOADS:
            r = run_for(data, wl, s)
            reached = [t for t in turns if r and at(r, t) is not None]
            if not reached or reached[-1] == first or at(r, first) is None:
                cells.append("-")
                continue
            x, y = at(r, reached[-1]), at(r, first)
            earlier = "" if from_this_run(r, meta) else f" (earlier run, {str(r.get('date', '?'))[:16]})"
            cells.append(
                f"t{reached[-1]}: {ratio(x['cpu_ms'], y['cpu_ms'])} · {ratio(x['written'], y['written'])} · "
                f"{ratio(x['stored'], y['stored'])}{earlier}"
            )
        lines.append(f"| `{s}` | " + " | ".join(cells) + " |")
    return lines


def snapshot_period(workload: str) -> int | None:
    """Turns between two ``DeltaChannel`` snapshots of ``workload`` (None without one): every
    message of a turn is one update of the channel (``snapshot_frequency`` counts updates).

    >>> snapshot_period("delta-1000"), snapshot_period("tools"), snapshot_period("list")
    (500, 25, None)
    """
    shape, channel, snapshot, _ = WORKLOADS[workload]
    return snapshot // MESSAGES_PER_TURN[shape] if channel == "delta" and snapshot else None


def period_bytes(run: dict, period: int) -> dict | None:
    """Bytes written per turn (mean) over the window of the first checkpoint turn (41-50, as in
    :func:`at`), the first whole snapshot period and the last whole one the run completed; None
    without enough turns."""
    written = (run.get("series") or {}).get("written") or []
    done = min(run.get("turns_done", 0), len(written))
    last_end = done // period * period
    first_window = at(run, CHECKPOINTS[0])
    if first_window is None or last_end < 2 * period or not all(written[:last_end]):
        return None

    def per_turn(lo: int, hi: int) -> float:  # turns lo..hi, 1-based
        return sum(written[lo - 1 : hi]) / (hi - lo + 1)

    return {
        "t50": first_window["written"],
        "first": per_turn(1, period),
        "last": per_turn(last_end - period + 1, last_end),
        "last_turns": [last_end - period + 1, last_end],
    }


def period_lines(data: dict) -> list[str]:
    """Bytes per turn of the ``DeltaChannel`` workloads averaged over whole snapshot periods.

    Why: a snapshot is one turn that writes the conversation's growth since the previous one, so
    a window shorter than a period reads high or low depending on whether it holds one. With a
    snapshot every 1,000 updates (every 500 turns here), the turn-1,000 window (901-1,000) holds
    the second snapshot and the turn-50 window none, for every saver alike."""
    meta = data.get("meta", {})
    lines = [
        "",
        "### `DeltaChannel` bytes written per turn over whole snapshot periods",
        "",
        "KiB per turn: the turn-50 window, the first whole snapshot period and the last one the run completed, "
        "and the last against each. A window shorter than a period holds a snapshot or not (see the notes).",
        "",
        "| workload | saver | period | turns 41-50 | first period | last period | last / turns 41-50 | last / first |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = 0
    for wl in WORKLOADS:
        period = snapshot_period(wl)
        if period is None:
            continue
        for s in SAVERS:
            r = run_for(data, wl, s)
            b = period_bytes(r, period) if r is not None else None
            if b is None:
                continue
            lo, hi = b["last_turns"]
            lines.append(
                f"| `{wl}` | {saver_cell(r, meta)} | {period} turns | {kib(b['t50'])} | {kib(b['first'])} (1-{period}) "
                f"| {kib(b['last'])} ({lo}-{hi}) | {b['last'] / b['t50']:.2f}x | {b['last'] / b['first']:.2f}x |"
            )
            rows += 1
    return lines if rows else []


def short_lines(data: dict) -> list[str]:
    sh = data.get("short")
    if not sh:
        return []
    lat = sh.get("latency_ms")
    lines = [
        "",
        "## Short threads: the 5-node graph, sync `invoke`",
        "",
        f"* date: {sh['date']}; {len(sh['passes'])} passes, a fresh process per saver and pass, the order reversed on "
        f"every other pass; per pass {sh['args']['conversations']} new threads x 1 `invoke` after "
        f"{sh['args']['warmup']} warm-up invokes, one at a time; `workload.build_graph` with sync nodes "
        "(5 nodes, one ~120 B message each); ours talks to RGW directly (no proxy); process CPU",
    ]
    if lat:
        lines.append(
            f"* `InMemorySaver + {lat:g} ms`: `InMemorySaver` whose every call first sleeps {lat:g} ms "
            "(`longwork.latent_inmemory_saver`): what waiting on a store alone costs LangGraph's CPU. "
            f"{lat:g} ms: {sh.get('latency_from', 'given')}. Ours' wait per request in each pass, "
            "(wall - CPU) / requests, is beside it"
        )
    lines.append(
        "* `S3 floor`: `InMemorySaver` that also makes ours' requests on RGW through our obstore store "
        "(`longwork.floor_s3_saver`): a GET and a LIST per `get_tuple`, a PUT per `put` and `put_writes`, "
        "its own serialized bytes as bodies. No logic of its own: the least CPU any saver pays that makes "
        "those requests on that transport"
    )
    lines += [
        "",
        "| pass | `InMemorySaver` | `InMemorySaver + latency` | S3 floor | ours on RGW | "
        "S3 floor: requests / invoke | ours: requests / invoke, wait ms / request | ours / `InMemorySaver` | "
        "S3 floor / `InMemorySaver` | ours / `InMemorySaver + latency` | ours / S3 floor |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cpu(r: dict) -> float | None:
        return r.get("cpu_ms_per_invoke") if r.get("ok") else None

    def over(x: float | None, y: float | None) -> str:
        return f"{x / y:.2f}x" if x and y else "-"

    for i, p in enumerate(sh["passes"]):
        im, latent, ours = p.get("inmemory", {}), p.get(LATENT, {}), p.get("handoff-s3", {})
        floor = p.get(FLOOR, {})
        lines.append(
            f"| {i + 1} | {fmt(cpu(im), 2)} | {fmt(cpu(latent), 2)} | {fmt(cpu(floor), 2)} | {fmt(cpu(ours), 2)} "
            f"| {fmt(floor.get('store_requests_per_invoke'))} "
            f"| {fmt(ours.get('store_requests_per_invoke'))}, {fmt(ours.get('wait_ms_per_request'), 2)} "
            f"| {over(cpu(ours), cpu(im))} | {over(cpu(floor), cpu(im))} | {over(cpu(ours), cpu(latent))} "
            f"| {over(cpu(ours), cpu(floor))} |"
        )
    lines.append("")
    lines.append("CPU ms per invoke, process CPU.")
    for values, median, what in (
        ("ratios", "ratio_median", "ours / `InMemorySaver`"),
        ("floor_over_inmemory", "floor_over_inmemory_median", "S3 floor / `InMemorySaver`"),
        ("latent_ratios", "latent_ratio_median", f"ours / `InMemorySaver + {lat:g} ms`" if lat else ""),
        ("floor_ratios", "floor_ratio_median", "ours / S3 floor"),
    ):
        if what and sh.get(median):
            listed = ", ".join(f"{r:.2f}" for r in sh[values])
            lines.append(f"Median {what}: **{sh[median]:.2f}x** (passes {listed}).")
    return lines


def profile_lines(data: dict) -> list[str]:
    profs = data.get("profile") or []
    lines = ["", "## Where the time goes", ""]
    if not profs:
        return [*lines, "(no profile in this run)"]
    for p in profs:
        if not p.get("ok") or "profile" not in p:
            lines += [f"* `{p['workload']}`: profile failed: {p.get('error')}"]
            continue
        s = p["profile"]
        t0, t1 = p["profile_turns"]
        lines += [
            f"### `{p['workload']}` on `memory://`, turns {t0}-{t1} ({p['date']})",
            "",
            f"cProfile in every thread on the thread's CPU clock: {fmt(s['profiled_cpu_ms_per_turn'])} ms of CPU per "
            f"turn under the profiler (process CPU {fmt(s['process_cpu_ms_per_turn'])} ms; the same turns without a "
            f"profiler in the `turns` run: {fmt(p.get('unprofiled_cpu_ms'))} ms). Shares are of the profiled CPU; the "
            "profiler's own cost inflates functions that make many small calls (see the py-spy sample below).",
            "",
            "Own time by package: "
            + ", ".join(f"{k} {v * 100:.0f} %" for k, v in list(s["own_by_package"].items())[:10]),
            "",
            "Top by cumulative time (ours only):",
            "",
            "| function | calls / turn | cumulative ms / turn | share | own ms / turn |",
            "|---|---|---|---|---|",
        ]
        for r in s["ours_by_cumulative"][:18]:
            lines.append(
                f"| `{r['func']}` | {fmt(r['calls_per_turn'])} | {fmt(r['cum_ms_per_turn'], 2)} | "
                f"{r['cum_share'] * 100:.0f} % | {fmt(r['own_ms_per_turn'], 2)} |"
            )
        lines += [
            "",
            "Top by own time (everything):",
            "",
            "| function | calls / turn | own ms / turn | share |",
            "|---|---|---|---|",
        ]
        for r in s["by_own"][:18]:
            lines.append(
                f"| `{r['func']}` | {fmt(r['calls_per_turn'])} | {fmt(r['own_ms_per_turn'], 2)} | {r['own_share'] * 100:.1f} % |"
            )
        sp = p.get("sampled")
        if sp:
            u0, u1 = p["sampled_turns"]
            lines += [
                "",
                f"Sampled with py-spy (no per-call cost), turns {u0}-{u1} of the same process "
                f"({fmt(p.get('sampled_cpu_ms_per_turn'))} ms of process CPU per turn while sampled): "
                f"{sp['samples']} samples of running threads ({sp['waiting_samples_dropped']} more of threads "
                "blocked on a lock or queue were dropped). On this loaded VM a thread that waits for a core also "
                "counts as running, so shares are of time on or ready for the CPU.",
                "",
                "Own time by package: "
                + ", ".join(f"{k} {v * 100:.0f} %" for k, v in list(sp["own_by_package"].items())[:10]),
                "",
                "| top by own time | share | top of ours by cumulative time | share |",
                "|---|---|---|---|",
            ]
            for x, y in zip(sp["by_own"][:15], sp["ours_by_cumulative"][:15], strict=False):
                lines.append(f"| `{x['func']}` | {x['share'] * 100:.0f} % | `{y['func']}` | {y['share'] * 100:.0f} % |")
        lines.append("")
    return lines


def methods(data: dict) -> list[str]:
    meas: dict[str, dict] = {}
    for r in data.get("runs", []):
        if r.get("ok") and r["saver"] not in meas:
            meas[r["saver"]] = r.get("measured", {})
    lines = ["", "## How each figure is measured", ""]
    lines += [
        "* **CPU per turn**: `time.process_time()` around the turn's `invoke` (user + system time of every thread of "
        "the worker process: LangGraph's task and checkpoint threads, the saver's, the transport's). Servers (RGW, "
        "PostgreSQL, the proxy) are other processes and are not in it. On a 2-core VM shared with other jobs this is "
        "the figure that means something; wall time moves with the load.",
        "* **window**: each turn count N is the mean over the last 10 % of the turns up to N, at least 10 turns: "
        "41-50, 91-100, 226-250, 451-500, 901-1,000.",
        "* **get_state / history**: `graph.get_state(config)` and `list(graph.get_state_history(config, limit=10))` "
        "on the conversation (the subgraph's namespace for `subgraph`) right after turn N, 3 times each, median; "
        "the first call checks that the state holds every message.",
        "* **peak RSS**: VmHWM of the worker process at its end (a fresh process per saver and workload); "
        "`memory://` and `InMemorySaver` hold the whole thread in that process by design.",
        "",
        "| saver | requests | bytes written | stored growth |",
        "|---|---|---|---|",
    ]
    for s, m in meas.items():
        lines.append(f"| `{s}` | {m.get('requests')} | {m.get('written')} | {m.get('stored')} |")
    return lines


NOTES = [
    "**Reading the windows of `delta-100`**: a `DeltaChannel` stores a full snapshot every 100 updates of the "
    "channel, i.e. every 50 turns here (2 updates a turn; 25 turns in `tools`), and a read replays the writes "
    "since the last snapshot. A saver whose cost grows with that replay has a saw-tooth: the windows 41-50 and "
    "91-100 sit at the top of a cycle, 451-500 and 901-1,000 average whole cycles. In `delta-1000` the cycle is "
    "500 turns long, so turn 500 is its worst point and turn 1,000 the next one.",
    "**Bytes written** are what each saver sends to its storage and are measured differently per kind (table "
    "below): compare them within a kind (ours on memory, file and S3 against each other and the S3 peers; "
    "SQLite's write(2) bytes include the WAL and its checkpoints, PostgreSQL's WAL includes full-page images). "
    "**Stored growth** (what the saver keeps) is the figure to compare across kinds.",
    "**`s3-peer+shim` with a `DeltaChannel`** (`delta-100`, `delta-1000`, `tools`) fails the bench's state check at "
    "turn 2: `get_state` returns no messages. Its `get_tuple` builds `parent_config` from "
    '`metadata["parents"]`, which in LangGraph 1.x holds the parent *graphs*\' checkpoints, not the '
    "checkpoint's own parent, so the base `get_delta_channel_history` walk stops at once and the channel "
    "rebuilds as empty (read from its source, `langgraph_checkpoint_s3/checkpoint.py`, 0.1.3).",
    "**Turns cut**: a run whose row says so was given fewer turns (`--cap`) or a wall-time budget (peers: "
    "`BUDGET_MIN`) to keep the whole run near 2 hours on this machine; its table cells stop at the last turn count "
    "it reached.",
]


def earlier_rows_line(data: dict) -> list[str]:
    """One line naming the rows that were not measured by this run, with their dates."""
    meta = data.get("meta", {})
    old: dict[str, list[dict]] = {}
    for r in data.get("runs", []):
        if not from_this_run(r, meta):
            old.setdefault(r["saver"], []).append(r)
    if not old:
        return ["* every row below is from this run"]
    parts = []
    for saver, rows in old.items():
        dates = sorted(str(r.get("date", "?")) for r in rows)
        span = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
        wls = ", ".join(f"`{r['workload']}`" for r in rows)
        parts.append(f"`{saver}` ({wls}: {span})")
    return [
        "* **rows not re-run by this run** keep their earlier result and are marked *(earlier run, date)* in every "
        "table: " + "; ".join(parts) + ". All other rows are from this run."
    ]


def markdown(data: dict) -> str:
    meta = data.get("meta", {})
    v = meta.get("versions", {})
    if not meta:  # a run stopped before its report step: the rows carry their own dates and versions
        runs = data.get("runs", [])
        dates = sorted(str(r["date"]) for r in runs if r.get("date"))
        versions = next((r["versions"] for r in runs if r.get("versions")), {})
        meta = {
            "date": f"{dates[0]} to {dates[-1]} (rows assembled from the per-run files)" if dates else None,
            "versions": {"long": versions} if versions else {},
            "turns": max((r.get("turns_asked", 0) for r in runs), default=None),
            "machine": platform.platform(),
        }
        v = meta["versions"]
    lines = [
        "# Long threads: the cost of a turn as a conversation grows",
        "",
        "Generated by `bench/long_threads.py` (see `bench/README.md`); raw figures in `bench/long-threads-results.json`.",
        "",
        f"* date: {_run_start(meta.get('run_id')) or '?'} to {meta.get('date')}; runtime "
        f"{fmt(meta.get('runtime_s', 0) / 60, 0)} min; machine: {meta.get('machine')}; "
        f"load average (1/5/15 min) at start -> end: {meta.get('load')}",
        f"* S3: {meta.get('server')}, reached through the counting proxy (`bench/proxy.py`); PostgreSQL: {meta.get('postgres')}",
        "* versions (`long` venv): " + ", ".join(f"{k} {x}" for k, x in v.get("long", {}).items()),
        "* versions (`aio` venv): " + ", ".join(f"{k} {x}" for k, x in v.get("aio", {}).items()),
        f"* workload: one thread of {meta.get('turns')} turns per (workload, saver), each in a fresh process, one after "
        "another; a turn is one sync `invoke` adding a ~400-character user question and getting a ~400-character "
        "scripted answer (tools: also an AI tool call and an 8 KiB tool result). Text: seeded word-like words "
        "(`longwork.Words`), which zlib shrinks about as much as English prose",
        f"* this run: {meta.get('run_id')}"
        + (f", langgraph-handoff at commit {meta['commit']}" if meta.get("commit") else ""),
        *earlier_rows_line(data),
    ]
    lines += ["", "## Per workload", "", *tables(data)]
    lines += ["", "## Target ratios", "", *ratio_tables(data), *period_lines(data)]
    lines += short_lines(data)
    lines += profile_lines(data)
    lines += ["", "## Notes", ""] + [f"* {n}" for n in NOTES]
    lines += methods(data)
    plots = sorted(PLOTS.glob("long-threads-*.png"))
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{p.stem}](../docs/img/{p.name})" for p in plots]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------


def git_commit() -> str | None:
    """HEAD of the checkout the bench runs from (``+dirty`` when the package has local changes)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "langgraph_handoff", "pyproject.toml"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    except OSError:
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="smoke run: 50 turns, 1 short pass, short profiles")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--savers", default=",".join(SAVERS))
    ap.add_argument("--cap", default="", help="fewer turns for some runs: saver=N or saver@workload=N, comma-separated")
    ap.add_argument(
        "--budget-min", default="", help="wall-time budget per worker: saver=MIN,... (defaults in BUDGET_MIN)"
    )
    ap.add_argument("--skip", default="", help="any of: turns, short, profile")
    ap.add_argument("--short-passes", type=int, default=3)
    ap.add_argument(
        "--short-latency-ms",
        type=float,
        default=None,
        help="the wait per call of the InMemorySaver reference (default: ours' wait per request on RGW, measured "
        "by a calibration pass first)",
    )
    ap.add_argument("--profile-turns", type=int, default=500)
    ap.add_argument("--fresh", action="store_true", help="do not keep rows of earlier runs in the JSON")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--rgw-dir", default="", help="CEPH_RGW_DIR for the RGW the bench starts (default: a temp dir)")
    ap.add_argument("--mon-port", type=int, default=0, help="preferred port (a free one if taken)")
    ap.add_argument("--rgw-port", type=int, default=0, help="preferred port (a free one if taken)")
    ap.add_argument("--pg-port", type=int, default=0, help="preferred port (a free one if taken)")
    ap.add_argument("--results", default=str(RESULTS))
    a = ap.parse_args()
    a.run_id = time.strftime("lt-%Y%m%d-%H%M%S")
    if a.quick:
        a.turns, a.profile_turns = min(a.turns, 50), 50
    skip = set(filter(None, a.skip.split(",")))
    workloads = [w for w in a.workloads.split(",") if w]
    savers = [s for s in a.savers.split(",") if s]
    for x in workloads:
        if x not in WORKLOADS:
            sys.exit(f"unknown workload {x}; known: {', '.join(WORKLOADS)}")
    for x in savers:
        if x not in SAVERS:
            sys.exit(f"unknown saver {x}; known: {', '.join(SAVERS)}")
    caps = {k: int(v) for k, v in (p.split("=") for p in a.cap.split(",") if p)}  # saver or saver@workload
    budgets = {**BUDGET_MIN, **{k: float(v) for k, v in (p.split("=") for p in a.budget_min.split(",") if p)}}
    results = Path(a.results)
    data: dict[str, Any] = {} if a.fresh or not results.exists() else json.loads(results.read_text())
    WORKDIR.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    load_start = os.getloadavg()
    pys = {name: ensure_venv(name, reqs) for name, reqs in VENVS.items()}
    if not a.report_only:
        need_s3 = (any(SAVERS[s][1] for s in savers) and "turns" not in skip) or "short" not in skip
        with Servers(a, pys["long"]) as servers:
            if need_s3:
                servers.start_rgw()
                servers.start_proxy()
            if "postgres" in savers and "turns" not in skip:
                servers.start_postgres()
            runs = {(r["workload"], r["saver"]): r for r in data.get("runs", [])}
            if "turns" not in skip:
                for wl in workloads:
                    for s in savers:
                        budget = budgets.get(s, DEFAULT_BUDGET_MIN) * 60
                        turns = min(a.turns, caps.get(f"{s}@{wl}", caps.get(s, a.turns)))
                        runs[(wl, s)] = run_worker(a, pys, servers, "turns", wl, s, turns=turns, budget_s=budget)
                        data["runs"] = list(runs.values())
                        results.write_text(json.dumps(data))  # a crash later keeps what ran
            if "short" not in skip:
                data["short"] = short_passes(a, pys, servers)
            if "profile" not in skip:
                profs = []
                for wl in PROFILE_WORKLOADS:
                    pstats_file = WORKDIR / f"profile-{wl}.pstats"
                    p = run_worker(
                        a,
                        pys,
                        servers,
                        "profile",
                        wl,
                        "handoff-memory",
                        turns=a.profile_turns,
                        profile_from=a.profile_turns - window(a.profile_turns) + 1,
                        sample_turns=window(a.profile_turns),
                        pstats=str(pstats_file),
                    )
                    same = run_for(data, wl, "handoff-memory")
                    x = at(same, a.profile_turns) if same else None
                    p["unprofiled_cpu_ms"] = x["cpu_ms"] if x else None
                    p.pop("series", None)
                    profs.append(p)
                data["profile"] = profs
        versions: dict[str, dict] = {}
        for r in data.get("runs", []):
            versions.setdefault(SAVERS[r["saver"]][0], r.get("versions", {}))
        data["meta"] = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "run_id": a.run_id,
            "runtime_s": round(time.monotonic() - t_start),
            "machine": f"{os.cpu_count()}-core VM shared with other jobs, {platform.system()} {platform.release()}, "
            f"{platform.processor() or platform.machine()}",
            "load": " -> ".join("/".join(f"{x:.1f}" for x in la) for la in (load_start, os.getloadavg())),
            "server": servers.server_desc or data.get("meta", {}).get("server"),
            "postgres": servers.pg.get("version") or data.get("meta", {}).get("postgres"),
            "turns": a.turns,
            "commit": git_commit(),
            "versions": versions,
            "args": {k: v for k, v in vars(a).items() if k != "results"},
        }
        results.write_text(json.dumps(data))
    subprocess.run([pys["long"], str(HERE / "longwork.py"), "--mode", "plot", "--results", str(results)], check=False)
    md = markdown(data)
    MARKDOWN.write_text(md)
    print(md)
    log(f"wrote {results}, {MARKDOWN} and {PLOTS}/long-threads-*.png")


if __name__ == "__main__":
    main()
