"""A canned S3 endpoint for the transports' error mapping and headers, no real server needed.

Every request is answered with the status named by the key's first segment (``/bucket/409/k`` ->
409, ``/bucket/200/k`` -> 200 with an ETag); ``/bucket/drop/k`` closes the connection without an
answer. The headers of every request are kept, to check what a transport sends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Canned(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict[str, str]]

    def _answer(self) -> None:
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        segment = self.path.split("?")[0].split("/")[2]
        if segment == "drop":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        status = int(segment)
        body = b"" if status == 200 else b"<?xml version='1.0'?><Error><Code>Canned</Code></Error>"
        self.send_response(status)
        if status == 200:
            self.send_header("ETag", '"0123456789abcdef0123456789abcdef"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_DELETE = do_HEAD = _answer

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def canned_s3() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """``(endpoint URL, the headers of each request so far)``; stopped on exit."""
    seen: list[dict[str, str]] = []
    handler = type("Canned", (_Canned,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
