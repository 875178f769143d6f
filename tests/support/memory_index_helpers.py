"""The memory index's test embedder and its race, written once and run on the offline stores
(tests/memory/test_memory_index.py, threads) and on the real S3 server
(integration_tests/test_s3_memory_index.py, processes).

The embedder is a hashed bag of words: cheap, deterministic in every process, and different texts
get different vectors, so a search result's score says which text its vector came from. That is
what the race checks: every result's score must be the cosine of the query with the result's own
value, never with another version of the item.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.embeddings import Embeddings

from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.stores.base import StoreBase
from langgraph_handoff.stores.urls import store_from_url

DIMS = 16
NS = ("race", "ns")


def embed_one(text: str) -> list[float]:
    vec = [0.0] * DIMS
    for word in text.lower().split():
        vec[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % DIMS] += 1.0
    return vec


class WordEmbeddings(Embeddings):
    """Hashed bag of words; counts its calls and texts (what a put or search embedded)."""

    def __init__(self) -> None:
        self.calls = 0
        self.texts: list[str] = []
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.calls += 1
            self.texts += texts
        return [embed_one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb) if na and nb else 0.0


def index(fields: list[str] | None = None) -> dict[str, Any]:
    return {"embed": WordEmbeddings(), "dims": DIMS, "fields": fields or ["text"]}


def misattributed(query: str, results: list[Any]) -> list[str]:
    """The results whose score is not the cosine of ``query`` with their own value's text."""
    q = embed_one(query)
    return [
        f"{r.key}: score {r.score} for {r.value['text']!r}, expected {cosine(q, embed_one(r.value['text']))}"
        for r in results
        if r.score is None or abs(r.score - cosine(q, embed_one(r.value["text"]))) > 1e-5
    ]


def race_member(spec: StoreBase | str, role: str, me: int, rounds: int, keys: int, barrier: Any, out: Any) -> None:
    """One racer: a writer puts every key once a round (its own text: ``w{me} r{round} k{key}``);
    a searcher searches once a round while they write, with a query that matches some round's
    texts best, and once more after the last round, with everything written. Both have a memory
    of their own (their own cache, as another worker's). A round starts for everyone at once
    (``barrier``); the searcher puts ``(final, query, [(key, value, score)])`` on ``out``."""
    store = store_from_url(spec) if isinstance(spec, str) else spec
    memory = ObjectStoreMemory(store, index=index())
    try:
        for r in range(rounds):
            barrier.wait(timeout=120)
            if role == "writer":
                for k in range(keys):
                    memory.put(NS, f"k{k}", {"text": f"w{me} r{r} k{k}", "writer": me})
            else:
                query = f"w{(me + r) % 3} r{r}"
                found = memory.search(NS, query=query, limit=2 * keys)
                out.put((False, query, [(i.key, i.value, i.score) for i in found]))
            barrier.wait(timeout=120)
        if role != "writer":  # every write has landed: what this (warm) searcher sees now is final
            found = memory.search(NS, query="k1 r0", limit=2 * keys)
            out.put((True, "k1 r0", [(i.key, i.value, i.score) for i in found]))
    finally:
        if isinstance(spec, str):
            store.close()
