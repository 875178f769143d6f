"""A small HTTP/1.1 client that runs on the event loop itself: keep-alive connections as asyncio
protocols, no threads.

Why it exists: an S3 request through a thread pool crosses threads four times (loop -> pool
worker -> the HTTP library's runtime -> worker -> loop), and on this project's 2-core VMs those
hand-offs cost more CPU than the request itself (docs/performance.md, "Client CPU per invoke",
has the per-request figures of each transport). Here a request is one
``transport.write`` and its response is parsed in ``data_received`` on the loop: no thread, no
executor future, no cross-thread wake-up.

It does exactly what the S3 store needs and no more:

* one origin (scheme, host, port) per :class:`Origin`, TLS through asyncio's own SSL transport;
* responses with ``Content-Length``, ``Transfer-Encoding: chunked``, or read until the server
  closes; ``HEAD``, 204 and 304 have no body;
* idle connections kept (most recent first) and dropped after :attr:`Origin.idle_seconds`, before
  a server's own idle timeout can race a new request;
* no redirects, no proxies, no cookies, no compression: the S3 store treats a 3xx as an error and
  uses its thread-pool path when a proxy applies (see :mod:`.s3_loop`);
* **strict framing**, as strict as aiohttp's and h11's parsers: a status line must be
  ``HTTP/1.x NNN``; a chunk size is hexadecimal digits only (no ``+``, ``0x``, ``_`` or spaces
  inside) and a chunk ends with CRLF; ``Content-Length`` is digits only, and repeated only with
  the same value; ``Transfer-Encoding`` may only be ``chunked``, and never beside a
  ``Content-Length``; no whitespace between a field name and its colon; the status line and
  headers fit in :data:`MAX_HEAD` bytes. Anything else fails the request with
  :class:`MalformedResponse` and closes the connection: a lenient parser and the server can
  disagree on where a response ends, and the rest would be read as the *next* request's answer.
  Header values are sent as UTF-8, the bytes SigV4 signs (and what boto3 and obstore send);
* **bounded bodies**: every request says how large a body it reads (``max_body``, default
  :data:`MAX_BODY`), and a response that is not a success may not take more than
  :data:`MAX_ERROR_BODY` whatever the request allows. A larger body fails the request with
  :class:`ResponseTooLarge` as soon as it is known to be larger (its ``Content-Length``, the size
  line of the chunk that would pass the limit, or the bytes of a body read until the close), and
  closes the connection: a server that streams without end costs the limit, not the memory
  until the request's timeout. A body is held once: its bytes leave the receive buffer for one
  growing buffer as they arrive, whatever the framing, and that buffer becomes the response's
  ``bytes`` without a copy.

A request that fails before a single byte of its response arrived raises
:class:`ConnectionFailed` with ``sent`` telling whether the request may have reached the server;
the caller decides whether that is safe to retry (GET: yes; a conditional PUT: an unknown outcome).
A cancelled request closes its connection, so a half-read response never poisons the next one.

>>> origin = Origin.from_url("http://127.0.0.1:7480")
>>> origin.host_header, origin.ssl
('127.0.0.1:7480', None)
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import ssl as ssl_module
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "MAX_BODY",
    "MAX_ERROR_BODY",
    "MAX_HEAD",
    "ConnectionFailed",
    "HttpPool",
    "MalformedResponse",
    "Origin",
    "Response",
    "ResponseTooLarge",
]

#: the most bytes a response's status line and headers (or a chunked body's trailers) may take.
#: An S3 response head is well under 2 KiB; h11 stops at 16 KiB by default, aiohttp at 8190 bytes
#: per line. Without a limit a server that never ends its head would grow the buffer until the
#: request's timeout.
MAX_HEAD = 64 * 1024
#: the most bytes one chunk-size line (size and extensions) may take (aiohttp's line limit is 8190)
MAX_CHUNK_LINE = 8192
#: the most bytes a response body may take when the request names no limit: S3 answers a PUT,
#: a DELETE or a HEAD with no body at all, so a megabyte is a server that is not answering them
MAX_BODY = 1024 * 1024
#: the most bytes the body of a response other than a 2xx may take, whatever the request allows:
#: an S3 error document is under a kilobyte, a proxy's error page a few; only the error's
#: ``<Code>`` is read. A 503 is never a reason to read a gigabyte.
MAX_ERROR_BODY = 64 * 1024


class ConnectionFailed(Exception):
    """The connection failed or closed before a whole response arrived.

    ``sent``: the request was written (or partly written), so the server may have acted on it.
    """

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class MalformedResponse(ConnectionFailed):
    """The server answered, but not with an HTTP/1.1 response this client will read (see the
    module docstring's "strict framing"). The request was sent; the connection is closed. Trying
    again reaches the same server, so the S3 store does not retry it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, sent=True)


