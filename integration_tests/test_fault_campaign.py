"""The fault campaign's short run, in the test command: one seeded round on each store and S3
transport, through the fault proxy in front of Ceph RGW, Azurite and fake-gcs-server
(``tests/support/fault_campaign.py`` says what a round does and what the checker fails on).
``scripts/faults --minutes N`` is the long run."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from conftest import S3_BUCKET, S3_ENDPOINT, _need_s3, need_azurite, need_gcs_emulator
from langgraph_handoff.stores import AzureBlobStore, ObstoreS3Store, S3Store, StoreBase
from langgraph_handoff.stores.gcs import GCSStore
from langgraph_handoff.stores.obstore_azure import AZURITE_ACCOUNT, AZURITE_KEY
from tests.support.fault_campaign import run_round
from tests.support.fault_proxy import fault_proxy

pytestmark = [pytest.mark.s3, pytest.mark.heavy]
SEED = 20261207


def _maker(kind: str) -> tuple[str, Callable[[str], StoreBase]]:
    prefix = f"t-{uuid.uuid4().hex}"
    if kind in ("s3-boto3", "s3-obstore", "s3-loop"):
        _need_s3()
        assert S3_ENDPOINT is not None
        if kind == "s3-boto3":
            return S3_ENDPOINT, lambda url: S3Store(S3_BUCKET, prefix, endpoint_url=url, create_bucket=True)
        io = "loop" if kind == "s3-loop" else "threads"
        return S3_ENDPOINT, lambda url: ObstoreS3Store(
            S3_BUCKET, prefix, endpoint_url=url, create_bucket=True, async_io=io
        )
    if kind == "azure":
        endpoint = need_azurite()
        base, account = endpoint.rsplit("/", 1)
        return base, lambda url: AzureBlobStore(
            "lgh-tests", prefix, account_name=AZURITE_ACCOUNT, account_key=AZURITE_KEY,
            endpoint_url=f"{url}/{account}", create_container=True,
        )  # fmt: skip
    endpoint = need_gcs_emulator()
    return endpoint, lambda url: GCSStore("lgh-tests", prefix, endpoint_url=url, create_bucket=True)


@pytest.fixture(params=["s3-boto3", "s3-obstore", "s3-loop", "azure", "gcs"])
def target(request: pytest.FixtureRequest) -> Iterator[tuple[str, Callable[[str], StoreBase], bool]]:
    upstream, make = _maker(request.param)
    yield upstream, make, request.param == "s3-loop"


def test_a_short_seeded_round_loses_and_forks_nothing(target: tuple[str, Callable[[str], StoreBase], bool]) -> None:
    upstream, make, use_async = target
    with fault_proxy(upstream) as proxy:
        report = run_round(proxy, make, seed=SEED, use_async=use_async)
    assert sum(report.injected.values()) > 0 and report.acknowledged > 0
    assert report.failures == [], report.failures
