"""Agent teams on the offline stores: roster, mailboxes, the ack that rides the checkpoint, the
worker's turns, tools, lifecycle. Concurrency on real processes and RGW: integration_tests."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff._format.keys import head_key, team_prefix
from langgraph_handoff.errors import (
    InvalidInputError,
    MemberExistsError,
    MessageIngestedError,
    OwnershipLostError,
    StaleWriterError,
    UnknownRecipientError,
)
from langgraph_handoff.ownership import SessionManager
from langgraph_handoff.stores import CountingStore, MemoryStore, StoreBase
from langgraph_handoff.teams import Team, TeamState, TeamWorker
from langgraph_handoff.teams.acks import AckState, ack_rider
from langgraph_handoff.teams.outbox import outbox_reducer
from langgraph_handoff.testing import tool_call
from tests.support.team_helpers import (
    Clock,
    agent_build,
    boom_build,
    conversation,
    duplicates,
    echo_build,
    ingested,
    ingested_ids,
)


def make_team(store: StoreBase | None = None, *, clock: Any = None, **kw: Any) -> tuple[ObjectStoreSaver, Team]:
    saver = ObjectStoreSaver(store if store is not None else MemoryStore())
    return saver, Team(saver, "t", clock=clock or Clock(), **kw)


def snap(store: CountingStore) -> dict[str, int]:
    """Requests by kind and round trips (without the total)."""
    out = store.snapshot()
    out.pop("requests", None)
    return out


def keys_under(store: StoreBase, prefix: str) -> list[str]:
    return [i.key for i in store.list(prefix)]


# -- roster ---------------------------------------------------------------------------------------


def test_spawn_remove_and_roster(store: StoreBase) -> None:
    _, team = make_team(store)
    team.spawn("lead", role="lead")
    alice = team.spawn("alice", role="coder", description="fixes tests")
    assert team.roster().lead == "lead" and alice.state == "active"
    assert [(m.name, m.role) for m in team.members(refresh=True)] == [("alice", "coder"), ("lead", "lead")]
    with pytest.raises(MemberExistsError, match="already has a member named 'alice'"):
        team.spawn("alice", role="coder")
    with pytest.raises(InvalidInputError, match="invalid member name"):
        team.spawn("bad name", role="coder")
    with pytest.raises(InvalidInputError, match="needs a role"):
        team.spawn("bob", role="")
    assert team.remove("alice") == []
    assert team.roster_names(refresh=True) == ["lead"]
    assert team.thread_id("alice") == "t/alice"


def test_spawn_exist_ok_makes_a_setup_script_rerunnable(store: StoreBase) -> None:
    """``spawn(..., exist_ok=True)`` of a member already there, with its role, returns it and
    changes nothing (a setup script run twice); another role is another member: still an error.
    Fails before ``exist_ok`` existed (issue 47: the teams example failed when run twice)."""
    _, team = make_team(store)
    team.spawn("lead", role="lead")
    alice = team.spawn("alice", role="coder", description="fixes tests")
    team.mark_failed("alice", "boom")
    roster = team.roster(refresh=True)
    again = team.spawn("alice", role="coder", description="other words", lead=True, exist_ok=True)
    assert again.spawned_at == alice.spawned_at and again.state == "failed" and again.description == "fixes tests"
    assert team.roster(refresh=True) == roster  # not rewritten: the same nonce, lead and state
    with pytest.raises(MemberExistsError, match="with role 'coder'"):
        team.spawn("alice", role="tester", exist_ok=True)
    bob = team.spawn("bob", role="tester", exist_ok=True)  # a new name is spawned as always
    assert team.roster(refresh=True).members["bob"] == bob


def test_concurrent_spawns_all_land(store: StoreBase) -> None:
    """The roster moves by CAS: 8 threads spawning at once (released by a barrier) all land."""
    saver, _ = make_team(store)
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def spawn(i: int) -> None:
        team = Team(saver, "t")
        barrier.wait()
        try:
            team.spawn(f"m{i}", role="echo")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=spawn, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert Team(saver, "t").roster_names(refresh=True) == [f"m{i}" for i in range(8)]


def test_same_name_spawned_concurrently_has_one_winner() -> None:
    saver, _ = make_team()
    barrier = threading.Barrier(6)
    outcomes: list[str] = []

    def spawn(i: int) -> None:
        team = Team(saver, "t")
        barrier.wait()
        try:
            team.spawn("alice", role=f"r{i}")
            outcomes.append("won")
        except MemberExistsError:
            outcomes.append("exists")

    threads = [threading.Thread(target=spawn, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["exists"] * 5 + ["won"]


# -- sending --------------------------------------------------------------------------------------


def test_send_is_one_create_only_put_and_a_retry_is_harmless() -> None:
    store = CountingStore(MemoryStore())
    _, team = make_team(store)
    team.spawn("alice", role="echo")
    team.roster()
    store.reset()
    msg = team.send("alice", "hello", sender="ops", idempotency_key="req-1")
    assert snap(store) == {"PUT": 1, "round_trips": 1}
    again = team.send("alice", "hello", sender="ops", idempotency_key="req-1")
    assert again.id == msg.id and len(team.inbox("alice")) == 1
    assert store.log[0] == ("PUT", f"teams/t/inbox/alice/{msg.id}")


def test_unknown_recipient_names_the_valid_ones_and_creates_nothing(store: StoreBase) -> None:
    _, team = make_team(store)
    team.spawn("alice", role="echo")
    team.spawn("bob", role="echo")
    before = keys_under(store, team_prefix("t"))
    with pytest.raises(UnknownRecipientError, match=r"no member 'alcie'\. Valid recipients: alice, bob"):
        team.send("alcie", "x", sender="ops")
    assert keys_under(store, team_prefix("t")) == before  # no phantom inbox
    with pytest.raises(InvalidInputError, match="sender"):
        team.send("alice", "x", sender="")


def test_a_member_spawned_elsewhere_is_found_on_a_cache_miss() -> None:
    saver, team = make_team()
    team.spawn("alice", role="echo")
    other = Team(saver, "t")
    assert other.roster_names() == ["alice"]
    team.spawn("bob", role="echo")
    other.send("bob", "hi", sender="ops")  # bob is not in other's cached roster: one re-read finds him
    assert [m.content for m in team.inbox("bob")] == ["hi"]


def test_broadcast_sends_one_copy_to_each_active_member() -> None:
    store = CountingStore(MemoryStore())
    _, team = make_team(store)
    for n in ("lead", "a", "b", "c"):
        team.spawn(n, role="echo")
    store.reset()
    sent = team.broadcast("standup", sender="lead")
    assert sorted(m.to for m in sent) == ["a", "b", "c"]
    assert store.counts["PUT"] == 3 and store.counts["GET"] == 1 and store.round_trips == 2


def test_remove_keeps_messages_as_dead_letters_and_reports_late_ones(store: StoreBase) -> None:
    _, team = make_team(store)
    team.spawn("alice", role="echo")
    late = Team(team.saver, "t")
    late.roster()  # a sender that still has alice in its cached roster
    team.send("alice", "one", sender="ops")
    team.send("alice", "two", sender="ops")
    moved = team.remove("alice")
    assert len(moved) == 2 and team.inbox("alice") == []
    with pytest.raises(UnknownRecipientError):
        team.send("alice", "three", sender="ops")
    # the racing sender's cached roster still lists alice: its message is stored, then reported
    late.send("alice", "raced the remove", sender="ops")
    letters = team.dead_letters()
    assert sorted((d.where, d.message.content) for d in letters if d.message) == [
        ("dead", "one"), ("dead", "two"), ("orphaned", "raced the remove")]  # fmt: skip


# -- the worker: turns, ack, delivery --------------------------------------------------------------


def test_messages_enter_the_conversation_with_provenance_and_the_ack_rides_the_checkpoint() -> None:
    store = CountingStore(MemoryStore())
    saver, team = make_team(store)
    team.spawn("lead", role="echo")
    team.spawn("alice", role="echo")
    first = team.send("alice", "fix the test", sender="lead")
    second = team.send("alice", "and add one", sender="lead", reply_to=first.id)
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False)
    assert worker.step() == 2
    convo = conversation(saver, team, "alice")
    human = [m for m in convo if m.type == "human"]
    assert [m.name for m in human] == ["lead", "lead"]
    assert human[1].content == f"[message from lead (#{second.id}, reply to #{first.id})]\nand add one"
    assert human[1].additional_kwargs["team_message"]["id"] == second.id
    assert convo[-1].content == "ack and add one"  # one turn for the batch
    head = team.member_saver.heads.decode(store.get("teams/t/members/" + head_key("t/alice", "")), "t/alice", "")[0]
    assert set(AckState.of(head.meta, "t/alice").recent) == {first.id, second.id}
    assert team.inbox("alice", all=True) == []  # deleted after the commit
    assert worker.step() == 0
    worker.stop()


def test_receive_costs_one_list_and_one_get_per_message_and_the_ack_costs_nothing() -> None:
    """Against the same turn with no team: the ack adds 0 requests; receive is 1 LIST + 1 GET per
    message (the lease holder reads its ack record from the head it wrote), delete is one batch."""
    store = CountingStore(MemoryStore())
    saver, team = make_team(store)
    team.spawn("alice", role="echo")
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False)
    worker.step()  # acquires alice; her inbox is empty
    store.reset()
    assert worker.step() == 0
    idle = snap(store)
    for i in range(3):
        team.send("alice", f"m{i}", sender="ops")
    store.reset()
    assert worker.step() == 3
    busy = snap(store)
    # the same turn without a team: a plain invoke of the same graph on another thread
    plain = echo_build(saver)
    plain.invoke({"messages": [("user", "x")]}, {"configurable": {"thread_id": "warm"}}, durability="sync")
    store.reset()
    plain.invoke({"messages": [("user", "y")]}, {"configurable": {"thread_id": "warm"}}, durability="sync")
    turn = snap(store)
    extra = {k: busy.get(k, 0) - idle.get(k, 0) - turn.get(k, 0) for k in ("GET", "PUT", "LIST", "DELETE_MANY")}
    assert idle == {"GET": 1, "LIST": 1, "round_trips": 2}  # roster + inbox: an idle poll
    assert extra == {"GET": 3, "PUT": 0, "LIST": 0, "DELETE_MANY": 1}, (busy, idle, turn)


def test_a_turn_whose_checkpoint_fails_acks_nothing_and_loses_nothing() -> None:
    """The ack and the messages share one CAS: if that put fails, neither exists."""

    class FailingHeads(MemoryStore):
        fail = True

        def put(self, key: str, body: bytes, **kw: Any) -> str:
            if self.fail and key == "teams/t/members/" + head_key("t/alice", "") and kw.get("if_match"):
                raise OSError("disk full")
            return super().put(key, body, **kw)

    store = FailingHeads()
    saver, team = make_team(store)
    team.spawn("alice", role="echo")
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False, max_failures=99)
    worker.step()  # the lease is taken (first head write is create-only)
    msg = team.send("alice", "hello", sender="ops")
    assert worker.step() == 0
    assert ingested_ids(saver, team, "alice") == [] and [m.id for m in team.inbox("alice")] == [msg.id]
    store.fail = False
    assert worker.step() == 1
    assert ingested_ids(saver, team, "alice") == [msg.id]


def test_a_late_retry_after_the_message_was_deleted_is_not_ingested_again(store: StoreBase) -> None:
    saver, team = make_team(store)
    team.spawn("alice", role="echo")
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False)
    first = team.send("alice", "charge card", sender="ops", idempotency_key="order-7")
    assert worker.step() == 1 and team.inbox("alice", all=True) == []
    again = team.send("alice", "charge card", sender="ops", idempotency_key="order-7")  # recreates the object
    assert again.id == first.id and len(team.inbox("alice", all=True)) == 1
    assert team.inbox("alice") == []  # known as ingested
    assert worker.step() == 0
    assert ingested_ids(saver, team, "alice") == [first.id]
    assert team.inbox("alice", all=True) == []  # and the copy was cleaned up


def test_dedupe_window_forgets_external_ids_but_never_sequence_marks() -> None:
    ack = AckState().record([], "t0", now=0.0, window=10.0)
    from langgraph_handoff.teams.model import Message

    ext = Message(id="e1", team="t", sender="ops", to="a", content="")
    seq = Message(id="s1", team="t", sender="lead", to="a", content="", seq=1, stream="lead@x")
    ack = ack.record([ext, seq], "t1", now=100.0, window=10.0)
    assert ack.consumed(ext) and ack.consumed(seq)
    later = ack.record([], "t2", now=111.0, window=10.0)
    assert not later.consumed(ext)  # documented: external ids are remembered `window` seconds
    assert later.consumed(seq)  # agent streams: forever


def test_two_consumers_without_leases_never_ingest_one_message_twice() -> None:
    """The protocol alone (no lease): two consumers read the same inbox and run a turn at once,
    released together by a barrier. The head CAS admits one; the other's put is refused."""
    saver, team = make_team()
    team.spawn("alice", role="echo")
    graph0 = echo_build(team.member_saver)
    graph0.invoke({"messages": [("user", "start")]}, {"configurable": {"thread_id": "t/alice"}}, durability="sync")
    msgs = [team.send("alice", f"m{i}", sender="ops") for i in range(3)]
    receipts = [team.receive("alice") for _ in range(2)]
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def consume(i: int) -> None:
        ready = receipts[i].selection.ready
        rider = ack_rider("t/alice", ready, f"turn-{i}", 0.0)
        graph = echo_build(saver.under("teams/t/members/").with_head_rider("t/alice", rider))
        barrier.wait()
        try:
            graph.invoke({"messages": [m.as_human_message() for m in ready]},
                         {"configurable": {"thread_id": "t/alice"}}, durability="sync")  # fmt: skip
            outcomes.append("ingested")
        except (MessageIngestedError, StaleWriterError) as exc:
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ingested") == 1, outcomes
    ids = ingested_ids(saver, team, "alice")
    assert ids == [m.id for m in msgs] and duplicates(ids) == {}


