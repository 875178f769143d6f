"""The metadata index: a store-wide filtered list reads only the namespaces that can match,
never misses one, and falls back to the full walk until the index is declared complete.

Requests are counted (``CountingStore``), never timed. Every result of an indexed list is
compared with what the full walk (a saver that indexes nothing) returns on the same store.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from langgraph_handoff import Layout, LocalStore, MemoryStore, ObjectStoreSaver
from langgraph_handoff._format import index_keys
from langgraph_handoff.errors import StoreUnavailableError
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.stores import CountingStore
from langgraph_handoff.stores.base import StoreBase
from tests.support.saver_helpers import put

NO_INDEX = Layout(indexed_metadata=())


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreBase:
    return MemoryStore() if request.param == "memory" else LocalStore(str(tmp_path / "store"))


def _walk(store: StoreBase, flt: dict[str, Any]) -> list[tuple[str, str, str]]:
    """What the full walk returns: every checkpoint of the store, filtered here as
    InMemorySaver filters (top-level equality, a missing key equal to None)."""
    every = ObjectStoreSaver(store).list(None)
    return _ids(t for t in every if all(t.metadata.get(k) == v for k, v in flt.items()))


def _ids(tuples: Any) -> list[tuple[str, str, str]]:
    return [
        (t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_ns"], t.checkpoint["id"])
        for t in tuples
    ]


def _threads(saver: ObjectStoreSaver, n: int, users: int, start: int = 0, user: str = "u") -> None:
    """``n`` threads of two checkpoints each, user ``{user}{i % users}``."""
    for i in range(start, start + n):
        first = put(saver, f"t{i:05}", None, 1, user_id=f"{user}{i % users}")
        put(saver, f"t{i:05}", first, 2, user_id=f"{user}{i % users}")


def _entries(store: StoreBase) -> list[str]:
    return sorted(i.key for i in store.list(index_keys.INDEX_ROOT))


def test_filtered_list_costs_requests_in_proportion_to_matches(store: StoreBase) -> None:
    counted = CountingStore(store)
    saver = ObjectStoreSaver(counted)
    saver.setup()  # a fresh store: the index is declared complete at once
    costs = []
    _threads(saver, 100, users=25)  # u3 owns 4 threads
    for more in (0, 300):
        _threads(saver, more, users=25, start=100, user="w")  # 300 threads more, none of u3's
        fresh = ObjectStoreSaver(counted)  # another process: nothing remembered
        counted.reset()
        found = _ids(fresh.list(None, filter={"user_id": "u3"}))
        costs.append(dict(counted.snapshot()))
        assert found == _walk(store, {"user_id": "u3"})
        assert len({t for t, _, _ in found}) == 4
    # 1 GET of meta/index, 1 LIST of the value's entries, then 1 GET + 1 LIST per matching thread:
    # the same at 400 threads as at 100
    assert costs[0] == costs[1] == {"GET": 5, "LIST": 5, "requests": 10, "round_trips": 6}
    counted.reset()
    assert len(_walk(counted, {"user_id": "u3"})) == 8
    assert counted.requests > 800  # the walk: 2 requests per thread


def test_a_thread_pays_for_its_entries_once(store: StoreBase) -> None:
    counted = CountingStore(store)
    saver = ObjectStoreSaver(counted)
    counted.reset()
    first = put(saver, "t", None, 1, user_id="u", assistant_id="a")
    # the head GET, then the entries (2 values + 1 by-thread record) in one round trip, then the head
    assert counted.snapshot() == {"GET": 1, "PUT": 4, "requests": 5, "round_trips": 3}
    counted.reset()
    second = put(saver, "t", first, 2, user_id="u", assistant_id="a")
    assert counted.snapshot() == {"PUT": 1, "requests": 1, "round_trips": 1}
    counted.reset()
    put(saver, "t", second, 3, user_id="v", assistant_id="a")  # a new value: its entry only
    assert counted.snapshot() == {"PUT": 3, "requests": 3, "round_trips": 2}
    counted.reset()
    put(saver, "t", None, 1, ns="child:1", user_id="v", assistant_id="a")  # a new namespace
    assert counted.snapshot()["PUT"] == 4
    assert len(_entries(store)) == 3 + 2 + 3  # entries and by-thread records


def test_values_match_as_python_equality_does(store: StoreBase) -> None:
    saver = ObjectStoreSaver(store, layout=Layout(indexed_metadata=("n",)))
    saver.rebuild_index()
    put(saver, "int", None, 1, n=1)
    put(saver, "float", None, 1, n=1.0)
    put(saver, "bool", None, 1, n=True)
    put(saver, "text", None, 1, n="1")
    put(saver, "half", None, 1, n=1.5)
    for value in (1, 1.0, True, "1", 1.5, 2, None):
        assert _ids(saver.list(None, filter={"n": value})) == _walk(store, {"n": value}), value
    assert {t for t, _, _ in _ids(saver.list(None, filter={"n": 1}))} == {"int", "float", "bool"}


def test_several_keys_are_intersected_and_unindexed_ones_filtered(store: StoreBase) -> None:
    counted = CountingStore(store)
    saver = ObjectStoreSaver(counted)
    saver.setup()
    for i in range(40):
        put(saver, f"t{i:02}", None, 1, user_id=f"u{i % 2}", graph_id=f"g{i % 5}", tag=f"x{i % 3}")
    # (filter, indexed keys in it, threads its entries name: the intersection)
    cases = [
        ({"user_id": "u1", "graph_id": "g2"}, 2, 4),
        ({"user_id": "u0", "tag": "x1"}, 1, 20),
        ({"graph_id": "g3", "missing": None}, 1, 8),
    ]
    for flt, indexed, candidates in cases:
        counted.reset()
        found = _ids(ObjectStoreSaver(counted).list(None, filter=flt))
        assert found == _walk(store, flt) and found, flt
        # 1 GET of meta/index, 1 LIST per indexed key, 1 GET + 1 LIST per thread named
        assert counted.requests == 1 + indexed + 2 * candidates, flt
    counted.reset()  # a filter on no indexed key, or on a value no entry can name: the walk
    assert len(list(saver.list(None, filter={"user_id": None}))) == 0
    assert counted.requests > 40


def test_a_store_without_a_complete_index_is_walked_until_rebuilt(store: StoreBase) -> None:
    old = ObjectStoreSaver(store, layout=NO_INDEX)  # a release before the index: no entries
    _threads(old, 30, users=3)
    counted = CountingStore(store)
    saver = ObjectStoreSaver(counted)
    counted.reset()
    assert _ids(saver.list(None, filter={"user_id": "u1"})) == _walk(store, {"user_id": "u1"})
    # no marker: every thread's head read (30 GETs and the marker's), none missed; writes are
    # listed for the 10 threads that match only (a LIST per thread before)
    assert (counted.snapshot()["GET"], counted.snapshot()["LIST"]) == (1 + 30, 1 + 10)
    _threads(saver, 10, users=3, start=30)  # new threads with entries: still not complete
    assert len(_ids(saver.list(None, filter={"user_id": "u1"}))) == 2 * 13
    seen: list[tuple[int, int]] = []
    report = saver.rebuild_index(progress=lambda done, total: seen.append((done, total)))
    assert (report.namespaces, report.checkpoints, report.created) == (40, 80, 30)
    assert report.complete == ["assistant_id", "graph_id", "user_id"] and seen[-1] == (40, 40)
    counted.reset()
    assert _ids(ObjectStoreSaver(counted).list(None, filter={"user_id": "u1"})) == _walk(store, {"user_id": "u1"})
    assert counted.requests == 2 + 2 * 13
    assert saver.rebuild_index().created == 0  # idempotent: nothing written twice
    assert verify_store(saver).problems == []


class _Stop(Exception):
    pass


def test_a_rebuild_killed_midway_declares_nothing_and_the_next_one_finishes(store: StoreBase) -> None:
    _threads(ObjectStoreSaver(store, layout=NO_INDEX), 20, users=4)
    saver = ObjectStoreSaver(store)

    def killed(done: int, total: int) -> None:
        if done == 7:
            raise _Stop

    with pytest.raises(_Stop):
        saver.rebuild_index(progress=killed)
    assert store.get(index_keys.INDEX_MARKER_KEY) is None
    counted = CountingStore(store)
    counted.reset()
    assert _ids(ObjectStoreSaver(counted).list(None, filter={"user_id": "u2"})) == _walk(store, {"user_id": "u2"})
    # still the walk: 7 threads indexed is not an index (every head read, matches' writes listed)
    assert (counted.snapshot()["GET"], counted.snapshot()["LIST"]) == (1 + 20, 1 + 5)
    assert saver.rebuild_index().created == 13
    assert len(_ids(saver.list(None, filter={"user_id": "u2"}))) == 10


class _HeadPutFails(MemoryStore):
    """A writer killed between its entries and its head: the head PUT never lands."""

    fail = False

    def put(self, key: str, body: bytes, **kw: Any) -> str:
        if self.fail and key.startswith("heads/"):
            raise StoreUnavailableError(f"injected: the writer died before {key}")
        return super().put(key, body, **kw)

    def run_many(self, ops: Any, *, return_exceptions: bool = False) -> list[Any]:
        return [self._one(op, return_exceptions) for op in ops]

    def _one(self, op: Any, return_exceptions: bool) -> Any:
        try:
            return self.run(op)
        except Exception as exc:
            if return_exceptions:
                return exc
            raise

    def run(self, op: Any) -> Any:
        if self.fail and getattr(op, "key", "").startswith("heads/") and hasattr(op, "body"):
            raise StoreUnavailableError("injected: the writer died before its head")
        return super().run(op)


def test_a_writer_killed_between_entry_and_head_leaves_a_stale_entry_never_a_missing_one() -> None:
    store = _HeadPutFails()
    saver = ObjectStoreSaver(store)
    saver.setup()
    store.fail = True
    with pytest.raises(StoreUnavailableError):
        put(saver, "t", None, 1, user_id="u")
    assert _entries(store) and saver.get_tuple({"configurable": {"thread_id": "t"}}) is None
    assert list(saver.list(None, filter={"user_id": "u"})) == []
    report = verify_store(saver)
    assert report.problems == [] and report.stale_index_entries == 1
    store.fail = False
    put(ObjectStoreSaver(store), "t", None, 1, user_id="u")  # the retry, in a fresh process
    assert len(list(saver.list(None, filter={"user_id": "u"}))) == 1


def test_a_put_that_loses_its_swap_to_a_delete_indexes_the_thread_again(store: StoreBase) -> None:
    writer, other = ObjectStoreSaver(store), ObjectStoreSaver(store)
    writer.rebuild_index()
    first = put(writer, "t", None, 1, user_id="u")  # the writer remembers a head carrying u
    other.delete_thread("t")  # another process: the head and the entries go
    assert _entries(store) == []
    # The writer's next put swaps against the head it remembers, loses (it is gone), reads
    # again and decides again: the empty head carries no u, so the entries are written afresh.
    put(writer, "t", None, 1, user_id="u", by_run=False)
    assert len(list(ObjectStoreSaver(store).list(None, filter={"user_id": "u"}))) == 1
    assert first not in {t.checkpoint["id"] for t in writer.list(None, filter={"user_id": "u"})}
    assert verify_store(writer).problems == []


def test_delete_copy_prune_and_sweep_keep_the_index_right(store: StoreBase) -> None:
    clock = [1_000_000.0]
    saver = ObjectStoreSaver(store, ttl={"default_ttl": 1}, clock=lambda: clock[0])
    saver.rebuild_index()
    a1 = put(saver, "a", None, 1, user_id="u")
    put(saver, "a", a1, 2, user_id="v")  # the user changes: both values are indexed
    put(saver, "b", None, 1, user_id="u")
    put(saver, "b", None, 1, ns="child:1", user_id="u")
    saver.copy_thread("b", "c")
    assert [t for t, _, _ in _ids(saver.list(None, filter={"user_id": "u"}))] == ["a", "b", "b", "c", "c"]
    saver.delete_thread("b")
    assert not [k for k in _entries(store) if "/b/" in k]
    assert [t for t, _, _ in _ids(saver.list(None, filter={"user_id": "u"}))] == ["a", "c", "c"]
    saver.prune(["a"], strategy="keep_latest")  # a's u checkpoint goes; its entry stays, stale
    assert [t for t, _, _ in _ids(saver.list(None, filter={"user_id": "u"}))] == ["c", "c"]
    report = verify_store(saver)
    assert report.problems == [] and report.stale_index_entries == 1
    clock[0] += 3600  # every thread expires
    saver.sweep()
    assert _entries(store) == []
    assert list(saver.list(None, filter={"user_id": "v"})) == []


def test_verify_reports_a_checkpoint_the_index_misses_and_rebuild_repairs_it(store: StoreBase) -> None:
    saver = ObjectStoreSaver(store)
    saver.setup()
    put(saver, "indexed", None, 1, user_id="u")
    put(ObjectStoreSaver(store, layout=NO_INDEX), "hidden", None, 1, user_id="u")  # a writer misconfigured
    assert [t for t, _, _ in _ids(saver.list(None, filter={"user_id": "u"}))] == ["indexed"]
    problems = verify_store(saver).problems
    assert [(p.key, p.kind) for p in problems] == [("heads/hidden/=", "missing_index_entry")]
    assert saver.rebuild_index().created == 1
    assert verify_store(saver).problems == []
    assert [t for t, _, _ in _ids(saver.list(None, filter={"user_id": "u"}))] == ["hidden", "indexed"]


def test_team_spaces_have_an_index_of_their_own(store: StoreBase) -> None:
    root = ObjectStoreSaver(store)
    root.setup()
    members = root.under("teams/t/members/")
    members.rebuild_index()
    put(members, "t/alice", None, 1, user_id="u")
    put(root, "plain", None, 1, user_id="u")
    assert [t for t, _, _ in _ids(root.list(None, filter={"user_id": "u"}))] == ["plain"]
    assert [t for t, _, _ in _ids(members.list(None, filter={"user_id": "u"}))] == ["t/alice"]
    assert any(k.startswith("teams/t/members/index/") for k in (i.key for i in store.list("teams/")))
    assert verify_store(root).problems == []


def test_limit_stops_reading_and_async_lists_alike(store: StoreBase) -> None:
    counted = CountingStore(store)
    saver = ObjectStoreSaver(counted)
    saver.setup()
    _threads(saver, 60, users=2)
    counted.reset()
    assert len(list(ObjectStoreSaver(counted).list(None, filter={"user_id": "u0"}, limit=3))) == 3
    assert counted.requests == 2 + 2 * 2  # two threads of two checkpoints each

    async def collect() -> list[tuple[str, str, str]]:
        return _ids([t async for t in ObjectStoreSaver(store).alist(None, filter={"user_id": "u0"})])

    assert asyncio.run(collect()) == _ids(saver.list(None, filter={"user_id": "u0"})) == _walk(store, {"user_id": "u0"})


def test_index_keys_never_hold_the_value() -> None:
    secret = "alice@example.com"
    key = index_keys.entry_key("user_id", index_keys.value_digest(secret) or "", "t", "", "n0")
    assert "alice" not in key and "example" not in key


class _AfterRootSwap(MemoryStore):
    """Runs ``hook`` once, right after a conditional PUT of thread t's root head: a run writing
    in a subgraph between a sweep's root swap and its swap of that subgraph's head."""

    hook: Any = None

    def run(self, op: Any) -> Any:
        out = super().run(op)
        if self.hook is not None and getattr(op, "key", "") == "heads/t/=" and getattr(op, "if_match", None):
            hook, self.hook = self.hook, None
            hook()
        return out


def test_a_sweep_keeps_the_entries_of_a_namespace_revived_under_it() -> None:
    store = _AfterRootSwap()
    clock = [1_000_000.0]
    saver = ObjectStoreSaver(store, ttl={"default_ttl": 1}, clock=lambda: clock[0])
    saver.rebuild_index()
    put(saver, "t", None, 1, user_id="root-user")
    child = put(saver, "t", None, 1, ns="child:1", user_id="child-user")
    clock[0] += 3600
    late = ObjectStoreSaver(store, ttl={"default_ttl": 1}, clock=lambda: clock[0])
    store.hook = lambda: put(late, "t", child, 2, ns="child:1", user_id="child-user")
    result = saver.sweep()
    assert result.threads[0].revived_namespaces == ["child:1"]
    assert list(saver.list(None, filter={"user_id": "root-user"})) == []
    assert len(list(saver.list(None, filter={"user_id": "child-user"}))) == 2
    assert verify_store(saver).problems == []


def test_the_async_rebuild_is_the_same_plan(store: StoreBase) -> None:
    _threads(ObjectStoreSaver(store, layout=NO_INDEX), 12, users=3)
    report = asyncio.run(ObjectStoreSaver(store).arebuild_index(["user_id"]))
    assert (report.namespaces, report.created, report.complete) == (12, 12, ["user_id"])
    assert len(list(ObjectStoreSaver(store).list(None, filter={"user_id": "u1"}))) == 8


def test_a_signing_saver_never_trusts_a_forged_marker() -> None:
    """``meta/index`` is what filters trust for completeness: it is signed like every object,
    and one no key signed declares nothing (filters read every thread)."""
    from langgraph_handoff._format import envelope

    store = MemoryStore()
    key = "k1:" + "ab" * 32
    saver = ObjectStoreSaver(store, signing_key=key)
    saver.setup()
    put(saver, "t", None, 1, user_id="u")
    old = ObjectStoreSaver(store, signing_key=key, layout=NO_INDEX)
    put(old, "hidden", None, 1, user_id="u")  # no entry
    forged = {"package": "langgraph-handoff", "index": {"complete": ["user_id"]}}
    store.put(index_keys.INDEX_MARKER_KEY, envelope.encode(envelope.Kind.MARKER, envelope.packb(forged)))
    counted = CountingStore(store)
    found = _ids(ObjectStoreSaver(counted, signing_key=key).list(None, filter={"user_id": "u"}))
    assert [t for t, _, _ in found] == ["hidden", "t"] and counted.requests > 4  # the walk


def test_an_unindexed_filter_gives_matches_their_writes_in_full(store: StoreBase) -> None:
    """The walk lists a thread's writes only once a checkpoint passes the filter: what it then
    gives must be what the unfiltered list gives, for every namespace."""
    saver = ObjectStoreSaver(store, layout=NO_INDEX)
    for i in range(6):
        for ns in ("", "child:1"):
            first = put(saver, f"t{i}", None, 1, ns=ns, user_id=f"u{i % 2}")
            second = put(saver, f"t{i}", first, 2, ns=ns, user_id=f"u{i % 2}")
            for cid in (first, second):
                config: Any = {"configurable": {"thread_id": f"t{i}", "checkpoint_ns": ns, "checkpoint_id": cid}}
                many = 1200 if (i, ns, cid) == (0, "", first) else 2
                saver.put_writes(config, [("ch", j) for j in range(many)], task_id=f"task-{i}")
    counted = CountingStore(store)
    filtered = list(ObjectStoreSaver(counted, layout=NO_INDEX).list(None, filter={"user_id": "u0"}))
    every = [t for t in ObjectStoreSaver(store).list(None) if t.metadata.get("user_id") == "u0"]
    assert [(t.config, t.pending_writes) for t in filtered] == [(t.config, t.pending_writes) for t in every]
    assert len(filtered) == 3 * 2 * 2 and all(t.pending_writes for t in filtered)
    assert max(len(t.pending_writes) for t in filtered) == 1200
    # the marker and every head read (6 threads, 2 namespaces each), then the 12 matching
    # checkpoints' writes; writes listed for the 3 matching threads' 6 namespaces only (the
    # unfiltered walk lists all 12)
    assert (counted.snapshot()["GET"], counted.snapshot()["LIST"]) == (1 + 12 + 12, 1 + 6)
