"""Team conversations always end (``teams.chains``): an answer is not answered automatically,
and every conversation has a hop budget whose breach is a typed event for the lead and for an
outside requester. The randomized check of many agent policies is ``tests/teams/test_team_policy_check.py``."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import envelope
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff.errors import HopBudgetExceededError, InvalidInputError
from langgraph_handoff.stores import MemoryStore
from langgraph_handoff.teams import HopBudgetExceeded, Team, TeamWorker
from langgraph_handoff.teams.chains import DEFAULT_MAX_HOPS
from langgraph_handoff.teams.model import Message, decode_message
from langgraph_handoff.teams.outbox import outbox_reducer
from tests.support.team_harness import FunctionChatModel, _incoming
from tests.support.team_helpers import echo_build, ingested, react_graph


def make_team(**kw: Any) -> Team:
    return Team(ObjectStoreSaver(MemoryStore()), "t", **kw)


def talker(answer_with_reply_to: bool = False, first_to: str = "bob") -> Any:
    """An agent that answers every team message with an explicit ``send_message`` to its sender
    (one from outside the team goes to ``first_to``), and prints "sent" at the end of its turn."""

    def build(checkpointer: Any, member: Any) -> Any:
        calls = [0]

        def step(messages: list[BaseMessage]) -> AIMessage:
            if messages[-1].type == "tool":
                return AIMessage("sent")
            out = []
            for m in _incoming(messages):
                env = m.additional_kwargs["team_message"]
                if env["type"] == "event":
                    continue
                calls[0] += 1
                to = env["sender"] if env["sender"] in ("alice", "bob", "lead") else first_to
                args = {"to": to, "content": f"{member.name} says {calls[0]}"}
                if answer_with_reply_to and to == env["sender"]:
                    args["reply_to"] = env["id"]
                out.append({"name": "send_message", "args": args, "id": f"{member.name}-{calls[0]}",
                            "type": "tool_call"})  # fmt: skip
            return AIMessage("", tool_calls=out) if out else AIMessage("nothing to answer")

        return react_graph(checkpointer, FunctionChatModel([step]), member.tools())

    return build


def run_until_quiet(worker: TeamWorker, team: Team, limit: int) -> int:
    """Step until a step ingests nothing and every inbox is empty; the number of busy steps.
    Fails if that takes more than ``limit`` steps (the conversation did not end)."""
    for busy in range(limit):
        if worker.step() == 0 and not any(team.inbox(n) for n in team.roster_names()):
            return busy
    raise AssertionError(f"still busy after {limit} steps: the conversation did not end")


def test_an_explicit_answer_to_an_automatic_reply_is_not_answered_again() -> None:
    """The reported loop: alice answers every message with send_message, bob only prints (its
    final answer is its automatic reply). Before the fix: 60 messages in 30 steps, without end."""
    team = make_team()
    team.spawn("alice", role="talker")
    team.spawn("bob", role="printer")
    worker = TeamWorker(team, "w", {"talker": talker(), "printer": echo_build})
    team.send("alice", "start", sender="human")
    assert run_until_quiet(worker, team, limit=10) <= 4
    to_bob = ingested(team.saver, team, "bob")
    to_alice = ingested(team.saver, team, "alice")
    # alice -> bob (new: bob owes an answer); bob's auto-reply -> alice; alice answers it -> bob,
    # which is an answer to bob's own message: bob owes nothing, and the exchange ends
    assert [(g["sender"], g["type"], g["hop"]) for g in to_bob] == [("alice", "message", 1), ("alice", "message", 3)]
    assert [(g["sender"], g["type"], g["hop"]) for g in to_alice] == [("human", "message", 0), ("bob", "auto_reply", 2)]
    assert to_bob[1]["causes"] == {"bob": to_alice[1]["id"]}
    assert {g["conversation"] for g in to_bob + to_alice[1:]} == {to_alice[0]["id"]}


def test_a_message_that_replies_is_not_answered_automatically() -> None:
    team = make_team()
    team.spawn("alice", role="echo")
    team.spawn("bob", role="echo")
    worker = TeamWorker(team, "w", {"echo": echo_build}, members=["bob"])
    team.send("bob", "here is what you asked for", sender="alice", reply_to="m0")
    asked = team.send("bob", "and a new question", sender="alice")
    assert worker.step() == 2
    [reply] = team.inbox("alice")
    assert (reply.type, reply.reply_to) == ("auto_reply", asked.id)  # owed for the question only


def test_a_follow_up_that_asks_for_an_answer_gets_one() -> None:
    """A follow-up sent in answer to a teammate's answer is answered if it says so
    (``expects_reply=True``): how a lead asks for round two."""
    team = make_team()
    team.spawn("lead", role="echo")
    team.spawn("bob", role="echo")
    worker = TeamWorker(team, "w", {"echo": echo_build}, members=["bob"])
    team.send("bob", "thanks", sender="lead", reply_to="m0")
    assert worker.step() == 1 and team.inbox("lead") == []
    follow = team.send("bob", "now round two", sender="lead", reply_to="m1", expects_reply=True)
    assert worker.step() == 1
    assert [(m.type, m.reply_to) for m in team.inbox("lead")] == [("auto_reply", follow.id)]


def lead_that_reacts(checkpointer: Any, member: Any) -> Any:
    """A lead that answers a budget event by telling alice to stop (a reaction the budget drops)."""

    def step(messages: list[BaseMessage]) -> AIMessage:
        if messages[-1].type == "tool":
            return AIMessage("told alice")
        events = [m for m in _incoming(messages) if m.additional_kwargs["team_message"]["type"] == "event"]
        if not events:
            return AIMessage("ok")
        return AIMessage("", tool_calls=[{"name": "send_message", "args": {"to": "alice", "content": "stop it"},
                                          "id": f"stop-{len(messages)}", "type": "tool_call"}])  # fmt: skip

    return react_graph(checkpointer, FunctionChatModel([step]), member.tools())


def test_two_agents_that_always_answer_stop_at_the_hop_budget_and_the_lead_gets_one_event() -> None:
    team = make_team(max_hops=6)
    team.spawn("lead", role="lead", lead=True)
    team.spawn("alice", role="talker")
    team.spawn("bob", role="talker")
    worker = TeamWorker(team, "w", {"lead": lead_that_reacts, "talker": talker(answer_with_reply_to=True)})
    start = team.send("alice", "start", sender="human")
    run_until_quiet(worker, team, limit=20)
    talk = [g for n in ("alice", "bob") for g in ingested(team.saver, team, n) if g["sender"] != "human"]
    assert sorted(g["hop"] for g in talk) == [1, 2, 3, 4, 5, 6]  # nothing past the budget was delivered
    assert all(g["conversation"] == start.id for g in talk)
    [event] = ingested(team.saver, team, "lead")
    record = HopBudgetExceeded.from_message(Message.from_data(event))
    assert record is not None
    assert (record.conversation, record.hop, record.max_hops, record.sender, record.to) == (
        start.id,
        7,
        6,
        "alice",
        "bob",
    )
    assert "hop budget (6)" in event["content"] and "max_hops" in event["content"]
    # the lead's reaction (hop 8) was dropped without a second event: the breaker cannot loop
    assert "stop it" not in [g["content"] for g in ingested(team.saver, team, "alice")]
    assert worker.step() == 0 and team.inbox("lead") == []


def test_an_outside_requester_learns_at_once_that_its_conversation_was_cut() -> None:
    """alice asks bob before answering ops; bob's answer (hop 2) is past a budget of 1, so alice
    never hears back and owes ops forever: ops gets the event instead of waiting for its timeout."""
    team = make_team(max_hops=1)
    team.spawn("alice", role="talker")
    team.spawn("bob", role="talker")
    worker = TeamWorker(team, "w", {"talker": talker(answer_with_reply_to=True)})
    ask = team.send("alice", "start", sender="ops", expects_reply=True)
    run_until_quiet(worker, team, limit=20)
    with pytest.raises(HopBudgetExceededError, match=r"hop budget \(1\)") as info:
        team.wait_reply(ask, timeout=0)
    assert isinstance(info.value.event, HopBudgetExceeded) and info.value.event.conversation == ask.id
    assert team.replies("ops") == []  # collected
    # no lead on this team: the sender of the cut message is told too, so someone inside knows
    assert [g["type"] for g in ingested(team.saver, team, "alice") if g["sender"] == "bob"][-1] == "event"


def test_the_budget_is_configurable_with_a_sensible_default() -> None:
    assert DEFAULT_MAX_HOPS == 16 and make_team().max_hops == 16
    with pytest.raises(InvalidInputError, match="max_hops"):
        make_team(max_hops=0)


# -- the stored format: backward compatible ----------------------------------------------------------


#: a message as the code before the chain fields stored it (every field it knew, none of the new)
OLD_MESSAGE = {
    "id": "0123456789abcdef0123", "team": "t", "sender": "alice", "to": "bob", "content": "old hello",
    "type": "message", "reply_to": None, "seq": None, "stream": None, "order": 5, "created_at": 1.0,
    "idempotency_key": "k", "sender_epoch": None, "data": {},
}  # fmt: skip


def test_messages_stored_before_the_chain_fields_are_read_as_the_start_of_a_conversation() -> None:
    """Backward compatible (no format step): an old message reads as hop 0 of its own
    conversation, and is ingested and answered as before."""
    team = make_team()
    team.spawn("alice", role="echo")
    team.spawn("bob", role="echo")
    body = envelope.encode_msgpack(Kind.TEAM_MESSAGE, OLD_MESSAGE)
    old = decode_message(body, key="k")
    assert (old.hop, old.conversation_id, old.causes, old.expects_reply, old.origins) == (
        0,
        OLD_MESSAGE["id"],
        {},
        None,
        {},
    )
    team.store.put(f"teams/t/inbox/bob/{OLD_MESSAGE['id']}", body, if_none_match=True)
    worker = TeamWorker(team, "w", {"echo": echo_build}, members=["bob"])
    assert worker.step() == 1
    [reply] = team.inbox("alice")
    assert (reply.reply_to, reply.hop, reply.conversation_id) == (OLD_MESSAGE["id"], 1, OLD_MESSAGE["id"])


def test_an_outbox_written_before_the_chain_fields_keeps_working() -> None:
    old = {"next": {"a": 1}, "pending": [{"to": "a", "id": "1", "seq": 1, "stream": "a"}], "owed": {"b": "m8"}}
    box = outbox_reducer(old, [{"to": "a", "id": "2", "stream": "a", "type": "message"}])
    assert [(e["id"], e["seq"], e.get("hop")) for e in box["pending"]] == [("1", 1, None), ("2", 2, 1)]
    assert box["owed"] == {"b": "m8"} and box["awaiting"] == {"a": "2"}
