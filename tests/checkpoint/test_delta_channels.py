"""DeltaChannel (beta) threads: values are rebuilt from ancestor writes, so the saver's history
walk, its write order and prune must all be exact."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff._format import keys
from langgraph_handoff._format import records as rec_io
from langgraph_handoff.checkpoint.plans import reading
from langgraph_handoff.checkpoint.plans.reading import READ_WRITES_PAGE, WRITES_PAGE
from langgraph_handoff.stores import CountingStore, LocalStore, MemoryStore, StoreBase
from langgraph_handoff.stores.base import ListPage
from tests.support.saver_helpers import HeadsWritten


def _extend(state: list[str] | None, writes: list[list[str]]) -> list[str]:
    out = list(state or [])
    for w in writes:
        out.extend(w)
    return out


class S(TypedDict, total=False):
    items: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=3)]
    n: int


def delta_graph() -> StateGraph:
    g = StateGraph(S)
    g.add_node("left", lambda s: {"items": [f"L{s.get('n', 0)}"]})
    g.add_node("right", lambda s: {"items": [f"R{s.get('n', 0)}"]})
    g.add_node("count", lambda s: {"n": s.get("n", 0) + 1})
    g.add_edge(START, "left")
    g.add_edge(START, "right")  # parallel writers: order must follow writes_sort_key
    g.add_edge("left", "count")
    g.add_edge("right", "count")
    g.add_conditional_edges("count", lambda s: END if s["n"] >= 7 else ["left", "right"], ["left", "right", END])
    return g


def _run(saver: BaseCheckpointSaver, thread: str = "d") -> tuple[Any, list[Any]]:
    graph = delta_graph().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    graph.invoke({"items": ["seed"], "n": 0}, cfg)
    graph.invoke({"items": ["second-turn"], "n": 0}, cfg)
    state = graph.get_state(cfg).values
    hist = [h.values for h in graph.get_state_history(cfg)]
    return state, hist


def test_delta_runs_match_inmemory(store: StoreBase) -> None:
    expected = _run(InMemorySaver())
    assert len(expected[0]["items"]) == 1 + 14 + 1 + 14  # seed, 7 rounds x 2, second turn, 7 x 2
    assert _run(ObjectStoreSaver(store)) == expected
    # sealed history segments on the walk
    assert _run(ObjectStoreSaver(store, layout=Layout(head_max_records=3, head_keep=1)), "d2") == expected


def test_a_large_snapshot_is_written_once_as_a_blob(store: StoreBase) -> None:
    """Issue 26: a snapshot rode inline in two heads and then in a spill blob, three copies of
    the whole conversation. No later checkpoint stores the channel's value, so it goes straight
    to its own blob; the thread reads back the same from a process that never saw it."""
    layout = Layout(spill_threshold=64)  # the test graph's snapshots from the second on are past it
    counted = HeadsWritten(store)
    state, hist = _run(ObjectStoreSaver(counted, layout=layout))
    assert (state, hist) == _run(InMemorySaver())
    large = 0
    for body in counted.heads:
        for chs in rec_io.decode_head(body, key="h").payloads.values():
            p = chs.get("items")
            if isinstance(p, rec_io.BlobRef):
                large += 1
            assert not (isinstance(p, rec_io.Inline) and len(p.data) >= 64), p  # never inline
    assert large >= 2
    blob_puts = [k for op, k in counted.log if op == "PUT" and "/b/" in k]
    assert blob_puts and len(blob_puts) == len(set(blob_puts)), blob_puts  # each written once
    cold = delta_graph().compile(checkpointer=ObjectStoreSaver(store, layout=layout))
    cfg = {"configurable": {"thread_id": "d"}}
    assert cold.get_state(cfg).values == state
    assert [h.values for h in cold.get_state_history(cfg)] == hist


def test_native_history_equals_the_base_walk_in_fewer_requests(store: StoreBase) -> None:
    counted = CountingStore(store)
    saver = ObjectStoreSaver(counted)
    _run(saver)
    tuples = list(saver.list({"configurable": {"thread_id": "d", "checkpoint_ns": ""}}))
    native_requests = base_requests = 0
    for tup in tuples:
        counted.reset()
        native = saver.get_delta_channel_history(config=tup.config, channels=["items", "n"])
        native_requests += counted.requests
        counted.reset()
        base = BaseCheckpointSaver.get_delta_channel_history(saver, config=tup.config, channels=["items", "n"])
        base_requests += counted.requests
        assert native == base
    assert native_requests < base_requests / 2, (native_requests, base_requests)


async def test_async_history_equals_sync(store: StoreBase) -> None:
    saver = ObjectStoreSaver(store)
    _run(saver)
    async for tup in saver.alist({"configurable": {"thread_id": "d", "checkpoint_ns": ""}}, limit=5):
        sync = saver.get_delta_channel_history(config=tup.config, channels=["items"])
        assert await saver.aget_delta_channel_history(config=tup.config, channels=["items"]) == sync


@pytest.mark.parametrize("layout", [Layout(), Layout(head_max_records=3, head_keep=1)], ids=["wide", "sealed"])
def test_prune_keep_latest_keeps_what_deltas_need(store: StoreBase, layout: Layout) -> None:
    saver = ObjectStoreSaver(store, layout=layout)
    state_before, hist_before = _run(saver)
    saver.prune(["d"], strategy="keep_latest")
    fresh = ObjectStoreSaver(store, layout=layout)
    graph = delta_graph().compile(checkpointer=fresh)
    cfg = {"configurable": {"thread_id": "d"}}
    assert graph.get_state(cfg).values == state_before
    kept = list(fresh.list({"configurable": {"thread_id": "d"}}))
    assert 1 < len(kept) < len(hist_before)  # ancestors back to the last snapshot, not everything
    # the thread keeps working after the prune
    graph.invoke({"items": ["after-prune"], "n": 0}, cfg)
    assert graph.get_state(cfg).values["items"][: len(state_before["items"])] == state_before["items"]


def test_a_history_walk_reads_each_sealed_segment_once_per_process(store: StoreBase) -> None:
    """Issue 26's profile: every turn of a long DeltaChannel thread fetched and decoded again
    each sealed segment its history crossed, once per ancestor in it (about 110 GETs and
    decodes a turn at turn 50). Segments never change, so a process decodes each one once."""
    layout = Layout(head_max_records=3, head_keep=1)
    counted = CountingStore(store)
    saver = ObjectStoreSaver(counted, layout=layout)
    _run(saver)
    cfg = {"configurable": {"thread_id": "d", "checkpoint_ns": ""}}
    oldest = list(saver.list(cfg))[-3].config  # deep in the sealed history
    cold = ObjectStoreSaver(CountingStore(store), layout=layout)
    expected = cold.get_delta_channel_history(config=oldest, channels=["items"])
    counted.reset()
    assert saver.get_delta_channel_history(config=oldest, channels=["items"]) == expected
    assert counted.counts["GET"] == 1, counted.log  # the head; no segment
    assert len(saver._cache.immutable) > 0
    # the same walk from a saver that never saw the thread GETs each segment it needs once
    fresh_store = CountingStore(store)
    fresh = ObjectStoreSaver(fresh_store, layout=layout)
    assert fresh.get_delta_channel_history(config=oldest, channels=["items"]) == expected
    segment_gets = sum(1 for op, key in fresh_store.log if op == "GET" and "/s/" in key)
    assert 0 < segment_gets <= len(fresh._cache.immutable), (segment_gets, len(fresh._cache.immutable))


def test_a_history_walk_looks_up_each_container_once(store: StoreBase, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26's profile, 2026-12-03: with a snapshot every 1,000, each turn searched the head's
    segment list, the archive and the segment cache again for every one of about a thousand
    ancestors (a fifth of a turn's CPU). An ancestor in the head or segment that held the one
    before it is found there with one dict lookup; only a step into another segment searches."""
    from langgraph_handoff.checkpoint.plans import reading

    layout = Layout(head_max_records=4, head_keep=1)
    saver = ObjectStoreSaver(store, layout=layout)
    _, _, latest = _long_thread(saver, "walk", 30)
    head = store.get(keys.head_key("walk", ""))
    assert head is not None
    decoded = rec_io.decode_head(head.body, key=head.key)
    containers = 1 + len(decoded.segments) + (decoded.archive.count if decoded.archive is not None else 0)
    searches: list[str] = []
    real = reading.find_container

    def counted(*args: Any) -> Any:
        searches.append(args[-1])
        return (yield from real(*args))

    monkeypatch.setattr(reading, "find_container", counted)
    native = saver.get_delta_channel_history(config=latest, channels=["items"])
    walked = len(searches)
    assert len(native["items"]["writes"]) == 60  # 30 questions and 30 answers, no snapshot yet
    assert native == BaseCheckpointSaver.get_delta_channel_history(saver, config=latest, channels=["items"])
    # 90-odd ancestors (three puts a turn) in the head and its sealed segments (four records
    # each, in the head's list or its archive): the target, then one search per container
    checkpoints = sum(1 for _ in saver.list({"configurable": {"thread_id": "walk", "checkpoint_ns": ""}}))
    assert checkpoints > 80 and containers > 10, (checkpoints, containers)
    assert walked <= 2 + containers, (walked, containers)


