"""Semantic router scoring and calibration: top-k, noise-relative auto thresholds, uncertain
decisions, the hybrid's decider band and its counts, fit's report and evaluate's threshold sweep."""

from __future__ import annotations

import logging

import pytest

from langgraph_handoff.routing import (
    HybridRouter,
    Route,
    RouteDecision,
    SemanticRouter,
    evaluate,
)
from tests.test_routing import ROUTES


def test_top_k_scores_a_route_by_the_mean_of_its_k_best_examples() -> None:
    max_sim = SemanticRouter(ROUTES, top_k=1)
    top3 = SemanticRouter(ROUTES, top_k=3)
    text = "where is my parcel"
    vec = max_sim._encode_query(text)
    from langgraph_handoff.routing.encoders import cosine

    sims = sorted((cosine(vec, v) for n, v in max_sim._index if n == "orders"), reverse=True)
    assert max_sim.scores(text)["orders"] == pytest.approx(sims[0], abs=1e-6)
    assert top3.scores(text)["orders"] == pytest.approx(sum(sims[:3]) / 3, abs=1e-6)
    with pytest.raises(Exception, match="top_k"):
        SemanticRouter(ROUTES, top_k=0)


def test_auto_thresholds_sit_between_noise_and_paraphrase() -> None:
    r = SemanticRouter(ROUTES)
    from langgraph_handoff.routing import semantic

    for name, cal in r.calibration.items():
        assert cal.noise is not None and cal.paraphrase is not None
        expected = cal.noise + semantic.AUTO_THRESHOLD_FACTOR * max(0.0, cal.paraphrase - cal.noise)
        assert r.thresholds[name] == pytest.approx(expected, abs=1e-5)
    assert r.spread > 0


def test_decisions_near_a_boundary_are_marked_uncertain() -> None:
    r = SemanticRouter(ROUTES, fallback="human")
    thr, spread = r.thresholds["orders"], r.spread
    near = r.decide({"orders": thr + 0.01 * spread, "refunds": 0.0, "tech": 0.0})
    far = r.decide({"orders": thr + 5 * spread, "refunds": 0.0, "tech": 0.0})
    below = r.decide({"orders": thr - 0.01 * spread, "refunds": 0.0, "tech": 0.0})
    neck = r.decide({"orders": thr + 5 * spread, "refunds": thr + 4.99 * spread, "tech": 0.0})
    assert (near.uncertain, near.method) == (True, "semantic") and "uncertain" in near.reason
    assert (far.uncertain, far.method) == (False, "semantic")
    assert (below.uncertain, below.method) == (True, "fallback")
    assert neck.uncertain
    assert not SemanticRouter(ROUTES, uncertain_band=0.0).decide({"orders": thr, "refunds": 0, "tech": 0}).uncertain


def _hybrid(ask: str, calls: list[str]) -> HybridRouter:
    semantic = SemanticRouter(ROUTES, fallback="human")

    def decider(text: str, routes: list[Route]) -> str | None:
        calls.append(text)
        return "tech"

    return HybridRouter(semantic=semantic, decider=decider, ask=ask)  # type: ignore[arg-type]


def test_hybrid_asks_the_decider_only_about_uncertain_decisions_and_counts_them() -> None:
    calls: list[str] = []
    h = _hybrid("uncertain", calls)
    r = h.semantic
    assert r is not None
    scripted = {
        "sure": {"orders": r.thresholds["orders"] + 5 * r.spread, "refunds": 0.0, "tech": 0.0},
        "unsure": {"orders": r.thresholds["orders"] + 0.01 * r.spread, "refunds": 0.0, "tech": 0.0},
        "nothing": {"orders": 0.0, "refunds": 0.0, "tech": 0.0},
    }
    r.scores = scripted.__getitem__  # type: ignore[method-assign]
    assert h.route("sure").method == "semantic"
    assert h.route("unsure").method == "llm"
    assert h.route("nothing").method == "fallback"  # a confident rejection costs no model call
    assert calls == ["unsure"]
    assert dict(h.counts) == {"messages": 3, "semantic": 1, "decider": 1, "llm": 1, "fallback": 1}
    assert h.decider_share == pytest.approx(1 / 3)
    h.reset_counts()
    assert h.decider_share == 0.0

    calls.clear()
    unmatched = _hybrid("unmatched", calls)
    assert unmatched.semantic is not None
    unmatched.semantic.scores = scripted.__getitem__  # type: ignore[method-assign]
    assert [unmatched.route(t).method for t in scripted] == ["semantic", "llm", "llm"]
    assert calls == ["unsure", "nothing"]


