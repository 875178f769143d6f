"""``migrate``: old data (storage format 1, state schema 0) rewritten into the current format and
schema, checked against what lazy readers saw, across kills, concurrent writers and the CLI."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import msgpack
import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.types import Command
from typing_extensions import TypedDict

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import envelope
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff.checkpoint.plans import Layout
from langgraph_handoff.errors import MigrationError, SchemaVersionError
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.migrations import SchemaMigrations
from langgraph_handoff.stores import LocalStore, MemoryStore, StoreBase
from langgraph_handoff.stores.base import Op, Put
from tests.checkpoint.test_delta_channels import _extend
from tests.checkpoint.test_migrations import migrations, v1_graph, v3_graph
from tests.cli.test_cli import cli
from tests.support.migrate_helpers import (
    FIXTURE_THREADS,
    Tripwire,
    cfg,
    formats,
    is_write,
    old_store,
    seen,
    unpack_fixture,
)
from tests.support.saver_helpers import Big, Body, Doc, LostSwapAnswer, counting_graph

ROOT = Path(__file__).resolve().parents[2]


def stamped() -> SchemaMigrations:
    """v1 -> v3 plus a step that is *not* idempotent (it appends to the log): a checkpoint
    migrated twice would show two stamps."""
    m = migrations(2)

    @m.register(3, "stamp the log")
    def stamp(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        if "log" in values:
            values["log"] = [*values["log"], "migrated"]

    return m


#: for the CLI tests: ``--migrations tests.checkpoint.test_migrate:MIGRATIONS``
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
        for ns in driver.run(saver.store, saver.heads.namespaces(t)):
            head, _, segments, _ = driver.run(saver.store, saver._plan_load_namespace(t, ns))
            for recs in [head.records, *(s.records for s in segments.values())]:
                found |= {r.schema for r in recs.values()}
    return found


def referenced_blobs(saver: ObjectStoreSaver, thread: str) -> set[str]:
    from langgraph_handoff.checkpoint import driver

    head, _, segments, _ = driver.run(saver.store, saver._plan_load_namespace(thread, ""))
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


def test_a_failed_migration_writes_nothing_at_all(tmp_path: Path) -> None:
    """The writes documents were rewritten before the failing step ran: a rollback to the
    previous schema could then no longer read the thread.

    Found by the fifth review round; fails before commit 3b07dff."""
    store = unpack_fixture(tmp_path / "store")
    before = {i.key: i.etag for i in store.list("")}
    with pytest.raises(MigrationError, match="fails on the long thread"):
        ObjectStoreSaver(store, migrations=BROKEN).migrate_thread("long")
    assert {i.key: i.etag for i in store.list("")} == before
    ObjectStoreSaver(store, migrations=migrations(1)).get_tuple(cfg("long"))  # the previous release reads it


def test_list_filter_agrees_before_and_after_migrate() -> None:
    """Lazy filtering upgraded metadata without the values, so a step deriving metadata from
    values filtered differently before and after ``migrate``.

    Found by the fifth review round; fails before commit 3b07dff."""
    store = MemoryStore()
    v1_graph(ObjectStoreSaver(store)).invoke({"log": ["hi"]}, cfg("t"))
    m = SchemaMigrations()

    @m.register(1, "tag metadata with the topic")
    def tag(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        metadata["topic"] = values.get("topic")

    def refund_ids(saver: ObjectStoreSaver) -> list[str]:
        return [t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg("t"), filter={"topic": "refund"})]

    lazy = ObjectStoreSaver(store, migrations=m)
    before = refund_ids(lazy)
    assert len(before) == 1
    assert [t.metadata.get("topic") for t in lazy.list(cfg("t"))].count("refund") == 1
    lazy.migrate_thread("t")
    assert refund_ids(ObjectStoreSaver(store, migrations=m)) == before


def test_lazy_reads_return_what_migrate_stores() -> None:
    """Lazy reads round-trip changed values and metadata (a tuple here) through the serde, as
    migrate stores them.

    Found by the seventh review round; fails before commit b02d53b."""
    store = MemoryStore()
    v1_graph(ObjectStoreSaver(store)).invoke({"log": ["hi"]}, cfg("t"))
    m = SchemaMigrations()

    @m.register(1, "a tuple")
    def pair(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        values["pair"] = ("pre", values.get("topic"))
        metadata["pair"] = ("pre", "t")

    lazy = seen(ObjectStoreSaver(store, migrations=m), ["t"])
    ObjectStoreSaver(store, migrations=m).migrate_thread("t")
    assert seen(ObjectStoreSaver(store, migrations=m), ["t"]) == lazy


def test_migrate_keeps_writes_of_a_new_channel_named_like_an_old_renamed_one() -> None:
    from tests.checkpoint.test_migrations import renamed_then_reused

    saver, config, m = renamed_then_reused()
    assert saver.migrate_thread("t").status == "migrated"
    writes = ObjectStoreSaver(saver.store, migrations=m).get_tuple(config).pending_writes
    assert ("old-task", "subject", "old write") in writes and ("new-task", "topic", "new write") in writes


_SET_STEPS = """
import operator, sys
from typing import Annotated
from typing_extensions import TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import LocalStore
from tests.checkpoint.test_migrations import migrations

