"""A fault-injecting HTTP/1.1 proxy for the integration tests: it sits between a store client and
a real server (Ceph RGW, Azurite, fake-gcs-server) and fails chosen requests on purpose.

A test names each fault by what it does and which request it hits, so a failure is exact and
repeatable (no random schedule; the seeded campaign builds on the same rules):

* ``reset``: the connection is reset before the request reaches the server (nothing happened);
* ``lose``: the request is forwarded, the server answers (it committed), and the client's
  connection is reset instead of the answer (the outcome is unknown to the client);
* ``status``: the proxy answers ``status`` itself (500, 503 ``SlowDown``...) without forwarding;
* ``cut``: the answer's head and half its body are sent, then the connection is reset;
* ``shorten``: the answer arrives whole-looking but cut short: its body cut to ``keep`` bytes
  (half by default), under a ``Content-Length`` that says so (a proxy or server bug the client
  cannot see at the HTTP level; each cut keeps one byte more than the last, so no two match).

``partition`` resets every request until it is turned off (an outage). ``log`` records each
request (method, path, what was done), so a test can say which request a fault hit.
:meth:`FaultProxy.chaos` fails a seeded share of all requests with a random kind (the fault
campaign, ``tests/support/fault_campaign.py``); ``injected`` counts what was done.

A client's ``Expect: 100-continue`` is answered by the proxy itself and dropped from what is
forwarded, so a body always travels with its request.
"""

from __future__ import annotations

import contextlib
import random
import socket
import socketserver
import struct
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["Fault", "FaultProxy", "Request", "fault_proxy"]


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]

    def conditional(self) -> bool:
        return "if-match" in self.headers or "if-none-match" in self.headers


@dataclass
class Fault:
    """Fail the ``nth`` request (1-based) that ``when`` accepts, and the ``times - 1`` after it."""

    kind: str  # reset | lose | status | cut
    when: Callable[[Request], bool]
    nth: int = 1
    times: int = 1
    status: int = 503
    keep: int = -1
    seen: int = 0
    fired: int = 0

    def fires(self, request: Request) -> bool:
        if not self.when(request):
            return False
        self.seen += 1
        if self.seen >= self.nth and self.fired < self.times:
            self.fired += 1
            return True
        return False


@dataclass
class FaultProxy:
    upstream: str
    faults: list[Fault] = field(default_factory=list)
    partition: bool = False
    log: list[tuple[str, str, str]] = field(default_factory=list)
    injected: Counter[str] = field(default_factory=Counter)
    shortened: int = 0
    _chaos: tuple[random.Random, float, tuple[str, ...]] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: socketserver.ThreadingTCPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, kind: str, when: Callable[[Request], bool], **kwargs: int) -> Fault:
        fault = Fault(kind, when, **kwargs)
        with self._lock:
            self.faults.append(fault)
        return fault

    def chaos(self, seed: int, rate: float, kinds: Sequence[str]) -> None:
        """Fail a share ``rate`` of every request from now on, each with a kind drawn from
        ``kinds`` (``status`` draws 500 or 503), from a generator seeded with ``seed``."""
        with self._lock:
            self._chaos = (random.Random(seed), rate, tuple(kinds))

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.partition = False
            self._chaos = None

    def _decide(self, request: Request) -> Fault | None:
        with self._lock:
            if self.partition:
                self.injected["partition"] += 1
                return Fault("reset", lambda _: True)
            for fault in self.faults:
                if fault.fires(request):
                    self.injected[fault.kind] += 1
                    return fault
            if self._chaos is not None:
                rng, rate, kinds = self._chaos
                if rng.random() < rate:
                    kind = rng.choice(kinds)
                    status = rng.choice((500, 503))
                    self.injected[f"{kind} {status}" if kind == "status" else kind] += 1
                    return Fault(kind, lambda _: True, status=status)
            return None

    def start(self) -> FaultProxy:
        proxy = self
        target = urlsplit(self.upstream)
        upstream = (target.hostname or "127.0.0.1", target.port or 80)

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                _serve(proxy, self.request, upstream)

        socketserver.ThreadingTCPServer.daemon_threads = True
        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True, name="fault-proxy").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@contextlib.contextmanager
