#!/usr/bin/env python3
"""perfwork.py's cpu phase with the client CPU split by thread.

Runs ``perfwork.py`` in this process with its timer wrapped: around every timed round, each
thread's CPU time is read from ``/proc/self/task/<tid>/schedstat`` (nanoseconds on the CPU), and
the per-round deltas are summed per thread group:

* ``loop``: the main thread (the event loop; ``asyncio.run`` runs there);
* ``iothreads``: our ``IoThreads`` workers (Python threads, found by their native ids);
* ``tokio``: obstore's Rust runtime threads (``comm`` starts with ``tokio``);
* ``other``: anything else (e.g. other Python threads).

Usage: the same arguments as perfwork.py (``--phase cpu``); the output JSON gets ``threads``:
ms/invoke per group over all rounds, and the per-thread detail. ``--cprofile FILE`` also profiles
the event-loop thread over the timed rounds only (pstats file, per-thread CPU clock, not wall).
``PERF_CTL=ctl_fifo,ack_fifo`` with ``perf record -D -1 --control=fifo:ctl_fifo,ack_fifo`` records
the timed rounds only.

Diagnostic stand-ins for a network store (with ``--saver handoff-memory``):

* ``LGH_FAKE_IO=S``: every request runs in an ``IoThreads`` worker (``LGH_FAKE_WORKERS``, default
  32) and sleeps S seconds there; ``LGH_FAKE_HASH=N`` also hashes N bytes outside the GIL
  (CPU in the worker, like obstore's Rust code);
* ``LGH_FAKE_MODE=yield`` with ``LGH_FAKE_IO=S``: no thread, every request awaits
  ``asyncio.sleep(S)`` on the event loop instead (latency alone).

Measured with these (issue 13): the event-loop thread of ``handoff-memory`` costs as much CPU per
invoke with 20 ms of ``asyncio.sleep`` per request as the S3 run's event-loop thread does; the
extra loop CPU of S3 over memory:// comes from the requests' latency, not from obstore or the pool.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import perfwork  # noqa: E402
from workload import take_option  # noqa: E402

_CS: list = []
_TOTAL: dict[int, list] = {}  # tid -> [comm, ns]
_STATE: dict[str, object] = {"invokes": 0, "prof": None, "rounds": []}


def _snapshot() -> dict[int, tuple[str, int]]:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            ns = int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[0])
            if int(tid) == os.getpid():
                st = Path(f"/proc/self/task/{tid}/status").read_text().split("\n")
                cs = [int(line.split()[1]) for line in st if "ctxt_switches" in line]
                _CS.append(cs)
            comm = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[int(tid)] = (comm, ns)
    return out


def _group(tid: int, comm: str, workers: set[int]) -> str:
    if tid == os.getpid():
        return "loop"
    if tid in workers:
        return "iothreads"
    if comm.startswith("tokio"):
        return "tokio"
    return "other:" + comm


_orig_now, _orig_since = perfwork.cpu_now, perfwork.cpu_since


_CTL = os.environ.get("PERF_CTL")  # perf record --control=fifo:CTL,ACK -D -1: record the timed rounds only


def _perf(cmd: str) -> None:
    if _CTL:
        ctl, ack = _CTL.split(",")
        with open(ctl, "w") as f:
            f.write(cmd + "\n")
        with open(ack) as f:
            f.readline()


def cpu_now():
    _perf("enable")
    t0 = _orig_now()
    t0["_threads"] = _snapshot()
    prof = _STATE["prof"]
    if prof is not None:
        prof.enable()
    return t0


def cpu_since(t0):
    prof = _STATE["prof"]
    if prof is not None:
        prof.disable()
    after = _snapshot()
    before = t0.pop("_threads")
    d = _orig_since(t0)
    _perf("disable")
    workers = {t.native_id for t in threading.enumerate() if t.name.startswith(("obstore", "iothreads"))}
    groups: dict[str, float] = {}
    for tid, (comm, ns) in after.items():
        delta = ns - before.get(tid, (comm, 0))[1]
        g = _group(tid, comm, workers)
        groups[g] = groups.get(g, 0) + delta
        _TOTAL.setdefault(tid, [g, 0])[1] += delta
    _STATE["rounds"].append(
        {k: round(v / 1e6, 2) for k, v in groups.items()} | {"process_cpu_ms": round(d["cpu"] * 1000, 2)}
    )
    return d


perfwork.cpu_now, perfwork.cpu_since = cpu_now, cpu_since

if os.environ.get("LGH_FAKE_IO"):  # memory:// whose requests take LGH_FAKE_IO s in an IoThreads worker
    import time as _time

    from langgraph_handoff.stores.base import StoreBase
    from langgraph_handoff.stores.iothreads import IoThreads
    from langgraph_handoff.stores.memory import MemoryStore

    _delay = float(os.environ["LGH_FAKE_IO"])
    _init = MemoryStore.__init__

    def _fake_init(self):
        _init(self)
        self._executor = IoThreads(int(os.environ.get("LGH_FAKE_WORKERS", "32")), thread_name_prefix="iothreads")

    import hashlib as _hashlib

    _blob = b"x" * int(os.environ.get("LGH_FAKE_HASH", "0"))

    def _fake_run(self, op):
        if _blob:
            _hashlib.sha256(_blob).digest()  # CPU outside the GIL, like obstore's Rust
        _time.sleep(_delay)
        return StoreBase.run(self, op)

    if os.environ.get("LGH_FAKE_MODE") == "yield":  # no thread: suspend once per request
        import asyncio as _asyncio

        async def _yield_arun(self, op):
            await _asyncio.sleep(_delay)
            return StoreBase.run(self, op)

        async def _yield_arun_many(self, ops, *, return_exceptions=False):
            await _asyncio.sleep(_delay)
            return StoreBase.run_many(self, ops, return_exceptions=return_exceptions)

        MemoryStore.arun = _yield_arun
        MemoryStore.arun_many = _yield_arun_many
    else:
        MemoryStore.__init__ = _fake_init
        MemoryStore.run = _fake_run
    for _n in ("aget", "aput", "adelete", "alist_page", "adelete_many"):
        setattr(MemoryStore, _n, getattr(StoreBase, _n))


def main() -> None:
    import json

    argv = sys.argv[1:]
    prof_out = take_option(argv, "--cprofile")
    if prof_out:
        import cProfile

        _STATE["prof"] = cProfile.Profile(time.thread_time)  # CPU, not wall (GIL waits)
    sys.argv = [sys.argv[0], *argv]
    perfwork.main()
    out = Path(argv[argv.index("--out") + 1])
    result = json.loads(out.read_text())
    n = sum(r["invokes"] for r in result["data"]["rounds"])
    groups: dict[str, float] = {}
    for g, ns in _TOTAL.values():
        groups[g] = groups.get(g, 0) + ns
    result["threads"] = {
        "ms_per_invoke": {g: round(ns / 1e6 / n, 3) for g, ns in sorted(groups.items())},
        "thread_count": {g: sum(1 for gg, _ in _TOTAL.values() if gg == g) for g in groups},
        "per_round_ms": _STATE["rounds"],
        "loop_ctxsw_per_invoke": [
            # (before, after) snapshots of the timed rounds; an unpaired one at the end is not a round
            round(sum(b[i] - a[i] for a, b in zip(_CS[0::2], _CS[1::2], strict=False)) / n, 2)
            for i in (0, 1)
        ],
    }
    out.write_text(json.dumps(result, indent=1))
    if prof_out:
        _STATE["prof"].dump_stats(prof_out)


if __name__ == "__main__":
    main()
