"""Who a turn owes an answer, and how the worker pays it and delivers what agents sent.

Used by :class:`~langgraph_handoff.teams.TeamWorker` after each committed turn and after a
takeover. The rules themselves are pure (:mod:`teams.chains`); this module applies them to a
member's committed state:

* a turn's *note*, committed with its input: what was delivered, who is owed an answer, the turn's
  chain, and whose messages it heard (which ends waiting for them);
* paying what is owed: the final answer of a turn that ends awaiting nobody, as an
  ``auto_reply`` recorded in the outbox by one fenced update (a worker that dies before or after
  it neither loses nor doubles the reply: the next owner finds the obligation or the entry);
* the outbox entries not delivered yet, as messages (answers to outside requesters marked).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage
from langgraph.errors import InvalidUpdateError

from langgraph_handoff import telemetry
from langgraph_handoff.teams.chains import Chain, chain_of, owes_reply
from langgraph_handoff.teams.model import Member, Message, message_id, next_order
from langgraph_handoff.teams.outbox import OUTBOX_CHANNEL, _stream_key, stream_name
from langgraph_handoff.teams.views import last_turn_inputs

if TYPE_CHECKING:
    from langgraph_handoff.ownership.lease import Lease
    from langgraph_handoff.teams.team import Team

__all__ = ["deliverable", "final_answer", "owed_by", "pay_owed", "state_chain", "turn_note", "update_state"]


def owed_by(team: Team, me: str, ready: Sequence[Message], enabled: bool = True) -> dict[str, Any]:
    """Who a turn ingesting ``ready`` owes an automatic reply (:func:`teams.chains.owes_reply`):
    a member by name -> the id of its last message; an outside requester by
    ``"outside:<request id>"`` -> ``{"to": requester, "id": request id}`` (each request its own)."""
    if not enabled:
        return {}
    members = team.roster(refresh=False).members
    owed: dict[str, Any] = {}
    for m in ready:
        if not owes_reply(m, me, members):
            continue
        if m.sender in members:
            owed[m.sender] = m.id
        else:
            owed[f"outside:{m.id}"] = {"to": m.sender, "id": m.id}
    return owed


def turn_note(delivered: dict[str, int], owed: dict[str, Any], ready: Sequence[Message]) -> dict[str, Any]:
    """The outbox note committed with a turn's input (see :mod:`teams.outbox`)."""
    return {"dispatched": dict(delivered), "owe": owed, "chain": chain_of(ready).as_dict(),
            "heard": sorted({m.sender for m in ready})}  # fmt: skip


def state_chain(values: dict[str, Any]) -> Chain:
    """The chain of the member's last turn, from its committed state: the outbox records it; a
    graph without an outbox has it in its last ingested messages."""
    box = values.get(OUTBOX_CHANNEL)
    if isinstance(box, dict) and box.get("chain"):
        return Chain.from_dict(box["chain"])
    return chain_of(last_turn_inputs(list(values.get("messages") or [])))


def awaited(team: Team, values: dict[str, Any]) -> list[str]:
    """The teammates this member still waits to hear from (removed or failed ones do not count:
    they will not answer)."""
    box = values.get(OUTBOX_CHANNEL) or {}
    members = team.roster(refresh=False).members
    return sorted(n for n in box.get("awaiting") or {} if n in members and members[n].state != "failed")


def pay_owed(team: Team, member: Member, graph: Any, cfg: dict[str, Any], values: dict[str, Any] | None) -> bool:
    """Record, in the outbox, the automatic replies the committed state owes, if the member
    awaits nobody: the last turn's final answer to each one owed. Returns whether it did."""
    if values is None:
        values = graph.get_state(cfg).values
    owed = (values.get(OUTBOX_CHANNEL) or {}).get("owed") or {}
    if not owed or awaited(team, values):
        return False
    final = final_answer(values.get("messages") or []) or f"[{member.name} ended its turn without an answer]"
    entries = []
    for key, value in sorted(owed.items()):
        outside = isinstance(value, dict)
        to, trigger = (value["to"], value["id"]) if outside else (key, value)
        stream = f"{member.name}@{member.incarnation}>outside:{to}" if outside else stream_name(team, member.name, to)
        entries.append({"id": message_id(team.team_id, member.name, "auto", trigger), "to": to, "content": final,
                        "type": "auto_reply", "reply_to": trigger, "created_at": team.clock(), "stream": stream,
                        "pays": key, "outside": outside})  # fmt: skip
    update_state(graph, cfg, {OUTBOX_CHANNEL: entries})
    return True


