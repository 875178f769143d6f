"""Regressions from the fifth review round (``migrate``, storage format 2, the typer CLI). Each
test failed on the commit before its fix."""

from __future__ import annotations

import dataclasses
import json
import operator
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import msgpack
import pytest
from langgraph.channels.delta import DeltaChannel
from typing_extensions import TypedDict

from langgraph_handoff import ObjectStoreSaver, envelope
from langgraph_handoff.checkpoint.plans import Layout
from langgraph_handoff.envelope import Kind
from langgraph_handoff.errors import MigrationError, UnknownOutcomeError
from langgraph_handoff.inspect import verify_store
from langgraph_handoff.migrations import SchemaMigrations
from langgraph_handoff.stores import MemoryStore, StoreBase
from langgraph_handoff.stores.base import Op, Put
from langgraph_handoff.stores.counting import CountingStore
from tests.migrate_helpers import Tripwire, cfg, seen, unpack_fixture
from tests.test_cli import cli
from tests.test_migrate import BROKEN, stamped
from tests.test_migrations import migrations, v1_graph

ROOT = Path(__file__).resolve().parents[1]


def test_a_failed_migration_writes_nothing_at_all(tmp_path: Path) -> None:
    """The writes documents were rewritten before the failing step ran: a rollback to the
    previous schema could then no longer read the thread."""
    store = unpack_fixture(tmp_path / "store")
    before = {i.key: i.etag for i in store.list("")}
    with pytest.raises(MigrationError, match="fails on the long thread"):
        ObjectStoreSaver(store, migrations=BROKEN).migrate_thread("long")
    assert {i.key: i.etag for i in store.list("")} == before
    ObjectStoreSaver(store, migrations=migrations(1)).get_tuple(cfg("long"))  # the previous release reads it


def test_list_filter_agrees_before_and_after_migrate() -> None:
    """Lazy filtering upgraded metadata without the values, so a step deriving metadata from
    values filtered differently before and after ``migrate``."""
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


def _format1_writes(store: StoreBase, thread: str) -> None:
    """Re-frame a thread's writes documents as the format-1 release stored them."""
    for info in store.list(f"data/{thread}/=/w/"):
        obj = store.get(info.key)
        assert obj is not None
        body, _env = envelope.decode_msgpack(obj.body, key=info.key, expect=Kind.WRITES)
        body["i"] = [item[:4] for item in body["i"]]
        store.put(info.key, envelope.encode(Kind.WRITES, msgpack.packb(body, use_bin_type=True), format_version=1))


def test_a_prune_just_before_the_head_swap_is_not_a_keyerror() -> None:
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


def test_cli_prints_failures_with_brackets_verbatim(tmp_path: Path) -> None:
    """A failure message with ``[/...]`` was read as rich markup: a traceback and no summary."""
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


