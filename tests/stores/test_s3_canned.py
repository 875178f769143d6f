"""Both S3 transports against a canned endpoint (tests/support/canned_s3.py), where every answer is chosen:

* each answer to a conditional PUT, and to idempotent requests, maps to the same typed error on
  both transports (a real server gives these answers only by timing: RGW answers some race
  losers with 500, or not, depending on load);
* the headers a service needs are sent: Tigris evaluates conditions on the leader only with
  ``X-Tigris-Consistent: true``; a caller's own ``headers`` are sent too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from langgraph_handoff.errors import (
    InvalidConfigError,
    PreconditionFailedError,
    StoreError,
    StoreUnavailableError,
    UnknownOutcomeError,
)
from langgraph_handoff.stores import ObstoreS3Store, S3Store
from langgraph_handoff.stores.s3_compat import default_headers
from tests.support.canned_s3 import canned_s3

#: boto3; obstore with its async API on the event loop (the default); obstore through its pool
TRANSPORTS = [
    pytest.param("boto3", id="boto3"),
    pytest.param("obstore", id="obstore", marks=pytest.mark.obstore),
    pytest.param("obstore-threads", id="obstore-threads", marks=pytest.mark.obstore),
]


def _store(endpoint: str, transport: str, headers: dict[str, str] | None = None) -> Any:
    """The boto3 or an obstore store on ``endpoint``, with one retry for idempotent calls."""
    session = boto3.Session(aws_access_key_id="AKID", aws_secret_access_key="secret" * 6)
    if transport == "boto3":
        config = Config(retries={"mode": "standard", "max_attempts": 1})
        client = session.client("s3", endpoint_url=endpoint, region_name="us-east-1", config=config)
        return S3Store("b", client=client, headers=headers, extra_retries=1)
    async_io = "threads" if transport == "obstore-threads" else "loop"
    return ObstoreS3Store(
        "b", endpoint_url=endpoint, session=session, headers=headers, max_retries=1, async_io=async_io
    )


@pytest.fixture(params=TRANSPORTS)
def canned_store(request: Any) -> Iterator[Any]:
    with canned_s3() as (endpoint, _):
        store = _store(endpoint, request.param)
        store.quoting.detect = False  # a 412 would trigger a HEAD: not what is tested here
        try:
            yield store
        finally:
            store.close()


@pytest.mark.parametrize(
    ("segment", "if_match", "expected"),
    [
        ("412", None, PreconditionFailedError),
        ("412", "e", PreconditionFailedError),
        ("409", None, PreconditionFailedError),  # AWS ConditionalRequestConflict
        ("409", "e", PreconditionFailedError),
        ("404", "e", PreconditionFailedError),  # If-Match on a missing key (moto)
        ("500", None, UnknownOutcomeError),  # RGW's answer to some race losers
        ("503", "e", UnknownOutcomeError),
        ("drop", "e", UnknownOutcomeError),  # the write may or may not have landed
        ("drop", None, UnknownOutcomeError),
        ("403", "e", StoreError),
    ],
)
async def test_conditional_put_outcomes(canned_store: Any, segment: str, if_match: str | None, expected: type) -> None:
    """Each answer to a conditional PUT maps to one typed error, the same on both transports and
    in both APIs: never a success, never a bare library exception."""
    kwargs: dict[str, Any] = {"if_match": if_match} if if_match else {"if_none_match": True}
    with pytest.raises(expected) as sync_err:
        canned_store.put(f"{segment}/k", b"x", **kwargs)
    with pytest.raises(expected) as async_err:
        await canned_store.aput(f"{segment}/k", b"x", **kwargs)
    assert type(sync_err.value) is type(async_err.value)
    if expected is StoreError:
        assert not isinstance(sync_err.value, UnknownOutcomeError | PreconditionFailedError)


@pytest.mark.parametrize("segment", ["503", "drop"])
async def test_idempotent_requests_fail_as_unavailable_after_retries(canned_store: Any, segment: str) -> None:
    with pytest.raises(StoreUnavailableError, match="kept failing"):
        canned_store.get(f"{segment}/k")
    with pytest.raises(StoreUnavailableError, match="kept failing"):
        await canned_store.aget(f"{segment}/k")
    with pytest.raises(StoreUnavailableError):
        canned_store.put(f"{segment}/k", b"x")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_caller_headers_reach_the_server(transport: str) -> None:
    with canned_s3() as (endpoint, seen):
        store = _store(endpoint, transport, {"X-Tigris-Consistent": "true"})
        store.put("200/k", b"x", if_none_match=True)
        store.get("200/k")
        await store.aput("200/k", b"x", if_none_match=True)
        await store.aget("200/k")
        await store.aclose()
    assert len(seen) == 4 and all(h.get("x-tigris-consistent") == "true" for h in seen), seen


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_no_extra_headers_elsewhere(transport: str) -> None:
    with canned_s3() as (endpoint, seen):
        store = _store(endpoint, transport, None)
        store.put("200/k", b"x")
        await store.aput("200/k", b"x")
        await store.aclose()
    assert len(seen) == 2 and all("x-tigris-consistent" not in h for h in seen), seen


def test_tigris_endpoints_get_the_consistency_header() -> None:
    assert default_headers("https://fly.storage.tigris.dev") == {"X-Tigris-Consistent": "true"}
    assert default_headers("https://t3.storage.dev") == {"X-Tigris-Consistent": "true"}
    assert default_headers("https://eviltigris.dev.example.com") == {}
    assert default_headers("https://t3.storage.dev", {"X-Tigris-Consistent": "false"}) == {
        "X-Tigris-Consistent": "false"
    }


@pytest.mark.obstore
def test_a_proxy_keeps_the_async_api_on_the_thread_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop client speaks to no proxy: with ``async_io="auto"`` a proxy that applies to the
    endpoint sends the async API through obstore (which is configured for it), and ``NO_PROXY``
    for the endpoint brings the loop client back."""
    session = boto3.Session(aws_access_key_id="AKID", aws_secret_access_key="secret" * 6)
    for name in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    endpoint = "http://127.0.0.1:9"
    assert ObstoreS3Store("b", endpoint_url=endpoint, session=session)._wire is not None
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    assert ObstoreS3Store("b", endpoint_url=endpoint, session=session)._wire is None
    assert ObstoreS3Store("b", endpoint_url=endpoint, session=session, async_io="loop")._wire is not None
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert ObstoreS3Store("b", endpoint_url=endpoint, session=session)._wire is not None
    with pytest.raises(InvalidConfigError, match="async_io"):
        ObstoreS3Store("b", endpoint_url=endpoint, session=session, async_io="uvloop")