def test_every_walk_across_sealed_segments_and_snapshots_matches_the_base_walk(store: StoreBase) -> None:
    """The walk above, with snapshots every three updates (a seed record inside a segment, its
    own writes still collected) and parallel writers, from every checkpoint of the thread."""
    saver = ObjectStoreSaver(store, layout=Layout(head_max_records=3, head_keep=1))
    _run(saver, "sealed")
    assert _every_walk_matches_the_base_walk(saver, "sealed") > 10


class _CountingSerde(JsonPlusSerializer):
    def __init__(self) -> None:
        super().__init__()
        self.loads: list[int] = []

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.loads.append(len(data[1]))
        return super().loads_typed(data)


class _Big(TypedDict, total=False):
    items: Annotated[list[Any], DeltaChannel(_extend, snapshot_frequency=1000)]


def test_a_walk_decodes_each_large_write_once_and_hands_out_copies(store: StoreBase) -> None:
    """Issue 26's profile, 2026-12-03: a walk decoded every write since the last snapshot on
    every turn, the same bytes each time, a third of a turn at turn 1,000. A write of 256 bytes
    or more is decoded once per process; later walks get a copy of their own, so a node that
    changes a value in place changes nothing the next walk reads."""
    serde = _CountingSerde()
    saver = ObjectStoreSaver(store, serde=serde)
    g = StateGraph(_Big)
    g.add_node("say", lambda s: {"items": [{"text": "word " * 80, "n": len(s.get("items", []))}]})
    g.add_edge(START, "say")
    g.add_edge("say", END)
    graph = g.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "big"}}
    for i in range(6):
        graph.invoke({"items": [{"text": "ask " * 80, "n": i}]}, cfg)
    latest = saver.get_tuple(cfg)
    assert latest is not None
    first = saver.get_delta_channel_history(config=latest.config, channels=["items"])
    assert len(first["items"]["writes"]) == 12
    serde.loads.clear()
    again = saver.get_delta_channel_history(config=latest.config, channels=["items"])
    assert again == first
    assert not [n for n in serde.loads if n >= 256], serde.loads  # no large write decoded again
    again["items"]["writes"][0][2][0]["text"] = "changed in place"
    third = saver.get_delta_channel_history(config=latest.config, channels=["items"])
    assert third == first and third["items"]["writes"][0][2][0]["text"] == "ask " * 80
    fresh = ObjectStoreSaver(store)
    assert fresh.get_delta_channel_history(config=latest.config, channels=["items"]) == first


