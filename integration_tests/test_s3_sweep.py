"""The TTL sweep raced against a writer on Ceph RGW, both S3 transports: the interleavings of
tests/support/sweep_helpers.py (a store hook picks the exact point; the clock is injected)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conftest import make_obstore_s3_store, make_s3_store
from langgraph_handoff.stores import StoreBase
from tests.support.sweep_helpers import SCENARIOS

pytestmark = pytest.mark.s3


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("transport", ["boto3", "obstore"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_sweep_race_on_s3(scenario: Callable[[StoreBase, str], None], transport: str, mode: str) -> None:
    store = make_s3_store() if transport == "boto3" else make_obstore_s3_store()
    try:
        scenario(store, mode)
    finally:
        store.delete_many([i.key for i in store.list("")])
        store.close()
