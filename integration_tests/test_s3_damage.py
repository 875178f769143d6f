"""Damage is contained on Ceph RGW, both S3 transports: a truncated head and a stray
``heads/README.txt`` (a key outside our alphabet, written by someone else) are reported by every
walk, which goes on; the damaged thread is deleted without being read; the stray key survives.
Listing goes on past the stray key at a page boundary (``start_after`` of a key we never write).
The unit tests of the same behaviour are ``tests/checkpoint/test_damage.py``."""

from __future__ import annotations

import asyncio
import os
import time

import boto3
import pytest

from conftest import S3_BUCKET, S3_ENDPOINT, make_obstore_s3_store, make_s3_store
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import keys
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff.inspection import list_threads, verify_store
from tests.checkpoint.test_damage import _damage, _store_with

pytestmark = pytest.mark.s3

STRAY = "heads/README.txt"


@pytest.mark.parametrize("transport", ["boto3", "obstore"])
def test_a_damaged_head_and_a_stray_key_on_s3(transport: str) -> None:
    store = make_s3_store() if transport == "boto3" else make_obstore_s3_store()
    raw = boto3.client("s3", endpoint_url=S3_ENDPOINT, region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    try:
        _store_with(store)
        key = keys.head_key("bad", "")
        _damage(store, key, "truncated")
        raw.put_object(Bucket=S3_BUCKET, Key=store.prefix + STRAY, Body=b"# our notes\n")
        saver = ObjectStoreSaver(store, clock=lambda: time.time() + 3600)

        # the stray key sorts first ("R" < "b"): a page of one ends on it, and the next page
        # starts after it (obstore refused a start_after outside our alphabet)
        first = store.list_page("heads/", max_keys=1)
        assert [i.key for i in first.items] == [STRAY] and first.truncated
        after = store.list_page("heads/", start_after=STRAY, max_keys=1)
        assert [i.key for i in after.items] == [key]
        if transport == "obstore":  # the async API on the event loop lists past it too

            async def alist() -> list[str]:
                page = await store.alist_page("heads/", start_after=STRAY, max_keys=1)
                return [i.key for i in page.items]

            assert asyncio.run(alist()) == [key]

        found: list[DamagedObject] = []
        assert len(list(saver.list(None, on_damaged=found.append))) == 7
        assert [(d.key, d.reason) for d in found] == [(STRAY, "not_a_head"), (key, "truncated")]
        listing = list_threads(saver)
        assert [(d.key, d.reason) for d in listing.damaged] == [(STRAY, "not_a_head"), (key, "truncated")]
        assert sorted((p.key, p.kind) for p in verify_store(saver).problems) == [
            (STRAY, "foreign_object"),
            (key, "CorruptObjectError"),
        ]
        assert saver.migrate(dry_run=True).damaged == found
        swept = saver.sweep(default_ttl=1)
        assert {t.thread_id: t.status for t in swept.threads} == {"bad": "failed", "good": "deleted"}
        assert [(d.key, d.reason) for d in swept.damaged] == [(STRAY, "not_a_head"), (key, "truncated")]

        saver.delete_thread("bad")
        left = [i.key for i in store.list("heads/")] + [i.key for i in store.list("data/")]
        assert [k for k in left if "/good/" not in k] == [STRAY, key]  # the stray file, bad's tombstone
        assert saver.get_tuple({"configurable": {"thread_id": "bad"}}) is None
        assert raw.get_object(Bucket=S3_BUCKET, Key=store.prefix + STRAY)["Body"].read() == b"# our notes\n"
    finally:
        listed = raw.list_objects_v2(Bucket=S3_BUCKET, Prefix=store.prefix).get("Contents", [])
        for obj in listed:
            raw.delete_object(Bucket=S3_BUCKET, Key=obj["Key"])
        store.close()
