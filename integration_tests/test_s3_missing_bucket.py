"""A bucket that does not exist is a typed error on every request, on both S3 transports.

Found by hand on RGW before commit 'StoreNotFoundError': with a mistyped bucket, ``setup()`` said
the store "refuses conditional writes" and that two workers would fork a thread (the create-only
PUT's ``NoSuchBucket`` was read as a refused condition), a read on boto3 returned "no checkpoint"
(404 was read as a missing key), and obstore reported a compare-and-swap on it as a lost race.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from conftest import S3_ENDPOINT, _need_s3
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import StoreNotFoundError
from langgraph_handoff.stores import S3Store
from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store

TRANSPORTS: dict[str, Callable[[str], Any]] = {
    "boto3": lambda bucket: S3Store(bucket, prefix="p", endpoint_url=S3_ENDPOINT),
    "obstore": lambda bucket: ObstoreS3Store(bucket, prefix="p", endpoint_url=S3_ENDPOINT),
}


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_every_request_to_a_missing_bucket_says_so(transport: str) -> None:
    _need_s3()
    bucket = f"absent-{uuid.uuid4().hex[:12]}"
    store = TRANSPORTS[transport](bucket)
    calls: dict[str, Callable[[], Any]] = {
        "get": lambda: store.get("k"),
        "put": lambda: store.put("k", b"x"),
        "create-only put": lambda: store.put("k", b"x", if_none_match=True),
        "compare-and-swap": lambda: store.put("k", b"x", if_match="0" * 32),
        "list": lambda: store.list_page(""),
        "delete_many": lambda: store.delete_many(["a", "b"]),
    }
    try:
        for name, call in calls.items():
            with pytest.raises(StoreNotFoundError, match=f"bucket '{bucket}' does not exist") as caught:
                call()
            assert "create_bucket=True" in str(caught.value), name
    finally:
        store.close()


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_setup_and_reads_name_the_missing_bucket_not_an_unsafe_store(transport: str) -> None:
    _need_s3()
    bucket = f"absent-{uuid.uuid4().hex[:12]}"
    with ObjectStoreSaver(TRANSPORTS[transport](bucket)) as saver:
        with pytest.raises(StoreNotFoundError, match="does not exist"):
            saver.setup()
        with pytest.raises(StoreNotFoundError, match="does not exist"):
            saver.get_tuple({"configurable": {"thread_id": "t"}})
