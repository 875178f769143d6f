"""Store requests as client spans: off by default; on, one ``store {method}`` span per request
of a checkpoint operation, a child of the operation's span, with its method, outcome, key and
bytes (the key names the thread: on spans only, never on the request counter)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from langgraph_handoff import ObjectStoreSaver, telemetry
from langgraph_handoff.stores import MemoryStore
from langgraph_handoff.stores.counting import CountingStore
from tests.support.otel import LosesFirstRace, Otel

CFG: Any = {"configurable": {"thread_id": "chat-9", "checkpoint_ns": ""}}
CP = {"v": 4, "id": "1ef4f797-8335-6428-8001-8a1503f9b875", "ts": "2024-01-01T00:00:00+00:00",
      "channel_values": {"x": "y" * 100}, "channel_versions": {"x": 1}, "versions_seen": {}}  # fmt: skip


@pytest.fixture
def store_spans(otel: Otel) -> Iterator[Otel]:
    telemetry.configure(store_spans=True)
    try:
        yield otel
    finally:
        telemetry.configure(store_spans=False)


def _store_spans(otel: Otel) -> list[ReadableSpan]:
    return [s for s in otel.finished() if s.name.startswith("store ")]


def _children(otel: Otel, name: str) -> tuple[ReadableSpan, list[ReadableSpan]]:
    (op,) = [s for s in otel.finished() if s.name == name]
    assert op.context is not None
    kids = [s for s in _store_spans(otel) if s.parent is not None and s.parent.span_id == op.context.span_id]
    return op, kids


def test_store_spans_are_off_by_default(otel: Otel) -> None:
    assert not telemetry.store_spans_on()
    saver = ObjectStoreSaver(MemoryStore())
    saver.get_tuple(saver.put(CFG, CP, {"source": "input"}, {"x": 1}))
    assert [s.name for s in otel.finished()] == ["checkpoint put", "checkpoint get_tuple"]


def test_each_request_of_an_operation_is_a_client_span_under_it(store_spans: Otel) -> None:
    store = CountingStore(MemoryStore())
    saver = ObjectStoreSaver(store)
    stored = saver.put(CFG, CP, {"source": "input"}, {"x": 1})
    put, kids = _children(store_spans, "checkpoint put")
    assert kids and all(k.kind is SpanKind.CLIENT and k.context.trace_id == put.context.trace_id for k in kids)  # type: ignore[union-attr]
    assert len(kids) == store.requests == (put.attributes or {})["langgraph_handoff.store.requests"]
    head = next(
        k for k in kids if k.name == "store PUT" and (k.attributes or {})["langgraph_handoff.store.key.kind"] == "head"
    )
    attrs = head.attributes or {}
    assert attrs["langgraph_handoff.store.key"] == "heads/chat-9/="
    assert attrs["langgraph_handoff.store.method"] == "PUT" and attrs["langgraph_handoff.outcome"] == "ok"
    assert attrs["langgraph_handoff.store.condition"] == "if_none_match"
    assert attrs["langgraph_handoff.store"] == "memory"
    body = store.inner.get("heads/chat-9/=")
    assert body is not None and attrs["langgraph_handoff.store.bytes"] == len(body.body)
    assert head.start_time is not None and head.end_time is not None
    assert put.start_time <= head.start_time <= head.end_time <= put.end_time  # type: ignore[operator]

    store.reset()
    assert saver.get_tuple(stored) is not None
    _, reads = _children(store_spans, "checkpoint get_tuple")
    assert sorted(k.name for k in reads) == sorted(f"store {m}" for m, n in store.counts.items() for _ in range(n))
    got = next(k for k in reads if k.name == "store GET")
    assert (got.attributes or {})["langgraph_handoff.store.bytes"] == len(body.body)
    # the key is on spans; the request counter keeps to method, store and outcome
    for attrs_key in store_spans.metric("langgraph_handoff.store.requests"):
        assert {name for name, _ in attrs_key} == {
            "langgraph_handoff.store.method", "langgraph_handoff.store", "langgraph_handoff.outcome"
        }  # fmt: skip


async def test_the_async_path_makes_the_same_spans(store_spans: Otel) -> None:
    store = CountingStore(MemoryStore())
    await ObjectStoreSaver(store).aput(CFG, CP, {"source": "input"}, {"x": 1})
    _, kids = _children(store_spans, "checkpoint put")
    assert len(kids) == store.requests > 0


def test_a_lost_compare_and_swap_is_a_failed_request_span(store_spans: Otel) -> None:
    ObjectStoreSaver(LosesFirstRace()).put(CFG, CP, {"source": "input"}, {"x": 1})
    _, kids = _children(store_spans, "checkpoint put")
    heads = [
        k for k in kids if k.name == "store PUT" and (k.attributes or {})["langgraph_handoff.store.key.kind"] == "head"
    ]
    assert [(k.attributes or {})["langgraph_handoff.outcome"] for k in heads] == ["precondition_failed", "ok"]
    assert heads[0].status.status_code is StatusCode.ERROR
    assert (heads[0].attributes or {})["error.type"] == "PreconditionFailedError"


def test_the_environment_can_switch_store_spans_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGGRAPH_HANDOFF_TELEMETRY_STORE_SPANS", "on")
    assert telemetry._State().store_spans
    monkeypatch.setenv("LANGGRAPH_HANDOFF_TELEMETRY_STORE_SPANS", "off")
    assert not telemetry._State().store_spans
