"""State-schema migrations: checkpoints written with schema v1 read by code at v2 and v3."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import operator
from typing import Annotated, Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format.keys import head_key
from langgraph_handoff.errors import InvalidConfigError, MigrationError, SchemaVersionError
from langgraph_handoff.migrations import SchemaMigrations, rename_channel
from langgraph_handoff.stores import MemoryStore
from tests.support.graph_scenarios import ASYNC_INTERRUPTS
from tests.support.migrate_helpers import cfg

CFG = {"configurable": {"thread_id": "chat"}}


class V1(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    topic: str


class V3(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    subject: str
    language: str


def v1_graph(saver: Any, ask: bool = False) -> Any:
    g = StateGraph(V1)
    g.add_node("a", lambda s: {"log": ["a"], "topic": "refund"})

    def approve(s: V1) -> V1:
        return {"log": [f"approved: {interrupt('ok?')}"]}

    g.add_node("approve", approve)
    g.add_edge(START, "a")
    g.add_edge("a", "approve" if ask else END)
    g.add_edge("approve", END)
    return g.compile(checkpointer=saver)


def v3_graph(saver: Any, ask: bool = False) -> Any:
    g = StateGraph(V3)
    g.add_node("a", lambda s: {"log": ["a"], "subject": "refund"})

    def approve(s: V3) -> V3:
        return {"log": [f"approved: {interrupt('ok?')} ({s['subject']}, {s['language']})"]}

    g.add_node("approve", approve)
    g.add_node("b", lambda s: {"log": [f"b: {s['subject']} in {s['language']}"]})
    g.add_edge(START, "b" if not ask else "a")
    g.add_edge("a", "approve")
    g.add_edge("approve", END)
    g.add_edge("b", END)
    return g.compile(checkpointer=saver)


def migrations(up_to: int = 2) -> SchemaMigrations:
    m = SchemaMigrations()

    @m.register(1, "add language")
    def add_language(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        values.setdefault("language", "en")

    if up_to >= 2:
        m.register(2)(rename_channel("topic", "subject"))
    return m


def record_schemas(saver: ObjectStoreSaver) -> list[int]:
    head, _ = saver.heads.decode(saver.store.get(head_key("chat", "")), "chat", "")
    return [r.schema for _, r in sorted(head.records.items())]


def test_old_checkpoints_are_upgraded_on_read_and_rewritten_current(store, caplog) -> None:  # type: ignore[no-untyped-def]
    v1_graph(ObjectStoreSaver(store)).invoke({"log": ["hi"]}, CFG)
    saver = ObjectStoreSaver(store, migrations=migrations())
    with caplog.at_level(logging.INFO, logger="langgraph_handoff.migrations"):
        state = v3_graph(saver).get_state(CFG).values
    assert state == {"log": ["hi", "a"], "subject": "refund", "language": "en"}
    assert "schema 0 -> 1 (add language)" in caplog.text and "schema 1 -> 2 (rename topic -> subject)" in caplog.text
    assert all(s["language"] == "en" for s in (h.values for h in v3_graph(saver).get_state_history(CFG)) if s)
    out = v3_graph(saver).invoke({"log": ["again"]}, CFG)  # a resumed conversation sees the new shape
    assert out["log"][-1] == "b: refund in en"
    assert record_schemas(saver)[-1] == 2 and record_schemas(saver)[0] == 0
    fresh = ObjectStoreSaver(store, migrations=migrations())  # another process: reads v2 records as they are
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="langgraph_handoff.migrations"):
        assert v3_graph(fresh).get_state(CFG).values["subject"] == "refund"
    assert "migrated" not in caplog.text


def test_a_newer_checkpoint_is_refused_whole(store) -> None:  # type: ignore[no-untyped-def]
    v1_graph(ObjectStoreSaver(store)).invoke({"log": ["hi"]}, CFG)
    v3_graph(ObjectStoreSaver(store, migrations=migrations(2))).invoke({"log": ["x"]}, CFG)
    with pytest.raises(SchemaVersionError, match="schema version 2, but this code knows versions up to 1"):
        ObjectStoreSaver(store, migrations=migrations(1)).get_tuple(CFG)
    with pytest.raises(SchemaVersionError):
        list(ObjectStoreSaver(store).list(CFG))


async def test_interrupted_v1_thread_resumes_under_v3(store) -> None:  # type: ignore[no-untyped-def]
    v1_graph(ObjectStoreSaver(store), ask=True).invoke({"log": ["hi"]}, CFG)
    saver = ObjectStoreSaver(store, migrations=migrations())
    graph = v3_graph(saver, ask=True)
    assert (await graph.aget_state(CFG)).values["language"] == "en"
    if ASYNC_INTERRUPTS:
        out = await graph.ainvoke(Command(resume="yes"), CFG)
    else:  # Python 3.10: interrupt() cannot run under ainvoke (LangGraph's limitation); resume with the sync API
        out = await asyncio.to_thread(graph.invoke, Command(resume="yes"), CFG)
    assert out["log"][-1] == "approved: yes (refund, en)"


def test_pending_writes_follow_a_rename(store) -> None:  # type: ignore[no-untyped-def]
    saver1 = ObjectStoreSaver(store)
    v1_graph(saver1).invoke({"log": ["hi"]}, CFG)
    latest = saver1.get_tuple(CFG)
    saver1.put_writes(latest.config, [("topic", "exchange")], "task-1")
    migrated = ObjectStoreSaver(store, migrations=migrations()).get_tuple(CFG)
    assert ("task-1", "subject", "exchange") in migrated.pending_writes


def test_migration_errors_and_bad_registries_are_typed(store) -> None:  # type: ignore[no-untyped-def]
    v1_graph(ObjectStoreSaver(store)).invoke({"log": ["hi"]}, CFG)
    broken = SchemaMigrations()

    @broken.register(1, "boom")
    def boom(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        raise KeyError("nope")

    with pytest.raises(MigrationError, match=r"migration 1 \(boom\) failed"):
        ObjectStoreSaver(store, migrations=broken).get_tuple(CFG)
    gap = SchemaMigrations()
    gap.register(2, "two")(lambda v, m: None)
    with pytest.raises(InvalidConfigError, match="missing"):
        ObjectStoreSaver(store, migrations=gap)
    with pytest.raises(InvalidConfigError):
        migrations().register(1)
    with pytest.raises(InvalidConfigError):
        SchemaMigrations().register(0)


def test_from_url_takes_migrations(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"file://{tmp_path / 'store'}"
    v1_graph(ObjectStoreSaver.from_url(url)).invoke({"log": ["hi"]}, CFG)
    saver = ObjectStoreSaver.from_url(url, migrations=migrations())
    assert saver.get_tuple(CFG).checkpoint["channel_values"]["language"] == "en"


def renamed_then_reused() -> Any:
    """Format 2 fix: v1 renames topic -> subject and v2 adds a new, unrelated ``topic``. A write
    that v2 code makes on a v0 checkpoint is addressed to the *new* topic. Format 1 writes did not
    say which schema named them, so such a write was renamed to ``subject``."""
    m = SchemaMigrations()
    m.register(1)(rename_channel("topic", "subject"))

    @m.register(2, "new topic")
    def new_topic(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        values.setdefault("topic", "none")

    old_code = ObjectStoreSaver.from_url("memory://")
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    cp = {"v": 4, "id": "1ef4f797-8335-6428-8001-8a1503f9b875", "ts": "2024-01-01T00:00:00+00:00",
          "channel_values": {"topic": "refund"}, "channel_versions": {"topic": 1}, "versions_seen": {}}  # fmt: skip
    saved = old_code.put(config, cp, {}, {"topic": 1})
    old_code.put_writes(saved, [("topic", "old write")], "old-task")
    new_code = ObjectStoreSaver(old_code.store, migrations=m)
    new_code.put_writes(saved, [("topic", "new write")], "new-task")
    for saver in (new_code, ObjectStoreSaver(old_code.store, migrations=m)):  # cached and fresh readers
        writes = saver.get_tuple(config).pending_writes
        assert ("old-task", "subject", "old write") in writes and ("new-task", "topic", "new write") in writes
    return new_code, config, m


def test_new_channel_named_like_an_old_renamed_one() -> None:
    renamed_then_reused()


def test_a_step_returning_something_else_than_values_is_a_migration_error() -> None:
    m = SchemaMigrations()
    m.register(1, "bad")(lambda values, metadata: values.setdefault("x", "y"))  # returns "y"
    with pytest.raises(MigrationError, match="returned a str"):
        m.upgrade({}, {}, from_version=0)


def test_migration_changes_are_compared_as_stored(store) -> None:  # type: ignore[no-untyped-def]
    """A migration step's change is detected on the serialized value: arrays must not break the
    comparison, and 1 -> 1.0 (equal, but stored differently) is a change.

    Found by the fourth review round; fails before commit 495eae2."""
    import numpy as np

    class E(TypedDict, total=False):
        emb: Any
        n: Any

    def build(saver: Any) -> Any:
        g = StateGraph(E)
        g.add_node("a", lambda s: {"emb": np.array([0.0, 1.0]), "n": 1})
        g.add_edge(START, "a")
        g.add_edge("a", END)
        return g.compile(checkpointer=saver)

    build(ObjectStoreSaver(store)).invoke({}, CFG)
    m = SchemaMigrations()

    @m.register(1, "n becomes a float")
    def fn(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        values["n"] = float(values["n"])  # 1.0 == 1, but it is stored differently

    tup = ObjectStoreSaver(store, migrations=m).get_tuple(CFG)  # arrays must not break the comparison
    old = ObjectStoreSaver(store).get_tuple(CFG)
    assert tup.checkpoint["channel_versions"]["n"] != old.checkpoint["channel_versions"]["n"]
    assert tup.checkpoint["channel_versions"]["emb"] == old.checkpoint["channel_versions"]["emb"]


def test_list_filter_sees_migrated_metadata(store) -> None:  # type: ignore[no-untyped-def]
    """list(filter=...) filters on the metadata readers see (migrated).

    Found by the fourth review round; fails before commit 495eae2."""
    v1_graph(ObjectStoreSaver(store)).invoke({"log": ["hi"]}, CFG)
    m = SchemaMigrations()

    @m.register(1, "mark")
    def mark(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        metadata["migrated"] = True

    saver = ObjectStoreSaver(store, migrations=m)
    assert len(list(saver.list(CFG, filter={"migrated": True}))) == len(list(saver.list(CFG))) > 0


def test_int_channel_versions_stay_ints() -> None:
    """Int channel versions stay ints through a lazy read, migrate and a later schema step.

    Found by the seventh review round; fails before commit b02d53b."""
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
    step wrote them), so the new channel passed for the old one and kept its stored value.

    Found by the eighth review round; fails before commit c5296ee."""
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


@dataclasses.dataclass
class _Profile:
    name: str
    seen: set[int] = dataclasses.field(default_factory=set)


def test_sets_inside_dataclasses_do_not_make_a_channel_changed() -> None:
    """Sets inside dataclasses compare in order: a copy's other set order made the channel
    'changed' on a lazy read.

    Found by the eighth review round; fails before commit c5296ee."""
    items = [34, 145, 195, 16, 65, 30, 126, 194, 115, 120, 166, 97]  # orders differ after a copy
    store = MemoryStore()
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    cp = {"v": 4, "id": "1ef4f797-8335-6428-8001-8a1503f9b875", "ts": "2024-01-01T00:00:00+00:00",
          "channel_values": {"profile": _Profile("ann", set(items))}, "channel_versions": {"profile": "1.0"},
          "versions_seen": {}}  # fmt: skip
    ObjectStoreSaver(store).put(config, cp, {}, {"profile": "1.0"})
    lazy = ObjectStoreSaver(store, migrations=migrations(1))
    assert lazy.get_tuple(config).checkpoint["channel_versions"]["profile"] == "1.0"
