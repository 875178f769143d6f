"""AzureBlobStore (obstore) against Azurite, the Azure Blob emulator started by scripts/test: the
store contract, conformance, graph runs equal to InMemorySaver, races (one winner every round),
batch deletes that lose no key, listing from a key, ``doctor``, and the error mapping of every
answer to a conditional PUT (against a canned endpoint)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import need_azurite
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.cli import main as cli_main
from langgraph_handoff.errors import (
    InvalidConfigError,
    PreconditionFailedError,
    StoreError,
    UnknownOutcomeError,
)
from langgraph_handoff.stores import AzureBlobStore, StoreBase, store_from_url
from langgraph_handoff.stores.base import Put
from langgraph_handoff.stores.obstore_azure import AZURITE_ACCOUNT, AZURITE_KEY
from tests.support.canned_s3 import canned_s3
from tests.support.conformance_helpers import SyncRoutedSaver, run_conformance
from tests.support.graph_scenarios import acheck_runs_match_inmemory, check_runs_match_inmemory
from tests.support.race_helpers import check_thread_race, race_cas, race_create_only
from tests.support.store_contract import StoreContract

pytestmark = pytest.mark.obstore  # AzureBlobStore is obstore's

CONTAINER = "lgh-tests"


class SelfCleaningStore(AzureBlobStore):
    """Deletes its blobs when closed: Azurite slows down as it fills (the file took 13.7 s on a
    fresh Azurite, 40 s on one that had served 8 runs), and ``scripts/test --repeat`` reuses it."""

    def close(self) -> None:
        if not self._closed:
            self.delete_many([info.key for info in self.list("")])
        super().close()


def make_azure_store(prefix: str | None = None, **kwargs: Any) -> AzureBlobStore:
    endpoint = need_azurite()
    return SelfCleaningStore(
        CONTAINER,
        prefix=prefix or f"t-{uuid.uuid4().hex}",
        account_name=AZURITE_ACCOUNT,
        account_key=AZURITE_KEY,
        endpoint_url=endpoint,
        create_container=True,
        **kwargs,
    )


@pytest.fixture
def azure_store() -> Iterator[AzureBlobStore]:
    store = make_azure_store()
    yield store
    store.close()


class TestAzureBlobStoreContract(StoreContract):
    @pytest.fixture
    def contract_store(self, azure_store: AzureBlobStore) -> StoreBase:
        return azure_store


@pytest.mark.parametrize("api", ["async", "sync"])
async def test_conformance_on_azurite(api: str) -> None:
    cls = ObjectStoreSaver if api == "async" else SyncRoutedSaver
    counts = await run_conformance(f"azure-{api}", lambda: cls(make_azure_store()))
    assert sum(p for p, _ in counts.values()) == 81


def test_graph_runs_match_inmemory(azure_store: AzureBlobStore) -> None:
    check_runs_match_inmemory(ObjectStoreSaver(azure_store))


async def test_async_graph_runs_match_inmemory(azure_store: AzureBlobStore) -> None:
    await acheck_runs_match_inmemory(ObjectStoreSaver(azure_store))


@pytest.mark.parametrize("fresh", [False, True], ids=["existing-thread", "new-thread"])
def test_threads_racing(fresh: bool, azure_store: AzureBlobStore) -> None:
    check_thread_race(azure_store, fresh=fresh)


def test_compare_and_swap_is_atomic_under_racing_threads() -> None:
    """16 threads compare-and-swap one blob from the same ETag: exactly one wins each round, the
    others get 412 (never retried into a false loss or a false win)."""
    store = make_azure_store(max_workers=16)
    try:
        tally = race_cas(store, rounds=30, racers=16)
    finally:
        store.close()
    assert tally == {"won": 30, "lost-412": 30 * 15, "unknown-5xx": 0}, tally


def test_create_only_race_has_one_winner(azure_store: AzureBlobStore) -> None:
    """The create-only loser's answer on Azure is 409 BlobAlreadyExists, not 412: still a lost race."""
    race_create_only(azure_store, rounds=10, racers=16)


@pytest.mark.heavy
async def test_delete_many_deletes_every_key_even_with_missing_ones(azure_store: AzureBlobStore) -> None:
    """obstore's batch delete stops at the first missing key and drops the rest; the store sends
    batches of 256 and redoes a failed batch key by key, so nothing is left behind."""
    keys = [f"bd/{i:04d}" for i in range(600)]
    azure_store.run_many([Put(k, b"d") for k in keys])
    doomed = ["bd/missing-a", *keys[:300], "bd/missing-b", *keys[300:500]]
    azure_store.delete_many(doomed)
    assert [o.key for o in azure_store.list("bd/")] == keys[500:]
    await azure_store.adelete_many(["bd/missing-c", *keys[500:]])
    assert list(azure_store.list("bd/")) == []