async def test_hybrid_async_counts_the_same() -> None:
    calls: list[str] = []
    h = _hybrid("uncertain", calls)
    assert h.semantic is not None
    thr, spread = h.semantic.thresholds["orders"], h.semantic.spread
    h.semantic._scores_for = lambda vec: {"orders": thr + 0.01 * spread, "refunds": 0.0, "tech": 0.0}  # type: ignore[method-assign]
    assert (await h.aroute("anything")).method == "llm"
    assert h.counts["decider"] == 1 and calls == ["anything"]


def test_hybrid_rejects_an_unknown_ask() -> None:
    with pytest.raises(Exception, match="ask"):
        HybridRouter(semantic=SemanticRouter(ROUTES), ask="sometimes")  # type: ignore[arg-type]


LABELLED = [
    ("where's my parcel", "orders"),
    ("track the package please", "orders"),
    ("I want my money back", "refunds"),
    ("退款还没到", "refunds"),
    ("the app crashes on start", "tech"),
    ("wifi does not connect", "tech"),
    ("the weather in Paris", None),
    ("a cake recipe", None),
]


def test_fit_reports_before_and_after_and_warns_on_a_tiny_set(caplog: pytest.LogCaptureFixture) -> None:
    r = SemanticRouter(ROUTES, fallback="human")
    with caplog.at_level(logging.WARNING, logger="langgraph_handoff.routing"):
        report = r.fit(LABELLED)
    assert 0.0 <= report.in_scope_before <= 1.0 and report.off_topic_before is not None
    assert report.accuracy >= report.accuracy_before
    assert any("fewer than 10 labelled messages" in w for w in report.warnings)
    assert any("off-topic" in w for w in report.warnings)
    text = str(report)
    assert "in-scope" in text and "off-topic rejected" in text and "warning:" in text
    assert "overfit" in caplog.text


def test_fit_margins_follow_the_score_scale() -> None:
    r = SemanticRouter(ROUTES, fallback="human")
    report = r.fit(LABELLED)
    assert 0.0 <= report.margin <= r.spread + 1e-9


def test_evaluate_returns_a_threshold_sweep_from_strict_to_lenient() -> None:
    r = SemanticRouter(ROUTES, fallback="human")
    report = evaluate(r, LABELLED)
    assert report.sweep, "a semantic router's report has a sweep"
    here = next(p for p in report.sweep if p.offset == 0.0)
    assert (here.in_scope_accuracy, here.off_topic_rejection) == (report.in_scope_accuracy, report.off_topic_rejection)
    lenient, strict = report.sweep[0], report.sweep[-1]
    assert lenient.offset < 0 < strict.offset
    assert strict.off_topic_rejection == 1.0 and strict.in_scope_accuracy == 0.0
    assert lenient.off_topic_rejection == 0.0
    assert report.confusion["orders"]["orders"] >= 1


def test_evaluate_of_a_router_without_scores_has_no_sweep() -> None:
    class Fixed:
        routes = [Route("a", examples=["x"])]

        def route(self, text: str) -> RouteDecision:
            return RouteDecision(target="a", method="rule")

    report = evaluate(Fixed(), [("x", "a")])
    assert report.sweep == []


def test_plot_draws_the_sweep_or_says_matplotlib_is_missing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    report = evaluate(SemanticRouter(ROUTES, fallback="human"), LABELLED)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install matplotlib"):
            report.plot(str(tmp_path / "sweep.png"))
    else:
        report.plot(str(tmp_path / "sweep.png"))
        assert (tmp_path / "sweep.png").stat().st_size > 0


def test_without_measurable_noise_the_threshold_is_a_fraction_of_the_paraphrase_level() -> None:
    from langgraph_handoff.routing import semantic

    r = SemanticRouter(
        [
            Route("orders", examples=["where is my order", "change my delivery address", "我的订单到哪了"]),
            Route("tech", examples=["the app crashes", "wifi will not connect", "蓝牙连不上"]),
        ],
        fallback="human",
    )
    cal = r.calibration["orders"]
    assert cal.noise is None and cal.paraphrase is not None
    assert r.thresholds["orders"] == pytest.approx(semantic.NO_NOISE_FACTOR * cal.paraphrase, abs=1e-6)
    assert r.route("tell me a poem about cats").target == "human"
