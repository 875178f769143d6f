"""The event-loop HTTP client (langgraph_handoff/stores/loop_http.py) against scripted servers.

Each server is an asyncio server on loopback whose answers are bytes written by the test, split
and delayed exactly as the test says, so every framing case (Content-Length, chunked across
packets, close-delimited, HEAD, 100 Continue) and every failure (refused, dropped before or
after the request, no answer, cancellation) is hit on purpose, not by timing luck."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from langgraph_handoff.stores.loop_http import ConnectionFailed, HttpPool, Origin

#: a server's script: given the request's bytes and the writer, answer (or not)
Script = Callable[[bytes, asyncio.StreamWriter], Awaitable[None]]


class Scripted:
    """A loopback server that runs ``script`` for every request it reads; counts connections."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.base_events.Server | None = None

    async def __aenter__(self) -> Scripted:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + (await reader.readexactly(length) if length else b"")
                self.requests.append(request)
                await self.script(request, writer)
                if writer.is_closing():
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def pool_for(server: Scripted, **kwargs: float) -> HttpPool:
    return HttpPool(Origin.from_url(server.url, idle_seconds=kwargs.pop("idle_seconds", 4.0)), **kwargs)  # type: ignore[arg-type]


async def answer(writer: asyncio.StreamWriter, *parts: bytes) -> None:
    """Write ``parts`` as separate packets, letting the loop run between them."""
    for part in parts:
        writer.write(part)
        await writer.drain()
        await asyncio.sleep(0)


