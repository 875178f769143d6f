#!/usr/bin/env python3
"""Leases under load: does a healthy worker keep every session it holds?

A ``SessionWorker`` takes N sessions on S3 (Ceph RGW) behind bench/proxy.py waiting
``--delay-ms`` (20) before forwarding each request, a stand-in for the round trip to a cloud
region. Then its heartbeat runs (ttl 30 s, a beat every 10 s) while a second process-like
monitor (its own saver) reads every session's status now and then: the run fails if one
session ever reads as anything but ``owned``. Printed: the time and requests of each beat, the
monitor's findings, and the same for the old way (each lease renewed by a compare-and-swap of
its head, measured over ``--old-sessions`` sessions and projected to N: the largest N whose
beat fits in the lease's TTL).

    S3_ENDPOINT_URL=http://127.0.0.1:7480 AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... \\
        python bench/leases.py --sessions 10000 --seconds 75

Not a test: it prints figures (docs/ownership.md, "How many sessions a worker holds").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from langgraph_handoff import ObjectStoreSaver  # noqa: E402
from langgraph_handoff.ownership import SessionManager, SessionWorker  # noqa: E402
from langgraph_handoff.stores import ObstoreS3Store  # noqa: E402


def _proxy(upstream: str, delay_ms: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "proxy.py"), "--upstream", upstream, "--delay-ms", str(delay_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line and line[0] == "READY", line
    return proc, f"http://127.0.0.1:{line[1]}"


def _phase(url: str, name: str) -> None:
    urllib.request.urlopen(f"{url}/__bench/phase?name={name}").read()


def _counts(url: str) -> dict[str, object]:
    return json.loads(urllib.request.urlopen(f"{url}/__bench/counts").read())


def _requests(url: str, phase: str) -> int:
    ops = _counts(url)["counts"].get(phase, {})  # type: ignore[union-attr]
    return int(sum(ops.values()))


def _take(worker: SessionWorker, n: int, threads: int) -> float:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker.lease_for, (f"s-{i}" for i in range(n))))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--old-sessions", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=75.0)
    ap.add_argument("--delay-ms", type=int, default=20)
    ap.add_argument("--ttl", type=float, default=30.0)
    ap.add_argument("--threads", type=int, default=32, help="sessions taken side by side when setting up")
    args = ap.parse_args()
    upstream = os.environ["S3_ENDPOINT_URL"]
    proxy, url = _proxy(upstream, args.delay_ms)
    prefix = f"bench-leases-{uuid.uuid4().hex[:8]}"

    def saver() -> ObjectStoreSaver:
        return ObjectStoreSaver(ObstoreS3Store("lgh-bench", prefix, endpoint_url=url, create_bucket=True))

    out: dict[str, object] = {"date": time.strftime("%Y-%m-%d"), "delay_ms": args.delay_ms, "ttl": args.ttl}
    try:
        # -- the old way: each lease renewed by a compare-and-swap of its head -------------------------
        old = SessionManager(saver())
        leases = [old.acquire(f"old-{i}", "old-worker", args.ttl) for i in range(args.old_sessions)]
        _phase(url, "old-beat")
        t0 = time.perf_counter()
        for lease in leases:
            old.renew(lease, args.ttl)
        old_beat = time.perf_counter() - t0
        per = old_beat / args.old_sessions
        out["old"] = {
            "sessions": args.old_sessions,
            "beat_seconds": round(old_beat, 2),
            "requests": _requests(url, "old-beat"),
            "per_session_ms": round(per * 1000, 1),
            "projected_beat_seconds_at_n": round(per * args.sessions, 1),
            "largest_n_within_ttl": int(args.ttl / per),
            "largest_n_within_ttl_minus_beat": int((args.ttl - args.ttl / 3) / per),
        }
        print("old:", out["old"], flush=True)

        # -- liveness records: one PUT per beat ------------------------------------------------------
        worker = SessionWorker(SessionManager(saver()), "bench-worker", lambda cp: None, ttl=args.ttl)
        _phase(url, "take")
        took = _take(worker, args.sessions, args.threads)
        out["take"] = {"seconds": round(took, 1), "requests": _requests(url, "take")}
        print("take:", out["take"], flush=True)
        monitor = SessionManager(saver())
        beats: list[dict[str, float]] = []
        checks: list[dict[str, object]] = []
        start = time.monotonic()
        next_beat = start + worker.heartbeat
        next_check = start + args.ttl * 1.2  # first check once every lease's own time has passed
        while time.monotonic() - start < args.seconds:
            now = time.monotonic()
            if now >= next_beat:
                _phase(url, f"beat-{len(beats)}")
                t0 = time.perf_counter()
                worker.beat()
                beats.append({"seconds": round(time.perf_counter() - t0, 3),
                              "requests": _requests(url, f"beat-{len(beats)}")})  # fmt: skip
                next_beat += worker.heartbeat
            elif now >= next_check:
                _phase(url, f"check-{len(checks)}")
                t0 = time.perf_counter()
                infos = monitor.sessions([f"s-{i}" for i in range(args.sessions)])
                statuses: dict[str, int] = {}
                for info in infos:
                    statuses[info.status] = statuses.get(info.status, 0) + 1
                checks.append({"at": round(now - start, 1), "seconds": round(time.perf_counter() - t0, 1),
                               "statuses": statuses})  # fmt: skip
                print("check:", checks[-1], flush=True)
                next_check = now + args.ttl / 2
            else:
                time.sleep(min(next_beat, next_check) - now)
        lapsed = sum(c["statuses"].get("expired", 0) for c in checks)  # type: ignore[union-attr]
        _phase(url, "stop")
        t0 = time.perf_counter()
        handed = len(worker.stop())
        stopped = {"seconds": round(time.perf_counter() - t0, 1), "handed": handed, "requests": _requests(url, "stop")}
        out["new"] = {"sessions": args.sessions, "beats": beats, "checks": checks, "lapsed": lapsed, "stop": stopped}
        print("beats:", beats, flush=True)
        print("stop:", stopped, flush=True)
        print(f"RESULT sessions={args.sessions} lapsed={lapsed} beat_requests={[b['requests'] for b in beats]}")
        print(json.dumps(out))
    finally:
        proxy.terminate()
        proxy.wait()


if __name__ == "__main__":
    main()
