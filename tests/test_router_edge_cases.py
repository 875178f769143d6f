"""Routers at their edges: bad input is a typed error, ``fit`` with only off-topic labels,
``evaluate`` on a hybrid router's rule targets, and the LLM decider reading names with spaces."""

from __future__ import annotations

import pytest

from langgraph_handoff.errors import InvalidRouteError
from langgraph_handoff.routing import Route, Rule, RuleRouter, SemanticRouter, evaluate
from langgraph_handoff.testing import ScriptedChatModel


def test_fit_with_only_off_topic_labels_keeps_rejecting() -> None:
    """fit never lowers a bar that no labelled message speaks about.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""
    routes = [
        Route("orders", examples=["where is my order", "track my parcel", "order status please"]),
        Route("tech", examples=["the app crashes", "wifi will not connect", "bluetooth does not pair"]),
    ]
    r = SemanticRouter(routes, fallback="human")
    before = dict(r.thresholds)
    r.fit([("a happy dog", None), ("the capital of France", None)])
    assert all(r.thresholds[k] >= before[k] for k in before)
    assert r.route("a happy dog").is_fallback


def test_router_input_is_checked() -> None:
    """Bad router input is a typed error, not misrouting or a bare exception.

    Found by an adversarial review of the handoff and routing code; fails before commit 0ffac10."""
    r = SemanticRouter([Route("orders", examples=["where is my order"])])
    with pytest.raises(InvalidRouteError, match="name no route"):
        evaluate(r, [("where is it", "ordres")])
    for bad in (None, 42):
        with pytest.raises(InvalidRouteError):
            r.route(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidRouteError):
            RuleRouter([Rule("h", keywords=["x"])]).route(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidRouteError, match="list of strings"):
        Rule("human", keywords="human")  # type: ignore[arg-type]
    with pytest.raises(InvalidRouteError, match="list of strings"):
        Route("orders", examples="where is my order")  # type: ignore[arg-type]
    with pytest.raises(InvalidRouteError, match="must be a number"):
        SemanticRouter([Route("orders", examples=["x"])], threshold="high")  # type: ignore[arg-type]
    with pytest.raises(InvalidRouteError, match="must be a number"):
        SemanticRouter([Route("orders", examples=["x"])], margin="wide")  # type: ignore[arg-type]


def test_evaluate_accepts_a_hybrid_routers_rule_targets_and_the_decider_reads_spaced_names() -> None:
    """``evaluate()`` refused a hybrid router's rule targets, and ``LLMDecider`` could not answer
    names with spaces.

    Found by the second review round of the handoff and routing code; fails before commit
    c4af24a."""
    from langgraph_handoff.routing import HybridRouter, LLMDecider

    semantic = SemanticRouter(
        [Route("orders", examples=["where is my order"]), Route("after sales", examples=["refund"])]
    )
    router = HybridRouter(rules=[Rule("human", keywords=["human"])], semantic=semantic)
    assert evaluate(router, [("a human please", "human"), ("where is my order", "orders")]).accuracy == 1.0
    decider = LLMDecider(ScriptedChatModel(["After Sales."]))
    assert decider("x", semantic.routes) == "after sales"