def test_the_rider_refuses_messages_another_turn_recorded() -> None:
    from langgraph_handoff.teams.model import Message

    m = Message(id="x", team="t", sender="ops", to="a", content="")
    meta = ack_rider("t/a", [m], "turn-1", 0.0)(HeadMeta())
    assert ack_rider("t/a", [m], "turn-1", 0.0)(meta) is meta  # our own later puts: unchanged
    with pytest.raises(MessageIngestedError, match="already ingested"):
        ack_rider("t/a", [m], "turn-2", 0.0)(meta)
    assert meta.wire()["team_inbox"]["turn"] == "turn-1"


def test_fifo_per_sender_in_batches(store: StoreBase) -> None:
    saver, team = make_team(store)
    team.spawn("alice", role="echo")
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False, batch=4)
    sent: dict[str, list[str]] = {"ops": [], "qa": [], "pm": []}
    for i in range(10):
        for sender in sent:
            sent[sender].append(team.send("alice", f"{sender}-{i}", sender=sender).id)
    while worker.step():
        pass
    got = ingested(saver, team, "alice")
    assert len(got) == 30 and duplicates([g["id"] for g in got]) == {}
    for sender, ids in sent.items():
        assert [g["id"] for g in got if g["sender"] == sender] == ids


def test_clock_skew_between_senders_loses_and_reorders_nothing() -> None:
    """Senders ±10 minutes off: each sender's order is kept, nothing is lost or doubled."""
    saver, _ = make_team()
    real = Clock()
    team = Team(saver, "t", clock=real)
    team.spawn("alice", role="echo")
    ahead = Team(saver, "t", clock=lambda: real.now + 600)
    behind = Team(saver, "t", clock=lambda: real.now - 600)
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False, batch=3)
    sent: dict[str, list[str]] = {"ahead": [], "behind": []}
    for i in range(6):
        sent["behind"].append(behind.send("alice", f"b{i}", sender="behind").id)
        sent["ahead"].append(ahead.send("alice", f"a{i}", sender="ahead").id)
        if i % 2:
            worker.step()
    while worker.step():
        pass
    got = ingested(saver, team, "alice")
    for sender, ids in sent.items():
        assert [g["id"] for g in got if g["sender"] == sender] == ids
    assert len(got) == 12


