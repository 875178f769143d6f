"""A list that only grew is stored as a tail over a base blob: what each put writes stays small
on a long conversation, every checkpoint still reads back whole (from a cold process too), and
garbage collection, copies, checks and migration all see the base."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from langgraph_handoff import Layout, MemoryStore, ObjectStoreSaver
from langgraph_handoff._format import keys, tails
from langgraph_handoff._format import records as rec_io
from langgraph_handoff.checkpoint.cache import MISS
from langgraph_handoff.checkpoint.plans import reading, writing
from langgraph_handoff.errors import StoreUnavailableError
from langgraph_handoff.inspection import verify_store
from langgraph_handoff.stores import StoreBase
from tests.support.chat_helpers import answering_chat, cfg, check_copy_prune_delete, history
from tests.support.graph_scenarios import ASYNC_INTERRUPTS, ASYNC_INTERRUPTS_REASON
from tests.support.saver_helpers import FailingBlobs, HeadsWritten

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "judge",
    "boxing",
]


class Chat(TypedDict):
    messages: Annotated[list, add_messages]


def _text(turn: int, who: str, chars: int = 600) -> str:
    out, i = [], turn * 7 + len(who)
    while sum(len(w) + 1 for w in out) < chars:
        out.append(WORDS[(i * 31 + len(out) * 17) % len(WORDS)] + str((i + len(out)) % 97))
        i += 1
    return " ".join(out)


def _chat(saver: Any) -> Any:
    return answering_chat(saver, Chat, _text)


def _talk(graph: Any, turns: range, thread: str = "t") -> None:
    for turn in turns:
        graph.invoke({"messages": [HumanMessage(content=_text(turn, "me"), id=f"q{turn}")]}, cfg(thread))


def _payloads(store: StoreBase, heads: str = "heads/t/", channel: str | None = "messages") -> list[rec_io.Payload]:
    """Every stored value of ``channel`` (None: of every channel) in the heads under the prefix
    ``heads`` (every namespace of thread ``t`` by default) and in their segments."""
    tables = []
    for info in store.list(heads):
        head = rec_io.decode_head(store.get(info.key).body, key=info.key)
        tables.append(head.payloads)
        for ref in head.segments:
            key = keys.segment_key(head.thread_id, head.checkpoint_ns, ref.key)
            tables.append(rec_io.decode_segment(store.get(key).body, key=key).payloads)
    return [p for t in tables for chs in t.values() for ch, p in chs.items() if channel in (None, ch)]


def test_a_growing_list_writes_tails_and_reads_back_whole(store: StoreBase) -> None:
    spy = HeadsWritten(store)
    ours = _chat(ObjectStoreSaver(spy))
    _talk(ours, range(1, 41))  # about 48 KiB of messages: past the 32 KiB base minimum
    spy.heads.clear()
    _talk(ours, range(41, 61))
    puts = [len(body) for body in spy.heads]
    stored = _payloads(store)
    assert any(isinstance(p, rec_io.Tail) for p in stored)
    latest = ours.get_state(cfg()).values["messages"]
    whole = len(ObjectStoreSaver(MemoryStore()).serde.dumps_typed(latest)[1])
    # each head written holds a few tails, not the whole conversation again
    assert puts and max(puts) < whole / 2, (max(puts), whole)

    reference = _chat(InMemorySaver())
    _talk(reference, range(1, 61))
    cold = _chat(ObjectStoreSaver(store))  # nothing cached: every base comes from the store
    assert history(cold) == history(reference)
    assert verify_store(ObjectStoreSaver(store)).problems == []


def test_tails_never_stack_and_rebase_when_long(monkeypatch: pytest.MonkeyPatch, store: StoreBase) -> None:
    monkeypatch.setattr(writing, "TAIL_REBASE_MIN", 4096)
    monkeypatch.setattr(writing, "TAIL_REBASE_DIV", 64)
    saver = ObjectStoreSaver(store, layout=Layout(tail_min_base=4096))
    graph = _chat(saver)
    _talk(graph, range(1, 31))
    stored = _payloads(store)
    found = [p for p in stored if isinstance(p, rec_io.Tail)]
    bases = {p.base_ref() for p in found}
    assert len(bases) > 2  # rebased several times
    for base, digest in bases:
        blob = store.get(keys.blob_key("t", "", base, digest))
        assert blob is not None
        body = rec_io.decode_blob(blob.body, key="b")
        assert tails.array_header(body) is not None  # a whole value: never a tail of a tail
    assert all(len(p.data) <= max(4096, p.base_size // 64) for p in found)
    # another process goes on with the thread: it reads the base it needs, then writes tails
    _talk(_chat(ObjectStoreSaver(store, layout=Layout(tail_min_base=4096))), range(31, 36))
    reference = _chat(InMemorySaver())
    _talk(reference, range(1, 36))
    assert history(_chat(ObjectStoreSaver(store))) == history(reference)


def test_a_head_over_a_tail_keeps_few_records(store: StoreBase) -> None:
    """Each put rewrites the head; one whose latest checkpoint holds a tail seals its older
    records once it holds more than ``TAIL_HEAD_RECORDS``, however small they are (issue 26:
    it carried a whole rebase's records, most of what a turn wrote at turn 50)."""
    spy = HeadsWritten(store)
    saver = ObjectStoreSaver(spy, layout=Layout(tail_min_base=1024))
    _talk(_chat(saver), range(1, 21))
    tailed = 0
    for body in spy.heads:
        head = rec_io.decode_head(body, key="h")
        latest = head.records[max(head.records)]
        if any(isinstance(p, rec_io.Tail) for p in head.payloads.get(latest.id, {}).values()):
            tailed += 1
            assert len(head.records) <= writing.TAIL_HEAD_RECORDS, len(head.records)
    assert tailed > 20
    assert len(rec_io.decode_head(spy.heads[-1], key="h").segments) >= 3
    reference = _chat(InMemorySaver())
    _talk(reference, range(1, 21))
    assert history(_chat(ObjectStoreSaver(store))) == history(reference)


def test_a_list_changed_in_place_is_stored_whole() -> None:
    store = MemoryStore()
    graph = _chat(ObjectStoreSaver(store, layout=Layout(tail_min_base=1024)))
    _talk(graph, range(1, 6))
    graph.update_state(cfg(), {"messages": [RemoveMessage(id="q2")]})
    graph.update_state(cfg(), {"messages": [HumanMessage(content="edited", id="q3")]})
    _talk(graph, range(6, 8))
    values = _chat(ObjectStoreSaver(store)).get_state(cfg()).values["messages"]
    assert [m.id for m in values][:4] == ["q1", "a1", "a2", "q3"] and values[3].content == "edited"
    reference = _chat(InMemorySaver())
    _talk(reference, range(1, 6))
    reference.update_state(cfg(), {"messages": [RemoveMessage(id="q2")]})
    reference.update_state(cfg(), {"messages": [HumanMessage(content="edited", id="q3")]})
    _talk(reference, range(6, 8))
    assert history(_chat(ObjectStoreSaver(store))) == history(reference)


def test_the_base_is_stored_before_the_head_that_needs_it() -> None:
    """A put whose base blob cannot be written fails before its head moves: the thread stays at
    the checkpoint before, whole, and the next attempt goes through."""
    store = FailingBlobs()
    store.fail = False
    graph = _chat(ObjectStoreSaver(store, layout=Layout(tail_min_base=1024)))
    _talk(graph, range(1, 2))  # two messages, about 1.3 KB: the next put is a tail over them
    before = history(_chat(ObjectStoreSaver(store)))
    store.fail = True
    with pytest.raises(StoreUnavailableError):
        _talk(graph, range(2, 3))
    after = history(_chat(ObjectStoreSaver(store)))  # newest first
    assert after[-len(before) :] == before  # (the input checkpoint of turn 2 was stored)
    assert all(m.id != "q2" for _, values in after for m in values.get("messages", []))
    assert all(not isinstance(p, rec_io.Tail) for p in _payloads(store))
    store.fail = False
    _talk(graph, range(2, 8))
    assert any(isinstance(p, rec_io.Tail) for p in _payloads(store))
    reads = _chat(ObjectStoreSaver(store)).get_state(cfg()).values["messages"]
    assert [m.id for m in reads] == [f"{who}{turn}" for turn in range(1, 8) for who in "qa"]


def test_prune_copy_and_delete_keep_the_base_a_tail_needs(store: StoreBase) -> None:
    saver = ObjectStoreSaver(store, layout=Layout(tail_min_base=2048))
    graph = _chat(saver)
    _talk(graph, range(1, 12))
    assert any(isinstance(p, rec_io.Tail) for p in _payloads(store))
    # prune drops the base's owner checkpoint; the latest's tail still needs it
    check_copy_prune_delete(store, saver, _chat)


def test_migrate_rewrites_a_thread_with_tails_losslessly(store: StoreBase) -> None:
    from langgraph_handoff.migrations import SchemaMigrations

    layout = Layout(tail_min_base=2048)
    _talk(_chat(ObjectStoreSaver(store, layout=layout)), range(1, 12))
    migrations = SchemaMigrations()

    @migrations.register(1, "mark the first message")
    def _mark(values: dict, metadata: dict) -> None:
        if values.get("messages"):
            first = values["messages"][0]
            values["messages"] = [first.model_copy(update={"content": first.content + "!"}), *values["messages"][1:]]

    want = history(_chat(ObjectStoreSaver(store, layout=layout, migrations=migrations)))  # upgraded on read
    assert want[0][1]["messages"][0].content.endswith("!")
    summary = ObjectStoreSaver(store, layout=layout, migrations=migrations).migrate()
    assert [r.status for r in summary.results] == ["migrated"], summary
    assert history(_chat(ObjectStoreSaver(store, layout=layout, migrations=migrations))) == want
    assert verify_store(ObjectStoreSaver(store, migrations=migrations)).problems == []


def test_a_tail_round_trips_through_a_head() -> None:
    tail = rec_io.Tail("msgpack", "1f0c0001-aaaa-6bbb-8ccc-000000000001", "d" * 32, 40_000, 12, 14, b"\x92\xa1a\xa1b")
    head = rec_io.Head("t", "", {}, {"1f0c0002-aaaa-6bbb-8ccc-000000000002": {"messages": tail}})
    back = rec_io.decode_head(rec_io.encode_head(head), key="h")
    assert back.payloads == {"1f0c0002-aaaa-6bbb-8ccc-000000000002": {"messages": tail}}


def test_graph_scenarios_match_inmemory_with_every_list_a_tail(store: StoreBase) -> None:
    """LangGraph's own behaviours (interrupts, subgraphs, time travel, forks, retries) with a
    layout that stores every value that only appended as a tail, however small."""
    from tests.support.graph_scenarios import check_runs_match_inmemory

    check_runs_match_inmemory(ObjectStoreSaver(store, layout=Layout(tail_min_base=1)))
    assert _holds_a_tail(store)


@pytest.mark.skipif(not ASYNC_INTERRUPTS, reason=ASYNC_INTERRUPTS_REASON)
def test_async_graph_scenarios_match_inmemory_with_every_list_a_tail(store: StoreBase) -> None:
    """... and the async ones (their interrupt scenario needs Python 3.11)."""
    from tests.support.graph_scenarios import acheck_runs_match_inmemory, run_async

    run_async(acheck_runs_match_inmemory(ObjectStoreSaver(store, layout=Layout(tail_min_base=1))))
    assert _holds_a_tail(store)


def _holds_a_tail(store: StoreBase) -> bool:
    return any(isinstance(p, rec_io.Tail) for p in _payloads(store, "heads/", channel=None))


def test_migrate_knows_which_bytes_a_tail_holds() -> None:
    """``migrate`` reuses a stored payload only when it holds exactly the bytes of the upgraded
    value; for a tail that means its items and the digest of the base it was written over."""
    import msgpack

    from langgraph_handoff.checkpoint.plans.blobs import content_digest
    from langgraph_handoff.checkpoint.plans.migrate import _holds

    base, grown = msgpack.packb(list(range(20))), msgpack.packb(list(range(23)))
    count, tail = tails.split(base, grown) or (0, b"")
    stored = rec_io.Tail("msgpack", "c1", content_digest(base), len(base), 20, count, tail)
    assert _holds(stored, ("msgpack", grown))
    assert not _holds(stored, ("json", grown))
    assert not _holds(stored, ("msgpack", msgpack.packb([*range(19), 99, 20, 21, 22])))  # base differs
    assert not _holds(stored, ("msgpack", msgpack.packb(list(range(24)))))


class _OwnLoads(JsonPlusSerializer):
    """LangGraph's serializer with ``loads_typed`` overridden: a tail is then decoded joined."""

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return super().loads_typed(data)


def test_a_tail_reads_as_a_copy_of_its_decoded_base_plus_its_own_items(
    store: StoreBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26: every read of a plain list decoded the whole list, its base included (a
    2,000-message ``get_state`` took 14 ms, as on SQLite). The base is decoded once per process
    and read back as a copy of its own; only the tail's items are decoded. The values must be
    what decoding the joined bytes gives, and a change to one read must not reach the next."""
    ours = _chat(ObjectStoreSaver(store))
    turns = 40
    _talk(ours, range(1, turns + 1))
    while not isinstance(_latest_payload(store), rec_io.Tail):  # a turn after a rebase
        turns += 1
        assert turns < 80, "the latest value never became a tail"
        _talk(ours, range(turns, turns + 1))
    over_copies: list[bool] = []
    real = reading._tail_over_copy

    def spy(*args: Any) -> Any:
        value = real(*args)
        over_copies.append(value is not MISS)
        return value

    monkeypatch.setattr(reading, "_tail_over_copy", spy)
    first = ours.get_state(cfg()).values["messages"]
    second = ours.get_state(cfg()).values["messages"]
    assert over_copies and all(over_copies), over_copies
    joined = _chat(ObjectStoreSaver(store, serde=_OwnLoads())).get_state(cfg()).values["messages"]
    assert first == second == joined and len(first) == 2 * turns
    second[0].content = "changed in place"
    second.append(HumanMessage(content="appended in place"))
    third = ours.get_state(cfg()).values["messages"]
    assert third == first and third[0].content != "changed in place"
    reference = _chat(InMemorySaver())
    _talk(reference, range(1, turns + 1))
    assert history(ours) == history(reference)


def _latest_payload(store: StoreBase) -> rec_io.Payload | None:
    head = rec_io.decode_head(store.get(keys.head_key("t", "")).body, key="h")
    assert head.latest is not None
    origin, _v = head.latest.values["messages"]
    return head.payloads.get(origin, {}).get("messages")
