"""A canned Google Cloud Storage JSON API endpoint, to pin the GCS store's error mapping without a
real server (a real one gives 429, 5xx or dropped connections only by timing).

Each bucket name chooses its answers: ``answers[bucket]`` is a list consumed one request at a time,
its last entry repeating, e.g. ``["429", "200"]``. An answer is an HTTP status (``"200"`` answers
like GCS: an object resource with a generation, the body of a download, a listing) or ``"drop"``
(close the connection without an answer). Every request is recorded as ``(method, path, query)``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: the generation every canned write returns
GENERATION = "1700000000000002"


class _CannedGCS(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answers: dict[str, list[str]]
    seen: list[tuple[str, str, dict[str, str]]]
    lock: threading.Lock

    def _answer(self) -> None:
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        segments = parts.path.split("/")
        bucket = segments[segments.index("b") + 1] if "b" in segments else ""
        with self.lock:
            self.seen.append((self.command, parts.path, query))
            queue = self.answers.get(bucket, ["200"])
            answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if answer == "drop":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        status = int(answer)
        headers = {"Content-Type": "application/json"}
        if status != 200:
            body = json.dumps({"error": {"code": status, "message": "Canned", "errors": [{"reason": "canned"}]}})
        elif parts.path.startswith("/download/"):
            body, headers = "x", {"Content-Type": "application/octet-stream", "x-goog-generation": GENERATION}
        elif parts.path.endswith("/o") and self.command == "GET":
            body = json.dumps({"kind": "storage#objects", "items": []})
        else:
            body = json.dumps({"kind": "storage#object", "name": "k", "bucket": bucket, "generation": GENERATION})
        data = body.encode()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = _answer

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up on a dropped connection resets it: expected here


@contextmanager
def canned_gcs(answers: dict[str, list[str]]) -> Iterator[tuple[str, list[tuple[str, str, dict[str, str]]]]]:
    """``(endpoint URL, the requests so far)``; stopped on exit."""
    seen: list[tuple[str, str, dict[str, str]]] = []
    handler = type("CannedGCS", (_CannedGCS,), {"answers": answers, "seen": seen, "lock": threading.Lock()})
    server = _Server(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
