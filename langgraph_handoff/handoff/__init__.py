"""Handoffs between agents inside one LangGraph graph.

- :class:`Handoff`: the record (source, target, briefing, payload, chain, hop, ...).
- :func:`create_handoff_tool`: the ``transfer_to_<agent>`` tool an LLM agent calls.
- :func:`create_handoff_graph`: agents + a router + circuit breakers + a fallback agent.
- :func:`validate_history` / :func:`assert_valid_history`: every tool call answered exactly once.

>>> from langgraph_handoff.handoff import HandoffAgent, create_handoff_graph
>>> from langgraph_handoff.testing import ScriptedChatModel
>>> graph = create_handoff_graph([HandoffAgent("helper", ScriptedChatModel(["Hi!"]))])
>>> graph.invoke({"messages": [("user", "hello")]})["messages"][-1].content
'Hi!'
"""

from langgraph_handoff.handoff.agents import HandoffAgent, handoff_middleware, handoff_to
from langgraph_handoff.handoff.audit import AuditPolicy, AuditRecord, LogAuditSink, StoreAuditSink
from langgraph_handoff.handoff.briefing import BriefingCheck, BriefingVerdict
from langgraph_handoff.handoff.context import BriefingOnly, FullHistory, LastN, StripTools
from langgraph_handoff.handoff.graph import (
    HandoffState,
    build_handoff_graph,
    create_handoff_graph,
    handoff_log,
    routing_log,
)
from langgraph_handoff.handoff.history import HistoryProblem, assert_valid_history, validate_history
from langgraph_handoff.handoff.model import SERDE_ALLOWLIST, Handoff, is_handoff_message
from langgraph_handoff.handoff.tools import create_handoff_tool, handoff_tools

__all__ = [
    "SERDE_ALLOWLIST",
    "AuditPolicy",
    "AuditRecord",
    "BriefingCheck",
    "BriefingOnly",
    "BriefingVerdict",
    "FullHistory",
    "Handoff",
    "HandoffAgent",
    "HandoffState",
    "HistoryProblem",
    "LastN",
    "LogAuditSink",
    "StoreAuditSink",
    "StripTools",
    "assert_valid_history",
    "build_handoff_graph",
    "create_handoff_graph",
    "create_handoff_tool",
    "handoff_log",
    "handoff_middleware",
    "handoff_to",
    "handoff_tools",
    "is_handoff_message",
    "routing_log",
    "validate_history",
]
