"""ObjectStoreMemory's semantic index: configuration, per-item control, ranking, what overwrites,
deletes and TTL do to vectors, packs, request counts, and a race of writers and searchers."""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

from langgraph_handoff._format import envelope, keys
from langgraph_handoff._format.envelope import Kind
from langgraph_handoff.errors import InvalidConfigError, InvalidInputError
from langgraph_handoff.memory import ObjectStoreMemory, packs
from langgraph_handoff.memory import index as index_module
from langgraph_handoff.memory.items import unpack
from langgraph_handoff.stores import CountingStore, MemoryStore, StoreBase
from tests.support.memory_index_helpers import (
    DIMS,
    NS,
    WordEmbeddings,
    cosine,
    embed_one,
    index,
    misattributed,
    race_member,
)
from tests.support.sweep_helpers import Clock


@pytest.fixture
def memory(store: StoreBase) -> ObjectStoreMemory:
    return ObjectStoreMemory(store, index=index())


def stored_vectors(memory: ObjectStoreMemory, ns: tuple[str, ...], key: str) -> dict[str, Any] | None:
    """The ``vectors`` field of the item's object as stored."""
    obj = memory.store.get(keys.memory_item_key(ns, key))
    assert obj is not None
    return unpack(obj.key, envelope.decode(obj.body, key=obj.key, expect=Kind.MEMORY).body).get("vectors")


def pack_contents(store: StoreBase, ns: tuple[str, ...]) -> dict[str, list[str]]:
    """Each pack of a namespace: the item texts it holds."""
    out = {}
    for info in store.list(keys.memory_namespace_prefix(ns) + keys.MEMORY_PACKS + "/"):
        obj = store.get(info.key)
        assert obj is not None
        out[info.key] = sorted(unpack(s, raw)["value"]["text"] for s, _, raw in packs.decode_pack(obj.body, obj.key))
    return out


# -- configuration ---------------------------------------------------------------------------------


def test_configuration_is_checked_at_once_with_typed_errors() -> None:
    emb = WordEmbeddings()
    good = ObjectStoreMemory(MemoryStore(), index={"embed": emb, "dims": DIMS, "fields": ["text"]})
    assert good.index_config is not None and good.index_config["embed"] is emb and good.embeddings is emb
    assert ObjectStoreMemory(MemoryStore()).index_config is None
    for bad, match in [
        ({"embed": emb, "dims": DIMS, "fields": "text"}, "must be a list of JSON paths"),
        ({"embed": emb, "dims": "16"}, "dims"),
        ({"embed": emb, "dims": 0}, "dims"),
        ({"dims": 3}, "needs 'embed'"),
        ({"embed": emb, "dims": 3, "field": ["a"]}, "unknown index keys"),
        ({"embed": 42, "dims": 3}, "must be a LangChain Embeddings"),
        ({"embed": "nonexistent-provider:model", "dims": 3}, "cannot be loaded"),
        (["embed"], "IndexConfig dict"),
    ]:
        with pytest.raises(InvalidConfigError, match=match):
            ObjectStoreMemory(MemoryStore(), index=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="dims"):
        ObjectStoreMemory.from_url("memory://", index={"embed": emb, "dims": -1})


def test_functions_sync_and_async_and_from_url() -> None:
    def sync_embed(texts: list[str]) -> list[list[float]]:
        return [embed_one(t) for t in texts]

    memory = ObjectStoreMemory.from_url("memory://", index={"embed": sync_embed, "dims": DIMS, "fields": ["text"]})
    memory.put(NS, "a", {"text": "red apple"})
    assert memory.search(NS, query="red apple")[0].score == pytest.approx(1.0)

    async def async_embed(texts: list[str]) -> list[list[float]]:
        return [embed_one(t) for t in texts]

    amemory = ObjectStoreMemory.from_url("memory://", index={"embed": async_embed, "dims": DIMS, "fields": ["text"]})

    async def main() -> list[Any]:  # an async-only embedder works through the async API
        await amemory.aput(NS, "a", {"text": "red apple"})
        await amemory.aput(NS, "b", {"text": "blue car"})
        return await amemory.asearch(NS, query="blue car")

    assert [(r.key, round(r.score, 4)) for r in asyncio.run(main())] == [("b", 1.0), ("a", 0.0)]


