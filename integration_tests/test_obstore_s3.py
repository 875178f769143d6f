"""The obstore S3 transport against real Ceph RGW: the store contract, atomic CAS under racing
threads, the server deviations, the request counts seen at a proxy, and boto3's credential chain.
Conformance, graph runs and the saver races run on both transports in ``test_s3_saver.py``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest

from conftest import S3_BUCKET, S3_ENDPOINT, _need_s3, make_obstore_s3_store
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import (
    InvalidConfigError,
    StoreError,
)
from langgraph_handoff.stores import StoreBase
from langgraph_handoff.stores.obstore_base import ObstoreBase
from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store
from tests.checkpoint.test_request_counts import IN_ORDER, five_nodes
from tests.support.race_helpers import (
    race_cas,
)
from tests.support.store_contract import StoreContract

pytestmark = pytest.mark.obstore

ROOT = Path(__file__).resolve().parents[1]


class TestObstoreS3StoreContract(StoreContract):
    """The async half on the event loop (``async_io="loop"``, the default), the sync on obstore."""

    @pytest.fixture
    def contract_store(self, obstore_s3_store: ObstoreS3Store) -> StoreBase:
        assert obstore_s3_store._wire is not None
        return obstore_s3_store


class TestObstoreS3ThreadsContract(StoreContract):
    """The async half through the thread pool (``async_io="threads"``, used behind a proxy)."""

    @pytest.fixture
    def contract_store(self) -> Iterator[StoreBase]:
        store = make_obstore_s3_store(async_io="threads")
        assert store._wire is None
        yield store
        store.close()


def test_compare_and_swap_is_atomic_and_unretried_under_racing_threads() -> None:
    """One winner per round; every loser gets a 412 or, where RGW answers a loser with HTTP 500
    (it does, depending on timing), UnknownOutcomeError: never a second success. The mapping of
    each answer is pinned deterministically in tests/stores/test_s3_canned.py."""
    store = make_obstore_s3_store(max_workers=16)
    try:
        tally = race_cas(store, rounds=30, racers=6)
    finally:
        store.close()
    assert tally["won"] == 30 and tally["lost-412"] + tally["unknown-5xx"] == 150, tally


@pytest.mark.parametrize("async_io", ["loop", "threads"])
def test_async_compare_and_swap_is_atomic_under_racing_event_loops(async_io: str) -> None:
    """The async API's compare-and-swap, 6 event loops in 6 threads released by one barrier
    with their connections open: one winner per round, never two."""
    store = make_obstore_s3_store(async_io=async_io)
    try:
        tally = race_cas(store, rounds=20, racers=6, api="async")
    finally:
        store.close()
    assert tally["won"] == 20 and tally["lost-412"] + tally["unknown-5xx"] == 100, tally


async def test_etag_quoting_is_learned_async(obstore_s3_store: ObstoreS3Store) -> None:
    store = obstore_s3_store
    store.quoting.quoted = True
    etag = await store.aput("qa", b"1", if_none_match=True)
    assert await store.aput("qa", b"2", if_match=etag) != etag
    assert store.quoting.quoted is False


def test_conditional_delete_is_refused_not_ignored(obstore_s3_store: ObstoreS3Store) -> None:
    obstore_s3_store.put("d", b"1")
    with pytest.raises(StoreError, match="conditional delete"):
        obstore_s3_store.delete("d", if_match="0" * 32)
    assert obstore_s3_store.get("d") is not None  # nothing was deleted unconditionally


def test_prefixes_that_end_mid_segment(obstore_s3_store: ObstoreS3Store) -> None:
    """obstore lists whole segments; the store filters so any prefix works as on S3."""
    store = obstore_s3_store
    for key in ["m/a", "m/ab", "m/ab/c", "m/abd", "m/b", "m/a.b"]:
        store.put(key, b"x")
    assert [o.key for o in store.list("m/ab")] == ["m/ab", "m/ab/c", "m/abd"]
    assert [o.key for o in store.list("m/ab", page_size=1)] == ["m/ab", "m/ab/c", "m/abd"]
    assert [o.key for o in store.list("m/a", start_after="m/ab/c")] == ["m/abd"]
    assert [o.key for o in store.list("m/c")] == []


def test_a_sync_list_asks_the_server_for_no_more_than_its_page(obstore_s3_store: ObstoreS3Store) -> None:
    """obstore sends no ``max-keys``, so every sync LIST made S3 send up to 1,000 keys however few
    the page wanted (a history walk wants a few dozen, and parsing the rest was most of its
    CPU). The sync LIST goes through the loop client instead: it asks for the page size, lists
    exactly what obstore lists, and keeps one connection for the LISTs that follow."""
    store = obstore_s3_store
    assert store._wire is not None
    for i in range(30):
        store.put(f"p/{i:02d}", b"x" * i)
    queries: list[dict[str, str]] = []
    real = store._wire._send

    async def spy(method: str, key: str | None, **kwargs: Any) -> Any:
        queries.append(dict(kwargs.get("query") or {}))
        return await real(method, key, **kwargs)

    store._wire._send = spy  # type: ignore[method-assign]
    page = store.list_page("p/", start_after="p/03", max_keys=5)
    assert [o.key for o in page.items] == [f"p/{i:02d}" for i in range(4, 9)] and page.truncated
    assert [q.get("max-keys") for q in queries] == ["5"]
    by_obstore = ObstoreBase.list_page(store, "p/", start_after="p/03", max_keys=5)
    assert [(o.key, o.etag, o.size) for o in page.items] == [(o.key, o.etag, o.size) for o in by_obstore.items]
    assert [o.key for o in store.list("p/", page_size=7)] == [f"p/{i:02d}" for i in range(30)]
    opened = store._wire.pool.opened
    for _ in range(10):
        store.list_page("p/", max_keys=3)
    assert store._wire.pool.opened == opened  # the LoopThread's keep-alive connection, reused


async def test_async_listing_and_batch_delete(obstore_s3_store: ObstoreS3Store) -> None:
    store = obstore_s3_store
    await asyncio.gather(*(store.aput(f"l/{i:02d}", b"x") for i in range(12)))
    page = await store.alist_page("l/", start_after="l/03", max_keys=5)
    assert [o.key for o in page.items] == [f"l/{i:02d}" for i in range(4, 9)] and page.truncated
    await store.adelete_many([f"l/{i:02d}" for i in range(10)] + ["l/missing"])
    assert [o.key async for o in store.alist("l/")] == ["l/10", "l/11"]


async def test_wrong_credentials_fail_with_a_typed_error() -> None:
    _need_s3()
    session = boto3.Session(aws_access_key_id="WRONGKEY0000", aws_secret_access_key="wrong" * 8)
    store = ObstoreS3Store(S3_BUCKET, prefix="t-creds", endpoint_url=S3_ENDPOINT, session=session, max_retries=0)
    try:
        with pytest.raises(StoreError, match="GET"):
            store.get("anything")
        with pytest.raises(StoreError, match=r"GET t-creds/anything was refused .*credentials"):
            await store.aget("anything")  # the loop client: the same typed error
        with pytest.raises(StoreError, match="refused"):
            await store.aput("anything", b"x", if_none_match=True)
    finally:
        await store.aclose()


def test_profile_with_credential_process_from_the_boto3_chain(tmp_path: Path, monkeypatch: Any) -> None:
    """A ~/.aws profile whose credentials come from ``credential_process`` with an expiry: boto3
    makes them refreshable, and the store signs with them, while the environment's keys are wrong.
    When they are due for renewal the store asks boto3 again (which, 5 minutes before expiry,
    runs the process again) and rebuilds its clients."""
    _need_s3()
    script = tmp_path / "creds.py"
    calls = tmp_path / "calls"
    script.write_text(
        "import datetime, json, pathlib\n"
        f"pathlib.Path({str(calls)!r}).open('a').write('x')\n"
        "exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5)\n"
        "print(json.dumps({'Version': 1, "
        f"'AccessKeyId': {os.environ['AWS_ACCESS_KEY_ID']!r}, "
        f"'SecretAccessKey': {os.environ['AWS_SECRET_ACCESS_KEY']!r}, "
        "'Expiration': exp.isoformat()}))\n"
    )
    config = tmp_path / "config"
    config.write_text(f"[profile lgh]\nregion = us-east-1\ncredential_process = {sys.executable} {script}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "WRONGKEY0000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong" * 8)
    store = ObstoreS3Store(S3_BUCKET, prefix=f"t-{uuid.uuid4().hex}", endpoint_url=S3_ENDPOINT, profile_name="lgh")
    try:
        assert type(store.session.get_credentials()).__name__ == "RefreshableCredentials"
        etag = store.put("p", b"1", if_none_match=True)
        assert store.get("p").etag == etag  # type: ignore[union-attr]
        runs, clients = calls.read_text().count("x"), store._clients
        assert runs >= 1
        store._credentials.renew_at = time.monotonic() - 1  # the renewal is due
        assert store.get("p").etag == etag  # type: ignore[union-attr]
        assert calls.read_text().count("x") > runs and store._clients is not clients
        # the async API on the event loop signs with the same chain, renewed the same way
        runs = calls.read_text().count("x")
        assert asyncio.run(store.aget("p")).etag == etag  # type: ignore[union-attr]
        store._credentials._keys_renew_at = time.monotonic() - 1
        assert asyncio.run(store.aget("p")).etag == etag  # type: ignore[union-attr]
        assert calls.read_text().count("x") > runs
    finally:
        store.close()


def test_from_url_picks_obstore_by_default_and_boto3_on_request() -> None:
    _need_s3()
    url = f"s3://{S3_BUCKET}/t-{uuid.uuid4().hex}/nested?endpoint_url={S3_ENDPOINT}"
    with ObjectStoreSaver.from_url(url) as saver:
        saver.setup()
        assert type(saver.store).__name__ == "ObstoreS3Store" and saver.store.prefix.endswith("/nested/")
        graph = five_nodes().compile(checkpointer=saver)
        graph.invoke({"messages": []}, {"configurable": {"thread_id": "u"}})
        assert [i.key for i in saver.store.list("heads/")] == ["heads/u/="]
    with ObjectStoreSaver.from_url(url + "&transport=boto3") as saver:
        assert type(saver.store).__name__ == "S3Store"
        state = five_nodes().compile(checkpointer=saver).get_state({"configurable": {"thread_id": "u"}})
        assert len(state.values["messages"]) == 5  # what obstore wrote, read through boto3
    with pytest.raises(InvalidConfigError, match="transport"):
        ObjectStoreSaver.from_url(url + "&transport=curl")


@pytest.mark.parametrize("async_io", ["loop", "threads"])
async def test_many_concurrent_async_runs_share_the_store_pool(async_io: str) -> None:
    """40 runs at once: with ``"threads"`` they share the store's thread pool (at most 32
    threads); with ``"loop"`` no pool thread starts and the loop opens at most a connection per
    request in flight, reused by the next request."""
    store = make_obstore_s3_store(async_io=async_io, max_workers=32)
    try:
        await _forty_concurrent_runs(store)
        pool_threads = [t for t in threading.enumerate() if t.name.startswith(store._pool._prefix)]
        if async_io == "threads":
            assert 0 < len(pool_threads) <= 32
        else:
            assert store._wire is not None
            assert pool_threads == [] and 0 < store._wire.pool.opened <= 32
    finally:
        await store.aclose()


async def _forty_concurrent_runs(store: ObstoreS3Store) -> None:
    saver = ObjectStoreSaver(store)
    graph = five_nodes().compile(checkpointer=saver)
    results = await asyncio.gather(
        *(graph.ainvoke({"messages": []}, {"configurable": {"thread_id": f"c{i}"}}) for i in range(40))
    )
    assert all(len(r["messages"]) == 5 for r in results)
    states = await asyncio.gather(*(graph.aget_state({"configurable": {"thread_id": f"c{i}"}}) for i in range(40)))
    assert all(len(s.values["messages"]) == 5 for s in states)


EXIT_AFTER_ASYNC = """
import asyncio, os, sys
from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store
store = ObstoreS3Store(sys.argv[1], prefix=sys.argv[2], endpoint_url=sys.argv[3])
async def main():
    await store.aput("k", b"x" * 100)
    for _ in range(300):
        await store.aget("k")
