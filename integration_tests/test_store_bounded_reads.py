"""Every remote store reads a GET's body up to its ``max_object_bytes`` and no further: an
object larger than that (put there by someone else: the package never writes one) is refused
with ``ResponseTooLargeError`` before it is held in memory, on the sync path of every transport
(the event-loop S3 client's own limit is pinned in ``tests/stores/test_loop_http.py``). To a
read of the saver that refusal is damage to that key (``tests/checkpoint/test_hostile_objects.py``
``test_an_object_too_large_to_fetch_is_its_threads_damage``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conftest import make_obstore_s3_store, make_s3_store, need_gcs_emulator
from integration_tests.test_azure_store import make_azure_store
from langgraph_handoff.errors import ResponseTooLargeError
from langgraph_handoff.stores import StoreBase
from tests.support.gcs_helpers import make_gcs_store

pytestmark = pytest.mark.s3

LIMIT = 4096


@pytest.fixture(params=["s3-boto3", "s3-obstore", "azure", "gcs"])
def server_store(request: pytest.FixtureRequest) -> Iterator[StoreBase]:
    makers = {
        "s3-boto3": make_s3_store,
        "s3-obstore": lambda: make_obstore_s3_store(max_object_bytes=LIMIT),
        "azure": make_azure_store,
        "gcs": lambda: make_gcs_store(need_gcs_emulator()),
    }
    store = makers[request.param]()
    store.max_object_bytes = LIMIT
    yield store
    store.close()


def test_a_body_past_max_object_bytes_is_refused_and_one_at_it_is_read(server_store: StoreBase) -> None:
    server_store.put("big/at-limit", b"a" * 4096)
    server_store.put("big/past-limit", b"b" * 4097)
    got = server_store.get("big/at-limit")
    assert got is not None and got.body == b"a" * 4096
    with pytest.raises(ResponseTooLargeError, match="past max_object_bytes=4096"):
        server_store.get("big/past-limit")
    assert server_store.get("big/missing") is None


async def test_the_async_path_refuses_it_too(server_store: StoreBase) -> None:
    server_store.put("big/past-limit-async", b"c" * 5000)
    with pytest.raises(ResponseTooLargeError):
        await server_store.aget("big/past-limit-async")