class S(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    tags: set

first = sys.argv[2] == "old"
g = StateGraph(S)
g.add_node("a", (lambda s: {"log": ["a"], "tags": {f"tag-{i}" for i in range(40)}}) if first else (lambda s: {"log": ["b"]}))
g.add_edge(START, "a")
g.add_edge("a", END)
saver = ObjectStoreSaver(LocalStore(sys.argv[1]), migrations=None if first else migrations(1))
if sys.argv[2] == "migrate":
    print(saver.migrate_thread("t").status)
else:
    g.compile(checkpointer=saver).invoke({"log": ["hi"]}, {"configurable": {"thread_id": "t"}})
"""


@pytest.mark.heavy
def test_a_set_written_under_another_hash_seed_still_migrates(tmp_path: Path) -> None:
    """A set's bytes follow the process's hash seed: the shared, untouched value was compared by
    bytes after a round trip and the migration failed on every rerun.

    Found by the seventh review round; fails before commit b02d53b."""
    (tmp_path / "steps.py").write_text(_SET_STEPS)
    outs = []
    for seed, step in (("1", "old"), ("2", "turn"), ("3", "migrate")):
        out = subprocess.run(
            [sys.executable, str(tmp_path / "steps.py"), str(tmp_path / "store"), step],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        outs.append(out.stdout.strip())
    assert outs[-1] == "migrated"


def test_an_encrypting_serde_does_not_make_every_channel_changed() -> None:
    """An encrypting serde made every channel 'changed': a lazy read moved every version, and migrate
    stored every value again.

    Found by the seventh review round; fails before commit b02d53b."""
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0" * 16)
    store = MemoryStore()
    graph = v1_graph(ObjectStoreSaver(store, serde=serde))
    for i in range(8):
        graph.invoke({"log": [f"turn {i} " + "x" * 2000]}, cfg("t"))
    stored = ObjectStoreSaver(store, serde=serde).get_tuple(cfg("t")).checkpoint["channel_versions"]
    lazy = ObjectStoreSaver(store, serde=serde, migrations=migrations(1)).get_tuple(cfg("t"))
    versions = lazy.checkpoint["channel_versions"]
    assert {ch: v for ch, v in versions.items() if ch != "language"} == stored  # only the new channel moves
    size = sum(i.size for i in store.list(""))
    ObjectStoreSaver(store, serde=serde, migrations=migrations(1)).migrate_thread("t")
    assert sum(i.size for i in store.list("")) < 1.3 * size  # was about 10x: every value stored again


def test_an_unchanged_spilled_value_under_an_encrypting_serde_migrates() -> None:
    """The owner's copy sealed in a segment was plain inline, the head's a spill or a blob
    reference: compared as payload objects they differed, and the re-encrypted bytes never
    match, so the thread failed on every rerun.

    Found by the eighth review round; fails before commit c5296ee."""
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
    from langgraph.graph import END, START, StateGraph

    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0" * 16)
    small = Layout(head_max_records=5, head_keep=4, spill_threshold=1000)

    def graph(saver: ObjectStoreSaver) -> Any:
        g = StateGraph(Doc)
        g.add_node("a", lambda s: {"log": ["a"]})  # never touches doc
        g.add_edge(START, "a")
        g.add_edge("a", END)
        return g.compile(checkpointer=saver)

    store = MemoryStore()
    graph(ObjectStoreSaver(store, serde=serde, layout=small)).invoke({"log": ["hi"], "doc": "D" * 5000}, cfg("t"))
    saver = ObjectStoreSaver(store, serde=serde, layout=small, migrations=migrations(1))
    graph(saver).invoke({"log": ["t2"]}, cfg("t"))  # shares the old value
    graph(saver).invoke({"log": ["t3"], "doc": "E" * 5000}, cfg("t"))  # replaces it: the old one spills
    for i in range(3):
        graph(saver).invoke({"log": [f"t{4 + i}"]}, cfg("t"))
    before = seen(saver, ["t"])
    assert saver.migrate_thread("t").status == "migrated"
    assert seen(ObjectStoreSaver(store, serde=serde, migrations=migrations(1)), ["t"]) == before


def test_migrate_reuses_a_renamed_channels_blob() -> None:
    """migrate reuses the blob a renamed channel's value already had (the default layout would hold
    it inline).

    Found by the tenth review round; fails before commit 8d3d56f."""
    from langgraph_handoff.migrations import rename_channel

    store = MemoryStore()
    big = Layout(blob_threshold=500)
    counting_graph(Big, ObjectStoreSaver(store, layout=big)).invoke({"big": "B" * 1000}, cfg("t"))
    m = SchemaMigrations()
    m.register(1)(rename_channel("big", "body"))
    blobs = {i.key for i in store.list("data/t/=/b/")}
    ObjectStoreSaver(store, migrations=m).migrate_thread("t")  # default layout: would be inline
    report = verify_store(ObjectStoreSaver(store, migrations=m))
    assert report.unreferenced == [] and {i.key for i in store.list("data/t/=/b/")} == blobs


def test_verify_counts_blob_formats_apart(tmp_path: Path) -> None:
    """Blobs keep format 1 after a full migrate (their framing never changed), so counting them
    with the rest said a migrate was still due after the marker said all was current.

    Found by the eighth review round; fails before commit c5296ee."""
    store = unpack_fixture(tmp_path / "store")
    saver = ObjectStoreSaver(store, migrations=migrations())
    assert saver.migrate().marked
    report = verify_store(saver)
    assert set(report.formats) == {envelope.FORMAT_VERSION} and report.blob_formats == {1: 24}


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


def _format1_writes(store: StoreBase, thread: str) -> None:
    """Re-frame a thread's writes documents as the format-1 release stored them."""
    for info in store.list(f"data/{thread}/=/w/"):
        obj = store.get(info.key)
        assert obj is not None
        body, _env = envelope.decode_msgpack(obj.body, key=info.key, expect=Kind.WRITES)
        body["i"] = [item[:4] for item in body["i"]]
        store.put(info.key, envelope.encode(Kind.WRITES, msgpack.packb(body, use_bin_type=True), format_version=1))