def fault_proxy(upstream: str) -> Iterator[FaultProxy]:
    proxy = FaultProxy(upstream).start()
    try:
        yield proxy
    finally:
        proxy.stop()


# -- the wire ----------------------------------------------------------------------------------------


class _Closed(Exception):
    pass


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _more(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise _Closed
        self.buf += data

    def until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            self._more()
        head, _, self.buf = self.buf.partition(marker)
        return head + marker

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def rest(self) -> bytes:
        with contextlib.suppress(_Closed, OSError):
            while True:
                self._more()
        out, self.buf = self.buf, b""
        return out


def _headers(head: bytes) -> tuple[str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    found: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            found[name.strip().lower()] = value.strip()
    return lines[0], found


def _body(reader: _Reader, headers: dict[str, str], *, until_close: bool) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        out = b""
        while True:
            size_line = reader.until(b"\r\n")
            out += size_line
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers, then the blank line
                    line = reader.until(b"\r\n")
                    out += line
                    if line == b"\r\n":
                        return out
            out += reader.exactly(size + 2)
    if "content-length" in headers:
        return reader.exactly(int(headers["content-length"]))
    return reader.rest() if until_close else b""


def _reset(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _without_expect(head: bytes) -> bytes:
    lines = head.split(b"\r\n")
    return b"\r\n".join(line for line in lines if not line.lower().startswith(b"expect:"))


def _serve(proxy: FaultProxy, client: socket.socket, upstream: tuple[str, int]) -> None:
    reader = _Reader(client)
    server: socket.socket | None = None
    server_reader: _Reader | None = None
    try:
        while True:
            head = reader.until(b"\r\n\r\n")
            start, headers = _headers(head)
            method, path = start.split(" ")[:2]
            if headers.get("expect", "").lower() == "100-continue":
                client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                head = _without_expect(head)
            body = _body(reader, headers, until_close=False)
            request = Request(method, path, headers)
            fault = proxy._decide(request)
            kind = fault.kind if fault is not None else "forward"
            proxy.log.append((method, path, kind))
            if kind == "reset":
                _reset(client)
                return
            if kind == "status":
                assert fault is not None
                code = "SlowDown" if fault.status == 503 else "InternalError"
                text = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
                client.sendall(
                    f"HTTP/1.1 {fault.status} Injected\r\nContent-Type: application/xml\r\n"
                    f"Content-Length: {len(text)}\r\n\r\n".encode()
                    + text
                )
                continue
            if server is None:
                server = socket.create_connection(upstream)
                server_reader = _Reader(server)
            assert server_reader is not None
            server.sendall(head + body)
            answer_head = server_reader.until(b"\r\n\r\n")
            status_line, answer_headers = _headers(answer_head)
            status = int(status_line.split(" ")[1])
            bodiless = method == "HEAD" or status in (204, 304) or 100 <= status < 200
            answer = b"" if bodiless else _body(server_reader, answer_headers, until_close=True)
            if kind == "lose":
                _reset(client)
                return
            if kind == "shorten":
                assert fault is not None
                keep = (len(answer) // 2 if fault.keep < 0 else fault.keep) + fault.fired + proxy.shortened
                proxy.shortened += 1  # no two cut answers alike, as a network's cuts are
                lines = [
                    line
                    for line in answer_head.split(b"\r\n")
                    if line and not line.lower().startswith((b"content-length:", b"transfer-encoding:"))
                ]
                client.sendall(b"\r\n".join([*lines, b"Content-Length: %d" % keep, b"", b""]) + answer[:keep])
                continue
            if kind == "cut":
                client.sendall(answer_head + answer[: len(answer) // 2])
                _reset(client)
                return
            client.sendall(answer_head + answer)
            if answer_headers.get("connection", "").lower() == "close":
                client.close()
                return
    except (_Closed, OSError):
        pass
    finally:
        if server is not None:
            server.close()
        with contextlib.suppress(OSError):
            client.close()
