"""S3Store against real Ceph RGW: the store contract, atomic CAS under racing threads, and the
server deviations (ETag quoting, HTTP 500 for lost races)."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from conftest import S3_BUCKET, S3_ENDPOINT, make_obstore_s3_store, make_s3_store
from langgraph_handoff.errors import PreconditionFailedError, StoreError
from langgraph_handoff.stores import S3Store, StoreBase
from tests.support.race_helpers import race_cas
from tests.support.store_contract import StoreContract


class TestS3StoreContract(StoreContract):
    @pytest.fixture
    def contract_store(self, s3_store: S3Store) -> StoreBase:
        return s3_store


def test_compare_and_swap_is_atomic_under_racing_threads() -> None:
    store = make_s3_store(max_workers=16)
    try:
        tally = race_cas(store, rounds=30, racers=6)
    finally:
        store.close()
    assert tally["won"] == 30 and tally["lost-412"] + tally["unknown-5xx"] == 150


@pytest.mark.parametrize("make", [make_s3_store, make_obstore_s3_store], ids=["boto3", "obstore"])
def test_etag_quoting_is_learned(make: Any) -> None:
    """Both transports learn the If-Match form from a 412 whose object has the very ETag sent."""
    store = make(etag_quoting="auto")
    try:
        store.quoting.quoted = True  # a wrong first guess: RGW only matches unquoted ETags
        etag = store.put("q", b"1", if_none_match=True)
        assert store.put("q", b"2", if_match=etag) != etag
        assert store.quoting.quoted is False and store.quoting.detect is False
        with pytest.raises(PreconditionFailedError):
            store.put("q", b"3", if_match=etag)  # a really stale ETag still loses
    finally:
        store.close()


def test_delete_if_match_is_not_relied_upon() -> None:
    """RGW ignores If-Match on DeleteObject (a stale ETag still deletes). Documented, and the
    saver never issues a conditional delete; this test pins the server behaviour we design for."""
    store = make_s3_store()
    try:
        store.put("d", b"1")
        store.delete("d", if_match="0" * 32)
        assert store.get("d") is None
    finally:
        store.close()


def test_refused_requests_raise_a_typed_error() -> None:
    """A 403 is not retried and not a bare botocore ClientError: StoreError says what to check."""
    client = boto3.client(
        "s3", endpoint_url=S3_ENDPOINT, aws_access_key_id="WRONGKEY0000", aws_secret_access_key="wrong" * 8
    )
    store = S3Store(S3_BUCKET, prefix=f"t-{uuid.uuid4().hex}", client=client)
    try:
        for call in (lambda: store.get("k"), lambda: store.put("k", b"x"), lambda: store.delete("k")):
            with pytest.raises(StoreError, match="credentials"):
                call()
    finally:
        store.close()
