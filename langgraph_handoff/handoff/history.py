"""Message-history invariants that chat providers enforce, checked and repaired.

Providers reject a conversation in which an assistant tool call has no tool result, a tool
result answers no call, or other messages come between a call and its results. Multi-agent
libraries break this when a handoff unwinds an agent mid-step (see the survey: langgraph-swarm
orphaned a call in 20/20 parallel-handoff runs). The router checks every history it passes on;
these functions are exported so your tests can check yours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langgraph_handoff.errors import InvalidHistoryError

ProblemKind = Literal["orphaned_call", "stray_result", "duplicate_result", "duplicate_call_id"]


@dataclass(frozen=True)
class HistoryProblem:
    """One defect: ``index`` is the position of the offending message in the history."""

    kind: ProblemKind
    index: int
    tool_call_id: str
    detail: str

    def __str__(self) -> str:
        return f"message {self.index}: {self.detail}"


def validate_history(messages: Sequence[BaseMessage]) -> list[HistoryProblem]:
    """Every defect a provider would reject, in order; an empty list means the history is valid.

    The rule: each tool call of an ``AIMessage`` is answered by exactly one ``ToolMessage`` with
    its id, and those answers come right after the ``AIMessage``, before any other message.

    >>> from langchain_core.messages import HumanMessage
    >>> call = AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": "c1"}])
    >>> validate_history([HumanMessage("hi"), call, ToolMessage("ok", tool_call_id="c1")])
    []
    >>> [p.kind for p in validate_history([HumanMessage("hi"), call, HumanMessage("anyone?")])]
    ['orphaned_call']
    """
    problems: list[HistoryProblem] = []
    seen_ids: set[str] = set()
    open_calls: dict[str, int] = {}  # call id -> index of its AIMessage, for the current block
    answered: set[str] = set()

    def close_block() -> None:
        for cid, idx in open_calls.items():
            if cid not in answered:
                problems.append(HistoryProblem("orphaned_call", idx, cid, f"tool call {cid!r} has no ToolMessage"))
        open_calls.clear()
        answered.clear()

    for i, msg in enumerate(messages):
        if isinstance(msg, ToolMessage):
            cid = msg.tool_call_id
            if cid not in open_calls:
                problems.append(
                    HistoryProblem("stray_result", i, cid, f"ToolMessage answers no pending tool call ({cid!r})")
                )
            elif cid in answered:
                problems.append(HistoryProblem("duplicate_result", i, cid, f"tool call {cid!r} is answered twice"))
            else:
                answered.add(cid)
            continue
        close_block()
        if isinstance(msg, AIMessage):
            for call in msg.tool_calls:
                cid = call.get("id") or ""
                if cid in seen_ids:
                    problems.append(HistoryProblem("duplicate_call_id", i, cid, f"tool call id {cid!r} is used twice"))
                seen_ids.add(cid)
                open_calls[cid] = i
    close_block()
    return sorted(problems, key=lambda p: p.index)


def assert_valid_history(messages: Sequence[BaseMessage]) -> None:
    """Raise :class:`~langgraph_handoff.errors.InvalidHistoryError` listing every defect, if any.

    Use it in tests of your own graphs::

        result = graph.invoke({"messages": [("user", "hi")]}, config)
        assert_valid_history(result["messages"])
    """
    problems = validate_history(messages)
    if problems:
        raise InvalidHistoryError([str(p) for p in problems])


STUB_TEXT = "Not executed: the conversation was handed off before this call ran."


def orphaned_call_stubs(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """Stub results for the orphaned calls of the *last* assistant message.

    Appending them right away makes the history valid again without rewriting earlier messages
    (only the last block can be open when an agent stops). Orphans deeper in the history are a
    bug in the code that produced them and are reported by :func:`validate_history`.
    """
    last_ai = None
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, AIMessage):
            last_ai = i
            break
        if not isinstance(msg, ToolMessage):
            return []
    if last_ai is None:
        return []
    ai = messages[last_ai]
    assert isinstance(ai, AIMessage)
    answered = {m.tool_call_id for m in messages[last_ai + 1 :] if isinstance(m, ToolMessage)}
    return [
        ToolMessage(STUB_TEXT, tool_call_id=c["id"] or "", name=c["name"], status="error")
        for c in ai.tool_calls
        if (c.get("id") or "") not in answered
    ]