def test_a_fenced_worker_can_neither_ack_nor_deliver() -> None:
    clock = Clock()
    saver, team = make_team(clock=clock)
    team.spawn("lead", role="echo")
    team.spawn("alice", role="agent")
    script = [tool_call("send_message", {"to": "lead", "content": "done"}, id="c1"), "ok"]
    builds = {"echo": echo_build, "agent": agent_build(team, "alice", script)}
    zombie = TeamWorker(team, "zombie", builds, members=["alice"])
    zombie.step()
    # the zombie stalls; another worker takes alice over by force (an operator, or after expiry)
    SessionManager(team.member_saver, clock=clock).acquire("t/alice", "other", 30, force=True)
    msg = team.send("alice", "please report", sender="lead")
    assert zombie.step() == 0  # its turn's first put is refused: nothing acked
    assert ingested_ids(saver, team, "alice") == [] and [m.id for m in team.inbox("alice")] == [msg.id]
    assert team.inbox("lead") == []  # and nothing delivered
    assert "t/alice" not in zombie.leases


def test_a_dead_workers_members_are_picked_up_after_the_lease_expires() -> None:
    clock = Clock()
    saver, team = make_team(clock=clock)
    team.spawn("alice", role="echo")
    dead = TeamWorker(team, "dead", {"echo": echo_build}, auto_reply=False, ttl=30)
    dead.step()  # holds alice, then never runs again (no heartbeat thread beats with a fake clock)
    dead._stopping.set()
    msg = team.send("alice", "anyone?", sender="ops")
    survivor = TeamWorker(team, "survivor", {"echo": echo_build}, auto_reply=False, ttl=30)
    assert survivor.step() == 0  # the lease is still valid
    clock.now += 31
    assert survivor.step() == 1
    assert ingested_ids(saver, team, "alice") == [msg.id]
    assert SessionManager(team.member_saver, clock=clock).get("t/alice").owner == "survivor"


