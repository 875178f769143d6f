"""Session ownership: leases, fencing epochs, the three-phase transfer, forced takeover and
monitoring, on the offline stores. Races use real threads and OS processes."""

from __future__ import annotations

import itertools
import math
import operator
import threading
from typing import Annotated, Any

import pytest
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph
from langgraph.types import StateUpdate
from typing_extensions import TypedDict

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff._format.keys import head_key
from langgraph_handoff.checkpoint.fencing import write_refusal
from langgraph_handoff.errors import (
    ConflictError,
    InvalidConfigError,
    InvalidInputError,
    LeaseHeldError,
    OwnershipLostError,
    TransferError,
    UnknownOutcomeError,
)
from langgraph_handoff.ownership import SessionManager, session_note
from langgraph_handoff.stores import MemoryStore
from tests.support import graph_scenarios as scenarios
from tests.support.migrate_helpers import Tripwire
from tests.support.processes import process_context
from tests.support.race_helpers import check_linear_history, make_store


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class S(TypedDict, total=False):
    steps: Annotated[list[str], operator.add]


def graph(saver: ObjectStoreSaver, who: str) -> Any:
    g = StateGraph(S)
    g.add_node("a", lambda s: {"steps": [f"{who}:a"]})
    g.add_node("b", lambda s: {"steps": [f"{who}:b"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g.compile(checkpointer=saver)


def cfg(thread: str = "chat", ns: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread}
    if ns is not None:
        c["checkpoint_ns"] = ns
    return {"configurable": c}


def with_subgraph(saver: Any) -> Any:
    """A graph whose node runs a subgraph (``tests.support.graph_scenarios.with_subgraph``) over ``S``."""
    return scenarios.with_subgraph(saver, S, "steps")


@pytest.fixture
def setup(store) -> tuple[ObjectStoreSaver, SessionManager, Clock]:  # type: ignore[no-untyped-def]
    clock = Clock()
    saver = ObjectStoreSaver(store)
    return saver, SessionManager(saver, clock=clock), clock


def writable_epochs(saver: ObjectStoreSaver, thread: str, epochs: range) -> list[int]:
    """Which lease epochs the store would accept a write from right now."""
    obj = saver.store.get(head_key(thread, ""))
    head, _ = saver.heads.decode(obj, thread, "")
    assert head is not None
    return [e for e in epochs if write_refusal(head.meta, e) is None and e >= 1]


# -- leases --------------------------------------------------------------------------------------------


def test_acquire_renew_release_and_expiry(setup) -> None:  # type: ignore[no-untyped-def]
    _saver, sessions, clock = setup
    a = sessions.acquire("chat", "worker-a", ttl=30)
    assert (a.owner, a.epoch, a.expires_at, a.via) == ("worker-a", 1, 1030.0, "acquire")
    assert sessions.acquire("chat", "worker-a", ttl=30).epoch == 1  # re-acquire by the owner renews
    with pytest.raises(LeaseHeldError, match="owned by 'worker-a'"):
        sessions.acquire("chat", "worker-b", ttl=30)
    clock.t += 20
    a = sessions.renew(a, ttl=30)
    assert a.expires_at == 1050.0
    clock.t += 31  # expired: another worker may take over, epoch + 1
    b = sessions.acquire("chat", "worker-b", ttl=30)
    assert (b.epoch, b.via) == (2, "takeover")
    with pytest.raises(OwnershipLostError):
        sessions.renew(a)
    released = sessions.release(b)
    assert released.state == "released"
    c = sessions.acquire("chat", "worker-c", ttl=30)  # released: free at once
    assert (c.epoch, c.via) == (3, "acquire")


def test_renewal_after_expiry_works_while_nobody_took_over(setup) -> None:  # type: ignore[no-untyped-def]
    _, sessions, clock = setup
    a = sessions.acquire("chat", "a", ttl=5)
    clock.t += 60
    assert sessions.renew(a, ttl=5).epoch == 1


def test_force_takes_a_live_session(setup) -> None:  # type: ignore[no-untyped-def]
    _, sessions, _ = setup
    sessions.acquire("chat", "a", ttl=30)
    assert sessions.acquire("chat", "ops", ttl=30, force=True).epoch == 2


@pytest.mark.parametrize(
    "bad", [dict(owner="", ttl=3), dict(owner="a", ttl=0), dict(owner="a", ttl="3"), dict(owner=None, ttl=3)]
)
def test_bad_lease_input_is_a_typed_error(setup, bad) -> None:  # type: ignore[no-untyped-def]
    _, sessions, _ = setup
    with pytest.raises(InvalidInputError):
        sessions.acquire("chat", bad["owner"], bad["ttl"])


@pytest.mark.parametrize("value", [math.inf, math.nan])
def test_infinite_ttls_are_refused(value: float) -> None:
    """An infinite ttl or timeout would make a session unreclaimable.

    Found by an adversarial review of session ownership; fails before commit 596ef7d."""
    sessions = SessionManager(ObjectStoreSaver(MemoryStore()))
    with pytest.raises(InvalidInputError):
        sessions.acquire("chat", "a", ttl=value)
    lease = sessions.acquire("chat", "a", ttl=10)
    with pytest.raises(InvalidInputError):
        sessions.begin_transfer(lease, timeout=value)


# -- fencing -----------------------------------------------------------------------------------------------


def test_superseded_worker_cannot_write_and_nothing_is_stored(setup) -> None:  # type: ignore[no-untyped-def]
    saver, sessions, clock = setup
    a = sessions.acquire("chat", "a", ttl=10)
    graph(saver.with_lease(a), "A").invoke({"steps": ["in"]}, cfg())
    clock.t += 11
    b = sessions.acquire("chat", "b", ttl=10)  # a's worker is paused (a zombie); b takes over
    before = len(list(saver.list(cfg())))
    with pytest.raises(OwnershipLostError, match="taken over \\(epoch 2, owner 'b'\\)"):
        graph(saver.with_lease(a), "A").invoke({"steps": ["zombie"]}, cfg())
    assert len(list(saver.list(cfg()))) == before
    state = graph(saver.with_lease(b), "B").invoke({"steps": ["b"]}, cfg())
    assert state["steps"] == ["in", "A:a", "A:b", "b", "B:a", "B:b"]
    check_linear_history(saver, "chat")


@pytest.mark.parametrize("as_node", ["a", "__input__", "__copy__", "bulk"])
def test_a_superseded_lease_makes_no_explicit_write_either(setup, as_node: str) -> None:  # type: ignore[no-untyped-def]
    """Explicit writes (``update_state`` as any node, ``__copy__``, ``bulk_update_state``) may
    start from any checkpoint, but the fence comes first: a superseded worker stores nothing."""
    saver, sessions, clock = setup
    a = sessions.acquire("chat", "a", ttl=10)
    zombie = graph(saver.with_lease(a), "A")
    zombie.invoke({"steps": ["in"]}, cfg())
    past = list(zombie.get_state_history(cfg()))[-2].config
    clock.t += 11
    sessions.acquire("chat", "b", ttl=10)
    before = len(list(saver.list(cfg())))
    with pytest.raises(OwnershipLostError):
        if as_node == "bulk":
            zombie.bulk_update_state(past, [[StateUpdate({"steps": ["x"]}, "__input__")]])
        else:
            zombie.update_state(past, None if as_node == "__copy__" else {"steps": ["x"]}, as_node=as_node)
    assert len(list(saver.list(cfg()))) == before


def test_zombie_with_a_warm_cache_is_refused_atomically(setup) -> None:  # type: ignore[no-untyped-def]
    """The zombie's cached head is stale; its compare-and-swap fails against the takeover's
    write, and the re-read shows the higher epoch. Two savers: two processes' caches."""
    saver, sessions, clock = setup
    zombie_saver = ObjectStoreSaver(saver.store)
    a = sessions.acquire("chat", "a", ttl=10)
    g_a = graph(zombie_saver.with_lease(a), "A")
    g_a.invoke({"steps": ["1"]}, cfg())
    clock.t += 11
    SessionManager(ObjectStoreSaver(saver.store), clock=clock).acquire("chat", "b", ttl=10)
    with pytest.raises(OwnershipLostError):
        g_a.invoke({"steps": ["2"]}, cfg())


def test_subgraph_namespaces_are_fenced_too(setup) -> None:  # type: ignore[no-untyped-def]
    saver, sessions, clock = setup
    a = sessions.acquire("chat", "a", ttl=10)
    with_subgraph(saver.with_lease(a)).invoke({"steps": []}, cfg())
    sub_ns = [ns for ns in driver_namespaces(saver, "chat") if ns]
    assert sub_ns
    clock.t += 11
    sessions.acquire("chat", "b", ttl=10)
    for ns in sub_ns:  # the takeover carried epoch 2 to every subgraph head ...
        head, _ = saver.heads.decode(saver.store.get(head_key("chat", ns)), "chat", ns)
        assert head is not None and write_refusal(head.meta, 1) is not None
        # ... so a zombie's subgraph step is refused, even from a process with a stale cache
        zombie = ObjectStoreSaver(saver.store).with_lease(a)
        latest = zombie.get_tuple({"configurable": {"thread_id": "chat", "checkpoint_ns": ns}})
        assert latest is not None
        checkpoint = {**latest.checkpoint, "id": str(uuid6())}
        with pytest.raises(OwnershipLostError):
            zombie.put(latest.config, checkpoint, {"source": "loop", "step": 9}, {})
    # a brand-new subgraph namespace is checked against the root head
    zombie = ObjectStoreSaver(saver.store).with_lease(a)
    fresh = {**latest.checkpoint, "id": str(uuid6())}
    with pytest.raises(OwnershipLostError):
        zombie.put({"configurable": {"thread_id": "chat", "checkpoint_ns": "new:1"}}, fresh, {"source": "input"}, {})


def driver_namespaces(saver: ObjectStoreSaver, thread: str) -> list[str]:
    from langgraph_handoff.checkpoint import driver

    return driver.run(saver.store, saver.heads.namespaces(thread))


def test_a_bound_saver_refuses_other_threads(setup) -> None:  # type: ignore[no-untyped-def]
    saver, sessions, _ = setup
    a = sessions.acquire("chat", "a", ttl=10)
    with pytest.raises(InvalidConfigError, match="bound to the lease of session 'chat'"):
        graph(saver.with_lease(a), "A").invoke({"steps": []}, cfg("other"))


def test_a_lease_only_head_is_an_empty_thread(setup) -> None:  # type: ignore[no-untyped-def]
    saver, sessions, _ = setup
    a = sessions.acquire("new-chat", "a", ttl=10)
    assert saver.get_tuple(cfg("new-chat")) is None and list(saver.list(cfg("new-chat"))) == []
    out = graph(saver.with_lease(a), "A").invoke({"steps": []}, cfg("new-chat"))
    assert out["steps"] == ["A:a", "A:b"]
    assert sessions.get("new-chat").owner == "a"  # the puts kept the lease


# -- fencing subgraph namespaces through takeovers, locks and releases -----------------------------------


def sub_namespace(saver: ObjectStoreSaver, thread: str = "chat") -> str:
    return next(ns for ns in driver_namespaces(saver, thread) if ns)


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


@pytest.mark.parametrize("how", ["lock", "release"])
def test_lock_and_release_fence_subgraph_namespaces(leased, how: str) -> None:  # type: ignore[no-untyped-def]
    """A lock or a release stops the old owner's subgraph writes too.

    Found by an adversarial review of session ownership; fails before commit 596ef7d."""
    base, saver, sessions, _, a = leased
    ns = sub_namespace(saver)
    sessions.begin_transfer(a, timeout=30) if how == "lock" else sessions.release(a)
    with pytest.raises(OwnershipLostError):
        step_in(ObjectStoreSaver(base).with_lease(a), "chat", ns)


def test_subgraph_write_during_a_takeover_is_undone(leased) -> None:  # type: ignore[no-untyped-def]
    """A subgraph write landing between the takeover's root CAS and its fence pass is undone.

    Found by an adversarial review of session ownership; fails before commit 596ef7d."""
    base, saver, _, clock, a = leased
    ns = sub_namespace(saver)
    before = len(saver.heads.decode(base.get(head_key("chat", ns)), "chat", ns)[0].records)
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
    assert len(saver.heads.decode(base.get(head_key("chat", ns)), "chat", ns)[0].records) == before


def test_new_namespace_created_during_a_takeover_is_undone(leased) -> None:  # type: ignore[no-untyped-def]
    """A brand-new namespace created while a takeover happens does not stay writable.

    Found by an adversarial review of session ownership; fails before commit 596ef7d."""
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
    undone, _ = saver.heads.decode(base.get(head_key("chat", "new:1")), "chat", "new:1")
    assert undone is not None and not undone.records  # an emptied head: the namespace reads as empty
    assert saver.get_tuple(cfg("chat", "new:1")) is None


def test_takeover_with_unknown_outcome_still_fences_namespaces(leased) -> None:  # type: ignore[no-untyped-def]
    """A takeover whose lease write "failed" but landed still fences the subgraph heads.

    Found by an adversarial review of session ownership; fails before commit 596ef7d."""
    base, saver, _, clock, _a = leased
    ns = sub_namespace(saver)
    clock.t += 11
    b = SessionManager(ObjectStoreSaver(Hooked(base, fail_root_cas=True)), clock=clock).acquire("chat", "b", ttl=10)
    assert b.epoch == 2
    assert saver.heads.decode(base.get(head_key("chat", ns)), "chat", ns)[0].meta.fence == 2


def test_undo_never_destroys_a_new_owners_namespace(leased) -> None:  # type: ignore[no-untyped-def]
    """Undoing a namespace the zombie created never destroys the new owner's checkpoints there.

    Found by the fourth review round; fails before commit 495eae2."""
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


def test_fence_stamp_does_not_stop_the_undo(leased) -> None:  # type: ignore[no-untyped-def]
    """A takeover's epoch stamp on the zombie's head does not stop the undo.

    Found by the fourth review round; fails before commit 495eae2."""
    base, saver, _, clock, a = leased
    ns = sub_namespace(saver)
    before = sorted(saver.heads.decode(base.get(head_key("chat", ns)), "chat", ns)[0].records)
    fired: list[int] = []

    def after_put(key: str) -> None:
        if key == head_key("chat", ns) and not fired:
            fired.append(1)
            clock.t += 11
            SessionManager(ObjectStoreSaver(base), clock=clock).acquire("chat", "b", ttl=10)

    with pytest.raises(OwnershipLostError):
        step_in(ObjectStoreSaver(Hooked(base, after_put=after_put)).with_lease(a), "chat", ns)
    head = saver.heads.decode(base.get(head_key("chat", ns)), "chat", ns)[0]
    assert sorted(head.records) == before and head.meta.fence == 2


@pytest.mark.heavy
def test_acquire_again_finishes_an_interrupted_fence_pass(leased) -> None:  # type: ignore[no-untyped-def]
    """Acquiring again finishes a fence pass that gave up.

    Found by the fourth review round; fails before commit 495eae2."""
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
    assert saver.heads.decode(base.get(head_key("chat", ns)), "chat", ns)[0].meta.fence == 2


# -- ownership across copy_thread and delete_thread -------------------------------------------------------


def test_copy_thread_leaves_ownership_alone(leased) -> None:  # type: ignore[no-untyped-def]
    """copy_thread copies neither the lease nor the fence, and keeps the target's own.

    Found by an adversarial review of session ownership; fails before commit 596ef7d."""
    _, saver, sessions, _, _ = leased
    saver.copy_thread("chat", "copy")
    assert sessions.get("copy") is None
    assert sessions.acquire("copy", "b", ttl=10).epoch == 1
    c = sessions.acquire("held", "c", ttl=10)
    saver.copy_thread("chat", "held")
    held = sessions.get("held")
    assert (held.owner, held.epoch) == ("c", c.epoch)


def test_epochs_survive_delete_thread(leased) -> None:  # type: ignore[no-untyped-def]
    """Epochs only grow: delete_thread keeps a released lease and its fence.

    Found by an adversarial review of session ownership; fails before commit 596ef7d."""
    _, saver, sessions, _, a = leased
    saver.delete_thread("chat")
    assert saver.get_tuple(cfg()) is None and list(saver.list(cfg())) == []
    c = sessions.acquire("chat", "c", ttl=10)
    assert c.epoch == 2
    with pytest.raises(OwnershipLostError):
        with_subgraph(saver.with_lease(a)).invoke({"steps": []}, cfg())
    with_subgraph(saver.with_lease(c)).invoke({"steps": []}, cfg())


def test_delete_thread_does_not_overwrite_a_recreated_thread(leased) -> None:  # type: ignore[no-untyped-def]
    """delete_thread does not overwrite a conversation re-created while it deletes.

    Found by the fourth review round; fails before commit 495eae2."""
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


# -- the three-phase transfer ---------------------------------------------------------------------------


def test_planned_transfer_lock_transfer_accept(setup) -> None:  # type: ignore[no-untyped-def]
    saver, sessions, _clock = setup
    a = sessions.acquire("chat", "a", ttl=30)
    graph(saver.with_lease(a), "A").invoke({"steps": ["in"]}, cfg())
    assert writable_epochs(saver, "chat", range(0, 5)) == [1]
    note = session_note(
        source="a",
        target="b",
        completed_steps=["looked up order"],
        decisions=["refund approved"],
        irreversible_actions=["refund sent"],
        next_step="confirm to the customer",
    )
    locked = sessions.begin_transfer(a, to_owner="b", note=note, timeout=20)
    assert locked.state == "transferring" and locked.owner == "a"
    # phase 1 done: the old owner may not write, and the new one has nothing to write with yet
    assert writable_epochs(saver, "chat", range(0, 5)) == []
    with pytest.raises(OwnershipLostError, match="locked the session for a transfer"):
        graph(saver.with_lease(a), "A").invoke({"steps": ["late"]}, cfg())
    with pytest.raises(LeaseHeldError, match="being transferred"):
        sessions.acquire("chat", "c", ttl=30)
    with pytest.raises(TransferError, match="not 'c'"):
        sessions.accept("chat", "c", ttl=30)
    # phase 2: the state is in the store already; the note travels with the lease
    assert sessions.get("chat").transfer.note["payload"]["irreversible_actions"] == ["refund sent"]
    b = sessions.accept("chat", "b", ttl=30, transfer_id=locked.transfer.id)
    assert (b.owner, b.epoch, b.via) == ("b", 2, "transfer")
    assert writable_epochs(saver, "chat", range(0, 5)) == [2]
    state = graph(saver.with_lease(b), "B").invoke({"steps": ["b"]}, cfg())
    assert state["steps"][-3:] == ["b", "B:a", "B:b"]


def test_an_unaccepted_transfer_is_never_ownerless(setup) -> None:  # type: ignore[no-untyped-def]
    _saver, sessions, clock = setup
    a = sessions.acquire("chat", "a", ttl=30)
    sessions.begin_transfer(a, to_owner="b", timeout=5)
    assert [s.status for s in sessions.sessions()] == ["transferring"]
    clock.t += 6
    assert [s.status for s in sessions.sessions()] == ["stuck"]
    with pytest.raises(TransferError, match="expired"):
        sessions.accept("chat", "b", ttl=30)
    back = sessions.abort_transfer(a, ttl=30)  # the old owner takes it back ...
    assert back.state == "active" and back.epoch == 1
    sessions.begin_transfer(back, timeout=5)
    clock.t += 6
    (c,) = sessions.reclaim_expired("c", ttl=30)  # ... or a health check reclaims it
    assert (c.owner, c.epoch, c.via) == ("c", 2, "takeover")


# -- monitoring and reclaim -------------------------------------------------------------------------------


def test_sessions_show_who_is_responsible(setup) -> None:  # type: ignore[no-untyped-def]
    saver, sessions, clock = setup
    graph(saver, "X").invoke({"steps": []}, cfg("never-leased"))
    sessions.acquire("owned", "a", ttl=100)
    sessions.acquire("expired", "a", ttl=5)
    sessions.release(sessions.acquire("released", "a", ttl=100))
    sessions.begin_transfer(sessions.acquire("moving", "a", ttl=100), timeout=100)
    clock.t += 10
    status = {s.thread_id: s.status for s in sessions.sessions()}
    assert status == {
        "never-leased": "ownerless",
        "owned": "owned",
        "expired": "expired",
        "released": "released",
        "moving": "transferring",
    }
    assert {s.thread_id for s in sessions.sessions() if s.needs_attention} == {"never-leased", "expired"}
    taken = sessions.reclaim_expired("doctor", ttl=30)
    assert [(t.thread_id, t.epoch) for t in taken] == [("expired", 2)]


async def test_async_twins(setup) -> None:  # type: ignore[no-untyped-def]
    _saver, sessions, clock = setup
    a = await sessions.aacquire("chat", "a", ttl=10)
    a = await sessions.arenew(a, ttl=10)
    locked = await sessions.abegin_transfer(a, timeout=5)
    b = await sessions.aaccept("chat", "b", ttl=10, transfer_id=locked.transfer.id)
    assert (await sessions.aget("chat")).owner == "b"
    clock.t += 11
    assert [x.owner for x in await sessions.areclaim_expired("c", 10)] == ["c"]
    with pytest.raises(OwnershipLostError):
        await sessions.arelease(b)
    assert [s.status for s in await sessions.asessions()] == ["owned"]


# -- races ----------------------------------------------------------------------------------------------


def test_racing_acquires_have_exactly_one_winner(setup) -> None:  # type: ignore[no-untyped-def]
    saver, _, _ = setup
    for round_ in range(20):
        results: list[str] = []
        barrier = threading.Barrier(6)

        def contender(i: int, round_: int = round_, barrier: Any = barrier, results: list[str] = results) -> None:
            mgr = SessionManager(ObjectStoreSaver(saver.store))  # each its own cache, like a process
            barrier.wait()
            try:
                mgr.acquire(f"s{round_}", f"w{i}", ttl=30)
                results.append("won")
            except LeaseHeldError:
                results.append("held")

        threads = [threading.Thread(target=contender, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == ["held"] * 5 + ["won"], results


def _process_acquire(spec: dict[str, Any], thread: str, owner: str, barrier: Any) -> str:
    mgr = SessionManager(ObjectStoreSaver(make_store(spec)))
    barrier.wait()
    try:
        return f"won:{mgr.acquire(thread, owner, ttl=30).epoch}"
    except LeaseHeldError:
        return "held"


@pytest.mark.heavy
def test_racing_processes_have_exactly_one_winner(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = {"kind": "local", "path": str(tmp_path / "store")}
    ctx = process_context()
    with ctx.Manager() as m:
        for round_ in range(3):
            barrier = m.Barrier(4)
            with ctx.Pool(4) as pool:
                results = pool.starmap(_process_acquire, [(spec, f"p{round_}", f"w{i}", barrier) for i in range(4)])
            assert sorted(results) == ["held"] * 3 + ["won:1"], results


def test_zombie_writing_while_taken_over_never_forks(setup) -> None:  # type: ignore[no-untyped-def]
    """Worker A, a zombie (its lease expired and it does not know), steps the thread from its own
    saver (another process's cache) while B takes the session over and continues it. The takeover
    lands at each store operation of A's step in turn: A is held right before operation ``k``
    while B acquires and runs a step, then let go. Every time, A is refused (in that step, or in
    its next one when everything left of that step was a create-only writes document) and the
    history is one chain in which nothing of A's comes after B's first step.

    Found by the flake hunt (1 failure in 14 runs under load, on commit c36875f): A used to step
    in a tight loop while B acquired, and B could lose its compare-and-swap to A 12 times in a
    row (``ConflictError``, as documented: a busy writer can make an acquire retry). Holding A
    forces each interleaving instead of hoping for one; A steps with ``durability="sync"`` so its
    operations come in one order and ``k`` names the same point in every run."""
    saver, sessions, clock = setup
    for k in itertools.count(1):
        if not _zombie_held_at(saver, sessions, clock, k):
            assert k > 3, k  # A's step ended before operation k: every point was covered
            break


def _zombie_held_at(saver: ObjectStoreSaver, sessions: SessionManager, clock: Any, k: int) -> bool:
    """One round on a new thread: A held before its ``k``-th store operation while B takes over.
    False when A's step has fewer operations (nothing was held)."""
    thread = f"chat-{k}"
    a = sessions.acquire(thread, "a", ttl=10)
    graph(saver.with_lease(a), "A").invoke({"steps": ["start"]}, cfg(thread))
    held, let_go = threading.Event(), threading.Event()
    ops = itertools.count(1)
    outcome: list[str] = []

    def hold_at_k(op: Any, when: str) -> None:
        if when == "before" and next(ops) == k:
            held.set()
            let_go.wait()

    zombie_graph = graph(ObjectStoreSaver(Tripwire(saver.store, hold_at_k)).with_lease(a), "A")

    def zombie() -> None:
        try:
            zombie_graph.invoke({"steps": ["z"]}, cfg(thread), durability="sync")
            outcome.append("ok")
        except OwnershipLostError:
            outcome.append("refused")
        finally:
            held.set()  # also when A's step ended before operation k

    t = threading.Thread(target=zombie)
    t.start()
    held.wait()
    if outcome:  # A finished without reaching operation k
        t.join()
        assert outcome == ["ok"], (k, outcome)
        return False
    clock.t += 11  # A's lease has expired for B
    b = SessionManager(ObjectStoreSaver(saver.store), clock=clock).acquire(thread, "b", ttl=10)
    graph(ObjectStoreSaver(saver.store).with_lease(b), "B").invoke({"steps": ["b"]}, cfg(thread))
    let_go.set()
    t.join()
    if outcome == ["ok"]:  # only writes documents were left: A's next step finds the takeover
        with pytest.raises(OwnershipLostError):
            zombie_graph.invoke({"steps": ["z"]}, cfg(thread), durability="sync")
    else:
        assert outcome == ["refused"], (k, outcome)
    hist = list(saver.list(cfg(thread)))
    ids = [h.config["configurable"]["checkpoint_id"] for h in hist]
    parents = [h.parent_config["configurable"]["checkpoint_id"] if h.parent_config else None for h in hist]
    assert parents[:-1] == ids[1:], f"the history forked (A held before operation {k})"
    steps = hist[0].checkpoint["channel_values"]["steps"]
    assert steps[steps.index("b") + 1 :] == ["B:a", "B:b"], (k, steps)
    return True


@pytest.mark.heavy
def test_random_lease_histories_never_allow_two_writers(setup) -> None:  # type: ignore[no-untyped-def]
    """1,000 random operations by 4 workers (acquire, renew, release, transfer, accept, abort,
    reclaim, forced takeover) with the clock jumping around expiry. After every step: at most one
    issued lease can write, exactly one when the session is active, and it is the lease's own."""
    import random

    saver, sessions, clock = setup
    rng = random.Random(20261130)
    issued: list[Any] = []
    held: dict[str, Any] = {}
    workers = ["w1", "w2", "w3", "w4"]
    for step in range(1000):
        who = rng.choice(workers)
        op = rng.choice(["acquire", "renew", "release", "begin", "accept", "abort", "reclaim", "force", "tick"])
        try:
            if op == "acquire":
                held[who] = sessions.acquire("s", who, ttl=rng.choice([1, 5, 10]))
            elif op == "renew" and who in held:
                held[who] = sessions.renew(held[who], ttl=5)
            elif op == "release" and who in held:
                sessions.release(held.pop(who))
            elif op == "begin" and who in held:
                held[who] = sessions.begin_transfer(held[who], to_owner=rng.choice([None, *workers]), timeout=3)
            elif op == "accept":
                held[who] = sessions.accept("s", who, ttl=5)
            elif op == "abort" and who in held:
                held[who] = sessions.abort_transfer(held[who], ttl=5)
            elif op == "reclaim":
                for lease in sessions.reclaim_expired(who, ttl=5):
                    held[who] = lease
            elif op == "force":
                held[who] = sessions.acquire("s", who, ttl=5, force=True)
            elif op == "tick":
                clock.t += rng.choice([0.5, 2, 6, 11])
        except (LeaseHeldError, OwnershipLostError, TransferError):
            pass
        issued.extend(x for x in held.values() if x not in issued)
        current = sessions.get("s")
        if current is None:
            continue
        writable = {x.epoch for x in issued if write_refusal(_root_meta(saver), x.epoch) is None}
        assert len(writable) <= 1, (step, op, writable)
        if current.state == "active":
            assert writable == {current.epoch}, (step, op, current)
        else:
            assert writable == set(), (step, op, current)
        assert current.owner is not None  # always somebody's (released sessions keep the last name)


def _root_meta(saver: ObjectStoreSaver) -> HeadMeta:
    head, _ = saver.heads.decode(saver.store.get(head_key("s", "")), "s", "")
    assert head is not None
    return head.meta


def test_renew_without_ttl_keeps_the_same_duration(setup) -> None:  # type: ignore[no-untyped-def]
    _, sessions, clock = setup
    lease = sessions.acquire("chat", "a", ttl=10)
    for _ in range(5):
        clock.t += 7
        lease = sessions.renew(lease)
        assert lease.expires_at == clock.t + 10
