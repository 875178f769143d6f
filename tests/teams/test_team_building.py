"""Teams a user can build on: builds get the member, the agent is told who it is, an outside
requester waits for the answer, conversations read from the first checkpoint, a default
capacity that spreads a fleet, statuses that are true after a clean stop, poison steps discarded."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import (
    InvalidInputError,
    ReplyTimeoutError,
    StoreUnavailableError,
    UnknownRecipientError,
    UnknownTeamError,
)
from langgraph_handoff.stores import MemoryStore, StoreBase
from langgraph_handoff.teams import Conversation, Team, TeamState, TeamWorker
from langgraph_handoff.teams.worker import DEFAULT_CAPACITY
from langgraph_handoff.testing import ScriptedChatModel, assert_valid_history, tool_call
from tests.support.team_harness import FunctionChatModel, InterceptingStore, _incoming
from tests.support.team_helpers import Clock, echo_build, react_graph


def make_team(store: StoreBase | None = None, **kw: Any) -> Team:
    return Team(ObjectStoreSaver(store if store is not None else MemoryStore()), "t", **kw)


# -- builds get the member ----------------------------------------------------------------------------


def reporter(checkpointer: Any, member: Any) -> Any:
    """Every member of the role reports to the lead with its own tools."""
    model = ScriptedChatModel([tool_call("send_message", {"to": "lead", "content": f"{member.name} here"},
                                         id=f"r-{member.name}"), "reported"])  # fmt: skip
    return react_graph(checkpointer, model, member.tools())


def test_two_members_of_one_role_are_told_apart() -> None:
    """Reported: with tools made for a fixed name, bob's message reached the lead as from alice."""
    team = make_team()
    team.spawn("lead", role="echo")
    team.spawn("alice", role="coder")
    team.spawn("bob", role="coder")
    worker = TeamWorker(team, "w", {"coder": reporter, "echo": echo_build}, members=["alice", "bob"])
    team.send("alice", "report", sender="human")
    team.send("bob", "report", sender="human")
    assert worker.step() == 2
    assert sorted((m.sender, m.content) for m in team.inbox("lead")) == [("alice", "alice here"), ("bob", "bob here")]


def test_a_one_argument_build_still_works_with_a_deprecation_warning() -> None:
    team = make_team()
    team.spawn("alice", role="echo")

    def old_build(checkpointer: Any) -> Any:
        return echo_build(checkpointer)

    with pytest.warns(DeprecationWarning, match=r"build\(checkpointer, member\)"):
        worker = TeamWorker(team, "w", {"echo": old_build}, auto_reply=False)
    team.send("alice", "hi", sender="ops")
    assert worker.step() == 1


def test_team_middleware_tells_the_agent_its_name_role_teammates_and_the_protocol() -> None:
    from langchain.agents import create_agent

    team = make_team()
    team.spawn("lead", role="lead", description="plans the release")
    team.spawn("alice", role="coder", description="fixes tests")
    model = ScriptedChatModel(["on it"])

    def coder(checkpointer: Any, member: Any) -> Any:
        return create_agent(model, tools=[], system_prompt="Be brief.", middleware=[member.middleware()],
                            checkpointer=checkpointer)  # fmt: skip

    worker = TeamWorker(team, "w", {"coder": coder, "lead": echo_build}, members=["alice"])
    team.send("alice", "fix test_io.py", sender="lead")
    assert worker.step() == 1
    [received] = model.calls
    assert isinstance(received[0], SystemMessage)
    system = received[0].text
    assert system.startswith("Be brief.\n\nYou are alice, the coder on team t (fixes tests). The lead is lead.")
    assert "- lead (lead): plans the release" in system and "send_message(to, content)" in system
    assert "ends after 16 messages" in system


# -- an outside requester waits for the answer ----------------------------------------------------------


def serve(worker: TeamWorker) -> tuple[threading.Thread, threading.Event]:
    """A worker stepping in a thread until the returned event is set."""
    done = threading.Event()
    thread = threading.Thread(target=worker.run, kwargs={"until": done.is_set}, daemon=True)
    thread.start()
    return thread, done


