"""The semantic index of ``ObjectStoreMemory``: its configuration, what to embed, the vectors'
stored form and cosine ranking. No I/O.

Configured as LangGraph's own stores are (``IndexConfig``: ``embed``, ``dims``, ``fields``), and
through LangGraph's public helpers (``ensure_embeddings``, ``tokenize_path``,
``get_text_at_path``), so a field path, a wrapped function or a ``"provider:model"`` string
means here what it means for ``InMemoryStore`` or ``PostgresStore``.

Vectors are stored as float32 (4 bytes a number: a 384-dimensional vector is 1.5 KB) in the
item's body. Ranking uses numpy when it is importable (it is not a dependency of this package) and
plain Python otherwise; both compute one score per vector as its own dot product, so equal vectors
always get equal scores (BLAS matrix products do not promise that across rows).

>>> settings = parse_index({"dims": 2, "embed": lambda texts: [[1.0, 0.0] for _ in texts], "fields": ["text"]})
>>> texts_of({"text": "hi", "other": "x"}, settings.fields)
[('text', 'hi')]
>>> VectorTable([(2, 2, pack_vectors([[0.0, 1.0], [3.0, 0.0]], 2)), None], 2).scores([1.0, 0.0])
[1.0, None]
"""

from __future__ import annotations

import array
import importlib.util
import math
import operator
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import ensure_embeddings, get_text_at_path, tokenize_path

from langgraph_handoff.errors import InvalidConfigError, InvalidInputError

__all__ = [
    "IndexSettings",
    "VectorTable",
    "Vectors",
    "check_put_index",
    "check_vectors",
    "numpy_available",
    "pack_vectors",
    "parse_index",
    "texts_of",
]

_KNOWN = {"dims", "embed", "fields"}
#: the ``embed`` strings that mean the ``[e5]`` extra (langgraph_handoff.memory.e5)
E5_NAMES = ("e5", "e5:multilingual-e5-small")


def numpy_available() -> bool:
    """Whether ranking can use numpy (installed with the ``[e5]`` extra, not required)."""
    return importlib.util.find_spec("numpy") is not None


@dataclass(frozen=True)
class IndexSettings:
    """A checked ``IndexConfig``: the embeddings, their dimension and the fields to embed."""

    #: what ``ObjectStoreMemory.index_config`` shows: the caller's dict, as given
    config: dict[str, Any]
    embeddings: Embeddings
    dims: int
    #: ``(path, tokens)``; ``"$"`` (the whole value) has no tokens
    fields: tuple[tuple[str, Any], ...]


def _fields(fields: Any, what: str, error: type[InvalidInputError]) -> tuple[tuple[str, Any], ...]:
    if not isinstance(fields, list | tuple) or not all(isinstance(f, str) and f for f in fields):
        raise error(
            f"{what} must be a list of JSON paths such as ['text'], ['a.b'] or ['items[*].x'] ('$' for the "
            f"whole value), got {fields!r}"
        )
    return tuple((f, f if f == "$" else tokenize_path(f)) for f in fields)


def resolve_embed(embed: Any) -> Embeddings:
    """An ``Embeddings`` from what ``IndexConfig.embed`` accepts, plus this package's offline
    encoder: an ``E5Encoder`` or the string ``"e5:multilingual-e5-small"``."""
    from langgraph_handoff.memory.e5 import E5Embeddings, is_e5_encoder

    if isinstance(embed, str) and embed.strip().lower() in E5_NAMES:
        return E5Embeddings()
    if is_e5_encoder(embed):
        return E5Embeddings(embed)
    if embed is None or not (isinstance(embed, str | Embeddings) or callable(embed)):
        raise InvalidConfigError(
            "index['embed'] must be a LangChain Embeddings, a function of a list of texts (sync or async), "
            f"a 'provider:model' string or 'e5:multilingual-e5-small', got {type(embed).__name__}"
        )
    try:
        return ensure_embeddings(embed)
    except (ValueError, ImportError) as exc:
        raise InvalidConfigError(f"index['embed']={embed!r} cannot be loaded: {exc}") from None