# -- agents: outbox, tools, auto-reply -------------------------------------------------------------


def test_outbox_numbers_are_dense_per_recipient_and_trimmed_after_delivery() -> None:
    box = outbox_reducer({}, [{"to": "a", "id": "1"}, {"to": "a", "id": "2"}, {"to": "b", "id": "3"}])
    assert box["next"] == {"a": 2, "b": 1}
    box = outbox_reducer(box, {"dispatched": {"a": 2}})
    assert [e["id"] for e in box["pending"]] == ["3"] and box["next"] == {"a": 2, "b": 1}


def test_agent_sends_are_delivered_after_the_checkpoint_with_dense_sequence_numbers() -> None:
    saver, team = make_team()
    team.spawn("lead", role="lead")
    team.spawn("alice", role="coder")
    team.spawn("bob", role="coder")
    lead_script = [
        tool_call("send_message", {"to": "alice", "content": "write the fix"}, id="c1"),
        tool_call("send_message", {"to": "bob", "content": "review alice's fix"}, id="c2"),
        "delegated",
        "thanks",
        "thanks",
    ]
    builds = {"lead": agent_build(team, "lead", lead_script), "coder": echo_build}
    worker = TeamWorker(team, "w", builds, members=["lead"])
    team.send("lead", "fix the flaky test", sender="human")
    assert worker.step() == 1
    to_alice, to_bob = team.inbox("alice"), team.inbox("bob")
    assert [(m.content, m.seq, m.stream.split("@")[0]) for m in to_alice] == [("write the fix", 1, "lead")]
    assert [(m.content, m.seq) for m in to_bob] == [("review alice's fix", 1)]
    # the tool answered with the id the message got
    tool_answers = [m.content for m in conversation(saver, team, "lead") if m.type == "tool"]
    assert f"#{to_alice[0].id}" in tool_answers[0]
    # a second worker re-delivering the same committed outbox (a takeover) creates nothing new
    again = TeamWorker(team, "w2", builds, members=["lead"])
    again._deliver(team.members()[1], worker.leases["t/lead"], worker.graph_for(worker.leases["t/lead"]),
                   {"configurable": {"thread_id": "t/lead"}})  # fmt: skip
    assert [m.id for m in team.inbox("alice")] == [to_alice[0].id]


