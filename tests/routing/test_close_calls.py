"""Close routing calls: which decisions a router hands its sink, what a JSONL sink writes, and
reading the file back as labelled messages for ``evaluate``. Scores are scripted (no encoder
noise): each test decides exactly how close every message is."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_handoff import telemetry
from langgraph_handoff.errors import InvalidRouteError
from langgraph_handoff.routing import (
    CloseCall,
    CloseCallSink,
    HybridRouter,
    JsonlCloseCalls,
    MemoryCloseCalls,
    Rule,
    SemanticRouter,
    evaluate,
    load_close_calls,
)
from tests.routing.test_routing import ROUTES


def scripted(router: SemanticRouter) -> dict[str, dict[str, float]]:
    """Scores per message, placed against the router's own threshold and spread: ``sure`` far
    above, ``unsure`` just above the threshold (uncertain), ``lead`` far above with a clear but
    modest lead, ``nothing`` all zero (a confident rejection)."""
    thr, spread = router.thresholds["orders"], router.spread
    table = {
        "sure": {"orders": thr + 5 * spread, "refunds": 0.0, "tech": 0.0},
        "unsure": {"orders": thr + 0.01 * spread, "refunds": 0.0, "tech": 0.0},
        "lead": {"orders": thr + 5 * spread, "refunds": thr + 3 * spread, "tech": 0.0},
        "nothing": {"orders": 0.0, "refunds": 0.0, "tech": 0.0},
    }
    router.scores = table.__getitem__  # type: ignore[method-assign]
    router._scores_for = lambda vec: table[router._async_text]  # type: ignore[attr-defined,method-assign]
    return table


def semantic(sink: Any) -> SemanticRouter:
    router = SemanticRouter(ROUTES, fallback="human", close_calls=sink)
    scripted(router)
    return router


def test_only_uncertain_decisions_are_close_calls_by_default() -> None:
    sink = MemoryCloseCalls()
    router = semantic(sink)
    assert not router.route("lead").uncertain  # (the premise: a clear lead is not uncertain)
    decisions = {t: router.route(t) for t in ("sure", "unsure", "lead", "nothing")}
    assert [c.text for c in sink.calls] == ["unsure"]
    [call] = sink.calls
    assert (call.routed, call.method, call.uncertain, call.runner_up) == ("orders", "semantic", True, "refunds")
    assert call.scores == decisions["unsure"].scores and call.lead == pytest.approx(call.scores["orders"])
    assert call.thread is None and call.at > 0  # outside a LangGraph run: no thread


def test_lead_under_collects_decisions_whose_lead_is_under_it_too() -> None:
    sink = MemoryCloseCalls(lead_under=0.0)
    router = semantic(sink)
    spread = router.spread
    sink.lead_under = 2.5 * spread  # "lead" leads by 2 spreads, "sure" by 5 + threshold
    for t in ("sure", "unsure", "lead", "nothing"):
        router.route(t)
    assert [c.text for c in sink.calls] == ["unsure", "lead"]  # nothing matched at all: not close
    assert sink.calls[1].lead == pytest.approx(2 * spread, abs=1e-5) and not sink.calls[1].uncertain


def test_a_hybrid_records_what_its_decider_chose_and_never_a_rule_hit() -> None:
    sink = MemoryCloseCalls(lead_under=1e9)  # every scored decision is close: rule hits still are not
    inner = SemanticRouter(ROUTES, fallback="human")
    scripted(inner)
    router = HybridRouter(
        rules=[Rule("human", keywords=["human"])],
        semantic=inner,
        decider=lambda text, routes: "tech",
        close_calls=sink,
    )
    assert router.route("human").method == "rule"
    assert router.route("unsure").method == "llm"
    assert router.route("sure").method == "semantic"
    assert [(c.text, c.routed, c.method, c.uncertain) for c in sink.calls] == [
        ("unsure", "tech", "llm", True),  # the decider's choice, with the semantic evidence
        ("sure", "orders", "semantic", False),
    ]
    assert sink.calls[0].scores == inner.scores("unsure")


def test_a_jsonl_sink_writes_text_even_with_content_capture_off(tmp_path: Path) -> None:
    """The documented choice: the file is the user's own and useless for relabelling without
    the message; ``text=False`` keeps scores only."""
    assert not telemetry.content_on()
    path = tmp_path / "close.jsonl"
    semantic(JsonlCloseCalls(path)).route("unsure")
    semantic(JsonlCloseCalls(path, text=False)).route("unsure")
    with_text, without = (json.loads(line) for line in path.read_text().splitlines())
    assert with_text["v"] == 1 and with_text["text"] == "unsure" and with_text["routed"] == "orders"
    assert without["text"] is None and without["chars"] == len("unsure")
    assert set(with_text) == {"v", *CloseCall.__dataclass_fields__}


def test_relabelled_close_calls_read_back_into_evaluate(tmp_path: Path) -> None:
    path = tmp_path / "close.jsonl"
    sink = JsonlCloseCalls(path, lead_under=1e9)
    router = semantic(sink)
    for t in ("sure", "unsure", "lead"):
        router.route(t)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[1]["label"] = "tech"  # a person decided "unsure" was a tech question
    lines[2]["label"] = None  # and "lead" was off-topic
    path.write_text("".join(json.dumps(r) + "\n" for r in lines) + "\n")  # (a blank line is skipped)
    assert load_close_calls(path) == [("unsure", "tech"), ("lead", None)]
    assert load_close_calls(path, unlabelled="routed") == [("sure", "orders"), ("unsure", "tech"), ("lead", None)]
    report = evaluate(router, load_close_calls(path))
    assert report.n == 2 and report.errors == [("unsure", "tech", "orders"), ("lead", None, "orders")]


def test_a_broken_file_is_refused_with_the_line_to_fix(tmp_path: Path) -> None:
    path = tmp_path / "close.jsonl"
    path.write_text('{"text": "a", "routed": "orders", "label": "tech"}\n{"text": "b", "rout\n')
    with pytest.raises(InvalidRouteError, match=r"line 2 of .* is not JSON"):
        load_close_calls(path)
    path.write_text('{"text": "a", "routed": "orders", "label": 3}\n')
    with pytest.raises(InvalidRouteError, match=r"line 1 .*label 3 is not a route name"):
        load_close_calls(path)
    path.write_text('["text", "a"]\n')
    with pytest.raises(InvalidRouteError, match=r"line 1 .* is not a close call"):
        load_close_calls(path)
    with pytest.raises(InvalidRouteError, match="unlabelled"):
        load_close_calls(path, unlabelled="all")  # type: ignore[arg-type]


def test_a_failing_sink_never_breaks_routing(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def add(self, call: CloseCall) -> None:
            raise OSError("disk full")

    assert isinstance(Broken(), CloseCallSink)
    router = semantic(Broken())
    with caplog.at_level(logging.WARNING, logger="langgraph_handoff.routing"):
        assert router.route("unsure").target == "orders"
    assert "could not record a close routing call: OSError: disk full" in caplog.text


class S(TypedDict, total=False):
    text: str
    target: str


def test_inside_a_run_the_call_names_the_thread_sync_and_async(tmp_path: Path) -> None:
    sink = JsonlCloseCalls(tmp_path / "close.jsonl")  # async routing awaits its aadd
    router = semantic(sink)

    def route(s: S) -> S:
        return {"target": router.route(s["text"]).target or ""}

    async def aroute(s: S) -> S:
        router._async_text = s["text"]  # type: ignore[attr-defined]
        return {"target": (await router.aroute(s["text"])).target or ""}

    for node, thread in ((route, "t-sync"), (aroute, "t-async")):
        g = StateGraph(S)
        g.add_node("route", node)
        g.add_edge(START, "route")
        g.add_edge("route", END)
        config = {"configurable": {"thread_id": thread}}
        if node is aroute:
            asyncio.run(g.compile().ainvoke({"text": "unsure"}, config))
        else:
            g.compile().invoke({"text": "unsure"}, config)
    assert load_close_calls(sink.path, unlabelled="routed") == [("unsure", "orders")] * 2
    threads = [json.loads(line)["thread"] for line in sink.path.read_text().splitlines()]
    # before Python 3.11 asyncio tasks do not inherit contextvars, so LangGraph's run config
    # (and its thread) is not visible inside an async node: the call is recorded without it
    assert threads == ["t-sync", "t-async" if sys.version_info >= (3, 11) else None]
