"""One conversation's telemetry, from a handoff chain to a team delegation, sent to a real backend.

The story of ``customer-42``, on one store and four workers (one process stands in for four):

1. worker A serves the first turn: the conversation is handed from ``tech`` to ``after_sales``
   to ``billing`` (a handoff chain);
2. worker A is redeployed: it hands the session to worker B (a planned transfer, with a note),
   and B serves the second turn;
3. worker B dies without a word; once its lease lapsed, worker C takes the session over and
   serves the third turn, in which ``billing`` and ``after_sales`` hand the customer back and
   forth: the ping-pong breaker trips and sends the conversation to ``back_office``;
4. ``back_office`` delegates the refund to the ``back-office`` team: worker D runs the team's
   clerk, whose turn links to the span that sent it the message.

Across real processes each worker's spans are a trace of their own, joined by span links (each
lease, transfer and team message carries the ``traceparent`` of the span that wrote it) and by
``gen_ai.conversation.id``. Here one root span, ``conversation customer-42``, holds them all, so
that a backend that does not draw links (Arize Phoenix keeps none) still shows the whole story
as one trace.

Run it against Phoenix (docs/observability.md, "Try it yourself")::

    python examples/telemetry_story.py --otlp http://127.0.0.1:6006/v1/traces

No network but the OTLP endpoint, no LLM: the models are scripted and the store is in memory.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.graph import END, START, StateGraph

from langgraph_handoff import ObjectStoreSaver, telemetry
from langgraph_handoff.handoff import HandoffAgent, create_handoff_graph
from langgraph_handoff.handoff.tools import tool_name_for
from langgraph_handoff.ownership import SessionManager, SessionWorker
from langgraph_handoff.stores import MemoryStore
from langgraph_handoff.teams import Team, TeamState, TeamWorker
from langgraph_handoff.testing import ScriptedChatModel, tool_call

THREAD = "customer-42"
TEAM = "back-office"
#: the customer's three messages: each agent answers by the turn it is in
FIRST, SECOND, THIRD = "my phone is broken, I want my money back", "still there?", "hello? where is my refund?"


def _turn(messages: list[BaseMessage]) -> str:
    return next(str(m.content) for m in reversed(messages) if m.type == "human" and m.content in (FIRST, SECOND, THIRD))


def _handoff(to: str, briefing: str) -> AIMessage:
    return tool_call(tool_name_for(to), {"briefing": briefing})


class DeskModel(ScriptedChatModel):
    """An agent whose replies depend on the customer's turn only, so that every worker's copy
    of the graph (each builds its own) answers alike."""

    agent: str = ""

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        turn, last = _turn(messages), messages[-1]
        if self.agent == "tech":
            return _handoff("after_sales", "broken phone, the customer wants a refund")
        if self.agent == "after_sales":
            return _handoff("billing", "refund order 7 (broken phone)")
        if turn == FIRST:
            return AIMessage("I have started the refund of order 7.")
        if turn == SECOND:
            return AIMessage("Yes: the refund of order 7 is being processed.")
        if last.type == "tool":  # billing's go after a refused handoff
            return AIMessage("Let me look again.")
        return _handoff("after_sales", "the customer asks about the refund again")


@dataclass
class Story:
    """What the run did, for the tests to check against what a backend received."""

    store: MemoryStore = field(default_factory=MemoryStore)
    clock: list[float] = field(default_factory=lambda: [1_800_000_000.0])
    replies: list[str] = field(default_factory=list)
    delegated: list[str] = field(default_factory=list)
    clerk_turns: int = 0


def desk(story: Story) -> Callable[[Any], Any]:
    """The customer desk's graph factory (a SessionWorker builds one graph per worker)."""

    def back_office(state: Any) -> dict[str, Any]:
        # delegates inside its own span: the team message carries that span to the clerk's turn
        team = Team(ObjectStoreSaver(story.store), TEAM)
        msg = team.send("clerk", f"refund order 7 for {THREAD}", sender="customer-desk")
        story.delegated.append(msg.id)
        return {"messages": [AIMessage("A back-office clerk is finishing your refund today.")]}

    def build(checkpointer: Any) -> Any:
        agents = [
            HandoffAgent("tech", DeskModel(["(scripted)"], agent="tech"), description="broken devices"),
            HandoffAgent("after_sales", DeskModel(["(scripted)"], agent="after_sales"), description="returns"),
            HandoffAgent("billing", DeskModel(["(scripted)"], agent="billing"), description="refunds"),
            HandoffAgent("back_office", back_office, description="people who finish what agents cannot"),
        ]
        return create_handoff_graph(agents, checkpointer=checkpointer, default_agent="tech", fallback="back_office")

    return build