def test_a_misspelt_recipient_is_a_tool_error_the_model_corrects() -> None:
    saver, team = make_team()
    team.spawn("lead", role="lead")
    team.spawn("alice", role="coder")
    script = [
        tool_call("send_message", {"to": "alcie", "content": "hi"}, id="c1"),
        tool_call("send_message", {"to": "alice", "content": "hi"}, id="c2"),
        "done",
    ]
    worker = TeamWorker(team, "w", {"lead": agent_build(team, "lead", script), "coder": echo_build}, members=["lead"])
    team.send("lead", "say hi to alice", sender="human")
    worker.step()
    tools = [m for m in conversation(saver, team, "lead") if m.type == "tool"]
    assert tools[0].status == "error" and "Input should be 'alice'" in tools[0].content
    assert [m.content for m in team.inbox("alice")] == ["hi"]
    assert keys_under(team.store, "teams/t/inbox/alcie") == []


def test_send_message_schema_restricts_to_the_roster() -> None:
    _, team = make_team()
    for n in ("lead", "alice", "bob"):
        team.spawn(n, role="x")
    from langgraph_handoff.teams import team_tools

    send = team_tools(team, "lead")[0]
    schema = send.tool_call_schema.model_json_schema()
    assert schema["properties"]["to"]["enum"] == ["alice", "bob"]
    team.remove("bob")  # removed after the tools were made: refused at call time, with the valid names
    answer = send.invoke(
        {"type": "tool_call", "id": "c1", "name": "send_message", "args": {"to": "bob", "content": "x"}}
    )
    assert answer.status == "error" and "Valid recipients: alice, lead" in answer.content


def test_auto_reply_goes_to_the_trigger_and_never_answers_an_auto_reply() -> None:
    saver, team = make_team()
    team.spawn("lead", role="echo")
    team.spawn("alice", role="echo")
    worker = TeamWorker(team, "w", {"echo": echo_build})
    team.send("alice", "status?", sender="lead")
    worker.step()
    worker.step()
    assert worker.step() == 0  # quiescent: no ping-pong
    got = ingested(saver, team, "lead")
    assert [(g["sender"], g["type"], g["content"]) for g in got] == [("alice", "auto_reply", "ack status?")]
    assert ingested(saver, team, "alice")[0]["type"] == "message"