def test_cli_refuses_a_missing_directory_and_reports_unknown_threads(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    out = cli("migrate", f"file://{missing}", "--dry-run")
    assert out.returncode == 2 and "no store at" in out.stderr and not missing.exists()
    unpack_fixture(tmp_path / "store")
    url = f"file://{tmp_path / 'store'}"
    typo = cli("migrate", url, "--migrations", "tests.test_migrate:MIGRATIONS", "--thread", "chat-9", "--json")
    rows = [json.loads(x) for x in typo.stdout.splitlines()]
    assert typo.returncode == 1 and rows[0]["status"] == "not found" and rows[-1]["summary"]["not_found"] == 1
    twice = cli("migrate", url, "--migrations", "tests.test_migrate:MIGRATIONS", "--thread", "chat-0",
                "--thread", "chat-0", "--json")  # fmt: skip
    summary = json.loads(twice.stdout.splitlines()[-1])["summary"]
    assert twice.returncode == 0 and (summary["scanned"], summary["migrated"]) == (1, 1)


# -- sixth review round ------------------------------------------------------------------------------


def test_a_lost_pass_keeps_a_large_value_a_surviving_checkpoint_still_uses() -> None:
    """A renamed channel's large value gets the same blob key as the old one (owner + bytes). A
    prune before the head swap drops its owner but keeps the blob, which the latest checkpoint
    still uses; the lost pass deleted it as its own."""
    from langgraph.graph import END, START, StateGraph

    from langgraph_handoff.errors import LangGraphHandoffError
    from tests.test_migrations import V1

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


def test_short_help_option_and_deleted_threads(tmp_path: Path) -> None:
    from langgraph_handoff.ownership import SessionManager

    assert cli("-h").returncode == 0 and cli("migrate", "-h").returncode == 0
    url = f"file://{tmp_path / 'store'}"
    saver = ObjectStoreSaver.from_url(url)
    SessionManager(saver).acquire("gone", "worker-a", ttl=60)
    v1_graph(saver).invoke({"log": ["hi"]}, cfg("gone"))
    saver.delete_thread("gone")  # keeps a tombstone head with the released lease and epoch
    assert saver.migrate_thread("gone").status == "not found"
    assert cli("migrate", url, "--thread", "gone").returncode == 1


# -- seventh review round -----------------------------------------------------------------------------


def _extend(state: list[str] | None, writes: list[list[str]]) -> list[str]:
    return [*(state or []), *(x for w in writes for x in w)]


class _Items(TypedDict, total=False):
    items: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=3)]


def test_a_deltachannel_turn_after_a_lazy_read_cannot_undo_the_steps() -> None:
    """The latest checkpoint held a DeltaChannel snapshot, so the lazy read was allowed; the next
    checkpoint (new code, no snapshot) was seeded from the old record's unmigrated value."""
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


