"""A store's answer larger than what was asked for: refused, never read to the end.

Found in a security review (a server, a proxy or an emulator that answers more than asked): the
event-loop S3 client read a body of any size until its 30 s timeout, and a LIST answer of
2,000,000 keys was accepted for ``max-keys=1000``. Now every body the loop client reads has a
limit (an object's ``max_object_bytes``, a listing's from its ``max_keys``, an error document's
64 KiB), and every store's ``list_page`` refuses a page with more than ``max_keys`` entries
(:class:`~langgraph_handoff.errors.ResponseTooLargeError`), or, where the client library
streams the listing (obstore), never returns more. Each server here is a scripted asyncio
server on loopback (tests/stores/test_loop_http.py's ``Scripted``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import boto3
import pytest

from langgraph_handoff.errors import InvalidConfigError, ResponseTooLargeError, UnknownOutcomeError
from langgraph_handoff.stores.base import StoreBase
from langgraph_handoff.stores.local import LocalStore
from langgraph_handoff.stores.memory import MemoryStore
from langgraph_handoff.stores.s3_compat import EtagQuoting
from langgraph_handoff.stores.s3_loop import LoopS3, StaticKeys, list_body_limit
from langgraph_handoff.stores.sigv4 import Keys
from tests.stores.test_loop_http import CHUNKED, Scripted, answer
from tests.stores.test_s3_loop import _entry, _listing

SESSION = boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret" * 6, region_name="us-east-1")


def _wire(server: Scripted, **kwargs: Any) -> LoopS3:
    keys = StaticKeys(Keys("A", "s"))
    return LoopS3("b", "p/", endpoint_url=server.url, region="us-east-1", keys=keys, quoting=EtagQuoting(), **kwargs)


def _sized(status: bytes, body: bytes) -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Length: %d\r\n\r\n" % (status, len(body)) + body


THREE_KEYS = _listing(_entry(b"p/a"), _entry(b"p/b"), _entry(b"p/c"))


# -- the event-loop client -------------------------------------------------------------------------


async def test_a_listing_with_more_keys_than_asked_for_is_refused_not_retried() -> None:
    async def three(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(writer, _sized(b"200 OK", THREE_KEYS))

    async with Scripted(three) as server:
        wire = _wire(server)
        assert len((await wire.list_page("", max_keys=3)).items) == 3
        with pytest.raises(ResponseTooLargeError, match="answered 3 keys for a page of at most 2"):
            await wire.list_page("", max_keys=2)
        await wire.aclose()
    assert len(server.requests) == 2 and b"max-keys=2" in server.requests[1]


async def test_a_listing_without_end_stops_at_what_max_keys_entries_can_take() -> None:
    """A chunked listing that never ends (the review's 2,000,000 keys, and more): refused once
    the body passes :func:`list_body_limit` of the page (144 KiB for 10 keys), at the first
    attempt, long before the 60 s timeout."""
    ended = asyncio.Event()
    entry = _entry(b"p/k" * 20)
    piece = b"%x\r\n" % len(entry) + entry + b"\r\n"

    async def endless(request: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(CHUNKED)
        start = b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        writer.write(b"%x\r\n" % len(start) + start + b"\r\n")
        try:
            while True:
                writer.write(piece)
                await writer.drain()
        except ConnectionError:
            ended.set()

    async with Scripted(endless) as server:
        wire = _wire(server, timeout=60.0)
        with pytest.raises(ResponseTooLargeError, match=r"LIST p/: the server answered with more than such a"):
            await wire.list_page("", max_keys=10)
        await asyncio.wait_for(ended.wait(), 30)  # a guard only: the server sees the close at once
        await wire.aclose()
    assert len(server.requests) == 1 and list_body_limit(10) == 64 * 1024 + 10 * 8 * 1024


async def test_an_object_over_max_object_bytes_is_refused_and_says_how_to_raise_it() -> None:
    async def sized(request: bytes, writer: asyncio.StreamWriter) -> None:
        size = int(request.split(b" ")[1].rsplit(b"/", 1)[1])
        await answer(writer, b'HTTP/1.1 200 OK\r\nETag: "e"\r\nContent-Length: %d\r\n\r\n' % size + b"v" * size)

    async with Scripted(sized) as server:
        wire = _wire(server, max_object_bytes=1000)
        got = await wire.get("1000")
        assert got is not None and len(got.body) == 1000
        with pytest.raises(ResponseTooLargeError, match="larger than max_object_bytes=1000") as refused:
            await wire.get("1001")
        assert "?max_object_bytes= in the store URL" in str(refused.value)
        await wire.aclose()
    assert len(server.requests) == 2  # not retried


async def test_an_error_document_over_its_limit_is_refused_not_retried() -> None:
    """A 503 is retried, but one whose body is larger than an error document (64 KiB) comes
    from something that is not an S3 server: refused at once, however large an object may be."""

    async def verbose(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(writer, _sized(b"503 Slow Down", b"<html>" + b"x" * 70_000))

    async with Scripted(verbose) as server:
        wire = _wire(server)
        with pytest.raises(ResponseTooLargeError, match="HTTP 503"):
            await wire.get("k")
        await wire.aclose()
    assert len(server.requests) == 1


async def test_an_oversized_answer_to_a_conditional_put_is_an_unknown_outcome() -> None:
    """The PUT was sent and may have been applied: the saver must re-read, as for any answer it
    cannot read."""

    async def chatty(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(writer, _sized(b"200 OK", b"x" * (2 << 20)))

    async with Scripted(chatty) as server:
        wire = _wire(server)
        with pytest.raises(UnknownOutcomeError, match="body of 2097152 bytes is over the 1048576 bytes"):
            await wire.put("k", b"v", if_none_match=True)
        await wire.aclose()


@pytest.mark.obstore
def test_max_object_bytes_reaches_the_loop_client_from_the_store_and_the_url() -> None:
    from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store
    from langgraph_handoff.stores.s3_loop import MAX_OBJECT_BYTES
    from langgraph_handoff.stores.urls import store_from_url

    endpoint = "http://127.0.0.1:9"
    default = ObstoreS3Store("agents", endpoint_url=endpoint, session=SESSION)
    given = ObstoreS3Store("agents", endpoint_url=endpoint, session=SESSION, max_object_bytes=2048)
    url = store_from_url(f"s3://agents/app?endpoint_url={endpoint}&max_object_bytes=4096", session=SESSION)
    try:
        assert default._wire is not None and default._wire.max_object_bytes == MAX_OBJECT_BYTES == 1 << 30
        assert given._wire is not None and given._wire.max_object_bytes == 2048
        assert url._wire.max_object_bytes == 4096  # type: ignore[attr-defined]
    finally:
        for store in (default, given, url):
            store.close()
    with pytest.raises(InvalidConfigError, match="max_object_bytes must be a positive whole number") as bad:
        store_from_url(f"s3://agents/app?endpoint_url={endpoint}&max_object_bytes=2GB", session=SESSION)
    assert "2GB" not in str(bad.value)  # a URL's value is never repeated
    with pytest.raises(InvalidConfigError, match="max_object_bytes applies to the obstore transport only"):
        store_from_url(f"s3://agents/app?endpoint_url={endpoint}&max_object_bytes=1&transport=boto3")


# -- every store's list_page -------------------------------------------------------------------------


async def test_the_boto3_store_refuses_a_page_with_more_keys_than_asked_for() -> None:
    from langgraph_handoff.stores.s3 import S3Store

    async def three(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(writer, _sized(b"200 OK", THREE_KEYS))

    async with Scripted(three) as server:
        store = S3Store("b", "p", client=SESSION.client("s3", endpoint_url=server.url))
        try:
            with pytest.raises(ResponseTooLargeError, match="answered 3 keys for a page of at most 2"):
                await asyncio.to_thread(store.list_page, "", max_keys=2)
        finally:
            store.close()


async def test_the_gcs_store_refuses_a_page_with_more_keys_than_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """google-cloud-storage stops asking for pages at ``max_results`` but yields every item of
    the page it got: 3 items for 2 were all returned."""
    from langgraph_handoff.stores.gcs import GCSStore

    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    items = [{"name": f"p/{k}", "generation": "1", "size": "1"} for k in "abc"]
    body = json.dumps({"kind": "storage#objects", "items": items}).encode()

    async def three(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(writer, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
            len(body), body))  # fmt: skip

    async with Scripted(three) as server:
        store = GCSStore("bkt", "p", endpoint_url=server.url, retry_timeout=0.3)
        try:
            assert len((await asyncio.to_thread(store.list_page, "", max_keys=3)).items) == 3
            with pytest.raises(ResponseTooLargeError, match="answered 3 keys for a page of at most 2"):
                await asyncio.to_thread(store.list_page, "", max_keys=2)
        finally:
            store.close()


@pytest.mark.obstore
async def test_the_obstore_listing_never_returns_more_than_asked_for() -> None:
    """obstore sends no ``max-keys`` and streams whatever the server lists (S3 answers up to
    1,000 keys for any page), so its page is cut at ``max_keys`` by design, and marked
    truncated: the next page starts after its last key."""
    from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store

    async def three(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(writer, _sized(b"200 OK", THREE_KEYS))

    async with Scripted(three) as server:
        store = ObstoreS3Store("b", "p", endpoint_url=server.url, session=SESSION, async_io="threads", max_retries=0)
        try:
            page = await asyncio.to_thread(store.list_page, "", max_keys=2)
        finally:
            store.close()
    assert ([i.key for i in page.items], page.truncated) == (["a", "b"], True)


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_a_local_page_holds_at_most_max_keys(kind: str, tmp_path: Any) -> None:
    store: StoreBase = MemoryStore() if kind == "memory" else LocalStore(str(tmp_path / "store"))
    for k in "abcde":
        store.put(f"p/{k}", b"x")
    page = store.list_page("p/", max_keys=2)
    assert ([i.key for i in page.items], page.truncated) == (["p/a", "p/b"], True)
    store.close()
