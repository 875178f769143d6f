"""Checkpoint TTL: stamps, request costs, the sweep's decisions and outcomes, the background
sweeper. Time is an injected clock (tests.support.sweep_helpers.Clock); nothing waits for a TTL."""

from __future__ import annotations

import asyncio
import threading

import pytest

from langgraph_handoff import Layout, MemoryStore, ObjectStoreSaver
from langgraph_handoff._format import records
from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff.checkpoint.ttl import BackgroundSweeper, TTLSettings
from langgraph_handoff.errors import InvalidConfigError, ThreadExpiredError
from langgraph_handoff.stores import CountingStore
from tests.checkpoint.test_request_counts import five_nodes
from tests.support.sweep_helpers import TTL, Clock, HookStore, cfg, chat_graph, history_ids, is_delete, messages

#: the key of the TTL stamp in a head's stored metadata
TTL_KEY = "ttl"


def head_extra(saver: ObjectStoreSaver, thread: str = "t", ns: str = "") -> dict:
    """The head's metadata as stored."""
    from langgraph_handoff._format import keys

    obj = saver.store.get(keys.head_key(thread, ns))
    assert obj is not None
    return records.decode_head(obj.body, key=obj.key).meta.wire()


def run(saver: ObjectStoreSaver, thread: str = "t", text: str = "hi") -> None:
    chat_graph("a").compile(checkpointer=saver).invoke({"messages": [text]}, cfg(thread))


def test_ttl_setting_reaches_the_saver_from_every_constructor() -> None:
    for saver in (
        ObjectStoreSaver(MemoryStore(), ttl={"default_ttl": 5, "refresh_on_read": True}),
        ObjectStoreSaver.from_url("memory://", ttl={"default_ttl": 5, "refresh_on_read": True}),
        ObjectStoreSaver.from_conn_string("memory://", ttl={"default_ttl": 5, "refresh_on_read": True}),
    ):
        assert saver.ttl == TTLSettings(5.0, refresh_on_read=True)
    assert ObjectStoreSaver(MemoryStore()).ttl is None
    with pytest.raises(InvalidConfigError, match="strategy"):
        ObjectStoreSaver(MemoryStore(), ttl={"default_ttl": 5, "strategy": "archive"})
    with pytest.raises(InvalidConfigError, match="positive"):
        ObjectStoreSaver(MemoryStore(), ttl={"default_ttl": "soon"})


def test_every_put_stamps_the_head_and_a_saver_without_ttl_drops_the_stamp() -> None:
    clock = Clock()
    store = MemoryStore()
    run(ObjectStoreSaver(store, ttl=TTL, clock=clock))
    assert head_extra(ObjectStoreSaver(store))[TTL_KEY] == {"at": round(clock.now, 3), "m": 60.0}
    run(ObjectStoreSaver(store), text="again")  # TTL turned off: the thread stops expiring
    assert TTL_KEY not in head_extra(ObjectStoreSaver(store))


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_ttl_adds_no_request_to_a_run(durability: str) -> None:
    store = CountingStore(MemoryStore())
    saver = ObjectStoreSaver(store, ttl={"default_ttl": 60, "refresh_on_read": True}, clock=Clock())
    five_nodes().compile(checkpointer=saver).invoke({"messages": []}, cfg(), durability=durability)
    # the same as without TTL (test_request_counts): the stamp rides in the head's own PUT, and a
    # fresh stamp is not refreshed on read
    assert store.snapshot() == {"GET": 1, "LIST": 1, "PUT": 13, "requests": 15, "round_trips": 14}


def test_refresh_on_read_writes_at_most_once_per_tenth_of_the_ttl() -> None:
    clock = Clock()
    store = CountingStore(MemoryStore())
    saver = ObjectStoreSaver(store, ttl={"default_ttl": 60, "refresh_on_read": True}, clock=clock)
    graph = five_nodes().compile(checkpointer=saver)
    graph.invoke({"messages": []}, cfg())
    reads = {"GET": 1, "LIST": 1, "requests": 2, "round_trips": 1}
    for minutes, extra_put in ((5.9, False), (0.2, True), (1.0, False), (4.9, False), (0.2, True)):
        clock.advance(minutes)
        store.reset()
        graph.get_state(cfg())
        expected = {**reads, "PUT": 1, "requests": 3, "round_trips": 2} if extra_put else reads
        assert store.snapshot() == expected, minutes
    assert head_extra(saver)[TTL_KEY]["at"] == round(clock.now, 3)
    # the refresh kept the cache current: the next run's puts lose no compare-and-swap
    store.reset()
    graph.invoke({"messages": []}, cfg())
    assert store.snapshot() == {"GET": 1, "LIST": 1, "PUT": 13, "requests": 15, "round_trips": 14}


