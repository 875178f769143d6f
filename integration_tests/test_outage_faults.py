"""What a caller sees when the network fails, through the fault proxy in front of Ceph RGW, on
each S3 transport: an outage is ``StoreUnavailableError`` (never ``ConflictError`` advice for a
contended namespace), and a body cut short is retried, never called corruption."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from conftest import S3_BUCKET, S3_ENDPOINT, _need_s3
from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff.errors import PreconditionFailedError, StoreUnavailableError
from langgraph_handoff.stores import ObstoreS3Store, S3Store, StoreBase
from tests.checkpoint.test_migrate import stamped
from tests.support.fault_proxy import FaultProxy, Request, fault_proxy
from tests.support.migrate_helpers import fixture_into, seen

pytestmark = pytest.mark.s3
TRANSPORTS = ["boto3", "obstore", "loop"]


@pytest.fixture(scope="module")
def proxy() -> Iterator[FaultProxy]:
    _need_s3()
    assert S3_ENDPOINT is not None
    with fault_proxy(S3_ENDPOINT) as p:
        yield p


@pytest.fixture(params=TRANSPORTS)
def saver(request: pytest.FixtureRequest, proxy: FaultProxy) -> Iterator[ObjectStoreSaver]:
    prefix = f"t-{uuid.uuid4().hex}"
    store: StoreBase
    if request.param == "boto3":
        store = S3Store(S3_BUCKET, prefix=prefix, endpoint_url=proxy.url, create_bucket=True)
    else:
        async_io = "loop" if request.param == "loop" else "threads"
        store = ObstoreS3Store(S3_BUCKET, prefix=prefix, endpoint_url=proxy.url, create_bucket=True, async_io=async_io)
    saver = ObjectStoreSaver(store, layout=Layout(max_attempts=3, backoff=0.001))
    saver.setup()
    saver.transport = request.param  # type: ignore[attr-defined]
    try:
        yield saver
    finally:
        proxy.clear()
        store.close()


def _put(saver: ObjectStoreSaver, config: dict[str, Any], step: int) -> Any:
    meta: Any = {"source": "loop", "step": step}
    if saver.transport == "loop":  # type: ignore[attr-defined]
        return asyncio.run(saver.aput(config, empty_checkpoint(), meta, {}))
    return saver.put(config, empty_checkpoint(), meta, {})


def _get(saver: ObjectStoreSaver, config: dict[str, Any]) -> Any:
    if saver.transport == "loop":  # type: ignore[attr-defined]
        return asyncio.run(saver.aget_tuple(config))
    return saver.get_tuple(config)


def _head_put(r: Request) -> bool:
    return "/heads/" in r.path and r.method == "PUT"


def _head_get(r: Request) -> bool:
    return "/heads/" in r.path and r.method == "GET"


def test_head_writes_that_get_no_answer_are_an_outage_not_contention(
    saver: ObjectStoreSaver, proxy: FaultProxy
) -> None:
    config = _put(saver, {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, -1)
    proxy.add("status", _head_put, times=1000, status=503)
    with pytest.raises(StoreUnavailableError, match="answered none of 3 compare-and-swap attempts"):
        _put(saver, config, 0)
    proxy.clear()
    _put(saver, config, 0)  # the thread is usable once the store answers again


def test_a_head_cut_short_once_is_read_again(saver: ObjectStoreSaver, proxy: FaultProxy) -> None:
    config = _put(saver, {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, -1)
    fresh = ObjectStoreSaver(saver.store)  # no cached head: the read goes to the store
    fresh.transport = saver.transport  # type: ignore[attr-defined]
    fault = proxy.add("cut", _head_get)
    got = _get(fresh, config)
    assert (
        fault.fired == 1
        and got is not None
        and got.config["configurable"]["checkpoint_id"] == config["configurable"]["checkpoint_id"]
    )


def test_a_head_cut_short_under_a_matching_length_is_read_again(saver: ObjectStoreSaver, proxy: FaultProxy) -> None:
    """The answer says it is whole (its ``Content-Length`` is the cut body's), so only the
    envelope, which records the object's length, shows the cut: the read is made again."""
    config = _put(saver, {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, -1)
    fresh = ObjectStoreSaver(saver.store)
    fresh.transport = saver.transport  # type: ignore[attr-defined]
    fault = proxy.add("shorten", _head_get)
    got = _get(fresh, config)
    assert fault.fired == 1 and got is not None


def test_a_head_cut_short_every_time_is_an_outage_not_corruption(saver: ObjectStoreSaver, proxy: FaultProxy) -> None:
    config = _put(saver, {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, -1)
    fresh = ObjectStoreSaver(saver.store)
    fresh.transport = saver.transport  # type: ignore[attr-defined]
    proxy.add("shorten", _head_get, times=1000)
    with pytest.raises(StoreUnavailableError, match="arrived cut short 3 times"):
        _get(fresh, config)
    proxy.clear()
    assert _get(fresh, config) is not None


def _listing(r: Request) -> bool:
    return r.method == "GET" and "list-type=2" in r.path


def _batch_delete(r: Request) -> bool:
    """A batch delete: S3's DeleteObjects (``POST ?delete``), or one DELETE of a key."""
    return (r.method == "POST" and r.path.endswith("?delete")) or r.method == "DELETE"


@pytest.mark.parametrize("kind", ["reset", "cut", "lose"])
def test_a_listing_that_fails_once_is_retried(saver: ObjectStoreSaver, proxy: FaultProxy, kind: str) -> None:
    for i in range(3):
        saver.store.put(f"x/k{i}", b"v")
    fault = proxy.add(kind, _listing)
    page = saver.store.list_page("x/")
    assert fault.fired == 1 and [i.key for i in page.items] == ["x/k0", "x/k1", "x/k2"]


@pytest.mark.parametrize("kind", ["reset", "lose", "status"])
def test_a_batch_delete_that_fails_once_is_retried(saver: ObjectStoreSaver, proxy: FaultProxy, kind: str) -> None:
    for i in range(3):
        saver.store.put(f"y/k{i}", b"v")
    fault = proxy.add(kind, _batch_delete)
    saver.store.delete_many([f"y/k{i}" for i in range(3)])
    assert fault.fired == 1 and saver.store.list_page("y/").items == []


def test_a_get_resumed_after_a_cut_and_answered_416_starts_over(saver: ObjectStoreSaver, proxy: FaultProxy) -> None:
    """obstore resumes a body cut off with a ``Range`` request; a server whose object changed in
    between answers it 416. The read starts over instead of failing."""
    saver.store.put("z/k", b"v" * 200_000)
    proxy.add("cut", lambda r: r.method == "GET" and r.path.endswith("/z/k") and "range" not in r.headers)
    proxy.add("status", lambda r: r.method == "GET" and "range" in r.headers, status=416)
    got = saver.store.get("z/k")
    assert got is not None and got.body == b"v" * 200_000


def _bucket_request(r: Request) -> bool:
    """``HEAD /bucket`` or ``PUT /bucket``: the requests of ``ensure_bucket``."""
    return r.method in ("HEAD", "PUT") and r.path.rstrip("/").split("?")[0] == f"/{S3_BUCKET}"


@pytest.mark.parametrize("transport", ["boto3", "obstore"])
@pytest.mark.parametrize("kind", ["reset", "lose"])
def test_creating_the_bucket_through_an_outage_is_a_typed_error(proxy: FaultProxy, transport: str, kind: str) -> None:
    """``create_bucket=True`` (``ensure_bucket``) let botocore's ``ConnectionClosedError`` out
    when the connection kept failing: the fault campaign saw a racing worker die of it while
    starting. It is ``StoreUnavailableError`` now, and the store starts once the network is back."""
    prefix = f"t-{uuid.uuid4().hex}"
    make = S3Store if transport == "boto3" else ObstoreS3Store
    proxy.add(kind, _bucket_request, times=1000)
    try:
        with pytest.raises(StoreUnavailableError, match="bucket"):
            make(S3_BUCKET, prefix=prefix, endpoint_url=proxy.url, create_bucket=True)
    finally:
        proxy.clear()
    make(S3_BUCKET, prefix=prefix, endpoint_url=proxy.url, create_bucket=True).close()


def _new_segment_put(r: Request) -> bool:
    """A create-only PUT of a segment (``data/{T}/{NS}/s/...``), as ``migrate`` writes them."""
    return r.method == "PUT" and "/s/" in r.path and "if-none-match" in r.headers


def test_a_migrated_segment_whose_answer_was_lost_is_settled(
    saver: ObjectStoreSaver, proxy: FaultProxy, tmp_path: Path
) -> None:
    """``migrate`` writes a namespace's rewritten segments create-only under new keys. An answer
    lost after the store committed one failed the thread with ``UnknownOutcomeError`` (the
    obstore clients), or with the 412 that botocore's own re-send of the committed PUT met; the
    fault campaign saw it. The same PUT sent again settles it: the thread is migrated, once."""
    fixture_into(saver.store, tmp_path)
    migrating = ObjectStoreSaver(saver.store, migrations=stamped(), layout=Layout(backoff=0.001))
    before = seen(migrating, ["long"])
    fault = proxy.add("lose", _new_segment_put)
    result = migrating.migrate_thread("long")
    assert fault.fired == 1 and (result.status, result.error) == ("migrated", None)
    assert seen(ObjectStoreSaver(saver.store, migrations=stamped()), ["long"]) == before


def test_a_412_whose_etag_check_fails_is_a_lost_race_not_botocores_error(proxy: FaultProxy) -> None:
    """After a 412 on ``If-Match``, ``S3Store`` asks the object's ETag (``HEAD``) to tell the
    server's ETag quoting from a lost race. A reset there let botocore's ``ConnectionClosedError``
    out of the conditional put (the fault campaign's racing processes saw it); the 412 now stands
    as a lost race (``PreconditionFailedError``: the caller re-reads), and the store goes on."""
    store = S3Store(S3_BUCKET, prefix=f"t-{uuid.uuid4().hex}", endpoint_url=proxy.url, create_bucket=True)
    etag = store.put("k", b"v")
    fault = proxy.add("reset", lambda r: r.method == "HEAD" and r.path.split("?")[0].endswith("/k"), times=1000)
    try:
        with pytest.raises(PreconditionFailedError):
            store.put("k", b"w", if_match="0123456789abcdef0123456789abcdef")
        assert fault.fired > 0
    finally:
        proxy.clear()
    assert store.put("k", b"w", if_match=etag) and store.get("k").body == b"w"  # type: ignore[union-attr]
    store.close()


@pytest.mark.parametrize("kind", ["reset", "lose", "status", "cut"])
def test_creating_the_azure_container_rides_out_one_failure(kind: str) -> None:
    """``create_container=True`` sent its one Create Container request once: a reset, a lost
    answer or a 500 made the store's constructor fail with ``StoreUnavailableError`` (the fault
    campaign's sessions scenario saw a worker fail to start so, on Azurite), and a 409 whose
    body was cut off let ``ConnectionResetError`` out. The request is idempotent (409: it
    exists) and is sent again now, within the store's deadline; a 409 is never read."""
    from conftest import need_azurite
    from langgraph_handoff.stores import AzureBlobStore
    from langgraph_handoff.stores.obstore_azure import AZURITE_ACCOUNT, AZURITE_KEY

    base, account = need_azurite().rsplit("/", 1)
    container = f"lgh-c{uuid.uuid4().hex[:12]}"

    def open_store(url: str) -> AzureBlobStore:
        return AzureBlobStore(container, "p", account_name=AZURITE_ACCOUNT, account_key=AZURITE_KEY,
                              endpoint_url=f"{url}/{account}", create_container=True)  # fmt: skip

    if kind == "cut":  # the container exists: the answer is a 409 whose body is cut off
        open_store(base).close()
    with fault_proxy(base) as azure:
        azure.add(kind, lambda r: r.method == "PUT" and "restype=container" in r.path, times=1)
        store = open_store(azure.url)
        assert sum(azure.injected.values()) == 1  # the fault fired, and the store started anyway
        store.put("k", b"v")
        store.close()
