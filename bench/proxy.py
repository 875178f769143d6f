#!/usr/bin/env python3
"""Counting reverse proxy for S3: every request any saver sends is counted on the wire.

Why a proxy: the savers use three different S3 clients (boto3, aioboto3, s3fs/aiobotocore).
Counting inside a client would miss requests or count them differently per library; counting in
front of the server sees exactly what reaches it, the same way for everyone.

* Listens on 127.0.0.1, forwards to one upstream S3 endpoint (Ceph RGW). Method, path, query,
  headers (including ``Host``, so SigV4 signatures still verify) and body are sent verbatim; a
  chunked request body is forwarded as the same raw chunks. One keep-alive upstream connection per
  client connection.
* Each request is classified as an S3 operation (path-style addressing, which is what botocore
  uses for an IP endpoint) and counted under the current *phase*; answers >= 300 are counted again
  under ``errors``. Request/response body bytes and upstream time are summed per phase.
* Control endpoints (never forwarded): ``GET /__bench/phase?name=X`` sets the phase,
  ``GET /__bench/counts`` returns everything as JSON.
* ``--delay-ms N`` (default 0) waits N ms before forwarding each S3 request, to stand for the
  round trip to a cloud region. The wait happens in the thread serving that client connection, so
  requests on different connections are delayed side by side, never one after another. The wait is
  summed per phase as ``delay_seconds``, apart from ``upstream_seconds`` (time in the server).

Usage: ``python proxy.py --upstream http://127.0.0.1:7480 [--port 0] [--delay-ms 0]``; prints
``READY <port>``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import sys
import threading
import time
import urllib.parse
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade", "te", "trailer"}
BUCKET_SUBRESOURCES = (
    "acl",
    "cors",
    "lifecycle",
    "location",
    "logging",
    "notification",
    "object-lock",
    "policy",
    "replication",
    "tagging",
    "versioning",
    "website",
    "encryption",
    "ownershipControls",
    "uploads",
    "versions",
    "publicAccessBlock",
)


def classify(method: str, target: str, headers) -> str:
    """Name the S3 API operation of one request (path-style: ``/bucket/key?query``)."""
    parsed = urllib.parse.urlsplit(target)
    qs = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
    bucket, _, key = parsed.path.lstrip("/").partition("/")
    if not bucket:
        return "ListBuckets" if method == "GET" else f"{method} /"
    if key:
        if method == "GET":
            return "GetObject"
        if method == "HEAD":
            return "HeadObject"
        if method == "PUT":
            if headers.get("x-amz-copy-source"):
                return "UploadPartCopy" if "partNumber" in qs else "CopyObject"
            if "partNumber" in qs:
                return "UploadPart"
            if "tagging" in qs:
                return "PutObjectTagging"
            if headers.get("If-None-Match") is not None:
                return "PutObject(If-None-Match)"
            if headers.get("If-Match") is not None:
                return "PutObject(If-Match)"
            return "PutObject"
        if method == "POST":
            if "uploads" in qs:
                return "CreateMultipartUpload"
            if "uploadId" in qs:
                return "CompleteMultipartUpload"
        if method == "DELETE":
            if "uploadId" in qs:
                return "AbortMultipartUpload"
            return "DeleteObject(If-Match)" if headers.get("If-Match") is not None else "DeleteObject"
        return f"{method} object?{'&'.join(sorted(qs))}"
    sub = next((s for s in BUCKET_SUBRESOURCES if s in qs), None)
    if method == "GET":
        if qs.get("list-type") == ["2"]:
            return "ListObjectsV2"
        return f"GetBucket({sub})" if sub else "ListObjects"
    if method == "HEAD":
        return "HeadBucket"
    if method == "POST" and "delete" in qs:
        return "DeleteObjects"
    if method == "PUT":
        return f"PutBucket({sub or ','.join(sorted(qs))})" if qs else "CreateBucket"
    if method == "DELETE":
        return f"DeleteBucket({sub})" if sub else "DeleteBucket"
    return f"{method} bucket?{'&'.join(sorted(qs))}"


class Counter:
    """Counts per phase; one lock, since ThreadingHTTPServer serves each connection in a thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.phase = "unassigned"
        self.counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.errors: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def record(
        self, phase: str, op: str, status: int, sent: int, received: int, seconds: float, delay: float = 0.0
    ) -> None:
        with self.lock:
            self.counts[phase][op] += 1
            if status >= 300:
                self.errors[phase][f"{op} -> {status}"] += 1
            t = self.totals[phase]
            t["request_body_bytes"] += sent
            t["response_body_bytes"] += received
            t["upstream_seconds"] += seconds
            if delay:
                t["delay_seconds"] += delay

    def dump(self) -> dict:
        with self.lock:
            return {
                "counts": {p: dict(v) for p, v in self.counts.items()},
                "errors": {p: dict(v) for p, v in self.errors.items()},
                "totals": {p: {k: round(x, 4) for k, x in v.items()} for p, v in self.totals.items()},
            }