def deliverable(
    team: Team, member: Member, lease: Lease, values: dict[str, Any], marks: dict[str, int]
) -> tuple[list[Message], set[str], list[dict[str, Any]]]:
    """The committed outbox entries past ``marks`` (what this worker delivered) as messages, the
    ids among them that answer outside requesters, and the entries themselves."""
    box = values.get(OUTBOX_CHANNEL) or {}
    todo = [e for e in box.get("pending", []) if e["seq"] > marks.get(_stream_key(e), 0)]
    messages = [
        Message(id=e["id"], team=team.team_id, sender=member.name, to=e["to"], content=e["content"],
                type=e.get("type") or "message", reply_to=e.get("reply_to"), seq=e["seq"],
                stream=e.get("stream") or f"{member.name}@{member.incarnation}", order=next_order(team.clock),
                created_at=float(e.get("created_at") or 0.0), sender_epoch=lease.epoch,
                conversation=e.get("conversation"), hop=int(e.get("hop") or 0), causes=dict(e.get("causes") or {}),
                expects_reply=e.get("expects_reply"), origins=dict(e.get("origins") or {}),
                traceparent=telemetry.current_traceparent())
        for e in todo
    ]  # fmt: skip
    return messages, {e["id"] for e in todo if e.get("outside")}, todo


def direct_replies(team: Team, member: Member, owed: dict[str, Any], result: Any, graph: Any, cfg: dict[str, Any],
                   ready: Sequence[Message]) -> None:  # fmt: skip
    """Automatic replies of a graph without an outbox: direct sends named by the trigger, one hop
    further than the turn, budget-checked like any delivery."""
    values = result if isinstance(result, dict) else {}
    final = final_answer(values.get("messages") or graph.get_state(cfg).values.get("messages") or [])
    chain = chain_of(ready)
    messages, outside = [], set()
    for key, value in owed.items():
        is_out = isinstance(value, dict)
        to, trigger = (value["to"], value["id"]) if is_out else (key, value)
        mid = team.keyed_id(to, member.name, f"auto:{trigger}")
        messages.append(Message(id=mid, team=team.team_id, sender=member.name, to=to, type="auto_reply",
                                content=final or f"[{member.name} ended its turn without an answer]",
                                reply_to=trigger, order=next_order(team.clock), created_at=team.clock(),
                                idempotency_key=f"auto:{trigger}", traceparent=telemetry.current_traceparent(),
                                **chain.next()))  # fmt: skip
        if is_out:
            outside.add(mid)
    team.deliver(messages, outside=outside)


def update_state(graph: Any, cfg: dict[str, Any], values: dict[str, Any]) -> None:
    """Record ``values`` in one fenced checkpoint (``update_state``). When the last step ran
    several nodes in parallel LangGraph cannot tell which one the update comes from; any of them
    will do (they all ended the run), so name the first."""
    try:
        graph.update_state(cfg, values)
    except InvalidUpdateError:
        seen = graph.checkpointer.get_tuple(cfg).checkpoint.get("versions_seen") or {}
        last = {n: max(v.values(), default=None) for n, v in seen.items() if n in graph.nodes and v}
        top = max((v for v in last.values() if v is not None), default=None)
        node = sorted(n for n, v in last.items() if v == top)[0]
        graph.update_state(cfg, values, as_node=node)


def final_answer(messages: Sequence[Any]) -> str | None:
    """The text of the last assistant message, if the turn ended with one (not a tool call)."""
    for m in reversed(messages):
        if isinstance(m, AIMessage):
            if m.tool_calls:
                return None
            content = m.content
            if not isinstance(content, str):  # content blocks: keep the text ones
                content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
            return content or None
    return None