async def test_content_length_answers_reuse_one_connection() -> None:
    async def ok(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(writer, b'HTTP/1.1 200 OK\r\nETag: "e1"\r\nContent-Length: 5\r\n\r\nhe', b"llo")

    async with Scripted(ok) as server:
        pool = pool_for(server)
        first = await pool.request("GET", "/b/k", {"x-a": "1"})
        second = await pool.request("PUT", "/b/k", {}, b"body")
        await pool.aclose()
    assert (first.status, first.body, first.header("ETag")) == (200, b"hello", '"e1"')
    assert second.body == b"hello"
    assert server.connections == 1 and pool.opened == 1
    assert server.requests[0].startswith(b"GET /b/k HTTP/1.1\r\nhost: 127.0.0.1:")
    assert b"x-a: 1\r\n" in server.requests[0] and b"content-length" not in server.requests[0]
    assert server.requests[1].endswith(b"content-length: 4\r\n\r\nbody")


async def test_chunked_answer_split_across_packets() -> None:
    async def chunked(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(
            writer,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
            b"lo\r\n6;ext=1\r\n world\r\n",
            b"0\r\n",
            b"\r\n",
        )

    async with Scripted(chunked) as server:
        pool = pool_for(server)
        responses = [await pool.request("GET", "/", {}) for _ in range(2)]
        await pool.aclose()
    assert [r.body for r in responses] == [b"hello world"] * 2 and server.connections == 1


async def test_close_delimited_head_and_interim_answers() -> None:
    async def varied(request: bytes, writer: asyncio.StreamWriter) -> None:
        if request.startswith(b"HEAD"):  # a length, but no body after a HEAD
            await answer(writer, b'HTTP/1.1 200 OK\r\nContent-Length: 99\r\nETag: "h"\r\n\r\n')
        elif request.startswith(b"PUT"):  # an interim 100 Continue first
            await answer(writer, b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 204 No Content\r\n\r\n")
        else:  # no length: the body ends when the server closes
            await answer(writer, b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of", b" it")
            writer.close()

    async with Scripted(varied) as server:
        pool = pool_for(server)
        head = await pool.request("HEAD", "/", {})
        put = await pool.request("PUT", "/", {}, b"x")
        rest = await pool.request("GET", "/", {})
        after = await pool.request("HEAD", "/", {})  # a new connection: the last one was closed
        await pool.aclose()
    assert (head.status, head.body, head.header("etag")) == (200, b"", '"h"')
    assert (put.status, put.body) == (204, b"")
    assert (rest.status, rest.body) == (200, b"all of it")
    assert after.status == 200 and server.connections == 2


async def test_a_refused_connection_was_never_sent() -> None:
    async with Scripted(lambda r, w: answer(w)) as server:
        url = server.url
    pool = HttpPool(Origin.from_url(url))
    with pytest.raises(ConnectionFailed) as failed:
        await pool.request("PUT", "/", {}, b"x")
    assert failed.value.sent is False and "cannot connect" in str(failed.value)


async def test_a_dropped_request_may_have_been_sent() -> None:
    async def drop(request: bytes, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async with Scripted(drop) as server:
        pool = pool_for(server)
        with pytest.raises(ConnectionFailed) as failed:
            await pool.request("PUT", "/", {}, b"x")
        await pool.aclose()
    assert failed.value.sent is True and len(server.requests) == 1


async def test_half_an_answer_then_close_is_a_failure_not_a_short_body() -> None:
    async def half(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(writer, b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        writer.close()

    async with Scripted(half) as server:
        pool = pool_for(server)
        with pytest.raises(ConnectionFailed, match="before a whole response"):
            await pool.request("GET", "/", {})
        await pool.aclose()


async def test_no_answer_times_out_and_the_connection_is_not_reused() -> None:
    release = asyncio.Event()

    async def silent_once(request: bytes, writer: asyncio.StreamWriter) -> None:
        if len(server.requests) == 1:
            await release.wait()  # never answers the first request
            return
        await answer(writer, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    async with Scripted(silent_once) as server:
        pool = pool_for(server)
        with pytest.raises(ConnectionFailed, match="no response within") as failed:
            await pool.request("GET", "/", {}, timeout=0.05)
        assert failed.value.sent is True
        assert (await pool.request("GET", "/", {})).body == b"ok"
        release.set()
        await pool.aclose()
    assert server.connections == 2


async def test_a_cancelled_request_closes_its_connection() -> None:
    got_request = asyncio.Event()
    release = asyncio.Event()

    async def slow_once(request: bytes, writer: asyncio.StreamWriter) -> None:
        if len(server.requests) == 1:
            got_request.set()
            await release.wait()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate")  # must reach nobody
            return
        await answer(writer, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh")

    async with Scripted(slow_once) as server:
        pool = pool_for(server)
        task = asyncio.create_task(pool.request("GET", "/", {}))
        await got_request.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        assert (await pool.request("GET", "/", {})).body == b"fresh"
        await pool.aclose()
    assert server.connections == 2


async def test_idle_connections_past_their_limit_are_not_reused() -> None:
    async def ok(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(writer, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    async with Scripted(ok) as server:
        pool = pool_for(server, idle_seconds=0.0)
        for _ in range(3):
            await pool.request("GET", "/", {})
        await pool.aclose()
    assert server.connections == 3


async def test_a_connection_the_server_closed_while_idle_is_replaced() -> None:
    async def once_then_close(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(writer, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        writer.close()  # keep-alive claimed, yet closed: as a server's idle timeout does

    async with Scripted(once_then_close) as server:
        pool = pool_for(server)
        await pool.request("GET", "/", {})
        idle = next(iter(pool._loops.values())).idle
        while not idle[0].closed:  # wait for the close itself to reach the client
            await asyncio.sleep(0)
        await pool.request("GET", "/", {})
        await pool.aclose()
    assert server.connections == 2 and len(server.requests) == 2


def test_each_event_loop_gets_its_own_connections() -> None:
    """A store used from two ``asyncio.run`` calls: each loop opens its own connection (a
    transport cannot move between loops), and ``close`` afterwards closes the idle ones."""
    ports: list[int] = []

    async def run(pool: HttpPool | None) -> HttpPool:
        async def ok(request: bytes, writer: asyncio.StreamWriter) -> None:
            await answer(writer, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

        async with Scripted(ok) as server:
            ports.append(int(server.url.rsplit(":", 1)[1]))
            pool = pool or pool_for(server)
            pool.origin = Origin.from_url(server.url)
            await pool.request("GET", "/", {})
            await pool.request("GET", "/", {})
        return pool

    pool = asyncio.run(run(None))
    pool = asyncio.run(run(pool))
    assert pool.opened == 2
    pool.close()
    assert not pool._loops


async def test_bytes_beyond_the_response_retire_the_connection() -> None:
    """A server that sends more than it announced: the extra bytes must never be read as the
    next request's answer, so the connection is not reused."""

    async def too_much(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(
            writer, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nbad"
        )

    async with Scripted(too_much) as server:
        pool = pool_for(server)
        assert (await pool.request("GET", "/", {})).body == b"ok"
        assert (await pool.request("GET", "/", {})).body == b"ok"  # a fresh connection, not "bad"
        await pool.aclose()
    assert server.connections == 2


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with ``cryptography`` for this test."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


async def test_https_verifies_the_server_and_honours_aws_ca_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS through asyncio's own SSL transport: an untrusted certificate fails before anything
    is sent; the same server is trusted with ``AWS_CA_BUNDLE`` pointing at its certificate."""
    cert_file, key_file = _self_signed(tmp_path)
    server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ssl.load_cert_chain(cert_file, key_file)

    async def ok(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(writer, b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntls")

    scripted = Scripted(ok)
    scripted.server = await asyncio.start_server(scripted._serve, "127.0.0.1", 0, ssl=server_ssl)
    url = scripted.url.replace("http://", "https://")
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    untrusted = HttpPool(Origin.from_url(url))
    with pytest.raises(ConnectionFailed, match="certificate") as failed:
        await untrusted.request("GET", "/", {})
    assert failed.value.sent is False
    monkeypatch.setenv("AWS_CA_BUNDLE", str(cert_file))
    trusted = HttpPool(Origin.from_url(url))
    assert (await trusted.request("GET", "/", {})).body == b"tls"
    assert (await trusted.request("GET", "/", {})).body == b"tls" and trusted.opened == 1
    await trusted.aclose()
    await scripted.__aexit__()