def _concat(state: bytes | None, writes: list[Any]) -> bytes:
    return (state or b"") + b"".join(bytes(w) for w in writes)


class _Bytes(TypedDict, total=False):
    blob: Annotated[bytes, DeltaChannel(_concat, snapshot_frequency=1000)]


def test_a_walk_over_a_bytearray_write_of_this_process_decodes_it(store: StoreBase) -> None:
    """LangGraph's serializer keeps a ``bytearray`` write as that very (unhashable) object, and
    this process's own writes reach the walk as stored: the walk decodes it, caching nothing
    (a helper review of the write cache, 2026-12-03)."""
    saver = ObjectStoreSaver(store)
    g = StateGraph(_Bytes)
    g.add_node("grow", lambda s: {"blob": bytearray(b"y" * 300)})
    g.add_edge(START, "grow")
    g.add_edge("grow", END)
    graph = g.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "bytes"}}
    for _ in range(3):
        graph.invoke({"blob": bytearray(b"x" * 300)}, cfg)
    assert graph.get_state(cfg).values["blob"] == (b"x" * 300 + b"y" * 300) * 3
    latest = saver.get_tuple(cfg)
    assert latest is not None
    native = saver.get_delta_channel_history(config=latest.config, channels=["blob"])
    assert native == BaseCheckpointSaver.get_delta_channel_history(saver, config=latest.config, channels=["blob"])


