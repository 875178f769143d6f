"""A routing decision's span says how it was decided: whether a hybrid router asked its
decider, and which encoder scored the message."""

from __future__ import annotations

from typing import Any

from langgraph_handoff import telemetry
from langgraph_handoff.handoff import HandoffAgent, create_handoff_graph
from langgraph_handoff.routing import HybridRouter, Route, SemanticRouter
from langgraph_handoff.testing import ScriptedChatModel
from tests.support.otel import Otel


def _semantic() -> SemanticRouter:
    return SemanticRouter(
        [
            Route("orders", examples=["where is my order", "track my parcel", "when does my parcel arrive"]),
            Route("returns", examples=["I want a refund", "return the broken lamp", "money back please"]),
        ],
        threshold=0.2,
        fallback="orders",
    )


def _route_span(otel: Otel, router: Any, text: str) -> Any:
    agents = [HandoffAgent(n, ScriptedChatModel(["ok"], cycle=True)) for n in ("orders", "returns")]
    create_handoff_graph(agents, router=router).invoke({"messages": [("user", text)]})
    [span] = [s for s in otel.finished() if s.name.startswith("route ")]
    return span


def test_a_semantic_decision_names_its_encoder_and_no_decider(otel: Otel) -> None:
    span = _route_span(otel, _semantic(), "where is my parcel")
    assert span.attributes[telemetry.ENCODER] == "CharNgramEncoder"
    assert span.attributes[telemetry.DECIDER] is False


def test_a_decision_the_decider_made_says_so_even_when_it_answered_nothing(otel: Otel) -> None:
    asked: list[str] = []

    def decider(text: str, routes: Any) -> str | None:
        asked.append(text)
        return None  # "I don't know": the hybrid falls back

    router = HybridRouter(semantic=_semantic(), decider=decider, ask="unmatched", fallback="orders")
    span = _route_span(otel, router, "what a lovely sunny afternoon")
    assert asked and span.attributes[telemetry.DECIDER] is True
    assert span.attributes[telemetry.METHOD] == "fallback"
    assert span.attributes[telemetry.ENCODER] == "CharNgramEncoder"