def test_list_with_start_after(azure_store: AzureBlobStore) -> None:
    """Azurite ignores the ``startFrom`` obstore sends; the page collector filters instead."""
    for i in range(12):
        azure_store.put(f"l/{i:02d}", b"x")
    azure_store.put("l0", b"x")
    page = azure_store.list_page("l/", start_after="l/03", max_keys=5)
    assert [o.key for o in page.items] == [f"l/{i:02d}" for i in range(4, 9)] and page.truncated
    assert [o.key for o in azure_store.list("l/", start_after="l/09", page_size=1)] == ["l/10", "l/11"]
    assert [o.key for o in azure_store.list("l", start_after="l/10")] == ["l/11", "l0"]


def test_doctor_reports_conditions_enforced(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``az://`` URLs with the key in the environment, as a deployment would have it."""
    endpoint = need_azurite()
    make_azure_store().close()  # the container exists
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY)
    url = f"az://{CONTAINER}/t-{uuid.uuid4().hex}?account_name={AZURITE_ACCOUNT}&endpoint_url={endpoint}"
    code = cli_main(["doctor", url, "--json", "--rounds", "2"])
    report = json.loads(capsys.readouterr().out)
    assert code in (0, None), report
    assert report["create_only"] == "enforced" and report["compare_and_swap"] == "enforced", report
    assert report["trusted"] is True


def test_from_url_and_connection_string(monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = need_azurite()
    make_azure_store().close()
    prefix = f"t-{uuid.uuid4().hex}"
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};BlobEndpoint={endpoint};",
    )
    with ObjectStoreSaver.from_url(f"az://{CONTAINER}/{prefix}/nested") as saver:
        saver.setup()
        store = saver.store
        assert isinstance(store, AzureBlobStore) and store.prefix == f"{prefix}/nested/"
        store.put("k", b"v", if_none_match=True)
    with store_from_url(f"az://{CONTAINER}/{prefix}") as other:
        assert other.get("nested/k").body == b"v"  # type: ignore[union-attr]
    with pytest.raises(InvalidConfigError, match="container"):
        store_from_url("az:///nothing")


def test_missing_container_is_a_typed_error_not_an_empty_store() -> None:
    endpoint = need_azurite()
    store = AzureBlobStore(
        f"absent-{uuid.uuid4().hex[:12]}", account_name=AZURITE_ACCOUNT, account_key=AZURITE_KEY, endpoint_url=endpoint
    )
    try:
        for call in (lambda: store.get("k"), lambda: store.put("k", b"x", if_match="0x1"), lambda: store.list_page("")):
            with pytest.raises(StoreError, match="does not exist"):
                call()
    finally:
        store.close()


def test_create_container_needs_a_key_or_sas() -> None:
    endpoint = need_azurite()
    with pytest.raises(StoreError, match="account key or a SAS"):
        AzureBlobStore(
            "other", account_name=AZURITE_ACCOUNT, bearer_token="t", endpoint_url=endpoint, create_container=True
        )


@pytest.fixture
def canned_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[AzureBlobStore]:
    for name in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    with canned_s3() as (endpoint, _):
        store = AzureBlobStore("c", account_name="acct", account_key=AZURITE_KEY, endpoint_url=endpoint, max_retries=1)
        try:
            yield store
        finally:
            store.close()


@pytest.mark.parametrize(
    ("segment", "if_match", "expected"),
    [
        ("409", None, PreconditionFailedError),  # BlobAlreadyExists: the create-only loser
        ("412", "e", PreconditionFailedError),  # ConditionNotMet: changed or missing
        ("500", None, UnknownOutcomeError),
        ("503", "e", UnknownOutcomeError),
        ("drop", "e", UnknownOutcomeError),  # the write may or may not have landed
        ("drop", None, UnknownOutcomeError),
        ("403", "e", StoreError),
    ],
)
async def test_conditional_put_outcomes(
    canned_store: AzureBlobStore, segment: str, if_match: str | None, expected: type[Exception]
) -> None:
    kwargs: dict[str, Any] = {"if_match": if_match} if if_match else {"if_none_match": True}
    with pytest.raises(expected) as sync_err:
        canned_store.put(f"{segment}/k", b"x", **kwargs)
    with pytest.raises(expected) as async_err:
        await canned_store.aput(f"{segment}/k", b"x", **kwargs)
    assert type(sync_err.value) is type(async_err.value)
    if expected is StoreError:
        assert not isinstance(sync_err.value, UnknownOutcomeError | PreconditionFailedError)
