"""A ``DeltaChannel`` snapshot is the whole conversation again every ``snapshot_frequency``
updates. When the previous snapshot is at hand it is stored as :class:`~.records.Pieces`: the
previous snapshot's blobs plus one blob of what was appended since. Every checkpoint still
reads back whole (from a cold process too), a rebase keeps the parts few, and garbage
collection, copies, checks and migration all see every part."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import msgpack
import pytest
from langchain_core.messages import HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import _messages_delta_reducer
from typing_extensions import TypedDict

from langgraph_handoff import Layout, MemoryStore, ObjectStoreSaver
from langgraph_handoff._format import keys, tails
from langgraph_handoff._format import records as rec_io
from langgraph_handoff.checkpoint.plans import writing
from langgraph_handoff.errors import CorruptObjectError, StoreUnavailableError
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.stores import CountingStore, StoreBase
from langgraph_handoff.stores.base import Put
from tests.support.chat_helpers import answering_chat, cfg, check_copy_prune_delete, history
from tests.support.saver_helpers import FailingBlobs

#: snapshots from the second on are past the spill threshold: each is a blob, or pieces
LAYOUT = Layout(spill_threshold=1024)


class Chat(TypedDict):
    messages: Annotated[list, DeltaChannel(_messages_delta_reducer, snapshot_frequency=4)]


def _text(turn: int, who: str) -> str:
    return " ".join(f"{who}{turn}-{i}-{(turn * 31 + i * 17) % 97}" for i in range(40))


def _chat(saver: Any) -> Any:
    return answering_chat(saver, Chat, _text)


def _ask(turn: int) -> dict:
    return {"messages": [HumanMessage(content=_text(turn, "me"), id=f"q{turn}")]}


def _talk(graph: Any, turns: range, thread: str = "t") -> None:
    for turn in turns:
        graph.invoke(_ask(turn), cfg(thread))


def _reference(turns: range) -> list[tuple[Any, Any]]:
    graph = _chat(InMemorySaver())
    _talk(graph, turns)
    return history(graph)


class BlobsWritten(CountingStore):
    """Keeps (key, bytes) of every blob written, however it reaches the store."""

    def __init__(self, inner: StoreBase) -> None:
        super().__init__(inner)
        self.blobs: list[tuple[str, int]] = []

    def _note(self, ops: Any) -> None:
        super()._note(ops)
        self.blobs += [(op.key, len(op.body)) for op in ops if isinstance(op, Put) and "/b/" in op.key]


def _stored(store: StoreBase, thread: str = "t") -> list[rec_io.Payload]:
    """Every stored value of ``messages`` in the thread's head and its segments."""
    head = rec_io.decode_head(store.get(keys.head_key(thread, "")).body, key="h")
    tables = [head.payloads]
    for ref in head.segments:
        key = keys.segment_key(thread, "", ref.key)
        tables.append(rec_io.decode_segment(store.get(key).body, key=key).payloads)
    return [p for t in tables for chs in t.values() for ch, p in chs.items() if ch == "messages"]


def _pieces(store: StoreBase, thread: str = "t") -> list[rec_io.Pieces]:
    return [p for p in _stored(store, thread) if isinstance(p, rec_io.Pieces)]


def test_snapshots_are_stored_as_pieces_and_read_back_whole(store: StoreBase) -> None:
    spy = BlobsWritten(store)
    graph = _chat(ObjectStoreSaver(spy, layout=LAYOUT))
    _talk(graph, range(1, 31))
    found = _pieces(store)
    assert len(found) >= 3, _stored(store)
    # a piece blob holds what was appended since the snapshot before: a few messages, not all
    latest = max(p.parts[-1].count for p in found)
    pieces = {keys.blob_key("t", "", p.parts[-1].owner, p.parts[-1].digest) for p in found}
    written = [size for key, size in spy.blobs if key in pieces]
    assert len(written) == len(found) and max(written) < 2_000 * 8 < 2_000 * latest / 2, (written, latest)
    cold = _chat(ObjectStoreSaver(store, layout=LAYOUT))  # nothing cached: every part from the store
    assert history(cold) == _reference(range(1, 31))
    assert verify_store(ObjectStoreSaver(store)).problems == []


