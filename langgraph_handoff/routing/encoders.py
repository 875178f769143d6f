"""Encoders turn text into vectors the semantic router compares.

- :class:`CharNgramEncoder` is the default: TF-IDF over character n-grams, fitted on the routes'
  own examples. No model, no download, no numpy; it works in any language that has examples
  (the survey in ``shared/reference/handoff-survey.md`` and our ``bench/routing.py`` measured it).
- Any LangChain ``Embeddings`` works as well (a local model, or a provider's API).
- :func:`wordllama_embeddings` loads the ``wordllama`` model that ships inside its wheel, offline.

The router needs only two things from an encoder: vectors for the route examples, and a vector
for a query, compared by cosine. Sparse vectors (dicts) and dense ones (float lists) are both fine.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from langchain_core.embeddings import Embeddings

from langgraph_handoff.errors import InvalidRouteError
from langgraph_handoff.routing.text import char_ngrams, normalize

SparseVector = dict[str, float]
Vector = Any  # SparseVector, a dense list[float], or a Combined tuple of those


@runtime_checkable
class FittedEncoder(Protocol):
    """An encoder whose vector space is learned from the route examples (e.g. TF-IDF)."""

    def fit(self, texts: Sequence[str]) -> None: ...

    def encode(self, texts: Sequence[str]) -> list[SparseVector]: ...


class CharNgramEncoder:
    """TF-IDF over character n-grams, L2-normalised, sparse: 3-5 grams inside words, 1-2 grams
    for Chinese/Japanese/Korean (chosen on ``bench/routing.py``; see :func:`char_ngrams`).

    ``unknown="penalize"`` (the default) counts the query's n-grams that never occur in any example
    at the highest IDF when normalising, so a query made mostly of unseen text (off-topic) scores
    low instead of being judged only on the few n-grams it happens to share. ``"ignore"`` drops
    them, as scikit-learn's ``TfidfVectorizer`` does.

    >>> enc = CharNgramEncoder()
    >>> enc.fit(["where is my order", "reset my password"])
    >>> a, b = enc.encode(["where's my order?", "password reset"])
    >>> cosine(a, enc.encode(["where is my order"])[0]) > cosine(b, enc.encode(["where is my order"])[0])
    True
    """

    def __init__(
        self,
        ngram_range: tuple[int, int] = (3, 5),
        *,
        cjk_range: tuple[int, int] = (1, 2),
        unknown: str = "penalize",
        sublinear_tf: bool = True,
    ):
        if ngram_range[0] < 1 or ngram_range[1] < ngram_range[0]:
            raise InvalidRouteError(f"ngram_range must be (low, high) with 1 <= low <= high, got {ngram_range!r}")
        if unknown not in ("penalize", "ignore"):
            raise InvalidRouteError(f"unknown must be 'penalize' or 'ignore', got {unknown!r}")
        self.ngram_range = ngram_range
        self.cjk_range = cjk_range
        self.unknown = unknown
        self.sublinear_tf = sublinear_tf
        self._idf: dict[str, float] = {}
        self._max_idf = 1.0

    def __repr__(self) -> str:
        return f"CharNgramEncoder(ngram_range={self.ngram_range}, cjk_range={self.cjk_range}, unknown={self.unknown!r})"

    def fit(self, texts: Sequence[str]) -> None:
        """Learn the IDF of every n-gram in ``texts`` (smoothed: ``ln((1+N)/(1+df)) + 1``)."""
        n = len(texts)
        df: Counter[str] = Counter()
        for text in texts:
            df.update(set(self._grams(text)))
        self._idf = {g: math.log((1 + n) / (1 + c)) + 1.0 for g, c in df.items()}
        self._max_idf = math.log(1 + n) + 1.0

    def encode(self, texts: Sequence[str]) -> list[SparseVector]:
        """Sparse unit vectors; call :meth:`fit` first (the router does)."""
        return [self._encode_one(t) for t in texts]

    def _grams(self, text: str) -> list[str]:
        return char_ngrams(normalize(text), *self.ngram_range, cjk=self.cjk_range)

    def _encode_one(self, text: str) -> SparseVector:
        counts = Counter(self._grams(text))
        vec: SparseVector = {}
        unknown_sq = 0.0
        for gram, count in counts.items():
            tf = 1.0 + math.log(count) if self.sublinear_tf else float(count)
            idf = self._idf.get(gram)
            if idf is None:
                if self.unknown == "penalize":
                    unknown_sq += (tf * self._max_idf) ** 2
                continue
            vec[gram] = tf * idf
        norm = math.sqrt(sum(v * v for v in vec.values()) + unknown_sq)
        if norm == 0.0:
            return {}
        return {g: v / norm for g, v in vec.items()}


def cosine(a: Vector, b: Vector) -> float:
    """Cosine similarity of two vectors of the same kind (sparse dicts or dense lists).

    Sparse vectors from :class:`CharNgramEncoder` are already unit length; dense vectors are
    normalised here.

    >>> round(cosine([1.0, 0.0], [1.0, 1.0]), 3)
    0.707
    >>> cosine({"ab": 1.0}, {"cd": 1.0})
    0.0
    """
    if isinstance(a, Combined) and isinstance(b, Combined):
        return sum(w * cosine(x, y) for w, x, y in zip(a.weights, a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        if len(a) > len(b):
            a, b = b, a
        return float(sum(v * b.get(k, 0.0) for k, v in a.items()))
    if isinstance(a, dict) or isinstance(b, dict):
        raise InvalidRouteError("cannot compare a sparse vector with a dense one: use one encoder for both")
    if hasattr(a, "dtype") and hasattr(b, "dtype"):  # numpy arrays (E5Encoder): one C loop, not 384 Python ones
        if a.shape != b.shape:
            raise InvalidRouteError(
                f"vectors of different sizes ({a.shape} and {b.shape}): use one encoder for the index and queries"
            )
        den = math.sqrt(float(a @ a) * float(b @ b))
        return float(a @ b) / den if den else 0.0
    if len(a) != len(b):
        raise InvalidRouteError(
            f"vectors of different sizes ({len(a)} and {len(b)}): use one encoder for the index and queries"
        )
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


class EmbeddingsEncoder:
    """Adapts any LangChain ``Embeddings`` to the router (dense vectors, nothing to fit)."""

    def __init__(self, embeddings: Embeddings):
        self.embeddings = embeddings

    def __repr__(self) -> str:
        return f"EmbeddingsEncoder({type(self.embeddings).__name__})"

    def fit(self, texts: Sequence[str]) -> None:
        return None

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        return [list(v) for v in self.embeddings.embed_documents(list(texts))]

    def encode_query(self, text: str) -> list[float]:
        return list(self.embeddings.embed_query(text))

    async def aencode_query(self, text: str) -> list[float]:
        return list(await self.embeddings.aembed_query(text))


class CombinedEncoder:
    """Several encoders at once; the similarity is their weighted mean ("hybrid alpha").

    ``CombinedEncoder([CharNgramEncoder(), WordLlamaEmbeddings()], weights=[0.5, 0.5])`` mixes
    character overlap (any language with examples) with a word-embedding model's notion of
    meaning. Each part is compared with its own kind, so sparse and dense parts mix freely.
    """

    top_k: int | None = None  # the scoring a SemanticRouter uses with this encoder unless told otherwise

    def __init__(self, encoders: Sequence[Any], weights: Sequence[float] | None = None, *, top_k: int | None = None):
        self.top_k = top_k
        if not encoders:
            raise InvalidRouteError("CombinedEncoder needs at least one encoder")
        self.parts = [as_encoder(e) for e in encoders]
        w = list(weights) if weights is not None else [1.0] * len(self.parts)
        if len(w) != len(self.parts) or any(x < 0 for x in w) or sum(w) <= 0:
            raise InvalidRouteError(
                f"weights must be {len(self.parts)} non-negative numbers with a positive sum, got {w}"
            )
        self.weights = [x / sum(w) for x in w]

    def __repr__(self) -> str:
        extra = f", top_k={self.top_k}" if self.top_k is not None else ""
        return f"CombinedEncoder({self.parts!r}, weights={[round(w, 4) for w in self.weights]}{extra})"

    def fit(self, texts: Sequence[str]) -> None:
        for part in self.parts:
            part.fit(texts)

    def encode(self, texts: Sequence[str]) -> list[Any]:
        columns = [part.encode(texts) for part in self.parts]
        return [Combined(tuple(col[i] for col in columns), self.weights) for i in range(len(texts))]


class Combined(tuple):  # type: ignore[type-arg]
    """A vector made of one vector per part of a :class:`CombinedEncoder`."""

    weights: list[float]

    def __new__(cls, parts: tuple[Any, ...], weights: list[float]) -> Combined:
        obj = super().__new__(cls, parts)
        obj.weights = weights
        return obj


def as_encoder(encoder: Any) -> Any:
    """Accept ``None`` (the default TF-IDF encoder), one of ours, or a LangChain ``Embeddings``."""
    if encoder is None:
        return CharNgramEncoder()
    if isinstance(encoder, Embeddings):
        return EmbeddingsEncoder(encoder)
    if hasattr(encoder, "fit") and hasattr(encoder, "encode"):
        return encoder
    raise InvalidRouteError(
        f"encoder must be None, a CharNgramEncoder or a LangChain Embeddings, got {type(encoder).__name__}"
    )


class WordLlamaEmbeddings(Embeddings):
    """LangChain ``Embeddings`` over ``wordllama``'s bundled 256-d model; fully offline.

    Install with ``pip install 'langgraph-handoff[wordllama]'``. The weights ship inside the
    wheel, but ``WordLlama.load(disable_download=True)`` looks for the tokenizer in the wrong
    folder, so we point ``cache_dir`` at the package itself (the workaround the survey found).
    It is English-centric: measure it on your languages before choosing it.
    """

    def __init__(self, dim: int = 256) -> None:
        try:
            import wordllama
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise InvalidRouteError("wordllama is not installed: pip install 'langgraph-handoff[wordllama]'") from exc
        self._model = wordllama.WordLlama.load(
            cache_dir=Path(wordllama.__file__).parent, disable_download=True, dim=dim
        )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, row)) for row in self._model.embed(list(texts), norm=True)]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def wordllama_embeddings(dim: int = 256) -> WordLlamaEmbeddings:
    """Shortcut for :class:`WordLlamaEmbeddings` (offline, weights bundled in the wheel)."""
    return WordLlamaEmbeddings(dim=dim)


def iter_texts(routes: Iterable[Any]) -> list[str]:
    """Every example of every route, in order (what an encoder is fitted on)."""
    return [ex for r in routes for ex in r.examples]
