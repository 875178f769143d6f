"""``migrate``: old data (storage format 1, state schema 0) rewritten into the current format and
schema, checked against what lazy readers saw, across kills, concurrent writers and the CLI."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from langgraph_handoff import ObjectStoreSaver, envelope
from langgraph_handoff.checkpoint.plans import Layout
from langgraph_handoff.errors import MigrationError, SchemaVersionError
from langgraph_handoff.inspect import verify_store
from langgraph_handoff.migrations import SchemaMigrations
from langgraph_handoff.stores import LocalStore, StoreBase
from langgraph_handoff.stores.base import Op, Put
from tests.migrate_helpers import FIXTURE_THREADS, Tripwire, cfg, formats, is_write, old_store, seen, unpack_fixture
from tests.test_cli import cli
from tests.test_migrations import migrations, v3_graph

ROOT = Path(__file__).resolve().parents[1]


def stamped() -> SchemaMigrations:
    """v1 -> v3 plus a step that is *not* idempotent (it appends to the log): a checkpoint
    migrated twice would show two stamps."""
    m = migrations(2)

    @m.register(3, "stamp the log")
    def stamp(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        if "log" in values:
            values["log"] = [*values["log"], "migrated"]

    return m


#: for the CLI tests: ``--migrations tests.test_migrate:MIGRATIONS``
MIGRATIONS = stamped()
BROKEN = migrations(1)


@BROKEN.register(2, "fails on the long thread")
def _fails_on_long(values: dict[str, Any], metadata: dict[str, Any]) -> None:
    if any("turn" in line for line in values.get("log", [])):
        raise ValueError("no turns allowed")


def schemas(saver: ObjectStoreSaver, threads: list[str]) -> set[int]:
    from langgraph_handoff.checkpoint import driver

    found = set()
    for t in threads:
        for ns in driver.run(saver.store, saver._plan_namespaces(t)):
            head, _, segments = driver.run(saver.store, saver._plan_load_namespace(t, ns))
            for recs in [head.records, *(s.records for s in segments.values())]:
                found |= {r.schema for r in recs.values()}
    return found


def referenced_blobs(saver: ObjectStoreSaver, thread: str) -> set[str]:
    from langgraph_handoff.checkpoint import driver

    head, _, segments = driver.run(saver.store, saver._plan_load_namespace(thread, ""))
    parts = [(head.records, head.payloads), *((s.records, s.payloads) for s in segments.values())]
    return saver._blob_keys(thread, "", parts)


@pytest.fixture(params=["memory", "local"])
def old(request: pytest.FixtureRequest, tmp_path: Path) -> StoreBase:
    return old_store(request.param, tmp_path)


def test_migrate_changes_nothing_readers_see_and_then_has_nothing_to_do(old: StoreBase) -> None:
    assert formats(old)["HEAD"] == {1} and formats(old)["WRITES"] == {1}
    lazy = ObjectStoreSaver(old, migrations=stamped())
    before = seen(lazy, FIXTURE_THREADS)
    assert before["chat-0"][-1][3]["log"][-1] == "migrated"  # readers already upgrade on read
    assert lazy.thread_ids() == FIXTURE_THREADS
    dry = [lazy.migrate_thread(t, dry_run=True) for t in FIXTURE_THREADS]
    assert {r.status for r in dry} == {"would migrate"} and formats(old)["HEAD"] == {1}  # nothing written
    done = [lazy.migrate_thread(t) for t in FIXTURE_THREADS]
    assert {r.status for r in done} == {"migrated"}
    assert [(r.checkpoints, r.objects) for r in done] == [(r.checkpoints, r.objects) for r in dry]
    fresh = ObjectStoreSaver(old, migrations=stamped())
    assert seen(fresh, FIXTURE_THREADS) == before
    assert schemas(fresh, FIXTURE_THREADS) == {3}
    found = formats(old)
    assert found["HEAD"] == found["SEGMENT"] == found["WRITES"] == {envelope.FORMAT_VERSION}
    assert verify_store(fresh, None).problems == []
    again = [fresh.migrate_thread(t) for t in FIXTURE_THREADS]
    assert {(r.status, r.checkpoints, r.objects) for r in again} == {("current", 0, 0)}
    # and the migrated threads go on: a resumed interrupt, a pending write to a renamed channel
    graph = v3_graph(fresh, ask=True)
    out = graph.invoke(Command(resume="yes"), cfg("waiting"))
    assert out["log"][-1] == "approved: yes (refund, en)"
    pending = fresh.get_tuple(cfg("pending"))
    assert ("task-1", "subject", "exchange") in pending.pending_writes
    assert v3_graph(fresh).invoke({"log": ["next"]}, cfg("chat-1"))["log"][-1] == "b: refund in en"


async def test_async_twin_and_changed_large_values(tmp_path: Path) -> None:
    """A step that changes every large value: the changed values get new blobs, the old blobs go."""
    store = old_store("local", tmp_path)
    saver = ObjectStoreSaver(store, migrations=stamped(), layout=Layout(blob_threshold=4096))
    before = seen(saver, ["long"])
    old_blobs = {i.key for i in store.list("data/long/=/b/")}
    result = await saver.amigrate_thread("long")
    assert result.status == "migrated" and result.checkpoints == 24
    assert seen(ObjectStoreSaver(store, migrations=stamped()), ["long"]) == before
    new_blobs = {i.key for i in store.list("data/long/=/b/")}
    assert new_blobs - old_blobs and old_blobs - new_blobs  # changed logs: new blobs, the old ones gone
    assert new_blobs == referenced_blobs(saver, "long")  # nothing left behind, nothing missing
    assert verify_store(saver, "long").problems == []
    assert (await saver.amigrate_thread("long")).status == "current"


def test_schema_by_schema_v1_v2_v3(old: StoreBase) -> None:
    """Code moves v1 -> v2 -> v3 with a migrate at each release and writes in between."""
    v2 = ObjectStoreSaver(old, migrations=migrations(1))
    assert {v2.migrate_thread(t).status for t in FIXTURE_THREADS} == {"migrated"}
    assert schemas(v2, FIXTURE_THREADS) == {1}
    state = v2.get_tuple(cfg("chat-0")).checkpoint["channel_values"]
    assert state["topic"] == "refund" and state["language"] == "en"
    v2.put_writes(v2.get_tuple(cfg("chat-0")).config, [("topic", "from v2")], "v2-task")  # v2 names
    v3 = ObjectStoreSaver(old, migrations=migrations(2))
    before = seen(v3, FIXTURE_THREADS)
    assert ("v2-task", "subject", "from v2") in v3.get_tuple(cfg("chat-0")).pending_writes
    assert {v3.migrate_thread(t).status for t in FIXTURE_THREADS} == {"migrated"}
    assert schemas(v3, FIXTURE_THREADS) == {2} and seen(v3, FIXTURE_THREADS) == before
    with pytest.raises(SchemaVersionError, match="version 2, but this code knows versions up to 1"):
        v2.migrate_thread("chat-0")  # old code refuses newer data instead of half-reading it


def test_a_failing_step_leaves_the_thread_as_it_was(old: StoreBase) -> None:
    saver = ObjectStoreSaver(old, migrations=BROKEN)
    before = {i.key: i.etag for i in old.list("heads/long/")}
    with pytest.raises(MigrationError, match="fails on the long thread"):
        saver.migrate_thread("long")
    assert {i.key: i.etag for i in old.list("heads/long/")} == before
    assert saver.migrate_thread("chat-0").status == "migrated"


def test_migrate_keeps_writes_of_a_new_channel_named_like_an_old_renamed_one() -> None:
    from tests.test_migrations import renamed_then_reused

    saver, config, m = renamed_then_reused()
    assert saver.migrate_thread("t").status == "migrated"
    writes = ObjectStoreSaver(saver.store, migrations=m).get_tuple(config).pending_writes
    assert ("old-task", "subject", "old write") in writes and ("new-task", "topic", "new write") in writes


def test_a_writer_that_moves_the_head_first_wins(old: StoreBase) -> None:
    """Deterministic race: just before the migration's compare-and-swap of a head, a worker
    running the current code writes a turn to that thread. The worker's turn stays, the
    migration re-reads and redoes the thread, and nothing readers saw changes."""
    expected = seen(ObjectStoreSaver(old, migrations=migrations()), ["chat-2"])
    worker = v3_graph(ObjectStoreSaver(old, migrations=migrations()))
    raced: list[str] = []

    def race(op: Op, when: str) -> None:
        if when == "before" and isinstance(op, Put) and op.if_match and op.key.startswith("heads/") and not raced:
            raced.append(op.key)
            worker.invoke({"log": ["worker turn"]}, cfg("chat-2"))

    saver = ObjectStoreSaver(Tripwire(old, race), migrations=migrations())
    result = saver.migrate_thread("chat-2")
    assert raced and result.status == "migrated" and result.retries >= 1
    after = seen(ObjectStoreSaver(old, migrations=migrations()), ["chat-2"])["chat-2"]
    assert [row for row in after if row in expected["chat-2"]] == expected["chat-2"]  # old history intact
    assert after[-1][3]["log"][-2:] == ["worker turn", "b: refund in en"]  # and the worker's turn is there
    assert schemas(saver, ["chat-2"]) == {2}
    assert verify_store(saver, "chat-2").problems == []


def _writers_during_migration(store: StoreBase, rounds: int) -> dict[str, Any]:
    """Workers keep taking turns on every thread while ``migrate`` runs with concurrency 4."""
    errors: list[BaseException] = []
    turns: dict[str, int] = dict.fromkeys(FIXTURE_THREADS[:3], 0)
    stop = threading.Event()
    start = threading.Barrier(4)

    def worker(thread: str) -> None:
        graph = v3_graph(ObjectStoreSaver(store, migrations=stamped()))
        start.wait()
        try:
            while not stop.is_set() or turns[thread] < rounds:
                graph.invoke({"log": [f"turn {turns[thread]}"]}, cfg(thread))
                turns[thread] += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(t,)) for t in turns]
    for w in workers:
        w.start()
    start.wait()
    saver = ObjectStoreSaver(store, migrations=stamped())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(saver.migrate_thread, FIXTURE_THREADS))
    stop.set()
    for w in workers:
        w.join()
    assert errors == []
    final = {r.thread_id: r for r in results}
    assert {r.status for r in results} == {"migrated"}
    for thread, n in turns.items():
        log = ObjectStoreSaver(store, migrations=stamped()).get_tuple(cfg(thread)).checkpoint["channel_values"]["log"]
        mine = [x for x in log if x.startswith("turn ")]
        assert mine == [f"turn {i}" for i in range(n)], thread  # every turn, once, in order
    # one more pass finishes what the writers' own (current) records did not need
    assert {saver.migrate_thread(t).status for t in FIXTURE_THREADS} == {"current"}
    assert schemas(saver, FIXTURE_THREADS) == {3}
    assert verify_store(saver, None).problems == []
    return {"turns": turns, "retries": sum(r.retries for r in final.values())}


def test_concurrent_writers_on_the_local_store(tmp_path: Path) -> None:
    stats = _writers_during_migration(unpack_fixture(tmp_path / "store"), rounds=3)
    assert all(n >= 3 for n in stats["turns"].values())


# -- kills: a child process dies at every write the migration makes, then a rerun finishes ----------


def _die_at(root: str, target: int, when: str) -> None:
    seen_writes = [0]
    number: dict[int, int] = {}  # id(op) -> its place among the writes, while it runs

    def trip(op: Op, moment: str) -> None:
        if not is_write(op):
            return
        if moment == "before":
            seen_writes[0] += 1
            number[id(op)] = seen_writes[0]
        place = number[id(op)] if moment == "before" else number.pop(id(op))
        if moment == when and place == target:
            os._exit(17)  # before: the write never happens; after: it happened, nothing after it

    saver = ObjectStoreSaver(Tripwire(LocalStore(root), trip), migrations=stamped())
    for t in FIXTURE_THREADS:
        saver.migrate_thread(t)
    os._exit(0)


def test_killed_at_every_write_then_rerun_finishes_exactly_once(tmp_path: Path) -> None:
    reference = unpack_fixture(tmp_path / "reference")
    expected = seen(ObjectStoreSaver(reference, migrations=stamped()), FIXTURE_THREADS)
    writes = [0]
    counter = Tripwire(
        reference, lambda op, when: writes.__setitem__(0, writes[0] + (is_write(op) and when == "before"))
    )
    for t in FIXTURE_THREADS:
        ObjectStoreSaver(counter, migrations=stamped()).migrate_thread(t)
    assert writes[0] > 40
    ctx = multiprocessing.get_context("fork")
    killed = 0
    for target in range(1, writes[0] + 1):
        for when in ("before", "after"):
            root = tmp_path / f"k{target}{when}"
            unpack_fixture(root)
            child = ctx.Process(target=_die_at, args=(str(root), target, when))
            child.start()
            child.join()
            assert child.exitcode == 17, (target, when)
            killed += 1
            saver = ObjectStoreSaver(LocalStore(root), migrations=stamped())
            assert seen(saver, FIXTURE_THREADS) == expected, (target, when)  # readable mid-way
            for t in FIXTURE_THREADS:
                assert saver.migrate_thread(t).status in ("migrated", "current")
            assert seen(saver, FIXTURE_THREADS) == expected, (target, when)  # stamped exactly once
            assert schemas(saver, FIXTURE_THREADS) == {3}
            problems = verify_store(saver, None).problems
            assert problems == [], (target, when, problems)
    assert killed == 2 * writes[0]


# -- the command line ------------------------------------------------------------------------------


def test_cli_migrate_dry_run_run_rerun_and_failures(tmp_path: Path) -> None:
    store = unpack_fixture(tmp_path / "store")
    url = f"file://{tmp_path / 'store'}"
    objects = {i.key: i.etag for i in store.list("")}
    dry = cli("migrate", url, "--migrations", "tests.test_migrate:MIGRATIONS", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    lines = [json.loads(x) for x in dry.stdout.splitlines()]
    assert {r["thread_id"] for r in lines[:-1]} == set(FIXTURE_THREADS)
    summary = lines[-1]["summary"]
    assert (summary["scanned"], summary["migrated"], summary["failed"], summary["dry_run"]) == (7, 7, 0, True)
    assert {i.key: i.etag for i in store.list("")} == objects  # a dry run writes nothing

    one = cli("migrate", url, "--migrations", "tests.test_migrate:MIGRATIONS", "--thread", "chat-1", "--json")
    assert json.loads(one.stdout.splitlines()[-1])["summary"]["migrated"] == 1
    text = cli("migrate", url, "--migrations", "tests.test_migrate:MIGRATIONS", "--concurrency", "3")
    assert text.returncode == 0, text.stderr
    assert "migrated" in text.stdout and "already current" in text.stdout and "│       7 │" in text.stdout
    rerun = cli("migrate", url, "--migrations", "tests.test_migrate:MIGRATIONS", "--json")
    summary = json.loads(rerun.stdout.splitlines()[-1])["summary"]
    assert (summary["migrated"], summary["current"]) == (0, 7)
    marker = store.get("meta/format")
    assert marker is not None and envelope.decode(marker.body, key="m").format_version == envelope.FORMAT_VERSION


def test_cli_migrate_reports_failed_threads_and_exits_1(tmp_path: Path) -> None:
    unpack_fixture(tmp_path / "store")
    url = f"file://{tmp_path / 'store'}"
    out = cli("migrate", url, "--migrations", "tests.test_migrate:BROKEN", "--json")
    assert out.returncode == 1
    rows = {r["thread_id"]: r for r in map(json.loads, out.stdout.splitlines()[:-1])}
    assert rows["long"]["status"] == "failed" and "no turns allowed" in rows["long"]["error"]
    assert json.loads(out.stdout.splitlines()[-1])["summary"]["failed"] == 1
    assert rows["chat-0"]["status"] == "migrated"
    text = cli("migrate", url, "--migrations", "tests.test_migrate:BROKEN")
    assert text.returncode == 1 and "failed long: MigrationError" in " ".join(text.stderr.split())
    assert cli("migrate", url, "--thread", "", "--json").returncode == 2  # an invalid thread id
    assert cli("migrate", url, "--concurrency", "0").returncode == 2


async def test_migrate_many_sync_and_async_twins(tmp_path: Path) -> None:
    for name, run in (("sync", None), ("async", "a")):
        store = unpack_fixture(tmp_path / name)
        saver = ObjectStoreSaver(store, migrations=stamped())
        finished: list[str] = []
        note = finished.append
        if run is None:
            summary = saver.migrate(concurrency=3, on_result=lambda r, note=note: note(r.thread_id))
        else:
            summary = await saver.amigrate(concurrency=3, on_result=lambda r, note=note: note(r.thread_id))
        assert sorted(finished) == FIXTURE_THREADS and summary.as_dict()["migrated"] == 7 and summary.marked
        marker = store.get("meta/format")
        assert marker is not None and envelope.decode(marker.body, key="m").format_version == envelope.FORMAT_VERSION
        again = saver.migrate(["chat-0", "long"], dry_run=True)
        assert again.as_dict()["current"] == 2 and not again.marked
    with pytest.raises(TypeError, match="not a single string"):
        saver.migrate("chat-0")  # type: ignore[arg-type]


def test_a_deltachannel_thread_reads_again_once_migrated(store: StoreBase) -> None:
    """Lazy reads refuse DeltaChannel histories in an older schema; ``migrate`` rewrites them and
    the thread reads exactly as LangGraph's own saver would have it."""
    from langgraph.checkpoint.memory import InMemorySaver

    from tests.test_delta_channels import _run, delta_graph

    expected = _run(InMemorySaver())
    _run(ObjectStoreSaver(store))
    saver = ObjectStoreSaver(store, migrations=migrations(1))
    graph = delta_graph().compile(checkpointer=saver)
    with pytest.raises(MigrationError, match="DeltaChannel history"):
        graph.get_state(cfg("d"))
    assert saver.migrate_thread("d").status == "migrated"
    assert graph.get_state(cfg("d")).values == expected[0]
    assert [h.values for h in graph.get_state_history(cfg("d"))] == expected[1]