def test_a_thread_goes_on_in_another_process(store: StoreBase) -> None:
    """A process that only read the thread has the previous snapshot's parts at hand too."""
    _talk(_chat(ObjectStoreSaver(store, layout=LAYOUT)), range(1, 13))
    before = len(_pieces(store))
    _talk(_chat(ObjectStoreSaver(store, layout=LAYOUT)), range(13, 25))
    assert len(_pieces(store)) > before
    assert history(_chat(ObjectStoreSaver(store))) == _reference(range(1, 25))


class EverySnapshot(TypedDict):
    messages: Annotated[list, DeltaChannel(_messages_delta_reducer, snapshot_frequency=1)]


def test_a_snapshot_at_every_update_builds_on_its_parents(store: StoreBase) -> None:
    """With ``snapshot_frequency=1`` the parent holds the previous snapshot itself (as pieces
    once the thread is going): the next one is pieces over the same parts, never a tail."""

    def build(saver: Any) -> Any:
        return answering_chat(saver, EverySnapshot, _text)

    ours, reference = build(ObjectStoreSaver(store, layout=LAYOUT)), build(InMemorySaver())
    for graph in (ours, reference):
        _talk(graph, range(1, 13))
    assert len(_pieces(store)) >= 6
    assert not any(isinstance(p, rec_io.Tail) for p in _stored(store))
    assert history(build(ObjectStoreSaver(store))) == history(reference)


def test_a_snapshot_over_a_whole_parent_is_pieces_not_a_tail(store: StoreBase) -> None:
    """With the default layout and large messages, the parent's snapshot is a whole blob past
    ``tail_min_base``: the next one must not become a tail (a put crashed on an assertion that
    tails are bare lists; found in review)."""

    def big(turn: int, who: str) -> str:
        return " ".join(f"{who}{turn}-{i}" for i in range(1100 if who == "me" else 5))

    ours, reference = (answering_chat(s, EverySnapshot, big) for s in (ObjectStoreSaver(store), InMemorySaver()))
    for graph in (ours, reference):
        for turn in range(1, 12):
            graph.invoke({"messages": [HumanMessage(content=big(turn, "me"), id=f"q{turn}")]}, cfg())
    assert _pieces(store)
    assert not any(isinstance(p, rec_io.Tail) for p in _stored(store))
    assert history(answering_chat(ObjectStoreSaver(store), EverySnapshot, big)) == history(reference)


def test_pruning_every_turn_leaves_no_part_behind() -> None:
    """``prune`` deletes the parts only dropped checkpoints referenced, also those owned by
    checkpoints an earlier prune dropped (a later snapshot kept them alive until its own turn
    came; they leaked, found in review)."""
    store = MemoryStore()
    saver = ObjectStoreSaver(store, layout=LAYOUT)
    graph = _chat(saver)
    for turn in range(1, 60):
        _talk(graph, range(turn, turn + 1))
        saver.prune(["t"])
    report = verify_store(ObjectStoreSaver(store), "t")
    assert report.problems == [] and [k for k in report.unreferenced if "/b/" in k] == []
    ids = [m.id for m in _chat(ObjectStoreSaver(store)).get_state(cfg()).values["messages"]]
    assert ids == [f"{who}{turn}" for turn in range(1, 60) for who in "qa"]