def test_refresh_keeps_a_thread_that_is_read_alive() -> None:
    clock = Clock()
    store = MemoryStore()
    saver = ObjectStoreSaver(store, ttl={"default_ttl": 60, "refresh_on_read": True}, clock=clock)
    run(saver)
    for _ in range(5):  # read every 50 minutes: never idle for 60
        clock.advance(50)
        saver.get_tuple(cfg())
        assert saver.sweep().kept == 1
    clock.advance(61)
    assert saver.sweep().deleted == 1


def test_sweep_outcomes_and_request_costs() -> None:
    clock = Clock()
    store = CountingStore(MemoryStore())
    saver = ObjectStoreSaver(store, ttl=TTL, clock=clock)
    run(saver, "old")
    clock.advance(30)
    run(saver, "young")
    clock.advance(31)
    store.reset()
    result = saver.sweep()
    assert {t.thread_id: t.status for t in result.threads} == {"old": "deleted", "young": "kept"}
    assert result.as_dict()["examined"] == 2 and result.deleted == 1 and result.kept == 1
    # LIST heads; GET both heads (one round trip); for "old": GET it fresh, LIST its data and its
    # metadata-index entries (one round trip), swap its head (the tombstone marks the cleanup
    # pending), one DeleteObjects, clear the mark (one PUT: what lets a later sweep finish a sweep
    # that stopped before its delete, and recognise a settled tombstone by its size otherwise)
    assert store.snapshot() == {
        "LIST": 3, "GET": 3, "PUT": 2, "DELETE_MANY": 1, "requests": 9, "round_trips": 7,
    }  # fmt: skip
    assert messages(saver, "young") == ["hi", "a:reply"] and saver.get_tuple(cfg("old")) is None
    # a periodic sweep reads nothing unchanged: "young" is known by its ETag, "old" is an empty
    # head recognised by its size in the listing
    store.reset()
    result = saver.sweep()
    assert [(t.thread_id, t.status) for t in result.threads] == [("old", "empty"), ("young", "kept")]
    assert store.snapshot() == {"LIST": 1, "requests": 1, "round_trips": 1}
    # a sweeper in another process (no memory of earlier sweeps) GETs only the live head
    store.reset()
    ObjectStoreSaver(store, ttl=TTL, clock=clock).sweep()
    assert store.snapshot() == {"LIST": 1, "GET": 1, "requests": 2, "round_trips": 2}


def test_dry_run_and_limit() -> None:
    clock = Clock()
    store = CountingStore(MemoryStore())
    saver = ObjectStoreSaver(store, ttl=TTL, clock=clock)
    for t in ("a", "b", "c"):
        run(saver, t)
    clock.advance(61)
    store.reset()
    dry = saver.sweep(dry_run=True)
    assert [t.status for t in dry.threads] == ["would delete"] * 3 and "PUT" not in store.counts
    limited = saver.sweep(limit=2)
    assert limited.deleted == 2 and limited.limited
    rest = saver.sweep(limit=2)
    assert [t.status for t in rest.threads] == ["empty", "empty", "deleted"] and not rest.limited


def test_threads_without_a_stamp_expire_by_their_checkpoint_time_only_with_a_default() -> None:
    clock = Clock()
    store = MemoryStore()
    run(ObjectStoreSaver(store))  # written before TTL was turned on
    clock.advance(24 * 60)
    assert ObjectStoreSaver(store, clock=clock).sweep().kept == 1  # no TTL anywhere: never
    assert ObjectStoreSaver(store, clock=clock).sweep(default_ttl=25 * 60).kept == 1
    result = ObjectStoreSaver(store, clock=clock).sweep(default_ttl=23 * 60)
    assert result.deleted == 1


def test_a_stamp_carries_the_ttl_it_was_written_with() -> None:
    clock = Clock()
    store = MemoryStore()
    run(ObjectStoreSaver(store, ttl={"default_ttl": 10}, clock=clock), "short")
    run(ObjectStoreSaver(store, ttl={"default_ttl": 600}, clock=clock), "long")
    clock.advance(11)
    result = ObjectStoreSaver(store, ttl={"default_ttl": 600}, clock=clock).sweep()
    assert {t.thread_id: t.status for t in result.threads} == {"short": "deleted", "long": "kept"}


