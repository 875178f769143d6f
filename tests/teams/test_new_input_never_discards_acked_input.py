"""Two lease-less consumers of one inbox: consumer A's input checkpoint commits (it stores A's
messages in ``__start__`` and acks them in the same compare-and-swap), and before A's next put,
which runs the input into ``messages``, consumer B receives. B sees A's messages acked (done:
it deletes them) and runs a turn with a newer message on top of A's input checkpoint. LangGraph
discards an input that has not run when new input arrives, so A's messages were acked, deleted
and in no conversation; A's next put was refused as stale.

The cause of a lost-message flake of ``integration_tests/test_s3_teams.py``'s matrix (cell [4-1],
under two CPU hogs: 7 messages of r1 lost). Failed on commit 02f66ef.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import keys
from langgraph_handoff.errors import MessageIngestedError, StaleWriterError
from langgraph_handoff.teams import Team
from langgraph_handoff.teams.acks import ack_rider
from tests.support.team_harness import InterceptingStore
from tests.support.team_helpers import echo_build, ingested_ids

WAIT = 30.0  # a bound on the waits below (they are released by the other thread, never by time)


class PauseAfterFirstRootPut(InterceptingStore):
    """Stops its caller right after the first root-head PUT it lets through (the turn's input
    checkpoint, acked), until ``go`` is set."""

    def __init__(self, inner: Any, thread: str) -> None:
        self.inner, self.key = inner, keys.team_members_prefix(thread.split("/")[0]) + keys.head_key(thread, "")
        self.paused, self.go = threading.Event(), threading.Event()
        self.puts = 0

    def _around(self, kind: str, key: str, call: Any) -> Any:
        out = call()
        if kind == "PUT" and key == self.key:
            self.puts += 1
            if self.puts == 1:
                self.paused.set()
                assert self.go.wait(WAIT)
        return out


def _turn(team: Team, name: str) -> tuple[str, list[str]]:
    """One turn of a lease-less consumer, as the matrix harness runs it."""
    receipt = team.receive(name)
    assert receipt is not None
    if receipt.selection.done:
        team.delete_ingested(name, receipt.selection.done)
    ready = receipt.selection.ready
    thread = team.thread_id(name)
    rider = ack_rider(thread, ready, secrets.token_hex(8), team.clock(), team.window)
    graph = echo_build(team.member_saver.with_head_rider(thread, rider))
    try:
        graph.invoke({"messages": [m.as_human_message() for m in ready]}, {"configurable": {"thread_id": thread}},
                     durability="sync")  # fmt: skip
    except (MessageIngestedError, StaleWriterError) as exc:
        return type(exc).__name__, [m.id for m in ready]
    team.delete_ingested(name, ready)
    return "ingested", [m.id for m in ready]


def _setup() -> tuple[ObjectStoreSaver, Team]:
    saver = ObjectStoreSaver.from_url("memory://")
    team = Team(saver, "t")
    team.spawn("r1", role="echo")
    return saver, team


def test_a_second_consumer_cannot_discard_an_acked_input_that_has_not_run() -> None:
    saver, team = _setup()
    m1 = team.send("r1", "one", sender="s0", idempotency_key="k1")
    gate = PauseAfterFirstRootPut(saver.store, "t/r1")
    a_team = Team(ObjectStoreSaver(gate), "t")
    outcome: dict[str, Any] = {}
    a = threading.Thread(target=lambda: outcome.setdefault("a", _turn(a_team, "r1")))
    a.start()
    assert gate.paused.wait(WAIT)  # A's input checkpoint (m1, acked) committed; its next put not yet
    m2 = team.send("r1", "two", sender="s0", idempotency_key="k2")
    b_team = Team(ObjectStoreSaver(saver.store), "t")
    outcome["b"] = _turn(b_team, "r1")  # B sees m1 acked, and m2 ready
    gate.go.set()
    a.join(WAIT)
    assert m1.id in ingested_ids(saver, team, "r1"), f"m1 acked, deleted, and in no conversation: {outcome}"
    assert outcome["b"] == ("StaleWriterError", [m2.id])  # refused: it would discard A's input
    assert outcome["a"] == ("ingested", [m1.id])
    assert ingested_ids(saver, team, "r1") == [m1.id]
    assert _turn(b_team, "r1") == ("ingested", [m2.id])  # the next sweep takes m2
    assert ingested_ids(saver, team, "r1") == [m1.id, m2.id]
    assert team.inbox("r1", all=True) == []


def test_an_input_left_by_a_dead_consumer_is_finished_first_then_new_input_goes_on_top() -> None:
    """Consumer A dies right after its input checkpoint: new input is refused until someone
    finishes A's step (``invoke(None)``, as the model check's consumers and ``TeamWorker.settle``
    do); then nothing is lost."""
    saver, team = _setup()
    m1 = team.send("r1", "one", sender="s0", idempotency_key="k1")
    gate = PauseAfterFirstRootPut(saver.store, "t/r1")
    a = threading.Thread(target=_turn, args=(Team(ObjectStoreSaver(gate), "t"), "r1"))
    a.start()
    assert gate.paused.wait(WAIT)  # A "dies" here: it goes on only after the checks (refused then)
    m2 = team.send("r1", "two", sender="s0", idempotency_key="k2")
    b_team = Team(ObjectStoreSaver(saver.store), "t")
    assert _turn(b_team, "r1") == ("StaleWriterError", [m2.id])
    cfg = {"configurable": {"thread_id": "t/r1"}}
    plain = echo_build(b_team.member_saver)
    assert plain.get_state(cfg).tasks  # A's half-done turn
    plain.invoke(None, cfg, durability="sync")
    assert ingested_ids(saver, team, "r1") == [m1.id]
    assert _turn(b_team, "r1") == ("ingested", [m2.id])
    assert ingested_ids(saver, team, "r1") == [m1.id, m2.id]
    gate.go.set()
    a.join(WAIT)
    assert ingested_ids(saver, team, "r1") == [m1.id, m2.id]