class ResponseTooLarge(ConnectionFailed):
    """The response's body is larger than the request reads (``max_body``, or
    :data:`MAX_ERROR_BODY` for a status other than 2xx). The request was sent and the server
    answered ``status``; the connection is closed, so the rest of the body is never read. Like
    a malformed response, the same request would get the same answer: not retried."""

    def __init__(self, status: int, limit: int, announced: int | None = None) -> None:
        body = f"body of {announced} bytes is over" if announced is not None else "body goes past"
        super().__init__(f"an HTTP {status} response's {body} the {limit} bytes this request reads", sent=True)
        self.status = status
        self.limit = limit


#: one compiled pattern per header name asked for (a handful: framing, ETag, Location)
_FIELDS: dict[str, re.Pattern[bytes]] = {}


def _field(head: bytes, name: str) -> str | None:
    """The value of header ``name`` (lower-case) in a response head, repeated fields joined with
    ``", "``; None when absent. Only the fields asked for are parsed: a response carries ten or
    so headers and the S3 client reads three of them."""
    pattern = _FIELDS.get(name)
    if pattern is None:
        pattern = _FIELDS[name] = re.compile(rb"\r\n" + re.escape(name.encode()) + rb"[ \t]*:[ \t]*([^\r]*)", re.I)
    found = pattern.search(head)
    if found is None:
        return None
    value = found.group(1).decode("latin-1").rstrip(" \t")
    again = pattern.search(head, found.end())
    while again is not None:  # rare: a field sent twice
        value += ", " + again.group(1).decode("latin-1").rstrip(" \t")
        again = pattern.search(head, again.end())
    return value


@dataclass(frozen=True)
class Response:
    status: int
    #: the status line and header lines as received (without the blank line)
    head: bytes
    body: bytes

    def header(self, name: str, default: str = "") -> str:
        r"""One header's value (case-insensitive name), or ``default``.

        >>> Response(200, b"HTTP/1.1 200 OK\r\nETag: \"e\"\r\nX-A: 1\r\nx-a: 2", b"").header("x-a")
        '1, 2'
        """
        value = _field(self.head, name.lower())
        return default if value is None else value


@dataclass(frozen=True)
class Origin:
    """Where requests go: ``scheme://host[:port]``."""

    scheme: str
    host: str
    port: int
    #: the ``Host`` header (and SigV4's ``host``): the port only when it is not the default
    host_header: str
    ssl: ssl_module.SSLContext | None
    idle_seconds: float = 15.0

    @classmethod
    def from_url(cls, url: str, *, idle_seconds: float = 15.0, cafile: str | None = None) -> Origin:
        """``cafile``: certificates to trust for ``https`` (default: ``AWS_CA_BUNDLE`` when set,
        as boto3 does, then the system's, which ``SSL_CERT_FILE`` can point elsewhere)."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:  # the URL itself may hold a secret: not shown
            raise ValueError(f"not an http(s) URL with a host (scheme {scheme!r})")
        default = 443 if scheme == "https" else 80
        port = parts.port or default
        host = parts.hostname
        shown = f"[{host}]" if ":" in host else host
        host_header = shown if port == default else f"{shown}:{port}"
        context = None
        if scheme == "https":
            context = ssl_module.create_default_context(cafile=cafile or os.environ.get("AWS_CA_BUNDLE") or None)
        return cls(scheme, host, port, host_header, context, idle_seconds)


class _Framing(ValueError):
    """A response whose framing cannot be trusted (status line, length, chunk sizes, head size)."""


class _Oversized(Exception):
    """A body known to be larger than the request's limit (``announced``: its Content-Length)."""

    def __init__(self, announced: int | None = None) -> None:
        super().__init__()
        self.announced = announced


