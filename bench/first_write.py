"""What the store probe before a saver's first write costs (README, "The store probe").

    source /tmp/devrgw.env          # an S3 endpoint in S3_ENDPOINT_URL and AWS_* variables
    .venv/bin/python bench/first_write.py --runs 10

For each run, a fresh prefix on S3 (obstore transport, the default) and a fresh ``file://``
directory, the five-node graph of tests/checkpoint/test_request_counts.py invoked in order:

* ``first_invoke_new_store``: the first invoke on a store nobody set up: the probe, then the invoke;
* ``first_invoke_probed_store``: the first invoke of a new process on a store a probe passed
  before (the process's verdict dropped with ``trust.forget``): one GET of the marker;
* ``later_invoke``: the next invoke in the same process: nothing added;
* ``setup_new_store``: ``setup()`` alone on a fresh prefix, what moving the probe to startup costs;
* ``probe_only``: the probe without the marker (what a per-process probe that never recorded
  its verdict would cost every process).

Requests are counted by ``CountingStore``; times are wall clock, median (min-max) over the runs.
The alternative of refusing writes until ``setup()`` ran costs no request and is not measured:
it breaks every program that does not call ``setup()``. Writes ``first_write-results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from langgraph_handoff import ObjectStoreSaver  # noqa: E402
from langgraph_handoff.checkpoint import driver, trust  # noqa: E402
from langgraph_handoff.probe import plan_check  # noqa: E402
from langgraph_handoff.stores import CountingStore, LocalStore  # noqa: E402
from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store  # noqa: E402
from tests.checkpoint.test_request_counts import IN_ORDER, five_nodes  # noqa: E402

HI = {"messages": [{"role": "user", "content": "hi"}]}


def timed(store: CountingStore, fn: Any) -> dict[str, Any]:
    store.reset()
    start = time.perf_counter()
    fn()
    ms = (time.perf_counter() - start) * 1000
    snap = store.snapshot()
    return {"ms": ms, "requests": snap["requests"], "counts": {k: v for k, v in snap.items() if k.isupper()}}


def invoke(saver: ObjectStoreSaver, thread: str) -> None:
    five_nodes().compile(checkpointer=saver).invoke(HI, {"configurable": {"thread_id": thread}, **IN_ORDER})


def one_run(kind: str, bucket: str, endpoint: str | None, tmp: Path) -> dict[str, dict[str, Any]]:
    def make() -> CountingStore:
        if kind == "s3":
            return CountingStore(ObstoreS3Store(bucket, prefix=f"fw-{uuid.uuid4().hex}", endpoint_url=endpoint))
        return CountingStore(LocalStore(tmp / uuid.uuid4().hex))

    out: dict[str, dict[str, Any]] = {}
    store = make()
    saver = ObjectStoreSaver(store)
    out["first_invoke_new_store"] = timed(store, lambda: invoke(saver, "a"))
    out["later_invoke"] = timed(store, lambda: invoke(saver, "b"))
    trust.forget(store)  # a new process on the same (now probed) store
    fresh = ObjectStoreSaver(store)
    out["first_invoke_probed_store"] = timed(store, lambda: invoke(fresh, "c"))
    store.close()
    store = make()
    out["setup_new_store"] = timed(store, ObjectStoreSaver(store).setup)
    store.close()
    store = make()
    out["probe_only"] = timed(store, lambda: driver.run(store, plan_check(repr(store))))
    trust.forget(store)
    store.close()
    return out


def summary(runs: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in runs[0]:
        ms = [r[name]["ms"] for r in runs]
        requests = sorted({r[name]["requests"] for r in runs})
        out[name] = {
            "requests": requests[0] if len(requests) == 1 else requests,
            "counts": runs[0][name]["counts"],
            "ms_median": round(statistics.median(ms), 2),
            "ms_min": round(min(ms), 2),
            "ms_max": round(max(ms), 2),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    endpoint = os.environ.get("S3_ENDPOINT_URL")
    bucket = os.environ.get("LGH_TEST_BUCKET", "lgh-tests")
    figures: dict[str, Any] = {"runs": args.runs}
    with tempfile.TemporaryDirectory(
        prefix="lgh-first-write-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None
    ) as d:
        kinds = ["file"] + (["s3"] if endpoint else [])
        if endpoint:
            ObstoreS3Store(bucket, prefix="fw", endpoint_url=endpoint, create_bucket=True).close()
        for kind in kinds:
            one_run(kind, bucket, endpoint, Path(d))  # warm-up: imports, connections, graph compile
            figures[kind] = summary([one_run(kind, bucket, endpoint, Path(d)) for _ in range(args.runs)])
    text = json.dumps(figures, indent=1)
    print(text)
    (Path(__file__).parent / "first_write-results.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
