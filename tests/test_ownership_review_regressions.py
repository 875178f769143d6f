"""Regressions for the ownership bugs an adversarial review reproduced. Each failed before its fix."""

from __future__ import annotations

import math
import operator
from typing import Annotated, Any

import pytest
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.checkpoint import driver
from langgraph_handoff.errors import ConflictError, InvalidInputError, OwnershipLostError, UnknownOutcomeError
from langgraph_handoff.keys import head_key
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.ownership import SessionManager, SessionWorker
from langgraph_handoff.stores.memory import MemoryStore
from tests import graph_scenarios as scenarios


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class S(TypedDict, total=False):
    steps: Annotated[list[str], operator.add]


def cfg(thread: str = "chat", ns: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread}
    if ns is not None:
        c["checkpoint_ns"] = ns
    return {"configurable": c}


def with_subgraph(saver: Any) -> Any:
    return scenarios.with_subgraph(saver, S, "steps")


def sub_namespace(saver: ObjectStoreSaver, thread: str = "chat") -> str:
    return next(ns for ns in driver.run(saver.store, saver._plan_namespaces(thread)) if ns)


def step_in(saver: ObjectStoreSaver, thread: str, ns: str) -> None:
    """One more 'loop' checkpoint in a namespace, written from a cold cache."""
    latest = saver.get_tuple(cfg(thread, ns))
    assert latest is not None
    saver.put(latest.config, {**latest.checkpoint, "id": str(uuid6())}, {"source": "loop", "step": 99}, {})


class Hooked(MemoryStore):
    """Another client of the same MemoryStore, with hooks after get and put."""

    def __init__(self, base: MemoryStore, after_get: Any = None, after_put: Any = None, fail_root_cas: bool = False):
        self._lock, self._objects, self._keys = base._lock, base._objects, base._keys  # type: ignore[attr-defined]
        self.after_get, self.after_put, self.fail_root_cas = after_get, after_put, fail_root_cas

    def get(self, key: str) -> Any:
        obj = super().get(key)
        if self.after_get:
            self.after_get(key)
        return obj

    def put(self, key: str, body: bytes, **kw: Any) -> Any:
        etag = super().put(key, body, **kw)
        if self.after_put:
            self.after_put(key)
        if self.fail_root_cas and key == head_key("chat", "") and kw.get("if_match"):
            raise UnknownOutcomeError(key, "HTTP 500 (landed)")
        return etag


@pytest.fixture
def leased() -> tuple[MemoryStore, ObjectStoreSaver, SessionManager, Clock, Any]:
    base, clock = MemoryStore(), Clock()
    saver = ObjectStoreSaver(base)
    sessions = SessionManager(saver, clock=clock)
    a = sessions.acquire("chat", "a", ttl=10)
    with_subgraph(saver.with_lease(a)).invoke({"steps": []}, cfg())
    return base, saver, sessions, clock, a


# 1. a lock or a release stops the old owner's subgraph writes too
@pytest.mark.parametrize("how", ["lock", "release"])
def test_lock_and_release_fence_subgraph_namespaces(leased, how: str) -> None:  # type: ignore[no-untyped-def]
    base, saver, sessions, _, a = leased
    ns = sub_namespace(saver)
    sessions.begin_transfer(a, timeout=30) if how == "lock" else sessions.release(a)
    with pytest.raises(OwnershipLostError):
        step_in(ObjectStoreSaver(base).with_lease(a), "chat", ns)


# 2a. a subgraph write landing between the takeover's root CAS and its fence pass is undone
def test_subgraph_write_during_a_takeover_is_undone(leased) -> None:  # type: ignore[no-untyped-def]
    base, saver, _, clock, a = leased
    ns = sub_namespace(saver)
    before = len(saver._head_from(base.get(head_key("chat", ns)), "chat", ns)[0].records)
    outcome: list[str] = []

    def after_put(key: str) -> None:
        if key == head_key("chat", "") and not outcome:
            try:  # the takeover's lease CAS just landed; the zombie's subgraph step arrives now
                step_in(ObjectStoreSaver(base).with_lease(a), "chat", ns)
                outcome.append("accepted")
            except OwnershipLostError:
                outcome.append("refused")

    clock.t += 11
    SessionManager(ObjectStoreSaver(Hooked(base, after_put=after_put)), clock=clock).acquire("chat", "b", ttl=10)
    assert outcome == ["refused"]
    assert len(saver._head_from(base.get(head_key("chat", ns)), "chat", ns)[0].records) == before


