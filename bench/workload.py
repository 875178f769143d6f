#!/usr/bin/env python3
"""Benchmark worker: runs the identical workload for ONE saver variant and writes a JSON result.

Each variant runs in its own process, in the venv its package needs (bench.py picks it), so
peers with conflicting pins never share an interpreter. S3 requests are not counted here: the
worker only names the current phase at the counting proxy (``/__bench/phase``) and the proxy
counts what arrives on the wire. Stored bytes are measured with a separate boto3 client that
talks to the S3 server directly, so the measurement itself is never counted.

Workload (the peer survey's, so numbers stay comparable): a StateGraph whose ``messages`` channel
is ``Annotated[list, operator.add]``, 5 nodes in sequence each appending one ~120-byte dict;
N threads x 1 ``invoke`` (default durability), then ``get_state`` and ``list(get_state_history)``
on each thread. LangGraph makes 1 get_tuple + 7 put + 6 put_writes per invoke; the wrappers
installed by :func:`count_calls` record that, as a check that every saver saw the same calls.

Usage: python workload.py --variant NAME --proxy URL --direct URL --run-id ID --out FILE
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import operator
import os
import random
import shutil
import sqlite3
import string
import sys
import tempfile
import time
import traceback
import urllib.parse
import urllib.request
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, TypedDict

VARIANTS = {
    # name: (venv, api, short description)
    "handoff-s3": ("main", "sync", "langgraph-handoff ObjectStoreSaver + S3Store"),
    "handoff-s3-async": ("main", "async", "langgraph-handoff ObjectStoreSaver + S3Store, async API"),
    "handoff-local": ("main", "sync", "langgraph-handoff ObjectStoreSaver + LocalStore (temp dir)"),
    "inmemory": ("main", "sync", "InMemorySaver (reference)"),
    "sqlite": ("main", "sync", "SqliteSaver on a temp file (reference)"),
    "objectstorage": ("main", "sync", "langgraph-checkpoint-objectstorage over s3fs"),
    "s3-peer": ("aio", "sync", "langgraph-checkpoint-s3 S3CheckpointSaver, as shipped"),
    "s3-peer+shim": ("aio", "sync", "langgraph-checkpoint-s3 S3CheckpointSaver + serde shim (adds dumps/loads)"),
}
PACKAGES = {
    "main": [
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-handoff",
        "langgraph-checkpoint-sqlite",
        "langgraph-checkpoint-objectstorage",
        "s3fs",
        "boto3",
        "botocore",
    ],
    "aio": ["langgraph", "langgraph-checkpoint", "langgraph-checkpoint-s3", "aioboto3", "boto3", "botocore"],
}
REGION = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
MESSAGE_FILLER = "lorem ipsum " * 8  # with the other fields: ~120 bytes per message dict


# ------------------------------------------------------------------------------------------------
# graph and workload
# ------------------------------------------------------------------------------------------------


class State(TypedDict):
    messages: Annotated[list, operator.add]


def build_graph(saver, payload=None, async_nodes: bool = False, wait: float = 0.0):
    """5 nodes in sequence; each appends one message (``payload(i)`` decides its content).

    ``async_nodes``: the same nodes as ``async def``, for ``ainvoke`` workloads, so LangGraph runs
    them on the event loop instead of handing each to a thread (the graph's own cost then stays the
    same whatever the saver does with threads). ``wait``: seconds each async node sleeps first,
    as an LLM call would (``tls_idle.py``)."""
    from langgraph.graph import END, START, StateGraph

    def make_node(i: int):
        def node(state: State) -> dict:
            content = payload(i) if payload else f"node {i} after {len(state['messages'])}: {MESSAGE_FILLER}"
            return {"messages": [{"role": "assistant", "name": f"n{i}", "content": content}]}

        async def anode(state: State) -> dict:
            if wait:
                await asyncio.sleep(wait)
            return node(state)

        return anode if async_nodes else node

    builder = StateGraph(State)
    prev = START
    for i in range(1, 6):
        builder.add_node(f"n{i}", make_node(i))
        builder.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    builder.add_edge(prev, END)
    return builder.compile(checkpointer=saver)


def take_option(argv: list[str], flag: str) -> str | None:
    """Remove ``flag VALUE`` from ``argv`` and return VALUE (None when absent), for the bench
    scripts that pass the rest of their arguments on (``--cprofile FILE``)."""
    if flag not in argv:
        return None
    i = argv.index(flag)
    value = argv[i + 1]
    del argv[i : i + 2]
    return value


def cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def user_msg(i: Any) -> dict:
    return {"messages": [{"role": "user", "content": f"hello from thread {i}"}]}


CALLS: Counter[str] = Counter()
SAVER_METHODS = ("get_tuple", "put", "put_writes", "list", "aget_tuple", "aput", "aput_writes", "alist")


def count_calls(saver) -> None:
    """Count the saver calls LangGraph makes (instance attributes shadow the class methods)."""
    for name in SAVER_METHODS:
        original = getattr(saver, name)

        def wrapped(*args, _name=name, _original=original, **kwargs):
            CALLS[_name] += 1
            return _original(*args, **kwargs)

        setattr(saver, name, wrapped)


class Recorder:
    """Names phases at the proxy, times them, keeps failures (a failing phase never hides)."""

    def __init__(self, variant: str, proxy: str | None) -> None:
        self.variant, self.proxy = variant, proxy
        self.phases: dict[str, dict] = {}

    def _mark(self, name: str) -> None:
        if self.proxy:
            url = f"{self.proxy}/__bench/phase?name={urllib.parse.quote(f'{self.variant}|{name}')}"
            urllib.request.urlopen(url, timeout=10).read()

    @contextlib.contextmanager
    def phase(self, name: str):
        self._mark(name)
        CALLS.clear()
        rec: dict[str, Any] = {}
        t0 = time.perf_counter()
        try:
            yield rec
            rec["ok"] = True
        except Exception as exc:  # noqa: BLE001 - a peer failure is a result, not a crash
            rec["ok"] = False
            rec["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            rec["raised_at"] = f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno} ({frame.line})"
        finally:
            rec["wall_s"] = round(time.perf_counter() - t0, 4)
            if CALLS:
                rec["saver_calls"] = dict(CALLS)
            self.phases[name] = rec
            self._mark("idle")


def run_sync(graph, rec: Recorder, n: int) -> None:
    with rec.phase("invoke") as r:
        for t in range(n):
            r["threads_done"] = t
            graph.invoke(user_msg(t), cfg(f"bench-{t}"))
        r["threads_done"] = n
    if not rec.phases["invoke"]["ok"]:
        return
    with rec.phase("get_state") as r:
        r["messages_per_thread"] = sorted(
            {len(graph.get_state(cfg(f"bench-{t}")).values["messages"]) for t in range(n)}
        )
    with rec.phase("history") as r:
        r["checkpoints_per_thread"] = sorted({len(list(graph.get_state_history(cfg(f"bench-{t}")))) for t in range(n)})


async def run_async(graph, rec: Recorder, n: int) -> None:
    with rec.phase("invoke") as r:
        for t in range(n):
            r["threads_done"] = t
            await graph.ainvoke(user_msg(t), cfg(f"bench-{t}"))
        r["threads_done"] = n
    if not rec.phases["invoke"]["ok"]:
        return
    with rec.phase("get_state") as r:
        lens = set()
        for t in range(n):
            lens.add(len((await graph.aget_state(cfg(f"bench-{t}"))).values["messages"]))
        r["messages_per_thread"] = sorted(lens)
    with rec.phase("history") as r:
        hist = set()
        for t in range(n):
            hist.add(len([s async for s in graph.aget_state_history(cfg(f"bench-{t}"))]))
        r["checkpoints_per_thread"] = sorted(hist)


LARGE_SIZES_KIB = (50, 100)  # per node: ~256 KiB final state (the brief's case) and ~512 KiB


def run_large(saver, rec: Recorder, kib: int) -> dict:
    """One thread whose state grows by 5 nodes x ``kib`` KiB of incompressible text, then one small
    update_state on top of it: does a small step re-upload the whole state? The ~256 KiB case sits
    just below the saver's default 256 KiB blob threshold, the ~512 KiB case above it."""
    rng = random.Random(kib)
    alphabet = string.ascii_letters + string.digits
    graph = build_graph(saver, payload=lambda i: "".join(rng.choices(alphabet, k=kib * 1024)))
    tag = f"large-{kib}k"
    out: dict[str, Any] = {"tag": tag, "kib_per_node": kib}
    with rec.phase(f"{tag}:invoke"):
        graph.invoke(user_msg("large"), cfg(tag))
    with rec.phase(f"{tag}:update_state"):
        graph.update_state(cfg(tag), {"messages": [{"role": "user", "content": "one more small message"}]})
    with rec.phase(f"{tag}:get_state") as r:
        values = graph.get_state(cfg(tag)).values
        r["messages"] = len(values["messages"])
        out["state_bytes"] = len(saver.serde.dumps_typed(values["messages"])[1])
    return out