def test_no_auto_reply_when_the_agent_messaged_the_sender_or_for_external_senders() -> None:
    _saver, team = make_team()
    team.spawn("lead", role="echo")
    team.spawn("alice", role="agent")
    script = [tool_call("send_message", {"to": "lead", "content": "on it"}, id="c1"), "final words"]
    worker = TeamWorker(team, "w", {"echo": echo_build, "agent": agent_build(team, "alice", script)}, members=["alice"])
    team.send("alice", "task", sender="lead")
    team.send("alice", "fyi", sender="human")  # not a member: no inbox to answer to
    worker.step()
    assert [m.content for m in team.inbox("lead")] == ["on it"]


def test_create_agent_with_team_middleware() -> None:
    from langchain.agents import create_agent

    from langgraph_handoff.teams import TeamMiddleware
    from langgraph_handoff.testing import ScriptedChatModel

    _saver, team = make_team()
    team.spawn("lead", role="lead")
    team.spawn("alice", role="echo")

    def lead(checkpointer: Any, member: Any = None) -> Any:
        model = ScriptedChatModel([tool_call("send_message", {"to": "alice", "content": "go"}, id="c1"), "sent"])
        return create_agent(model, tools=[], middleware=[TeamMiddleware(team, "lead")], checkpointer=checkpointer)

    worker = TeamWorker(team, "w", {"lead": lead, "echo": echo_build}, members=["lead"])
    team.send("lead", "delegate", sender="human")
    assert worker.step() == 1
    assert [m.content for m in team.inbox("alice")] == ["go"]


# -- lifecycle: failures, shutdown, status ---------------------------------------------------------


def test_a_poison_message_fails_the_member_and_tells_the_lead() -> None:
    saver, team = make_team()
    team.spawn("lead", role="echo")
    team.spawn("alice", role="boom")
    worker = TeamWorker(team, "w", {"echo": echo_build, "boom": boom_build}, max_failures=3, members=["alice"])
    team.send("alice", "poison", sender="lead")
    for _ in range(3):
        worker.step()
    assert team.roster().members["alice"].state == "failed"
    assert "3 turns in a row failed" in team.roster().members["alice"].reason
    events = team.inbox("lead")
    assert [(m.type, m.sender) for m in events] == [("event", "alice")] and "tool crashed" in events[0].content
    assert {s.name: s.status for s in team.status()}["alice"] == "failed"
    assert worker.step() == 0 and "t/alice" not in worker.leases  # bounded: it is left alone
    assert ingested_ids(saver, team, "alice") != []  # the message was ingested (once), not dropped
    team.revive("alice")
    assert team.roster().members["alice"].state == "active"


def test_shutdown_is_a_request_and_a_response() -> None:
    _saver, team = make_team()
    team.spawn("lead", role="echo")
    team.spawn("alice", role="echo")
    worker = TeamWorker(team, "w", {"echo": echo_build}, members=["alice"])
    worker.step()
    request = team.request_shutdown("alice", sender="lead", reason="sprint over")
    assert {s.name: s.status for s in team.status()}["alice"] == "stopping"
    worker.step()  # ingests the request (the model sees it), answers, releases
    response = team.inbox("lead")
    assert [(m.type, m.reply_to) for m in response if m.type == "shutdown_response"] == [
        ("shutdown_response", request.id)
    ]
    assert {s.name: s.status for s in team.status()}["alice"] == "shutdown"
    assert worker.step() == 0 and "t/alice" not in worker.leases  # not re-acquired


def ask_build(checkpointer: Any, member: Any = None) -> Any:
    def ask(state: TeamState) -> dict[str, Any]:
        answer = interrupt("Plan: rewrite the cache. Approve?")
        return {"messages": [("ai", f"plan {answer}: cache rewritten")]}

    g = StateGraph(TeamState)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=checkpointer)


def test_plan_approval_is_interrupt_and_resume() -> None:
    """A member paused at interrupt() asks the lead (plan_request); the lead's answer, a message
    replying to that request, resumes it with Command(resume=...). Messages that arrive while it
    waits are not ingested as new input (that would discard the pause): they enter with the answer."""
    saver, team = make_team()
    team.spawn("lead", role="echo")
    team.spawn("carol", role="ask")
    worker = TeamWorker(team, "w", {"echo": echo_build, "ask": ask_build}, members=["carol"])
    team.send("carol", "speed up the cache", sender="lead")
    assert worker.step() == 1
    [request] = team.inbox("lead")
    assert (request.type, request.sender, request.content) == (
        "plan_request",
        "carol",
        "Plan: rewrite the cache. Approve?",
    )
    assert {s.name: s.status for s in team.status()}["carol"] == "waiting_input"
    fyi = team.send("carol", "fyi: the CI is green", sender="lead")
    assert worker.step() == 0  # not an answer: it waits
    assert [m.id for m in team.inbox("carol")] == [fyi.id]
    # a worker new to carol (a takeover) asks again, under the same id: nothing new for the lead
    worker._fresh.add("carol")
    assert worker.step() == 0
    assert [m.id for m in team.inbox("lead")] == [request.id]
    team.send("carol", "approved", sender="lead", reply_to=request.id)
    assert worker.step() == 2
    convo = conversation(saver, team, "carol")
    assert convo[-1].content == "plan approved: cache rewritten"
    assert [m.content.splitlines()[-1] for m in convo if m.type == "human"] == [
        "speed up the cache", "fyi: the CI is green", "approved"]  # fmt: skip
    # the first trigger's automatic reply is paid once the turn really ends
    replies = [m for m in team.inbox("lead") if m.type == "auto_reply"]
    assert [r.content for r in replies] == ["plan approved: cache rewritten"]
    assert {s.name: s.status for s in team.status()}["carol"] == "idle"


