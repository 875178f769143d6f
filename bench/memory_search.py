"""What a search of ObjectStoreMemory costs with a semantic index: requests, client CPU and wall
time per search at 1k, 10k and 100k items in one namespace, and what a put costs.

.venv/bin/python bench/memory_search.py                       # memory:// and file://, 1k 10k 100k, e5 at 1k
source /tmp/devrgw.env && .venv/bin/python bench/memory_search.py --backends memory,file,s3
.venv/bin/python bench/memory_search.py --sizes 1000 --quick   # a smoke run

Items are embedded by a cheap deterministic fake (384 numbers from a hash of the text, as large
as the e5 encoder's vectors), so the figures measure the store, not the model; the e5 encoder
is measured at 1k for reference. Items are loaded with 64 PUTs per round trip, as ``put`` would
store them (same bytes; ``put`` also reads the old item first, which the load skips). Then:

* ``cold, no packs``: a new ObjectStoreMemory's first search (the namespace has never been
  searched: every item is read, and packs are written for the next reader);
* ``cold, packs``: another new one (another worker, a restart): the listing and the packs;
* ``warm``: the same one again (median of 5): the listing alone;
* ``after 1 write``: after another worker wrote one item (median of 3);
* ``filter, warm``: a search with a filter and no query (median of 3);
* ``warm, no numpy``: ranking in plain Python (numpy is not a dependency of the package);
* ``put`` / ``put, no index``: per put (mean of 20 new items), with and without embedding.

Requests are counted by CountingStore, CPU is ``time.process_time()`` (every thread of this
process, S3 client threads included; not the S3 server), wall is ``time.perf_counter()``.
Writes bench/memory-search-results.json (every figure) and prints the table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from langchain_core.embeddings import Embeddings  # noqa: E402

from langgraph_handoff._format import keys  # noqa: E402
from langgraph_handoff.memory import ObjectStoreMemory  # noqa: E402
from langgraph_handoff.memory import index as index_module  # noqa: E402
from langgraph_handoff.memory.index import pack_vectors  # noqa: E402
from langgraph_handoff.memory.items import encode_item  # noqa: E402
from langgraph_handoff.stores import CountingStore, LocalStore, MemoryStore, StoreBase  # noqa: E402
from langgraph_handoff.stores.base import Put  # noqa: E402

DIMS = 384
NS = ("bench", "user-1")
WORDS = [
    "email",
    "phone",
    "dog",
    "cat",
    "tea",
    "coffee",
    "rust",
    "python",
    "paris",
    "tokyo",
    "nurse",
    "pilot",
    "morning",
    "evening",
    "refund",
    "order",
]


class FakeEmbeddings(Embeddings):
    """384 numbers from a hash of the text: deterministic, about 60 us a text."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out = []
        for t in texts:
            rng = random.Random(hashlib.blake2b(t.encode(), digest_size=8).digest())
            out.append([rng.random() - 0.5 for _ in range(DIMS)])
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def text_of(i: int) -> str:
    rng = random.Random(i)
    return f"memory {i}: the user " + " ".join(rng.choice(WORDS) for _ in range(8))


def load(store: StoreBase, n: int, embeddings: Embeddings, start: int = 0) -> None:
    """``n`` items as ``put`` stores them, 64 PUTs per round trip."""
    now = datetime.now(timezone.utc).isoformat()
    for lo in range(start, start + n, 64):
        idx = list(range(lo, min(lo + 64, start + n)))
        texts = [text_of(i) for i in idx]
        vectors = embeddings.embed_documents(texts)
        ops = []
        for i, t, v in zip(idx, texts, vectors, strict=True):
            body = {
                "namespace": list(NS),
                "key": f"m{i:06d}",
                "value": {"text": t, "kind": "even" if i % 2 == 0 else "odd"},
                "created_at": now,
                "updated_at": now,
                "ttl": None,
                "expires_at": None,
                "vectors": {"dims": DIMS, "paths": ["text"], "data": pack_vectors([v], DIMS)},
            }
            ops.append(Put(keys.memory_item_key(NS, f"m{i:06d}"), encode_item(body)))
        store.run_many(ops)