asyncio.run(main())
"""


@pytest.mark.heavy
def test_processes_exit_cleanly_right_after_async_use(tmp_path: Path) -> None:
    """obstore's own coroutines are completed from its Rust threads; one still calling into the
    event loop while the interpreter shuts down aborts the process (exit 134): 2 in about 80 runs
    here, 3 in 16 with a Python credential provider. The store's async API therefore runs
    obstore's sync calls in its pool: every exit must be clean."""
    _need_s3()
    script = tmp_path / "exit_after_async.py"
    script.write_text(EXIT_AFTER_ASYNC)
    prefix = f"t-{uuid.uuid4().hex}"
    command = [sys.executable, str(script), S3_BUCKET, prefix, str(S3_ENDPOINT)]
    procs = [subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=ROOT) for _ in range(6)]
    outcomes = [(proc.wait(timeout=120), proc.communicate()[1][-300:]) for proc in procs]
    assert [code for code, _ in outcomes] == [0] * 6, outcomes


@contextmanager
def counting_proxy() -> Iterator[str]:
    """bench/proxy.py in front of the test server: counts the requests that reach the wire."""
    _need_s3()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "proxy.py"), "--upstream", str(S3_ENDPOINT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY"), line
        yield f"http://127.0.0.1:{line.split()[1]}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _phase(proxy: str, name: str) -> dict[str, int]:
    """Set the proxy's phase to ``name``; returns the counts of the phase that just ended."""
    with urllib.request.urlopen(f"{proxy}/__bench/counts") as resp:
        before = json.load(resp)["counts"]
    urllib.request.urlopen(f"{proxy}/__bench/phase?name={name}").read()
    return before


@pytest.mark.parametrize("api", ["sync", "async"])
def test_request_counts_on_the_wire(api: str) -> None:
    """The same counts as boto3's S3Store: obstore adds no request (no HEAD, no retried write)."""
    with counting_proxy() as proxy:
        store = ObstoreS3Store(S3_BUCKET, prefix=f"t-{uuid.uuid4().hex}", endpoint_url=proxy)
        saver = ObjectStoreSaver(store)
        graph = five_nodes().compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "counted"}}
        # the invoke runs in order: the history count relies on every task's writes being folded
        # the store probe first (what the first write of a process runs when setup() did not), so
        # the counts of the steps after it are each operation's own
        steps: list[tuple[str, Any]] = [
            ("setup", saver.setup),
            ("invoke", lambda: graph.invoke({"messages": [{"role": "user", "content": "hi"}]}, {**cfg, **IN_ORDER})),
            ("state", lambda: graph.get_state(cfg)),
            ("history", lambda: list(graph.get_state_history(cfg))),
            ("delete", lambda: saver.delete_thread("counted")),
        ]
        if api == "async":

            async def history() -> list[Any]:
                return [s async for s in graph.aget_state_history(cfg)]

            steps = [
                ("setup", lambda: asyncio.run(saver.asetup())),
                (
                    "invoke",
                    lambda: asyncio.run(
                        graph.ainvoke({"messages": [{"role": "user", "content": "hi"}]}, {**cfg, **IN_ORDER})
                    ),
                ),
                ("state", lambda: asyncio.run(graph.aget_state(cfg))),
                ("history", lambda: asyncio.run(history())),
                ("delete", lambda: asyncio.run(saver.adelete_thread("counted"))),
            ]
        for name, step in steps:
            _phase(proxy, name)
            step()
        counts = _phase(proxy, "end")
        store.close()
    # GET marker, 2 create-only PUTs, GET, 2 If-Match PUTs (+ HEAD: the wrong ETag's 412 is
    # checked for the quoting), DELETE (obstore's sync delete is a one-key DeleteObjects), create-only
    # PUT of the marker; the metadata index: GET meta/index, LIST heads/, create-only PUT meta/index
    assert counts["setup"] == {
        "GetObject": 3,
        "PutObject(If-None-Match)": 4,
        "PutObject(If-Match)": 2,
        "HeadObject": 1,
        "ListObjectsV2": 1,
        {"sync": "DeleteObjects", "async": "DeleteObject"}[api]: 1,
    }, counts["setup"]
    # 13 writes: create-only puts of new objects, compare-and-swaps of the heads (as with boto3)
    assert counts["invoke"] == {
        "GetObject": 1,
        "ListObjectsV2": 1,
        "PutObject(If-None-Match)": 7,
        "PutObject(If-Match)": 6,
    }, counts["invoke"]
    assert sum(counts["invoke"].values()) == 15
    assert counts["state"] == {"GetObject": 1, "ListObjectsV2": 1}
    assert counts["history"] == {"GetObject": 1, "ListObjectsV2": 1}
    # (the third LIST: the thread's metadata-index entries)
    assert counts["delete"] == {"GetObject": 1, "ListObjectsV2": 3, "DeleteObjects": 2}