def test_a_subgraph_writing_keeps_the_thread_alive() -> None:
    from tests.support.sweep_helpers import _checkpoint

    clock = Clock()
    saver = ObjectStoreSaver(MemoryStore(), ttl=TTL, clock=clock)
    run(saver)
    clock.advance(50)
    sub = {"configurable": {"thread_id": "t", "checkpoint_ns": "child:1"}}
    saver.put(sub, _checkpoint({"n": 1}), {"source": "loop", "step": 0}, {"n": 1})
    clock.advance(20)  # root idle 70 min, subgraph 20
    assert saver.sweep().kept == 1
    clock.advance(41)
    result = saver.sweep()
    assert result.deleted == 1 and list(saver.store.list("data/")) == []
    assert list(saver.list(sub)) == []


def test_keep_latest_strategy_prunes_idle_threads_to_their_latest() -> None:
    clock = Clock()
    saver = ObjectStoreSaver(MemoryStore(), ttl={"default_ttl": 60, "strategy": "keep_latest"}, clock=clock)
    graph = chat_graph("a").compile(checkpointer=saver)
    for text in ("one", "two"):
        graph.invoke({"messages": [text]}, cfg())
    before = history_ids(saver)
    clock.advance(61)
    assert [t.status for t in saver.sweep(dry_run=True).threads] == ["would prune"]
    (outcome,) = saver.sweep().threads
    assert outcome.status == "pruned" and outcome.checkpoints_removed == len(before) - 1
    assert history_ids(saver) == before[:1]
    assert messages(saver) == ["one", "a:reply", "two", "a:reply"]
    assert [t.status for t in saver.sweep().threads] == ["kept"]  # nothing left to prune


def test_a_leased_session_keeps_its_fence_after_a_sweep() -> None:
    from langgraph_handoff.errors import OwnershipLostError
    from langgraph_handoff.ownership import SessionManager

    clock = Clock()
    saver = ObjectStoreSaver(MemoryStore(), ttl=TTL, clock=clock)
    lease = SessionManager(saver).acquire("t", "worker-a", ttl=3600)
    bound = saver.with_lease(lease)
    chat_graph("a").compile(checkpointer=bound).invoke({"messages": ["hi"]}, cfg())
    clock.advance(61)
    assert saver.sweep().deleted == 1
    assert head_extra(saver)["fence"] == lease.epoch
    with pytest.raises(OwnershipLostError):  # the swept session's lease is released
        chat_graph("a").compile(checkpointer=bound).invoke({"messages": ["late"]}, cfg())


def test_thread_expired_error_says_what_to_do() -> None:
    err = ThreadExpiredError("t", "", expected_parent="p", checkpoint_id="c", swept_at=12.5)
    assert "TTL sweeper deleted the thread" in str(err) and "Start a new run" in str(err)


def test_corrupt_head_is_reported_and_the_sweep_goes_on() -> None:
    from langgraph_handoff._format import keys

    clock = Clock()
    saver = ObjectStoreSaver(MemoryStore(), ttl=TTL, clock=clock)
    run(saver, "good")
    run(saver, "bad")
    saver.store.put(keys.head_key("bad", ""), b"garbage")
    clock.advance(61)
    result = saver.sweep()
    assert {t.thread_id: t.status for t in result.threads} == {"bad": "failed", "good": "deleted"}
    assert "CorruptObjectError" in (result.threads[0].error or "")


def test_background_sweeper_thread_and_task_run_and_stop() -> None:
    ran = threading.Event()
    sweeper = BackgroundSweeper("test", ran.set, lambda: asyncio.sleep(0))
    sweeper.start(60)
    assert ran.wait(30)  # the first sweep runs at once
    assert sweeper.stop(30) and not sweeper.running

    async def main() -> None:
        swept = asyncio.Event()

        async def asweep() -> None:
            swept.set()

        task_sweeper = BackgroundSweeper("test", lambda: None, asweep)
        task = await task_sweeper.astart(60)
        await asyncio.wait_for(swept.wait(), 30)
        assert await task_sweeper.astop(30) and task.done()

    asyncio.run(main())


def test_saver_background_sweep_deletes_and_stops_on_close() -> None:
    clock = Clock()
    store = HookStore(MemoryStore())
    saver = ObjectStoreSaver(store, ttl={"default_ttl": 60, "sweep_interval_minutes": 30}, clock=clock)
    run(saver)
    clock.advance(61)
    deleted = threading.Event()
    store.before(is_delete, deleted.set, "delete")

    async def main() -> None:
        task = await saver.astart_ttl_sweeper()
        await asyncio.get_running_loop().run_in_executor(None, deleted.wait, 30)
        await saver.aclose()
        assert task.done()

    asyncio.run(main())
    assert deleted.is_set() and saver.get_tuple(cfg()) is None