def test_the_immutable_cache_is_bounded_by_bytes() -> None:
    from langgraph_handoff._format.records import Inline, Record, Segment
    from langgraph_handoff.checkpoint.cache import ImmutableCache

    def segment(n: int) -> Segment:
        rec = Record(f"{n:032x}", None, ("msgpack", b"c"), ("msgpack", b"m"), {"v": (f"{n:032x}", 1)})
        return Segment("t", "", {rec.id: rec}, {rec.id: {"v": Inline("bytes", b"x" * 10_000)}})

    cache = ImmutableCache(max_bytes=100_000)
    for n in range(20):
        cache.put(f"k{n}", segment(n))
        assert cache.bytes <= 100_000
    assert 1 < len(cache) < 20 and cache.get("k0") is None and cache.get("k19") is not None
    held = [f"k{n}" for n in range(20) if cache.get(f"k{n}") is not None]  # oldest first, now all used
    assert held == [f"k{n}" for n in range(20 - len(held), 20)]
    cache.get(held[0])  # used again: the next insertion evicts the next oldest instead
    cache.put("k20", segment(20))
    assert cache.get(held[0]) is not None and cache.get(held[1]) is None
    ImmutableCache(max_bytes=1000).put("big", segment(0))  # larger than the budget: not kept, no error


def test_a_large_value_is_fetched_once_per_process(store: StoreBase) -> None:
    """A large value (a DeltaChannel's snapshot, a long message list) lives in a blob named by
    the digest of its bytes; every turn of a long thread loaded it again (one GET and a
    decompress each). A process keeps what it decoded: only a saver that never read it pays."""

    class Big(TypedDict):
        text: str

    builder = StateGraph(Big)
    builder.add_node("grow", lambda s: {"text": s["text"] + "y" * 3000})
    builder.add_edge(START, "grow")
    builder.add_edge("grow", END)
    layout = Layout(blob_threshold=1024, spill_threshold=1024)  # new values of 1 KiB+ are blobs
    builder.compile(checkpointer=ObjectStoreSaver(store, layout=layout)).invoke(
        {"text": "x" * 2000}, {"configurable": {"thread_id": "big"}}
    )
    cfg = {"configurable": {"thread_id": "big", "checkpoint_ns": ""}}

    def blob_gets(counter: CountingStore) -> int:
        return sum(1 for op, key in counter.log if op == "GET" and "/b/" in key)

    counted = CountingStore(store)
    cold = ObjectStoreSaver(counted, layout=layout)
    first = cold.get_tuple(cfg)
    assert first is not None and first.checkpoint["channel_values"]["text"] == "x" * 2000 + "y" * 3000
    assert blob_gets(counted) == 1
    counted.reset()
    assert cold.get_tuple(cfg) == first and blob_gets(counted) == 0


class _Long(TypedDict, total=False):
    items: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=1000)]


def _long_thread(
    saver: BaseCheckpointSaver, thread: str, turns: int, state: type = _Long
) -> tuple[Any, dict[str, Any], Any]:
    """A thread of ``turns`` questions and answers (with ``_Long``, no snapshot since its start):
    the graph, the thread's config and its latest checkpoint's config."""
    g = StateGraph(state)
    g.add_node("say", lambda s: {"items": [f"a{len(s.get('items', []))}"]})
    g.add_edge(START, "say")
    g.add_edge("say", END)
    graph = g.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    for i in range(turns):
        graph.invoke({"items": [f"q{i}"]}, cfg)
    latest = saver.get_tuple(cfg)
    assert latest is not None
    return graph, cfg, latest.config


class _Pages(CountingStore):
    """Counts requests and keeps the ``max_keys`` of every LIST asked for."""

    def __init__(self, inner: StoreBase) -> None:
        super().__init__(inner)
        self.pages: list[int] = []
        self.prefixes: list[str] = []

    def _note(self, ops: Any) -> None:
        self.pages += [op.max_keys for op in ops if isinstance(op, ListPage)]
        self.prefixes += [op.prefix for op in ops if isinstance(op, ListPage)]
        super()._note(ops)


def _every_walk_matches_the_base_walk(saver: ObjectStoreSaver, thread: str) -> int:
    walks = 0
    for tup in saver.list({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}):
        native = saver.get_delta_channel_history(config=tup.config, channels=["items"])
        assert native == BaseCheckpointSaver.get_delta_channel_history(saver, config=tup.config, channels=["items"])
        walks += 1
    return walks


def test_a_history_walk_lists_about_the_writes_it_needs(store: StoreBase) -> None:
    """Issue 26: the walk asked for 1,000 writes keys on every turn; on a long thread the page
    came back full, about ten times the keys the walk reads. It now asks for about as many as
    the records it crosses hold, in one LIST still."""
    pages = _Pages(store)
    saver = ObjectStoreSaver(pages)
    _, _, latest = _long_thread(saver, "long", 40)
    pages.reset()
    pages.pages.clear()
    native = saver.get_delta_channel_history(config=latest, channels=["items"])
    assert pages.pages and len(pages.pages) == 1, pages.log  # one LIST, as before
    listed = store.list_page(keys.writes_prefix("long", ""), max_keys=1000).items
    assert len(listed) <= pages.pages[0] < 1000, (len(listed), pages.pages)
    assert len(native["items"]["writes"]) == 80  # 40 questions and 40 answers since the start
    assert native == BaseCheckpointSaver.get_delta_channel_history(saver, config=latest, channels=["items"])