def test_a_prune_just_before_the_head_swap_is_not_a_keyerror() -> None:
    """A prune landing just before migrate's head swap raised KeyError (the fast path now requires
    every old head record still there).

    Found by the fifth review round; fails before commit 3b07dff."""
    store = MemoryStore()
    graph = v1_graph(ObjectStoreSaver(store))
    for turn in range(3):
        graph.invoke({"log": [f"turn {turn}"]}, cfg("t"))
    _format1_writes(store, "t")
    latest = ObjectStoreSaver(store).get_tuple(cfg("t"))
    pruned: list[int] = []

    def prune_first(op: Op, when: str) -> None:
        if when == "before" and isinstance(op, Put) and op.key.startswith("heads/") and not pruned:
            pruned.append(1)
            ObjectStoreSaver(store).prune(["t"])

    result = ObjectStoreSaver(Tripwire(store, prune_first)).migrate_thread("t")
    assert pruned and result.status == "migrated" and result.retries >= 1
    fresh = ObjectStoreSaver(store)
    assert fresh.get_tuple(cfg("t")) == latest and len(list(fresh.list(cfg("t")))) == 1
    report = verify_store(fresh)
    assert report.problems == [] and set(report.formats) == {envelope.FORMAT_VERSION}


@pytest.mark.parametrize("action", ["delete", "prune"])
def test_a_delete_or_prune_during_migration_leaves_no_orphan_blobs(action: str) -> None:
    """Blobs written by a migration that lost to delete_thread or prune were leaked.

    Found by the fifth review round; fails before commit 3b07dff."""
    store = MemoryStore()
    layout = Layout(blob_threshold=256)
    graph = v1_graph(ObjectStoreSaver(store, layout=layout))
    for turn in range(3):
        graph.invoke({"log": [f"turn {turn} " + "x" * 400]}, cfg("t"))
    other = ObjectStoreSaver(store)
    done: list[int] = []

    def land_first(op: Op, when: str) -> None:  # after migrate read the thread, before its new blobs
        if when == "before" and isinstance(op, Put) and "/b/" in op.key and not done:
            done.append(1)
            other.delete_thread("t") if action == "delete" else other.prune(["t"])

    ObjectStoreSaver(Tripwire(store, land_first), migrations=stamped(), layout=layout).migrate_thread("t")
    assert done
    report = verify_store(ObjectStoreSaver(store, migrations=stamped()))
    assert report.problems == [] and report.unreferenced == []
    if action == "delete":
        assert list(store.list("")) == []