# 2b. a brand-new namespace created while a takeover happens does not stay writable
def test_new_namespace_created_during_a_takeover_is_undone(leased) -> None:  # type: ignore[no-untyped-def]
    base, saver, sessions, clock, a = leased
    latest = saver.get_tuple(cfg())
    fired: list[int] = []

    def after_get(key: str) -> None:
        if key == head_key("chat", "") and not fired:
            fired.append(1)
            clock.t += 11
            sessions.acquire("chat", "b", ttl=10)

    zombie = ObjectStoreSaver(Hooked(base, after_get=after_get)).with_lease(a)
    with pytest.raises(OwnershipLostError):
        zombie.put(cfg("chat", "new:1"), {**latest.checkpoint, "id": str(uuid6())}, {"source": "input"}, {})
    undone, _ = saver._head_from(base.get(head_key("chat", "new:1")), "chat", "new:1")
    assert undone is not None and not undone.records  # an emptied head: the namespace reads as empty
    assert saver.get_tuple(cfg("chat", "new:1")) is None


# 3. copy_thread copies neither the lease nor the fence, and keeps the target's own
def test_copy_thread_leaves_ownership_alone(leased) -> None:  # type: ignore[no-untyped-def]
    _, saver, sessions, _, _ = leased
    saver.copy_thread("chat", "copy")
    assert sessions.get("copy") is None
    assert sessions.acquire("copy", "b", ttl=10).epoch == 1
    c = sessions.acquire("held", "c", ttl=10)
    saver.copy_thread("chat", "held")
    held = sessions.get("held")
    assert (held.owner, held.epoch) == ("c", c.epoch)


# 4. epochs only grow: delete_thread keeps a released lease and its fence
def test_epochs_survive_delete_thread(leased) -> None:  # type: ignore[no-untyped-def]
    _, saver, sessions, _, a = leased
    saver.delete_thread("chat")
    assert saver.get_tuple(cfg()) is None and list(saver.list(cfg())) == []
    c = sessions.acquire("chat", "c", ttl=10)
    assert c.epoch == 2
    with pytest.raises(OwnershipLostError):
        with_subgraph(saver.with_lease(a)).invoke({"steps": []}, cfg())
    with_subgraph(saver.with_lease(c)).invoke({"steps": []}, cfg())


# 5. a takeover whose lease write "failed" but landed still fences the subgraph heads
def test_takeover_with_unknown_outcome_still_fences_namespaces(leased) -> None:  # type: ignore[no-untyped-def]
    base, saver, _, clock, _a = leased
    ns = sub_namespace(saver)
    clock.t += 11
    b = SessionManager(ObjectStoreSaver(Hooked(base, fail_root_cas=True)), clock=clock).acquire("chat", "b", ttl=10)
    assert b.epoch == 2
    assert saver._head_from(base.get(head_key("chat", ns)), "chat", ns)[0].extra["fence"] == 2


# 6. the async path finishes a dead worker's step too
async def test_ainvoke_settles_first(store) -> None:  # type: ignore[no-untyped-def]
    from langchain_core.messages import HumanMessage

    from tests.test_ownership_worker import _chat, _DiesBeforeCheckpoint

    clock = Clock()
    a = SessionWorker(SessionManager(_DiesBeforeCheckpoint(store), clock=clock), "a", _chat, ttl=30)
    a.invoke("chat", {"messages": [HumanMessage("q1", id="q1")]})
    with pytest.raises(SystemExit):
        a.invoke("chat", {"messages": [HumanMessage("q2", id="q2")]})
    a._stopping.set()
    clock.t += 31
    b = SessionWorker(SessionManager(ObjectStoreSaver(store), clock=clock), "b", _chat, ttl=30)
    b.reclaim()
    out = await b.ainvoke("chat", {"messages": [HumanMessage("q3", id="q3")]})
    assert [m.content for m in out["messages"]] == ["q1", "answer to q1", "q2", "answer to q2", "q3", "answer to q3"]
    b.stop()