def test_status_is_derived_spawning_working_idle_stalled_waiting() -> None:
    clock = Clock()
    _saver, team = make_team(clock=clock)
    team.spawn("alice", role="echo")
    team.spawn("carol", role="ask")

    def statuses() -> dict[str, str]:
        return {s.name: s.status for s in team.status()}

    assert statuses() == {"alice": "spawning", "carol": "spawning"}
    worker = TeamWorker(team, "w", {"echo": echo_build, "ask": ask_build}, auto_reply=False, ttl=30)
    team.send("carol", "plan", sender="ops")
    worker.step()
    assert statuses() == {"alice": "spawning", "carol": "waiting_input"}
    team.send("alice", "hi", sender="ops")
    worker.step()
    assert statuses()["alice"] == "idle"
    team.send("alice", "more", sender="ops")
    assert statuses()["alice"] == "working"  # lease live, message pending
    clock.now += 31
    assert statuses()["alice"] == "stalled"  # lease expired with work pending


def test_status_and_worker_refuse_nothing_silently_on_a_corrupt_message(store: StoreBase) -> None:
    saver, team = make_team(store)
    team.spawn("alice", role="echo")
    store.put("teams/t/inbox/alice/0000corrupt", b"garbage", if_none_match=True)
    good = team.send("alice", "fine", sender="ops")
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False)
    assert worker.step() == 1
    assert ingested_ids(saver, team, "alice") == [good.id]
    assert keys_under(store, "teams/t/inbox/alice/") == ["teams/t/inbox/alice/0000corrupt"]  # kept, reported


async def test_async_twins() -> None:
    _saver, team = make_team()
    await team.aspawn("alice", role="echo")
    msg = await team.asend("alice", "hi", sender="ops")
    assert [m.id for m in await team.ainbox("alice")] == [msg.id]
    assert len(await team.abroadcast("all", sender="ops")) == 1
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False)
    assert await worker.astep() == 2
    assert [s.status for s in await team.astatus()] == ["idle"]
    await team.aremove("alice")
    assert (await team.aroster()).members == {}


def test_team_memory_is_shared_under_the_team_namespace() -> None:
    _, team = make_team()
    team.memory.put(team.namespace("decisions"), "db", {"choice": "postgres"})
    other = Team(team.saver, "t")
    assert other.memory.get(("team", "t", "decisions"), "db").value == {"choice": "postgres"}


def test_ownership_lost_is_typed() -> None:
    assert issubclass(MessageIngestedError, Exception) and issubclass(OwnershipLostError, StaleWriterError)


# -- the command line ------------------------------------------------------------------------------


@pytest.mark.heavy
def test_team_cli_status_inbox_send_dead(tmp_path: Any) -> None:
    import json

    from tests.cli.test_cli import cli

    url = f"file://{tmp_path / 'store'}"
    team = Team(ObjectStoreSaver.from_url(url), "crew")
    team.spawn("lead", role="lead")
    team.spawn("alice", role="coder")
    out = cli("team", "send", url, "crew", "alice", "fix it", "--sender", "lead", "--key", "k1", "--json")
    assert out.returncode == 0, out.stderr
    sent = json.loads(out.stdout)
    again = cli("team", "send", url, "crew", "alice", "fix it", "--sender", "lead", "--key", "k1", "--json")
    assert json.loads(again.stdout)["id"] == sent["id"]  # idempotent: still one message
    rows = [json.loads(x) for x in cli("team", "inbox", url, "crew", "alice", "--json").stdout.splitlines()]
    assert [(r["state"], r["id"], r["content"]) for r in rows] == [("pending", sent["id"], "fix it")]
    bad = cli("team", "send", url, "crew", "alcie", "x", "--sender", "lead")
    assert bad.returncode == 2 and "Valid recipients: alice, lead" in bad.stderr
    status = cli("team", "status", url, "crew", "--json")
    assert status.returncode == 0 and {json.loads(x)["status"] for x in status.stdout.splitlines()} == {"spawning"}
    team.mark_failed("alice", "tool crashed 3 times")
    failed = cli("team", "status", url, "crew")
    assert failed.returncode == 1 and "failed" in failed.stdout and "tool crashed" in failed.stdout
    assert cli("team", "dead", url, "crew").returncode == 0
    team.remove("alice")
    dead = cli("team", "dead", url, "crew", "--json")
    assert dead.returncode == 1 and json.loads(dead.stdout)["message"]["id"] == sent["id"]