def test_big_values_of_a_swept_thread_are_deleted_too() -> None:
    clock = Clock()
    saver = ObjectStoreSaver(MemoryStore(), ttl=TTL, clock=clock, layout=Layout(blob_threshold=1024))
    run(saver, text="z" * 5000)
    assert any("/b/" in i.key for i in saver.store.list("data/"))
    clock.advance(61)
    assert saver.sweep().deleted == 1 and list(saver.store.list("data/")) == []


def test_a_heartbeating_session_is_not_idle() -> None:
    """Found by review (/tmp/review/test_sweep_revokes_live_lease.py): a session whose owner
    renews its lease every minute while waiting an hour (on a human, say) writes no checkpoint, and
    a renewal rewrites the head without touching the TTL stamp: the sweep deleted the thread and
    marked the live lease released, so the owner's next heartbeat failed. A lease that has not
    expired keeps its thread alive; once the owner stops renewing, the thread expires."""
    from langgraph_handoff.ownership import SessionManager

    clock = Clock()
    store = MemoryStore()
    saver = ObjectStoreSaver(store, ttl=TTL, clock=clock)
    sessions = SessionManager(saver, clock=clock)
    lease = sessions.acquire("t", "worker-a", ttl=120)
    chat_graph("a").compile(checkpointer=saver.with_lease(lease)).invoke({"messages": ["hi"]}, cfg())
    for _ in range(61):
        clock.advance(1)
        lease = sessions.renew(lease)
    result = ObjectStoreSaver(store, ttl=TTL, clock=clock).sweep()
    assert [(t.thread_id, t.status) for t in result.threads] == [("t", "kept")]
    assert result.threads[0].expires_at == lease.expires_at
    lease = sessions.renew(lease)  # the heartbeat goes on
    # a transfer in progress keeps it too, until its deadline
    clock.advance(3)  # the lease (120 s) lapsed
    lease = sessions.renew(lease)
    sessions.begin_transfer(lease, to_owner="worker-b", timeout=600)
    clock.advance(5)
    assert [t.status for t in ObjectStoreSaver(store, ttl=TTL, clock=clock).sweep().threads] == ["kept"]
    clock.advance(6)  # past the transfer's deadline: nobody holds the session, and it is idle
    assert ObjectStoreSaver(store, ttl=TTL, clock=clock).sweep().deleted == 1


def test_idle_expiry_counts_a_live_lease_as_activity() -> None:
    from langgraph_handoff.checkpoint.ttl import head_expiry, lease_hold

    stamped = {"ttl": {"at": 0.0, "m": 1.0}}
    assert head_expiry(HeadMeta.from_wire(stamped), None, None) == 60.0
    live = HeadMeta.from_wire({**stamped, "lease": {"state": "active", "expires_at": 500.0}})
    assert lease_hold(live) == 500.0 and head_expiry(live, None, None) == 500.0
    released = HeadMeta.from_wire({**stamped, "lease": {"state": "released", "expires_at": 500.0}})
    assert head_expiry(released, None, None) == 60.0
    moving = {**stamped, "lease": {"state": "transferring", "expires_at": 90.0, "transfer": {"deadline": 700.0}}}
    assert head_expiry(HeadMeta.from_wire(moving), None, None) == 700.0
    only_lease = HeadMeta.from_wire({"lease": {"state": "active", "expires_at": 500.0}})
    assert head_expiry(only_lease, None, None) == float("inf")


@pytest.mark.parametrize("durability", ["sync", "exit"])
def test_refresh_on_read_adds_no_request_to_a_run(durability: str) -> None:
    """Found by review (/tmp/review/gcs_refresh_throttle.py): a run on a thread idle for more than
    a tenth of the TTL re-stamped the head in its first get_tuple, then wrote its input checkpoint
    to the same head at once: a wasted PUT, and on GCS (one write per second per object name) a
    throttled one (an invoke went from 0.06 s to 2.98 s). A read that is part of a run (LangGraph's
    run config carries ``__pregel_*`` keys) no longer refreshes: the run's own put re-stamps."""
    clock = Clock()
    store = CountingStore(MemoryStore())
    saver = ObjectStoreSaver(store, ttl={"default_ttl": 60, "refresh_on_read": True}, clock=clock)
    graph = five_nodes().compile(checkpointer=saver)
    graph.invoke({"messages": []}, cfg(), durability=durability)
    baseline = store.snapshot()
    clock.advance(30)  # half the TTL: a get_state would refresh now
    store.reset()
    graph.invoke({"messages": []}, cfg(), durability=durability)
    assert store.snapshot() == baseline
    assert head_extra(saver)[TTL_KEY]["at"] == round(clock.now, 3)  # the run's put re-stamped
    store.reset()
    clock.advance(30)
    graph.get_state(cfg())  # a user's read still refreshes
    assert store.snapshot()["PUT"] == 1