_SET_STEPS = """
import operator, sys
from typing import Annotated
from typing_extensions import TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import LocalStore
from tests.test_migrations import migrations

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


def test_a_set_written_under_another_hash_seed_still_migrates(tmp_path: Path) -> None:
    """A set's bytes follow the process's hash seed: the shared, untouched value was compared by
    bytes after a round trip and the migration failed on every rerun."""
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


def test_int_channel_versions_stay_ints() -> None:
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    cp = {"v": 1, "id": "1ef4f797-8335-6428-8001-8a1503f9b875", "ts": "2024-01-01T00:00:00+00:00",
          "channel_values": {"topic": "refund"}, "channel_versions": {"topic": 1}, "versions_seen": {}}  # fmt: skip
    store = MemoryStore()
    ObjectStoreSaver(store).put(config, cp, {}, {"topic": 1})
    one = ObjectStoreSaver(store, migrations=migrations(1))
    assert one.get_tuple(config).checkpoint["channel_versions"] == {"topic": 1, "language": 2}
    one.migrate_thread("t")
    two = migrations(1)

    @two.register(2, "add region")
    def region(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        values.setdefault("region", "eu")

    read = ObjectStoreSaver(store, migrations=two).get_tuple(config).checkpoint
    assert read["channel_values"]["region"] == "eu" and read["channel_versions"]["region"] == 3


def test_lazy_reads_return_what_migrate_stores() -> None:
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


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_failing_progress_callback_stops_the_run(api: str, tmp_path: Path) -> None:
    """An exception in on_result (a closed pipe) or Ctrl-C surfaced only after every thread was
    migrated; the async twin kept migrating in the background."""
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


# -- eighth review round ------------------------------------------------------------------------------


class _Old(TypedDict, total=False):
    summary: str
    summary_v2: dict[str, str]
    n: int


class _New(TypedDict, total=False):
    summary: dict[str, str]
    n: int


def _count(state: dict[str, Any]) -> dict[str, int]:
    return {"n": state.get("n", 0) + 1}


def test_a_rename_onto_a_name_the_old_schema_used_is_not_unchanged() -> None:
    """Drop ``summary``, rename ``summary_v2`` onto it: both old channels had one version (one
    step wrote them), so the new channel passed for the old one and kept its stored value."""
    from langgraph.graph import END, START, StateGraph

    from langgraph_handoff.migrations import rename_channel

    m = SchemaMigrations()

    @m.register(1, "drop the old summary")
    def drop(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        values.pop("summary", None)

    m.register(2)(rename_channel("summary_v2", "summary"))

    def graph(schema: Any, saver: ObjectStoreSaver) -> Any:
        g = StateGraph(schema)
        g.add_node("step", _count)
        g.add_edge(START, "step")
        g.add_edge("step", END)
        return g.compile(checkpointer=saver)

    for mode in ("a turn after a lazy read", "migrate"):
        store = MemoryStore()
        graph(_Old, ObjectStoreSaver(store)).invoke({"summary": "OLD", "summary_v2": {"text": "NEW"}}, cfg("t"))
        saver = ObjectStoreSaver(store, migrations=m)
        assert graph(_New, saver).get_state(cfg("t")).values["summary"] == {"text": "NEW"}
        if mode == "migrate":
            saver.migrate_thread("t")
        else:
            graph(_New, saver).invoke({"n": 10}, cfg("t"))
        fresh = graph(_New, ObjectStoreSaver(store, migrations=m))
        assert fresh.get_state(cfg("t")).values["summary"] == {"text": "NEW"}, mode


def test_an_unchanged_spilled_value_under_an_encrypting_serde_migrates() -> None:
    """The owner's copy sealed in a segment was plain inline, the head's a spill or a blob
    reference: compared as payload objects they differed, and the re-encrypted bytes never
    match, so the thread failed on every rerun."""
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
    from langgraph.graph import END, START, StateGraph

    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0" * 16)
    small = Layout(head_max_records=5, head_keep=4, spill_threshold=1000)

    def graph(saver: ObjectStoreSaver) -> Any:
        g = StateGraph(_Doc)
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


class _Doc(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    doc: str


@dataclasses.dataclass
class _Profile:
    name: str
    seen: set[int] = dataclasses.field(default_factory=set)


def test_sets_inside_dataclasses_do_not_make_a_channel_changed() -> None:
    items = [34, 145, 195, 16, 65, 30, 126, 194, 115, 120, 166, 97]  # orders differ after a copy
    store = MemoryStore()
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    cp = {"v": 4, "id": "1ef4f797-8335-6428-8001-8a1503f9b875", "ts": "2024-01-01T00:00:00+00:00",
          "channel_values": {"profile": _Profile("ann", set(items))}, "channel_versions": {"profile": "1.0"},
          "versions_seen": {}}  # fmt: skip
    ObjectStoreSaver(store).put(config, cp, {}, {"profile": "1.0"})
    lazy = ObjectStoreSaver(store, migrations=migrations(1))
    assert lazy.get_tuple(config).checkpoint["channel_versions"]["profile"] == "1.0"


def test_verify_counts_blob_formats_apart(tmp_path: Path) -> None:
    """Blobs keep format 1 after a full migrate (their framing never changed), so counting them
    with the rest said a migrate was still due after the marker said all was current."""
    store = unpack_fixture(tmp_path / "store")
    saver = ObjectStoreSaver(store, migrations=migrations())
    assert saver.migrate().marked
    report = verify_store(saver)
    assert set(report.formats) == {envelope.FORMAT_VERSION} and report.blob_formats == {1: 24}


def test_prune_collects_a_dropped_checkpoints_blobs_by_key() -> None:
    """prune kept every blob of a dropped checkpoint as soon as one of them was still used."""
    from langgraph.graph import END, START, StateGraph

    store = MemoryStore()
    small = Layout(blob_threshold=256, spill_threshold=200, head_max_records=6, head_keep=2)
    g = StateGraph(_Doc)
    g.add_node("a", lambda s: {"log": ["a"]})  # never touches doc
    g.add_edge(START, "a")
    g.add_edge("a", END)
    graph = g.compile(checkpointer=ObjectStoreSaver(store, layout=small))
    graph.invoke({"log": ["hi " + "x" * 300], "doc": "T" * 1000}, cfg("t"))  # two blobs, one owner
    for i in range(3):
        graph.invoke({"log": [f"turn {i}"]}, cfg("t"))  # the log changes, the doc is shared
    saver = ObjectStoreSaver(store, layout=small)
    saver.prune(["t"])
    report = verify_store(saver)
    assert report.problems == [] and report.unreferenced == []


# -- ninth review round: blob collection against spill-behind -----------------------------------------


class _Big(TypedDict, total=False):
    big: str
    n: int


class _Body(TypedDict, total=False):
    body: str
    n: int


def _counting(schema: Any, saver: ObjectStoreSaver) -> Any:
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(schema)
    g.add_node("a", lambda s: {"n": s.get("n", 0) + 1})
    g.add_edge(START, "a")
    g.add_edge("a", END)
    return g.compile(checkpointer=saver)


_SPILLY = Layout(blob_threshold=100_000, spill_threshold=200)


def _reads_whole(store: StoreBase, saver: ObjectStoreSaver) -> None:
    list(saver.list(cfg("t")))  # every checkpoint and value
    assert verify_store(saver).problems == []


def test_prune_keeps_a_blob_a_writer_spills_meanwhile() -> None:
    """prune dropped the value's owner but kept the value inline; a writer's turn between prune's
    head swap and its blob collection spilled it to the owner's key, prune deleted that key, and
    the writer's next put referenced it."""
    store = MemoryStore()
    graph = _counting(_Big, ObjectStoreSaver(store, layout=_SPILLY))
    graph.invoke({"big": "B" * 1000}, cfg("t"))
    for _ in range(3):
        graph.invoke({}, cfg("t"))
    worker = _counting(_Big, ObjectStoreSaver(store, layout=_SPILLY))
    fired: list[int] = []

    def turn_before_collection(op: Op, when: str) -> None:
        if when == "before" and not fired and getattr(op, "prefix", "").endswith("/b/"):
            fired.append(1)
            worker.invoke({"big": "C" * 1000}, cfg("t"))  # B is no longer the latest's: spilled

    ObjectStoreSaver(Tripwire(store, turn_before_collection), layout=_SPILLY).prune(["t"])
    worker.invoke({}, cfg("t"))  # the confirmed spill becomes a blob reference
    assert fired
    _reads_whole(store, ObjectStoreSaver(store, layout=_SPILLY))