def measure(counting: CountingStore, fn: Any) -> dict[str, Any]:
    counting.reset()
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    snap = counting.snapshot()
    return {"requests": snap["requests"], "counts": snap, "cpu_s": cpu, "wall_s": wall}


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(runs[len(runs) // 2])
    out["cpu_s"] = statistics.median(r["cpu_s"] for r in runs)
    out["wall_s"] = statistics.median(r["wall_s"] for r in runs)
    out["runs"] = len(runs)
    return out


def mean_per(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "requests": statistics.mean(r["requests"] for r in runs),
        "counts": runs[0]["counts"],
        "cpu_s": statistics.mean(r["cpu_s"] for r in runs),
        "wall_s": statistics.mean(r["wall_s"] for r in runs),
        "runs": len(runs),
    }


class Backend:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.dir: str | None = None
        self.url: str | None = None

    def fresh(self) -> StoreBase:
        """A new empty store (what the load writes to) of this kind."""
        if self.kind == "memory":
            self.mem = MemoryStore()
            return self.mem
        if self.kind == "file":
            self.dir = tempfile.mkdtemp(prefix="lgh-memory-bench-", dir=os.environ.get("BENCH_DIR"))
            return LocalStore(self.dir, fsync=False)  # the load only; measured clients fsync
        endpoint = os.environ.get("S3_ENDPOINT_URL")
        if not endpoint:
            raise SystemExit("s3 needs S3_ENDPOINT_URL (source /tmp/devrgw.env)")
        bucket = os.environ.get("LGH_TEST_BUCKET", "lgh-tests")
        self.url = f"s3://{bucket}/memory-bench-{uuid.uuid4().hex}?endpoint_url={endpoint}"
        from langgraph_handoff.stores.urls import store_from_url

        return store_from_url(self.url, create_bucket=True)

    def client(self) -> StoreBase:
        """Another client on the same store, as another worker would have."""
        if self.kind == "memory":
            return self.mem
        if self.kind == "file":
            return LocalStore(self.dir)  # type: ignore[arg-type]
        from langgraph_handoff.stores.urls import store_from_url

        return store_from_url(self.url)  # type: ignore[arg-type]

    def cleanup(self, store: StoreBase) -> None:
        try:
            if self.kind == "file" and self.dir:
                shutil.rmtree(self.dir, ignore_errors=True)
            elif self.kind == "s3":
                victims = [i.key for i in store.list("")]
                for lo in range(0, len(victims), 1000):
                    store.delete_many(victims[lo : lo + 1000])
        except Exception as exc:  # noqa: BLE001 - figures matter more than the clean-up
            print(f"  clean-up of {self.kind} failed: {exc}", file=sys.stderr, flush=True)
        store.close()


def run_size(backend: Backend, n: int, embeddings: Embeddings, quick: bool, label: str) -> dict[str, Any]:
    index = {"embed": embeddings, "dims": DIMS, "fields": ["text"]}
    loader = backend.fresh()
    t0 = time.perf_counter()
    load(loader, n, embeddings)
    print(f"  [{label} {backend.kind} {n}] loaded in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    query = "which pet does the user have, a dog or a cat?"
    out: dict[str, Any] = {"items": n}

    def new_memory() -> tuple[ObjectStoreMemory, CountingStore]:
        counting = CountingStore(backend.client())
        return ObjectStoreMemory(counting, index=index), counting  # type: ignore[arg-type]

    first, c1 = new_memory()
    out["cold, no packs"] = measure(c1, lambda: first.search(NS, query=query, limit=10))
    reader, c2 = new_memory()
    out["cold, packs"] = measure(c2, lambda: reader.search(NS, query=query, limit=10))
    out["warm"] = median_of([measure(c2, lambda: reader.search(NS, query=query, limit=10)) for _ in range(5)])
    writer, _ = new_memory()
    after = []
    for r in range(1 if quick else 3):
        writer.put(NS, f"new{r}", {"text": text_of(10_000_000 + r), "kind": "new"})
        after.append(measure(c2, lambda: reader.search(NS, query=query, limit=10)))
    out["after 1 write"] = median_of(after)
    out["filter, warm"] = median_of(
        [measure(c2, lambda: reader.search(NS, filter={"kind": "even"}, limit=10)) for _ in range(3)]
    )
    if label == "fake" and (n <= 10_000 or backend.kind == "memory"):
        plain, c3 = new_memory()
        plain.search(NS, query=query, limit=10)  # warm this one's cache (tables are built per process)
        real = index_module.numpy_available
        index_module.numpy_available = lambda: False  # type: ignore[assignment]
        try:
            plain._cache.clear()
            plain.search(NS, query=query, limit=10)
            out["warm, no numpy"] = median_of(
                [measure(c3, lambda: plain.search(NS, query=query, limit=10)) for _ in range(3)]
            )
        finally:
            index_module.numpy_available = real  # type: ignore[assignment]
    puts, plain_puts = [], []
    for i in range(5 if quick else 20):
        text = f"{text_of(20_000_000 + i)} ({backend.kind})"  # new to the encoder's cache in every run
        puts.append(measure(c2, lambda i=i, t=text: reader.put(NS, f"p{i}", {"text": t})))
        plain_puts.append(measure(c2, lambda i=i, t=text: reader.put(NS, f"q{i}", {"text": t}, index=False)))
    out["put"] = mean_per(puts)
    out["put, no index"] = mean_per(plain_puts)
    packs = [i for i in loader.list(keys.memory_namespace_prefix(NS) + keys.MEMORY_PACKS + "/")]
    out["packs"] = {"count": len(packs), "bytes": sum(i.size for i in packs)}
    backend.cleanup(loader)
    return out


def fmt(m: dict[str, Any]) -> str:
    counts = {k: v for k, v in m["counts"].items() if k not in ("requests", "round_trips")}
    detail = " ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    return f"{m['requests']:g} ({detail}) | {m['cpu_s'] * 1000:,.1f} | {m['wall_s'] * 1000:,.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="memory,file")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--no-e5", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("memory-search-results.json"))
    parser.add_argument("--append", action="store_true", help="keep the other runs of --out (replace same ones)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = {"runs": []}
    if args.append and args.out.exists():
        results = json.loads(args.out.read_text())
    results.update(
        date=datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        machine=f"{platform.machine()} {os.cpu_count()} cores, {platform.python_version()}",
        numpy=index_module.numpy_available(),
    )
    fake = FakeEmbeddings()
    e5: Any = None  # one encoder for every store: the loads after the first reuse its cache

    def record(kind: str, embedder: str, run: dict[str, Any]) -> None:
        """Each run is written as soon as it is done (a later failure keeps the figures)."""
        run = {"backend": kind, "embedder": embedder, **run}
        results["runs"] = [
            r for r in results["runs"] if (r["backend"], r["embedder"], r["items"]) != (kind, embedder, run["items"])
        ] + [run]
        args.out.write_text(json.dumps(results, indent=1) + "\n")

    for kind in args.backends.split(","):
        for n in sizes:
            load_before = os.getloadavg()
            run = run_size(Backend(kind), n, fake, args.quick, "fake")
            record(kind, "fake", {**run, "load_average": [load_before, os.getloadavg()]})
        if not args.no_e5:
            from langgraph_handoff.memory import e5_embeddings

            e5 = e5 or e5_embeddings()
            load_before = os.getloadavg()
            run = run_size(Backend(kind), 1000, e5, args.quick, "e5")
            record(kind, "e5", {**run, "load_average": [load_before, os.getloadavg()]})

    order = {"memory": 0, "file": 1, "s3": 2}
    results["runs"].sort(key=lambda r: (order.get(r["backend"], 9), r["embedder"] != "fake", r["items"]))
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"{results['date']}, {results['machine']}, numpy {results['numpy']}")
    print("| store | embedder | items | search | requests | client CPU ms | wall ms |")
    print("|---|---|---|---|---|---|---|")
    for run in results["runs"]:
        for name in (
            "cold, no packs",
            "cold, packs",
            "warm",
            "after 1 write",
            "filter, warm",
            "warm, no numpy",
            "put",
            "put, no index",
        ):
            if name in run:
                print(f"| {run['backend']} | {run['embedder']} | {run['items']:,} | {name} | {fmt(run[name])} |")
        print(
            f"| {run['backend']} | {run['embedder']} | {run['items']:,} | packs | {run['packs']['count']} objects, {run['packs']['bytes'] / 1e6:.1f} MB | | |"
        )


if __name__ == "__main__":
    main()
