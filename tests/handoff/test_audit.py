"""Audit sampling: which handoffs are kept for a person to check, that a replayed step keeps
the same one once, and the review commands over the store sink's records."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from langgraph_handoff import ObjectStoreSaver, telemetry
from langgraph_handoff._format import envelope
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff.errors import AuditRecordNotFoundError, InvalidInputError
from langgraph_handoff.handoff import (
    AuditPolicy,
    AuditRecord,
    HandoffAgent,
    StoreAuditSink,
    create_handoff_graph,
    handoff_log,
)
from langgraph_handoff.handoff.audit import audit_key
from langgraph_handoff.handoff.tools import tool_name_for
from langgraph_handoff.testing import ScriptedChatModel, tool_call
from tests.support.audit_helpers import Sink
from tests.support.processes import run_main

BRIEFING = "Customer wants a refund for the damaged headphones from order A-1001; start the return."


def _desk(audit: Any, checkpointer: Any = None, triage: Any = None) -> Any:
    triage = triage or ScriptedChatModel([tool_call(tool_name_for("after_sales"), {"briefing": BRIEFING})], cycle=True)
    agents = [
        HandoffAgent("triage", triage, description="routes"),
        HandoffAgent("after_sales", ScriptedChatModel(["refund started"], cycle=True), description="refunds"),
    ]
    return create_handoff_graph(agents, audit=audit, checkpointer=checkpointer or InMemorySaver())


def _turns(graph: Any, n: int) -> list[dict[str, Any]]:
    return [
        graph.invoke({"messages": [("user", "refund please")]}, {"configurable": {"thread_id": f"t{i}"}})
        for i in range(n)
    ]


def test_the_sample_is_decided_by_the_handoff_id_and_the_rate() -> None:
    ids = [f"{i:032x}" for i in range(2000)]
    half = {i for i in ids if AuditPolicy(rate=0.5).sampled(i)}
    assert 900 < len(half) < 1100
    assert half == {i for i in ids if AuditPolicy(rate=0.5).sampled(i)}  # another process decides the same
    assert {i for i in ids if AuditPolicy(rate=0.2).sampled(i)} < half  # a lower rate samples a subset
    assert not any(AuditPolicy(rate=0.0).sampled(i) for i in ids) and all(AuditPolicy(rate=1.0).sampled(i) for i in ids)


def test_rate_one_audits_every_handoff_and_rate_zero_none() -> None:
    every, none = Sink(), Sink()
    results = _turns(_desk(AuditPolicy(rate=1.0, sinks=[every])), 3)
    assert [r.handoff["target"] for r in every.records] == ["after_sales"] * 3
    assert [r.id for r in every.records] == [handoff_log(r)[-1].id for r in results]
    assert all(handoff_log(r)[-1].audit for r in results)
    assert all(rec.why == ("sampled",) and rec.thread_id == f"t{i}" for i, rec in enumerate(every.records))
    assert every.records[0].decision is not None and every.records[0].decision["target"] == "triage"
    results = _turns(_desk(AuditPolicy(rate=0.0, sinks=[none])), 3)
    assert none.records == [] and not any(handoff_log(r)[-1].audit for r in results)


def test_a_breaker_trip_is_always_audited() -> None:
    sink = Sink()
    loop = ScriptedChatModel([tool_call(tool_name_for("after_sales"), {"briefing": BRIEFING})], cycle=True)
    back = ScriptedChatModel([tool_call(tool_name_for("triage"), {"briefing": "back to you"})], cycle=True)
    agents = [HandoffAgent("triage", loop), HandoffAgent("after_sales", back)]
    graph = create_handoff_graph(agents, audit=AuditPolicy(rate=0.0, sinks=[sink]), checkpointer=InMemorySaver())
    graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "pp"}})
    assert [r.why for r in sink.records] == [("breaker",)]  # ping-pong, no fallback: the turn ended
    assert "ping-pong" in sink.records[0].breaker["reason"]


class CrashOnce(InMemorySaver):
    """Loses the router's step once: saving its writes fails, and so does the checkpoint after
    it, as when the worker dies between running the step and saving it. The step ran (and
    audited), nothing of it was kept, so the rerun runs it again."""

    def __init__(self) -> None:
        super().__init__()
        self.crashed = False
        self.lost: set[str] = set()

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        tool = any(ch == "handoffs" and any(h.get("trigger") == "tool" for h in value) for ch, value in writes)
        if tool and not self.crashed:
            self.crashed = True
            raise ConnectionError("the worker died before the router's step was saved")
        super().put_writes(config, writes, task_id, task_path)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        handoffs = checkpoint["channel_values"].get("handoffs") or []
        if self.crashed and any(h.get("trigger") == "tool" for h in handoffs) and not self.lost:
            self.lost.add(checkpoint["id"])
            raise ConnectionError("the worker died before the router's checkpoint was saved")
        return super().put(config, checkpoint, metadata, new_versions)


def test_a_replayed_router_step_makes_the_same_handoff_and_one_audit_object(tmp_path: Path) -> None:
    store = ObjectStoreSaver.from_url(f"file://{tmp_path / 'store'}")
    saver = CrashOnce()
    graph = _desk(AuditPolicy(rate=1.0, sinks=[StoreAuditSink(store)]), checkpointer=saver)
    config = {"configurable": {"thread_id": "crash"}}
    with pytest.raises(ConnectionError):
        graph.invoke({"messages": [("user", "refund please")]}, config)
    result = graph.invoke(None, config)  # resume: the router's step runs again
    assert saver.crashed and result["active_agent"] == "after_sales"
    listed = StoreAuditSink(store).records(since=timedelta(days=1))
    tool_handoffs = [
        x.record for x in listed if x.record and x.record.handoff and x.record.handoff["trigger"] == "tool"
    ]
    assert len(tool_handoffs) == 1
    assert tool_handoffs[0].id == handoff_log(result)[-1].id


def test_the_handoff_span_says_it_is_audited() -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry.configure(enabled=True, tracer_provider=provider)
    try:
        _turns(_desk(AuditPolicy(rate=1.0, sinks=[])), 1)
    finally:
        telemetry.configure(enabled=True)
    handoff = [s for s in spans.get_finished_spans() if s.name == "handoff after_sales"]
    assert len(handoff) == 1 and handoff[0].attributes[telemetry.AUDIT_SAMPLED] is True


def test_a_sink_that_fails_never_breaks_the_run(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Sink):
        def write(self, record: AuditRecord) -> None:
            raise OSError("the audit bucket is gone")

    result = _turns(_desk(AuditPolicy(rate=1.0, sinks=[Broken()])), 1)[0]
    assert result["active_agent"] == "after_sales"
    assert any("could not take audit" in r.getMessage() for r in caplog.records)


async def test_the_async_path_audits_the_same() -> None:
    sink = Sink()
    graph = _desk(AuditPolicy(rate=1.0, sinks=[sink]))
    result = await graph.ainvoke({"messages": [("user", "refund please")]}, {"configurable": {"thread_id": "a"}})
    assert [r.id for r in sink.records] == [handoff_log(result)[-1].id]


@pytest.mark.parametrize("bad", [-0.1, 1.5, "half", True])
def test_a_bad_rate_is_a_typed_error(bad: Any) -> None:
    with pytest.raises(InvalidInputError):
        AuditPolicy.of(bad)


# -- the store sink and the review commands ------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_main("langgraph_handoff.cli", *args)


def test_review_list_show_mark_and_stats(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'store'}"
    store = ObjectStoreSaver.from_url(url)
    results = _turns(_desk(AuditPolicy(rate=1.0, sinks=[StoreAuditSink(store)])), 3)
    ids = [handoff_log(r)[-1].id for r in results]
    listed = cli("audit", "list", url, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert sorted(r["id"] for r in rows if r["handoff"]["trigger"] == "tool") == sorted(ids)
    shown = cli("audit", "show", url, ids[0])
    assert shown.returncode == 0 and BRIEFING in shown.stdout
    assert cli("audit", "mark", url, ids[0], "--verdict", "wrong", "--note", "should be orders").returncode == 0
    assert cli("audit", "mark", url, ids[1], "--verdict", "ok").returncode == 0
    stats = json.loads(cli("audit", "stats", url, "--json").stdout)
    assert (stats["reviewed"], stats["wrong"], stats["wrong_share"]) == (2, 1, 0.5)
    assert StoreAuditSink(store).get(ids[0]).review["note"] == "should be orders"
    missing = cli("audit", "show", url, "nope")
    assert missing.returncode == 2 and "no audit record 'nope'" in missing.stderr
    assert cli("audit", "mark", url, ids[0], "--verdict", "maybe").returncode == 2


def test_a_hostile_audit_object_is_reported_never_crashes_the_review(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'store'}"
    store = ObjectStoreSaver.from_url(url)
    day = datetime.now(timezone.utc).date().isoformat()
    store.store.put(audit_key(day, "junk"), b"\x00not an envelope")
    store.store.put(audit_key(day, "wrong-kind"), envelope.encode_msgpack(Kind.WORKER, {"id": "x"}))
    store.store.put(audit_key(day, "bad-fields"), envelope.encode_msgpack(Kind.AUDIT, {"id": 7, "why": "all"}))
    _turns(_desk(AuditPolicy(rate=1.0, sinks=[StoreAuditSink(store)])), 1)
    listed = cli("audit", "list", url)
    assert listed.returncode == 1, listed.stderr
    assert listed.stdout.count("unreadable") == 3 and "after_sales" in listed.stdout
    assert json.loads(cli("audit", "stats", url, "--json").stdout)["unreadable"] == 3


def test_show_of_an_unknown_id_is_a_typed_error(tmp_path: Path) -> None:
    sink = StoreAuditSink(ObjectStoreSaver.from_url("memory://"))
    with pytest.raises(AuditRecordNotFoundError):
        sink.get("nope")