def test_migrate_keeps_a_blob_a_running_worker_remembers_written() -> None:
    """A new-code worker spilled an old checkpoint's value and remembers the blob written;
    migrate renamed the channel, held the same bytes inline under the same owner and deleted the
    blob; the worker's next turn referenced it."""
    from langgraph_handoff.migrations import rename_channel

    m = SchemaMigrations()
    m.register(1)(rename_channel("big", "body"))
    store = MemoryStore()
    _counting(_Big, ObjectStoreSaver(store, layout=_SPILLY)).invoke({"big": "X" * 1000}, cfg("t"))
    worker = _counting(_Body, ObjectStoreSaver(store, migrations=m, layout=_SPILLY))
    worker.invoke({"body": "Y" * 1000}, cfg("t"))  # X is no longer the latest's: spilled
    worker.invoke({}, cfg("t"))  # ... and confirmed
    ObjectStoreSaver(store, migrations=m, layout=_SPILLY).migrate_thread("t")
    worker.invoke({}, cfg("t"))
    _reads_whole(store, ObjectStoreSaver(store, migrations=m, layout=_SPILLY))


# -- tenth review round ------------------------------------------------------------------------------


class _Lost(CountingStore):
    """The head swap lands, a worker writes on top, and the answer to the swap is lost."""

    def __init__(self, inner: StoreBase, on_top: Any) -> None:
        super().__init__(inner)
        self.on_top, self.armed = on_top, True

    def run(self, op: Op) -> Any:
        if self.armed and isinstance(op, Put) and op.key == "heads/t/=" and op.if_match:
            self.armed = False
            super().run(op)
            self.on_top()
            raise UnknownOutcomeError(op.key, "HTTP 500")
        return super().run(op)