def test_request_sends_and_waits_for_the_answer() -> None:
    team = make_team()
    team.spawn("alice", role="echo")
    thread, done = serve(TeamWorker(team, "w", {"echo": echo_build}, poll=0.01, max_poll=0.05))
    try:
        answer = team.request("alice", "ping", sender="ops", timeout=60)
    finally:
        done.set()
        thread.join()
    assert (answer.sender, answer.type, answer.content) == ("alice", "auto_reply", "ack ping")
    assert team.replies("ops") == []  # collected once read


async def test_arequest_is_the_async_twin() -> None:
    team = make_team()
    team.spawn("alice", role="echo")
    thread, done = serve(TeamWorker(team, "w", {"echo": echo_build}, poll=0.01, max_poll=0.05))
    try:
        first, second = await asyncio.gather(
            team.arequest("alice", "one", sender="ops", timeout=60, idempotency_key="k1"),
            team.arequest("alice", "two", sender="ops", timeout=60, idempotency_key="k2"),
        )
    finally:
        done.set()
        await asyncio.to_thread(thread.join)
    # each request gets its own answer (one turn may have ingested both: then both get its answer)
    assert (first.reply_to, second.reply_to) == (
        team.keyed_id("alice", "ops", "k1"),
        team.keyed_id("alice", "ops", "k2"),
    )
    assert {first.content, second.content} <= {"ack one", "ack two"}


def test_a_request_that_times_out_is_typed_and_its_answer_is_kept() -> None:
    team = make_team()
    team.spawn("alice", role="echo")
    with pytest.raises(ReplyTimeoutError, match=r"no answer from 'alice' to request #\w+ of 'ops' within 0 s") as info:
        team.request("alice", "ping", sender="ops", timeout=0)
    assert "team status" in str(info.value) and "wait_reply(" in str(info.value)
    worker = TeamWorker(team, "w", {"echo": echo_build})
    assert worker.step() == 1
    assert team.wait_reply(info.value.request_id, sender="ops", timeout=0).content == "ack ping"


def delegating_lead(checkpointer: Any, member: Any) -> Any:
    """Delegates a request to alice and bob, then reports once both answered."""

    def step(messages: list[BaseMessage]) -> AIMessage:
        if messages[-1].type == "tool":
            return AIMessage("Delegated to alice and bob.")
        heard = {m.name for m in messages if m.type == "human"}
        if {"alice", "bob"} <= heard:
            return AIMessage("Both done: " + "; ".join(m.text.splitlines()[-1] for m in _incoming(messages)))
        if "ops" in {m.name for m in _incoming(messages)}:
            return AIMessage("", tool_calls=[
                {"name": "send_message", "args": {"to": n, "content": f"{n}, do your part"}, "id": f"d-{n}",
                 "type": "tool_call"} for n in ("alice", "bob")])  # fmt: skip
        return AIMessage("Waiting for the other one.")

    return react_graph(checkpointer, FunctionChatModel([step]), member.tools())


def test_a_lead_that_delegates_answers_its_requester_with_the_result() -> None:
    """The answer waits until the teammates the lead asked have answered it."""
    team = make_team()
    team.spawn("lead", role="lead", lead=True)
    team.spawn("alice", role="echo")
    team.spawn("bob", role="echo")
    worker = TeamWorker(team, "w", {"lead": delegating_lead, "echo": echo_build}, members=["lead"])
    mates = TeamWorker(team, "m", {"echo": echo_build}, members=["alice", "bob"])
    ask = team.send("lead", "ship it", sender="ops", expects_reply=True)
    assert worker.step() == 1  # delegates; "Delegated to alice and bob." is not the answer
    assert team.replies("ops") == []
    team.send("lead", "fyi", sender="ops2")  # a turn in between: still waiting for both
    assert worker.step() == 1 and team.replies("ops") == []
    assert mates.step() == 2 and worker.step() == 2
    answer = team.wait_reply(ask, timeout=0)
    assert answer.reply_to == ask.id
    assert answer.content == "Both done: ack alice, do your part; ack bob, do your part"


# -- conversations --------------------------------------------------------------------------------------


