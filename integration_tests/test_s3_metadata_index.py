"""The metadata index on Ceph RGW, both S3 transports: a store-wide filtered list costs
requests in proportion to the matches (counted), finds what the full walk finds, and a store
written without the index is walked until ``rebuild_index`` declares it complete."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import make_obstore_s3_store, make_s3_store
from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.stores import CountingStore
from tests.support.saver_helpers import put

pytestmark = pytest.mark.s3


def _ids(tuples: Any) -> list[tuple[str, str]]:
    return [(t.config["configurable"]["thread_id"], t.checkpoint["id"]) for t in tuples]


@pytest.mark.parametrize("transport", ["boto3", "obstore"])
def test_filtered_list_on_rgw_reads_only_the_matches(transport: str) -> None:
    store = make_s3_store() if transport == "boto3" else make_obstore_s3_store()
    try:
        old = ObjectStoreSaver(store, layout=Layout(indexed_metadata=()))  # an older release
        for i in range(60):
            first = put(old, f"t{i:03}", None, 1, user_id=f"u{i % 6}")
            put(old, f"t{i:03}", first, 2, user_id=f"u{i % 6}")
        counted = CountingStore(store)
        walk = _ids(t for t in ObjectStoreSaver(counted).list(None) if t.metadata.get("user_id") == "u4")
        counted.reset()
        assert _ids(ObjectStoreSaver(counted).list(None, filter={"user_id": "u4"})) == walk
        # not declared complete: every thread's head read (and the marker), writes listed for
        # the 10 threads that match only
        assert (counted.snapshot()["GET"], counted.snapshot()["LIST"]) == (1 + 60, 1 + 10)
        report = ObjectStoreSaver(store).rebuild_index()
        assert (report.namespaces, report.created) == (60, 60)
        counted.reset()
        assert _ids(ObjectStoreSaver(counted).list(None, filter={"user_id": "u4"})) == walk
        # 1 GET of meta/index, 1 LIST of the value's entries, 1 GET + 1 LIST per matching thread
        assert counted.requests == 2 + 2 * 10
        assert verify_store(ObjectStoreSaver(store)).problems == []
    finally:
        store.delete_many([i.key for i in store.list("")])
        store.close()