def _delete_run_r1_with_a_lost_answer() -> tuple[StoreBase, Layout]:
    """Six runs on one thread (segments mixing runs), then delete_for_runs(["r1"]) whose head
    swap lands while a worker takes a turn on top, and whose answer is lost."""
    tiny = Layout(head_max_records=5, head_keep=1)
    store = MemoryStore()
    worker = _counting(_Big, ObjectStoreSaver(store, layout=tiny))
    for i in range(6):
        worker.invoke({"n": 0} if i == 0 else {}, {"configurable": {"thread_id": "t"}, "metadata": {"run_id": f"r{i}"}})
    ObjectStoreSaver(_Lost(store, lambda: worker.invoke({}, cfg("t"))), layout=tiny).delete_for_runs(["r1"])
    return store, tiny


def test_a_lost_answer_to_a_rewrite_does_not_delete_the_segments_it_stored() -> None:
    store, tiny = _delete_run_r1_with_a_lost_answer()
    _reads_whole(store, ObjectStoreSaver(store, layout=tiny))


def test_a_lost_answer_to_migrates_head_swap_collects_what_it_replaced() -> None:
    from langgraph_handoff.migrations import rename_channel

    tiny = Layout(head_max_records=4, head_keep=2)
    store = MemoryStore()
    graph = _counting(_Big, ObjectStoreSaver(store, layout=tiny))
    for i in range(8):
        graph.invoke({"big": "B" * 300} if i == 0 else {}, cfg("t"))
    m = SchemaMigrations()
    m.register(1)(rename_channel("big", "body"))
    worker = _counting(_Body, ObjectStoreSaver(store, layout=tiny, migrations=m))
    saver = ObjectStoreSaver(_Lost(store, lambda: worker.invoke({}, cfg("t"))), layout=tiny, migrations=m)
    assert saver.migrate_thread("t").status == "migrated"
    report = verify_store(ObjectStoreSaver(store, migrations=m))
    assert report.problems == [] and report.unreferenced == []  # the replaced segments went


def test_a_thread_deleted_and_copied_back_under_a_running_worker() -> None:
    """The worker remembered a blob written; the copy brought back the same checkpoint ids (the
    same blob keys) with the value inline, and the worker's next put referenced the deleted blob."""
    store = MemoryStore()
    _counting(_Big, ObjectStoreSaver(store, layout=_SPILLY)).invoke({"big": "B" * 1000}, cfg("src"))
    _counting(_Big, ObjectStoreSaver(store, layout=_SPILLY)).update_state(cfg("src"), {"big": "C" * 1000})
    admin = ObjectStoreSaver(store, layout=_SPILLY)
    admin.copy_thread("src", "t")
    worker = _counting(_Big, ObjectStoreSaver(store, layout=_SPILLY))
    worker.invoke({}, cfg("t"))  # writes B's spill under t and remembers it
    worker.invoke({}, cfg("t"))  # B becomes a reference to that blob
    admin.delete_thread("t")
    admin.copy_thread("src", "t")  # back to the copy: B inline again, the blob gone
    worker.invoke({}, cfg("t"))
    _reads_whole(store, ObjectStoreSaver(store, layout=_SPILLY))


def test_migrate_reuses_a_renamed_channels_blob() -> None:
    from langgraph_handoff.migrations import rename_channel

    store = MemoryStore()
    big = Layout(blob_threshold=500)
    _counting(_Big, ObjectStoreSaver(store, layout=big)).invoke({"big": "B" * 1000}, cfg("t"))
    m = SchemaMigrations()
    m.register(1)(rename_channel("big", "body"))
    blobs = {i.key for i in store.list("data/t/=/b/")}
    ObjectStoreSaver(store, migrations=m).migrate_thread("t")  # default layout: would be inline
    report = verify_store(ObjectStoreSaver(store, migrations=m))
    assert report.unreferenced == [] and {i.key for i in store.list("data/t/=/b/")} == blobs


def test_ctrl_c_reports_every_thread_it_migrated(tmp_path: Path) -> None:
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


# -- eleventh review round ----------------------------------------------------------------------------