#: ``HTTP/1.x`` then a space and exactly three digits, then the end or a space and a reason
_STATUS_LINE = re.compile(rb"HTTP/1\.[0-9] ([0-9]{3})(?: [^\r\n]*)?")
#: a header line that is neither ``token:`` (no space before the colon) nor a continuation
_BAD_FIELD_LINE = re.compile(rb"\r\n(?![!#$%&'*+\-.^_`|~0-9A-Za-z]+:|[ \t])")
_DIGITS = re.compile(r"[0-9]+")
#: a chunk-size line: hex digits only, then maybe extensions, then maybe trailing blanks (as h11)
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})(?:;[^\r\n]*)?[ \t]*")


def _status(line: bytes) -> int:
    r"""The status code of a status line, strictly (RFC 9112, 4).

    >>> _status(b"HTTP/1.1 200 OK"), _status(b"HTTP/1.0 404")
    (200, 404)
    >>> _status(b"HTTP/1.1 2000 OK")
    Traceback (most recent call last):
    ...
    langgraph_handoff.stores.loop_http._Framing: not an HTTP/1.x status line: b'HTTP/1.1 2000 OK'
    """
    match = _STATUS_LINE.fullmatch(line)
    if match is None:
        raise _Framing(f"not an HTTP/1.x status line: {line[:80]!r}")
    return int(match.group(1))


def _content_length(value: str) -> int:
    """``Content-Length``, strictly: ASCII digits only; a repeated field must repeat the same
    number (RFC 9110, 8.6). Anything else could cut a body short or read into the next response.

    >>> _content_length("10"), _content_length("10, 10")
    (10, 10)
    >>> _content_length("10, 11")
    Traceback (most recent call last):
    ...
    langgraph_handoff.stores.loop_http._Framing: Content-Length '10, 11' is not one number
    >>> _content_length("+5")
    Traceback (most recent call last):
    ...
    langgraph_handoff.stores.loop_http._Framing: Content-Length '+5' is not one number
    """
    values = {v.strip(" \t") for v in value.split(",")}
    if len(values) != 1 or not _DIGITS.fullmatch(next(iter(values))):
        raise _Framing(f"Content-Length {value!r} is not one number")
    return int(next(iter(values)))


def _chunk_size(line: bytes) -> int:
    """The size a chunk-size line announces: hexadecimal digits only, as aiohttp and h11 read it.
    ``int(x, 16)`` alone also takes ``+5``, ``0x5``, ``0_5`` and `` 5``, which another parser on
    the path (a proxy) reads differently or not at all.

    >>> _chunk_size(b"1a"), _chunk_size(b"5;name=value"), _chunk_size(b"0")
    (26, 5, 0)
    >>> _chunk_size(b"0x5")
    Traceback (most recent call last):
    ...
    langgraph_handoff.stores.loop_http._Framing: chunk size b'0x5' is not hexadecimal digits
    """
    match = _CHUNK_SIZE.fullmatch(line)
    if match is None:
        raise _Framing(f"chunk size {line[:20]!r} is not hexadecimal digits")
    return int(match.group(1), 16)