def test_dims_mismatch_is_a_typed_error_on_put_and_on_search() -> None:
    memory = ObjectStoreMemory(MemoryStore(), index={"embed": WordEmbeddings(), "dims": DIMS + 1})
    with pytest.raises(
        InvalidConfigError, match=rf"index dims is {DIMS + 1} but the embedder returned vectors of {DIMS}"
    ):
        memory.put(NS, "a", {"text": "x"})
    assert memory.get(NS, "a") is None  # nothing stored
    with pytest.raises(InvalidConfigError, match=r"set index\[.dims.\]"):
        memory.search(NS, query="x")

    class Short(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0] * DIMS]  # one vector whatever the number of texts

        def embed_query(self, text: str) -> list[float]:
            return [1.0] * DIMS

    short = ObjectStoreMemory(MemoryStore(), index={"embed": Short(), "dims": DIMS, "fields": ["a", "b"]})
    with pytest.raises(InvalidConfigError, match="returned 1 vectors for 2 texts"):
        short.put(NS, "k", {"a": "x", "b": "y"})


def test_put_index_must_be_false_or_a_list_of_paths(memory: ObjectStoreMemory) -> None:
    with pytest.raises(InvalidInputError, match=r"put\(index=\.\.\.\) must be a list of JSON paths"):
        memory.put(NS, "k", {"text": "x"}, index="text")  # type: ignore[arg-type]
    plain = ObjectStoreMemory(MemoryStore())  # without an index, index= is ignored, as LangGraph documents
    plain.put(NS, "k", {"text": "x"}, index=["text"])
    assert stored_vectors(plain, NS, "k") is None


# -- ranking ---------------------------------------------------------------------------------------


def test_ranking_scores_filter_and_pages(memory: ObjectStoreMemory) -> None:
    texts = {"a": "red apple pie", "b": "red car", "c": "green apple", "d": "blue car wash", "e": "apple"}
    for k, t in texts.items():
        memory.put(NS, k, {"text": t, "color": t.split()[0]})
    q = embed_one("apple pie")
    expected = sorted(texts, key=lambda k: -cosine(q, embed_one(texts[k])))
    found = memory.search(NS, query="apple pie", limit=10)
    assert [r.key for r in found] == expected
    assert [r.score for r in found] == pytest.approx([cosine(q, embed_one(texts[k])) for k in expected], abs=1e-6)
    assert not misattributed("apple pie", found)
    pages = [r.key for o in range(0, 5, 2) for r in memory.search(NS, query="apple pie", limit=2, offset=o)]
    assert pages == expected
    red = memory.search(NS, query="apple pie", filter={"color": "red"})
    assert [r.key for r in red] == [k for k in expected if texts[k].startswith("red")]
    assert memory.search(NS, query="apple", filter={"color": {"$ne": "red"}}, limit=1)[0].key == "e"
    assert [r.score for r in memory.search(NS)] == [None] * 5  # no query: newest first, unscored


def test_namespaces_under_a_prefix_hashed_segments_and_listing(memory: ObjectStoreMemory) -> None:
    long = ("users", "x" * 300)  # a segment too long for a key: hashed, the real one in the item
    memory.put(long, "a", {"text": "apple pie"})
    memory.put(("users", "b"), "a", {"text": "apple"})
    memory.put(("users", "b", "deeper"), "a", {"text": "pie"})
    memory.put(("orgs", "c"), "a", {"text": "apple pie"})
    found = memory.search(("users",), query="apple pie")
    assert [(r.namespace, round(r.score, 4)) for r in found] == [  # type: ignore[arg-type]
        (long, 1.0),
        *sorted(((("users", "b"), round(cosine(embed_one("apple pie"), embed_one("apple")), 4)),
                 (("users", "b", "deeper"), round(cosine(embed_one("apple pie"), embed_one("pie")), 4))),
                key=lambda t: -t[1]),
    ]  # fmt: skip
    assert len([i for i in memory.store.list(keys.MEMORY_ROOT) if "/=p/" in i.key]) == 3  # one per namespace
    assert memory.list_namespaces() == sorted([long, ("users", "b"), ("users", "b", "deeper"), ("orgs", "c")])
    top = memory.search((), query="apple pie", limit=2)  # a tie at 1.0: listing order
    assert [(r.namespace, round(r.score, 4)) for r in top] == [(("orgs", "c"), 1.0), (long, 1.0)]  # type: ignore[arg-type]