class FailThirdHeadPut(InterceptingStore):
    """The member's third head write fails (the lease, the input checkpoint, then step 0's): the
    turn stops right after its input checkpoint."""

    def __init__(self, inner: StoreBase, key: str) -> None:
        self.inner, self.key, self.puts = inner, key, 0

    def _around(self, kind: str, key: str, call: Any) -> Any:
        if kind == "PUT" and key == self.key:
            self.puts += 1
            if self.puts == 3:
                raise StoreUnavailableError("injected: the store went away mid-turn")
        return call()


def test_conversation_reads_a_member_from_its_first_checkpoint() -> None:
    """Reported: a poller that read ``channel_values["messages"]`` raised KeyError on a member's
    first checkpoint, which holds the ingested messages as input that has not run."""
    store = FailThirdHeadPut(MemoryStore(), "teams/t/members/heads/t%2falice/=")
    team = make_team(store)
    team.spawn("alice", role="echo")
    assert team.conversation("alice") == Conversation("alice", (), None)
    msg = team.send("alice", "hi", sender="ops")
    TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False, heartbeat=3600).step()  # no renewal PUT
    tup = team.member_saver.get_tuple({"configurable": {"thread_id": "t/alice"}})
    assert "messages" not in tup.checkpoint["channel_values"]  # what the reported poller tripped on
    convo = team.conversation("alice")
    assert isinstance(convo, Conversation) and convo.unrun == 1 and convo.final_answer is None
    assert [m.id for m in convo.team_messages] == [msg.id]
    with pytest.raises(UnknownRecipientError, match="no member 'alcie'"):
        team.conversation("alcie")


async def test_conversation_after_a_turn_and_its_async_twin() -> None:
    team = make_team()
    team.spawn("alice", role="echo")
    team.send("alice", "hi", sender="ops")
    TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False).step()
    convo = await team.aconversation("alice")
    assert (convo.unrun, convo.final_answer, [m.content for m in convo.team_messages]) == (0, "ack hi", ["hi"])


# -- capacity -----------------------------------------------------------------------------------------


def test_the_default_capacity_spreads_a_fleet_and_a_lone_worker_still_serves_everyone() -> None:
    clock = Clock()
    team = make_team(clock=clock)
    names = [f"m{i}" for i in range(6)]
    for n in names:
        team.spawn(n, role="echo")
    w1 = TeamWorker(team, "w1", {"echo": echo_build}, auto_reply=False)
    w2 = TeamWorker(team, "w2", {"echo": echo_build}, auto_reply=False)
    w1.step()
    w2.step()
    assert DEFAULT_CAPACITY == 4 and len(w1.leases) == 4 and len(w2.leases) == 2
    w2.stop()
    clock.now += 31  # w2's handover expired and nobody accepted it
    team.send("m5", "anyone?", sender="ops")
    assert w1.step() == 0 and "t/m5" not in w1.leases  # at capacity: a worker with room goes first
    clock.now += 2 * w1.max_poll
    assert w1.step() == 1 and "t/m5" in w1.leases  # nobody did: the lone worker serves it


# -- status after a clean stop --------------------------------------------------------------------------


def test_status_is_true_right_after_a_clean_stop() -> None:
    """Reported: after ``worker.stop()`` a member with a pending message showed ``working`` for
    30 s, though no worker was running it."""
    team = make_team(clock=Clock())
    team.spawn("alice", role="echo")
    a = TeamWorker(team, "a", {"echo": echo_build}, auto_reply=False)
    team.send("alice", "zero", sender="ops")
    assert a.step() == 1
    team.send("alice", "one", sender="ops")
    a.stop()
    team.send("alice", "two", sender="ops")
    [status] = team.status()
    assert (status.status, status.pending) == ("handed_over", 2)
    b = TeamWorker(team, "b", {"echo": echo_build}, auto_reply=False)
    assert b.step() == 2 and [s.status for s in team.status()] == ["idle"]  # accepted at once


# -- a poison step discarded --------------------------------------------------------------------------