def test_pieces_are_few_and_rebase_onto_a_whole_list(monkeypatch: pytest.MonkeyPatch, store: StoreBase) -> None:
    monkeypatch.setattr(writing, "PIECES_MAX", 3)
    _talk(_chat(ObjectStoreSaver(store, layout=LAYOUT)), range(1, 41))
    found = _pieces(store)
    bases = {p.parts[0].digest for p in found}
    assert len(bases) >= 3, found  # rebased several times
    for p in found:
        assert 2 <= len(p.parts) <= 3
        assert sum(part.size for part in p.parts[1:]) <= writing.PIECES_GROWTH * p.parts[0].size
        base = p.parts[0]
        body = rec_io.decode_blob(store.get(keys.blob_key("t", "", base.owner, base.digest)).body, key="b")
        framed = tails.framing(body)
        assert framed is not None and framed[1] == base.count  # a whole list
        assert [q.count for q in p.parts] == sorted(q.count for q in p.parts)
    assert history(_chat(ObjectStoreSaver(store))) == _reference(range(1, 41))


def test_the_piece_is_stored_before_the_head_that_needs_it() -> None:
    """A put whose piece cannot be written fails before its head moves: every checkpoint stored
    before reads back whole, and the thread goes on."""
    store = FailingBlobs()
    store.fail = False
    graph = _chat(ObjectStoreSaver(store, layout=LAYOUT))
    _talk(graph, range(1, 9))
    before = history(_chat(ObjectStoreSaver(store)))
    store.fail = True
    with pytest.raises(StoreUnavailableError):
        _talk(graph, range(9, 13))
    store.fail = False
    after = history(_chat(ObjectStoreSaver(store)))  # newest first
    assert len(after) > len(before) and after[-len(before) :] == before
    assert verify_store(ObjectStoreSaver(store)).problems == []
    _talk(_chat(ObjectStoreSaver(store, layout=LAYOUT)), range(13, 25))
    assert _pieces(store)
    assert verify_store(ObjectStoreSaver(store)).problems == []
    ids = [m.id for m in _chat(ObjectStoreSaver(store)).get_state(cfg()).values["messages"]]
    # (the answer lost with the failed put is not redone: LangGraph starts the next turn afresh)
    assert ids[-2] == "q24" and ids[-1].startswith("a") and len(ids) == len(set(ids))


def test_prune_copy_and_delete_keep_every_piece_a_snapshot_needs(store: StoreBase) -> None:
    saver = ObjectStoreSaver(store, layout=LAYOUT)
    graph = _chat(saver)
    _talk(graph, range(1, 25))
    assert _pieces(store)
    # prune drops the older snapshots' checkpoints; the latest's pieces still need their blobs
    check_copy_prune_delete(store, saver, _chat)


def test_a_missing_piece_is_reported_not_skipped() -> None:
    """Reading a snapshot whose piece is gone raises a typed error naming the key (never a
    shorter conversation), and ``verify`` reports the dangling reference."""
    store = MemoryStore()
    _talk(_chat(ObjectStoreSaver(store, layout=LAYOUT)), range(1, 25))
    latest = _pieces(store)[-1] if _pieces(store) else None
    assert latest is not None
    part = latest.parts[-1]
    gone = keys.blob_key("t", "", part.owner, part.digest)
    store.delete(gone)
    reader = _chat(ObjectStoreSaver(store, layout=LAYOUT))
    with pytest.raises(CorruptObjectError) as info:
        for snapshot in reader.get_state_history(cfg()):
            assert snapshot.values is not None
    assert info.value.key == gone
    problems = verify_store(ObjectStoreSaver(store)).problems
    assert any(p.kind == "dangling_reference" and p.key == gone for p in problems), problems


def test_migrate_rewrites_a_thread_with_pieces_losslessly(store: StoreBase) -> None:
    from langgraph_handoff.migrations import SchemaMigrations

    _talk(_chat(ObjectStoreSaver(store, layout=LAYOUT)), range(1, 25))
    assert _pieces(store)
    migrations = SchemaMigrations()

    @migrations.register(1, "a no-op step: every record is rewritten in the new schema")
    def _same(values: dict, metadata: dict) -> None:
        return None

    want = history(_chat(ObjectStoreSaver(store, layout=LAYOUT)))  # (delta histories never upgrade lazily)
    summary = ObjectStoreSaver(store, layout=LAYOUT, migrations=migrations).migrate()
    assert [r.status for r in summary.results] == ["migrated"], summary
    assert history(_chat(ObjectStoreSaver(store, layout=LAYOUT, migrations=migrations))) == want
    assert verify_store(ObjectStoreSaver(store, migrations=migrations)).problems == []


