"""A stuck server (it accepts connections and never answers) fails an operation within the
store's deadline, on every transport. It held a boto3 caller for 1,204 s (20 sends of 60 s:
botocore's retries inside ours), obstore for 60 to 151 s and the event-loop client for 153 s.

The server here is a listening socket that reads nothing: the kernel completes every connect,
no request is ever answered. The limits are small (1 s a request, 3 s a deadline) so the test is
quick; the bound checked has room for a loaded machine, and is far below what it was."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Iterator

import boto3
import pytest

from langgraph_handoff.errors import StoreUnavailableError
from langgraph_handoff.stores import StoreBase
from langgraph_handoff.stores.timeouts import DEFAULT, Timeouts

LIMITS = {"connect_timeout": "1s", "timeout": "1s", "deadline": "3s"}
#: the deadline, one connect time-out, and room for a loaded CI machine
BOUND = 3 + 1 + 6


@pytest.fixture
def stuck() -> Iterator[str]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def _boto3(url: str) -> StoreBase:
    from langgraph_handoff.stores import S3Store

    return S3Store("b", endpoint_url=url, **LIMITS)


def _obstore(async_io: str) -> Callable[[str], StoreBase]:
    def make(url: str) -> StoreBase:
        from langgraph_handoff.stores import ObstoreS3Store

        session = boto3.Session(aws_access_key_id="AKID", aws_secret_access_key="secret" * 6)
        return ObstoreS3Store("b", endpoint_url=url, session=session, async_io=async_io, **LIMITS)

    return make


def _azure(url: str) -> StoreBase:
    from langgraph_handoff.stores import AzureBlobStore

    key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
    return AzureBlobStore("c", account_name="acct", account_key=key, endpoint_url=f"{url}/acct", **LIMITS)


def _gcs(url: str) -> StoreBase:
    from langgraph_handoff.stores.gcs import GCSStore

    return GCSStore("b", endpoint_url=url, **LIMITS)


STORES = [
    pytest.param(_boto3, False, id="boto3"),
    pytest.param(_obstore("threads"), False, id="obstore", marks=pytest.mark.obstore),
    pytest.param(_obstore("loop"), True, id="obstore-loop", marks=pytest.mark.obstore),
    pytest.param(_azure, False, id="azure", marks=pytest.mark.obstore),
    pytest.param(_gcs, False, id="gcs"),
]


@pytest.mark.heavy
@pytest.mark.parametrize(("make", "use_async"), STORES)
def test_a_stuck_server_fails_a_read_within_the_deadline(
    stuck: str, make: Callable[[str], StoreBase], use_async: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKID")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret" * 6)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "test")
    store = make(stuck)
    started = time.monotonic()
    try:
        with pytest.raises(StoreUnavailableError):
            if use_async:
                asyncio.run(store.aget("k"))
            else:
                store.get("k")
    finally:
        elapsed = time.monotonic() - started
        store.close()
    assert elapsed < BOUND, f"{elapsed:.1f} s"


def test_the_default_limits_bound_a_stuck_server_well_under_a_minute() -> None:
    assert Timeouts(connect=5.0, request=15.0, deadline=30.0) == DEFAULT
    assert DEFAULT.deadline + DEFAULT.connect < 60