async def test_a_caller_header_with_inner_spaces_is_signed_correctly() -> None:
    """``sigv4.sign`` does not collapse sequential spaces in header values (SigV4's Trimall):
    with ``headers={"X-Amz-Meta-Note": "a  b"}`` every loop request is refused with
    403 SignatureDoesNotMatch (StoreError "check the credentials"), while the sync API on the
    same store, through obstore, succeeds."""
    _need_s3()
    store = ObstoreS3Store(
        S3_BUCKET,
        prefix=f"t-{uuid.uuid4().hex}",
        endpoint_url=S3_ENDPOINT,
        create_bucket=True,
        headers={"X-Amz-Meta-Note": "a  b"},
        async_io="loop",
    )
    try:
        assert store._wire is not None
        store.put("sync", b"1")  # obstore: fine
        await store.aput("async", b"1")  # the loop path: 403 SignatureDoesNotMatch
        assert (await store.aget("sync")) is not None
    finally:
        await store.aclose()


@pytest.mark.parametrize("value", ["café", "☃ snow"])
async def test_a_non_ascii_header_value_is_accepted_on_every_path(value: str) -> None:
    """Found by a new user: a non-ASCII extra header value worked through boto3 and obstore but
    failed on the loop path only: ``é`` with 403 SignatureDoesNotMatch (signed as UTF-8, sent as
    latin-1; reported as a credentials problem), ``☃`` with a bare UnicodeEncodeError. RGW
    accepts the UTF-8 that all three now send and sign."""
    from langgraph_handoff.stores.s3 import S3Store

    _need_s3()
    prefix = f"t-{uuid.uuid4().hex}"
    headers = {"X-Amz-Meta-Note": value}
    store = ObstoreS3Store(
        S3_BUCKET, prefix=prefix, endpoint_url=S3_ENDPOINT, create_bucket=True, headers=headers, async_io="loop"
    )
    boto = S3Store(S3_BUCKET, prefix=prefix, endpoint_url=S3_ENDPOINT, headers=headers)
    try:
        assert store._wire is not None
        store.put("sync", b"1")
        await store.aput("async", b"2", if_none_match=True)
        await asyncio.to_thread(boto.put, "boto3", b"3")
        assert [(await store.aget(k)).body for k in ("sync", "async", "boto3")] == [b"1", b"2", b"3"]  # type: ignore[union-attr]
    finally:
        await store.aclose()
        boto.close()
