"""The tool an LLM agent calls to hand the conversation to another agent.

Design: **one tool per target** (``transfer_to_orders``, ``transfer_to_tech_support``, ...)
rather than one ``handoff(target=...)`` tool with an enum:

- each target declares its own payload schema, and a per-target tool puts exactly that schema in
  the tool's arguments, so the model sees which fields *this* target needs (one shared tool would
  need a union of every payload, which models fill in badly);
- ``transfer_to_<name>`` is the convention models are trained on (OpenAI Agents, LangGraph swarm);
- availability is per target: a disabled target's tool answers with an error the model can read.

The tool does not jump anywhere. It validates the request and returns it as the ToolMessage's
``artifact`` ("record, then route"); the agent loop stops after the tool step and the graph's
router executes the first valid request. That is what keeps history valid when a model calls
several tools at once: every call, handoff or not, gets its real ToolMessage, and nothing is
unwound. (Raising ``Command(graph=PARENT)`` from tools run as parallel tasks keeps one at random.)
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel

from langgraph_handoff.errors import InvalidHandoffError
from langgraph_handoff.handoff.model import MESSAGE_MARK, validate_payload

Enabled = bool | Callable[[], bool]


def tool_name_for(target: str) -> str:
    """``transfer_to_<target>``, in the characters providers accept in tool names (``[A-Za-z0-9_-]``,
    at most 64). A name that had to be changed gets a short hash of the real one, so "退货" and
    "换货" (or "after sales" and "after.sales") still get different tools.

    >>> tool_name_for("orders")
    'transfer_to_orders'
    >>> tool_name_for("退货") != tool_name_for("换货")
    True
    """
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", target)
    name = "transfer_to_" + safe
    if safe == target and len(name) <= 64:
        return name
    digest = hashlib.sha256(target.encode("utf-8")).hexdigest()[:8]
    return f"{name[:55]}_{digest}"


def _args_schema(target: str, payload_schema: type[BaseModel] | None) -> dict[str, Any]:
    payload: dict[str, Any] = (
        payload_schema.model_json_schema()
        if payload_schema is not None
        else {"type": "object", "description": "Optional structured facts for the receiving agent."}
    )
    # nested models and enums come as "$defs" referenced from the schema's root ("#/$defs/X");
    # the payload schema is embedded one level down, so its definitions move to the tool's root
    defs = payload.pop("$defs", None)
    payload.setdefault("description", f"Structured data the {target} agent needs.")
    required = ["briefing"]
    if payload_schema is not None and payload.get("required"):
        required.append("payload")
    return {
        **({"$defs": defs} if defs else {}),
        "title": tool_name_for(target),
        "type": "object",
        "properties": {
            "briefing": {
                "type": "string",
                "description": (
                    f"Note for the {target} agent: why you are handing over, what is already known or done, "
                    "and exactly what it should do next. It cannot see your reasoning, only this note."
                ),
            },
            "reason": {"type": "string", "description": "One short phrase: why this agent and not you."},
            "payload": payload,
        },
        "required": required,
    }


def create_handoff_tool(
    target: str,
    *,
    description: str = "",
    payload_schema: type[BaseModel] | None = None,
    enabled: Enabled = True,
    name: str | None = None,
) -> BaseTool:
    """A tool that asks the graph to hand the conversation to ``target``.

    A wrong call never aborts the run: an invalid payload, a missing briefing or a disabled target
    comes back to the model as an error ToolMessage (``status="error"``) that says how to fix it.

    >>> from pydantic import BaseModel
    >>> class OrderRef(BaseModel):
    ...     order_id: str
    >>> tool = create_handoff_tool("orders", description="order status and changes", payload_schema=OrderRef)
    >>> tool.name
    'transfer_to_orders'
    >>> msg = tool.invoke({"type": "tool_call", "id": "c1", "name": tool.name,
    ...                    "args": {"briefing": "Customer asks where A-1 is", "payload": {"order_id": "A-1"}}})
    >>> msg.status, msg.artifact["langgraph_handoff"]["payload"]
    ('success', {'order_id': 'A-1'})
    >>> bad = tool.invoke({"type": "tool_call", "id": "c2", "name": tool.name, "args": {"briefing": "x", "payload": {}}})
    >>> bad.status, bad.content.split(":")[0]
    ('error', "payload for 'orders' is invalid")
    """
    if not target:
        raise InvalidHandoffError("create_handoff_tool needs a target name")
    tool_name = name or tool_name_for(target)

    def transfer(
        briefing: Any = None, reason: Any = "", payload: Any = None, **extra: Any
    ) -> tuple[str, dict[str, Any]]:
        is_on = enabled() if callable(enabled) else enabled
        if not is_on:
            raise ToolException(
                f"The {target} agent is not available right now. Do not retry this tool: help the user yourself "
                "or hand off to another agent."
            )
        if not isinstance(briefing, str) or not briefing.strip():
            raise ToolException(
                "A handoff needs a 'briefing': a non-empty note telling the next agent why it gets the "
                "conversation, what is known and what to do next. Call the tool again with one."
            )
        try:
            data = validate_payload(payload_schema, payload, target=target)
        except InvalidHandoffError as exc:
            raise ToolException(str(exc)) from None
        request = {
            "kind": "handoff_request",
            "target": target,
            "briefing": briefing.strip(),
            "reason": str(reason or ""),
            "payload": data,
        }
        return f"Handing the conversation to {target}.", {MESSAGE_MARK: request}

    desc = description or f"the {target} agent"
    return _HandoffTool.from_function(
        func=transfer,
        name=tool_name,
        description=(
            f"Hand the conversation to the {target} agent ({desc}). Use it when the request belongs there. "
            "After calling it, stop: the other agent continues with the user."
        ),
        args_schema=_args_schema(target, payload_schema),
        response_format="content_and_artifact",
        handle_tool_error=True,
        metadata={MESSAGE_MARK: {"handoff_target": target}},
    )


class _HandoffTool(StructuredTool):
    """A ``StructuredTool`` that passes only its own three arguments to the function: models
    sometimes add keys of their own, and a stray key (even ``"self"``) must not crash the run."""

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        _args, kwargs = super()._to_args_and_kwargs(tool_input, tool_call_id)
        return (), {k: v for k, v in kwargs.items() if k in ("briefing", "reason", "payload")}


def handoff_request_of(message: BaseMessage) -> dict[str, Any] | None:
    """The request a successful handoff ToolMessage carries, else ``None``."""
    if not isinstance(message, ToolMessage) or message.status == "error":
        return None
    art = message.artifact
    if isinstance(art, dict) and isinstance(art.get(MESSAGE_MARK), dict):
        req: dict[str, Any] = art[MESSAGE_MARK]
        if req.get("kind") == "handoff_request":
            return req
    return None


def pending_handoff_calls(messages: Sequence[BaseMessage]) -> list[tuple[str, dict[str, Any]]]:
    """``(tool_call_id, request)`` for each successful handoff answering the *last* assistant
    message, in the order the model made the calls (so "first handoff wins" is deterministic)."""
    results: dict[str, dict[str, Any]] = {}
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, ToolMessage):
            req = handoff_request_of(msg)
            if req is not None:
                results[msg.tool_call_id] = req
            continue
        if isinstance(msg, AIMessage):
            return [(c["id"] or "", results[c["id"] or ""]) for c in msg.tool_calls if (c["id"] or "") in results]
        return []
    return []


def handoff_pending(messages: Sequence[BaseMessage]) -> bool:
    """True once a handoff tool has succeeded in the latest tool step: the agent loop must stop.

    Use it as the exit test after your tool node in a hand-built agent loop, e.g.
    ``graph.add_conditional_edges("tools", lambda s: END if handoff_pending(s["messages"]) else "model")``.
    """
    return bool(pending_handoff_calls(messages))


def handoff_tools(targets: Sequence[Any]) -> list[BaseTool]:
    """One handoff tool per :class:`~langgraph_handoff.handoff.graph.HandoffAgent` (or name)."""
    tools = []
    for t in targets:
        if isinstance(t, str):
            tools.append(create_handoff_tool(t))
        else:
            tools.append(
                create_handoff_tool(
                    t.name, description=t.description, payload_schema=t.payload_schema, enabled=t.enabled
                )
            )
    return tools