# ------------------------------------------------------------------------------------------------
# storage measurements (never through the proxy)
# ------------------------------------------------------------------------------------------------


def direct_s3(direct: str):
    import boto3

    return boto3.client("s3", endpoint_url=direct, region_name=REGION)


def ensure_bucket(s3, bucket: str) -> None:
    try:
        s3.head_bucket(Bucket=bucket)
    except Exception:  # noqa: BLE001
        s3.create_bucket(Bucket=bucket)


def s3_usage(s3, bucket: str, prefix: str) -> dict:
    objects = size = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            objects += 1
            size += obj["Size"]
    return {"objects": objects, "bytes": size}


def s3_delete_prefix(s3, bucket: str, prefix: str) -> None:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


def dir_usage(root: Path) -> dict:
    objects = size = blocks = 0
    for path in root.rglob("*"):
        if path.is_file():
            st = path.stat()
            blocks += st.st_blocks * 512
            if not any(part.startswith(".") for part in path.relative_to(root).parts):
                objects += 1
                size += st.st_size
    return {"objects": objects, "bytes": size, "allocated_bytes_incl_lock_files": blocks}


def payload_bytes(obj: Any) -> int:
    """Bytes held by InMemorySaver: the serialized (type, bytes) values in its dicts."""
    if isinstance(obj, (bytes, bytearray)):
        return len(obj)
    if isinstance(obj, dict):
        return sum(payload_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(payload_bytes(v) for v in obj)
    return 0


def sqlite_usage(path: str) -> dict:
    file_bytes = sum(os.path.getsize(path + s) for s in ("", "-wal", "-shm") if os.path.exists(path + s))
    con = sqlite3.connect(path)
    cp = con.execute(
        "select count(*), coalesce(sum(length(checkpoint) + length(metadata)), 0) from checkpoints"
    ).fetchone()
    wr = con.execute("select count(*), coalesce(sum(length(value)), 0) from writes").fetchone()
    con.close()
    return {"rows": cp[0] + wr[0], "bytes": cp[1] + wr[1], "db_file_bytes": file_bytes}


# ------------------------------------------------------------------------------------------------
# savers
# ------------------------------------------------------------------------------------------------


def make_serde_shim():
    """langgraph-checkpoint-s3 0.1.3 calls ``serde.dumps``/``serde.loads`` for metadata, which
    langgraph-checkpoint 4.x's JsonPlusSerializer no longer has. This adds exactly that pair on top
    of the msgpack encoding of ``dumps_typed``; nothing else of the peer is changed."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    class DumpsLoadsShim(JsonPlusSerializer):
        def dumps(self, obj: Any) -> bytes:
            kind, data = self.dumps_typed(obj)
            if kind != "msgpack":
                raise TypeError(f"shim only handles msgpack values, got {kind}")
            return data

        def loads(self, data: bytes) -> Any:
            return self.loads_typed(("msgpack", data))

    return DumpsLoadsShim()


class Setup:
    """Builds the saver of a variant and knows how to measure (and clean up) what it stored."""

    def __init__(self, variant: str, proxy: str, direct: str, run_id: str) -> None:
        self.variant, self.proxy, self.direct, self.run_id = variant, proxy, direct, run_id
        self.bucket = "bench-" + variant.replace("+", "-")
        self.prefix = f"{run_id}/workload"
        self.tmp = tempfile.mkdtemp(prefix=f"bench-{variant}-")
        self.s3 = direct_s3(direct) if direct else None

    def make(self, part: str = "workload"):
        v, prefix = self.variant, f"{self.run_id}/{part}"
        if v.startswith("handoff-s3"):
            from langgraph_handoff import ObjectStoreSaver, S3Store

            return ObjectStoreSaver(
                S3Store(self.bucket, prefix=prefix, endpoint_url=self.proxy, region_name=REGION, create_bucket=True)
            )
        if v == "handoff-local":
            from langgraph_handoff import LocalStore, ObjectStoreSaver

            return ObjectStoreSaver(LocalStore(os.path.join(self.tmp, part)))
        if v == "inmemory":
            from langgraph.checkpoint.memory import InMemorySaver

            return InMemorySaver()
        if v == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            self.db = os.path.join(self.tmp, f"{part}.db")
            return SqliteSaver(sqlite3.connect(self.db, check_same_thread=False))
        if v == "objectstorage":
            from langgraph_checkpoint_objectstorage import ObjectStorageSaver

            return ObjectStorageSaver.from_conn_string(
                f"s3://{self.bucket}/{prefix}",
                key=os.environ["AWS_ACCESS_KEY_ID"],
                secret=os.environ["AWS_SECRET_ACCESS_KEY"],
                client_kwargs={"endpoint_url": self.proxy, "region_name": REGION},
            )
        if v.startswith("s3-peer"):
            import boto3
            from langgraph_checkpoint_s3 import S3CheckpointSaver

            kwargs = {"serde": make_serde_shim()} if v.endswith("+shim") else {}
            client = boto3.client("s3", endpoint_url=self.proxy, region_name=REGION)
            return S3CheckpointSaver(self.bucket, prefix=prefix + "/", s3_client=client, **kwargs)
        raise SystemExit(f"unknown variant {v}")

    def prepare(self) -> None:
        if self.s3 and self.uses_s3:
            ensure_bucket(self.s3, self.bucket)

    @property
    def uses_s3(self) -> bool:
        return self.variant.startswith(("handoff-s3", "objectstorage", "s3-peer"))

    def usage(self, saver, part: str = "workload") -> dict:
        if self.uses_s3:
            return s3_usage(self.s3, self.bucket, f"{self.run_id}/{part}/")
        if self.variant == "handoff-local":
            return dir_usage(Path(self.tmp, part))
        if self.variant == "inmemory":
            return {"bytes": payload_bytes([saver.storage, saver.writes, saver.blobs])}
        if self.variant == "sqlite":
            return sqlite_usage(self.db)
        return {}

    def cleanup(self) -> None:
        if self.uses_s3:
            s3_delete_prefix(self.s3, self.bucket, f"{self.run_id}/")
        shutil.rmtree(self.tmp, ignore_errors=True)


def installed_versions(packages: list[str] | tuple[str, ...]) -> dict:
    """Python's version and each installed package's (the missing ones left out)."""
    out = {"python": sys.version.split()[0]}
    for pkg in packages:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


def versions(venv: str) -> dict:
    return installed_versions(PACKAGES[venv])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    ap.add_argument("--proxy", default="", help="counting proxy URL (the S3 endpoint the savers use)")
    ap.add_argument("--direct", default="", help="S3 server URL, for measuring stored bytes")
    ap.add_argument("--run-id", default=time.strftime("run-%Y%m%d-%H%M%S"))
    ap.add_argument("--threads", type=int, default=50)
    ap.add_argument("--large", action="store_true", help="also run the large-state extra (LARGE_SIZES_KIB)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    venv, api, description = VARIANTS[a.variant]
    setup = Setup(a.variant, a.proxy, a.direct, a.run_id)
    rec = Recorder(a.variant, a.proxy if setup.uses_s3 else None)
    result: dict[str, Any] = {
        "variant": a.variant,
        "venv": venv,
        "api": api,
        "description": description,
        "threads": a.threads,
        "versions": versions(venv),
    }
    saver = None
    try:
        setup.prepare()
        with rec.phase("setup"):
            saver = setup.make()
        if saver is not None:
            count_calls(saver)
            graph = build_graph(saver)
            if api == "sync":
                run_sync(graph, rec, a.threads)
            else:
                asyncio.run(run_async(graph, rec, a.threads))
            with rec.phase("usage") as r:
                r.update(setup.usage(saver))
            result["usage"] = rec.phases.pop("usage")
            if a.large:
                result["large"] = []
                for kib in LARGE_SIZES_KIB:
                    with rec.phase(f"large-{kib}k:setup"):
                        large_saver = setup.make(f"large-{kib}k")
                    count_calls(large_saver)
                    large = run_large(large_saver, rec, kib)
                    large["usage"] = setup.usage(large_saver, f"large-{kib}k")
                    result["large"].append(large)
    finally:
        with contextlib.suppress(Exception):
            setup.cleanup()
    result["phases"] = rec.phases
    Path(a.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
