"""``migrate`` on real Ceph RGW: the format-1 store migrated while workers write, a writer that
moves a head first, and the command killed with SIGKILL mid-run and run again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import S3_BUCKET, S3_ENDPOINT, make_s3_store
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format.envelope import FORMAT_VERSION
from langgraph_handoff.inspection import verify_store
from tests.checkpoint.test_migrate import _writers_during_migration, schemas, stamped
from tests.support.migrate_helpers import FIXTURE_THREADS, Tripwire, cfg, fixture_into, formats, seen

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.heavy
def test_concurrent_writers_during_migration_on_s3(tmp_path: Path) -> None:
    store = fixture_into(make_s3_store(), tmp_path)
    stats = _writers_during_migration(store, rounds=3)
    assert all(n >= 3 for n in stats["turns"].values())


def test_a_writer_that_moves_the_head_first_wins_on_s3(tmp_path: Path) -> None:
    from tests.checkpoint.test_migrate import test_a_writer_that_moves_the_head_first_wins as scenario

    scenario(fixture_into(make_s3_store(), tmp_path))


@pytest.mark.heavy
def test_cli_killed_mid_run_then_rerun_on_s3(tmp_path: Path) -> None:
    prefix = f"kill-{uuid.uuid4().hex}"
    store = fixture_into(make_s3_store(prefix), tmp_path)
    saver = ObjectStoreSaver(store, migrations=stamped())
    for n in range(60):  # more old threads, so the kill lands mid-run
        saver.copy_thread("chat-0", f"copy-{n:02d}")
    threads = saver.thread_ids()
    expected = seen(saver, threads)
    url = f"s3://{S3_BUCKET}/{prefix}?endpoint_url={S3_ENDPOINT}"
    args = [sys.executable, "-m", "langgraph_handoff.cli", "migrate", url, "--json", "--concurrency", "4"]
    args += ["--migrations", "tests.checkpoint.test_migrate:MIGRATIONS"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    done_before_kill = [json.loads(proc.stdout.readline()) for _ in range(10)]  # 10 threads reported
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL and all(r["status"] == "migrated" for r in done_before_kill)
    fresh = ObjectStoreSaver(make_s3_store(prefix), migrations=stamped())
    assert seen(fresh, threads) == expected  # mid-way, readers see the same
    rerun = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout.splitlines()[-1])["summary"]
    assert summary["failed"] == 0 and summary["scanned"] == len(threads) == 67
    assert summary["current"] >= 10 and summary["migrated"] + summary["current"] == len(threads)
    assert seen(fresh, threads) == expected  # every checkpoint stamped exactly once
    assert schemas(fresh, threads) == {3}
    assert formats(store)["HEAD"] == {FORMAT_VERSION} and verify_store(fresh, None).problems == []
    final = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert json.loads(final.stdout.splitlines()[-1])["summary"]["current"] == len(threads)


@pytest.mark.heavy
def test_migration_request_counts_on_s3(tmp_path: Path) -> None:
    """What one migration costs in requests (figures for the README), and that a rerun only reads."""
    store = fixture_into(make_s3_store(), tmp_path)
    counting = Tripwire(store, lambda op, when: None)
    saver = ObjectStoreSaver(counting, migrations=stamped())
    for t in FIXTURE_THREADS:
        saver.migrate_thread(t)
    first = counting.snapshot()
    counting.reset()
    for t in FIXTURE_THREADS:
        assert saver.migrate_thread(t).status == "current"
    again = counting.snapshot()
    assert again.get("PUT", 0) == 0 and again.get("DELETE_MANY", 0) == 0
    assert first["PUT"] <= 60 and again["requests"] <= 3 * len(FIXTURE_THREADS) + 16
    assert seen(saver, [cfg("chat-0")["configurable"]["thread_id"]])["chat-0"][-1][3]["log"][-1] == "migrated"
