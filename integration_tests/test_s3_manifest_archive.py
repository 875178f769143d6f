"""A head's archive of older segment references on a real S3 server: history reads whole
through it from cold savers and stale heads, rewrites leave no archive behind, a lost one is a
typed error, and readers racing a folding writer miss nothing. Both transports; the scenarios
are the unit tests'."""

from __future__ import annotations

from typing import Any

from tests.checkpoint import test_manifest_archive as archive


def test_history_reads_whole_through_the_archive_on_s3(any_s3_store: Any) -> None:
    archive.test_the_head_stays_small_and_history_reads_whole(any_s3_store)


def test_rewrites_leave_no_archive_on_s3(any_s3_store: Any) -> None:
    archive.test_rewrites_keep_the_manifest_whole_and_leave_no_archive(any_s3_store)


def test_a_stale_head_follows_the_new_archive_on_s3(any_s3_store: Any) -> None:
    archive.test_a_stale_head_follows_the_archive_that_replaced_its_own(any_s3_store)


def test_a_lost_archive_is_named_on_s3(any_s3_store: Any) -> None:
    archive.test_a_lost_archive_is_a_typed_error_that_names_it(any_s3_store)


def test_readers_racing_a_folding_writer_on_s3(any_s3_store: Any) -> None:
    archive.test_readers_racing_a_folding_writer_miss_nothing(any_s3_store)