def test_a_history_walk_pages_past_writes_it_did_not_expect(store: StoreBase) -> None:
    """Writes documents the head does not hold (none folded here) or that belong to a fork are
    listed too: a first page sized for the folded ones is followed by more, and every walk is
    exactly the base walk."""
    pages = _Pages(store)
    saver = ObjectStoreSaver(pages, layout=Layout(fold_max_bytes=0))
    _, _, latest = _long_thread(saver, "unfolded", 12)
    pages.pages.clear()
    saver.get_delta_channel_history(config=latest, channels=["items"])
    assert len(pages.pages) >= 2 and pages.pages[0] < 1000, pages.pages  # a short first page, then more
    assert _every_walk_matches_the_base_walk(saver, "unfolded") > 20

    forked = ObjectStoreSaver(store)
    graph, cfg, _ = _long_thread(forked, "forked", 8)
    past = list(forked.list(cfg))[7].config  # an older checkpoint: new input there forks the thread
    for i in range(3):
        graph.invoke({"items": [f"fork{i}"]}, past)
    graph.invoke({"items": ["main again"]}, cfg)
    assert _every_walk_matches_the_base_walk(forked, "forked") > 20


def _run_config(config: Any) -> Any:
    """``config`` as a LangGraph run passes it (with the loop's ``__pregel_*`` entries)."""
    return {**config, "configurable": {**config["configurable"], "__pregel_runtime": object()}}


def test_a_run_loads_a_delta_checkpoint_with_one_listing(store: StoreBase) -> None:
    """Issue 26: a run reads the latest checkpoint (head GET and writes LIST together) and then
    its DeltaChannel history, whose writes are the first keys of that same listing. The history
    goes on from that page instead of listing again: one LIST a turn fewer, the same history."""
    pages = _Pages(store)
    saver = ObjectStoreSaver(pages)
    graph, cfg, _ = _long_thread(saver, "run", 30)
    pages.reset()
    pages.pages.clear()
    graph.invoke({"items": ["one more"]}, cfg)
    assert len(pages.pages) == 1, pages.log  # get_tuple's; the history took its page
    assert _every_walk_matches_the_base_walk(saver, "run") > 60
    assert graph.get_state(cfg).values["items"][-2:] == ["one more", "a61"]


async def test_an_async_run_loads_a_delta_checkpoint_with_one_listing(store: StoreBase) -> None:
    pages = _Pages(store)
    saver = ObjectStoreSaver(pages)
    graph, cfg, _ = _long_thread(saver, "arun", 30)
    pages.pages.clear()
    await graph.ainvoke({"items": ["one more"]}, cfg)
    assert len(pages.pages) == 1, pages.log
    assert (await graph.aget_state(cfg)).values == graph.get_state(cfg).values
    assert _every_walk_matches_the_base_walk(saver, "arun") > 60


def test_a_run_listing_is_used_once_and_never_across_a_write(store: StoreBase) -> None:
    """What ``get_tuple`` listed serves only the history of the same checkpoint under the same
    head, once, and only for a run: a direct call lists afresh, and so does a history after
    this process wrote writes to an ancestor (it must see them) or after another process moved
    the head."""
    pages = _Pages(store)
    saver = ObjectStoreSaver(pages)
    _, cfg, latest = _long_thread(saver, "once", 12)
    run_cfg = _run_config(cfg)
    base = BaseCheckpointSaver.get_delta_channel_history

    def lists_for_history(config: Any) -> int:
        pages.pages.clear()
        got = saver.get_delta_channel_history(config=config, channels=["items"])
        listed = len(pages.pages)
        assert got == base(saver, config=latest, channels=["items"])
        return listed

    saver.get_tuple(run_cfg)
    assert lists_for_history(_run_config(latest)) == 0  # the run's page
    assert lists_for_history(_run_config(latest)) == 1  # used once
    saver.get_tuple(run_cfg)
    assert lists_for_history(latest) == 1  # not a run: lists afresh (and drops nothing it may use)

    # this process writes to an ancestor between the run's two reads: the history must show it
    saver.get_tuple(run_cfg)
    parent = saver.get_tuple(latest)
    assert parent is not None and parent.parent_config is not None
    saver.put_writes(parent.parent_config, [("items", ["late"])], "late-task")
    pages.pages.clear()
    late = saver.get_delta_channel_history(config=_run_config(latest), channels=["items"])
    assert len(pages.pages) == 1 and ["late"] in [w[2] for w in late["items"]["writes"]]
    assert late == base(saver, config=latest, channels=["items"])

    # another process moves the head between the run's two reads: the page is not used
    saver.get_tuple(run_cfg)
    other = ObjectStoreSaver(store)
    _long_thread(other, "once", 1)
    assert lists_for_history(_run_config(latest)) == 1