def test_async_snapshots_match_sync(store: StoreBase) -> None:
    async def talk() -> list[tuple[Any, Any]]:
        graph = _chat(ObjectStoreSaver(store, layout=LAYOUT))
        for turn in range(1, 21):
            await graph.ainvoke(_ask(turn), cfg("a"))
        return [(s.metadata["step"], s.values) async for s in graph.aget_state_history(cfg("a"))]

    assert asyncio.run(talk()) == _reference(range(1, 21))
    assert _pieces(store, "a")


def test_pieces_round_trip_through_a_head_and_refuse_impossible_parts() -> None:
    c1, c2 = "1f0c0001-aaaa-6bbb-8ccc-000000000001", "1f0c0002-aaaa-6bbb-8ccc-000000000002"
    parts = (rec_io.Piece(c1, "d" * 32, 40_000, 12), rec_io.Piece(c2, "e" * 32, 900, 14))
    head = rec_io.Head("t", "", {}, {c2: {"messages": rec_io.Pieces("msgpack", parts)}})
    back = rec_io.decode_head(rec_io.encode_head(head), key="h")
    assert back.payloads == head.payloads
    empty = rec_io.Head("t", "", {}, {c2: {"messages": rec_io.Pieces("msgpack", ())}})
    with pytest.raises(CorruptObjectError):
        rec_io.decode_head(rec_io.encode_head(empty), key="h")
    d = "d" * 32
    for bad in (rec_io.Piece(c1, d, -1, 3), rec_io.Piece(c1, d, 9, -1), rec_io.Piece(c1, d, 9, 1 << 32)):
        odd = rec_io.Head("t", "", {}, {c2: {"messages": rec_io.Pieces("msgpack", (bad,))}})
        with pytest.raises(CorruptObjectError):
            rec_io.decode_head(rec_io.encode_head(odd), key="h")


@pytest.mark.parametrize("count", [0, 1, 2, 3, 15, 16, 200, 70_000])
def test_split_and_join_see_through_an_ext_frame(count: int) -> None:
    """msgpack writes an ext's header in the shortest form its length allows (fixext for 1, 2,
    4, 8 and 16 bytes); every one of them splits and joins back byte for byte."""
    items = [i % 7 for i in range(count)]
    grown = [*items, 7, 8]
    pack = lambda xs: msgpack.packb(msgpack.ExtType(7, msgpack.packb(xs)))  # noqa: E731
    split = tails.split(pack(items), pack(grown))
    assert split is not None and split[0] == len(grown)
    assert tails.joined(pack(items), *split) == pack(grown)
    assert tails.split(pack(items), msgpack.packb(msgpack.ExtType(5, msgpack.packb(grown)))) is None  # other type
    assert tails.split(msgpack.packb(items), pack(grown)) is None  # bare against framed
    if count:
        changed = [*items[:-1], 99, 7, 8]
        assert tails.split(pack(items), pack(changed)) is None


def test_split_refuses_a_frame_it_would_not_write_back() -> None:
    """An ext header longer than msgpack would write (ext32 around 10 bytes) is not split: a
    join could not give the same bytes back."""
    inner = msgpack.packb([1, 2, 3])
    odd = b"\xc9" + len(inner).to_bytes(4, "big") + b"\x07" + inner
    base = msgpack.packb(msgpack.ExtType(7, msgpack.packb([1, 2])))
    assert tails.framing(odd) == (7, 3, 7)
    assert tails.split(base, odd) is None
