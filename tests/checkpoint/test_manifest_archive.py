"""A head lists only its newest segments; the older references live in one archive object
(``checkpoint/plans/manifest.py``). History must read whole through it, from cold savers, stale
heads and async; rewrites (prune, delete_for_runs, copy, migrate, delete) must keep it
consistent and leave no archive behind; a lost or damaged archive is a typed error that names
it; and readers racing a writer that folds never miss a checkpoint."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

import pytest

from langgraph_handoff import Layout, MemoryStore, ObjectStoreSaver
from langgraph_handoff._format import keys
from langgraph_handoff._format import records as rec_io
from langgraph_handoff.checkpoint import driver
from langgraph_handoff.checkpoint.plans import manifest, reading
from langgraph_handoff.errors import CorruptObjectError, OwnershipLostError, UnknownOutcomeError
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.migrations import SchemaMigrations
from langgraph_handoff.ownership import SessionManager
from langgraph_handoff.stores import StoreBase
from tests.support.saver_helpers import LostSwapAnswer, put

#: a segment every three puts, so 200 puts make ~66 segments and fold several times
SMALL = Layout(head_max_records=3, head_keep=1)


def _chain(saver: ObjectStoreSaver, n: int, thread: str = "t", start: int = 0, parent: str | None = None,
           ns: str = "", **md: Any) -> list[str]:  # fmt: skip
    ids = []
    for step in range(start, start + n):
        values = {"x": f"value {step}", "step": step}
        parent = put(saver, thread, parent, step, ns=ns, values=values, versions={"x": step + 1, "step": step + 1},
                     run_id=f"run-{step % 2}", **md)  # fmt: skip
        ids.append(parent)
    return ids


def _head(store: StoreBase, thread: str = "t", ns: str = "") -> rec_io.Head:
    obj = store.get(keys.head_key(thread, ns))
    assert obj is not None
    return rec_io.decode_head(obj.body, key=obj.key)


def _archives(store: StoreBase, thread: str = "t") -> list[str]:
    return [i.key for i in store.list(keys.data_prefix(thread, "")) if "/m/" in i.key]


def _ids(saver: ObjectStoreSaver, thread: str = "t") -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list({"configurable": {"thread_id": thread}})]


def _clean(store: StoreBase) -> None:
    report = verify_store(ObjectStoreSaver(store))
    assert report.problems == []
    assert report.unreferenced == []


def test_the_head_stays_small_and_history_reads_whole(store: StoreBase) -> None:
    saver = ObjectStoreSaver(store, layout=SMALL)
    ids, sizes, parent = [], [], None
    for step in range(240):
        ids += _chain(saver, 1, start=step, parent=parent)
        parent = ids[-1]
        head = _head(store)
        assert len(head.segments) <= manifest.ARCHIVE_FOLD
        sizes.append(len(store.get(keys.head_key("t", "")).body))  # type: ignore[union-attr]
    head = _head(store)
    assert head.archive is not None and head.archive.count > 50
    # only the archive the head names is left: each fold deleted the one it replaced
    assert _archives(store) == [manifest.archive_key("t", "", head.archive)]
    # the head's bytes do not grow with the thread (without the archive: +40 bytes a segment)
    assert max(sizes[180:]) <= max(sizes[60:120]) * 1.1
    cold = ObjectStoreSaver(store, layout=SMALL)
    assert _ids(cold) == ids[::-1]
    oldest = ObjectStoreSaver(store).get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": ids[0]}})
    assert oldest is not None and oldest.checkpoint["channel_values"] == {"x": "value 0", "step": 0}
    _clean(store)


def test_async_listing_reads_through_the_archive(store: StoreBase) -> None:
    ids = _chain(ObjectStoreSaver(store, layout=SMALL), 120)

    async def listed() -> list[str]:
        cold = ObjectStoreSaver(store)
        return [
            t.config["configurable"]["checkpoint_id"] async for t in cold.alist({"configurable": {"thread_id": "t"}})
        ]

    assert asyncio.run(listed()) == ids[::-1]


def test_rewrites_keep_the_manifest_whole_and_leave_no_archive(store: StoreBase) -> None:
    saver = ObjectStoreSaver(store, layout=SMALL)
    ids = _chain(saver, 200)
    saver.copy_thread("t", "t2")
    assert _ids(ObjectStoreSaver(store), "t2") == ids[::-1]
    _clean(store)
    # the copy's head lists every segment; its next puts fold it again
    more = _chain(saver, 20, thread="t2", start=200, parent=ids[-1])
    assert _head(store, "t2").archive is not None
    assert _ids(ObjectStoreSaver(store), "t2") == (ids + more)[::-1]
    # drop every other checkpoint of both threads: the old archives go, the survivors stay listed
    saver.delete_for_runs(["run-1"])
    kept = [i for n, i in enumerate(ids + more) if n % 2 == 0]
    assert _ids(ObjectStoreSaver(store)) == kept[:100][::-1]
    assert _ids(ObjectStoreSaver(store), "t2") == kept[::-1]
    assert _archives(store) == [] and _archives(store, "t2") == []
    _clean(store)
    saver.prune(["t2"])
    assert _ids(ObjectStoreSaver(store), "t2") == [kept[-1]]
    assert _archives(store, "t2") == []
    _clean(store)
    saver.delete_thread("t")
    assert list(store.list(keys.data_prefix("t", ""))) == []


def test_migrate_rewrites_a_folded_thread(store: StoreBase) -> None:
    ids = _chain(ObjectStoreSaver(store, layout=SMALL), 150)
    steps = SchemaMigrations()

    @steps.register(1, "tag every value")
    def tag(values: dict, metadata: dict) -> None:
        values["x"] = values["x"] + " (v1)"

    newer = ObjectStoreSaver(store, migrations=steps, layout=SMALL)
    newer.migrate_thread("t")
    assert _ids(ObjectStoreSaver(store, migrations=steps)) == ids[::-1]
    oldest = newer.get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": ids[0]}})
    assert oldest is not None and oldest.checkpoint["channel_values"]["x"] == "value 0 (v1)"
    assert _archives(store) == []
    _clean(store)


def test_a_stale_head_follows_the_archive_that_replaced_its_own(store: StoreBase) -> None:
    writer = ObjectStoreSaver(store, layout=SMALL)
    ids = _chain(writer, 150)
    stale = _head(store)
    assert stale.archive is not None
    ids += _chain(writer, 60, start=150, parent=ids[-1])
    assert manifest.archive_key("t", "", stale.archive) not in _archives(store)  # folded away
    reader = ObjectStoreSaver(store)  # holds nothing: must GET the gone archive, then the head
    found = driver.run(store, reading.find_record(reader, "t", "", stale, ids[1]))
    assert found is not None and found[0].id == ids[1]


def test_a_lost_archive_is_a_typed_error_that_names_it(store: StoreBase) -> None:
    ids = _chain(ObjectStoreSaver(store, layout=SMALL), 150)
    head = _head(store)
    assert head.archive is not None
    key = manifest.archive_key("t", "", head.archive)
    store.delete(key)
    cold = ObjectStoreSaver(store)
    assert cold.get_tuple({"configurable": {"thread_id": "t"}}) is not None  # the latest needs none
    with pytest.raises(CorruptObjectError, match="archive") as err:
        cold.get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": ids[0]}})
    assert key in str(err.value)
    with pytest.raises(CorruptObjectError, match="archive"):
        _ids(cold)
    assert [p.kind for p in verify_store(cold).problems] == ["missing_archive"]


def test_an_archive_that_disagrees_with_its_head_is_corrupt(store: StoreBase) -> None:
    ids = _chain(ObjectStoreSaver(store, layout=SMALL), 150)
    head = _head(store)
    assert head.archive is not None
    key = manifest.archive_key("t", "", head.archive)
    archive = rec_io.decode_archive(store.get(key).body, key=key)  # type: ignore[union-attr]
    store.put(key, rec_io.encode_archive(rec_io.Archive(archive.refs[:-1])))
    with pytest.raises(CorruptObjectError, match="lists"):
        ObjectStoreSaver(store).get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": ids[0]}})


def test_a_prune_whose_answer_is_lost_under_a_fold_finishes(store: StoreBase) -> None:
    ids = _chain(ObjectStoreSaver(store, layout=SMALL), 200)
    writer = ObjectStoreSaver(store, layout=SMALL)
    more: list[str] = []

    def fold_on_top() -> None:  # one put on the rewritten head: it lists > ARCHIVE_FOLD segments
        latest = ObjectStoreSaver(store).get_tuple({"configurable": {"thread_id": "t"}})
        assert latest is not None
        more.extend(_chain(writer, 1, start=300, parent=latest.config["configurable"]["checkpoint_id"]))

    lossy = LostSwapAnswer(store, fold_on_top)
    ObjectStoreSaver(lossy, layout=SMALL).delete_for_runs(["run-1"])
    assert _head(store).archive is not None  # the writer folded the rewritten manifest
    kept = [i for n, i in enumerate(ids) if n % 2 == 0]
    assert _ids(ObjectStoreSaver(store)) == (kept + more)[::-1]
    _clean(store)


def test_readers_racing_a_folding_writer_miss_nothing(store: StoreBase) -> None:
    writer = ObjectStoreSaver(store, layout=SMALL)
    ids = _chain(writer, 60)
    done = threading.Event()
    start = threading.Barrier(2)
    problems: list[str] = []
    listings = 0

    def read() -> None:
        nonlocal listings
        start.wait()
        while not done.is_set() or listings == 0:
            before = list(ids)  # every checkpoint put before this listing began
            got = _ids(ObjectStoreSaver(store))
            listings += 1
            if got != sorted(got, reverse=True) or not set(before) <= set(got):
                problems.append(f"listing {listings}: {len(got)} ids, {len(set(before) - set(got))} missed")

    reader = threading.Thread(target=read)
    reader.start()
    start.wait()
    try:
        for step in range(60, 160):
            ids.extend(_chain(writer, 1, start=step, parent=ids[-1]))
    finally:
        done.set()
        reader.join()
    assert problems == []
    assert listings >= 1
    assert _ids(ObjectStoreSaver(store)) == ids[::-1]
    _clean(store)


def test_a_ttl_sweep_deletes_the_archive_with_the_thread(store: StoreBase) -> None:
    from tests.support.sweep_helpers import TTL, Clock

    clock = Clock()
    saver = ObjectStoreSaver(store, ttl=TTL, clock=clock, layout=SMALL)
    _chain(saver, 150)
    assert _archives(store)
    clock.advance(61)
    assert saver.sweep().deleted == 1
    assert list(store.list(keys.data_prefix("t", ""))) == []


def _to_fold_point(saver: ObjectStoreSaver, store: StoreBase, thread: str = "t", ns: str = "") -> list[str]:
    """Puts until the head has an archive and its next seal folds the list again."""
    ids = _chain(saver, 1, thread=thread, ns=ns)
    while True:
        h = _head(store, thread, ns)
        if h.archive is not None and len(h.segments) == manifest.ARCHIVE_FOLD and len(h.records) == 3:
            return ids
        ids += _chain(saver, 1, thread=thread, ns=ns, start=len(ids), parent=ids[-1])


def test_a_damaged_archive_does_not_stop_the_thread(store: StoreBase) -> None:
    saver = ObjectStoreSaver(store, layout=SMALL)
    ids = _to_fold_point(saver, store)
    head = _head(store)
    assert head.archive is not None
    store.put(manifest.archive_key("t", "", head.archive), b"garbage")
    fresh = ObjectStoreSaver(store, layout=SMALL)
    ids += _chain(fresh, 12, start=len(ids), parent=ids[-1])  # seals that would fold: they do not
    assert len(_head(store).segments) > manifest.ARCHIVE_FOLD
    assert fresh.get_tuple({"configurable": {"thread_id": "t"}}).config["configurable"]["checkpoint_id"] == ids[-1]  # type: ignore[union-attr]
    with pytest.raises(CorruptObjectError):
        _ids(ObjectStoreSaver(store))


def test_clearing_a_sweep_mark_keeps_the_archive(store: StoreBase) -> None:
    from langgraph_handoff.checkpoint.plans import sweep
    from langgraph_handoff.checkpoint.ttl import swept_mark

    saver = ObjectStoreSaver(store, layout=SMALL)
    ids = _chain(saver, 150)
    head = _head(store)
    marked = dataclasses.replace(head, meta=head.meta.replace(swept=swept_mark(1.0, ids[0])))
    etag = store.put(keys.head_key("t", ""), rec_io.encode_head(marked))
    driver.run(store, sweep._clear_marks(saver, "t", [(marked, etag)]))
    cleared = _head(store)
    assert cleared.meta.swept is not None and cleared.meta.swept.upto is None
    assert cleared.archive == head.archive and cleared.segments == head.segments
    assert _ids(ObjectStoreSaver(store)) == ids[::-1]


class _AfterSubgraphPut(MemoryStore):
    """Shares ``base``'s objects; after the first conditional PUT of the subgraph head lands,
    runs ``then`` and, with ``lose``, loses the answer (HTTP 500)."""

    def __init__(self, base: MemoryStore, then: Any, lose: bool) -> None:
        self._lock, self._objects, self._keys = base._lock, base._objects, base._keys  # type: ignore[attr-defined]
        self.then, self.lose, self.armed = then, lose, True

    def put(self, key: str, body: bytes, **kw: Any) -> str:
        etag = super().put(key, body, **kw)
        if self.armed and key == keys.head_key("chat", SUB) and kw.get("if_match"):
            self.armed = False
            self.then()
            if self.lose:
                raise UnknownOutcomeError(key, "HTTP 500 (it landed)")
        return etag


SUB = "sub:1"


@pytest.mark.parametrize("lose", [False, True], ids=["answered", "answer-lost"])
def test_a_superseded_subgraph_write_that_folded_is_undone_whole(lose: bool) -> None:
    """A worker whose lease is taken over while its subgraph put folds: its write is undone (or,
    with the new owner's put on top, left under it) and no head names a deleted archive."""
    from tests.support.sweep_helpers import Clock

    base, clock = MemoryStore(), Clock()
    sessions = SessionManager(ObjectStoreSaver(base), clock=clock)
    lease = sessions.acquire("chat", "a", ttl=10)
    worker = ObjectStoreSaver(base, layout=SMALL).with_lease(lease)
    ids = _to_fold_point(worker, base, thread="chat", ns=SUB)
    before = _head(base, "chat", SUB)

    def takeover() -> None:
        clock.advance(11)
        new = SessionManager(ObjectStoreSaver(base), clock=clock).acquire("chat", "b", ttl=10)
        if lose:  # the new owner writes once on top of the superseded write: its put folds
            owner = ObjectStoreSaver(base, layout=SMALL).with_lease(new)
            latest = owner.get_tuple({"configurable": {"thread_id": "chat", "checkpoint_ns": SUB}})
            assert latest is not None
            _chain(owner, 1, thread="chat", ns=SUB, start=900, parent=latest.config["configurable"]["checkpoint_id"])

    zombie = ObjectStoreSaver(_AfterSubgraphPut(base, takeover, lose), layout=SMALL).with_lease(lease)
    with pytest.raises(OwnershipLostError):
        _chain(zombie, 1, thread="chat", ns=SUB, start=len(ids), parent=ids[-1])
    after = _head(base, "chat", SUB)
    if not lose:
        assert after.records == before.records and after.manifest == before.manifest  # undone
    report = verify_store(ObjectStoreSaver(base))
    assert report.problems == []
    # no archive is left unnamed (the undone write's sealed segment is, as before archives)
    assert [k for k in report.unreferenced if "/m/" in k] == []
    assert len(_ids_ns(ObjectStoreSaver(base), "chat", SUB)) == len(ids) + (2 if lose else 0)


def _ids_ns(saver: ObjectStoreSaver, thread: str, ns: str) -> list[str]:
    conf = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list(conf)]


def test_archive_lookup_finds_every_covering_segment() -> None:
    """One bisect when ranges are disjoint (as sealing makes them); every covering segment when
    they overlap (checkpoints put with ids older than the head's)."""
    ref = rec_io.SegmentRef
    disjoint = rec_io.Archive(tuple(ref(f"s/{i}", f"{i:03}a", f"{i:03}z", 2) for i in range(300, 0, -1)))
    assert [r.key for r in disjoint.covering("150m")] == ["s/150"]
    assert disjoint.covering("150~") == [] and disjoint.covering("000") == []
    overlapping = rec_io.Archive((ref("s/b", "b", "f", 2), ref("s/a", "a", "d", 2), ref("s/c", "e", "g", 2)))
    assert [r.key for r in overlapping.covering("c")] == ["s/b", "s/a"]
    assert [r.key for r in overlapping.covering("e")] == ["s/b", "s/c"]