# 7. a thread paused at a static breakpoint is not pushed past it by the new owner
def test_settle_leaves_breakpoints_alone() -> None:
    store, effects = MemoryStore(), []

    def build(cp: Any) -> Any:
        g = StateGraph(S)
        g.add_node("draft", lambda s: {"steps": ["drafted"]})
        g.add_node("send", lambda s: (effects.append("sent"), {"steps": ["sent"]})[1])
        g.add_edge(START, "draft")
        g.add_edge("draft", "send")
        g.add_edge("send", END)
        return g.compile(checkpointer=cp, interrupt_before=["send"])

    a = SessionWorker(SessionManager(ObjectStoreSaver(store)), "a", build, ttl=30)
    a.invoke("chat", {"steps": ["refund?"]})
    a.stop()
    b = SessionWorker(SessionManager(ObjectStoreSaver(store)), "b", build, ttl=30)
    b.accept_transfers()
    b.invoke("chat", {"steps": ["wait, do not refund"]})
    assert effects == []
    b.stop()


# 8. a renew failure of any kind never kills the heartbeat
def test_heartbeat_survives_unexpected_renew_errors() -> None:
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


# 9. memory search understands comparison operators instead of matching them literally
def test_memory_filter_operators() -> None:
    memory = ObjectStoreMemory(MemoryStore())
    memory.put(("users", "u1"), "p", {"a": 1})
    memory.put(("users", "u2"), "p", {"a": 2})
    assert [i.namespace for i in memory.search(("users",), filter={"a": {"$gt": 1}})] == [("users", "u2")]
    assert [i.namespace for i in memory.search(("users",), filter={"a": {"$ne": 1}})] == [("users", "u2")]
    assert len(memory.search(("users",), filter={"a": {"$gte": 1, "$lte": 2}})) == 2
    with pytest.raises(InvalidInputError, match="unsupported filter operators"):
        memory.search(("users",), filter={"a": {"$regex": "x"}})


# 10. an infinite ttl or timeout would make a session unreclaimable
@pytest.mark.parametrize("value", [math.inf, math.nan])
def test_infinite_ttls_are_refused(value: float) -> None:
    sessions = SessionManager(ObjectStoreSaver(MemoryStore()))
    with pytest.raises(InvalidInputError):
        sessions.acquire("chat", "a", ttl=value)
    lease = sessions.acquire("chat", "a", ttl=10)
    with pytest.raises(InvalidInputError):
        sessions.begin_transfer(lease, timeout=value)


# -- fourth review round -------------------------------------------------------------------------------


# 1. undoing a namespace the zombie created never destroys the new owner's checkpoints there
def test_undo_never_destroys_a_new_owners_namespace(leased) -> None:  # type: ignore[no-untyped-def]
    base, saver, _, clock, a = leased
    latest = saver.get_tuple(cfg())
    written: dict[str, str] = {}

    def after_put(key: str) -> None:
        if key == head_key("chat", "new:1") and not written:
            clock.t += 11
            b = SessionManager(ObjectStoreSaver(base), clock=clock).acquire("chat", "b", ttl=10)
            owner = ObjectStoreSaver(base).with_lease(b)
            t = owner.get_tuple(cfg("chat", "new:1"))
            written["cid"] = str(uuid6())
            owner.put(t.config, {**t.checkpoint, "id": written["cid"]}, {"source": "loop", "step": 100}, {})

    zombie = ObjectStoreSaver(Hooked(base, after_put=after_put)).with_lease(a)
    with pytest.raises(OwnershipLostError):
        zombie.put(cfg("chat", "new:1"), {**latest.checkpoint, "id": str(uuid6())}, {"source": "input"}, {})
    kept = ObjectStoreSaver(base).get_tuple(cfg("chat", "new:1"))
    assert kept is not None and kept.config["configurable"]["checkpoint_id"] == written["cid"]


# 2. a takeover's epoch stamp on the zombie's head does not stop the undo
def test_fence_stamp_does_not_stop_the_undo(leased) -> None:  # type: ignore[no-untyped-def]
    base, saver, _, clock, a = leased
    ns = sub_namespace(saver)
    before = sorted(saver._head_from(base.get(head_key("chat", ns)), "chat", ns)[0].records)
    fired: list[int] = []

    def after_put(key: str) -> None:
        if key == head_key("chat", ns) and not fired:
            fired.append(1)
            clock.t += 11
            SessionManager(ObjectStoreSaver(base), clock=clock).acquire("chat", "b", ttl=10)

    with pytest.raises(OwnershipLostError):
        step_in(ObjectStoreSaver(Hooked(base, after_put=after_put)).with_lease(a), "chat", ns)
    head = saver._head_from(base.get(head_key("chat", ns)), "chat", ns)[0]
    assert sorted(head.records) == before and head.extra["fence"] == 2


