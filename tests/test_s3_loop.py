"""The S3 operations on the event loop (langgraph_handoff/stores/s3_loop.py) and how
ObstoreS3Store configures them: listings that are not listings, proxies, credentials fetched
off the loop, obstore's duration strings, and what a 409 means. Each test here was found in an
adversarial review and reproduced its defect before the fix; its docstring tells the story."""

from __future__ import annotations

import asyncio
from typing import Any

import boto3
import pytest

from langgraph_handoff.errors import StoreError
from langgraph_handoff.stores.obstore_s3 import BotoCredentials, ObstoreS3Store
from langgraph_handoff.stores.s3_compat import EtagQuoting
from langgraph_handoff.stores.s3_loop import LoopS3, StaticKeys, parse_list, proxy_applies
from langgraph_handoff.stores.sigv4 import Keys
from tests.test_loop_http import Scripted, answer

# -- 6. listing: an unexpected document reads as an empty listing ---------------------------------


@pytest.mark.parametrize(
    "body",
    [
        # the namespace without its trailing slash (seen on some S3 gateways)
        b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01"><IsTruncated>false</IsTruncated>'
        b"<Contents><Key>p/a</Key><ETag>&quot;e&quot;</ETag><Size>1</Size></Contents></ListBucketResult>",
        # a 200 that is not a listing at all (a gateway's error document)
        b"<Error><Code>InternalError</Code><Message>try again</Message></Error>",
    ],
    ids=["other-namespace", "not-a-listing"],
)
def test_an_unreadable_listing_is_an_error_not_an_empty_page(body: bytes) -> None:
    """``parse_list`` picks the namespace only when it is exactly S3's and never checks the root
    element: any other document is an empty, complete page, and the saver concludes that the
    thread has no checkpoints (the opposite of "never silently lose data")."""
    try:
        page = parse_list(body, 2)
    except StoreError:
        return
    except Exception as exc:
        if type(exc).__name__ == "ParseError":
            return
        raise
    assert [item.key for item in page.items] == ["a"], page


# -- 8. proxies: ALL_PROXY is used by obstore, ignored by proxy_applies ---------------------------


@pytest.mark.obstore
def test_all_proxy_keeps_the_async_api_on_the_thread_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """obstore (reqwest) sends requests through ``ALL_PROXY`` (checked: a listening socket set as
    ALL_PROXY receives obstore's ``GET http://endpoint/b/k``). ``proxy_applies`` only looks for
    the URL's scheme in ``getproxies()``, which files ALL_PROXY under ``"all"``: the loop client
    then connects directly where only the proxy is reachable, and the async API fails while the
    sync API works."""
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALL_PROXY", "http://proxy.invalid:3128")
    assert proxy_applies("http://10.1.2.3:7480")
    session = boto3.Session(aws_access_key_id="AKID", aws_secret_access_key="secret" * 6)
    assert ObstoreS3Store("b", endpoint_url="http://10.1.2.3:7480", session=session)._wire is None


# -- 9. credentials are renewed on the event loop ---------------------------------------------------


class _RefreshableCreds:
    """botocore's RefreshableCredentials as far as BotoCredentials looks: ``refresh_needed``
    exists, and ``get_frozen_credentials`` may do network I/O (STS, IMDS, SSO, a subprocess)."""

    def __init__(self) -> None:
        self.called_on_a_running_loop: list[bool] = []

    def refresh_needed(self) -> bool:
        return True

    def get_frozen_credentials(self) -> Any:
        self.called_on_a_running_loop.append(asyncio._get_running_loop() is not None)
        from botocore.credentials import ReadOnlyCredentials

        return ReadOnlyCredentials("AKID", "secret" * 6, "token")


async def test_refreshable_credentials_are_not_fetched_on_the_event_loop() -> None:
    """``LoopS3._send`` calls ``BotoCredentials.keys()`` inline; every CREDENTIAL_TTL (and on the
    first request) that calls botocore's ``get_frozen_credentials``, which refreshes
    synchronously (an STS/IMDS round trip, or a credential_process subprocess) and stalls every
    coroutine of the loop meanwhile. It should be fetched off the loop (``asyncio.to_thread``)
    or ahead of expiry."""
    creds = _RefreshableCreds()
    session = type("Session", (), {"get_credentials": lambda self: creds})()
    keys = BotoCredentials(session)

    async def ok(request: bytes, writer: asyncio.StreamWriter) -> None:
        await answer(writer, b'HTTP/1.1 200 OK\r\nETag: "e"\r\nContent-Length: 1\r\n\r\nx')

    async with Scripted(ok) as server:
        wire = LoopS3("b", "", endpoint_url=server.url, region="us-east-1", keys=keys, quoting=EtagQuoting())
        assert (await wire.get("k")) is not None
        keys._keys_renew_at = 0.0  # the TTL passed
        assert (await wire.get("k")) is not None
        await wire.aclose()
    assert creds.called_on_a_running_loop and not any(creds.called_on_a_running_loop)


# -- 10. obstore timeouts the loop path cannot read -------------------------------------------------


@pytest.mark.obstore
@pytest.mark.parametrize("timeout", ["1m30s", "1min", "30sec"])
def test_obstore_durations_are_accepted_by_the_loop_path(timeout: str) -> None:
    """``timeout`` is obstore's duration string (humantime): ``"1m30s"``, ``"1min"``, ``"30sec"``
    work with ``async_io="threads"`` but ``_seconds`` refuses them, so the same store
    configuration fails only because the default async_io is the loop."""
    session = boto3.Session(aws_access_key_id="AKID", aws_secret_access_key="secret" * 6)
    ObstoreS3Store("b", endpoint_url="http://127.0.0.1:9", session=session, timeout=timeout, async_io="threads").close()
    ObstoreS3Store("b", endpoint_url="http://127.0.0.1:9", session=session, timeout=timeout, async_io="loop").close()


# -- 11. a 409 is taken as a hint about ETag quoting ----------------------------------------------


async def test_a_409_on_if_match_does_not_flip_the_etag_quoting() -> None:
    """``LoopS3.put`` runs the quoting detection (HEAD, then maybe flip and PUT again) on 409
    as well as 412. A 409 (AWS ConditionalRequestConflict: a concurrent conditional write) says
    nothing about quoting; while the concurrent write is in flight the HEAD still shows our
    ETag, so the store flips to the quoted form *for good* and sends a second PUT. The sync
    obstore path maps 409 straight to PreconditionFailedError. On a server that only matches
    unquoted ETags (RGW) every later compare-and-swap would then fail."""
    from langgraph_handoff.errors import PreconditionFailedError

    async def conflict(request: bytes, writer: asyncio.StreamWriter) -> None:
        if request.startswith(b"HEAD"):
            await answer(writer, b'HTTP/1.1 200 OK\r\nETag: "e1"\r\nContent-Length: 0\r\n\r\n')
        else:
            body = b"<Error><Code>ConditionalRequestConflict</Code></Error>"
            await answer(writer, b"HTTP/1.1 409 Conflict\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    async with Scripted(conflict) as server:
        quoting = EtagQuoting("auto")
        wire = LoopS3(
            "b", "", endpoint_url=server.url, region="us-east-1", keys=StaticKeys(Keys("A", "s")), quoting=quoting
        )
        with pytest.raises(PreconditionFailedError):
            await wire.put("k", b"x", if_match="e1")
        await wire.aclose()
    puts = [r for r in server.requests if r.startswith(b"PUT")]
    assert (len(puts), quoting.form("e1")) == (1, "e1"), (len(puts), quoting.form("e1"))