def parse_index(index: Any) -> IndexSettings | None:
    """Check an ``IndexConfig`` now, not at the first put: the typed error names what to fix."""
    if index is None:
        return None
    if not isinstance(index, dict):
        raise InvalidConfigError(
            f"index must be an IndexConfig dict such as {{'embed': ..., 'dims': 384, 'fields': ['text']}}, "
            f"got {type(index).__name__}"
        )
    unknown = sorted(set(index) - _KNOWN)
    if unknown:
        raise InvalidConfigError(f"unknown index keys {unknown}: use embed, dims and fields")
    if "embed" not in index:
        raise InvalidConfigError("index needs 'embed' (an Embeddings, a function or 'provider:model')")
    dims = index.get("dims")
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise InvalidConfigError(f"index['dims'] must be the positive int the embedder returns, got {dims!r}")
    fields = _fields(index.get("fields") or ["$"], "index['fields']", InvalidConfigError)
    return IndexSettings(config=index, embeddings=resolve_embed(index["embed"]), dims=dims, fields=fields)


def check_put_index(index: Any) -> tuple[tuple[str, Any], ...] | None:
    """A put's ``index=``: None (the configured fields), False (no vectors) or a list of paths."""
    if index is None or index is False:
        return None
    return _fields(index, "put(index=...)", InvalidInputError)


def texts_of(value: dict[str, Any], fields: Sequence[tuple[str, Any]]) -> list[tuple[str, str]]:
    """``(path, text)`` to embed for one value; a path that finds several texts (``a[*].b``)
    names each ``path.i``, as LangGraph's ``InMemoryStore`` does."""
    out: list[tuple[str, str]] = []
    for path, tokens in fields:
        texts = get_text_at_path(value, tokens)
        if len(texts) == 1:
            out.append((path, texts[0]))
        else:
            out.extend((f"{path}.{i}", text) for i, text in enumerate(texts))
    return out


def check_vectors(vectors: Any, count: int, dims: int, what: str) -> list[Any]:
    """The embedder's answer, refused with a typed error unless it is ``count`` vectors of ``dims``."""
    try:
        listed: list[Any] = list(vectors)
        lengths = {len(v) for v in listed}
    except TypeError:
        raise InvalidConfigError(
            f"the index's embedder returned {type(vectors).__name__} for {what}, not vectors"
        ) from None
    if len(listed) != count:
        raise InvalidConfigError(f"the index's embedder returned {len(listed)} vectors for {count} texts ({what})")
    if lengths - {dims}:
        raise InvalidConfigError(
            f"index dims is {dims} but the embedder returned vectors of {sorted(lengths)[0] if len(lengths) == 1 else sorted(lengths)} "
            f"numbers ({what}): set index['dims'] to the model's dimension, or use a model of {dims}"
        )
    return listed


def pack_vectors(vectors: Sequence[Any], dims: int) -> bytes:
    """Vectors as float32, little-endian, one after another."""
    out = array.array("f")
    for v in vectors:
        if hasattr(v, "astype"):  # a numpy row (the e5 encoder's)
            out.frombytes(v.astype("<f4").tobytes())
        else:
            out.extend(float(x) for x in v)
    if sys.byteorder == "big":
        out.byteswap()
    return out.tobytes()


def _floats(data: bytes | memoryview) -> array.array[float]:
    out = array.array("f")
    out.frombytes(data)
    if sys.byteorder == "big":
        out.byteswap()
    return out


Vectors = tuple[int, int, bytes | memoryview]
"""An item's vectors as stored: ``(dims, how many, float32 little-endian bytes)``."""