def test_create_agent_member_owes_and_pays_automatic_replies() -> None:
    """A create_agent member (TeamMiddleware) gets the outbox channel through its input: the
    obligation is committed with the input and its final answer goes back to the trigger."""
    from langchain.agents import create_agent

    from langgraph_handoff.teams import TeamMiddleware
    from langgraph_handoff.testing import ScriptedChatModel

    _saver, team = make_team()
    team.spawn("lead", role="echo")
    team.spawn("alice", role="agent")

    def alice(checkpointer: Any, member: Any = None) -> Any:
        model = ScriptedChatModel(["fixed it"])
        return create_agent(model, tools=[], middleware=[TeamMiddleware(team, "alice")], checkpointer=checkpointer)

    worker = TeamWorker(team, "w", {"agent": alice, "echo": echo_build}, members=["alice"])
    team.send("alice", "fix the test", sender="lead")
    assert worker.step() == 1
    assert [(m.type, m.content) for m in team.inbox("lead")] == [("auto_reply", "fixed it")]


def test_stop_hands_members_over_and_another_worker_accepts() -> None:
    saver, team = make_team()
    team.spawn("alice", role="echo")
    a = TeamWorker(team, "a", {"echo": echo_build}, auto_reply=False)
    a.step()
    assert a.stop() == ["t/alice"]  # locked for a transfer, with a note
    assert a.step() == 0  # a stopping worker takes no work
    msg = team.send("alice", "still there?", sender="ops")
    b = TeamWorker(team, "b", {"echo": echo_build}, auto_reply=False)
    assert b.step() == 1  # accepted the transfer (epoch 2) and ingested
    lease = SessionManager(team.member_saver).get("t/alice")
    assert (lease.owner, lease.epoch, lease.via) == ("b", 2, "transfer")
    assert ingested_ids(saver, team, "alice") == [msg.id]


def test_capacity_spreads_members_over_workers() -> None:
    _, team = make_team()
    for n in ("a", "b", "c", "d"):
        team.spawn(n, role="echo")
    w1 = TeamWorker(team, "w1", {"echo": echo_build}, capacity=2)
    w2 = TeamWorker(team, "w2", {"echo": echo_build}, capacity=2)
    w1.step()
    w2.step()
    assert sorted(w1.leases) == ["t/a", "t/b"] and sorted(w2.leases) == ["t/c", "t/d"]


def test_run_until_and_arun_back_off_while_idle() -> None:
    _saver, team = make_team()
    team.spawn("alice", role="echo")
    team.send("alice", "one", sender="ops")
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False, poll=0.001, max_poll=0.004)
    steps: list[int] = []
    original = worker.step

    def counted() -> int:
        steps.append(original())
        return steps[-1]

    worker.step = counted  # type: ignore[method-assign]
    assert worker.run(until=lambda: len(steps) >= 4) == ["t/alice"]  # handed over at the end
    assert steps[0] == 1 and steps[1:] == [0, 0, 0]


async def test_arun_ingests_and_hands_over() -> None:
    saver, team = make_team()
    team.spawn("alice", role="echo")
    msg = team.send("alice", "one", sender="ops")
    worker = TeamWorker(team, "w", {"echo": echo_build}, auto_reply=False, poll=0.001, max_poll=0.004)
    assert await worker.arun(until=lambda: bool(ingested_ids(saver, team, "alice"))) == ["t/alice"]
    assert ingested_ids(saver, team, "alice") == [msg.id]


def test_an_outbox_message_to_a_member_removed_before_delivery_is_a_dead_letter() -> None:
    from langgraph_handoff.teams.model import Message

    _, team = make_team()
    team.spawn("lead", role="echo")
    team.spawn("bob", role="echo")
    team.remove("bob")
    m = Message(id="m1", team="t", sender="lead", to="bob", content="late", seq=1, stream="lead@x")
    assert team._run(team._plan_deliver([m])) == 1
    assert [(d.where, d.member, d.message.content) for d in team.dead_letters()] == [("dead", "bob", "late")]
