"""Signed objects on the real servers: Ceph RGW through both S3 transports, Azurite and
fake-gcs-server. Every kind of object is signed as it is written, an unsigned copy of each kind
is refused before it is decoded, and ``migrate`` signs a store written without a key. The unit
tests of the same behaviour, with the details of each refusal, are ``tests/stores/test_signing.py``."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from conftest import make_obstore_s3_store, make_s3_store, need_gcs_emulator
from integration_tests.test_azure_store import make_azure_store
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import envelope, signing
from langgraph_handoff.checkpoint.signed_store import SigningStore
from langgraph_handoff.errors import CorruptObjectError
from langgraph_handoff.stores import StoreBase
from tests.support.gcs_helpers import make_gcs_store
from tests.support.signing_helpers import EVERY_KIND, keys_of, kinds, populate

pytestmark = pytest.mark.s3

K1 = keys_of("k1")


@pytest.fixture(params=["s3-boto3", "s3-obstore", "azure", "gcs"])
def server_store(request: pytest.FixtureRequest) -> Iterator[StoreBase]:
    makers = {
        "s3-boto3": make_s3_store,
        "s3-obstore": make_obstore_s3_store,
        "azure": make_azure_store,
        "gcs": lambda: make_gcs_store(need_gcs_emulator()),
    }
    store = makers[request.param]()
    yield store
    store.close()


def test_every_kind_is_signed_and_an_unsigned_copy_of_each_is_refused(server_store: StoreBase) -> None:
    populate(server_store, K1)
    found = kinds(server_store)
    assert set(found) == EVERY_KIND
    for key in itertools.chain.from_iterable(found.values()):
        assert signing.signer(server_store.get(key).body) == "k1", key  # type: ignore[union-attr]
    reader = SigningStore(server_store, K1)
    for kind, keys_of_kind in found.items():
        key = keys_of_kind[0]
        server_store.put(key, signing.strip(server_store.get(key).body))  # type: ignore[union-attr]
        with pytest.raises(CorruptObjectError) as info:
            envelope.decode(reader.get(key).body, key=key)  # type: ignore[union-attr]
        assert info.value.reason == "unsigned" and info.value.key == key, kind


def test_migrate_signs_a_store_written_without_a_key(server_store: StoreBase) -> None:
    populate(server_store)
    summary = ObjectStoreSaver(server_store, signing_key=K1).migrate()
    assert summary.damaged == [] and summary.marked and summary.signing is not None and summary.signing.signed > 0
    for key in itertools.chain.from_iterable(kinds(server_store).values()):
        assert signing.signer(server_store.get(key).body) == "k1", key  # type: ignore[union-attr]
    assert ObjectStoreSaver(server_store, signing_key=K1).get_tuple({"configurable": {"thread_id": "plain"}})