class VectorTable:
    """The vectors of many items, ready to be scored against queries (built once, kept by the
    in-process cache while those items do not change). Numpy when importable, else plain Python.

    >>> table = VectorTable([(2, 2, pack_vectors([[0.0, 1.0], [3.0, 0.0]], 2)), None, (3, 1, b"")], 2)
    >>> table.scores([1.0, 0.0])
    [1.0, None, None]
    """

    def __init__(self, vectors: Sequence[Vectors | None], dims: int) -> None:
        self.size = len(vectors)
        #: positions of the items with vectors of this dimension (others score None)
        self.usable = [i for i, v in enumerate(vectors) if v is not None and v[0] == dims and v[1] > 0]
        self._numpy = numpy_available()
        self._rows: Any
        if self._numpy:
            import numpy as np

            blob = b"".join(vectors[i][2] for i in self.usable)  # type: ignore[index]
            matrix = np.frombuffer(blob, dtype="<f4").reshape(-1, dims).astype(np.float32)
            norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))[:, None]
            self._rows = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
            counts = np.fromiter((vectors[i][1] for i in self.usable), dtype=np.int64, count=len(self.usable))  # type: ignore[index]
            self._starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
        else:
            rows = []
            for i in self.usable:
                _, count, data = vectors[i]  # type: ignore[misc]
                floats = _floats(data)
                units = []
                for r in range(count):
                    row = floats[r * dims : (r + 1) * dims]
                    norm = math.sqrt(sum(x * x for x in row))
                    units.append([x / norm for x in row] if norm > 0 else None)
                rows.append(units)
            self._rows = rows

    def scores(self, query: Sequence[float]) -> list[float | None]:
        """For each item, the best cosine of the query with any of its vectors (a zero vector
        scores 0); None for an item without vectors."""
        out: list[float | None] = [None] * self.size
        if not self.usable:
            return out
        if self._numpy:
            import numpy as np

            q = np.asarray(query, dtype=np.float32)
            qn = float(np.sqrt(np.einsum("i,i->", q, q)))
            if qn > 0:
                # einsum, row by row: equal vectors get equal scores (a BLAS product does not promise it)
                best = np.maximum.reduceat(np.einsum("ij,j->i", self._rows, q / qn), self._starts).tolist()
            else:
                best = [0.0] * len(self.usable)
        else:
            qf = [float(x) for x in query]
            qn = math.sqrt(sum(x * x for x in qf))
            unit = [x / qn for x in qf] if qn > 0 else None
            best = [
                max(
                    (sum(map(operator.mul, unit, row)) if unit is not None and row is not None else 0.0)
                    for row in units
                )
                for units in self._rows
            ]
        for i, s in zip(self.usable, best, strict=True):
            out[i] = float(s)
        return out


@dataclass
class EmbedPlan:
    """What one batch of operations needs embedded: the texts of its puts and its queries. Built
    before any I/O, run by ``batch`` (sync) or ``abatch`` (awaiting an async embedder on the event
    loop), so both drive the same store code with the vectors already in hand."""

    settings: IndexSettings
    #: operation index -> ``[(path, text)]``
    puts: dict[int, list[tuple[str, str]]]
    #: operation index -> query text
    queries: dict[int, str]

    @classmethod
    def of(cls, settings: IndexSettings | None, ops: Sequence[Any]) -> EmbedPlan | None:
        from langgraph.store.base import PutOp, SearchOp

        if settings is None:
            return None
        puts: dict[int, list[tuple[str, str]]] = {}
        queries: dict[int, str] = {}
        for i, op in enumerate(ops):
            if isinstance(op, PutOp) and isinstance(op.value, dict) and op.index is not False:
                fields = settings.fields if op.index is None else check_put_index(op.index) or ()
                puts[i] = texts_of(op.value, fields)
            elif isinstance(op, SearchOp) and op.query:
                if not isinstance(op.query, str):
                    raise InvalidInputError(f"a search query is a string, got {type(op.query).__name__}")
                queries[i] = op.query
        if not any(puts.values()) and not queries:
            return None
        return cls(settings, puts, queries)

    def _texts(self) -> list[str]:
        return list(dict.fromkeys(t for pairs in self.puts.values() for _, t in pairs))

    def _done(self, texts: list[str], docs: Any, queries: dict[str, Any]) -> dict[int, Any]:
        dims = self.settings.dims
        by_text = dict(zip(texts, check_vectors(docs, len(texts), dims, "put"), strict=True))
        out: dict[int, Any] = {}
        for i, pairs in self.puts.items():
            if pairs:
                out[i] = {
                    "dims": dims,
                    "paths": [p for p, _ in pairs],
                    "data": pack_vectors([by_text[t] for _, t in pairs], dims),
                }
        for i, q in self.queries.items():
            out[i] = check_vectors([queries[q]], 1, dims, "search query")[0]
        return out

    def run(self) -> dict[int, Any]:
        """Operation index -> the ``vectors`` field of a put's item, or a search's query vector."""
        emb = self.settings.embeddings
        texts = self._texts()
        docs = emb.embed_documents(texts) if texts else []
        queries = {q: emb.embed_query(q) for q in dict.fromkeys(self.queries.values())}
        return self._done(texts, docs, queries)

    async def arun(self) -> dict[int, Any]:
        import asyncio

        emb = self.settings.embeddings
        texts = self._texts()
        wanted = list(dict.fromkeys(self.queries.values()))
        answers = await asyncio.gather(
            emb.aembed_documents(texts) if texts else _nothing(), *(emb.aembed_query(q) for q in wanted)
        )
        return self._done(texts, answers[0], dict(zip(wanted, answers[1:], strict=True)))


async def _nothing() -> list[Any]:
    return []