COUNTER = Counter()
UPSTREAM: tuple[str, int] = ("127.0.0.1", 7480)
DELAY_S = 0.0  # --delay-ms, in seconds


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive towards the clients
    # Nagle + the client's delayed ACK would stall every answer by ~40 ms; each answer is also
    # written with one send (see _reply). http.client sets TCP_NODELAY upstream by itself.
    disable_nagle_algorithm = True

    def log_message(self, *args) -> None:  # quiet
        pass

    def _upstream(self) -> http.client.HTTPConnection:
        conn = getattr(self, "_conn", None)
        if conn is None:
            conn = self._conn = http.client.HTTPConnection(*UPSTREAM, timeout=120)
        return conn

    def _read_body(self) -> bytes:
        """The request body exactly as sent (raw chunks stay raw chunks)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raw = bytearray()
            while True:
                line = self.rfile.readline()
                raw += line
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers, up to the empty line
                        t = self.rfile.readline()
                        raw += t
                        if t in (b"\r\n", b"\n", b""):
                            return bytes(raw)
                raw += self.rfile.read(size + 2)  # data + CRLF
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _control(self) -> None:
        parsed = urllib.parse.urlsplit(self.path)
        if parsed.path == "/__bench/phase":
            name = urllib.parse.parse_qs(parsed.query).get("name", ["unassigned"])[0]
            with COUNTER.lock:
                COUNTER.phase = name
            body = b'"ok"'
        elif parsed.path == "/__bench/counts":
            body = json.dumps(COUNTER.dump()).encode()
        else:
            body = b'"unknown control endpoint"'
        self._reply(200, "OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))], body)

    def _reply(self, status: int, reason: str, headers: list[tuple[str, str]], body: bytes) -> None:
        """Status line, headers and body in a single write."""
        self.log_request(status)
        head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
        self.wfile.write(head.encode("latin-1") + body)

    def _forward(self) -> None:
        if self.path.startswith("/__bench/"):
            self._read_body()
            return self._control()
        body = self._read_body()
        with COUNTER.lock:
            phase = COUNTER.phase
        op = classify(self.command, self.path, self.headers)
        if DELAY_S:
            time.sleep(DELAY_S)  # this connection's thread only: other connections go on meanwhile
        t0 = time.perf_counter()
        for attempt in (1, 2):
            conn = self._upstream()
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    conn.putheader(name, value)
                conn.endheaders(body or None)
                resp = conn.getresponse()
                data = resp.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # A kept-alive upstream connection that the server had already closed: nothing was
                # processed, so sending again on a fresh connection is safe.
                conn.close()
                self._conn = None
                if attempt == 2:
                    raise
        seconds = time.perf_counter() - t0
        COUNTER.record(phase, op, resp.status, len(body), len(data), seconds, DELAY_S)
        headers = [
            (k, v)
            for k, v in resp.getheaders()
            if k.lower() not in HOP_BY_HOP and not (k.lower() == "content-length" and self.command != "HEAD")
        ]
        if self.command != "HEAD" and resp.status not in (204, 304):
            headers.append(("Content-Length", str(len(data))))
        if self.close_connection:
            headers.append(("Connection", "close"))
        self._reply(resp.status, resp.reason, headers, b"" if self.command == "HEAD" else data)
        if resp.will_close:
            conn.close()
            self._conn = None

    def finish(self) -> None:
        super().finish()
        if getattr(self, "_conn", None) is not None:
            self._conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_OPTIONS = _forward


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


def main() -> None:
    global UPSTREAM, DELAY_S
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", required=True, help="http://host:port of the S3 server")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = any free port)")
    ap.add_argument("--delay-ms", type=float, default=0.0, help="wait before forwarding each S3 request")
    a = ap.parse_args()
    if a.delay_ms < 0:
        sys.exit("--delay-ms must be >= 0")
    DELAY_S = a.delay_ms / 1000
    up = urllib.parse.urlsplit(a.upstream)
    if up.scheme != "http":
        sys.exit("only plain http upstreams are supported")
    UPSTREAM = (up.hostname or "127.0.0.1", up.port or 80)
    server = Server(("127.0.0.1", a.port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
