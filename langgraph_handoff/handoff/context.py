"""Context policies: how much of the conversation an agent sees when it takes over.

The shared transcript always keeps everything (it is the audit trail and the user's history);
a policy only shapes the *view* an agent is invoked with. Every view is a valid history: a cut
never separates a tool call from its results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langgraph_handoff.errors import InvalidHandoffError
from langgraph_handoff.handoff.model import MESSAGE_MARK, is_handoff_message

ContextPolicy = Callable[[Sequence[BaseMessage], str], list[BaseMessage]]
ContextSpec = str | int | ContextPolicy | None


class FullHistory:
    """The whole conversation (the default)."""

    def __call__(self, messages: Sequence[BaseMessage], agent: str) -> list[BaseMessage]:
        return list(messages)

    def __repr__(self) -> str:
        return "FullHistory()"


class LastN:
    """At most the last ``n`` messages, starting at a user message: providers reject a
    conversation that opens with an assistant turn or a tool result. The view starts at the first
    user message inside the window; if the window has none (a long tool loop), it reaches back to
    the latest user message before it, so no tool result ever loses its call.

    >>> from langchain_core.messages import HumanMessage
    >>> call = AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c"}])
    >>> history = [HumanMessage("a"), call, ToolMessage("r", tool_call_id="c"), HumanMessage("b"), AIMessage("c")]
    >>> [m.content for m in LastN(3)(history, "x")]
    ['b', 'c']
    >>> [type(m).__name__ for m in LastN(1)(history[:3], "x")]
    ['HumanMessage', 'AIMessage', 'ToolMessage']
    """

    def __init__(self, n: int):
        if n < 1:
            raise InvalidHandoffError(f"LastN needs n >= 1, got {n}")
        self.n = n

    def __call__(self, messages: Sequence[BaseMessage], agent: str) -> list[BaseMessage]:
        window = max(0, len(messages) - self.n)
        start = next((i for i in range(window, len(messages)) if isinstance(messages[i], HumanMessage)), None)
        if start is None:
            start = next((i for i in range(window - 1, -1, -1) if isinstance(messages[i], HumanMessage)), 0)
        return list(messages[start:])

    def __repr__(self) -> str:
        return f"LastN({self.n})"


class BriefingOnly:
    """Start at the latest briefing addressed to this agent: the receiver works from the handoff
    note and everything after it (its own work, later user turns), not from what other agents did
    before. An agent that was routed to directly, with no briefing, starts at the user's latest
    message."""

    def __call__(self, messages: Sequence[BaseMessage], agent: str) -> list[BaseMessage]:
        for i in range(len(messages) - 1, -1, -1):
            msg = messages[i]
            if is_handoff_message(msg) and msg.response_metadata[MESSAGE_MARK].get("target") == agent:
                return list(messages[i:])
        for i in range(len(messages) - 1, -1, -1):
            if isinstance(messages[i], HumanMessage) and not is_handoff_message(messages[i]):
                return list(messages[i:])
        return list(messages)

    def __repr__(self) -> str:
        return "BriefingOnly()"


def _strip_blocks(content: Any) -> Any:
    if isinstance(content, list):
        return [
            b
            for b in content
            if not (isinstance(b, dict) and b.get("type") in ("tool_use", "tool_call", "function_call"))
        ]
    return content


class StripTools:
    """Everything except earlier tool traffic: before the latest user (or briefing) message, tool
    results are dropped and assistant messages keep only their text. From that message on, the
    agent's own current work stays as it is, so a tool error it must correct is still in view.
    For agents that should not see, or be confused by, other agents' tools."""

    def __call__(self, messages: Sequence[BaseMessage], agent: str) -> list[BaseMessage]:
        last_user = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=len(messages))
        out: list[BaseMessage] = []
        for msg in messages[:last_user]:
            if isinstance(msg, ToolMessage):
                continue
            if isinstance(msg, AIMessage) and (
                msg.tool_calls or msg.invalid_tool_calls or "tool_calls" in msg.additional_kwargs
            ):
                content = _strip_blocks(msg.content)
                if not content:
                    continue
                # OpenAI-style integrations also send raw calls kept in additional_kwargs
                extra = {k: v for k, v in msg.additional_kwargs.items() if k not in ("tool_calls", "function_call")}
                msg = msg.model_copy(
                    update={"tool_calls": [], "invalid_tool_calls": [], "content": content, "additional_kwargs": extra}
                )
            out.append(msg)
        return out + list(messages[last_user:])

    def __repr__(self) -> str:
        return "StripTools()"


def as_policy(spec: ContextSpec) -> ContextPolicy:
    """``None``/``"full"``, ``"briefing"``, ``"no_tools"``, an int (last N), or any callable
    ``(messages, agent_name) -> messages``."""
    if spec is None or spec == "full":
        return FullHistory()
    if spec == "briefing":
        return BriefingOnly()
    if spec == "no_tools":
        return StripTools()
    if isinstance(spec, int) and not isinstance(spec, bool):
        return LastN(spec)
    if callable(spec):
        return spec
    raise InvalidHandoffError(
        f"unknown context policy {spec!r}: use 'full', 'briefing', 'no_tools', an int (last N messages) or a callable"
    )
