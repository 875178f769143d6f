"""``PrefixedStore`` and ``ObjectStoreSaver.under``: a saver whose threads live under a prefix of
another saver's store (an agent team's members), apart from every thread id that saver takes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import envelope, keys
from langgraph_handoff.checkpoint import driver, trust
from langgraph_handoff.checkpoint.signed_store import SigningStore
from langgraph_handoff.errors import CorruptObjectError, PreconditionFailedError
from langgraph_handoff.stores import CountingStore, MemoryStore
from langgraph_handoff.stores.base import Delete, DeleteMany, Get, ListPage, Put
from langgraph_handoff.stores.prefixed import PrefixedStore, unprefixed
from tests.checkpoint.test_trust import Remote

P = "teams/t/members/"
CP = {"v": 4, "id": "1ef4f797-8335-6428-8001-8a1503f9b875", "ts": "2024-01-01T00:00:00+00:00",
      "channel_values": {"x": 1}, "channel_versions": {"x": 1}, "versions_seen": {}}  # fmt: skip


def test_keys_go_in_with_the_prefix_and_come_back_without_it() -> None:
    root = MemoryStore()
    _ = root.put("heads/a/=", b"root's")
    view = PrefixedStore(root, P)
    etag = view.put("heads/a/=", b"view's", if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        view.put("heads/a/=", b"again", if_none_match=True)
    for i in range(5):
        view.put(f"data/a/=/w/{i}", b"w")
    assert root.get("heads/a/=").body == b"root's"  # type: ignore[union-attr]
    got = view.get("heads/a/=")
    assert got is not None and (got.key, got.body, got.etag) == ("heads/a/=", b"view's", etag)
    page = view.list_page("data/a/", start_after="data/a/=/w/1", max_keys=2)
    assert [i.key for i in page.items] == ["data/a/=/w/2", "data/a/=/w/3"] and page.truncated
    assert [i.key for i in view.list("")] == ["data/a/=/w/0", *(f"data/a/=/w/{i}" for i in range(1, 5)), "heads/a/="]
    outs = view.run_many([Get("heads/a/="), ListPage("heads/"), Put("x", b"1"), Get("nope")])
    assert outs[0].key == "heads/a/=" and [i.key for i in outs[1].items] == ["heads/a/="] and outs[3] is None
    view.run(DeleteMany(("data/a/=/w/0", "data/a/=/w/1")))
    view.run(Delete("x"))
    assert sorted(i.key for i in root.list("")) == [
        "heads/a/=",
        *(f"{P}data/a/=/w/{i}" for i in (2, 3, 4)),
        f"{P}heads/a/=",
    ]


def test_async_and_a_view_of_a_view() -> None:
    root = MemoryStore()
    inner = PrefixedStore(PrefixedStore(root, "teams/"), "t/members/")
    assert (inner.prefix, inner.inner) == (P, root)

    async def go() -> list[Any]:
        await inner.aput("k", b"v")
        return [await inner.aget("k"), await inner.alist_page(""), await inner.arun_many([Get("k")])]

    obj, page, [again] = asyncio.run(go())
    assert (obj.key, [i.key for i in page.items], again.key) == ("k", ["k"], "k")
    assert [i.key for i in root.list("")] == [P + "k"]
    assert unprefixed(inner) is root and unprefixed(root) is root


def test_a_saver_under_a_prefix_never_meets_the_roots_threads() -> None:
    root = ObjectStoreSaver(MemoryStore())
    members = root.under(P)
    cfg: Any = {"configurable": {"thread_id": "t/alice", "checkpoint_ns": ""}}
    members.put(cfg, CP, {}, {"x": 1})
    assert root.get_tuple(cfg) is None and root.thread_ids() == [] and list(root.list(None)) == []
    assert members.thread_ids() == ["t/alice"]
    root.put(cfg, {**CP, "channel_values": {"x": 2}}, {}, {"x": 1})  # a root thread of the same id
    assert members.get_tuple(cfg).checkpoint["channel_values"] == {"x": 1}  # type: ignore[union-attr]
    root.delete_thread("t/alice")
    assert members.get_tuple(cfg) is not None
    members.close()  # closes nothing: the store is the root saver's
    assert root.get_tuple(cfg) is None


def test_objects_under_a_prefix_are_signed_for_their_full_key() -> None:
    """A signed object moved between the root and a view (or between views) is refused: the
    signature names the key it was written for, the prefix included."""
    raw = MemoryStore()
    root = ObjectStoreSaver(raw, signing_key="k1:" + "s" * 43)
    assert isinstance(root.store, SigningStore)
    members = root.under(P)
    members.put({"configurable": {"thread_id": "t/alice", "checkpoint_ns": ""}}, CP, {}, {"x": 1})
    key = keys.head_key("t/alice", "")
    body = raw.get(P + key).body  # type: ignore[union-attr]
    raw.put(key, body)  # replayed at the root
    raw.put("teams/u/members/" + key, body)  # or in another team's space
    for where in (root.store, root.under("teams/u/members/").store):
        obj = where.get(key)
        assert obj is not None
        with pytest.raises(CorruptObjectError, match="signed"):
            envelope.decode(obj.body, key=key)


def test_the_store_probe_runs_at_the_root_once_for_every_view() -> None:
    store = CountingStore(Remote())
    try:
        members = ObjectStoreSaver(store).under(P)
        members.put({"configurable": {"thread_id": "t/alice", "checkpoint_ns": ""}}, CP, {}, {"x": 1})
        assert store.get(keys.FORMAT_MARKER_KEY) is not None  # the probe's pass, at the root
        assert [i.key for i in store.list(P) if "meta" in i.key] == []
        store.reset()
        ObjectStoreSaver(store).under("teams/u/members/").put(
            {"configurable": {"thread_id": "u/bob", "checkpoint_ns": ""}}, CP, {}, {"x": 1}
        )
        assert keys.FORMAT_MARKER_KEY not in [k for _, k in store.log], store.log  # one verdict for every view
        assert trust.verdict(PrefixedStore(store, P)) is True
    finally:
        trust.forget(store)


def test_driver_under_runs_a_views_plan_inside_a_plan_on_the_root() -> None:
    root = MemoryStore()
    saver = ObjectStoreSaver(root)
    members = saver.under(P)
    members.put({"configurable": {"thread_id": "t/alice", "checkpoint_ns": ""}}, CP, {}, {"x": 1})

    def plan() -> Any:
        roster = yield Get("teams/t/roster")
        head, etag = yield from driver.under(P, members.heads.read("t/alice"))
        return roster, head.latest_id, etag

    roster, latest, etag = driver.run(root, plan())
    assert roster is None and latest == CP["id"] and etag == root.get(P + keys.head_key("t/alice", "")).etag  # type: ignore[union-attr]
