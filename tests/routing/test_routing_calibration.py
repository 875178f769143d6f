"""Semantic router scoring and calibration: top-k, noise-relative auto thresholds, uncertain
decisions, the hybrid's decider band and its counts, fit's report and evaluate's threshold sweep."""

from __future__ import annotations

import logging
import zlib

import pytest
from langchain_core.embeddings import Embeddings

from langgraph_handoff.routing import (
    HybridRouter,
    Route,
    RouteDecision,
    SemanticRouter,
    evaluate,
)
from tests.routing.test_routing import ROUTES


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


class _SameLanguagePull(Embeddings):
    """Meaning from keywords, plus a pull between any two texts of the same script that is much
    stronger for Chinese: what multilingual e5 does, exaggerated so the test is exact."""

    MEANING = {"orders": ("order", "parcel", "订单", "包裹"), "refunds": ("refund", "money back", "退款", "退钱")}

    def _vec(self, text: str) -> list[float]:
        from langgraph_handoff.routing.text import script_of

        meaning = [1.0 if any(k in text.lower() for k in kws) else 0.0 for kws in self.MEANING.values()]
        meaning.append(0.0 if any(meaning) else 1.0)  # about something else
        pull = [0.3, 0.0] if script_of(text) == "latin" else [0.0, 1.5]
        wobble = [((zlib.crc32(text.encode()) >> s) % 7) / 20 for s in range(0, 16, 4)]  # paraphrases differ a little
        return [*meaning, *pull, *wobble]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vec(text)


PULL_ROUTES = [
    Route(
        "orders",
        examples=[
            "where is my order",
            "track my parcel",
            "my order is late",
            "order status",
            "我的订单呢",
            "包裹到哪了",
            "订单什么时候到",
            "查一下订单",
        ],
    ),
    Route(
        "refunds",
        examples=[
            "I want a refund",
            "give my money back",
            "refund status",
            "refund not received",
            "我要退款",
            "退钱给我",
            "退款到账了吗",
            "怎么申请退款",
        ],
    ),
]


def test_thresholds_are_calibrated_per_script_when_an_encoder_pulls_same_language_text_together() -> None:
    """A Chinese off-topic message scores high on every route under a same-language pull; the
    Chinese bar sits higher, so it is rejected, while English keeps its lower bar."""
    per = SemanticRouter(PULL_ROUTES, encoder=_SameLanguagePull(), fallback="human")
    flat = SemanticRouter(PULL_ROUTES, encoder=_SameLanguagePull(), fallback="human", per_script=False)
    assert per.per_script is None  # the default: on, because this encoder relates the two scripts
    assert flat.script_offsets == {} and flat.script_calibration == {}
    assert set(per.script_offsets) == {"latin", "cjk"}
    for route in ("orders", "refunds"):
        assert per.script_offsets["cjk"][route] > 0 > per.script_offsets["latin"][route]
        assert per.threshold_for(route, "cjk") == pytest.approx(
            per.thresholds[route] + per.script_offsets["cjk"][route]
        )
        cal = per.script_calibration["cjk"][route]
        assert cal.noise is not None and cal.noise > per.calibration[route].noise  # type: ignore[operator]
    off_topic_zh = "今天天气怎么样"
    assert flat.route(off_topic_zh).target != "human"  # one bar for all: the pull alone gets it in
    d = per.route(off_topic_zh)
    best = max(d.scores, key=d.scores.__getitem__)
    assert d.target == "human" and d.threshold == pytest.approx(per.threshold_for(best, "cjk"))
    assert per.route("where is my parcel").target == "orders"
    assert per.route("包裹到哪了呢").target == "orders"
    # without a script, decide() uses the route's own threshold (callers that only have scores)
    scores = per.scores(off_topic_zh)
    assert per.decide(scores).threshold == pytest.approx(per.thresholds[max(scores, key=scores.__getitem__)])


def test_explicit_thresholds_turn_per_script_offsets_off_for_the_routes_they_name() -> None:
    everyone = SemanticRouter(PULL_ROUTES, encoder=_SameLanguagePull(), threshold=0.5)
    assert everyone.script_offsets == {} and everyone.threshold_for("orders", "cjk") == 0.5
    one = SemanticRouter(PULL_ROUTES, encoder=_SameLanguagePull(), threshold={"orders": 0.5})
    assert all("orders" not in offsets and "refunds" in offsets for offsets in one.script_offsets.values())