def test_the_same_vector_gets_the_same_score_wherever_it_is() -> None:
    """LangGraph's test_embed_with_path asserts equal scores for equal texts in two items; a BLAS
    matrix product gives rows in different blocks different roundings, so scoring is row by row."""
    memory = ObjectStoreMemory(MemoryStore(), index=index())
    for i in range(40):
        memory.put(NS, f"k{i:02d}", {"text": "same words here"})
    scores = {r.score for r in memory.search(NS, query="same words", limit=40)}
    assert len(scores) == 1


def test_pure_python_ranking_matches_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numpy")
    texts = [f"word{i % 7} word{i % 5} thing{i % 3}" for i in range(30)]
    vectors = [(DIMS, 1, index_module.pack_vectors([embed_one(t)], DIMS)) for t in texts]
    vectors.append((DIMS, 2, index_module.pack_vectors([[0.0] * DIMS, embed_one("word1")], DIMS)))
    vectors.append(None)
    with_numpy = index_module.VectorTable(vectors, DIMS).scores(embed_one("word1 thing2"))
    monkeypatch.setattr(index_module, "numpy_available", lambda: False)
    without = index_module.VectorTable(vectors, DIMS).scores(embed_one("word1 thing2"))
    assert without[-1] is None and with_numpy[-1] is None
    assert without[:-1] == pytest.approx(with_numpy[:-1], abs=1e-6)
    assert without[-2] == pytest.approx(cosine(embed_one("word1 thing2"), embed_one("word1")))  # zero vector: 0


def test_per_item_index_false_and_fields(memory: ObjectStoreMemory) -> None:
    memory.put(NS, "plain", {"text": "apple"}, index=False)
    memory.put(NS, "title", {"text": "zebra", "title": "apple"}, index=["title"])
    memory.put(NS, "many", {"text": "x", "parts": [{"p": "car"}, {"p": "apple tree"}]}, index=["parts[*].p"])
    memory.put(NS, "other", {"text": "car"})
    assert stored_vectors(memory, NS, "plain") is None
    assert stored_vectors(memory, NS, "title")["paths"] == ["title"]  # type: ignore[index]
    assert stored_vectors(memory, NS, "many")["paths"] == ["parts[*].p.0", "parts[*].p.1"]  # type: ignore[index]
    found = memory.search(NS, query="apple")
    assert [(r.key, None if r.score is None else round(r.score, 3)) for r in found] == [
        ("title", 1.0),
        ("many", round(cosine(embed_one("apple"), embed_one("apple tree")), 3)),  # its best vector
        ("other", 0.0),
        ("plain", None),  # no vectors: after the scored items, as InMemoryStore returns it
    ]
    assert [r.key for r in memory.search(NS, query="apple", limit=3)] == ["title", "many", "other"]


# -- versions: overwrite, delete, TTL --------------------------------------------------------------


def test_an_overwrite_replaces_the_vectors_and_a_delete_removes_them(memory: ObjectStoreMemory) -> None:
    memory.put(NS, "doc", {"text": "zany zebra"})
    memory.put(NS, "other", {"text": "dogs"})
    assert memory.search(NS, query="zany zebra")[0].score == pytest.approx(1.0)
    memory.put(NS, "doc", {"text": "dogs and cats"})
    after = {r.key: r.score for r in memory.search(NS, query="zany zebra")}
    expected = cosine(embed_one("zany zebra"), embed_one("dogs and cats"))
    assert after["doc"] == pytest.approx(expected, abs=1e-6) and expected < 0.5  # the new text's vector
    assert pack_contents(memory.store, NS) and all(
        "zany zebra" not in texts for texts in pack_contents(memory.store, NS).values()
    )  # the search rebuilt the pack: the old version is in no object any more
    memory.put(NS, "doc", {"text": "no vectors now"}, index=False)
    assert stored_vectors(memory, NS, "doc") is None
    assert {r.key: r.score for r in memory.search(NS, query="dogs")} == {"other": pytest.approx(1.0), "doc": None}
    memory.delete(NS, "doc")
    assert list(pack_contents(memory.store, NS).values()) == [["dogs"]]  # purged by the delete itself
    assert [r.key for r in memory.search(NS, query="no vectors now")] == ["other"]


