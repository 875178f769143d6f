"""Schema gaps: an old checkpoint that still lacks a required field after its migrations ran is
logged once per thread and schema version, and listed by ``migrate`` (dry run included)."""

from __future__ import annotations

import asyncio
import logging
import operator
from typing import Annotated, Any

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff import telemetry as T
from langgraph_handoff.checkpoint.plans.migrate import SchemaGap
from langgraph_handoff.checkpoint.plans.upgrading import GapMemo
from langgraph_handoff.errors import InvalidConfigError
from langgraph_handoff.migrations import SchemaMigrations, rename_channel
from langgraph_handoff.stores import MemoryStore

LOGGER = "langgraph_handoff.migrations"


class V1(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    topic: str


def v1_graph(saver: ObjectStoreSaver) -> Any:
    g = StateGraph(V1)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_edge(START, "a")
    g.add_edge("a", END)
    return g.compile(checkpointer=saver)


def cfg(thread: str, ns: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    return {"configurable": conf}


def v2(*, fills: bool) -> SchemaMigrations:
    """Schema 2 requires ``subject`` and ``language``. Step 1 renames ``topic``; step 2 fills
    ``language`` (``fills``) or, the bug a gap reveals, forgets to."""
    m = SchemaMigrations(required=("subject", "language"))
    m.register(1)(rename_channel("topic", "subject"))

    @m.register(2, "add language")
    def add_language(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        if fills:
            values.setdefault("language", "en")

    return m


def gap_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


def written_v1(store: MemoryStore, *threads: str) -> None:
    graph = v1_graph(ObjectStoreSaver(store))
    for t in threads:
        graph.invoke({"log": ["hi"], "topic": "refund"}, cfg(t))


def test_a_gap_warns_once_per_thread_and_version_naming_both(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    written_v1(store, "chat-1", "chat-2")
    saver = ObjectStoreSaver(store, migrations=v2(fills=False))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):  # a thread read on every turn warns once, not once a turn
            tup = saver.get_tuple(cfg("chat-1"))
            assert tup is not None and tup.checkpoint["channel_values"]["subject"] == "refund"
        assert len(list(saver.list(cfg("chat-1")))) == 3  # every checkpoint: still one warning
        saver.get_tuple(cfg("chat-2"))
    records = gap_records(caplog)
    assert [r.__dict__[T.THREAD] for r in records] == ["chat-1", "chat-2"]
    first = records[0]
    assert "thread 'chat-1'" in first.getMessage() and "schema 0 still lacks 'language'" in first.getMessage()
    assert "to schema 2" in first.getMessage() and "register a migration" in first.getMessage()
    assert first.__dict__[T.EVENT] == "schema_gap"
    assert first.__dict__[T.SCHEMA_VERSION] == 0 and first.__dict__[T.SCHEMA_CURRENT] == 2
    assert first.__dict__[T.SCHEMA_MISSING] == ["language"]  # subject came from the rename


def test_the_async_path_shares_the_check(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    written_v1(store, "chat-1")
    graph = v1_graph(ObjectStoreSaver(store, migrations=v2(fills=False)))

    async def read() -> None:
        await graph.aget_state(cfg("chat-1"))
        await graph.aget_state(cfg("chat-1"))

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        asyncio.run(read())
    assert [r.__dict__[T.SCHEMA_MISSING] for r in gap_records(caplog)] == [["language"]]


def test_no_warning_when_the_migrations_fill_every_required_field(caplog: pytest.LogCaptureFixture) -> None:
    """The whole history is read, the thread's input checkpoint (step -1, no field written yet)
    included: it lacks both fields and is not a gap."""
    store = MemoryStore()
    written_v1(store, "chat-1")
    graph = v1_graph(ObjectStoreSaver(store, migrations=v2(fills=True)))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        history = list(graph.get_state_history(cfg("chat-1")))
    assert history[-1].metadata["step"] == -1 and "subject" not in history[-1].values
    assert gap_records(caplog) == []


def test_a_subgraph_namespace_is_not_checked_against_the_graph_s_fields(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    cp = {
        "v": 1, "id": "1ef4f797-8335-6428-8001-8a1503f9b875", "ts": "2024-01-01T00:00:00+00:00",
        "channel_values": {"inner": 1}, "channel_versions": {"inner": 1}, "versions_seen": {},
    }  # fmt: skip
    old = ObjectStoreSaver(store)
    for ns in ("", "sub:1"):
        old.put(cfg("chat-1", ns), cp, {"step": 0}, {"inner": 1})
    saver = ObjectStoreSaver(store, migrations=v2(fills=False))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        saver.get_tuple(cfg("chat-1", "sub:1"))
        assert gap_records(caplog) == []
        saver.get_tuple(cfg("chat-1", ""))  # the root checkpoint of the same shape is a gap
    assert [r.__dict__[T.SCHEMA_MISSING] for r in gap_records(caplog)] == [["subject", "language"]]


def test_migrate_lists_gaps_dry_run_or_not() -> None:
    store = MemoryStore()
    written_v1(store, "chat-1", "chat-2")
    saver = ObjectStoreSaver(store, migrations=v2(fills=False))
    dry = saver.migrate(dry_run=True)
    dry.results.sort(key=lambda r: r.thread_id)  # (in the order they finished)
    # input (step -1) is exempt; steps 0 and 1 lack language
    assert [(r.thread_id, r.status, r.gaps) for r in dry.results] == [
        (t, "would migrate", [SchemaGap(0, ("language",), 2)]) for t in ("chat-1", "chat-2")
    ]
    assert dry.as_dict()["gaps"] == 2
    assert dry.results[0].as_dict()["gaps"] == [{"version": 0, "missing": ("language",), "checkpoints": 2}]
    done = saver.migrate(["chat-1"])
    assert done.results[0].status == "migrated" and done.results[0].gaps == [SchemaGap(0, ("language",), 2)]
    # rewritten current: a rerun has nothing to say of chat-1, chat-2 still has its gap
    again = saver.migrate(dry_run=True)
    assert sorted((r.thread_id, r.gaps) for r in again.results) == [
        ("chat-1", []),
        ("chat-2", [SchemaGap(0, ("language",), 2)]),
    ]
    filled = ObjectStoreSaver(store, migrations=v2(fills=True)).migrate(["chat-2"], dry_run=True)
    assert filled.results[0].gaps == [] and filled.as_dict()["gaps"] == 0


def test_required_is_a_sequence_of_names() -> None:
    with pytest.raises(InvalidConfigError, match="sequence of field names"):
        SchemaMigrations(required="language")
    with pytest.raises(InvalidConfigError, match="sequence of field names"):
        SchemaMigrations(required=("language", ""))
    assert SchemaMigrations(required=["a", "b", "a"]).required == ("a", "b")
    assert SchemaMigrations(required=("a",)).missing({"a": None}) == ()  # present, even if None


def test_the_gap_memo_is_bounded_and_forgets_the_oldest_first() -> None:
    memo = GapMemo(size=2)
    assert memo.first("a", 1) and not memo.first("a", 1)
    assert memo.first("a", 2)  # another schema version of the same thread warns again
    assert memo.first("b", 1)  # full: ("a", 1) is forgotten
    assert memo.first("a", 1) and not memo.first("b", 1)
