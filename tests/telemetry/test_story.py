"""One trace follows a conversation through a handoff chain, a planned transfer, a takeover and
a team delegation (examples/telemetry_story.py, the story the docs show in Arize Phoenix),
checked against the SDK's in-memory exporter: the spans' shape, and the links that join the
workers' spans where they run in processes of their own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from langgraph_handoff import telemetry
from tests.support.telemetry_story import StorySpans, load_story


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.configure(enabled=True, tracer_provider=provider)
    try:
        yield exporter
    finally:
        telemetry.configure(enabled=True, capture_content=False)


def as_story(finished: list[ReadableSpan]) -> StorySpans:
    rows = []
    for s in finished:
        assert s.context is not None
        parent = format(s.parent.span_id, "016x") if s.parent is not None else None
        rows.append(
            (
                s.name,
                format(s.context.span_id, "016x"),
                parent,
                format(s.context.trace_id, "032x"),
                dict(s.attributes or {}),
            )
        )
    return StorySpans(rows)


def links_of(finished: list[ReadableSpan], span_id: str) -> set[str]:
    span = next(s for s in finished if s.context is not None and format(s.context.span_id, "016x") == span_id)
    return {format(link.context.span_id, "016x") for link in span.links}


def test_one_trace_follows_a_conversation_through_transfer_takeover_and_team(spans: InMemorySpanExporter) -> None:
    story = load_story().run()
    assert story.replies[-1] == "A back-office clerk is finishing your refund today."
    assert story.clerk_turns == 1 and len(story.delegated) == 1
    finished = list(spans.get_finished_spans())
    told = as_story(finished)
    told.check_shape("customer-42")
    # the links that carry the story from worker to worker when each is a process of its own
    locked, accepted = told.find("session begin_transfer")[1], told.find("session accept")[1]
    takeover = told.find("session takeover")[1]
    assert links_of(finished, accepted) == {locked}  # B accepts what A locked
    assert links_of(finished, told.turn_of("worker-b")) == {accepted}  # B's first turn follows its accept
    assert links_of(finished, takeover) == {accepted}  # C takes over the lease B's accept wrote
    assert links_of(finished, told.turn_of("worker-c")) == {takeover}  # C's first turn follows the takeover
    sender = told.find("invoke_agent back_office")[1]
    assert sender in links_of(finished, told.find("team.turn clerk")[1])  # the clerk's turn follows the delegation
