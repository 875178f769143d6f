"""How an agent sends: the transactional outbox, and the tools that write to it.

An agent's ``send_message`` does not PUT anything. It appends an entry to the ``team_outbox``
state channel and answers "queued". The entry is stored with the step's checkpoint, and the
:class:`~langgraph_handoff.teams.TeamWorker` delivers it only after that checkpoint committed. So:

* a superseded worker (a zombie) never delivers: its checkpoint put is refused, so its outbox
  never existed;
* a worker that dies after the commit and before delivery loses nothing: the next owner finds the
  entry in the committed state and delivers it;
* a delivery repeated by two workers is harmless: the message object is create-only under a
  deterministic id, and the recipient remembers each stream's highest ``seq`` for good.

The reducer numbers entries densely per recipient (``seq``). It is deterministic for a given
parent checkpoint: LangGraph applies a step's writes in task order, so two ``send_message`` calls
in one model turn get the same numbers on every replay.

Channel value::

    {"next": {recipient: last seq}, "pending": [entry, ...], "owed": {member: message id},
     "chain": {conversation, hop, causes, origins}, "awaiting": {member: message id}}

An update is a list of new entries, or a dict of the worker's notes: ``"dispatched": {recipient:
seq}`` (everything up to ``seq`` was delivered: those entries are dropped), ``"owe": {member:
message id}`` (members owed an automatic reply by this turn; an outside requester is owed under
``"outside:<request id>"`` with ``{"to", "id"}``), ``"chain"`` (the turn's chain,
:mod:`teams.chains`) and ``"heard": [member, ...]`` (the senders this turn ingested).

Any entry to a member pays what is owed to it, so a reply the agent sent itself cancels the
automatic one. Each new entry is stamped with the turn's chain (one hop further), in the reducer,
so a replayed step stamps the same. An entry that asks a teammate something (see
:func:`teams.chains.asks_for_answer`) makes the member *await* that teammate until a message from
it is ingested; the automatic reply the member owes waits until it awaits nobody, so a lead that
delegates answers its requester once its teammates answered, not with "delegated, waiting".
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any, Literal

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.graph import MessagesState
from langgraph.types import Command
from pydantic import BaseModel, Field, create_model
from typing_extensions import NotRequired

from langgraph_handoff.errors import UnknownRecipientError
from langgraph_handoff.teams.chains import Chain, asks_for_answer
from langgraph_handoff.teams.model import message_id

if TYPE_CHECKING:
    from langgraph_handoff.teams.team import Team

__all__ = ["OUTBOX_CHANNEL", "TURN_KEY", "TeamMiddleware", "TeamState", "outbox_reducer", "team_tools"]

OUTBOX_CHANNEL = "team_outbox"
#: ``config["configurable"][TURN_KEY]``: the token of the turn the worker is running
TURN_KEY = "team_turn"
#: ``config["configurable"][CHAIN_KEY]``: the turn's chain (``Chain.as_dict``), for sends that do
#: not go through the outbox (``mode="immediate"``)
CHAIN_KEY = "team_chain"


def _stream_key(entry: dict[str, Any]) -> str:
    return str(entry.get("stream") or entry["to"])


def outbox_reducer(current: dict[str, Any] | None, update: Any) -> dict[str, Any]:
    """Append entries with dense numbers per stream, or apply the worker's notes.

    A stream is ``sender@incarnation>recipient@incarnation``: a member spawned again (or a
    recipient removed and spawned again) starts a new stream at 1, so no recipient ever waits for
    a number that went to a dead letter or to a former incarnation.

    >>> box = outbox_reducer({}, [{"to": "a", "stream": "x>a"}, {"to": "b", "stream": "x>b"}])
    >>> box = outbox_reducer(box, [{"to": "a", "stream": "x>a"}])
    >>> [(e["to"], e["seq"]) for e in box["pending"]]
    [('a', 1), ('b', 1), ('a', 2)]
    >>> [(e["to"], e["seq"]) for e in outbox_reducer(box, {"dispatched": {"x>a": 1}})["pending"]]
    [('b', 1), ('a', 2)]
    >>> outbox_reducer(outbox_reducer({}, {"owe": {"a": "m7", "b": "m8"}}), [{"to": "a"}])["owed"]
    {'b': 'm8'}
    >>> box = outbox_reducer({}, {"chain": {"conversation": "m0", "hop": 2, "causes": {"a": "m2"}}})
    >>> box = outbox_reducer(box, [{"to": "b", "id": "q", "type": "message"}])
    >>> box["pending"][0]["hop"], box["awaiting"]
    (3, {'b': 'q'})
    >>> outbox_reducer(box, {"heard": ["b"]})["awaiting"]
    {}
    """
    current = current or {}
    nxt = dict(current.get("next") or {})
    pending = list(current.get("pending") or [])
    owed = dict(current.get("owed") or {})
    chain_raw = dict(current.get("chain") or {})
    awaiting = dict(current.get("awaiting") or {})
    for item in update if isinstance(update, list) else [update]:
        if not item:
            continue
        if "to" not in item:  # the worker's notes
            marks = item.get("dispatched") or {}
            pending = [e for e in pending if e["seq"] > int(marks.get(_stream_key(e), 0))]
            owed.update(item.get("owe") or {})
            if "chain" in item:
                chain_raw = dict(item["chain"] or {})
            for sender in item.get("heard") or ():
                awaiting.pop(sender, None)
            continue
        key = _stream_key(item)
        seq = int(nxt.get(key, 0)) + 1
        nxt[key] = seq
        chain = Chain.from_dict(chain_raw)
        entry = {**chain.next(), **item, "seq": seq}  # an entry stamped already keeps its chain
        pending.append(entry)
        owed.pop(item.get("pays") or item["to"], None)
        if entry.get("type") in ("message", "broadcast") and asks_for_answer(
            item["to"], chain, item.get("reply_to"), item.get("expects_reply")
        ):
            awaiting[item["to"]] = item.get("id")
    return {"next": nxt, "pending": pending, "owed": owed, "chain": chain_raw, "awaiting": awaiting}


def stream_name(team: Team, sender: str, to: str) -> str:
    """``sender@incarnation>to@incarnation`` from the roster as ``team`` last saw it."""
    roster = team.roster(refresh=False)
    a, b = roster.members.get(sender), roster.members.get(to)
    return f"{sender}@{a.incarnation if a else '-'}>{to}@{b.incarnation if b else '-'}"


class TeamState(MessagesState):
    """``MessagesState`` plus the outbox: the state of a team member's own ``StateGraph``."""

    team_outbox: Annotated[dict[str, Any], outbox_reducer]