def test_ttl_hides_expired_items_from_ranking_and_the_sweep_removes_their_vectors() -> None:
    clock = Clock()
    memory = ObjectStoreMemory(MemoryStore(), index=index(), ttl={"default_ttl": 10}, clock=clock)
    memory.put(NS, "short", {"text": "apple"}, ttl=2)
    memory.put(NS, "long", {"text": "apple pie"})
    assert [r.key for r in memory.search(NS, query="apple")] == ["short", "long"]
    clock.advance(3)
    assert [r.key for r in memory.search(NS, query="apple", refresh_ttl=False)] == ["long"]
    assert sorted(t for texts in pack_contents(memory.store, NS).values() for t in texts) == ["apple", "apple pie"]
    assert memory.sweep_ttl() == 1
    assert list(pack_contents(memory.store, NS).values()) == [["apple pie"]]


def test_a_refresh_on_read_keeps_the_vectors() -> None:
    clock = Clock()
    memory = ObjectStoreMemory(MemoryStore(), index=index(), ttl={"default_ttl": 10}, clock=clock)
    memory.put(NS, "k", {"text": "apple pie"})
    before = stored_vectors(memory, NS, "k")
    clock.advance(5)
    assert memory.search(NS, query="apple pie")[0].score == pytest.approx(1.0)  # re-stamped: 5 of 10 minutes used
    clock.advance(8)  # 13 minutes after the put, 8 after the refresh
    assert memory.get(NS, "k", refresh_ttl=False) is not None
    assert stored_vectors(memory, NS, "k") == before
    assert ObjectStoreMemory(memory.store, index=index()).search(NS, query="apple pie")[0].score == pytest.approx(1.0)


async def test_async_twins(memory: ObjectStoreMemory) -> None:
    await memory.aput(NS, "a", {"text": "red apple"})
    await memory.aput(NS, "b", {"text": "blue car"}, index=False)
    await memory.aput(NS, "c", {"text": "x", "title": "blue car"}, index=["title"])
    found = await memory.asearch(NS, query="blue car", filter={"text": {"$ne": "red apple"}})
    assert [(r.key, None if r.score is None else round(r.score, 4)) for r in found] == [("c", 1.0), ("b", None)]
    await memory.adelete(NS, "c")
    assert [r.key for r in await memory.asearch(NS, query="blue car")] == ["a", "b"]


# -- packs and request counts ----------------------------------------------------------------------


def test_request_counts_of_put_and_search() -> None:
    store = CountingStore(MemoryStore())
    memory = ObjectStoreMemory(store, index=index())
    for i in range(100):
        memory.put(NS, f"k{i}", {"text": f"note {i}"})
    store.reset()
    memory.put(NS, "k0", {"text": "note zero"})
    assert store.snapshot() == {"GET": 1, "PUT": 1, "requests": 2, "round_trips": 2}  # as without an index

    other = ObjectStoreMemory(store, index=index())  # another worker: nothing cached
    store.reset()
    assert len(other.search(NS, query="note", limit=5)) == 5
    # the listing, 100 GETs in two rounds of 64, then the pack that saves the next reader those GETs
    assert store.snapshot() == {"LIST": 1, "GET": 100, "PUT": 1, "requests": 102, "round_trips": 4}
    store.reset()
    other.search(NS, query="note 7")
    assert store.snapshot() == {"LIST": 1, "requests": 1, "round_trips": 1}  # all cached at their ETags

    third = ObjectStoreMemory(store, index=index())
    store.reset()
    assert not misattributed("note 7", third.search(NS, query="note 7", limit=100))
    assert store.snapshot() == {"LIST": 1, "GET": 1, "requests": 2, "round_trips": 2}  # the pack answers all

    memory.put(NS, "k5", {"text": "note five"})  # another worker writes one item
    store.reset()
    found = {r.key: r for r in third.search(NS, query="note five", limit=100)}
    assert found["k5"].value == {"text": "note five"} and found["k5"].score == pytest.approx(1.0)
    # that item read by itself (fewer than PACK_READ_MIN unknown), its bucket's pack rebuilt
    assert store.snapshot() == {"LIST": 1, "GET": 1, "PUT": 1, "DELETE_MANY": 1, "requests": 4, "round_trips": 4}