class _WriteDuringList(_Pages):
    """Runs ``hook`` once, right after the next batch that holds a LIST: another thread of this
    process whose write lands while a run's ``get_tuple`` is reading."""

    hook: Any = None

    def run_many(self, ops: Any, *, return_exceptions: bool = False) -> Any:
        results = super().run_many(ops, return_exceptions=return_exceptions)
        if self.hook is not None and any(isinstance(op, ListPage) for op in ops):
            hook, self.hook = self.hook, None
            hook()
        return results


def test_a_write_of_this_process_during_a_runs_read_is_not_missed(store: StoreBase) -> None:
    """``put_writes`` never moves the head, so a page listed before it would pass the ETag
    check: a write of this process that began after the run's LIST keeps the page from being
    kept at all."""
    spy = _WriteDuringList(store)
    saver = ObjectStoreSaver(spy)
    _, cfg, latest = _long_thread(saver, "race", 6)
    parent = saver.get_tuple(latest)
    assert parent is not None and parent.parent_config is not None
    spy.hook = lambda: saver.put_writes(parent.parent_config, [("items", ["late"])], "late-task")
    saver.get_tuple(_run_config(cfg))  # the write lands between its LIST and its end
    spy.pages.clear()
    history = saver.get_delta_channel_history(config=_run_config(latest), channels=["items"])
    assert len(spy.pages) == 1  # listed afresh
    assert ["late"] in [w[2] for w in history["items"]["writes"]]
    assert history == BaseCheckpointSaver.get_delta_channel_history(saver, config=latest, channels=["items"])


def test_a_run_goes_on_from_a_truncated_page(store: StoreBase) -> None:
    """A first page shorter than the history needs (``writes_page`` of 4 here) is continued
    from its last key, asking for about what is left; a page that ends among the target's own
    writes (a fan-out step's many tasks) is not continued through them (a LIST of one key, then
    of 1,000): the walk lists from below the target, as without a page."""
    pages = _Pages(store)
    saver = ObjectStoreSaver(pages, layout=Layout(writes_page=4))
    graph, cfg, _ = _long_thread(saver, "short-page", 20)
    saver._cache.clear()  # no walk of this namespace remembered: a page of writes_page keys
    pages.pages.clear()
    graph.invoke({"items": ["one more"]}, cfg)
    assert pages.pages[0] == 4 and len(pages.pages) == 2 and pages.pages[1] < 100, pages.pages
    assert _every_walk_matches_the_base_walk(saver, "short-page") > 40

    saver = ObjectStoreSaver(pages)  # a first page of 100 keys
    _, cfg, latest = _long_thread(saver, "fan-out", 5)
    for i in range(120):  # 120 tasks wrote to the latest checkpoint: the first page holds only them
        saver.put_writes(latest, [("other", i)], f"task-{i:03d}")
    saver.get_tuple(_run_config(cfg))
    pages.pages.clear()
    history = saver.get_delta_channel_history(config=_run_config(latest), channels=["items"])
    assert len(pages.pages) == 1 and pages.pages[0] < 100, pages.pages
    assert history == BaseCheckpointSaver.get_delta_channel_history(saver, config=latest, channels=["items"])


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "network"])
def test_a_run_reads_as_many_writes_keys_as_its_last_walk_wanted(store: StoreBase, in_process: bool) -> None:
    """Issue 26: a run's read of the latest listed ``writes_page`` keys (100) and its history
    walk, wanting more on a long thread, listed the rest: two LISTs a turn, and on ``file://``
    two scans of a directory holding every checkpoint's writes. The read now lists as many keys
    as the last walk of that namespace wanted (up to a LIST's 1,000), and the walk goes on from
    that page alone; a direct read keeps its short page."""
    pages = _Pages(store)
    pages.lists_in_process = in_process
    saver = ObjectStoreSaver(pages, layout=Layout(writes_page=4))
    graph, cfg, _ = _long_thread(saver, "wanted", 20)
    wanted = saver._cache.get("wanted", "").walk_keys
    listed = len(store.list_page(keys.writes_prefix("wanted", ""), max_keys=1000).items)
    assert listed < wanted < 100, (listed, wanted)
    for turn in range(3):
        pages.pages.clear()
        graph.invoke({"items": [f"more{turn}"]}, cfg)
        assert len(pages.pages) == 1 and pages.pages[0] >= wanted, pages.pages  # the read's; no second
        wanted = saver._cache.get("wanted", "").walk_keys
    assert _every_walk_matches_the_base_walk(saver, "wanted") > 40
    assert graph.get_state(cfg).values["items"][-2:] == ["more2", "a45"]
    pages.pages.clear()
    pages.prefixes.clear()
    tup = saver.get_tuple(cfg)  # not a run: no walk follows
    assert tup is not None
    if in_process and pages.lists_scan_directories:  # the head first, then the latest's own writes
        assert pages.prefixes == [keys.writes_prefix("wanted", "", tup.config["configurable"]["checkpoint_id"])]
    else:
        assert pages.pages == [4]  # writes_page (READ_WRITES_PAGE is not shorter)


