#!/usr/bin/env python3
"""The saver's own CPU per invoke, without LangGraph, the event loop or a network.

Records the saver calls of one sync invoke of the 5-node graph (``workload.build_graph``), then
replays them on a fresh thread id N times against ``InMemorySaver`` or our saver on ``memory://``,
and prints the CPU (``time.thread_time``) per invoke's calls. It isolates item 2 of issue 13 (our
own overhead) from LangGraph's and the transport's share of the whole-graph benches. This VM is
noisy: runs of the same code spread by up to 1.5x, so compare alternated runs.

Usage: ``.venv/bin/python bench/replay.py {inmemory,handoff} [N] [--cprofile FILE]``

Measured 2026-12-01 (N = 2000, 6 alternated runs, medians): ``InMemorySaver`` 0.18 ms, ours 2.62 ms
(2.34 ms with cuts to the head body, the cache's size estimate and ``_spill``, not landed). The
largest single cost is zlib on each head (level 1: about 265 µs for one invoke's six heads),
then the garbage collector walking the cached heads' objects (0.1-0.35 ms per invoke).
"""

from __future__ import annotations

import copy
import gc
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langgraph.checkpoint.memory import InMemorySaver
from workload import build_graph, cfg, take_option, user_msg

from langgraph_handoff import ObjectStoreSaver

CALLS: list[tuple[str, Any]] = []


class _Recorder(InMemorySaver):
    """InMemorySaver that keeps a deep copy of every call's arguments."""

    def get_tuple(self, config):  # type: ignore[no-untyped-def]
        CALLS.append(("get_tuple", copy.deepcopy(config)))
        return super().get_tuple(config)

    def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[no-untyped-def]
        CALLS.append(("put", copy.deepcopy((config, checkpoint, metadata, new_versions))))
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config, writes, task_id, task_path=""):  # type: ignore[no-untyped-def]
        CALLS.append(("put_writes", copy.deepcopy((config, writes, task_id, task_path))))
        return super().put_writes(config, writes, task_id, task_path)


def _retarget(obj: Any, thread_id: str) -> Any:
    if isinstance(obj, dict):
        return {k: (thread_id if k == "thread_id" else _retarget(v, thread_id)) for k, v in obj.items()}
    if isinstance(obj, tuple):
        return tuple(_retarget(x, thread_id) for x in obj)
    return obj


def _calls_for(thread_id: str) -> list[tuple[str, Any]]:
    return [(name, _retarget(args, thread_id)) for name, args in CALLS]


def _replay(saver: Any, calls: list[tuple[str, Any]]) -> None:
    for name, args in calls:
        if name == "get_tuple":
            saver.get_tuple(args)
        elif name == "put":
            saver.put(*args)
        else:
            saver.put_writes(*args)


def main() -> None:
    argv = sys.argv[1:]
    prof_out = take_option(argv, "--cprofile")
    which = argv[0] if argv else "handoff"
    n = int(argv[1]) if len(argv) > 1 else 2000
    build_graph(_Recorder()).invoke(user_msg(0), cfg("recorded"), durability="sync")
    saver: Any = InMemorySaver() if which == "inmemory" else ObjectStoreSaver.from_url("memory://")
    if which != "inmemory":
        saver.setup()
    for i in range(200):  # warm-up
        _replay(saver, _calls_for(f"warm-{i}"))
    runs = [_calls_for(f"t-{i}") for i in range(n)]  # built outside the timed part
    gc.collect()
    prof = None
    if prof_out:
        import cProfile

        prof = cProfile.Profile(time.thread_time)
        prof.enable()
    t0 = time.thread_time()
    for calls in runs:
        _replay(saver, calls)
    spent = time.thread_time() - t0
    if prof is not None:
        prof.disable()
        prof.dump_stats(prof_out)
    print(f"{which}: {spent / n * 1e3:.3f} ms of CPU per invoke's saver calls ({len(CALLS)} calls, {n} replays)")


if __name__ == "__main__":
    main()
