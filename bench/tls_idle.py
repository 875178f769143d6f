#!/usr/bin/env python3
"""TLS connections and slow nodes: the client CPU of an async invoke whose nodes wait like LLM
calls, per S3 path and idle limit (issue 26, item 5).

The loop client (``async_io="loop"``) closed connections idle for 4 s, and a new TLS
connection costs it about 1.5 ms of CPU (asyncio cannot resume a TLS session). An agent whose
nodes wait 5-10 s between saver calls then reconnected at nearly every step. This bench puts a
TLS-terminating proxy (a child process, so its CPU is not the client's) in front of an S3
server, and runs the 5-node graph of ``workload.py`` with async nodes that each sleep
``--wait`` seconds, on:

* ``loop-4s``: the loop client with the old 4 s idle limit;
* ``loop-15s``: the loop client with the default 15 s limit;
* ``threads``: obstore's own client (rustls) in the store's threads (``async_io="threads"``).

It prints client CPU per invoke (``time.process_time``, every thread of the process) and the
TLS connections the loop client opened. Needs an S3 server (``S3_ENDPOINT_URL``, e.g. the RGW of
``scripts/ceph-rgw-start.sh``) and ``openssl`` for the throw-away certificate.

Usage: ``.venv/bin/python bench/tls_idle.py [--wait 6] [--invokes 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _certificate(workdir: Path) -> tuple[Path, Path]:
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _proxy_main(port_file: str, cert: str, key: str, upstream: str) -> None:
    """The TLS terminator: accept TLS on a free port, pipe bytes to the plain upstream."""
    host, _, port = upstream.removeprefix("http://").partition(":")

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(host, int(port or 80))
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def serve() -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
        Path(port_file).write_text(str(server.sockets[0].getsockname()[1]))
        await server.serve_forever()

    asyncio.run(serve())


async def _run(variant: str, endpoint: str, wait: float, invokes: int) -> dict:
    from workload import build_graph, cfg, user_msg

    from langgraph_handoff import ObjectStoreSaver
    from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store

    async_io = "threads" if variant == "threads" else "loop"
    idle = {"loop-4s": "4s", "loop-15s": "15s"}.get(variant, "15s")
    store = ObstoreS3Store("tls-idle", prefix=f"{variant}-{time.time_ns()}", endpoint_url=endpoint,
                           async_io=async_io, idle_timeout=idle)  # fmt: skip
    if variant == "threads":
        # obstore's rustls trusts its own built-in roots, not SSL_CERT_FILE: accept the throw-away
        # certificate (verification is once per connection; the figure compares reconnects)
        store._settings[3]["allow_invalid_certificates"] = True
        store._clients = store._build_clients()
    saver = ObjectStoreSaver(store)
    graph = build_graph(saver, async_nodes=True, wait=wait)
    await graph.ainvoke(user_msg("warm"), cfg("warm"))
    opened = store._wire.pool.opened if store._wire is not None else None
    c0, w0 = time.process_time(), time.perf_counter()
    for i in range(invokes):
        await graph.ainvoke(user_msg(i), cfg(f"t{i}"))
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    new = store._wire.pool.opened - opened if store._wire is not None and opened is not None else None
    await store.aclose()
    return {
        "variant": variant,
        "cpu_ms_per_invoke": round(cpu / invokes * 1000, 2),
        "wall_s_per_invoke": round(wall / invokes, 1),
        "tls_connections_per_invoke": None if new is None else round(new / invokes, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wait", type=float, default=6.0, help="seconds each node waits (an LLM call)")
    ap.add_argument("--invokes", type=int, default=3)
    ap.add_argument("--variants", default="loop-4s,loop-15s,threads")
    a = ap.parse_args()
    upstream = os.environ.get("S3_ENDPOINT_URL")
    if not upstream:
        sys.exit("set S3_ENDPOINT_URL (e.g. source the env file scripts/ceph-rgw-start.sh prints)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cert, key = _certificate(work)
        port_file = work / "port"
        proxy = subprocess.Popen([sys.executable, __file__, "--proxy", str(port_file), str(cert), str(key), upstream])
        try:
            while not port_file.exists() or not port_file.read_text():
                if proxy.poll() is not None:
                    sys.exit("the TLS proxy did not start")
                time.sleep(0.05)
            endpoint = f"https://127.0.0.1:{port_file.read_text()}"
            import boto3

            with contextlib.suppress(Exception):  # exists already
                boto3.client("s3", endpoint_url=upstream, region_name="us-east-1").create_bucket(Bucket="tls-idle")
            os.environ["AWS_CA_BUNDLE"] = str(cert)  # the loop client trusts it (as boto3 would)
            print(f"# {a.invokes} async invokes of the 5-node graph, each node waiting {a.wait:g} s, over TLS")
            print("| path | client CPU ms per invoke | TLS connections opened per invoke (loop client) | wall s |")
            print("|---|---|---|---|")
            for variant in a.variants.split(","):
                r = asyncio.run(_run(variant, endpoint, a.wait, a.invokes))
                print(f"| {variant} | {r['cpu_ms_per_invoke']} | {r['tls_connections_per_invoke']} "
                      f"| {r['wall_s_per_invoke']} |", flush=True)  # fmt: skip
        finally:
            proxy.terminate()
            proxy.wait()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--proxy":
        _proxy_main(*sys.argv[2:6])
    else:
        main()