def test_a_restore_that_recreates_the_same_head_bytes_is_not_mistaken_for_it() -> None:
    """Content-hash ETags: a delete and a copy back recreated the worker's last head byte for
    byte, so its next compare-and-swap succeeded without a re-read and it trusted blobs it
    remembered writing, which the delete had removed (ABA)."""
    store = MemoryStore()
    worker_saver = ObjectStoreSaver(store)
    worker = _counting(_Big, worker_saver)
    admin = ObjectStoreSaver(store)
    worker.invoke({"big": "B" * 40000}, cfg("t"))
    worker.update_state(cfg("t"), {"big": "C" * 40000})  # B superseded: its blob written, remembered
    etag = store.get("heads/t/=").etag  # type: ignore[union-attr]
    admin.copy_thread("t", "bak")
    admin.delete_thread("t")
    admin.copy_thread("bak", "t")
    assert store.get("heads/t/=").etag != etag  # type: ignore[union-attr]
    worker.invoke({}, cfg("t"))
    _reads_whole(store, ObjectStoreSaver(store))


def test_a_deleted_runs_checkpoints_do_not_linger_after_a_lost_answer() -> None:
    """delete_for_runs whose head swap landed unseen under a worker's turn found nothing left to
    drop on its next attempt and never collected the replaced segments (holding the deleted
    run's checkpoints) or its writes."""
    store, tiny = _delete_run_r1_with_a_lost_answer()
    fresh = ObjectStoreSaver(store, layout=tiny)
    _reads_whole(store, fresh)
    assert verify_store(fresh).unreferenced == []
    assert all(t.metadata.get("run_id") != "r1" for t in fresh.list(cfg("t")))


# -- twelfth review round -----------------------------------------------------------------------------


class _Two(TypedDict, total=False):
    doc: str
    other: str
    n: int


def _alternating(saver: ObjectStoreSaver) -> Any:
    from langgraph.graph import END, START, StateGraph

    def a(state: dict[str, Any]) -> dict[str, Any]:
        n = state.get("n", 0) + 1
        return {"n": n, **({"other": chr(65 + n % 26) * 600} if n % 3 == 0 else {})}

    g = StateGraph(_Two)
    g.add_node("a", a)
    g.add_edge(START, "a")
    g.add_edge("a", END)
    return g.compile(checkpointer=saver)


def test_a_segment_sealed_on_top_and_replaced_before_it_is_read_stops_the_collection() -> None:
    """prune's swap landed unseen, a worker's turn on top sealed a segment, and another admin job
    replaced that segment right after prune's re-read: prune skipped the missing segment and
    collected a blob the replacement still references."""
    from langgraph_handoff.stores.base import Get

    layout = Layout(blob_threshold=100_000, spill_threshold=200, head_max_records=3, head_keep=1)
    store = MemoryStore()
    graph = _alternating(ObjectStoreSaver(store, layout=layout))

    def run(g: Any, rid: str, inp: dict[str, Any]) -> None:
        g.invoke(inp, {"configurable": {"thread_id": "t"}, "metadata": {"run_id": rid}})

    run(graph, "r0", {"doc": "B" * 1000})
    for i in range(5):
        run(graph, f"r{i + 1}", {"doc": f"X{i}" * 300} if i == 1 else {})
    worker = _alternating(ObjectStoreSaver(store, layout=layout))
    state = {"late": False}

    class Racing(_Lost):
        def run(self, op: Op) -> Any:
            out = super().run(op)
            if state["late"] and isinstance(op, Get) and op.key == "heads/t/=":
                state["late"] = False  # just after prune's re-read: another admin job
                ObjectStoreSaver(store, layout=layout).delete_for_runs(["r5"])
            return out

    def on_top() -> None:
        run(worker, "w", {"doc": "W" * 800})  # seals a segment
        state["late"] = True

    ObjectStoreSaver(Racing(store, on_top), layout=layout).prune(["t"])
    _reads_whole(store, ObjectStoreSaver(store, layout=layout))