def _framing(head: bytes) -> tuple[bool, int | None]:
    """``(chunked, content_length)`` of a response head, refusing what could be read two ways:
    a field name with blanks before its colon, a ``Transfer-Encoding`` other than ``chunked``,
    and both ``Transfer-Encoding`` and ``Content-Length`` (RFC 9112, 6.1: a message with both is
    a smuggling attempt or a broken server; aiohttp and h11 refuse it too)."""
    bad = _BAD_FIELD_LINE.search(head)
    if bad is not None:
        start = bad.start() + 2
        stop = head.find(b"\r\n", start)
        raise _Framing(f"malformed header line {head[start : stop if stop >= 0 else len(head)][:60]!r}")
    encoding = _field(head, "transfer-encoding")
    length = _field(head, "content-length")
    if encoding is not None:
        if encoding.lower() != "chunked":
            raise _Framing(f"Transfer-Encoding {encoding!r} is not 'chunked'")
        if length is not None:
            raise _Framing("both Transfer-Encoding and Content-Length")
        return True, None
    return False, None if length is None else _content_length(length)


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request at a time."""

    def __init__(self, idle_limit: float) -> None:
        #: seconds an idle connection may wait for its next request before it is dropped
        self.idle_limit = idle_limit
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._buf = bytearray()  # bytes received and not parsed yet
        self._waiter: asyncio.Future[Response] | None = None
        self._head_only = False
        self._status = 0
        self._headers: bytes | None = None  # the response head, once complete
        self._length = -1  # the body's Content-Length; -1: until close; -2: chunked
        self._keep_alive = True
        self._max_body = MAX_BODY  # what the request in flight reads
        self._limit = MAX_BODY  # ... and what this response may take, once its status is known
        self._body = io.BytesIO()  # the body so far: its bytes leave the receive buffer as they arrive
        self._body_size = 0
        self._chunk_left = 0  # bytes of the current chunk still to come
        self._chunk_crlf = False  # the CRLF after a chunk's data is what comes next

    # -- asyncio.Protocol --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # bytes nobody asked for: this connection can no longer be trusted
            self.close()
            return
        self._buf += data
        try:
            self._parse()
        except _Oversized as exc:  # no byte more is read: the connection closes now
            self._fail(ResponseTooLarge(self._status, self._limit, exc.announced))
        except (_Framing, ValueError) as exc:  # a malformed head or chunk size: fail, never guess
            self._fail(MalformedResponse(f"unreadable HTTP response: {exc}"))

    def eof_received(self) -> bool | None:
        self.closed = True  # never handed out again, even before connection_lost arrives
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if exc is None and self._headers is not None and self._length == -1:  # body delimited by the close
            self._finish_body()
            return
        self._waiter = None
        self._body = io.BytesIO()
        reason = f": {exc}" if exc else ""
        waiter.set_exception(ConnectionFailed(f"the connection closed before a whole response{reason}", sent=True))

    # -- one request ---------------------------------------------------------------------------
    def send(self, request: bytes, body: bytes, head_only: bool, max_body: int = MAX_BODY) -> asyncio.Future[Response]:
        assert self.transport is not None and self._waiter is None
        waiter: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        self._head_only = head_only
        self._max_body = max_body
        self._headers = None
        if len(body) > 65536:
            self.transport.write(request)
            self.transport.write(body)
        else:
            self.transport.write(request + body)
        return waiter

    def _parse(self) -> None:
        buf = self._buf
        if self._headers is None:
            end = buf.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
            if end < 0:
                if len(buf) >= MAX_HEAD + 4:
                    raise _Framing(f"the status line and headers exceed {MAX_HEAD} bytes")
                return
            head = bytes(buf[:end])
            line_end = head.find(b"\r\n")
            self._status = _status(head if line_end < 0 else head[:line_end])
            if 100 <= self._status < 200:  # an interim response (100 Continue): skip it
                del buf[: end + 4]
                self._parse()
                return
            chunked, length = _framing(head)  # checked even where no body follows
            connection = _field(head, "connection")
            keep_alive = head.startswith(b"HTTP/1.1 ") and not (connection and "close" in connection.lower())
            self._limit = self._max_body if 200 <= self._status < 300 else min(self._max_body, MAX_ERROR_BODY)
            if self._head_only or self._status in (204, 304):
                self._length = 0
            elif chunked:
                self._length = -2
                self._chunk_left, self._chunk_crlf = 0, False
            elif length is not None:
                if length > self._limit:
                    raise _Oversized(length)
                self._length = length
            else:
                self._length = -1
                keep_alive = False
            # only now, with the framing known to be sound, is the head taken
            self._headers, self._keep_alive = head, keep_alive
            self._body, self._body_size = io.BytesIO(), 0
            del buf[: end + 4]
        if self._length >= 0:
            self._take(min(len(buf), self._length - self._body_size))
            if self._body_size == self._length:
                self._finish_body()
        elif self._length == -2:
            self._parse_chunks()
        else:  # until the close
            self._take(len(buf))

    def _take(self, n: int) -> None:
        """Move the buffer's first ``n`` bytes to the body (refused past the limit): the body is
        held once, in one growing buffer that becomes the response's bytes without a copy."""
        if n <= 0:
            return
        if self._body_size + n > self._limit:
            raise _Oversized()
        self._body.write(memoryview(self._buf)[:n])
        del self._buf[:n]  # bytearray drops a prefix without moving the rest
        self._body_size += n

    def _parse_chunks(self) -> None:
        """Take what arrived of a chunked body, from where the last packet stopped: each chunk's
        data goes to the body as it arrives, so a body is never held twice (its chunks and the
        raw bytes they came in, as before: 1 GiB for 512 MiB), nor a large chunk in the buffer.

        A chunk that would take the body past the request's limit fails the request as soon as
        its size line arrives, before its data."""
        buf = self._buf
        while True:
            if self._chunk_left:
                take = min(len(buf), self._chunk_left)
                self._take(take)
                self._chunk_left -= take
                if self._chunk_left:
                    return
                self._chunk_crlf = True
            if self._chunk_crlf:
                if len(buf) < 2:
                    return
                if buf[:2] != b"\r\n":
                    raise _Framing("a chunk's data is not followed by CRLF")
                del buf[:2]
                self._chunk_crlf = False
            line_end = buf.find(b"\r\n", 0, MAX_CHUNK_LINE + 2)
            if line_end < 0:
                if len(buf) >= MAX_CHUNK_LINE + 2:
                    raise _Framing(f"a chunk-size line longer than {MAX_CHUNK_LINE} bytes")
                return
            size = _chunk_size(bytes(buf[:line_end]))
            if self._body_size + size > self._limit:
                raise _Oversized()
            if size == 0:
                trailer_end = buf.find(b"\r\n\r\n", line_end, line_end + MAX_HEAD + 4)
                if trailer_end < 0:
                    if len(buf) - line_end >= MAX_HEAD + 4:
                        raise _Framing(f"the trailers exceed {MAX_HEAD} bytes")
                    return
                del buf[: trailer_end + 4]
                self._finish_body()
                return
            del buf[: line_end + 2]
            self._chunk_left = size

    def _finish_body(self) -> None:
        body, self._body = self._body.getvalue(), io.BytesIO()  # getvalue hands over the buffer itself
        self._finish(body)

    def _finish(self, body: bytes) -> None:
        waiter, self._waiter = self._waiter, None
        assert self._headers is not None and waiter is not None
        response = Response(self._status, self._headers, body)
        if not self._keep_alive or self._buf:  # more than one response's bytes: do not reuse
            self.close()
        if not waiter.done():
            waiter.set_result(response)

    def expire(self, message: str) -> None:
        """The request's deadline passed: fail it (and never reuse this connection)."""
        self._fail(ConnectionFailed(message, sent=True))

    def _fail(self, error: ConnectionFailed) -> None:
        waiter, self._waiter = self._waiter, None
        self._body = io.BytesIO()  # what a refused body held so far goes now, not with the connection
        self.close()
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    def reusable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class _LoopConnections:
    """One event loop's connections: the idle ones, the request slots, and the deadlines of the
    requests in flight.

    Deadlines are checked by one timer per loop, at most every second, instead of a timer per
    request (``asyncio.timeout`` schedules and cancels one each time, and on a hot path that is a
    tenth of a request's client CPU). So a request times out within a second of its deadline.

    When the loop shuts down (``asyncio.run`` ends, which calls ``loop.shutdown_asyncgens()``),
    an asynchronous generator registered with the loop closes the idle connections: a finished
    loop keeps no sockets open, and nothing here holds the loop once it is gone.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, max_connections: int) -> None:
        self._loop = weakref.ref(loop)
        self.idle: deque[_Connection] = deque()
        self.slots = asyncio.Semaphore(max_connections)
        self.busy: dict[_Connection, tuple[float, float]] = {}  # connection -> (deadline, timeout)
        #: set by :meth:`close`: connections still in flight are closed when they finish
        self.closed = False
        self._tick: asyncio.TimerHandle | None = None
        self._every = 1.0
        self._sentinel: Any = None

    async def start(self) -> None:
        """Register the shutdown hook with the running loop (once, before the first request)."""
        if getattr(asyncio.get_running_loop(), "_asyncgens_shutdown_called", False):
            return  # the loop is already shutting down: nothing would call the hook
        self._sentinel = self._until_shutdown()
        await self._sentinel.__anext__()

    async def _until_shutdown(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            self._sentinel = None  # a finished generator still holds the loop's finalizer
            self.close()

    def watch(self, connection: _Connection, timeout: float) -> None:
        loop = self._loop()
        assert loop is not None
        self.busy[connection] = (loop.time() + timeout, timeout)
        every = min(1.0, timeout)
        if self._tick is not None and every < self._every:  # a shorter timeout than the timer's period
            self._tick.cancel()
            self._tick = None
        if self._tick is None:
            self._every = every
            self._tick = loop.call_later(every, self._check)

    def _check(self) -> None:
        self._tick = None
        loop = self._loop()
        if loop is None:
            return
        now = loop.time()
        for connection, (deadline, timeout) in list(self.busy.items()):
            if now >= deadline:
                del self.busy[connection]
                connection.expire(f"no response within {timeout:g} s")
        if self.busy:
            self._tick = loop.call_later(self._every, self._check)

    def close(self) -> None:
        """Close the idle connections; requests in flight keep their deadlines and close their
        connections when they end."""
        self.closed = True
        while self.idle:
            self.idle.pop().close()
        if not self.busy and self._tick is not None:  # the timer holds the loop
            self._tick.cancel()
            self._tick = None


class HttpPool:
    """Keep-alive connections to one :class:`Origin`, for the event loop that uses them.

    Connections belong to one event loop, so the pool keeps one set per loop (a process may run
    ``asyncio.run`` many times). A loop's idle connections are closed when it shuts down,
    by :meth:`aclose` from that loop, or by :meth:`close` from anywhere.
    """

    def __init__(self, origin: Origin, *, max_connections: int = 64, connect_timeout: float = 5.0) -> None:
        self.origin = origin
        self.max_connections = max_connections
        self.connect_timeout = connect_timeout
        #: connections opened so far, on every loop (each one reused while it stays healthy)
        self.opened = 0
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopConnections] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()  # loops of several threads may add entries at once

    async def _here(self, loop: asyncio.AbstractEventLoop) -> _LoopConnections:
        here = self._loops.get(loop)
        if here is None or here.closed:
            here = _LoopConnections(loop, self.max_connections)
            await here.start()
            with self._lock:
                for other in [other for other in self._loops if other.is_closed()]:
                    self._loops.pop(other).close()
                self._loops[loop] = here
        return here

    async def request(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes = b"",
        *,
        timeout: float = 30.0,
        max_body: int = MAX_BODY,
    ) -> Response:
        """Send one request and return its whole response. ``target`` is the path and query as
        sent; ``headers`` need no ``Host`` or ``Content-Length`` (both added).

        ``max_body``: the most bytes the response's body may take (:data:`MAX_ERROR_BODY` at
        most for a status other than 2xx); a larger one raises :class:`ResponseTooLarge`."""
        loop = asyncio.get_running_loop()
        here = self._loops.get(loop)
        if here is None or here.closed:
            here = await self._here(loop)
        fields = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
        length = f"content-length: {len(body)}\r\n" if body or method in ("PUT", "POST") else ""
        # UTF-8: the bytes SigV4 signs a header value as (and what boto3 and obstore send)
        head = f"{method} {target} HTTP/1.1\r\nhost: {self.origin.host_header}\r\n{fields}{length}\r\n".encode()
        async with here.slots:
            connection = self._reuse(here.idle, loop.time())
            if connection is None:
                connection = await self._connect(loop)
            here.watch(connection, timeout)
            try:
                response = await connection.send(head, body, method == "HEAD", max_body)
            except BaseException:
                connection.close()  # timed out, cancelled or failed half-way: never reuse it
                raise
            finally:
                here.busy.pop(connection, None)
            if here.closed:
                connection.close()
            elif not connection.closed:
                connection.idle_since = loop.time()
                here.idle.append(connection)
            return response

    @staticmethod
    def _reuse(idle: deque[_Connection], now: float) -> _Connection | None:
        while idle:
            connection = idle.pop()
            if connection.reusable() and now - connection.idle_since < connection.idle_limit:
                return connection
            connection.close()
        return None

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        origin = self.origin
        try:
            _, protocol = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(origin.idle_seconds),
                    origin.host,
                    origin.port,
                    ssl=origin.ssl,
                    server_hostname=origin.host if origin.ssl else None,
                ),
                self.connect_timeout,
            )
        except (OSError, asyncio.TimeoutError, ssl_module.SSLError) as exc:
            raise ConnectionFailed(
                f"cannot connect to {origin.scheme}://{origin.host_header}: {exc or type(exc).__name__}", sent=False
            ) from None
        self.opened += 1
        return protocol

    async def aclose(self) -> None:
        """Close this event loop's idle connections (those in flight close when they end)."""
        with self._lock:
            here = self._loops.pop(asyncio.get_running_loop(), None)
        if here is not None:
            here.close()

    def close(self) -> None:
        """Close the idle connections of every loop: a running loop's from that loop (thread
        safe), any other's now."""
        with self._lock:
            entries = list(self._loops.items())
            self._loops.clear()
        for loop, here in entries:
            if loop.is_running():
                with contextlib.suppress(RuntimeError):  # closed in between: its hook already ran
                    loop.call_soon_threadsafe(here.close)
            elif not loop.is_closed():
                here.close()