def clerk(checkpointer: Any, member: Any) -> Any:
    """The back-office team's clerk: confirms what it was asked to do."""
    g = StateGraph(TeamState)
    g.add_node("work", lambda s: {"messages": [("ai", "done: " + str(s["messages"][-1].content).splitlines()[-1])]})
    g.add_edge(START, "work")
    g.add_edge("work", END)
    return g.compile(checkpointer=checkpointer)


def run(story: Story | None = None) -> Story:
    """Tell the story once, with whatever providers telemetry has (see the module docstring)."""
    story = story or Story()
    now = story.clock

    def worker(name: str) -> SessionWorker:
        return SessionWorker(SessionManager(ObjectStoreSaver(story.store), clock=lambda: now[0]), name, desk(story))

    team = Team(ObjectStoreSaver(story.store), TEAM)
    team.spawn("clerk", role="refunds")
    a, b, c = worker("worker-a"), worker("worker-b"), worker("worker-c")
    with telemetry.span(f"conversation {THREAD}", {telemetry.THREAD: THREAD}):
        story.replies.append(_last(a.invoke(THREAD, {"messages": [("user", FIRST)]})))
        a.stop(next_step="tell the customer how the refund is going")  # a planned transfer ...
        b.accept_transfers()  # ... which worker B accepts
        story.replies.append(_last(b.invoke(THREAD, {"messages": [("user", SECOND)]})))
        now[0] += b.ttl + 1  # worker B dies without a word: its lease lapses
        b._stopping.set()  # (its heartbeat never ran: nothing renews the lease)
        c.reclaim()  # worker C's health check takes the session over
        story.replies.append(_last(c.invoke(THREAD, {"messages": [("user", THIRD)]})))
        d = TeamWorker(Team(ObjectStoreSaver(story.store), TEAM), "worker-d", {"refunds": clerk}, members=["clerk"])
        story.clerk_turns = d.step()
    return story


def _last(result: Any) -> str:
    return str(result["messages"][-1].content)


def main(argv: list[str] | None = None) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class WithoutCheckpoints(SpanExporter):
        """Leaves out the saver's ``checkpoint ...`` spans (about 100 of the story's 128), so
        that the handoffs and the workers' spans fit on one screen; counts what it sent."""

        def __init__(self, inner: SpanExporter, everything: bool) -> None:
            self.inner, self.everything, self.sent = inner, everything, 0

        def export(self, spans: Any) -> SpanExportResult:
            kept: list[ReadableSpan] = [s for s in spans if self.everything or not s.name.startswith("checkpoint ")]
            result = self.inner.export(kept) if kept else SpanExportResult.SUCCESS
            self.sent += len(kept) if result is SpanExportResult.SUCCESS else 0
            return result

        def shutdown(self) -> None:
            self.inner.shutdown()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return self.inner.force_flush(timeout_millis)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--otlp", default="http://127.0.0.1:6006/v1/traces", help="OTLP/HTTP traces endpoint")
    parser.add_argument("--service", default="support-desk", help="service.name of the spans")
    parser.add_argument("--project", default="default", help="the Phoenix project to put the trace in")
    parser.add_argument("--all-spans", action="store_true", help="send the checkpoint spans too")
    args = parser.parse_args(argv)
    # Phoenix files a trace under the project its resource names (OpenInference's attribute)
    resource = Resource.create({"service.name": args.service, "openinference.project.name": args.project})
    provider = TracerProvider(resource=resource)
    exporter = WithoutCheckpoints(OTLPSpanExporter(endpoint=args.otlp), everything=args.all_spans)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    telemetry.configure(tracer_provider=provider)
    story = run()
    provider.shutdown()  # exports what is left
    for reply in story.replies:
        print("desk:", reply)
    print(f"team {TEAM}: {story.clerk_turns} clerk turn(s)")
    print(f"{exporter.sent} spans sent to {args.otlp}, project {args.project}")


if __name__ == "__main__":
    main()
