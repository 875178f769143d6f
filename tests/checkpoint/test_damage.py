"""Damage is contained: a damaged head, or a stray file under ``heads/``, is reported by every
walk over many threads, which goes on with the rest; and a thread whose head cannot be read can
still be deleted, without reading it.

Found by a new user: one truncated head made ``threads`` and ``prune --all`` fail for every
thread, ``delete_thread`` failed on it with the very error that said to delete the thread, and a
README dropped into ``heads/`` broke ``verify``, ``sweep`` and ``migrate`` with a message about a
bad key. The command-line side is in ``tests/cli/test_cli.py``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base.id import uuid6

from langgraph_handoff import LocalStore, MemoryStore, ObjectStoreSaver
from langgraph_handoff._format import keys
from langgraph_handoff._format import records as rec_io
from langgraph_handoff._format.damage import DamagedObject
from langgraph_handoff._format.head_meta import HeadMeta
from langgraph_handoff.checkpoint.plans.maintenance import LOST_EPOCH_GAP
from langgraph_handoff.errors import CorruptObjectError, DamagedObjectsError, OwnershipLostError
from langgraph_handoff.inspection import list_threads, thread_heads, verify_store
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.migrations import SchemaMigrations
from langgraph_handoff.ownership import SessionManager
from langgraph_handoff.stores import StoreBase

#: what each kind of damage does to a head's bytes, by the reason it is reported under
DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda b: b[: len(b) // 2],
    "checksum": lambda b: b[:-1] + bytes([b[-1] ^ 0xFF]),
    "empty": lambda b: b"",
    "not_ours": lambda b: b"{not: an envelope}",
}
SUB = "child:1"


def _cp(**values: object) -> dict[str, Any]:
    return {
        "v": 4,
        "id": str(uuid6()),
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": dict(values),
        "channel_versions": dict.fromkeys(values, 1),
        "versions_seen": {},
        "updated_channels": None,
    }


def _write(saver: ObjectStoreSaver, thread_id: str, steps: int = 3, ns: str = "") -> None:
    """``steps`` checkpoints on one lineage, each with a run id and a pending write."""
    cfg: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
    for step in range(steps):
        cfg = saver.put(cfg, _cp(x=step), {"source": "loop", "step": step, "run_id": f"run-{thread_id}"}, {"x": 1})
        saver.put_writes(cfg, [("x", step)], task_id=f"task-{step}")


def _store_with(store: StoreBase) -> ObjectStoreSaver:
    """Two threads: ``good`` and ``bad`` (root and a subgraph namespace each)."""
    saver = ObjectStoreSaver(store)
    for t in ("bad", "good"):
        _write(saver, t)
        _write(saver, t, 2, SUB)
    return saver


def _damage(store: StoreBase, key: str, how: str) -> bytes:
    obj = store.get(key)
    assert obj is not None
    body = DAMAGE[how](obj.body)
    store.put(key, body)
    return body


def _objects(store: StoreBase, thread_id: str) -> dict[str, bytes]:
    out = {}
    for prefix in (keys.heads_prefix(thread_id), keys.thread_data_prefix(thread_id)):
        for info in store.list(prefix):
            obj = store.get(info.key)
            assert obj is not None
            out[info.key] = obj.body
    return out


@pytest.mark.parametrize("how", list(DAMAGE))
def test_a_damaged_head_is_reported_by_every_walk_which_goes_on(how: str, store: StoreBase) -> None:
    """Each walk over many threads gets past a damaged root head: it names the key and what is
    wrong in a typed record, does everything else, and leaves the damaged thread as it was."""
    _store_with(store)
    key = keys.head_key("bad", "")
    damaged = _damage(store, key, how)
    expected = DamagedObject(key, how, _error(store, key).detail, "bad")
    fresh = ObjectStoreSaver(store, clock=lambda: time.time() + 3600)  # every thread idle an hour

    # list(None): everything else, and the damaged head handed over (a one-thread list raises)
    found: list[DamagedObject] = []
    listed = list(fresh.list(None, on_damaged=found.append))
    assert {t.config["configurable"]["thread_id"] for t in listed} == {"good", "bad"}  # bad's subgraph reads
    assert sum(t.config["configurable"]["thread_id"] == "good" for t in listed) == 5
    assert found == [expected]
    with pytest.raises(CorruptObjectError) as info:
        list(fresh.list({"configurable": {"thread_id": "bad"}}))
    assert info.value.key == key and info.value.reason == how

    # threads and verify
    threads = list_threads(fresh)
    assert [(r["thread_id"], r["namespaces"]) for r in threads.rows] == [("bad", [SUB]), ("good", ["", SUB])]
    assert threads.damaged == [expected]
    report = verify_store(fresh)
    assert [(p.key, p.kind) for p in report.problems] == [(key, "CorruptObjectError")]
    assert report.heads == 4

    # the TTL sweep: the other thread is swept, the damaged one reported "failed" with its record
    swept = fresh.sweep(default_ttl=1)
    outcomes = {t.thread_id: t for t in swept.threads}
    assert outcomes["good"].status == "deleted" and outcomes["bad"].status == "failed"
    assert outcomes["bad"].damaged == [expected] and swept.damaged == [expected]
    assert swept.as_dict()["damaged"] == 1

    # migrate: the other threads migrate, the damaged one fails with its record, no format stamp
    _write(fresh, "other")
    migrations = SchemaMigrations()
    migrations.register(1, "noop")(lambda values, metadata: None)
    summary = ObjectStoreSaver(store, migrations=migrations).migrate()
    results = {r.thread_id: r for r in summary.results}
    assert results["other"].status == "migrated" and results["bad"].status == "failed"
    assert results["bad"].damaged == [expected] and summary.damaged == [expected] and not summary.marked

    # prune and delete_for_runs: everything else done (bad's readable subgraph namespace too),
    # then a typed error listing the object
    _write(fresh, "third")
    with pytest.raises(DamagedObjectsError) as pruned:
        fresh.prune(["bad", "third"])
    assert pruned.value.damaged == [expected]
    assert len(list(fresh.list({"configurable": {"thread_id": "third"}}))) == 1
    _write(fresh, "fourth")
    with pytest.raises(DamagedObjectsError) as deleted:
        fresh.delete_for_runs(["run-fourth"])
    assert deleted.value.damaged == [expected]
    assert list(fresh.list({"configurable": {"thread_id": "fourth"}})) == []

    assert _read(store, key) == damaged  # no walk rewrote or deleted the damaged head
    assert thread_heads(fresh, "bad").unreadable == [expected]


def _error(store: StoreBase, key: str) -> CorruptObjectError:
    obj = store.get(key)
    assert obj is not None
    try:
        rec_io.decode_head(obj.body, key=key)
    except CorruptObjectError as exc:
        return exc
    raise AssertionError("not damaged")


def _stray(store: StoreBase, key: str) -> None:
    """Drop a file that is not ours: through the store when its key is portable, else beside it
    in the directory (a user copying a README into ``heads/``)."""
    if isinstance(store, LocalStore):
        path = Path(store.root, *key.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"# notes\n")
    else:
        store.put(key, b"# notes\n")


@pytest.mark.parametrize("stray", ["heads/README.txt", "heads/good/notes.md", "heads/a/b/c"])
def test_a_stray_key_under_heads_is_reported_as_foreign_and_never_touched(stray: str, store: StoreBase) -> None:
    if isinstance(store, MemoryStore) and stray != stray.lower():
        stray = stray.lower()  # the memory store holds portable keys only
    _store_with(store)
    _stray(store, stray)
    foreign = DamagedObject(stray, "not_a_head", DamagedObject.foreign(stray).detail, None)
    fresh = ObjectStoreSaver(store, clock=lambda: time.time() + 3600)
    found: list[DamagedObject] = []
    assert len(list(fresh.list(None, on_damaged=found.append))) == 10 and found == [foreign]
    assert len(list(fresh.list({"configurable": {"thread_id": "good"}}))) == 5  # a thread's listing skips it
    assert [r["thread_id"] for r in list_threads(fresh).rows] == ["bad", "good"]
    assert list_threads(fresh).damaged == [foreign]
    assert [(p.key, p.kind) for p in verify_store(fresh).problems] == [(stray, "foreign_object")]
    assert fresh.thread_ids() == ["bad", "good"]
    swept = fresh.sweep(dry_run=True, default_ttl=1)
    assert swept.foreign == [foreign] and {t.status for t in swept.threads} == {"would delete"}
    summary = fresh.migrate(dry_run=True)
    assert summary.foreign == [foreign] and summary.failed == 0
    fresh.delete_for_runs(["run-bad"])  # a key that is not ours is only logged: nothing of ours was skipped
    assert fresh.get_tuple({"configurable": {"thread_id": "bad"}}) is None
    fresh.prune(["good"])
    fresh.delete_thread("good")
    assert thread_heads(fresh, "good").heads == {}
    assert _read(store, stray) == b"# notes\n"  # never read as a head, never deleted


def _read(store: StoreBase, key: str) -> bytes:
    if isinstance(store, LocalStore):
        return Path(store.root, *key.split("/")).read_bytes()
    obj = store.get(key)
    assert obj is not None
    return obj.body


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("where", ["", SUB])
def test_delete_thread_removes_a_damaged_thread_without_reading_it(mode: str, where: str, store: StoreBase) -> None:
    saver = _store_with(store)
    _damage(store, keys.head_key("bad", where), "checksum")
    good = _objects(store, "good")
    fresh = ObjectStoreSaver(store)
    if mode == "sync":
        fresh.delete_thread("bad")
    else:
        asyncio.run(fresh.adelete_thread("bad"))
    left = _objects(store, "bad")
    if where == "":
        # the damaged root became an empty head (a tombstone) by compare-and-swap: it fences any
        # lease the lost head held; nothing else of the thread is left
        assert list(left) == [keys.head_key("bad", "")]
        tomb = rec_io.decode_head(left[keys.head_key("bad", "")], key="k")
        assert not tomb.records and not tomb.segments and tomb.meta == HeadMeta(fence=LOST_EPOCH_GAP)
    else:
        assert left == {}
    assert _objects(store, "good") == good  # nothing of another thread
    assert fresh.get_tuple({"configurable": {"thread_id": "bad"}}) is None
    _write(saver, "bad", 1)  # the id is free for a new thread
    assert len(list(fresh.list({"configurable": {"thread_id": "bad"}}))) == 1


def test_a_lease_lost_with_a_damaged_root_head_stays_fenced_after_the_delete(store: StoreBase) -> None:
    """The root head holds a session's lease and fencing epoch; damaged, both are unreadable.
    The delete's tombstone fences every epoch the lost lease can have had, so the old owner
    stays refused, also once a new owner took the session."""
    saver = _store_with(store)
    sessions = SessionManager(saver)
    old = sessions.acquire("bad", "worker-a", ttl=600)
    _damage(store, keys.head_key("bad", ""), "truncated")
    saver.delete_thread("bad")
    new = SessionManager(ObjectStoreSaver(store)).acquire("bad", "worker-b", ttl=600)
    # the subgraph head still said epoch 1: the tombstone fenced 1 + the gap, the new owner is above
    assert old.epoch == 1 and new.epoch == 1 + LOST_EPOCH_GAP + 1
    zombie = ObjectStoreSaver(store).with_lease(old)
    with pytest.raises(OwnershipLostError):
        zombie.put({"configurable": {"thread_id": "bad", "checkpoint_ns": ""}}, _cp(x=9), {"source": "update"}, {})
    owner = ObjectStoreSaver(store).with_lease(new)
    owner.put({"configurable": {"thread_id": "bad", "checkpoint_ns": ""}}, _cp(x=1), {"source": "update"}, {})


def test_a_stray_key_inside_a_threads_prefix_survives_its_delete(store: StoreBase) -> None:
    saver = _store_with(store)
    _stray(store, "heads/bad/readme.md")
    saver.delete_thread("bad")
    assert _read(store, "heads/bad/readme.md") == b"# notes\n"
    assert [k for k in _objects(store, "bad") if k != "heads/bad/readme.md"] == []


@pytest.mark.parametrize("mode", ["thread", "asyncio"])
def test_the_background_sweeper_logs_damage_and_sweeps_the_rest(
    mode: str, store: StoreBase, caplog: pytest.LogCaptureFixture
) -> None:
    """Nobody reads a background sweep's result: each object it skipped is logged (WARNING,
    naming the key), and the other threads are swept. The test waits for the sweeper's first
    round to end (``round_done``), never for time to pass."""
    clock = [0.0]
    saver = ObjectStoreSaver(store, ttl={"default_ttl": 1}, clock=lambda: clock[0])
    for t in ("bad", "good"):
        _write(saver, t)
    clock[0] += 120
    _damage(store, keys.head_key("bad", ""), "empty")
    caplog.set_level(logging.WARNING, logger="langgraph_handoff")
    if mode == "thread":
        saver.start_ttl_sweeper(60)
        assert saver._sweeper.round_done.wait(30)
        assert saver.stop_ttl_sweeper(30)
    else:

        async def run() -> None:
            await saver.astart_ttl_sweeper(60)
            assert await asyncio.to_thread(saver._sweeper.round_done.wait, 30)
            assert await saver.astop_ttl_sweeper(30)

        asyncio.run(run())
    assert saver.get_tuple({"configurable": {"thread_id": "good"}}) is None  # swept
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("heads/bad/=" in m and "empty" in m for m in warned), warned
    assert store.get(keys.head_key("bad", "")).body == b""  # type: ignore[union-attr]


def test_the_memory_sweep_goes_on_past_a_damaged_item(store: StoreBase, caplog: pytest.LogCaptureFixture) -> None:
    clock = [1_000_000.0]
    memory = ObjectStoreMemory(store, ttl={"default_ttl": 1}, clock=lambda: clock[0])
    for key in ("a", "b", "c"):
        memory.put(("users", "u1"), key, {"v": key})
    clock[0] += 120
    item = next(i.key for i in store.list("memory/") if i.key.endswith("/b"))
    store.put(item, store.get(item).body[:20])  # type: ignore[union-attr]
    _stray(store, "memory/notes.md")
    result = memory.sweep()
    assert result.removed == 2
    assert [(d.key, d.reason) for d in result.damaged] == [("memory/notes.md", "not_an_item"), (item, "truncated")]
    caplog.set_level(logging.WARNING, logger="langgraph_handoff")
    assert memory.sweep_ttl() == 0  # the int LangGraph's stores return; the damage is logged
    assert any(item in r.getMessage() for r in caplog.records)
    assert asyncio.run(memory.asweep()).damaged == result.damaged


def test_the_async_twins_contain_damage_alike(store: StoreBase) -> None:
    _store_with(store)
    key = keys.head_key("bad", "")
    _damage(store, key, "checksum")
    _stray(store, "heads/zz-notes.md")
    saver = ObjectStoreSaver(store, clock=lambda: time.time() + 3600)

    async def run() -> None:
        found: list[DamagedObject] = []
        listed = [t async for t in saver.alist(None, on_damaged=found.append)]
        assert len(listed) == 7 and [(d.key, d.reason) for d in found] == [
            (key, "checksum"),
            ("heads/zz-notes.md", "not_a_head"),
        ]
        swept = await saver.asweep(dry_run=True, default_ttl=1)
        assert [(d.key, d.reason) for d in swept.damaged] == [("heads/zz-notes.md", "not_a_head"), (key, "checksum")]
        summary = await saver.amigrate(dry_run=True)
        assert [(d.key, d.reason) for d in summary.damaged] == [("heads/zz-notes.md", "not_a_head"), (key, "checksum")]
        with pytest.raises(DamagedObjectsError) as info:
            await saver.aprune(["good", "bad"])
        assert [d.key for d in info.value.damaged] == [key]
        assert len([t async for t in saver.alist({"configurable": {"thread_id": "good"}})]) == 2

    asyncio.run(run())