def picky_build(checkpointer: Any, member: Any = None) -> Any:
    from langgraph.graph import END, START, StateGraph

    def node(state: TeamState) -> dict[str, Any]:
        last = state["messages"][-1].content.splitlines()[-1]
        if last == "poison":
            raise RuntimeError("cannot digest this")
        return {"messages": [AIMessage(f"ack {last}")]}

    g = StateGraph(TeamState)
    g.add_node("eat", node)
    g.add_edge(START, "eat")
    g.add_edge("eat", END)
    return g.compile(checkpointer=checkpointer)


def test_discard_drops_a_poison_step_records_it_and_the_member_works_again() -> None:
    team = make_team()
    team.spawn("lead", role="echo")
    team.spawn("alice", role="picky")
    worker = TeamWorker(team, "w", {"picky": picky_build, "echo": echo_build}, members=["alice"], max_failures=2)
    poison = team.send("alice", "poison", sender="lead")
    for _ in range(2):
        worker.step()
    assert team.roster().members["alice"].state == "failed"
    team.revive("alice")  # reviving alone runs the poison again
    for _ in range(2):
        worker.step()
    assert team.roster().members["alice"].state == "failed"
    with pytest.raises(InvalidInputError, match="not failed"):
        team.discard("lead", reason="x")
    member = team.discard("alice", reason="the input crashes the parser", by="ops")
    assert member.state == "active" and member.discard["messages"] == [poison.id] and "by ops" in member.reason
    team.send("alice", "fine", sender="lead")
    assert worker.step() == 1
    convo = team.conversation("alice")
    assert [m.content for m in convo.team_messages] == ["fine"]  # the poison is out of the conversation
    assert "discarded by ops: the input crashes the parser" in convo.messages[-3].text
    assert convo.final_answer == "ack fine"
    assert_valid_history(list(convo.messages))
    events = [m for m in team.inbox("lead") if m.type == "event"]
    assert any(e.data.get("event") == "step_discarded" for e in events)
    assert team.roster().members["alice"].state == "active"


def test_missing_team_and_member_are_typed() -> None:
    team = make_team()
    with pytest.raises(UnknownTeamError, match="no team 't'"):
        team.require()
    team.spawn("alice", role="echo")
    with pytest.raises(UnknownRecipientError, match="no member 'bob'"):
        team.require("bob")


def test_at_capacity_a_member_another_worker_holds_costs_one_get_per_third_of_its_lease() -> None:
    from langgraph_handoff.stores import CountingStore

    store = CountingStore(MemoryStore())
    clock = Clock()
    team = make_team(store, clock=clock)
    team.spawn("lead", role="echo")
    team.spawn("alice", role="echo")
    TeamWorker(team, "w2", {"echo": echo_build}, members=["alice"], auto_reply=False).step()
    w1 = TeamWorker(team, "w1", {"echo": echo_build}, capacity=1, auto_reply=False)
    w1.step()
    assert sorted(w1.leases) == ["t/lead"]
    store.reset()
    assert w1.step() == 0
    assert store.counts == {"GET": 1, "LIST": 1}  # roster, lead's inbox: alice is not looked at again
    clock.now += w1.ttl / 3
    store.reset()
    assert w1.step() == 0 and store.counts == {"GET": 2, "LIST": 1}  # + alice's head, once per ttl / 3


def test_an_immediate_send_from_a_turn_is_one_put_one_hop_further() -> None:
    from langgraph_handoff.stores import CountingStore
    from langgraph_handoff.teams import team_tools
    from langgraph_handoff.teams.outbox import CHAIN_KEY

    store = CountingStore(MemoryStore())
    team = make_team(store)
    team.spawn("lead", role="echo")
    team.spawn("alice", role="echo")
    send = team_tools(team, "lead", mode="immediate")[0]
    store.reset()
    chain = {"conversation": "m0", "hop": 2, "causes": {"ops": "m0"}}
    send.invoke({"type": "tool_call", "id": "c1", "name": "send_message", "args": {"to": "alice", "content": "go"}},
                config={"configurable": {CHAIN_KEY: chain}})  # fmt: skip
    assert store.counts == {"PUT": 1}
    [m] = team.inbox("alice")
    assert (m.conversation, m.hop, m.causes) == ("m0", 3, {"ops": "m0"})