def test_request_counts_of_delete() -> None:
    store = CountingStore(MemoryStore())
    memory = ObjectStoreMemory(store, index=index())
    for i in range(10):
        memory.put(NS, f"k{i}", {"text": f"note {i}"})
    store.reset()
    memory.delete(NS, "k0")  # no packs yet: the delete and a look for packs
    assert store.snapshot() == {"DELETE": 1, "LIST": 1, "requests": 2, "round_trips": 2}
    memory.search(NS, query="note")
    store.reset()
    memory.delete(NS, "k1")  # the pack that held it is read, replaced by one without it, deleted
    assert store.snapshot() == {"DELETE": 2, "LIST": 1, "GET": 1, "PUT": 1, "requests": 5, "round_trips": 5}
    assert sorted(t for texts in pack_contents(store, NS).values() for t in texts) == [
        f"note {i}" for i in range(2, 10)
    ]
    store.reset()
    memory.search(NS, query="note")
    assert store.snapshot() == {"LIST": 1, "requests": 1, "round_trips": 1}  # the purged pack is current


def test_large_namespaces_split_into_buckets_and_rebuild_only_what_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packs, "PACK_TARGET", 8)
    monkeypatch.setattr(packs, "PACK_MAX", 16)
    store = CountingStore(MemoryStore())
    memory = ObjectStoreMemory(store, index=index())
    for i in range(100):
        memory.put(NS, f"k{i}", {"text": f"note {i}"})
    memory.search(NS, query="note")
    names = [keys.parse_memory_pack_key(i.key) for i in store.list(keys.MEMORY_ROOT) if "/=p/" in i.key]
    assert {n[1] for n in names} == {3} and len(names) == 8  # type: ignore[index]  # 100 items: 8 buckets
    assert sum(n[3] for n in names) == 100  # type: ignore[index]

    cold = ObjectStoreMemory(store, index=index())
    store.reset()
    assert len(cold.search(NS, query="note 3", limit=100)) == 100
    assert store.snapshot() == {"LIST": 1, "GET": 8, "requests": 9, "round_trips": 2}  # one GET per pack

    memory.put(NS, "k3", {"text": "changed"})
    memory.put(NS, "new", {"text": "new one"})
    store.reset()
    cold.search(NS, query="note")
    rewritten = store.snapshot()["PUT"]
    assert 1 <= rewritten <= 2 and store.snapshot()["GET"] == 2  # the buckets of k3 and "new", no others


