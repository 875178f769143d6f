"""The chaos test on Ceph RGW: worker processes serve 30 conversations of 4 turns while a driver
SIGKILLs them every 1.5-3 s (once a turn progressed since the last kill, at most 20 times) and
they kill themselves inside tool calls, between put_writes and put, and during transfers.
Survivors take over. See tests/support/chaos_harness.py for the checks."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from conftest import S3_BUCKET, S3_ENDPOINT, make_s3_store
from tests.support.chaos_harness import RunConfig, check, run


@pytest.mark.heavy
def test_chaos_on_s3(tmp_path: Path) -> None:
    prefix = f"chaos-{uuid.uuid4().hex}"
    make_s3_store(prefix).close()  # creates the bucket; fails (not skips) without the server under scripts/test
    cfg = RunConfig(
        store={"kind": "s3", "bucket": S3_BUCKET, "prefix": prefix, "endpoint_url": S3_ENDPOINT},
        logdir=tmp_path / "logs",
        # a backstop, not a timing assumption: kills wait for progress and stop after 20, so a
        # loaded machine finishes later instead of failing; a quiet one takes about 20 s
        seconds=600,
        max_kills=20,
    )
    figures = check(cfg, run(cfg))
    print(json.dumps({k: v for k, v in figures.items() if k != "violations"}))
    assert figures["violations"] == []
    assert figures["finished"] == cfg.conversations
    assert figures["duplicate_effects"] == 0 and figures["reruns_after_result_stored"] == 0
    assert figures["forks"] == 0 and figures["two_owner_epochs"] == 0
    # the run really was chaotic: workers died at every kind of point and were taken over
    assert figures["driver_kills"] + sum(figures["self_kills"].values()) >= 5
    assert figures["takeovers"] >= 3
