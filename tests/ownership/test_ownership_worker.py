"""SessionWorker: heartbeat, lost leases, planned handoff on stop/SIGTERM, takeover with replay
of completed tasks."""

from __future__ import annotations

import operator
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Annotated, Any

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import ConflictError, LeaseHeldError, OwnershipLostError
from langgraph_handoff.ownership import SessionManager, SessionWorker, WorkerStoppingError
from langgraph_handoff.stores import MemoryStore

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class S(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def linear(checkpointer: Any) -> Any:
    g = StateGraph(S)
    g.add_node("step", lambda s: {"log": ["step"]})
    g.add_edge(START, "step")
    g.add_edge("step", END)
    return g.compile(checkpointer=checkpointer)


@pytest.fixture
def fleet(store):  # type: ignore[no-untyped-def]
    clock = Clock()
    saver = ObjectStoreSaver(store)

    def worker(name: str, build: Any = linear, **kw: Any) -> SessionWorker:
        # each worker is its own "process": its own saver (cache) on the shared store
        return SessionWorker(SessionManager(ObjectStoreSaver(store), clock=clock), name, build, ttl=30, **kw)

    return saver, clock, worker


def test_heartbeat_keeps_the_session_and_notices_a_loss(fleet) -> None:  # type: ignore[no-untyped-def]
    saver, clock, worker = fleet
    a, b = worker("a"), worker("b")
    a.invoke("chat", {"log": ["hi"]})
    clock.t += 25
    a.beat()  # the heartbeat renews: still owned 25 s later
    clock.t += 25
    with pytest.raises(LeaseHeldError):
        b.invoke("chat", {"log": ["b"]})
    SessionManager(saver, clock=clock).acquire("chat", "ops", ttl=30, force=True)
    a.beat()  # one write of a's liveness record: it reads no lease, so it notices nothing yet
    with pytest.raises(OwnershipLostError):
        a.invoke("chat", {"log": ["late"]})  # the first write after the takeover is refused ...
    assert "chat" in a.lost and "chat" not in a.leases  # ... and the worker forgets the session
    a.stop()


def test_heartbeat_survives_unexpected_renew_errors() -> None:
    """A renew failure of any kind never kills the heartbeat.

    Found by an adversarial review of session ownership; fails before commit 596ef7d."""
    sessions = SessionManager(ObjectStoreSaver(MemoryStore()))
    worker = SessionWorker(sessions, "w", lambda cp: None, ttl=30)
    worker._hold(sessions.acquire("chat", "w", ttl=30))
    real = sessions.renew
    calls: list[int] = []

    def flaky(lease: Any, ttl: Any = None) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise ConflictError("the lease kept changing under us")
        return real(lease, ttl)

    sessions.renew = flaky  # type: ignore[method-assign]
    worker.beat()  # must not raise
    worker.beat()
    assert len(calls) == 2 and "chat" in worker.leases
    worker.stop()


def test_stop_hands_sessions_over_and_another_worker_continues(fleet) -> None:  # type: ignore[no-untyped-def]
    saver, clock, worker = fleet
    a, b = worker("a"), worker("b")
    a.invoke("chat-1", {"log": ["1"]})
    a.invoke("chat-2", {"log": ["2"]})
    assert sorted(a.stop(next_step="answer the customer")) == ["chat-1", "chat-2"]
    with pytest.raises(WorkerStoppingError):
        a.invoke("chat-3", {"log": ["3"]})
    infos = {i.thread_id: i for i in SessionManager(saver, clock=clock).sessions()}
    assert {i.status for i in infos.values()} == {"transferring"}
    assert infos["chat-1"].lease.transfer.note["payload"]["next_step"] == "answer the customer"
    taken = b.accept_transfers()
    assert sorted((t.thread_id, t.epoch, t.via) for t in taken) == [
        ("chat-1", 2, "transfer"),
        ("chat-2", 2, "transfer"),
    ]
    assert b.invoke("chat-1", {"log": ["more"]})["log"] == ["1", "step", "more", "step"]
    with pytest.raises(OwnershipLostError):  # a's old graph cannot write any more
        linear(saver.with_lease(SessionManager(saver).get("chat-1").model_copy(update={"epoch": 1}))).invoke(
            {"log": ["late"]}, {"configurable": {"thread_id": "chat-1"}}
        )
    b.stop()


def test_takeover_replays_completed_tasks_instead_of_running_them_again(fleet, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Worker A dies in a superstep after one task finished (its writes are stored) and before
    the other did. Worker B takes the session over and resumes: the finished task is replayed
    from its stored writes, not executed again, so its side effect happens once."""
    _saver, clock, worker = fleet
    effects: list[str] = []
    crash = {"on": True}
    paid_stored = threading.Event()
    store_writes = ObjectStoreSaver.put_writes

    def put_writes(self: ObjectStoreSaver, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        store_writes(self, config, writes, task_id, task_path)
        if any(value == ["paid"] for _channel, value in writes):
            paid_stored.set()

    monkeypatch.setattr(ObjectStoreSaver, "put_writes", put_writes)

    def pay(s: S) -> S:
        effects.append("paid")
        return {"log": ["paid"]}

    def notify(s: S) -> S:
        if crash["on"]:
            # die only once pay's writes are stored (the point of the test), not before: a
            # crash that lands first stops LangGraph from storing them, which is another story
            assert paid_stored.wait(30)
            raise SystemExit("worker A died here")  # as abrupt as it gets in-process
        return {"log": ["notified"]}

    def build(checkpointer: Any) -> Any:
        g = StateGraph(S)
        g.add_node("pay", pay)
        g.add_node("notify", notify)
        g.add_edge(START, "pay")
        g.add_edge(START, "notify")
        g.add_edge("pay", END)
        g.add_edge("notify", END)
        return g.compile(checkpointer=checkpointer)

    a = worker("a", build)
    with pytest.raises(SystemExit):
        a.invoke("chat", {"log": ["refund please"]})
    a._stopping.set()  # A is dead: no heartbeat any more
    clock.t += 31
    crash["on"] = False
    b = worker("b", build)
    (lease,) = b.reclaim()
    assert (lease.thread_id, lease.epoch, lease.via) == ("chat", 2, "takeover")
    out = b.invoke("chat", None)  # resume from the latest checkpoint
    assert sorted(out["log"]) == sorted(["refund please", "paid", "notified"])
    assert effects == ["paid"]
    b.stop()


def test_sigterm_hands_over_and_exits(tmp_path: Path) -> None:
    store = tmp_path / "store"
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from tests.ownership.test_ownership_worker import linear
        from langgraph_handoff import ObjectStoreSaver
        from langgraph_handoff.ownership import SessionManager, SessionWorker
        worker = SessionWorker(SessionManager(ObjectStoreSaver.from_url("file://{store}")), "w1", linear, ttl=60)
        with worker.handle_sigterm():
            worker.invoke("chat", {{"log": ["hi"]}})
            print("ready", flush=True)
            while not worker.stopping:
                time.sleep(0.01)  # a serving loop would take the next request here
            print("handed", worker.stop(), flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "handed ['chat']" in out
    info = SessionManager(ObjectStoreSaver.from_url(f"file://{store}")).sessions()
    assert [(i.thread_id, i.status, i.lease.transfer.from_owner) for i in info] == [("chat", "transferring", "w1")]


def test_cli_sessions_shows_who_is_responsible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from langgraph_handoff.cli import main

    url = f"file://{tmp_path / 'store'}"
    sessions = SessionManager(ObjectStoreSaver.from_url(url))
    sessions.acquire("fine", "a", ttl=600)
    sessions.acquire("dead", "a", ttl=0.001)
    assert main(["sessions", url, "--json"]) == 1
    rows = {r["thread_id"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["fine"]["status"] == "owned" and rows["dead"]["status"] == "expired"
    assert main(["sessions", url, "--attention", "--json"]) == 1
    assert [json.loads(x)["thread_id"] for x in capsys.readouterr().out.splitlines()] == ["dead"]
    assert main(["sessions", url, "--reclaim-as", "doctor", "--ttl", "600", "--json"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert out[0] == {"reclaimed": "dead", "owner": "doctor", "epoch": 2}
    # without --json, readable lines as the README says (--reclaim-as used to switch to JSON)
    sessions.acquire("dead-2", "a", ttl=0.001)
    assert main(["sessions", url, "--reclaim-as", "doctor", "--ttl", "600"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "reclaimed dead-2\towner doctor\tepoch 2"
    assert "dead-2\towned\towner doctor\tepoch 2" in lines and not any(x.startswith("{") for x in lines)


def _chat(checkpointer: Any) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import MessagesState

    def answer(state: MessagesState) -> dict[str, Any]:
        q = state["messages"][-1]
        assert isinstance(q, HumanMessage)
        return {"messages": [AIMessage(f"answer to {q.content}", id=f"a-{q.id}")]}

    g = StateGraph(MessagesState)
    g.add_node("answer", answer)
    g.add_edge(START, "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=checkpointer)


class _DiesBeforeCheckpoint(ObjectStoreSaver):
    """The worker dies after the answer's writes are stored and before the checkpoint is."""

    def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[no-untyped-def, override]
        msgs = checkpoint["channel_values"].get("messages", [])
        if any(getattr(m, "content", "") == "answer to q2" for m in msgs):
            raise SystemExit("killed between put_writes and put")
        return super().put(config, checkpoint, metadata, new_versions)


def _dies_answering_q2(store: Any) -> SessionWorker:
    """Worker a answers q1, then dies between q2's answer (its writes stored) and q2's checkpoint;
    its lease expires. Returns worker b, there to reclaim the session."""
    from langchain_core.messages import HumanMessage

    clock = Clock()
    a = SessionWorker(SessionManager(_DiesBeforeCheckpoint(store), clock=clock), "a", _chat, ttl=30)
    a.invoke("chat", {"messages": [HumanMessage("q1", id="q1")]})
    with pytest.raises(SystemExit):
        a.invoke("chat", {"messages": [HumanMessage("q2", id="q2")]})
    a._stopping.set()
    clock.t += 31
    return SessionWorker(SessionManager(ObjectStoreSaver(store), clock=clock), "b", _chat, ttl=30)


@pytest.mark.parametrize("settle", [True, False])
def test_new_input_after_a_takeover_does_not_lose_the_previous_answer(store, settle: bool) -> None:  # type: ignore[no-untyped-def]
    from langchain_core.messages import HumanMessage

    b = _dies_answering_q2(store)
    (lease,) = b.reclaim()
    msg = {"messages": [HumanMessage("q3", id="q3")]}
    if settle:
        out = b.invoke("chat", msg)  # SessionWorker finishes the interrupted step first
    else:  # what plain LangGraph does with new input on that checkpoint
        out = b.graph_for(lease).invoke(msg, {"configurable": {"thread_id": "chat"}})
    texts = [m.content for m in out["messages"]]
    if settle:
        assert texts == ["q1", "answer to q1", "q2", "answer to q2", "q3", "answer to q3"]
    else:
        assert "answer to q2" not in texts  # LangGraph dropped the completed task's writes
    b.stop()


async def test_ainvoke_settles_first(store) -> None:  # type: ignore[no-untyped-def]
    """The async path finishes a dead worker's step too.

    Found by an adversarial review of session ownership; fails before commit 596ef7d."""
    from langchain_core.messages import HumanMessage

    b = _dies_answering_q2(store)
    b.reclaim()
    out = await b.ainvoke("chat", {"messages": [HumanMessage("q3", id="q3")]})
    assert [m.content for m in out["messages"]] == ["q1", "answer to q1", "q2", "answer to q2", "q3", "answer to q3"]
    b.stop()


def test_settle_leaves_breakpoints_alone() -> None:
    """A thread paused at a static breakpoint is not pushed past it by the new owner.

    Found by an adversarial review of session ownership; fails before commit 596ef7d."""
    store, effects = MemoryStore(), []

    def build(cp: Any) -> Any:
        g = StateGraph(S)
        g.add_node("draft", lambda s: {"log": ["drafted"]})
        g.add_node("send", lambda s: (effects.append("sent"), {"log": ["sent"]})[1])
        g.add_edge(START, "draft")
        g.add_edge("draft", "send")
        g.add_edge("send", END)
        return g.compile(checkpointer=cp, interrupt_before=["send"])

    a = SessionWorker(SessionManager(ObjectStoreSaver(store)), "a", build, ttl=30)
    a.invoke("chat", {"log": ["refund?"]})
    a.stop()
    b = SessionWorker(SessionManager(ObjectStoreSaver(store)), "b", build, ttl=30)
    b.accept_transfers()
    b.invoke("chat", {"log": ["wait, do not refund"]})
    assert effects == []
    b.stop()
