"""OpenTelemetry: which spans and metrics a run emits, that none is emitted when telemetry is
off, and that a failing telemetry pipeline never breaks a run.

The SDK's in-memory span exporter and metric reader stand in for a backend; they are given to
``telemetry.configure`` (the global providers can be set once per process only)."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from langgraph_handoff import ObjectStoreSaver, telemetry
from langgraph_handoff.errors import StaleWriterError
from langgraph_handoff.handoff import HandoffAgent, create_handoff_graph, handoff_log
from langgraph_handoff.handoff.tools import tool_name_for
from langgraph_handoff.ownership import SessionManager, SessionWorker
from langgraph_handoff.stores import MemoryStore
from langgraph_handoff.stores.counting import CountingStore
from langgraph_handoff.testing import ScriptedChatModel, tool_call
from tests.support.otel import Otel


def desk(checkpointer: Any) -> Any:
    agents = [
        HandoffAgent(
            "tech",
            ScriptedChatModel(
                [tool_call(tool_name_for("after_sales"), {"briefing": "customer wants a refund for order 7"})]
            ),
            description="broken devices",
        ),
        HandoffAgent("after_sales", ScriptedChatModel(["refund started"]), description="returns and refunds"),
    ]
    return create_handoff_graph(agents, checkpointer=checkpointer, default_agent="tech")


def test_a_handoff_run_is_one_set_of_spans_named_for_what_happened(otel: Otel) -> None:
    graph = desk(ObjectStoreSaver.from_url("memory://"))
    out = graph.invoke(
        {"messages": [("user", "my phone is broken, I want my money back")]}, {"configurable": {"thread_id": "c-1"}}
    )
    names = otel.names()
    agents = [n for n in names if n.startswith(("invoke_agent", "handoff", "route"))]
    assert agents == ["route tech", "invoke_agent tech", "handoff after_sales", "invoke_agent after_sales"]
    handoff = next(s for s in otel.finished() if s.name == "handoff after_sales")
    assert handoff.attributes is not None
    assert handoff.attributes["langgraph_handoff.handoff.id"] == handoff_log(out)[-1].id
    assert handoff.attributes["gen_ai.conversation.id"] == "c-1"
    assert handoff.attributes["langgraph_handoff.handoff.chain"] == "tech -> after_sales"
    assert handoff.attributes["langgraph_handoff.handoff.briefing.length"] == len("customer wants a refund for order 7")
    assert "langgraph_handoff.handoff.briefing" not in handoff.attributes  # no user text by default
    turn = next(s for s in otel.finished() if s.name == "invoke_agent after_sales")
    assert turn.attributes is not None and turn.attributes["gen_ai.agent.name"] == "after_sales"
    puts = [s for s in otel.finished() if s.name == "checkpoint put"]
    assert puts and all(s.attributes and s.attributes["langgraph_handoff.outcome"] == "committed" for s in puts)
    assert otel.metric("langgraph_handoff.handoffs") == {
        (
            ("langgraph_handoff.handoff.source", "tech"),
            ("langgraph_handoff.handoff.target", "after_sales"),
            ("langgraph_handoff.handoff.trigger", "tool"),
        ): 1
    }


async def test_the_async_run_emits_the_same_spans(otel: Otel) -> None:
    graph = desk(ObjectStoreSaver.from_url("memory://"))
    await graph.ainvoke({"messages": [("user", "broken, refund please")]}, {"configurable": {"thread_id": "c-2"}})
    names = [n for n in otel.names() if n.startswith(("invoke_agent", "handoff"))]
    assert names == ["invoke_agent tech", "handoff after_sales", "invoke_agent after_sales"]


def test_content_capture_puts_the_briefing_on_the_span_and_in_the_log(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    telemetry.configure(capture_content=True)
    with caplog.at_level(logging.INFO, logger="langgraph_handoff"):
        desk(ObjectStoreSaver.from_url("memory://")).invoke(
            {"messages": [("user", "hi")]}, {"configurable": {"thread_id": "c"}}
        )
    handoff = next(s for s in otel.finished() if s.name == "handoff after_sales")
    assert handoff.attributes is not None
    assert handoff.attributes["langgraph_handoff.handoff.briefing"] == "customer wants a refund for order 7"
    assert "briefing: customer wants a refund for order 7" in caplog.text


def test_store_requests_are_counted_as_the_store_saw_them(otel: Otel) -> None:
    store = CountingStore(MemoryStore())
    desk(ObjectStoreSaver(store)).invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "c"}})
    counted = otel.metric("langgraph_handoff.store.requests")
    by_method: dict[str, int] = {}
    for attrs, value in counted.items():
        method = dict(attrs)["langgraph_handoff.store.method"]
        by_method[method] = by_method.get(method, 0) + value
    seen = {"GET": store.counts["GET"], "PUT": store.counts["PUT"], "LIST": store.counts["LIST"]}
    assert by_method == {k: v for k, v in seen.items() if v}


def _race(saver_a: ObjectStoreSaver, saver_b: ObjectStoreSaver) -> None:
    """Two runs extend the same checkpoint: the second is refused (a run's config carries
    LangGraph's ``__pregel_*`` entries; the write rule refuses a run that is not extending the
    latest checkpoint)."""
    cfg = {"configurable": {"thread_id": "race", "checkpoint_ns": ""}}
    first = {"v": 4, "id": "1ef4f797-8335-6428-8001-8a1503f9b875", "ts": "2024-01-01T00:00:00+00:00",
             "channel_values": {"x": 1}, "channel_versions": {"x": 1}, "versions_seen": {}}  # fmt: skip
    parent = saver_a.put(cfg, first, {"source": "input"}, {"x": 1})
    run = {"configurable": {**parent["configurable"], "__pregel_runtime": object()}}
    second = {**first, "id": "1ef4f797-8335-6428-8002-8a1503f9b875"}
    third = {**first, "id": "1ef4f797-8335-6428-8003-8a1503f9b875"}
    saver_a.put(run, second, {"source": "loop"}, {"x": 2})
    saver_b.put(run, third, {"source": "loop"}, {"x": 2})


def test_a_refused_write_is_counted_logged_and_traced(otel: Otel, caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    with caplog.at_level(logging.INFO, logger="langgraph_handoff"), pytest.raises(StaleWriterError):
        _race(ObjectStoreSaver(store), ObjectStoreSaver(store))
    assert otel.metric("langgraph_handoff.checkpoint.refusals") == {
        (("langgraph_handoff.outcome", "stale_writer"), ("langgraph_handoff.store", "memory")): 1
    }
    refused = [
        s for s in otel.finished() if s.attributes and s.attributes.get("langgraph_handoff.outcome") == "stale_writer"
    ]
    assert [s.name for s in refused] == ["checkpoint put"]
    record = next(r for r in caplog.records if getattr(r, "langgraph_handoff.event", None) == "checkpoint.refused")
    assert record.levelno == logging.INFO and getattr(record, "gen_ai.conversation.id") == "race"


def test_telemetry_off_emits_nothing(otel: Otel) -> None:
    """Fails if any code path emits while telemetry is switched off."""
    telemetry.configure(enabled=False)
    store = MemoryStore()
    desk(ObjectStoreSaver(store)).invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "c"}})
    with pytest.raises(StaleWriterError):
        _race(ObjectStoreSaver(store), ObjectStoreSaver(store))
    worker = SessionWorker(SessionManager(ObjectStoreSaver(store)), "w", desk)
    worker.invoke("s", {"messages": [("user", "hi")]})
    worker.stop()
    assert otel.finished() == []
    data = otel.reader.get_metrics_data()
    assert data is None or all(not sm.metrics for rm in data.resource_metrics for sm in rm.scope_metrics)


class Exploding(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("the collector is down")

    def on_end(self, span: Any) -> None:
        raise RuntimeError("the collector is down")


class BrokenMeterProvider:
    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no meter today")


def test_a_telemetry_pipeline_that_raises_never_breaks_a_run() -> None:
    provider = TracerProvider()
    provider.add_span_processor(Exploding())
    telemetry.configure(enabled=True, tracer_provider=provider, meter_provider=BrokenMeterProvider())
    try:
        store = MemoryStore()
        out = desk(ObjectStoreSaver(store)).invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "c"}})
        assert out["messages"][-1].content == "refund started"
        with pytest.raises(StaleWriterError):  # the run's own errors still reach the caller unchanged
            _race(ObjectStoreSaver(store), ObjectStoreSaver(store))
    finally:
        telemetry.configure(enabled=True)


def test_session_changes_are_spans_with_owner_and_epoch(otel: Otel, caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    a = SessionWorker(SessionManager(ObjectStoreSaver(store)), "worker-a", desk)
    b = SessionWorker(SessionManager(ObjectStoreSaver(store)), "worker-b", desk)
    with caplog.at_level(logging.INFO, logger="langgraph_handoff.ownership"):
        a.invoke("chat", {"messages": [("user", "hi")]})
        a.stop()
        b.accept_transfers()
        b.release("chat")
    sessions = [
        (s.name, dict(s.attributes or {}))
        for s in otel.finished()
        if s.name.startswith("session ") and s.name != "session turn"
    ]
    assert [(n, a["langgraph_handoff.session.owner"], a["langgraph_handoff.session.epoch"]) for n, a in sessions] == [
        ("session acquire", "worker-a", 1),
        ("session begin_transfer", "worker-a", 1),
        ("session accept", "worker-b", 2),
        ("session release", "worker-b", 2),
    ]
    locked, accepted = sessions[1][1], sessions[2][1]
    assert locked["langgraph_handoff.session.transfer.id"] == accepted["langgraph_handoff.session.transfer.id"]
    events = [e for r in caplog.records if (e := getattr(r, "langgraph_handoff.event", None))]
    assert events == ["session.acquire", "session.begin_transfer", "session.accept", "session.release"]
    unowned = otel.metric("langgraph_handoff.session.unowned.duration")
    assert list(unowned) == [(("langgraph_handoff.session.via", "accept"),)]


def test_without_opentelemetry_installed_everything_runs() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
        from langgraph_handoff import ObjectStoreSaver, telemetry
        from langgraph.graph import StateGraph, START, END, MessagesState
        g = StateGraph(MessagesState)
        g.add_node("a", lambda s: {"messages": [("ai", "ok")]})
        g.add_edge(START, "a"); g.add_edge("a", END)
        graph = g.compile(checkpointer=ObjectStoreSaver.from_url("memory://"))
        out = graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
        telemetry.configure(enabled=True)
        print(telemetry.is_on(), out["messages"][-1].content)
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["False", "ok"]


def _span(otel: Otel, name: str, owner: str | None = None) -> ReadableSpan:
    return next(
        s
        for s in otel.finished()
        if s.name == name and (owner is None or (s.attributes or {}).get("langgraph_handoff.session.owner") == owner)
    )


def _linked(span: ReadableSpan, to: ReadableSpan) -> bool:
    assert to.context is not None
    return any(link.context.span_id == to.context.span_id for link in span.links)


def test_one_story_across_workers_a_planned_transfer_and_a_takeover(otel: Otel) -> None:
    """The spans of one conversation, on three workers, link up: A's lock -> B's accept -> B's
    first turn; B's lease -> C's takeover (B died) -> C's first turn. And the note A left is
    what B reads where its turn starts."""
    store, now = MemoryStore(), [1000.0]

    def worker(name: str) -> SessionWorker:
        return SessionWorker(SessionManager(ObjectStoreSaver(store), clock=lambda: now[0]), name, desk, ttl=30)

    a, b, c = worker("worker-a"), worker("worker-b"), worker("worker-c")
    a.invoke("chat", {"messages": [("user", "hi")]})
    a.stop(next_step="tell the customer the refund is on its way")
    b.accept_transfers()
    note = b.note_for("chat")
    assert note is not None and note.payload is not None
    assert note.payload["next_step"] == "tell the customer the refund is on its way"
    assert note.payload["completed_steps"][0] == "worker-a served 1 turn(s) of this session"
    b.invoke("chat", {"messages": [("user", "still there?")]})
    now[0] += 31  # b dies without a word: its lease lapses (b never wrote a liveness record beat)
    b._stopping.set()
    assert [lease.thread_id for lease in c.reclaim()] == ["chat"]
    c.invoke("chat", {"messages": [("user", "hello?")]})

    locked, accepted = _span(otel, "session begin_transfer"), _span(otel, "session accept")
    b_first = _span(otel, "session turn", "worker-b")
    b_lease, takeover = accepted, _span(otel, "session takeover")
    c_first = _span(otel, "session turn", "worker-c")
    assert _linked(accepted, locked) and _linked(b_first, accepted)
    assert _linked(takeover, b_lease) and _linked(c_first, takeover)
    unowned = otel.metric("langgraph_handoff.session.unowned.duration")
    assert sorted(dict(k)["langgraph_handoff.session.via"] for k in unowned) == ["accept", "takeover"]


def test_stop_waits_for_the_turn_under_way_before_it_locks() -> None:
    """Before, stop() locked at once and the turn in flight failed with OwnershipLostError."""
    import threading

    started, release = threading.Event(), threading.Event()

    def slow(checkpointer: Any) -> Any:
        from langgraph.graph import END, START, MessagesState, StateGraph

        def step(state: Any) -> Any:
            started.set()
            assert release.wait(10)
            return {"messages": [("ai", "done")]}

        g = StateGraph(MessagesState)
        g.add_node("step", step)
        g.add_edge(START, "step")
        g.add_edge("step", END)
        return g.compile(checkpointer=checkpointer)

    worker = SessionWorker(SessionManager(ObjectStoreSaver(MemoryStore())), "w", slow)
    outcome: list[Any] = []
    turn = threading.Thread(target=lambda: outcome.append(worker.invoke("chat", {"messages": [("user", "hi")]})))
    turn.start()
    assert started.wait(10)
    stopper = threading.Thread(target=lambda: outcome.append(worker.stop()))
    stopper.start()
    stopper.join(0.2)
    assert stopper.is_alive()  # stop() waits for the turn ...
    release.set()
    turn.join(10)
    stopper.join(10)
    assert outcome[0]["messages"][-1].content == "done"  # ... which finished and stored its answer
    assert outcome[1] == ["chat"]


def test_a_team_delegation_is_one_story_across_workers(otel: Otel) -> None:
    """A message carries its sender's span: the recipient's turn links to it, on whatever worker
    runs it, and so does the reply's recipient to the turn that answered."""
    from langgraph.graph import END, START, StateGraph

    from langgraph_handoff.teams import Team, TeamState, TeamWorker

    def echo(checkpointer: Any, member: Any) -> Any:
        g = StateGraph(TeamState)
        g.add_node("echo", lambda s: {"messages": [("ai", "got: " + s["messages"][-1].content.splitlines()[-1])]})
        g.add_edge(START, "echo")
        g.add_edge("echo", END)
        return g.compile(checkpointer=checkpointer)

    store = MemoryStore()
    team = Team(ObjectStoreSaver(store), "t")
    team.spawn("lead", role="echo")
    team.spawn("bob", role="echo")
    with telemetry.span("ops asks bob") as asked:
        team.send("bob", "ping", sender="lead")
    bobs = TeamWorker(Team(ObjectStoreSaver(store), "t"), "worker-a", {"echo": echo}, members=["bob"])
    leads = TeamWorker(Team(ObjectStoreSaver(store), "t"), "worker-b", {"echo": echo}, members=["lead"])
    assert bobs.step() == 1  # bob ingests "ping" and answers the lead
    assert leads.step() == 1  # the lead ingests the answer, on another worker
    bob_turn, lead_turn = _span(otel, "team.turn bob"), _span(otel, "team.turn lead")
    sender = next(s for s in otel.finished() if s.name == "ops asks bob")
    assert asked.traceparent is not None and _linked(bob_turn, sender)
    assert _linked(lead_turn, bob_turn)
    assert bob_turn.attributes is not None and bob_turn.attributes["langgraph_handoff.team.messages"] == 1
    ingested = otel.metric("langgraph_handoff.team.messages")
    assert ingested[(("langgraph_handoff.event", "ingested"),)] == 2
    assert ingested[(("langgraph_handoff.event", "sent"),)] == 2