def _entry(
    to: str, content: str, kind: str, reply_to: str | None, msg_id: str, config: RunnableConfig | None, stream: str,
    expects_reply: bool | None = None,
) -> dict[str, Any]:  # fmt: skip
    turn = ((config or {}).get("configurable") or {}).get(TURN_KEY)
    return {"id": msg_id, "to": to, "content": content, "type": kind, "reply_to": reply_to,
            "turn": turn, "created_at": time.time(), "stream": stream, "expects_reply": expects_reply}  # fmt: skip


def config_chain(config: RunnableConfig | None) -> Chain:
    """The chain of the turn a tool runs in (hop 0 outside a worker's turn)."""
    return Chain.from_dict(((config or {}).get("configurable") or {}).get(CHAIN_KEY))


def _message_ref(value: str | None) -> str | None:
    """Models write ids as they read them (``#m12``): the id is what follows the ``#``."""
    value = (value or "").strip().lstrip("#").strip()
    return value or None


def team_tools(team: Team, me: str, *, mode: Literal["outbox", "immediate"] = "outbox") -> list[BaseTool]:
    """The tools a teammate's model uses: ``send_message``, ``broadcast`` and ``list_teammates``.

    ``to`` is an enum of the roster (without ``me``) as it was when the tools were made, and is
    checked again against the roster at call time, so a misspelt or removed name is a tool error
    the model reads and corrects: no phantom inbox is created. Sending never blocks: the reply
    arrives later as a new message, after the agent ended its turn.

    ``mode="outbox"`` (default) records the send in the checkpoint; the worker delivers it after
    the commit (see this module). ``mode="immediate"`` PUTs inside the tool, named by the tool
    call id: lower latency, but a dead worker's redone model call can send a second time.

    >>> from langgraph_handoff import ObjectStoreSaver
    >>> from langgraph_handoff.teams import Team
    >>> team = Team(ObjectStoreSaver.from_url("memory://"), "demo")
    >>> _ = team.spawn("lead", role="lead"); _ = team.spawn("alice", role="coder")
    >>> [t.name for t in team_tools(team, "lead")]
    ['send_message', 'broadcast', 'list_teammates']
    """
    others = [n for n in team.roster_names() if n != me]
    # An enum of the roster: a misspelt name fails validation with the valid names, as a tool
    # error. The tool checks again at call time, so a member removed since is refused too
    # (TeamWorker rebuilds its graphs, and so these tools, whenever the roster changes).
    ToType: Any = Literal[tuple(others)] if others else str

    send_args = create_model(
        "SendMessage",
        to=(ToType, Field(description="The teammate to message (exact name from list_teammates).")),
        content=(str, Field(description="What you want them to know or do. They see only this text.")),
        reply_to=(str | None, Field(default=None, description="The #id of the message you answer, if any.")),
        expects_reply=(bool | None, Field(default=None, description=(
            "Leave unset: a new request is answered, and an answer (a reply to their message) is not. Set true "
            "to get an answer to a follow-up question; false for a note that needs none."))),
        tool_call_id=(Annotated[str, InjectedToolCallId], ...),
    )  # fmt: skip

    def _check(to: str) -> str | None:
        if to == me:
            return "Error: you cannot message yourself."
        try:
            team.check_recipient(to)
        except UnknownRecipientError as exc:
            return f"Error: {exc}"
        return None

    def send_message(to: str, content: str, tool_call_id: str, reply_to: str | None = None,
                     expects_reply: bool | None = None,
                     config: RunnableConfig = None) -> Any:  # type: ignore[assignment]  # fmt: skip
        error = _check(to)
        if error is not None:
            return ToolMessage(error, tool_call_id=tool_call_id, status="error")
        reply_to = _message_ref(reply_to)
        msg_id = message_id(team.team_id, me, to, tool_call_id)
        if mode == "immediate":
            team.send(to, content, sender=me, reply_to=reply_to, idempotency_key=f"tool:{tool_call_id}",
                      chain=config_chain(config), expects_reply=expects_reply)  # fmt: skip
            return ToolMessage(f"Sent to {to}. The reply will arrive as a new message; end your turn to wait for it.",
                               tool_call_id=tool_call_id)  # fmt: skip
        entry = _entry(to, content, "message", reply_to, msg_id, config, stream_name(team, me, to), expects_reply)
        return Command(update={
            OUTBOX_CHANNEL: [entry],
            "messages": [ToolMessage(
                f"Queued for {to} as #{msg_id}; it is delivered when this step is saved. The reply will arrive "
                "as a new message: end your turn to wait for it.", tool_call_id=tool_call_id)],
        })  # fmt: skip

    class BroadcastArgs(BaseModel):
        content: str = Field(description="What every teammate should know.")
        tool_call_id: Annotated[str, InjectedToolCallId]

    def broadcast(content: str, tool_call_id: str, config: RunnableConfig = None) -> Any:  # type: ignore[assignment]
        targets = [n for n in team.roster_names(refresh=True) if n != me]
        if not targets:
            return ToolMessage(
                "Error: you have no teammates to broadcast to.", tool_call_id=tool_call_id, status="error"
            )
        if mode == "immediate":
            for to in targets:
                team.send(to, content, sender=me, idempotency_key=f"tool:{tool_call_id}", kind="broadcast",
                          chain=config_chain(config))  # fmt: skip
            return ToolMessage(f"Sent to {', '.join(targets)}.", tool_call_id=tool_call_id)
        entries = [_entry(to, content, "broadcast", None, message_id(team.team_id, me, to, tool_call_id), config,
                          stream_name(team, me, to))
                   for to in targets]  # fmt: skip
        return Command(update={
            OUTBOX_CHANNEL: entries,
            "messages": [ToolMessage(f"Queued for {', '.join(targets)}.", tool_call_id=tool_call_id)],
        })  # fmt: skip

    def list_teammates() -> str:
        lines = [f"- {m.name} ({m.role}){': ' + m.description if m.description else ''}"
                 + ("" if m.state == "active" else f" [{m.state}]")
                 for m in team.members(refresh=True) if m.name != me]  # fmt: skip
        return "\n".join(lines) if lines else "You have no teammates."

    return [
        StructuredTool.from_function(send_message, name="send_message", args_schema=send_args,
                                     description="Send a message to one teammate. Never waits for the answer."),
        StructuredTool.from_function(broadcast, name="broadcast", args_schema=BroadcastArgs,
                                     description="Send the same message to every teammate."),
        StructuredTool.from_function(list_teammates, name="list_teammates",
                                     description="List your teammates: name, role and what they do."),
    ]  # fmt: skip


