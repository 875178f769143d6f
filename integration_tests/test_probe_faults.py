"""The store probe under a flaky network, through the fault proxy in front of Ceph RGW.

A saver probes a store no probe has passed before its first write (``checkpoint/trust.py``) and
keeps a failure for the process. One reset, 5xx or lost answer on one probe request used to be
read as "this store refuses conditional writes": the process then raised ``UnsafeStoreError`` on
every write until a restart (17 of 30 single-fault cells of the review's campaign). Now only an
answer that proves it makes a store unsafe; anything transient makes that one call fail with a
transient error (or not at all: the read-back settles it), nothing is kept, and the next write
probes again. Each cell below is one fault on one request of the probe or of the marker write,
on each S3 transport.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from conftest import S3_BUCKET, S3_ENDPOINT, _need_s3
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.checkpoint import trust
from langgraph_handoff.errors import StoreUnavailableError, UnknownOutcomeError, UnsafeStoreError
from langgraph_handoff.stores import ObstoreS3Store, S3Store, StoreBase
from tests.support.fault_proxy import FaultProxy, Request, fault_proxy

pytestmark = pytest.mark.s3


def _probe(method: str, *, header: str | None = None) -> Callable[[Request], bool]:
    def when(r: Request) -> bool:
        return "/meta/probe/" in r.path and r.method == method and (header is None or header in r.headers)

    return when


def _scratch_delete(r: Request) -> bool:
    """obstore's sync API deletes in a batch (``POST ?delete``), the others one key at a time."""
    return _probe("DELETE")(r) or (r.method == "POST" and r.path.endswith("?delete"))


def _marker_put(r: Request) -> bool:
    return "/meta/format" in r.path and r.method == "PUT"


#: (name, which request, nth such request)
REQUESTS = [
    ("first create-only PUT", _probe("PUT", header="if-none-match"), 1),
    ("second create-only PUT", _probe("PUT", header="if-none-match"), 2),
    ("wrong If-Match PUT", _probe("PUT", header="if-match"), 1),
    ("current If-Match PUT", _probe("PUT", header="if-match"), 2),
    ("read-back GET", _probe("GET"), 1),
    ("scratch DELETE", _scratch_delete, 1),
    ("marker PUT", _marker_put, 1),
]
FAULTS = [("reset", {}), ("lose", {}), ("status", {"status": 500}), ("status", {"status": 503})]
CELLS = [
    pytest.param(req, when, nth, kind, extra, id=f"{req}-{kind}{extra.get('status', '')}")
    for req, when, nth in REQUESTS
    for kind, extra in FAULTS
]


@pytest.fixture(scope="module")
def proxy() -> Iterator[FaultProxy]:
    _need_s3()
    assert S3_ENDPOINT is not None
    with fault_proxy(S3_ENDPOINT) as p:
        yield p


def _store(transport: str, url: str) -> StoreBase:
    prefix = f"t-{uuid.uuid4().hex}"
    if transport == "boto3":
        return S3Store(S3_BUCKET, prefix=prefix, endpoint_url=url, create_bucket=True)
    return ObstoreS3Store(
        S3_BUCKET,
        prefix=prefix,
        endpoint_url=url,
        create_bucket=True,
        async_io="loop" if transport == "loop" else "threads",
    )


def _put(saver: ObjectStoreSaver, transport: str, n: int) -> None:
    config = {"configurable": {"thread_id": f"t{n}", "checkpoint_ns": ""}}
    if transport == "loop":
        asyncio.run(saver.aput(config, empty_checkpoint(), {"source": "input", "step": -1}, {}))
    else:
        saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})


@pytest.mark.parametrize("transport", ["boto3", "obstore", "loop"])
@pytest.mark.parametrize(("request_name", "when", "nth", "kind", "extra"), CELLS)
def test_one_fault_on_the_probe_never_makes_the_store_unsafe(
    proxy: FaultProxy,
    transport: str,
    request_name: str,
    when: Callable[[Request], bool],
    nth: int,
    kind: str,
    extra: dict[str, int],
) -> None:
    store = _store(transport, proxy.url)
    saver = ObjectStoreSaver(store)
    fault = proxy.add(kind, when, nth=nth, **extra)
    try:
        try:
            _put(saver, transport, 1)
        except UnsafeStoreError as exc:
            pytest.fail(f"one {kind} on the {request_name} made the store unsafe: {exc}")
        except UnknownOutcomeError as exc:
            pytest.fail(f"the marker write's unknown outcome reached the caller: {exc!r}")
        except StoreUnavailableError:
            assert trust.verdict(store) is None, "a transient failure of the probe was kept"
        assert fault.fired == 1, f"the fault never hit a {request_name}: {proxy.log[-12:]}"
        proxy.clear()
        _put(saver, transport, 2)  # the next write probes again if it must, and goes through
        assert trust.verdict(store) is True
    finally:
        proxy.clear()
        trust.forget(store)
        store.close()
