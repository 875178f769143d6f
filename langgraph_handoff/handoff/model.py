"""The ``Handoff`` record: who passed the conversation to whom, why, and what the receiver needs.

It is a pydantic model so it is validated when created, persists in checkpoints through
LangGraph's serializer (it is declared in the graph state, so strict msgpack mode allowlists it
automatically), and can be logged or exported as JSON. The receiving agent sees it as a message
(:meth:`Handoff.to_message`), not just as state: a briefing nobody reads is no briefing.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from langgraph_handoff._model import Model
from langgraph_handoff.errors import InvalidHandoffError

Trigger = Literal["tool", "node", "route", "breaker", "transfer", "takeover"]

#: ``(module, class)`` pairs to add to a strict ``JsonPlusSerializer`` allowlist if you store these
#: records outside a graph built by :func:`create_handoff_graph` (which declares them in its state).
SERDE_ALLOWLIST = (
    ("langgraph_handoff.handoff.model", "Handoff"),
    ("langgraph_handoff.routing.decision", "RouteDecision"),
)

#: ``response_metadata`` key that marks the messages this package adds to a conversation.
MESSAGE_MARK = "langgraph_handoff"


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Handoff(Model):
    """One transfer of the conversation from ``source`` to ``target``.

    - ``briefing``: what the receiver must know: why it got the task, what is known, what to do next.
    - ``payload``: structured data, already validated against the target's ``payload_schema``.
    - ``chain``: the agents that held this user turn so far, ending with ``target``.
    - ``hop``: how many handoffs this user turn has made, this one included.
    - ``check``: what the briefing check said (:class:`~langgraph_handoff.handoff.BriefingCheck`),
      and ``audit``: whether the handoff was picked for a person to check (``audit=`` on the graph).
    - ``trigger``: ``tool`` (an LLM called a handoff tool), ``node`` (code returned a request),
      ``route`` (the entry router picked the first agent), ``breaker`` (a circuit breaker sent
      the conversation to the fallback; ``reason`` says which), or, between *workers*,
      ``transfer`` (a planned handoff of the session) and ``takeover`` (a worker died).

    >>> h = Handoff(source="after_sales", target="orders", briefing="Customer wants to swap the colour.",
    ...             payload={"order_id": "A-1001"}, chain=["after_sales", "orders"], hop=1)
    >>> print(h.to_message().content)
    [Handoff from after_sales to orders]
    Briefing: Customer wants to swap the colour.
    Payload: {"order_id": "A-1001"}
    """

    model_config = ConfigDict(frozen=True)
    invalid_error = InvalidHandoffError

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    source: str | None
    target: str
    briefing: str = ""
    payload: dict[str, Any] | None = None
    reason: str = ""
    chain: list[str] = Field(default_factory=list)
    hop: int = 0
    trigger: Trigger = "tool"
    tool_call_id: str | None = None
    created_at: datetime = Field(default_factory=_now)
    #: the briefing check's verdict (``{"ok", "by", "reason", "matched"}``), when one ran
    check: dict[str, Any] | None = None
    #: picked for audit (:mod:`langgraph_handoff.handoff.audit`)
    audit: bool = False

    @field_validator("target")
    @classmethod
    def _target_ok(cls, v: str) -> str:
        if not v or not v.strip():
            raise ValueError("a handoff needs a non-empty target")
        return v

    def render(self) -> str:
        """The text the receiving agent reads."""
        lines = [f"[Handoff from {self.source or 'the user'} to {self.target}]"]
        if self.reason:
            lines.append(f"Reason: {self.reason}")
        if self.briefing:
            lines.append(f"Briefing: {self.briefing}")
        if self.payload:
            lines.append("Payload: " + json.dumps(self.payload, ensure_ascii=False, sort_keys=True, default=str))
        return "\n".join(lines)

    def to_message(self) -> BaseMessage:
        """A ``HumanMessage`` carrying :meth:`render`, marked so tools can recognise it.

        A human-role message is the one every chat provider accepts anywhere in a conversation
        (a system message mid-history or a trailing assistant message is rejected by some). Its id
        is derived from the handoff id, so re-delivering the same handoff never duplicates it.
        """
        return HumanMessage(
            content=self.render(),
            id=f"handoff-{self.id}",
            name="handoff",
            response_metadata={MESSAGE_MARK: {"kind": "handoff", "handoff_id": self.id, "target": self.target}},
        )


def validate_payload(schema: type[BaseModel] | None, payload: Any, *, target: str) -> dict[str, Any] | None:
    """Check ``payload`` against ``schema`` and return it as JSON-ready data.

    Raises :class:`InvalidHandoffError` with every field error spelled out, so an LLM that made
    the mistake can read the message and correct its call.

    >>> from pydantic import BaseModel
    >>> class Order(BaseModel):
    ...     order_id: str
    >>> validate_payload(Order, {"order_id": "A-1"}, target="orders")
    {'order_id': 'A-1'}
    >>> validate_payload(Order, {}, target="orders")
    Traceback (most recent call last):
    langgraph_handoff.errors.InvalidHandoffError: payload for 'orders' is invalid: order_id: Field required (got {}). ...
    """
    if schema is None:
        if payload is None or isinstance(payload, dict):
            return payload
        raise InvalidHandoffError(
            f"payload for {target!r} must be an object (a JSON dict), got {type(payload).__name__}"
        )
    # dumped by alias, so the stored payload validates again (the router re-checks it)
    if isinstance(payload, schema):
        return payload.model_dump(mode="json", by_alias=True)
    try:
        return schema.model_validate(payload if payload is not None else {}).model_dump(mode="json", by_alias=True)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(payload)'}: {err['msg']}" for err in exc.errors()
        )
        raise InvalidHandoffError(
            f"payload for {target!r} is invalid: {problems} (got {json.dumps(payload, default=str)}). "
            f"Call the tool again with a payload matching this JSON schema: {json.dumps(schema.model_json_schema())}"
        ) from None


def is_handoff_message(message: BaseMessage) -> bool:
    """True for the briefing messages :meth:`Handoff.to_message` creates."""
    mark = (message.response_metadata or {}).get(MESSAGE_MARK)
    return isinstance(mark, dict) and mark.get("kind") == "handoff"