# 3. acquiring again finishes a fence pass that gave up
def test_acquire_again_finishes_an_interrupted_fence_pass(leased) -> None:  # type: ignore[no-untyped-def]
    base, saver, _, clock, _a = leased
    ns = sub_namespace(saver)

    class RefuseSubHeads(Hooked):
        def put(self, key: str, body: bytes, **kw: Any) -> Any:
            if key == head_key("chat", ns):
                from langgraph_handoff.errors import PreconditionFailedError

                raise PreconditionFailedError(key, "test: refuse the fence pass")
            return super().put(key, body, **kw)

    clock.t += 11
    with pytest.raises(ConflictError, match="call acquire again"):
        SessionManager(ObjectStoreSaver(RefuseSubHeads(base)), clock=clock).acquire("chat", "b", ttl=10)
    SessionManager(ObjectStoreSaver(base), clock=clock).acquire("chat", "b", ttl=10)
    assert saver._head_from(base.get(head_key("chat", ns)), "chat", ns)[0].extra["fence"] == 2


# 4. delete_thread does not overwrite a conversation re-created while it deletes
def test_delete_thread_does_not_overwrite_a_recreated_thread(leased) -> None:  # type: ignore[no-untyped-def]
    base, _saver, sessions, clock, _a = leased
    fired: list[int] = []

    class RecreateDuringDelete(Hooked):
        def delete_many(self, keys: Any) -> Any:
            out = super().delete_many(keys)
            if not fired:
                fired.append(1)
                clock.t += 1
                c = sessions.acquire("chat", "c", ttl=10)
                with_subgraph(ObjectStoreSaver(base).with_lease(c)).invoke({"steps": ["NEW"]}, cfg())
            return out

    ObjectStoreSaver(RecreateDuringDelete(base)).delete_thread("chat")
    lease = sessions.get("chat")
    assert lease is not None and lease.epoch >= 2


# 6 + 7. a migration step's change is detected on the serialized value (arrays, 1 vs 1.0)
def test_migration_changes_are_compared_as_stored(store) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    from langgraph_handoff.migrations import SchemaMigrations

    class E(TypedDict, total=False):
        emb: Any
        n: Any

    def build(saver: Any) -> Any:
        g = StateGraph(E)
        g.add_node("a", lambda s: {"emb": np.array([0.0, 1.0]), "n": 1})
        g.add_edge(START, "a")
        g.add_edge("a", END)
        return g.compile(checkpointer=saver)

    build(ObjectStoreSaver(store)).invoke({}, cfg())
    m = SchemaMigrations()

    @m.register(1, "n becomes a float")
    def fn(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        values["n"] = float(values["n"])  # 1.0 == 1, but it is stored differently

    tup = ObjectStoreSaver(store, migrations=m).get_tuple(cfg())  # arrays must not break the comparison
    old = ObjectStoreSaver(store).get_tuple(cfg())
    assert tup.checkpoint["channel_versions"]["n"] != old.checkpoint["channel_versions"]["n"]
    assert tup.checkpoint["channel_versions"]["emb"] == old.checkpoint["channel_versions"]["emb"]


# 9. list(filter=...) filters on the metadata readers see (migrated)
def test_list_filter_sees_migrated_metadata(store) -> None:  # type: ignore[no-untyped-def]
    from langgraph_handoff.migrations import SchemaMigrations
    from tests.test_migrations import CFG, v1_graph

    v1_graph(ObjectStoreSaver(store)).invoke({"log": ["hi"]}, CFG)
    m = SchemaMigrations()

    @m.register(1, "mark")
    def mark(values: dict[str, Any], metadata: dict[str, Any]) -> None:
        metadata["migrated"] = True

    saver = ObjectStoreSaver(store, migrations=m)
    assert len(list(saver.list(CFG, filter={"migrated": True}))) == len(list(saver.list(CFG))) > 0
