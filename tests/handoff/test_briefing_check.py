"""The briefing check: a handoff whose briefing says too little, or nothing about the target's
work, is refused back to the model, handed to the fallback, or handed off and audited.

Before it, a one-character briefing ``"x"`` was handed to an unrelated agent."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_handoff.errors import InvalidHandoffError
from langgraph_handoff.handoff import AuditPolicy, BriefingCheck, HandoffAgent, create_handoff_graph, handoff_log
from langgraph_handoff.handoff.tools import tool_name_for
from langgraph_handoff.routing import Route, SemanticRouter
from langgraph_handoff.testing import ScriptedChatModel, tool_call
from tests.support.audit_helpers import Sink

GOOD = "Customer wants a refund for the damaged headphones from order A-1001; start the return."
OFF_TOPIC = "Customer asks about the weather forecast for the weekend and the football results."


def _desk(triage_script: list[Any], check: BriefingCheck, router: Any = None, **kw: Any) -> Any:
    agents = [
        HandoffAgent("triage", ScriptedChatModel(triage_script), description="greets the customer and routes"),
        HandoffAgent(
            "after_sales",
            ScriptedChatModel(["refund started"], cycle=True),
            description="returns, refunds, damaged items",
        ),
        HandoffAgent("orders", ScriptedChatModel(["order found"], cycle=True), description="order tracking, delivery"),
        HandoffAgent("human", ScriptedChatModel(["a colleague takes over"], cycle=True), description="a person"),
    ]
    return create_handoff_graph(
        agents, router=router, default_agent="triage", fallback="human", briefing_check=check,
        checkpointer=InMemorySaver(), **kw,
    )  # fmt: skip


def _to(target: str, briefing: str) -> Any:
    return tool_call(tool_name_for(target), {"briefing": briefing})


def _run(graph: Any, thread: str = "t") -> dict[str, Any]:
    return graph.invoke(
        {"messages": [("user", "my headphones arrived broken")]}, {"configurable": {"thread_id": thread}}
    )


def _refusals(result: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in result["messages"] if isinstance(m, ToolMessage) and m.status == "error"]


def test_a_one_character_briefing_is_refused_and_the_model_writes_a_real_one() -> None:
    graph = _desk([_to("after_sales", "x"), _to("after_sales", GOOD)], BriefingCheck())
    result = _run(graph)
    assert result["active_agent"] == "after_sales"
    assert len(_refusals(result)) == 1 and "the briefing is too short (1 of 50 characters)" in _refusals(result)[0]
    last = handoff_log(result)[-1]
    assert last.briefing == GOOD and last.check is not None
    assert last.check["ok"] is True and last.check["by"] == "keyword" and "refund" in last.check["matched"]


def test_a_briefing_about_other_work_goes_to_the_fallback_once_the_retries_are_used() -> None:
    graph = _desk([_to("orders", OFF_TOPIC)] * 3, BriefingCheck())
    result = _run(graph)
    assert len(_refusals(result)) == 3  # two more goes, then no more
    assert "mentions nothing 'orders' handles" in _refusals(result)[0]
    assert result["active_agent"] == "human"
    assert handoff_log(result)[-1].trigger == "breaker"
    assert "briefing" in result["breakers"][-1]["reason"]


def test_on_fail_fallback_gives_no_second_go() -> None:
    graph = _desk([_to("orders", "x")], BriefingCheck(on_fail="fallback"))
    result = _run(graph)
    assert result["active_agent"] == "human" and len(_refusals(result)) == 1
    assert handoff_log(result)[-1].trigger == "breaker"


def test_on_fail_warn_hands_off_logs_and_forces_an_audit(caplog: pytest.LogCaptureFixture) -> None:
    sink = Sink()
    graph = _desk([_to("orders", "x")], BriefingCheck(on_fail="warn"), audit=AuditPolicy(rate=0.0, sinks=[sink]))
    with caplog.at_level(logging.WARNING, logger="langgraph_handoff.handoff"):
        result = _run(graph)
    assert result["active_agent"] == "orders"
    last = handoff_log(result)[-1]
    assert last.check is not None and last.check["ok"] is False and last.audit is True
    assert [r.why for r in sink.records] == [("briefing_flagged",)] and sink.records[0].id == last.id
    flagged = [r for r in caplog.records if "the check flagged" in r.getMessage()]
    assert len(flagged) == 1 and getattr(flagged[0], "langgraph_handoff.handoff.id") == last.id


@pytest.mark.parametrize(
    ("target", "briefing", "by"),
    [
        ("after_sales", "客户收到的耳机是坏的，想申请退款，订单号 A-1001，请处理退货。", "keyword"),
        ("after_sales", "הלקוח רוצה החזר כספי על האוזניות שהגיעו שבורות, הזמנה A-1001, נא לטפל.", "keyword"),
    ],
)
def test_chinese_and_hebrew_briefings_pass_on_keywords(target: str, briefing: str, by: str) -> None:
    router = SemanticRouter(
        [
            Route(
                "after_sales", examples=["我要申请退款", "退款什么时候到", "אני רוצה החזר כספי", "מתי יגיע ההחזר הכספי"]
            ),
            Route("orders", examples=["我的订单到哪了", "快递什么时候到", "איפה ההזמנה שלי", "מתי המשלוח יגיע"]),
        ]
    )
    check = BriefingCheck(min_chars=30).bind(
        [HandoffAgent("after_sales", None), HandoffAgent("orders", None)], router=router
    )
    verdict = check.verdict(target, briefing)
    assert verdict.ok and verdict.by == by, verdict


def test_a_paraphrase_with_no_keyword_passes_on_meaning_and_another_desks_work_fails() -> None:
    router = SemanticRouter(
        [
            Route("after_sales", examples=["I want my money back", "send the broken item back", "money back please"]),
            Route("orders", examples=["where is my parcel", "track my parcel", "when does my parcel arrive"]),
        ]
    )
    agents = [HandoffAgent("after_sales", None), HandoffAgent("orders", None)]
    check = BriefingCheck(min_chars=10, slack=0.5).bind(agents, router=router)
    paraphrase = check.verdict("after_sales", "The customer wants the broken item refunded")
    assert paraphrase.ok and paraphrase.by == "semantic", paraphrase
    wrong = check.verdict("orders", "The customer wants the broken item refunded")
    assert not wrong.ok and wrong.by == "semantic" and "reads like work for 'after_sales'" in wrong.reason


def test_keywords_are_the_targets_own_terms_not_ones_every_desk_shares() -> None:
    agents = [
        HandoffAgent("orders", None, description="the customer's order: tracking and delivery"),
        HandoffAgent("returns", None, description="the customer's order: refunds and returns"),
    ]
    check = BriefingCheck(min_chars=0, keywords={"orders": ["parcel"]}).bind(agents, router=None)
    assert "customer" not in check.keywords["orders"] and "order" not in check.keywords["orders"]
    assert {"tracking", "delivery", "parcel"} <= check.keywords["orders"]
    assert not check.verdict("orders", "the customer's order").ok  # shared words say nothing
    assert check.verdict("orders", "where is the parcel").ok


def test_an_agent_with_nothing_to_check_against_passes_past_the_length() -> None:
    check = BriefingCheck(min_chars=5).bind([HandoffAgent("a", None), HandoffAgent("b", None)], router=None)
    assert check.verdict("b", "anything at all").by == "unchecked"
    assert not check.verdict("b", "x").ok


def test_a_chinese_briefing_is_measured_in_what_its_characters_carry() -> None:
    check = BriefingCheck(min_chars=50).bind([HandoffAgent("a", None)], router=None)
    assert check.verdict("a", "客户收到的耳机是坏的，想申请退款，请处理。").ok  # 20 characters, a whole sentence
    assert not check.verdict("a", "退款").ok


@pytest.mark.parametrize(
    "bad",
    [
        {"min_chars": -1},
        {"on_fail": "ignore"},
        {"slack": -0.1},
        {"keywords": ["refund"]},
    ],
)
def test_bad_options_are_typed_errors(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidHandoffError):
        BriefingCheck(**bad)


def test_keywords_for_an_unknown_agent_are_refused() -> None:
    with pytest.raises(InvalidHandoffError, match="unknown agents"):
        BriefingCheck(keywords={"billing": ["invoice"]}).bind([HandoffAgent("a", None)], router=None)


async def test_the_async_path_checks_the_same() -> None:
    graph = _desk([_to("after_sales", "x"), _to("after_sales", GOOD)], BriefingCheck())
    result = await graph.ainvoke(
        {"messages": [("user", "my headphones arrived broken")]}, {"configurable": {"thread_id": "a"}}
    )
    assert result["active_agent"] == "after_sales" and len(_refusals(result)) == 1