class _Snapped(TypedDict, total=False):
    items: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=20)]


def test_a_run_page_that_stops_short_of_the_thread_still_holds_its_walk(store: StoreBase) -> None:
    """A thread with snapshots holds more writes keys than a walk wants (those before the last
    snapshot): the run's page is cut short of them, and the walk still lists nothing more, as
    the page reaches past the oldest ancestor it reads."""
    pages = _Pages(store)
    saver = ObjectStoreSaver(pages, layout=Layout(writes_page=4))
    graph, cfg, _ = _long_thread(saver, "snapped", 45, state=_Snapped)
    listed = len(store.list_page(keys.writes_prefix("snapped", ""), max_keys=1000).items)
    for turn in range(12):  # past the next snapshot too
        wanted = saver._cache.get("snapped", "").walk_keys
        assert 4 < wanted < listed, (wanted, listed)  # the page stops short of the thread's keys
        pages.pages.clear()
        graph.invoke({"items": [f"more{turn}"]}, cfg)
        assert pages.pages == [wanted], pages.pages  # the read's LIST alone
    assert _every_walk_matches_the_base_walk(saver, "snapped") > 100
    assert graph.get_state(cfg).values["items"][-2:] == ["more11", "a113"]


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_a_read_outside_a_run_lists_only_the_latests_own_writes(kind: str, tmp_path: Any) -> None:
    """On a store that lists in process, ``get_state`` wants only the latest checkpoint's own
    writes, not a run's 100 keys (kept for the run's delta history). On ``memory://`` its LIST
    asks for ``READ_WRITES_PAGE`` keys beside the head GET and pages on when the latest holds
    more. In a local directory it reads the head, then lists the latest's own writes alone, up to
    a LIST's 1,000 keys: a page of the namespace saved no round trip there and walked into older
    checkpoints' writes (a scan of each one's directory and two ``stat`` calls a key). A run's
    read lists ``writes_page`` keys of the namespace beside the head once a run of this saver
    walked a ``DeltaChannel`` history (a walk outside a run does not count), as ``get_state``
    before."""
    local = kind == "local"
    pages = _Pages(LocalStore(tmp_path / "store") if local else MemoryStore())
    assert pages.lists_in_process and pages.lists_scan_directories == local
    first = WRITES_PAGE if local else READ_WRITES_PAGE
    saver = ObjectStoreSaver(pages)
    saver.put(*_plain_checkpoint("plain"))
    pages.pages.clear()
    tup = saver.get_tuple(_run_config({"configurable": {"thread_id": "plain", "checkpoint_ns": ""}}))
    assert tup is not None and not saver._cache.delta_runs
    assert pages.pages == [first]
    if local:
        assert pages.prefixes[-1:] == [keys.writes_prefix("plain", "", tup.config["configurable"]["checkpoint_id"])]
    _, cfg, latest = _long_thread(ObjectStoreSaver(pages), "reads", 30)  # another saver's runs
    own = keys.writes_prefix("reads", "", latest["configurable"]["checkpoint_id"])
    saver.get_delta_channel_history(config=latest, channels=["items"])  # not a run's walk
    assert not saver._cache.delta_runs
    saver.get_delta_channel_history(config=_run_config(latest), channels=["items"])
    assert saver._cache.delta_runs
    pages.pages.clear()
    pages.prefixes.clear()
    assert saver.get_tuple(cfg) is not None
    saver.get_tuple(_run_config(cfg))
    assert pages.pages == [first, Layout().writes_page]
    assert pages.prefixes == [own if local else keys.writes_prefix("reads", ""), keys.writes_prefix("reads", "")]

    for i in range(READ_WRITES_PAGE + 4):  # more pending writes than the short page holds
        saver.put_writes(latest, [("items", [f"w{i}"])], f"task-{i:03d}")
    pages.pages.clear()
    pages.prefixes.clear()
    tup = saver.get_tuple(cfg)
    assert tup is not None and len(tup.pending_writes) == READ_WRITES_PAGE + 4
    assert pages.pages == ([WRITES_PAGE] if local else [READ_WRITES_PAGE, WRITES_PAGE]), pages.pages
    if local:
        assert pages.prefixes == [own], pages.prefixes
    assert tup.pending_writes == saver.get_tuple(_run_config(cfg)).pending_writes


