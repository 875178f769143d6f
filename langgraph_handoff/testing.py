"""Test kit: drive handoff graphs without an LLM, and check the histories they produce.

- :class:`ScriptedChatModel` replies from a script and supports ``bind_tools``, so it can stand in
  for a real model inside ``create_handoff_graph``, ``langchain.agents.create_agent`` or your own loop.
- :func:`tool_call` and :func:`reply` build scripted replies.
- :func:`assert_valid_history` / :func:`validate_history` check that every tool call has exactly
  one result, as providers require.

>>> model = ScriptedChatModel(["hello", tool_call("lookup", {"q": "x"}, id="c1")])
>>> model.invoke("hi").content
'hello'
>>> model.invoke("again").tool_calls[0]["name"]
'lookup'
>>> len(model.calls)
2
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from langgraph_handoff.errors import LangGraphHandoffError
from langgraph_handoff.handoff.history import assert_valid_history, validate_history

__all__ = [
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "assert_valid_history",
    "reply",
    "tool_call",
    "validate_history",
]

Step = str | AIMessage | Callable[[list[BaseMessage]], "str | AIMessage"]


class ScriptExhaustedError(LangGraphHandoffError, AssertionError):
    """The model was called more times than its script has replies: the graph made a call your
    test did not expect (add a reply, or pass ``cycle=True``)."""


def tool_call(name: str, args: dict[str, Any] | None = None, *, id: str | None = None, content: str = "") -> AIMessage:
    """An assistant message with one tool call (ids are unique unless you give one)."""
    return AIMessage(
        content,
        tool_calls=[
            {"name": name, "args": args or {}, "id": id or f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}
        ],
    )


def reply(content: str = "", *calls: AIMessage | dict[str, Any]) -> AIMessage:
    """An assistant message with text and any number of tool calls (parallel calls).

    >>> m = reply("", tool_call("a"), tool_call("b"))
    >>> [c["name"] for c in m.tool_calls]
    ['a', 'b']
    """
    flat: list[dict[str, Any]] = []
    for c in calls:
        flat.extend(c.tool_calls if isinstance(c, AIMessage) else [c])  # type: ignore[arg-type]
    return AIMessage(content, tool_calls=flat)


class ScriptedChatModel(BaseChatModel):
    """A chat model whose replies come from ``script``, in order.

    Each step is a string, an ``AIMessage`` (built with :func:`tool_call`/:func:`reply`), or a
    function of the messages the model received that returns one of those (for replies that
    depend on the conversation). ``calls`` records what every call received, ``bound_tools`` the
    tool names last bound. Thread-safe: parallel runs share one script position.
    """

    script: list[Any]
    cycle: bool = False
    _position: int = PrivateAttr(default=0)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _bound: list[str] = PrivateAttr(default_factory=list)
    _schemas: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    def __init__(self, script: Sequence[Step], *, cycle: bool = False, **kw: Any):
        super().__init__(script=list(script), cycle=cycle, **kw)  # type: ignore[call-arg]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        return self._calls

    @property
    def bound_tools(self) -> list[str]:
        return self._bound

    @property
    def bound_tool_schemas(self) -> list[dict[str, Any]]:
        """The OpenAI-format schemas of the tools last bound (what a provider would be sent)."""
        return self._schemas

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        # convert like a real provider does, so a tool schema a provider would reject fails here too
        schemas = [convert_to_openai_tool(t) for t in tools]
        self._bound = [s["function"]["name"] for s in schemas]
        self._schemas = schemas
        return self

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self._calls.append(list(messages))
            if self._position >= len(self.script):
                if not self.cycle or not self.script:
                    raise ScriptExhaustedError(
                        f"ScriptedChatModel got call {self._position + 1} but its script has {len(self.script)} replies; "
                        f"last message it saw: {messages[-1].content!r}"
                        if messages
                        else ""
                    )
                self._position = 0
            step = self.script[self._position]
            self._position += 1
        if callable(step) and not isinstance(step, BaseMessage):
            step = step(list(messages))
        if isinstance(step, str):
            return AIMessage(step)
        if isinstance(step, AIMessage):
            # fresh ids every time, so a cycled script never repeats a tool call id
            fresh = [
                {**c, "id": c["id"] if not self.cycle else f"call_{uuid.uuid4().hex[:12]}"} for c in step.tool_calls
            ]
            return AIMessage(step.content, tool_calls=fresh, name=step.name)
        raise ScriptExhaustedError(
            f"script step must be str, AIMessage or a function returning one, got {type(step).__name__}"
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])
