"""Issue 26: a value decoded from blobs is kept as a copy for the next read.

A ``DeltaChannel`` loads its latest snapshot on every turn, the whole conversation, and decoding
it was the largest part of a long thread's CPU per turn. The saver keeps what it decoded (a
pickle of it) and hands every read a copy of its own, so what a node does to the messages it was
given never reaches the next read, exactly as with a fresh decode.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import weakref
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph.message import _messages_delta_reducer
from typing_extensions import TypedDict

from langgraph_handoff import Layout, ObjectStoreSaver
from langgraph_handoff.checkpoint.cache import MISS, ImmutableCache
from langgraph_handoff.stores import StoreBase
from tests.support.chat_helpers import cfg, history
from tests.support.saver_helpers import one_node_graph

#: snapshots past 1 KiB are stored in blobs (whole or as pieces), so they are cached decoded
LAYOUT = Layout(spill_threshold=1024)
#: a value of 2 KiB or more is written as a blob at once
BLOBS = Layout(spill_threshold=1024, blob_threshold=2048)


class Chat(TypedDict):
    messages: Annotated[list, DeltaChannel(_messages_delta_reducer, snapshot_frequency=4)]


def _text(turn: int, who: str) -> str:
    return " ".join(f"{who}{turn}-{i}-{(turn * 31 + i * 17) % 97}" for i in range(40))


def _meddling_chat(saver: Any) -> Any:
    """A chat whose node counts, in place, in every message it was given how often it saw it,
    and returns none of them. LangGraph stores such changes only in the snapshots it takes after
    the node: a read of a snapshot in between must give the messages as that snapshot holds them,
    not as a node of this process changed them since."""

    def answer(values: dict) -> dict:
        turn = len(values["messages"]) // 2 + 1
        seen = [m.additional_kwargs.get("seen", 0) for m in values["messages"]]
        for m in values["messages"]:
            m.additional_kwargs["seen"] = m.additional_kwargs.get("seen", 0) + 1
        return {"messages": [AIMessage(content=_text(turn, "ai"), id=f"a{turn}", additional_kwargs={"saw": seen})]}

    return one_node_graph(Chat, saver, answer)


def _talk(graph: Any, turns: range) -> None:
    """``durability="sync"``: with LangGraph's default ("async") a checkpoint is serialized in a
    background thread, and an in-place change the next turn makes may or may not be in it
    (two ``InMemorySaver`` runs of the meddling chat differed on Python 3.13)."""
    for turn in turns:
        graph.invoke({"messages": [HumanMessage(content=_text(turn, "me"), id=f"q{turn}")]}, cfg(), durability="sync")


class CountingSerde(JsonPlusSerializer):
    """Counts decodes of values of at least 1 KiB (snapshots, here)."""

    def __init__(self) -> None:
        super().__init__()
        self.large = 0

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.large += len(data[1]) >= 1024
        return super().loads_typed(data)


def test_a_node_changing_its_messages_in_place_does_not_change_the_next_read(
    store: StoreBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    hits = []
    value_copy = ImmutableCache.value_copy

    def counted(self: ImmutableCache, key: Any) -> Any:
        got = value_copy(self, key)
        hits.append(got is not MISS)
        return got

    monkeypatch.setattr(ImmutableCache, "value_copy", counted)
    saver = ObjectStoreSaver(store, layout=LAYOUT)
    graph = _meddling_chat(saver)
    _talk(graph, range(1, 21))  # one process throughout: its cache serves most snapshots
    assert sum(hits) >= 8, hits  # a snapshot every second turn, read from the cache on the next
    reference = _meddling_chat(InMemorySaver())
    _talk(reference, range(1, 21))
    assert history(graph) == history(reference)
    saw = graph.get_state(cfg()).values["messages"][-1].additional_kwargs["saw"]
    assert saw == reference.get_state(cfg()).values["messages"][-1].additional_kwargs["saw"]
    assert len(saw) == 39 and max(saw) > 1


def test_a_snapshot_is_decoded_once_per_process_and_every_read_gets_its_own_copy(store: StoreBase) -> None:
    chat = _meddling_chat(ObjectStoreSaver(store, layout=LAYOUT))
    _talk(chat, range(1, 10))
    serde = CountingSerde()
    saver = ObjectStoreSaver(store, layout=LAYOUT, serde=serde)
    latest = saver.get_tuple(cfg())
    assert latest is not None

    def seed() -> list[Any]:
        history = saver.get_delta_channel_history(config=latest.config, channels=["messages"])
        return history["messages"]["seed"].value  # a _DeltaSnapshot

    first = seed()
    decoded = serde.large
    assert decoded >= 1 and len(first) >= 8
    first[0].content = "changed by the reader"
    first[0].additional_kwargs["x"] = 1
    first.append(HumanMessage(content="appended by the reader"))
    second = seed()
    assert serde.large == decoded  # a copy, not a decode
    assert len(second) == len(first) - 1 and second[0].content == _text(1, "me")
    assert "x" not in second[0].additional_kwargs
    fresh = ObjectStoreSaver(store, layout=LAYOUT)  # nothing cached: decodes the same value
    history = fresh.get_delta_channel_history(config=latest.config, channels=["messages"])
    assert history["messages"]["seed"].value == second


def test_a_saver_with_another_serializer_decodes_for_itself(store: StoreBase) -> None:
    """The cache is shared by shallow copies of a saver (``with_allowlist`` makes one with a
    serializer of its own, whose allow-list may refuse what another decoded): a copy is only
    ever handed to the serializer that made it."""
    _talk(_meddling_chat(ObjectStoreSaver(store, layout=LAYOUT)), range(1, 10))
    serde = CountingSerde()
    saver = ObjectStoreSaver(store, layout=LAYOUT, serde=serde)
    latest = saver.get_tuple(cfg())
    assert latest is not None
    first = saver.get_delta_channel_history(config=latest.config, channels=["messages"])
    other = CountingSerde()
    clone = copy.copy(saver)  # what with_allowlist does, with a serializer it derives
    clone.serde = other
    assert clone is not saver and clone._cache is saver._cache
    assert clone.get_delta_channel_history(config=latest.config, channels=["messages"]) == first
    assert other.large >= 1  # decoded by its own serializer
    decoded = serde.large
    assert saver.get_delta_channel_history(config=latest.config, channels=["messages"]) == first
    assert serde.large == decoded  # while the first still gets its copies


@dataclasses.dataclass
class DataclassSerde:
    """A serializer that cannot be hashed (a plain dataclass), counting large decodes; with
    ``opaque``, lists decode into a type pickle refuses."""

    opaque: bool = False
    large: int = 0
    inner: JsonPlusSerializer = dataclasses.field(default_factory=JsonPlusSerializer)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.large += len(data[1]) >= 1024
        value = self.inner.loads_typed(data)
        return Opaque(value) if self.opaque and isinstance(value, list) else value


class Opaque(list):
    def __reduce_ex__(self, protocol: Any) -> Any:
        raise NotImplementedError("this type opts out of pickle")


def _big_value(store: StoreBase, serde: Any) -> dict:
    from langgraph.checkpoint.base import empty_checkpoint

    config = {"configurable": {"thread_id": "big", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"big": [f"item {i} " * 4 for i in range(300)]}
    checkpoint["channel_versions"] = {"big": 1}
    ObjectStoreSaver(store, layout=BLOBS, serde=serde).put(config, checkpoint, {"step": 0}, {"big": 1})
    return config


@pytest.mark.parametrize("opaque", [False, True], ids=["picklable", "opaque"])
def test_any_serializer_and_any_value_type_reads_as_before(store: StoreBase, opaque: bool) -> None:
    """A serializer that cannot be hashed, and a value type that refuses pickle with any
    exception, read as they did before the cache: the first is cached (keyed by identity), the
    second decoded on every read."""
    config = _big_value(store, DataclassSerde(opaque=opaque))
    serde = DataclassSerde(opaque=opaque)
    saver = ObjectStoreSaver(store, layout=BLOBS, serde=serde)
    reads = [saver.get_tuple(config) for _ in range(3)]
    values = [r.checkpoint["channel_values"]["big"] for r in reads if r is not None]
    assert len(values) == 3 and all(v == values[0] and len(v) == 300 for v in values)
    assert serde.large == (3 if opaque else 1)


class _NoCopy:
    """Pickles, but cannot be unpickled (its constructor wants an argument pickle does not keep)."""

    def __init__(self, needed: int) -> None:
        self.needed = needed

    def __reduce__(self) -> tuple[Any, ...]:
        return (_NoCopy, ())


def test_a_value_pickle_cannot_copy_is_decoded_again_not_cached() -> None:
    cache = ImmutableCache(max_bytes=1_000_000)
    cache.keep_value(("serde", "t", "k1"), [lambda: 1])  # refused by pickle.dumps: not kept
    assert cache.value_copy(("serde", "t", "k1")) is MISS and cache.bytes < 1000
    pickle.dumps(_NoCopy(1))  # pickles...
    cache.keep_value(("serde", "t", "k2"), [_NoCopy(1)])
    assert cache.bytes > 250
    assert cache.value_copy(("serde", "t", "k2")) is MISS  # ...but does not unpickle: refused
    cache.keep_value(("serde", "t", "k2"), [_NoCopy(1)])  # not pickled again
    assert cache.value_copy(("serde", "t", "k2")) is MISS and cache.bytes < 1000


def test_kept_values_count_against_the_byte_budget() -> None:
    cache = ImmutableCache(max_bytes=50_000)
    for n in range(10):
        cache.keep_value(("serde", "t", f"k{n}"), ["x" * 10_000])
        assert cache.bytes <= 50_000
    assert cache.value_copy(("serde", "t", "k0")) is MISS
    assert cache.value_copy(("serde", "t", "k9")) == ["x" * 10_000]
    cache.keep_value(("serde", "t", "big"), ["x" * 60_000])  # larger than the budget: not kept
    assert cache.value_copy(("serde", "t", "big")) is MISS
    assert cache.get("k9") is None  # string keys and value keys never meet


def test_a_kept_value_adds_no_object_for_the_collector_to_walk() -> None:
    """A long ``DeltaChannel`` thread keeps thousands of decoded writes; every full collection
    walks each tracked object of the process. A kept value is plain ``bytes`` in an entry of
    ``bytes`` and ``int``: the collector tracks neither (a key holding a serializer is tracked)."""
    cache = ImmutableCache(max_bytes=1_000_000)
    cache.keep_value(("serde", "t", "k"), [{"role": "user"}])
    cache.keep_value(("serde", "t", "refused"), [lambda: 1])
    gc.collect()
    for key in (("serde", "t", "k"), ("serde", "t", "refused")):
        entry = cache._items[key]
        assert type(entry[0]) is bytes and not gc.is_tracked(entry)
    assert cache.value_copy(("serde", "t", "k")) == [{"role": "user"}]
    assert cache.value_copy(("serde", "t", "refused")) is MISS
    cache.put("data/t/=/b/k", b"a blob")  # a blob is bytes too, under a str key: never a value
    assert cache.blob("data/t/=/b/k") == b"a blob" and cache.value_copy(("data/t/=/b/k",)) is MISS


def test_value_keys_are_numbers_and_strings_the_collector_stops_tracking() -> None:
    """A ``DeltaChannel`` walk keeps a decoded copy of each ancestor's write under a key naming
    the serializer: by a tag (a number), so the key holds no object and, once collected, is not
    tracked. With a wrapper of the serializer in it, each key stayed tracked (about 3,000 at
    turn 1,000 of the long-threads bench)."""
    saver = ObjectStoreSaver.from_url("memory://", layout=LAYOUT)
    graph = _meddling_chat(saver)
    _talk(graph, range(1, 8))
    graph.get_state(cfg())
    gc.collect()
    keys = [k for k in saver._cache.immutable._items if isinstance(k, tuple)]
    assert any(k[1] == "write" for k in keys)  # the walk kept copies of writes...
    assert all(type(k[0]) is int and not gc.is_tracked(k) for k in keys)  # ...under untracked keys


def test_a_serializer_tag_names_that_very_object_while_the_cache_holds_it() -> None:
    """Two serializers that compare equal may decode differently (another allow-list): each gets
    its own tag. A serializer the cache let go (past its bound) is tagged anew, never with a
    number another one had, so a key it kept before is not read for it any more."""
    cache = ImmutableCache(max_bytes=1_000_000)
    first, twin = JsonPlusSerializer(), JsonPlusSerializer()
    tag = cache.serializer_tag(first)
    assert cache.serializer_tag(first) == tag != cache.serializer_tag(twin)
    cache.keep_value((tag, "t", "k"), ["kept"])
    assert cache.value_copy((cache.serializer_tag(first), "t", "k")) == ["kept"]
    others = [object() for _ in range(100)]  # hold them: no id is reused meanwhile
    tags = []
    for other in others:  # the serializer asked for between them stays (least recently used out)
        tags.append(cache.serializer_tag(other))
        assert cache.serializer_tag(first) == tag
    assert len(set(tags)) == 100 and tag not in tags
    more = [cache.serializer_tag(object()) for _ in range(64)]  # now first is not asked for
    again = cache.serializer_tag(first)  # let go meanwhile: a new tag
    assert again not in more
    assert again not in (tag, *tags)
    assert cache.value_copy((again, "t", "k")) is MISS
    held = JsonPlusSerializer()
    alive = weakref.ref(held)
    cache.serializer_tag(held)
    del held
    gc.collect()
    assert alive() is not None  # kept while tagged: its id cannot pass to another serializer