def test_fit_keeps_the_script_offsets_and_moves_each_route_bar_in_every_script() -> None:
    r = SemanticRouter(PULL_ROUTES, encoder=_SameLanguagePull(), fallback="human")
    offsets = {k: dict(v) for k, v in r.script_offsets.items()}
    labelled = [
        ("where's my order", "orders"),
        ("订单到了吗", "orders"),
        ("refund please", "refunds"),
        ("退款呢", "refunds"),
        ("今天天气怎么样", None),
        ("nice weather today", None),
    ]
    report = r.fit(labelled)
    assert r.script_offsets == offsets
    assert report.accuracy == 1.0 and report.off_topic == 1.0
    assert [r.route(t).matched for t, _ in labelled] == [lab for _, lab in labelled]


def test_the_char_ngrams_keep_one_bar_per_route_since_scripts_share_no_ngram() -> None:
    """Per-script calibration corrects a pull between languages; the char n-grams have none
    (cross-script cosines are 0), so by default they keep the one calibration on all examples."""
    auto = SemanticRouter(PULL_ROUTES)
    assert auto.script_offsets == {}
    forced = SemanticRouter(PULL_ROUTES, per_script=True)
    assert set(forced.script_offsets) == {"latin", "cjk"}
    assert forced.thresholds == auto.thresholds  # the routes' own bars do not move, only the offsets


def test_a_shared_latin_word_does_not_switch_the_char_ngrams_to_per_script() -> None:
    """Chinese support messages often hold a Latin word ("App", "Wi-Fi"): a few cross-script
    n-gram matches are not a pull between languages."""
    routes = [
        Route("orders", examples=["where is my order", "track my parcel", "order status",
                                  "我的订单呢", "App里看不到订单", "查一下订单"]),
        Route("tech", examples=["the app crashes", "wifi will not connect", "app login fails",
                                "App打不开", "Wi-Fi连不上", "蓝牙连不上"]),
    ]  # fmt: skip
    assert SemanticRouter(routes).script_offsets == {}
    assert set(SemanticRouter(routes, per_script=True).script_offsets) == {"latin", "cjk"}


def test_a_router_warns_when_routes_have_too_few_examples_to_calibrate(caplog: pytest.LogCaptureFixture) -> None:
    """With 3 examples a route, recommended_encoder() sent "tell me a joke" to a route, and
    nothing warned (issue 47). Below ``MIN_CALIBRATION_EXAMPLES`` (6, measured with
    bench/routing_few_examples.py) a route's automatic threshold is named in a warning, logged
    and kept in ``warnings``; a threshold the caller set is not calibrated, so not warned about.
    Fails before the warning existed."""
    from langgraph_handoff.routing import semantic

    words = ["parcel", "order", "delivery", "tracking", "invoice", "address", "refund"]
    enough = semantic.MIN_CALIBRATION_EXAMPLES
    many = Route("orders", examples=[f"where is my {w}" for w in words[:enough]])
    few = Route("tech", examples=["the app crashes", "cannot connect to wifi", "reset my password"])
    with caplog.at_level(logging.WARNING, logger="langgraph_handoff.routing"):
        router = SemanticRouter([many, few], fallback="human")
    assert len(router.warnings) == 1 and "tech (3)" in router.warnings[0] and "orders" not in router.warnings[0]
    assert "fewer than 6 examples" in caplog.text and "tech (3)" in caplog.text
    assert SemanticRouter([many, few], threshold=0.2).warnings == []  # the caller's bar for every route
    assert SemanticRouter([many, few], threshold={"tech": 0.2}).warnings == []
    two = SemanticRouter([Route("orders", examples=words[:2]), few], threshold={"tech": 0.2})
    assert len(two.warnings) == 1 and "orders (2)" in two.warnings[0] and "tech" not in two.warnings[0]
    assert SemanticRouter([many, Route("tech", examples=[f"{w} is broken" for w in words[:enough]])]).warnings == []
