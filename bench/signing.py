"""What signing costs: CPU per put and per cold read, with and without a signing key.

Two savers on the same kind of store run the same chat turns in lockstep (one turn each, in
alternating order), so a drift of the machine's speed falls on both alike. Reported per store
(``memory://``, ``file://``, and S3 when ``S3_ENDPOINT_URL`` is set, e.g. after ``source
/tmp/devrgw.env``): the median CPU of a put (a LangGraph checkpoint of a growing chat, its pending
writes beside it), of a cold ``get_tuple`` (a new saver, nothing cached), the ratio signed /
unsigned, and the keyed-BLAKE2b cost per KiB measured alone.

    .venv/bin/python bench/signing.py [--turns 200]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langgraph.graph import START, MessagesState, StateGraph

from langgraph_handoff import LocalStore, MemoryStore, ObjectStoreSaver
from langgraph_handoff.stores import StoreBase
from tests.support.signing_helpers import keys_of


class TimedPuts(ObjectStoreSaver):
    """Records the thread CPU of every ``put``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.put_cpu: list[float] = []

    def put(self, *args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return super().put(*args, **kwargs)
        finally:
            self.put_cpu.append(time.thread_time() - start)


def _graph(saver: ObjectStoreSaver) -> Any:
    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [("ai", f"answer {len(state['messages'])}: " + "words of an answer " * 30)]}

    return StateGraph(MessagesState).add_node(answer).add_edge(START, "answer").compile(checkpointer=saver)


def _stores(tmp: Path) -> dict[str, tuple[StoreBase, StoreBase]]:
    out: dict[str, tuple[StoreBase, StoreBase]] = {
        "memory://": (MemoryStore(), MemoryStore()),
        "file://": (LocalStore(tmp / "plain"), LocalStore(tmp / "signed")),
    }
    if os.environ.get("S3_ENDPOINT_URL"):
        from langgraph_handoff.stores import S3Store

        def s3(prefix: str) -> StoreBase:
            return S3Store(
                "bench-signing", prefix=prefix, endpoint_url=os.environ["S3_ENDPOINT_URL"], create_bucket=True
            )

        stamp = int(time.time())
        out["s3://"] = (s3(f"plain-{stamp}"), s3(f"signed-{stamp}"))
    return out


def _run(store_name: str, plain: StoreBase, signed: StoreBase, turns: int) -> dict[str, Any]:
    savers = {"unsigned": TimedPuts(plain), "signed": TimedPuts(signed, signing_key=keys_of("k1"))}
    graphs = {name: _graph(saver) for name, saver in savers.items()}
    reads: dict[str, list[float]] = {name: [] for name in savers}
    for turn in range(turns):
        order = list(graphs) if turn % 2 else list(reversed(graphs))
        for name in order:
            graphs[name].invoke({"messages": [("user", f"question {turn}")]}, {"configurable": {"thread_id": "t"}})
            if turn % 10 == 9:
                cold = ObjectStoreSaver(savers[name].store)  # a new process's first read (keys as stored)
                start = time.thread_time()
                cold.get_tuple({"configurable": {"thread_id": "t"}})
                reads[name].append(time.thread_time() - start)
    out: dict[str, Any] = {"store": store_name, "turns": turns}
    for name, saver in savers.items():
        out[f"{name}_put_us"] = round(statistics.median(saver.put_cpu) * 1e6, 1)
        out[f"{name}_cold_read_us"] = round(statistics.median(reads[name]) * 1e6, 1)
    out["put_ratio"] = round(out["signed_put_us"] / out["unsigned_put_us"], 3)
    out["cold_read_ratio"] = round(out["signed_cold_read_us"] / out["unsigned_cold_read_us"], 3)
    return out


def _mac_per_kib() -> float:
    data = os.urandom(1 << 20)
    key = b"k" * 32
    start = time.perf_counter()
    for _ in range(50):
        hashlib.blake2b(data, key=key, digest_size=32, person=b"lgh-signed-v1").digest()
    return (time.perf_counter() - start) / 50 / 1024 * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (plain, signed) in _stores(Path(tmp)).items():
            rows.append(_run(name, plain, signed, args.turns))
    mac = round(_mac_per_kib(), 3)
    print(
        f"signing: median CPU per put and per cold get_tuple, {args.turns} turns of a chat ({time.strftime('%Y-%m-%d %H:%M')})"
    )
    print("| store | put, unsigned | put, signed | ratio | cold read, unsigned | cold read, signed | ratio |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['store']} | {r['unsigned_put_us']} µs | {r['signed_put_us']} µs | {r['put_ratio']}x "
            f"| {r['unsigned_cold_read_us']} µs | {r['signed_cold_read_us']} µs | {r['cold_read_ratio']}x |"
        )
    print(f"keyed BLAKE2b alone: {mac} µs per KiB")
    print(json.dumps({"rows": rows, "mac_us_per_kib": mac}))


if __name__ == "__main__":
    main()