def test_a_damaged_pack_is_read_around_and_replaced(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    memory = ObjectStoreMemory(store, index=index())
    for i in range(20):
        memory.put(NS, f"k{i}", {"text": f"note {i}"})
    memory.search(NS, query="note")
    (pack,) = [i.key for i in store.list(keys.MEMORY_ROOT) if "/=p/" in i.key]
    store.put(pack, b"LGHO" + b"\0" * 40)  # damaged: header and checksum do not match
    cold = ObjectStoreMemory(store, index=index())
    assert len(cold.search(NS, query="note", limit=50)) == 20
    assert "damaged" in caplog.text
    (again,) = [i.key for i in store.list(keys.MEMORY_ROOT) if "/=p/" in i.key]
    assert len(pack_contents(store, NS)[again]) == 20  # rebuilt by the same search, whole


def test_a_pack_is_only_a_cache_of_versions_the_listing_names() -> None:
    """A pack written before an overwrite still holds the old body and vectors; a reader that
    has never seen the item must take the new version from the item itself."""
    store = MemoryStore()
    writer = ObjectStoreMemory(store, index=index())
    for i in range(20):
        writer.put(NS, f"k{i}", {"text": f"old text {i}"})
    writer.search(NS, query="old")  # packs the old versions
    packed = pack_contents(store, NS)
    ObjectStoreMemory(store, index=index()).put(NS, "k4", {"text": "brand new words"})
    assert pack_contents(store, NS) == packed  # a put never touches packs
    reader = ObjectStoreMemory(store, index=index())
    found = reader.search(NS, query="brand new words", limit=20)
    assert found[0].key == "k4" and found[0].value["text"] == "brand new words"
    assert not misattributed("brand new words", found)


def test_readonly_store_still_searches(caplog: pytest.LogCaptureFixture) -> None:
    from langgraph_handoff.errors import StoreError

    class NoPacks(MemoryStore):
        def put(self, key: str, body: bytes, **kwargs: Any) -> str:
            if "/=p/" in key:
                raise StoreError("AccessDenied")
            return super().put(key, body, **kwargs)

    memory = ObjectStoreMemory(NoPacks(), index=index())
    memory.put(NS, "a", {"text": "apple"})
    assert [r.key for r in memory.search(NS, query="apple")] == ["a"]
    assert "not updated" in caplog.text


def test_the_cache_is_bounded_and_stays_correct() -> None:
    store = MemoryStore()
    memory = ObjectStoreMemory(store, index=index(), cache_items=10)
    for n in range(4):
        for i in range(6):
            memory.put(("u", str(n)), f"k{i}", {"text": f"user {n} note {i}"})
    for n in range(4):
        found = memory.search(("u", str(n)), query=f"note {n}")
        assert len(found) == 6 and not misattributed(f"note {n}", found)
    held = sum(len(d.entries) for d in memory._cache._dirs.values())
    assert held <= 10 and held == memory._cache._held
    memory.delete(("u", "3"), "k0")
    assert sum(len(d.entries) for d in memory._cache._dirs.values()) == memory._cache._held == held - 1


# -- the race --------------------------------------------------------------------------------------


@pytest.mark.parametrize("rounds", [12])
def test_racing_writers_and_searchers_never_pair_a_value_with_anothers_vectors(store: StoreBase, rounds: int) -> None:
    """Three writers overwrite the same five keys every round while two searchers search (and
    rebuild packs), each with a memory (a cache) of its own, rounds started by a barrier. Every
    result of every search must carry the score of its own value; afterwards every reader, warm
    or cold, sees each key's current value with its own vectors."""
    writers, searchers, nkeys = 3, 2, 5
    barrier = threading.Barrier(writers + searchers)
    out: queue.Queue[Any] = queue.Queue()
    threads = [
        threading.Thread(target=race_member, args=(store, role, i, rounds, nkeys, barrier, out))
        for role, n in (("writer", writers), ("searcher", searchers))
        for i in range(n)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    current = {f"k{k}": ObjectStoreMemory(store).get(NS, f"k{k}").value for k in range(nkeys)}  # type: ignore[union-attr]
    seen = finals = 0
    while not out.empty():
        final, query, found = out.get()
        seen += len(found)
        assert not misattributed(query, [_Result(*f) for f in found])
        if final:
            finals += 1
            assert {k: v for k, v, _ in found} == current  # the searchers' caches hold no stale version
    assert seen >= rounds * searchers and finals == searchers  # each search found the keys written so far
    for reader in (ObjectStoreMemory(store, index=index()), ObjectStoreMemory(store, index=index())):
        for query in ("w0 r3", "w2 r11", "k4"):
            found = reader.search(NS, query=query, limit=10)
            assert {r.key: r.value for r in found} == current
            assert not misattributed(query, found)


class _Result:
    def __init__(self, key: str, value: dict[str, Any], score: float | None) -> None:
        self.key, self.value, self.score = key, value, score
