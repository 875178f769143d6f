"""The object-store contract, written once and run against every store.

``tests/stores/test_stores.py`` runs it on MemoryStore and LocalStore; ``integration_tests`` run it on
S3Store against the real server. A store that passes can carry the saver.
"""

from __future__ import annotations

import asyncio

import pytest

from langgraph_handoff.errors import InvalidKeyError, PreconditionFailedError
from langgraph_handoff.stores import StoreBase


class StoreContract:
    """Subclasses provide a ``contract_store`` fixture."""

    def test_get_missing_is_none(self, contract_store: StoreBase) -> None:
        assert contract_store.get("nothing/here") is None

    def test_put_get_roundtrip_and_etag(self, contract_store: StoreBase) -> None:
        etag = contract_store.put("a/b", b"hello")
        obj = contract_store.get("a/b")
        assert obj is not None and obj.body == b"hello" and obj.etag == etag
        assert not etag.startswith('"')

    def test_create_only_refuses_existing(self, contract_store: StoreBase) -> None:
        contract_store.put("k", b"first", if_none_match=True)
        with pytest.raises(PreconditionFailedError):
            contract_store.put("k", b"second", if_none_match=True)
        assert contract_store.get("k").body == b"first"

    def test_compare_and_swap(self, contract_store: StoreBase) -> None:
        e1 = contract_store.put("k", b"v1", if_none_match=True)
        e2 = contract_store.put("k", b"v2", if_match=e1)
        assert e2 != e1
        with pytest.raises(PreconditionFailedError):
            contract_store.put("k", b"v3", if_match=e1)  # stale ETag
        assert contract_store.get("k").body == b"v2"

    def test_compare_and_swap_on_missing_key_loses(self, contract_store: StoreBase) -> None:
        e = contract_store.put("present", b"x")
        with pytest.raises(PreconditionFailedError):
            contract_store.put("absent", b"y", if_match=e)
        assert contract_store.get("absent") is None

    def test_delete_is_idempotent(self, contract_store: StoreBase) -> None:
        contract_store.put("d/1", b"x")
        contract_store.delete("d/1")
        contract_store.delete("d/1")
        assert contract_store.get("d/1") is None

    def test_delete_many(self, contract_store: StoreBase) -> None:
        for i in range(5):
            contract_store.put(f"m/{i}", b"x")
        contract_store.delete_many([f"m/{i}" for i in range(4)] + ["m/missing"])
        assert [o.key for o in contract_store.list("m/")] == ["m/4"]

    def test_list_ascending_byte_order_across_levels(self, contract_store: StoreBase) -> None:
        keys = ["p/a-b", "p/a/b", "p/a0", "p/a.", "p/b/c/d", "p/=", "p/~1", "q/x"]
        for k in keys:
            contract_store.put(k, k.encode())
        listed = [o.key for o in contract_store.list("p/")]
        assert listed == sorted(k for k in keys if k.startswith("p/"))
        sizes = {o.key: o.size for o in contract_store.list("p/")}
        assert sizes["p/a-b"] == len(b"p/a-b")

    def test_list_pagination_and_start_after(self, contract_store: StoreBase) -> None:
        for i in range(7):
            contract_store.put(f"pg/{i:02d}", b"x")
        page = contract_store.list_page("pg/", max_keys=3)
        assert [o.key for o in page.items] == ["pg/00", "pg/01", "pg/02"] and page.truncated
        page = contract_store.list_page("pg/", start_after="pg/04", max_keys=3)
        assert [o.key for o in page.items] == ["pg/05", "pg/06"] and not page.truncated
        assert [o.key for o in contract_store.list("pg/", page_size=2)] == [f"pg/{i:02d}" for i in range(7)]

    def test_list_etag_matches_get(self, contract_store: StoreBase) -> None:
        etag = contract_store.put("e/1", b"content")
        (info,) = list(contract_store.list("e/"))
        assert info.etag == etag == contract_store.get("e/1").etag

    def test_keys_outside_alphabet_are_refused(self, contract_store: StoreBase) -> None:
        for bad in ["", "/abs", "a//b", "../up", "a/../b", "A", "a b", ".hidden", "a/.x", "x\x00"]:
            with pytest.raises(InvalidKeyError):
                contract_store.put(bad, b"x")

    def test_async_twins(self, contract_store: StoreBase) -> None:
        async def scenario() -> None:
            e1 = await contract_store.aput("as/1", b"v1", if_none_match=True)
            with pytest.raises(PreconditionFailedError):
                await contract_store.aput("as/1", b"v1", if_none_match=True)
            e2 = await contract_store.aput("as/1", b"v2", if_match=e1)
            obj = await contract_store.aget("as/1")
            assert obj.body == b"v2" and obj.etag == e2
            page = await contract_store.alist_page("as/")
            assert [o.key for o in page.items] == ["as/1"]
            assert [o.key async for o in contract_store.alist("as/")] == ["as/1"]
            await contract_store.adelete("as/1")
            assert await contract_store.aget("as/1") is None

        asyncio.run(scenario())
