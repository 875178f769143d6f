"""A worker's heartbeat renews one liveness record, not each lease: it costs one request
however many sessions the worker holds, and the sessions stay held as long as it beats.

Before liveness records, a beat renewed every lease in turn (a compare-and-swap of each
thread's head: 2 requests); over 3,000 sessions on RGW one beat took 19.3 s, and past about
3,100 sessions a healthy worker's leases lapsed between beats. Each test below failed then:
the request count grew with the sessions, and there was no ``max_sessions``.
"""

from __future__ import annotations

import json
import operator
import time
from typing import Annotated, Any

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.checkpoint import liveness
from langgraph_handoff.errors import InvalidInputError, LeaseHeldError, OwnershipLostError, SessionLimitError
from langgraph_handoff.ownership import SessionManager, SessionWorker
from langgraph_handoff.stores import MemoryStore
from langgraph_handoff.stores.counting import CountingStore


class Clock:
    """Now, moved on by hand (checkpoint ids carry the real time, which the TTL sweep reads)."""

    def __init__(self) -> None:
        self.t = time.time()

    def __call__(self) -> float:
        return self.t


class S(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


BUILT: list[Any] = []


def build(checkpointer: Any) -> Any:
    BUILT.append(checkpointer)
    g = StateGraph(S)
    g.add_node("step", lambda s: {"log": ["step"]})
    g.add_edge(START, "step")
    g.add_edge("step", END)
    return g.compile(checkpointer=checkpointer)


@pytest.fixture
def fleet() -> Any:
    store, clock = CountingStore(MemoryStore()), Clock()

    def worker(name: str, **kw: Any) -> SessionWorker:
        # each worker is its own "process": its own saver (cache) on the shared store
        return SessionWorker(
            SessionManager(ObjectStoreSaver(store, clock=clock), clock=clock), name, build, ttl=30, **kw
        )

    return store, clock, worker


@pytest.mark.parametrize("sessions", [1, 40])
def test_a_beat_is_one_request_however_many_sessions_are_held(fleet: Any, sessions: int) -> None:
    store, _clock, worker = fleet
    a = worker("a")
    for i in range(sessions):
        a.invoke(f"chat-{i}", {"log": ["hi"]})
    store.reset()
    a.beat()
    assert store.snapshot()["requests"] == 1
    assert store.log == [("PUT", f"workers/a/{a.incarnation}")]
    a.stop()


def test_sessions_stay_held_while_the_worker_beats_and_free_once_it_stops_beating(fleet: Any) -> None:
    store, clock, worker = fleet
    a, b = worker("a"), worker("b")
    for i in range(3):
        a.invoke(f"chat-{i}", {"log": ["hi"]})
    for _ in range(4):  # 100 s: far past each lease's own 30 s, renewed only by the record
        clock.t += 25
        a.beat()
    with pytest.raises(LeaseHeldError):
        b.invoke("chat-0", {"log": ["b"]})
    monitor = SessionManager(ObjectStoreSaver(store, clock=clock), clock=clock)
    assert {i.status for i in monitor.sessions()} == {"owned"}
    assert b.reclaim() == []
    clock.t += 31  # a died: its record lapses, and with it every lease it held
    assert {i.status for i in monitor.sessions()} == {"expired"}
    assert sorted(lease.thread_id for lease in b.reclaim()) == ["chat-0", "chat-1", "chat-2"]
    with pytest.raises(OwnershipLostError):
        a.invoke("chat-1", {"log": ["late"]})  # fencing refuses the old owner, whatever its record says
    assert b.invoke("chat-1", {"log": ["b"]})["log"][-2:] == ["b", "step"]


def test_the_session_monitor_reads_each_record_once(fleet: Any) -> None:
    store, clock, worker = fleet
    a = worker("a")
    for i in range(10):
        a.invoke(f"chat-{i}", {"log": ["hi"]})
    clock.t += 40
    a.beat()
    monitor = SessionManager(ObjectStoreSaver(store, clock=clock), clock=clock)
    store.reset()
    assert {i.status for i in monitor.sessions()} == {"owned"}
    assert [k for op, k in store.log if k.startswith("workers/")] == [f"workers/a/{a.incarnation}"]


def test_a_stopped_worker_leaves_what_it_could_not_hand_over_free_at_once(fleet: Any) -> None:
    _store, clock, worker = fleet
    a = worker("a")
    a.invoke("chat", {"log": ["hi"]})
    a.sessions.keep_alive("a", a.incarnation, 3600)  # alive for an hour, as far as the record says
    clock.t += 31
    # the hand-over fails (the store refuses the lock), then the record is marked stopped
    real = a.sessions.begin_transfer

    def refuse(*args: Any, **kwargs: Any) -> Any:
        from langgraph_handoff.errors import StoreUnavailableError

        raise StoreUnavailableError("the store is down (test)")

    a.sessions.begin_transfer = refuse  # type: ignore[method-assign]
    assert a.stop() == []
    a.sessions.begin_transfer = real  # type: ignore[method-assign]
    b = worker("b")
    assert [lease.thread_id for lease in b.reclaim()] == ["chat"]


def test_a_worker_refuses_sessions_past_max_sessions_before_any_request(fleet: Any) -> None:
    store, _clock, worker = fleet
    a = worker("a", max_sessions=2)
    a.invoke("chat-1", {"log": ["hi"]})
    a.invoke("chat-2", {"log": ["hi"]})
    store.reset()
    with pytest.raises(SessionLimitError, match="holds 2 sessions, its max_sessions") as err:
        a.invoke("chat-3", {"log": ["hi"]})
    assert (err.value.owner, err.value.limit, err.value.thread_id) == ("a", 2, "chat-3")
    assert store.requests == 0
    a.invoke("chat-1", {"log": ["again"]})  # sessions it holds are served as before
    a.release("chat-2")
    a.invoke("chat-3", {"log": ["hi"]})
    with pytest.raises(InvalidInputError):
        worker("c", max_sessions=0)


def test_reclaim_takes_no_more_than_the_room_left(fleet: Any) -> None:
    _store, clock, worker = fleet
    a = worker("a")
    for i in range(5):
        a.invoke(f"chat-{i}", {"log": ["hi"]})
    clock.t += 31  # a never beat: all five are reclaimable
    b = worker("b", max_sessions=3)
    b.invoke("own", {"log": ["hi"]})
    assert len(b.reclaim()) == 2 and len(b.leases) == 3


def test_the_graph_is_built_once_per_worker(fleet: Any) -> None:
    _store, _clock, worker = fleet
    a = worker("a")
    BUILT.clear()
    for turn in range(3):
        for i in range(4):
            a.invoke(f"chat-{i}", {"log": [f"t{turn}"]})
    assert len(BUILT) == 1


async def test_the_async_worker_beats_the_same_record(fleet: Any) -> None:
    _store, clock, worker = fleet
    a, b = worker("a"), worker("b")
    await a.ainvoke("chat", {"log": ["hi"]})
    clock.t += 25
    await a.sessions.akeep_alive("a", a.incarnation, a.ttl)
    clock.t += 25
    with pytest.raises(LeaseHeldError):
        await b.ainvoke("chat", {"log": ["b"]})
    assert a.leases["chat"].liveness == a.incarnation


def test_a_record_that_is_not_one_counts_as_expired(fleet: Any) -> None:
    """A hostile or damaged record never keeps a session from its next owner for longer than
    the lease's own time, and never fails the monitor."""
    store, clock, worker = fleet
    a = worker("a")
    a.invoke("chat", {"log": ["hi"]})
    store.put(f"workers/a/{a.incarnation}", b"not an envelope")
    clock.t += 31
    monitor = SessionManager(ObjectStoreSaver(store, clock=clock), clock=clock)
    assert [i.status for i in monitor.sessions()] == ["expired"]
    other = liveness.encode_record(liveness.WorkerRecord("someone-else", a.incarnation, clock.t + 999))
    store.put(f"workers/a/{a.incarnation}", other)  # a record naming another worker is not a's
    assert [i.status for i in monitor.sessions()] == ["expired"]


def test_the_ttl_sweep_keeps_an_idle_session_while_its_worker_beats(fleet: Any) -> None:
    store, clock, worker = fleet
    a = worker("a")
    a.invoke("chat", {"log": ["hi"]})
    janitor = ObjectStoreSaver(store, clock=clock)
    for _ in range(6):  # 3 minutes idle, past a 1-minute TTL and the lease's own 30 s
        clock.t += 30
        a.beat()
    assert [t.status for t in janitor.sweep(default_ttl=1).threads] == ["kept"]
    clock.t += 31  # the worker died: its record lapsed
    assert [t.status for t in janitor.sweep(default_ttl=1).threads] == ["deleted"]


def test_stop_hands_each_session_over_in_two_requests(fleet: Any) -> None:
    """A worker's own changes to its leases never read its liveness record (only a decision on
    whether a lease lapsed does), even long after the leases' own time."""
    store, clock, worker = fleet
    a = worker("a")
    for i in range(5):
        a.invoke(f"chat-{i}", {"log": ["hi"]})
    clock.t += 120
    a.beat()
    store.reset()
    assert sorted(a.stop()) == [f"chat-{i}" for i in range(5)]
    assert store.snapshot() == {"GET": 5, "PUT": 6, "requests": 11, "round_trips": 11}


def test_the_session_monitor_reports_a_damaged_head_and_goes_on(fleet: Any) -> None:
    """It raised CorruptObjectError at the first root head it could not read (or whose lease it
    could not), and reported no other session: the fuzzer's session reader found it."""
    from langgraph_handoff.errors import CorruptObjectError

    store, clock, worker = fleet
    a = worker("a")
    for tid in ("chat-1", "chat-2", "chat-3"):
        a.invoke(tid, {"log": ["hi"]})
    store.put("heads/chat-2/=", b"not a head at all")
    monitor = SessionManager(ObjectStoreSaver(store, clock=clock), clock=clock)
    damaged: list[Any] = []
    infos = monitor.sessions(on_damaged=damaged.append)
    assert [i.thread_id for i in infos] == ["chat-1", "chat-3"]
    assert [d.key for d in damaged] == ["heads/chat-2/="]
    with pytest.raises(CorruptObjectError):  # asked for that session by name: its error
        monitor.sessions(["chat-2"])
    assert [lease.thread_id for lease in worker("b").reclaim()] == []  # the walk of a reclaim goes on too


def test_the_sessions_command_says_which_head_it_skipped(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from langgraph_handoff.cli import app
    from langgraph_handoff.stores import LocalStore

    saver = ObjectStoreSaver(LocalStore(str(tmp_path)))
    sessions = SessionManager(saver)
    sessions.acquire("chat-1", "a", 30)
    sessions.acquire("chat-2", "a", 30)
    (tmp_path / "heads" / "chat-2" / "=").write_bytes(b"not a head")
    run = CliRunner().invoke(app, ["sessions", f"file://{tmp_path}", "--json"])
    assert run.exit_code == 1
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    assert [r["thread_id"] for r in rows if "thread_id" in r] == ["chat-1"]
    assert [r["damaged"]["key"] for r in rows if "damaged" in r] == ["heads/chat-2/="]
