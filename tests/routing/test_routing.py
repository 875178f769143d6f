"""Routers: rules, semantic (thresholds, margin, calibration), hybrid cascade, evaluation."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import Embeddings

from langgraph_handoff.errors import InvalidRouteError
from langgraph_handoff.routing import (
    CharNgramEncoder,
    CombinedEncoder,
    HybridRouter,
    LLMDecider,
    Route,
    RouteDecision,
    Rule,
    RuleRouter,
    SemanticRouter,
    aevaluate,
    evaluate,
)
from langgraph_handoff.testing import ScriptedChatModel

ROUTES = [
    Route(
        "orders",
        "order status, delivery, changes",
        [
            "where is my order",
            "track my parcel",
            "change the delivery address",
            "cancel my order before it ships",
            "我的订单到哪了",
            "帮我查一下物流",
            "איפה ההזמנה שלי",
            "מתי המשלוח יגיע",
        ],
    ),
    Route(
        "refunds",
        "returns and refunds",
        [
            "I want to return this",
            "refund my money",
            "the item arrived broken, I want a refund",
            "我要退货",
            "退款什么时候到账",
            "אני רוצה להחזיר את המוצר",
            "מתי אקבל החזר כספי",
        ],
    ),
    Route(
        "tech",
        "devices and the app not working",
        [
            "the app keeps crashing",
            "cannot connect to wifi",
            "bluetooth will not pair",
            "reset my password",
            "应用老是闪退",
            "蓝牙连不上",
            "האפליקציה קורסת",
            "לא מצליח להתחבר לוויי-פיי",
        ],
    ),
]


@pytest.fixture(scope="module")
def router() -> SemanticRouter:
    return SemanticRouter(ROUTES, fallback="human")


# -- rules -------------------------------------------------------------------------------------


def test_rules_match_commands_keywords_and_patterns_in_three_languages() -> None:
    r = RuleRouter(
        [
            Rule("human", commands=["talk to a human", "转人工"], keywords=["representative", "נציג"]),
            Rule("orders", patterns=[r"\border\s+#?\d{4,}\b"]),
        ],
        fallback="triage",
    )
    assert r.route("Please let me TALK to a   Human!").reason == "command: talk to a human"
    assert r.route("我要转人工，谢谢").target == "human"  # no spaces in Chinese: substring match
    assert r.route("תעביר אותי לנציג בבקשה").target == "human"  # Hebrew prefix ל attached to the word
    assert r.route("where is order #12345").target == "orders"
    assert r.route("représentative").target == "human"  # accents ignored
    miss = r.route("my representatives")  # whole words only
    assert (miss.target, miss.method, miss.reason) == ("triage", "fallback", "no rule matched")


def test_first_matching_rule_wins() -> None:
    r = RuleRouter([Rule("human", keywords=["human"]), Rule("refunds", keywords=["refund"])])
    assert r.route("refund, or a human").target == "human"


@pytest.mark.parametrize(
    "bad", [dict(target=""), dict(target="x"), dict(target="x", patterns=["("]), dict(target="x", keywords=[" "])]
)
def test_bad_rules_are_typed_errors(bad: dict) -> None:
    with pytest.raises(InvalidRouteError):
        Rule(**bad)


# -- semantic ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("where's my parcel???", "orders"),
        ("I'd like to return the headphones and get a refund", "refunds"),
        ("the app crashes every time I open it", "tech"),
        ("我的包裹到哪里了", "orders"),
        ("退货退款", "refunds"),
        ("蓝牙一直连不上", "tech"),
        ("איפה החבילה שלי", "orders"),
        ("אני רוצה החזר כספי", "refunds"),
        ("האפליקציה לא נפתחת וקורסת", "tech"),
    ],
)
def test_semantic_routes_in_english_chinese_and_hebrew(router: SemanticRouter, text: str, expected: str) -> None:
    d = router.route(text)
    assert (d.target, d.method) == (expected, "semantic"), d
    assert set(d.scores) == {"orders", "refunds", "tech"} and d.score == d.scores[expected]


@pytest.mark.parametrize("text", ["what's the capital of Australia", "今天天气怎么样", "מה המתכון לחומוס"])
def test_off_topic_goes_to_the_fallback_with_all_scores(router: SemanticRouter, text: str) -> None:
    d = router.route(text)
    assert (d.target, d.method, d.matched) == ("human", "fallback", None), d
    assert "below its threshold" in d.reason and len(d.scores) == 3


def test_thresholds_are_calibrated_per_route_not_a_fixed_constant(router: SemanticRouter) -> None:
    # raw cosines are low; a fixed 0.8 would reject everything
    assert all(0.0 < t < 0.5 for t in router.thresholds.values()), router.thresholds
    assert len(set(router.thresholds.values())) > 1


def test_explicit_thresholds_and_margin() -> None:
    everything = SemanticRouter(ROUTES, threshold=0.0, fallback="human")
    assert everything.route("what's the capital of Australia").method == "semantic"
    nothing = SemanticRouter(ROUTES, threshold=0.99, fallback="human")
    assert nothing.route("where is my order now").target == "human"
    per_route = SemanticRouter(ROUTES, threshold={"orders": 0.99}, fallback="human")
    assert per_route.thresholds["orders"] == 0.99 and per_route.thresholds["tech"] < 0.5
    strict_margin = SemanticRouter(ROUTES, threshold=0.0, margin=0.9, fallback="human")
    d = strict_margin.route("where is my parcel, I want a refund")
    assert d.is_fallback and "less than the margin" in d.reason


def test_without_fallback_the_target_is_none() -> None:
    d = SemanticRouter(ROUTES).route("what's the capital of Australia")
    assert d.target is None and d.is_fallback


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(routes=[]),
        dict(routes=[Route("a", examples=["x"]), Route("a", examples=["y"])]),
        dict(routes=[Route("a")]),
        dict(routes=ROUTES, threshold={"nope": 0.3}),
        dict(routes=ROUTES, fallback=3),
        dict(routes=ROUTES, encoder=object()),
    ],
)
def test_bad_router_configuration_is_a_typed_error(kwargs: dict) -> None:
    routes = kwargs.pop("routes")
    with pytest.raises(InvalidRouteError):
        SemanticRouter(routes, **kwargs)


def test_fit_tunes_thresholds_and_reports_accuracy() -> None:
    r = SemanticRouter(ROUTES, threshold=0.0, fallback="human")
    labelled = [
        ("when will my package arrive", "orders"),
        ("has my order shipped yet", "orders"),
        ("please refund me", "refunds"),
        ("I want to send it back", "refunds"),
        ("wifi keeps dropping", "tech"),
        ("the app will not log me in", "tech"),
        ("tell me a joke", None),
        ("who won the football match", None),
        ("recipe for pancakes", None),
        ("what is the capital of France", None),
    ]
    report = r.fit(labelled)
    assert report.n == 10 and report.n_off_topic == 4
    assert report.accuracy > report.accuracy_before
    assert r.thresholds == report.thresholds and any(t > 0 for t in report.thresholds.values())
    assert "fitted on 10 messages" in str(report)
    assert evaluate(r, labelled).accuracy == pytest.approx(report.accuracy)


def test_fit_warns_about_examples_leaking_into_the_labelled_set() -> None:
    r = SemanticRouter(ROUTES)
    report = r.fit([("where is my order", "orders"), ("hello", None)])
    assert report.leaked == ["where is my order"] and "warning" in str(report)


def test_fit_and_evaluate_refuse_unknown_labels() -> None:
    r = SemanticRouter(ROUTES)
    with pytest.raises(InvalidRouteError, match="name no route"):
        r.fit([("x", "billing")])
    with pytest.raises(InvalidRouteError):
        r.fit([])
    with pytest.raises(InvalidRouteError):
        evaluate(r, [])


async def test_aroute_matches_route(router: SemanticRouter) -> None:
    for text in ["where is my order", "退款", "מה המתכון לחומוס"]:
        assert await router.aroute(text) == router.route(text)


class KeywordEmbeddings(Embeddings):
    """A deterministic stand-in for a real embedding model: counts of a few keywords."""

    WORDS = ["order", "parcel", "refund", "return", "app", "wifi"]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(t.lower().count(w)) + 0.01 for w in self.WORDS] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def test_any_langchain_embeddings_can_be_the_encoder() -> None:
    r = SemanticRouter(ROUTES, encoder=KeywordEmbeddings(), threshold=0.5)
    assert r.route("refund refund").target == "refunds"
    assert r.route("my wifi and app").target == "tech"


async def test_embeddings_encoder_async_path() -> None:
    r = SemanticRouter(ROUTES, encoder=KeywordEmbeddings(), threshold=0.5)
    assert (await r.aroute("refund please")).target == "refunds"


def test_combined_encoder_mixes_sparse_and_dense() -> None:
    enc = CombinedEncoder([CharNgramEncoder(), KeywordEmbeddings()], weights=[1, 1])
    r = SemanticRouter(ROUTES, encoder=enc, threshold=0.1)
    assert r.route("where is my parcel").target == "orders"
    with pytest.raises(InvalidRouteError):
        CombinedEncoder([CharNgramEncoder()], weights=[1, 2])


def test_unknown_ngrams_lower_the_score_of_unrelated_text() -> None:
    penalize, ignore = CharNgramEncoder(), CharNgramEncoder(unknown="ignore")
    a = SemanticRouter(ROUTES, encoder=penalize, threshold=0.0).scores("order zzzzqqq xxxyyy wwwvvv")["orders"]
    b = SemanticRouter(ROUTES, encoder=ignore, threshold=0.0).scores("order zzzzqqq xxxyyy wwwvvv")["orders"]
    assert a < b


def test_wordllama_runs_offline() -> None:
    from langgraph_handoff.routing import WordLlamaEmbeddings

    r = SemanticRouter(ROUTES, encoder=WordLlamaEmbeddings(), threshold=0.2)
    assert r.route("where is my parcel, it has not arrived").target == "orders"


# -- hybrid --------------------------------------------------------------------------------------


def hybrid(decider=None) -> HybridRouter:
    return HybridRouter(
        rules=[Rule("human", commands=["human", "人工", "נציג"])],
        semantic=SemanticRouter(ROUTES, fallback="human"),
        decider=decider,
    )


def test_hybrid_cascade_rule_then_semantic_then_fallback() -> None:
    r = hybrid()
    assert r.route("a human please, about my refund").method == "rule"
    assert r.route("where is my order").method == "semantic"
    d = r.route("what's the capital of Australia")
    assert (d.target, d.method) == ("human", "fallback") and d.scores  # semantic scores kept


def test_hybrid_asks_the_decider_only_for_what_is_left() -> None:
    model = ScriptedChatModel(["tech"])
    r = hybrid(LLMDecider(model))
    assert r.route("where is my order").method == "semantic" and not model.calls
    d = r.route("my smart bulb blinks red three times")
    assert (d.target, d.method) == ("tech", "llm") and len(model.calls) == 1
    assert "Routes:" in model.calls[0][0].content


def test_decider_answer_that_is_not_a_route_falls_back() -> None:
    r = hybrid(LLMDecider(ScriptedChatModel(["I think it might be billing, or maybe orders"])))
    d = r.route("my smart bulb blinks red three times")
    assert (d.target, d.method) == ("human", "fallback") and "decider answered None" in d.reason


async def test_hybrid_async_with_plain_callable_decider() -> None:
    r = hybrid(lambda text, routes: "orders")
    assert (await r.aroute("my smart bulb blinks red")).method == "llm"
    assert (await r.aroute("人工")).method == "rule"


def test_hybrid_needs_a_stage() -> None:
    with pytest.raises(InvalidRouteError):
        HybridRouter()


# -- evaluation --------------------------------------------------------------------------------


def test_evaluate_reports_precision_recall_and_confusion() -> None:
    class Fixed:
        routes = [Route("a", examples=["x"]), Route("b", examples=["y"])]

        def route(self, text: str) -> RouteDecision:
            target = {"a1": "a", "a2": "b", "b1": "b", "n1": None}[text]
            return RouteDecision(target=target or "fb", method="fallback" if target is None else "semantic")

    rep = evaluate(Fixed(), [("a1", "a"), ("a2", "a"), ("b1", "b"), ("n1", None)])
    assert rep.accuracy == 0.75 and rep.off_topic_rejection == 1.0 and rep.in_scope_accuracy == pytest.approx(2 / 3)
    assert rep.confusion["a"]["b"] == 1 and rep.confusion["(none)"]["(none)"] == 1
    assert (rep.per_route["a"].precision, rep.per_route["a"].recall) == (1.0, 0.5)
    assert (rep.per_route["b"].precision, rep.per_route["b"].recall) == (0.5, 1.0)
    assert rep.errors == [("a2", "a", "b")]
    assert "confusion" in str(rep)


async def test_aevaluate_equals_evaluate(router: SemanticRouter) -> None:
    labelled = [("where is my order", "orders"), ("今天天气怎么样", None), ("退货", "refunds")]
    assert (await aevaluate(router, labelled)).accuracy == evaluate(router, labelled).accuracy


def test_route_decision_round_trips_through_langgraph_serializer() -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from langgraph_handoff.handoff import SERDE_ALLOWLIST

    d = SemanticRouter(ROUTES, fallback="human").route("where is my order")
    strict = JsonPlusSerializer(allowed_msgpack_modules=list(SERDE_ALLOWLIST))
    assert strict.loads_typed(strict.dumps_typed(d)) == d
    assert RouteDecision.model_validate(strict.loads_typed(strict.dumps_typed(d.model_dump(mode="json")))) == d


# -- at the edges: bad input, fit with only off-topic labels, evaluate on a hybrid, spaced names --


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