def TeamMiddleware(team: Team, me: str, *, mode: Literal["outbox", "immediate"] = "outbox",
                   prompt: bool = True) -> Any:  # fmt: skip
    """Middleware for ``langchain.agents.create_agent``: the team tools, the outbox channel, and
    (``prompt=True``) the team prompt (:func:`~langgraph_handoff.teams.team_prompt`: who the agent
    is, its role, its teammates and how messages work) appended to the system prompt of every
    model call. Without it a model does not know its own name, so it cannot tell which messages
    are its own or whom to answer.

    ``pip install langchain`` is needed for this one function; nothing else here imports it.

    Example (inside a ``TeamWorker`` build, which gets the member)::

        def coder(checkpointer, member):
            return create_agent(model, tools=[run_tests], middleware=[member.middleware()],
                                checkpointer=checkpointer)
    """
    from langchain.agents.middleware import AgentMiddleware, AgentState
    from langchain_core.messages import SystemMessage

    from langgraph_handoff.teams.context import team_prompt

    class TeamAgentState(AgentState):
        team_outbox: NotRequired[Annotated[dict[str, Any], outbox_reducer]]

    def with_prompt(request: Any) -> Any:
        if not prompt:
            return request
        current = request.system_message.text if request.system_message is not None else ""
        text = (current + "\n\n" if current else "") + team_prompt(team, me)
        return request.override(system_message=SystemMessage(content=text))

    class _TeamMiddleware(AgentMiddleware):
        state_schema = TeamAgentState

        def __init__(self) -> None:
            super().__init__()
            self.tools = team_tools(team, me, mode=mode)

        @property
        def name(self) -> str:
            return "TeamMiddleware"

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(with_prompt(request))

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(with_prompt(request))

    return _TeamMiddleware()