def test_a_lost_pass_keeps_a_large_value_a_surviving_checkpoint_still_uses() -> None:
    """A renamed channel's large value gets the same blob key as the old one (owner + bytes). A
    prune before the head swap drops its owner but keeps the blob, which the latest checkpoint
    still uses; the lost pass deleted it as its own.

    Found by the sixth review round; fails before commit b6816d1."""
    from langgraph.graph import END, START, StateGraph

    from langgraph_handoff.errors import LangGraphHandoffError
    from tests.checkpoint.test_migrations import V1

    layout = Layout(blob_threshold=256)
    store = MemoryStore()
    builder = StateGraph(V1)
    builder.add_node("a", lambda s: {"log": ["a"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", END)
    graph = builder.compile(checkpointer=ObjectStoreSaver(store, layout=layout))
    graph.invoke({"log": ["hi"], "topic": "T" * 1000}, cfg("t"))  # topic stored once, as a blob
    graph.invoke({"log": ["again"]}, cfg("t"))  # later checkpoints inherit it
    readable: list[bool] = []
    steps: list[str] = []

    def interfere(op: Op, when: str) -> None:
        if when == "before" and isinstance(op, Put) and op.key.startswith("heads/") and op.if_match and not steps:
            steps.append("pruned")
            ObjectStoreSaver(store, layout=layout).prune(["t"])
        elif when == "after" and steps == ["pruned"] and type(op).__name__ == "DeleteMany":
            steps.append("cleaned")
            try:  # a reader between the lost pass and the next one
                ObjectStoreSaver(store, migrations=migrations()).get_tuple(cfg("t"))
                readable.append(True)
            except LangGraphHandoffError:
                readable.append(False)

    ObjectStoreSaver(Tripwire(store, interfere), migrations=migrations(), layout=layout).migrate_thread("t")
    assert steps and all(readable)
    fresh = ObjectStoreSaver(store, migrations=migrations())
    assert fresh.get_tuple(cfg("t")).checkpoint["channel_values"]["subject"] == "T" * 1000
    report = verify_store(fresh)
    assert report.problems == [] and report.unreferenced == []


def test_a_checkpoint_from_newer_code_mid_pass_leaves_nothing_unreferenced() -> None:
    """A newer-schema checkpoint arriving during the fast retry failed the pass after a replacement
    segment was written; such a head now restarts the pass, and any exception cleans up what
    the pass wrote.

    Found by the sixth review round; fails before commit b6816d1."""
    from langgraph.checkpoint.base.id import uuid6

    from langgraph_handoff.errors import SchemaVersionError
    from langgraph_handoff.migrations import rename_channel

    small = Layout(head_max_records=5, head_keep=2)
    store = MemoryStore()
    graph = v1_graph(ObjectStoreSaver(store, layout=small))
    for i in range(3):
        graph.invoke({"log": [f"turn {i}"]}, cfg("t"))
    newer = migrations()
    newer.register(3)(rename_channel("log", "journal"))
    before = {i.key for i in store.list("")}
    arrived: list[int] = []

    def newer_writer(op: Op, when: str) -> None:
        if when == "before" and isinstance(op, Put) and op.key.startswith("heads/") and op.if_match and not arrived:
            arrived.append(1)
            writer = ObjectStoreSaver(store, migrations=newer, layout=Layout(head_max_records=50, head_keep=2))
            tup = writer.get_tuple(cfg("t"))
            writer.put(tup.config, {**tup.checkpoint, "id": str(uuid6(clock_seq=-2))}, {"source": "update"}, {})

    with pytest.raises(SchemaVersionError):
        ObjectStoreSaver(Tripwire(store, newer_writer), migrations=migrations(), layout=small).migrate_thread("t")
    report = verify_store(ObjectStoreSaver(store, migrations=newer))
    assert arrived and report.problems == [] and report.unreferenced == []
    assert {i.key for i in store.list("")} - before == set()  # no replacement segment left behind


def test_a_lost_answer_to_migrates_head_swap_collects_what_it_replaced() -> None:
    """migrate whose head swap landed while a worker wrote on top, its answer lost, treats that race
    as a success and collects the segments it replaced.

    Found by the tenth review round; fails before commit 8d3d56f."""
    from langgraph_handoff.migrations import rename_channel

    tiny = Layout(head_max_records=4, head_keep=2)
    store = MemoryStore()
    graph = counting_graph(Big, ObjectStoreSaver(store, layout=tiny))
    for i in range(8):
        graph.invoke({"big": "B" * 300} if i == 0 else {}, cfg("t"))
    m = SchemaMigrations()
    m.register(1)(rename_channel("big", "body"))
    worker = counting_graph(Body, ObjectStoreSaver(store, layout=tiny, migrations=m))
    saver = ObjectStoreSaver(LostSwapAnswer(store, lambda: worker.invoke({}, cfg("t"))), layout=tiny, migrations=m)
    assert saver.migrate_thread("t").status == "migrated"
    report = verify_store(ObjectStoreSaver(store, migrations=m))
    assert report.problems == [] and report.unreferenced == []  # the replaced segments went


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


@pytest.mark.heavy
def test_killed_at_every_write_then_rerun_finishes_exactly_once(fast_dir: Path) -> None:
    tmp_path = fast_dir
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


@pytest.mark.heavy
def test_cli_migrate_dry_run_run_rerun_and_failures(tmp_path: Path) -> None:
    store = unpack_fixture(tmp_path / "store")
    url = f"file://{tmp_path / 'store'}"
    objects = {i.key: i.etag for i in store.list("")}
    dry = cli("migrate", url, "--migrations", "tests.checkpoint.test_migrate:MIGRATIONS", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    lines = [json.loads(x) for x in dry.stdout.splitlines()]
    assert {r["thread_id"] for r in lines[:-1]} == set(FIXTURE_THREADS)
    summary = lines[-1]["summary"]
    assert (summary["scanned"], summary["migrated"], summary["failed"], summary["dry_run"]) == (7, 7, 0, True)
    assert {i.key: i.etag for i in store.list("")} == objects  # a dry run writes nothing

    one = cli(
        "migrate", url, "--migrations", "tests.checkpoint.test_migrate:MIGRATIONS", "--thread", "chat-1", "--json"
    )
    assert json.loads(one.stdout.splitlines()[-1])["summary"]["migrated"] == 1
    text = cli("migrate", url, "--migrations", "tests.checkpoint.test_migrate:MIGRATIONS", "--concurrency", "3")
    assert text.returncode == 0, text.stderr
    assert "migrated" in text.stdout and "already current" in text.stdout and "│       7 │" in text.stdout
    rerun = cli("migrate", url, "--migrations", "tests.checkpoint.test_migrate:MIGRATIONS", "--json")
    summary = json.loads(rerun.stdout.splitlines()[-1])["summary"]
    assert (summary["migrated"], summary["current"]) == (0, 7)
    marker = store.get("meta/format")
    assert marker is not None and envelope.decode(marker.body, key="m").format_version == envelope.FORMAT_VERSION


@pytest.mark.heavy
def test_cli_migrate_reports_failed_threads_and_exits_1(tmp_path: Path) -> None:
    unpack_fixture(tmp_path / "store")
    url = f"file://{tmp_path / 'store'}"
    out = cli("migrate", url, "--migrations", "tests.checkpoint.test_migrate:BROKEN", "--json")
    assert out.returncode == 1
    rows = {r["thread_id"]: r for r in map(json.loads, out.stdout.splitlines()[:-1])}
    assert rows["long"]["status"] == "failed" and "no turns allowed" in rows["long"]["error"]
    assert json.loads(out.stdout.splitlines()[-1])["summary"]["failed"] == 1
    assert rows["chat-0"]["status"] == "migrated"
    text = cli("migrate", url, "--migrations", "tests.checkpoint.test_migrate:BROKEN")
    assert text.returncode == 1 and "failed long: MigrationError" in " ".join(text.stderr.split())
    assert cli("migrate", url, "--thread", "", "--json").returncode == 2  # an invalid thread id
    assert cli("migrate", url, "--concurrency", "0").returncode == 2


def test_cli_prints_failures_with_brackets_verbatim(tmp_path: Path) -> None:
    """A failure message with ``[/...]`` was read as rich markup: a traceback and no summary.

    Found by the fifth review round; fails before commit 3b07dff."""
    (tmp_path / "bracketed.py").write_text(
        "from langgraph_handoff.migrations import SchemaMigrations\n"
        "migrations = SchemaMigrations()\n"
        "@migrations.register(1, 'needs a subject')\n"
        "def needs(values, metadata):\n    raise ValueError('missing field [/subject] [i]')\n"
    )
    unpack_fixture(tmp_path / "store")
    out = cli(
        "migrate", f"file://{tmp_path / 'store'}", "--migrations", "bracketed:migrations",
        path=tmp_path,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert "missing field [/subject] [i]" in " ".join(out.stderr.split())
    assert "scanned" in out.stdout and "Traceback" not in out.stderr


@pytest.mark.heavy
def test_cli_refuses_a_missing_directory_and_reports_unknown_threads(tmp_path: Path) -> None:
    """The CLI refuses a missing file:// directory (without creating it), reports an unknown
    ``--thread`` as not found, and migrates a repeated one once.

    Found by the fifth review round; fails before commit 3b07dff."""
    missing = tmp_path / "nowhere"
    out = cli("migrate", f"file://{missing}", "--dry-run")
    assert out.returncode == 2 and "no store at" in out.stderr and not missing.exists()
    unpack_fixture(tmp_path / "store")
    url = f"file://{tmp_path / 'store'}"
    typo = cli(
        "migrate", url, "--migrations", "tests.checkpoint.test_migrate:MIGRATIONS", "--thread", "chat-9", "--json"
    )
    rows = [json.loads(x) for x in typo.stdout.splitlines()]
    assert typo.returncode == 1 and rows[0]["status"] == "not found" and rows[-1]["summary"]["not_found"] == 1
    twice = cli("migrate", url, "--migrations", "tests.checkpoint.test_migrate:MIGRATIONS", "--thread", "chat-0",
                "--thread", "chat-0", "--json")  # fmt: skip
    summary = json.loads(twice.stdout.splitlines()[-1])["summary"]
    assert twice.returncode == 0 and (summary["scanned"], summary["migrated"]) == (1, 1)


def test_short_help_option_and_deleted_threads(tmp_path: Path) -> None:
    """``-h`` works as well as ``--help``; a deleted (tombstoned, leased) thread is 'not found'.

    Found by the sixth review round; fails before commit b6816d1."""
    from langgraph_handoff.ownership import SessionManager

    assert cli("-h").returncode == 0 and cli("migrate", "-h").returncode == 0
    url = f"file://{tmp_path / 'store'}"
    saver = ObjectStoreSaver.from_url(url)
    SessionManager(saver).acquire("gone", "worker-a", ttl=60)
    v1_graph(saver).invoke({"log": ["hi"]}, cfg("gone"))
    saver.delete_thread("gone")  # keeps a tombstone head with the released lease and epoch
    assert saver.migrate_thread("gone").status == "not found"
    assert cli("migrate", url, "--thread", "gone").returncode == 1


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


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_failing_progress_callback_stops_the_run(api: str, tmp_path: Path) -> None:
    """An exception in on_result (a closed pipe) or Ctrl-C surfaced only after every thread was
    migrated; the async twin kept migrating in the background.

    Found by the seventh review round; fails before commit b02d53b."""
    from langgraph_handoff.stores import LocalStore

    store = LocalStore(tmp_path / "store")
    graph = v1_graph(ObjectStoreSaver(store))
    for n in range(60):
        graph.invoke({"log": ["hi"]}, cfg(f"t{n}"))
    saver = ObjectStoreSaver(store, migrations=migrations(1))

    def explode(result: Any) -> None:
        raise BrokenPipeError("progress output closed")

    with pytest.raises(BrokenPipeError):
        if api == "sync":
            saver.migrate(concurrency=2, on_result=explode)
        else:
            await saver.amigrate(concurrency=2, on_result=explode)
    if api == "async":  # nothing left running in the background once the error is raised
        import asyncio

        assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    done = ObjectStoreSaver(store, migrations=migrations(1)).migrate(dry_run=True).as_dict()
    assert done["current"] <= 4 and done["migrated"] >= 56
    assert verify_store(saver).problems == []


def test_a_failing_progress_callback_stops_after_the_threads_under_way(tmp_path: Path) -> None:
    """The sync run queued every thread in its pool up front: while the caller's thread was in
    ``on_result`` (or waiting for the CPU, under load), the pool's workers went on taking new
    threads, so a progress callback that failed on the first result still saw 6 of 60 threads
    migrated (the test above failed so on Python 3.12 under a loaded machine). Now at most
    ``concurrency`` threads are handed out at a time, the next only after ``on_result`` returned.

    Here ``on_result`` fails on the first result, once the pool has either started a fourth
    thread (before the fix) or finished everything it was given (after): at most 2 migrated."""
    store = LocalStore(tmp_path / "store", fsync=False)
    graph = v1_graph(ObjectStoreSaver(store))
    for n in range(20):
        graph.invoke({"log": ["hi"]}, cfg(f"t{n}"))
    saver = ObjectStoreSaver(store, migrations=migrations(1))
    plan = saver._plan_migrate_thread
    changed = threading.Condition()
    counts = {"started": 0, "finished": 0}

    def tracked(*args: Any) -> Any:  # a worker thread's plan for one thread, counted
        with changed:
            counts["started"] += 1
            changed.notify_all()
        result = yield from plan(*args)
        with changed:
            counts["finished"] += 1
            changed.notify_all()
        return result

    def explode(result: Any) -> None:
        with changed:
            assert changed.wait_for(lambda: counts["started"] >= 4 or counts["finished"] == counts["started"], 30)
        raise BrokenPipeError("progress output closed")

    saver._plan_migrate_thread = tracked  # type: ignore[method-assign]
    with pytest.raises(BrokenPipeError):
        saver.migrate(concurrency=2, on_result=explode)
    done = ObjectStoreSaver(store, migrations=migrations(1)).migrate(dry_run=True).as_dict()
    assert (done["current"], done["migrated"]) == (2, 18), counts


def test_ctrl_c_reports_every_thread_it_migrated(tmp_path: Path) -> None:
    """Ctrl-C reports every thread migrated before the stop.

    Found by the tenth review round; fails before commit 8d3d56f."""
    from langgraph_handoff.stores import LocalStore

    store = LocalStore(tmp_path / "store")
    graph = v1_graph(ObjectStoreSaver(store))
    for n in range(40):
        graph.invoke({"log": ["hi"]}, cfg(f"t{n}"))
    reported: list[str] = []

    def interrupt_once(result: Any) -> None:
        reported.append(result.thread_id)
        if len(reported) == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ObjectStoreSaver(store, migrations=migrations(1)).migrate(concurrency=4, on_result=interrupt_once)
    done = [r.thread_id for r in ObjectStoreSaver(store, migrations=migrations(1)).migrate(dry_run=True).results
            if r.status == "current"]  # fmt: skip
    assert sorted(reported) == sorted(done) and len(done) < 40


def test_a_deltachannel_thread_reads_again_once_migrated(store: StoreBase) -> None:
    """Lazy reads refuse DeltaChannel histories in an older schema; ``migrate`` rewrites them and
    the thread reads exactly as LangGraph's own saver would have it."""
    from langgraph.checkpoint.memory import InMemorySaver

    from tests.checkpoint.test_delta_channels import _run, delta_graph

    expected = _run(InMemorySaver())
    _run(ObjectStoreSaver(store))
    saver = ObjectStoreSaver(store, migrations=migrations(1))
    graph = delta_graph().compile(checkpointer=saver)
    with pytest.raises(MigrationError, match="DeltaChannel history"):
        graph.get_state(cfg("d"))
    assert saver.migrate_thread("d").status == "migrated"
    assert graph.get_state(cfg("d")).values == expected[0]
    assert [h.values for h in graph.get_state_history(cfg("d"))] == expected[1]


class _Items(TypedDict, total=False):
    items: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=3)]


def test_a_deltachannel_turn_after_a_lazy_read_cannot_undo_the_steps() -> None:
    """The latest checkpoint held a DeltaChannel snapshot, so the lazy read was allowed; the next
    checkpoint (new code, no snapshot) was seeded from the old record's unmigrated value.

    Found by the seventh review round; fails before commit b02d53b."""
    from langgraph.graph import END, START, StateGraph

    def graph(saver: ObjectStoreSaver, tag: str) -> Any:
        g = StateGraph(_Items)
        g.add_node("a", lambda s: {"items": [tag]})
        g.add_edge(START, "a")
        g.add_edge("a", END)
        return g.compile(checkpointer=saver)

    def upper(x: Any) -> Any:  # a stored snapshot is LangGraph's wrapper with a .value
        if isinstance(x, str):
            return x.upper()
        if isinstance(x, list):
            return [upper(y) for y in x]
        return type(x)(value=upper(x.value)) if hasattr(x, "value") else x

    m = SchemaMigrations()

    @m.register(1, "upper-case items")
    def step(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        if "items" in values:
            values["items"] = upper(values["items"])

    results = {}
    for mode in ("migrate first", "lazy first"):
        store = MemoryStore()
        for i in range(3):
            graph(ObjectStoreSaver(store), f"old{i}").invoke({"items": [f"in{i}"]}, cfg("d"))
        saver = ObjectStoreSaver(store, migrations=m)
        if mode == "migrate first":
            saver.migrate_thread("d")
        graph(saver, "new").invoke({"items": ["t0"]}, cfg("d"))
        if mode == "lazy first":
            with pytest.raises(MigrationError, match="DeltaChannel history"):
                graph(saver, "new").get_state(cfg("d"))
            saver.migrate_thread("d")
        results[mode] = graph(saver, "new").get_state(cfg("d")).values["items"]
    assert results["lazy first"] == results["migrate first"]
    assert results["migrate first"][:2] == ["IN0", "OLD0"]
