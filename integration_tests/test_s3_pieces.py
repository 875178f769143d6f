"""``DeltaChannel`` snapshots stored as pieces on a real S3 server: written before their head,
read back whole by a cold process (all parts in one batch), kept by prune and copy, and
reported when a part is gone. Both transports; the scenarios are the unit tests'."""

from __future__ import annotations

from typing import Any

from tests.checkpoint import test_snapshot_pieces as pieces


def test_snapshots_are_pieces_on_s3(any_s3_store: Any) -> None:
    pieces.test_snapshots_are_stored_as_pieces_and_read_back_whole(any_s3_store)


def test_another_process_goes_on_with_pieces_on_s3(any_s3_store: Any) -> None:
    pieces.test_a_thread_goes_on_in_another_process(any_s3_store)


def test_prune_copy_and_delete_keep_pieces_on_s3(any_s3_store: Any) -> None:
    pieces.test_prune_copy_and_delete_keep_every_piece_a_snapshot_needs(any_s3_store)


def test_async_pieces_on_s3(any_s3_store: Any) -> None:
    pieces.test_async_snapshots_match_sync(any_s3_store)
