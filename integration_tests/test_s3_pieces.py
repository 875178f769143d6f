"""``DeltaChannel`` snapshots stored as pieces on a real S3 server: written before their head,
read back whole by a cold process (all parts in one batch), kept by prune and copy, and
reported when a part is gone. Both transports; the scenarios are the unit tests'."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import make_obstore_s3_store, make_s3_store
from tests.checkpoint import test_snapshot_pieces as pieces

MAKERS = {"boto3": make_s3_store, "obstore": make_obstore_s3_store}


@pytest.fixture(params=list(MAKERS))
def s3(request: Any) -> Any:
    store = MAKERS[request.param]()
    yield store
    store.close()


def test_snapshots_are_pieces_on_s3(s3: Any) -> None:
    pieces.test_snapshots_are_stored_as_pieces_and_read_back_whole(s3)


def test_another_process_goes_on_with_pieces_on_s3(s3: Any) -> None:
    pieces.test_a_thread_goes_on_in_another_process(s3)


def test_prune_copy_and_delete_keep_pieces_on_s3(s3: Any) -> None:
    pieces.test_prune_copy_and_delete_keep_every_piece_a_snapshot_needs(s3)


def test_async_pieces_on_s3(s3: Any) -> None:
    pieces.test_async_snapshots_match_sync(s3)