def test_a_local_read_pages_on_through_the_latests_own_writes(tmp_path: Any, monkeypatch: Any) -> None:
    """More writes on the latest checkpoint than a LIST holds (pages of 3 here): the read pages
    on under that checkpoint's own prefix and returns all of them and none of its parent's."""
    monkeypatch.setattr(reading, "WRITES_PAGE", 3)
    pages = _Pages(LocalStore(tmp_path / "store"))
    saver = ObjectStoreSaver(pages)
    parent = saver.put(*_plain_checkpoint("paged"))
    for i in range(5):
        saver.put_writes(parent, [("x", f"p{i}")], f"parent-task-{i}")
    cp = empty_checkpoint()
    latest = saver.put(parent, cp, {"source": "loop", "step": 1, "parents": {}}, {})
    for i in range(10):
        saver.put_writes(latest, [("x", f"w{i}")], f"task-{i:02d}")
    pages.prefixes.clear()
    tup = saver.get_tuple({"configurable": {"thread_id": "paged", "checkpoint_ns": ""}})
    assert tup is not None and tup.config["configurable"]["checkpoint_id"] == cp["id"]
    assert sorted(v for _, _, v in tup.pending_writes) == [f"w{i}" for i in range(10)]
    own = keys.writes_prefix("paged", "", cp["id"])
    assert pages.prefixes == [own] * 4, pages.prefixes  # 3 + 3 + 3 + 1 keys


def test_a_run_walks_its_history_after_a_read_of_the_latests_own_writes(tmp_path: Any) -> None:
    """A run's read that listed only the latest checkpoint's writes (a local directory, and no run
    of this saver walked a history yet) leaves no page for the walk to go on from: that page
    holds none of the ancestors' writes, so the walk lists the namespace itself and finds every
    one of them."""
    store = LocalStore(tmp_path / "store")
    _, cfg, latest = _long_thread(ObjectStoreSaver(store), "first", 40)
    pages = _Pages(store)
    saver = ObjectStoreSaver(pages)  # nothing cached: its first run on this thread
    assert saver.get_tuple(_run_config(cfg)) is not None
    pages.prefixes.clear()
    walked = saver.get_delta_channel_history(config=_run_config(latest), channels=["items"])
    assert pages.prefixes == [keys.writes_prefix("first", "")]
    assert walked == BaseCheckpointSaver.get_delta_channel_history(saver, config=latest, channels=["items"])
    assert len(walked["items"]["writes"]) > 40


def test_a_network_store_keeps_the_long_page(store: StoreBase) -> None:
    """Where a LIST is a round trip, a read keeps ``writes_page``: a latest checkpoint with more
    writes than a short page (an interrupted fan-out) would cost one more round trip."""
    pages = _Pages(store)
    pages.lists_in_process = False  # as S3, GCS and Azure
    saver = ObjectStoreSaver(pages)
    saver.put(*_plain_checkpoint("plain"))
    cfg = {"configurable": {"thread_id": "plain", "checkpoint_ns": ""}}
    latest = saver.get_tuple(cfg).config  # type: ignore[union-attr]
    for i in range(READ_WRITES_PAGE + 4):
        saver.put_writes(latest, [("x", i)], f"task-{i:03d}")
    pages.pages.clear()
    assert len(saver.get_tuple(cfg).pending_writes) == READ_WRITES_PAGE + 4  # type: ignore[union-attr]
    saver.get_tuple(_run_config(cfg))
    assert pages.pages == [Layout().writes_page, Layout().writes_page]


def _plain_checkpoint(thread: str) -> tuple[Any, Any, Any, Any]:
    """(config, checkpoint, metadata, new versions) of a first checkpoint of ``thread``."""
    cp = empty_checkpoint()
    cp["channel_values"] = {"x": 1}
    cp["channel_versions"] = {"x": 1}
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp, {}, {"x": 1}