def test_keep_latest_reads_a_pruned_thread_once_not_on_every_sweep() -> None:
    """Found by review (/tmp/review/test_keep_latest_cost.py): strategy "keep_latest" keeps the old
    stamp when it prunes, so a pruned thread stayed expired and every later sweep GET its head
    (twice on the first repeat) and reported it "kept": 50 pruned threads cost 1 LIST + 50 GETs
    per sweep, forever. The sweep now remembers a head with nothing left to prune (by ETag) and
    reports such threads as kept with ``latest_only``."""
    clock = Clock()
    store = CountingStore(MemoryStore())
    saver = ObjectStoreSaver(store, ttl={"default_ttl": 60, "strategy": "keep_latest"}, clock=clock)
    graph = chat_graph("a").compile(checkpointer=saver)
    for i in range(50):
        graph.invoke({"messages": ["one"]}, cfg(f"t{i}"))
        graph.invoke({"messages": ["two"]}, cfg(f"t{i}"))
    clock.advance(61)
    assert saver.sweep().deleted == 50  # pruned
    for _ in range(3):
        clock.advance(10)
        store.reset()
        result = saver.sweep()
        assert store.snapshot() == {"LIST": 1, "requests": 1, "round_trips": 1}
        assert {(t.status, t.latest_only) for t in result.threads} == {("kept", True)}
        assert result.as_dict()["latest_only"] == 50
    # a sweeper in another process reads each head once, then nothing
    fresh = ObjectStoreSaver(store, ttl={"default_ttl": 60, "strategy": "keep_latest"}, clock=clock)
    store.reset()
    fresh.sweep()
    assert store.snapshot()["GET"] == 50
    store.reset()
    fresh.sweep()
    assert store.snapshot() == {"LIST": 1, "requests": 1, "round_trips": 1}


def test_keep_latest_is_stopped_by_a_refresh_after_the_decision() -> None:
    """Found by review: a keep_latest sweep went on pruning after a refresh_on_read re-stamped the
    head between its decision and its rewrite (only a new checkpoint stopped it), unlike the
    delete strategy. The prune now sticks only on the head version it decided on."""
    from tests.support.sweep_helpers import is_cas

    clock = Clock()
    inner = MemoryStore()
    writer = ObjectStoreSaver(inner, ttl={"default_ttl": 60}, clock=clock)
    graph = chat_graph("a").compile(checkpointer=writer)
    for text in ("one", "two"):
        graph.invoke({"messages": [text]}, cfg())
    before = history_ids(writer)
    clock.advance(61)
    hooked = HookStore(inner)
    sweeper = ObjectStoreSaver(hooked, ttl={"default_ttl": 60, "strategy": "keep_latest"}, clock=clock)
    reader = ObjectStoreSaver(inner, ttl={"default_ttl": 60, "refresh_on_read": True}, clock=clock)
    hooked.before(is_cas(), lambda: reader.get_tuple(cfg()), "prune swap")
    (outcome,) = sweeper.sweep().threads
    assert outcome.status == "revived" and outcome.checkpoints_removed == 0
    assert history_ids(writer) == before


def test_limited_means_expired_threads_were_left() -> None:
    """Found by review: ``result.limited`` was True whenever the limit was reached and any thread
    remained, even one that would not be deleted (here a young one). It now means the sweep
    stopped with threads left that it would act on (or that it had not read yet)."""
    clock = Clock()
    saver = ObjectStoreSaver(MemoryStore(), ttl=TTL, clock=clock)
    for t in ("a", "b"):
        run(saver, t)
    clock.advance(61)
    run(saver, "c")
    result = saver.sweep(limit=2)
    assert result.deleted == 2 and not result.limited
    assert [t.status for t in saver.sweep(limit=2).threads] == ["empty", "empty", "kept"]
    for t in ("d", "e", "f"):
        run(saver, t)
    clock.advance(61)
    result = saver.sweep(limit=2)  # c, d, e, f expired: two are left
    assert result.deleted == 2 and result.limited
