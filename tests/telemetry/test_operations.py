"""Every saver operation is a ``checkpoint {op}`` span with its store, requests, compare-and-swap
attempts and outcome, and a duration: here the maintenance ones (``prune``, ``migrate``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.stores import MemoryStore
from tests.support.otel import LosesFirstRace, Otel

OUTCOME, THREAD = "langgraph_handoff.outcome", "gen_ai.conversation.id"


def _saver_with(*threads: str) -> ObjectStoreSaver:
    saver = ObjectStoreSaver(MemoryStore())
    for tid in threads:
        cfg: Any = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
        for n in (1, 2):
            cp = {"v": 4, "id": f"1ef4f797-8335-6428-800{n}-8a1503f9b875", "ts": "2024-01-01T00:00:00+00:00",
                  "channel_values": {"x": n}, "channel_versions": {"x": n}, "versions_seen": {}}  # fmt: skip
            cfg = saver.put(cfg, cp, {"source": "loop"}, {"x": n})
    return saver


def _spans(otel: Otel, name: str) -> list[ReadableSpan]:
    return [s for s in otel.finished() if s.name == name]


def _durations(otel: Otel, operation: str) -> dict[str, int]:
    points = otel.metric("langgraph_handoff.checkpoint.operation.duration")
    return {dict(a)[OUTCOME]: n for a, n in points.items() if dict(a)["gen_ai.operation.name"] == operation}


def test_prune_is_one_span_with_its_threads_requests_and_outcome(otel: Otel) -> None:
    saver = _saver_with("a", "b")
    saver.prune(["a"])
    saver.prune(["a", "b"], strategy="delete")
    one, both = _spans(otel, "checkpoint prune")
    assert one.attributes is not None and both.attributes is not None
    assert one.attributes[THREAD] == "a" and one.attributes["langgraph_handoff.checkpoint.threads"] == 1
    assert THREAD not in both.attributes and both.attributes["langgraph_handoff.checkpoint.threads"] == 2
    assert one.attributes[OUTCOME] == "committed" and one.attributes["langgraph_handoff.store"] == "memory"
    assert one.attributes["langgraph_handoff.store.requests"] > 0
    assert _durations(otel, "prune") == {"committed": 2}


async def test_aprune_is_traced_as_prune_is(otel: Otel) -> None:
    saver = _saver_with("a")
    await saver.aprune(["a"])
    assert [s.attributes and s.attributes[THREAD] for s in _spans(otel, "checkpoint prune")] == ["a"]


def test_a_prune_that_fails_says_why_on_its_span(otel: Otel) -> None:
    saver = _saver_with("a")
    with pytest.raises(ValueError, match="unknown prune strategy"):
        saver.prune(["a"], strategy="everything")
    (span,) = _spans(otel, "checkpoint prune")
    assert span.attributes is not None and span.attributes[OUTCOME] == "error"
    assert not span.status.is_ok


def test_migrate_is_a_span_per_thread_and_a_dry_run_commits_nothing(otel: Otel) -> None:
    saver = _saver_with("a", "b")
    saver.migrate_thread("a", dry_run=True)
    summary = saver.migrate()
    assert not summary.failed
    spans = _spans(otel, "checkpoint migrate")
    assert [(s.attributes or {}).get(THREAD) for s in spans[:1]] == ["a"]
    assert sorted((s.attributes or {})[THREAD] for s in spans[1:]) == ["a", "b"]
    assert [(s.attributes or {})[OUTCOME] for s in spans] == ["ok", "committed", "committed"]
    assert all((s.attributes or {})["langgraph_handoff.store.requests"] > 0 for s in spans)
    assert _durations(otel, "migrate") == {"ok": 1, "committed": 2}


async def test_amigrate_traces_each_thread(otel: Otel) -> None:
    saver = _saver_with("a", "b")
    await saver.amigrate_thread("a")
    await saver.amigrate(["a", "b"])
    spans = _spans(otel, "checkpoint migrate")
    assert sorted((s.attributes or {})[THREAD] for s in spans) == ["a", "a", "b"]


def test_each_lost_compare_and_swap_is_a_debug_record_naming_thread_attempt_and_key_kind(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    saver = ObjectStoreSaver(LosesFirstRace())
    cfg: Any = {"configurable": {"thread_id": "busy", "checkpoint_ns": ""}}
    cp = {"v": 4, "id": "1ef4f797-8335-6428-8001-8a1503f9b875", "ts": "2024-01-01T00:00:00+00:00",
          "channel_values": {"x": 1}, "channel_versions": {"x": 1}, "versions_seen": {}}  # fmt: skip
    with caplog.at_level(logging.DEBUG, logger="langgraph_handoff.checkpoint"):
        stored = saver.put(cfg, cp, {"source": "input"}, {"x": 1})
        saver.put_writes(stored, [("x", 2)], "task-1")
    retries = [r for r in caplog.records if getattr(r, "langgraph_handoff.event", None) == "checkpoint.cas_retry"]
    assert [(r.levelno, getattr(r, "gen_ai.conversation.id"), getattr(r, "langgraph_handoff.cas.attempt"),
             getattr(r, "langgraph_handoff.store.key.kind")) for r in retries] == [
        (logging.DEBUG, "busy", 1, "head"),
        (logging.DEBUG, "busy", 1, "writes"),
    ]  # fmt: skip
    assert "attempt 1 on a head of thread 'busy' failed" in retries[0].getMessage()
    assert sum(otel.metric("langgraph_handoff.checkpoint.cas.retries").values()) == 2
